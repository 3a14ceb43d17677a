/* test_endpoint_partials.c - endpoint statistics merged from several collectors' stored
 * partials (issue 27): requests split over three endpoint_stats objects, each flushed into one
 * store under its own writer id (the current minute included, as on a shared database), give
 * through endpoint_partials_query_page exactly what one endpoint_stats holding every request
 * gives (counts, errors, instances, per-minute points, quantiles); pages; a malformed stored
 * histogram leaves out its row only. Real SQLite store (the query is the same on PostgreSQL,
 * where tests/integration/server/test_cluster.py runs it with three skyprofd). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../store/store_test_util.h"
#include "common/alloc.h"
#include "server/stats/endpoint_partials.h"
#include "server/stats/endpoint_stats.h"

#define NOW_MS 1700000000000LL /* fixed clock */
#define MAXS 8

struct put_ctx {
    struct store *st;
    uint64_t writer;
};

static skp_err put(void *ud, const struct es_minute_row *rows, size_t n)
{
    struct put_ctx *c = ud;
    struct store_endpoint_minute *v = skpx_calloc(n, sizeof(*v));
    uint8_t **blobs = skpx_calloc(n, sizeof(*blobs));
    assert_non_null(v);
    assert_non_null(blobs);
    for (size_t i = 0; i < n; i++) {
        blobs[i] = skpx_malloc(es_hist_encoded_max(rows[i].hist) + 1);
        assert_non_null(blobs[i]);
        v[i] = (struct store_endpoint_minute){.writer = c->writer,
                                              .service = rows[i].service,
                                              .instance = rows[i].instance,
                                              .endpoint = rows[i].endpoint,
                                              .minute_ms = rows[i].minute_ms,
                                              .count = rows[i].count,
                                              .errors = rows[i].errors,
                                              .hist = blobs[i],
                                              .hist_len = es_hist_encode(rows[i].hist, blobs[i])};
    }
    skp_err err = store_put_endpoint_minutes(c->st, v, n);
    for (size_t i = 0; i < n; i++)
        skpx_free(blobs[i]);
    skpx_free(blobs);
    skpx_free(v);
    return err;
}

/* What a query gave, copied. */
struct got {
    size_t n;
    char name[MAXS][32];
    struct es_summary s[MAXS];
    struct es_point pts[MAXS][15];
};

static skp_err keep(void *ud, const struct es_summary *s)
{
    struct got *g = ud;
    assert_true(g->n < MAXS);
    snprintf(g->name[g->n], sizeof(g->name[0]), "%s", s->endpoint);
    g->s[g->n] = *s;
    assert_true(s->n_points <= 15);
    memcpy(g->pts[g->n], s->points, s->n_points * sizeof(*s->points));
    g->n++;
    return SKP_OK;
}

static void record_all(struct endpoint_stats *part[3], struct endpoint_stats *all, int n)
{
    static const char *const eps[] = {"/a", "/b", "/c"};
    for (int i = 0; i < n; i++) {
        char inst[16];
        snprintf(inst, sizeof(inst), "i%d", i % 4);
        int64_t end = NOW_MS - (int64_t)(i % 200) * 1000; /* over 4 minutes */
        int64_t lat = 1 + (i * 37) % 997 + (i % 11) * 300;
        bool err = i % 9 == 0;
        assert_int_equal(endpoint_stats_record(part[i % 3], "svc", inst,
                                               eps[i % 3 == 0 ? i % 2 : i % 3], end, lat, err,
                                               NOW_MS),
                         SKP_OK);
        assert_int_equal(endpoint_stats_record(all, "svc", inst, eps[i % 3 == 0 ? i % 2 : i % 3],
                                               end, lat, err, NOW_MS),
                         SKP_OK);
    }
}

static void merged_equals_one_collector(void **state)
{
    struct fixture *f = *state;
    struct endpoint_stats *part[3], *all;
    for (int i = 0; i < 3; i++)
        assert_int_equal(endpoint_stats_new(NULL, &part[i]), SKP_OK);
    assert_int_equal(endpoint_stats_new(NULL, &all), SKP_OK);
    record_all(part, all, 3000);
    for (int i = 0; i < 3; i++) {
        struct put_ctx c = {f->st, 100 + (uint64_t)i};
        /* grace -1 min: the current minute too, as collectors on a shared database flush */
        assert_int_equal(endpoint_stats_flush(part[i], NOW_MS, -60000, put, &c), SKP_OK);
    }
    /* a later flush of a changed current minute replaces the writer's row (no double count) */
    assert_int_equal(endpoint_stats_record(part[0], "svc", "i0", "/a", NOW_MS, 5, false, NOW_MS),
                     SKP_OK);
    assert_int_equal(endpoint_stats_record(all, "svc", "i0", "/a", NOW_MS, 5, false, NOW_MS),
                     SKP_OK);
    struct put_ctx c0 = {f->st, 100};
    assert_int_equal(endpoint_stats_flush(part[0], NOW_MS, -60000, put, &c0), SKP_OK);

    struct got *want = skpx_calloc(1, sizeof(*want)), *got = skpx_calloc(1, sizeof(*got));
    assert_int_equal(endpoint_stats_query(all, "svc", 600, NOW_MS, keep, want), SKP_OK);
    bool more = true;
    assert_int_equal(
        endpoint_partials_query_page(f->st, "svc", 600, NOW_MS, NULL, 0, keep, got, &more), SKP_OK);
    assert_false(more);
    assert_int_equal(want->n, 3);
    assert_int_equal(got->n, want->n);
    uint64_t total = 0;
    for (size_t i = 0; i < want->n; i++) {
        const struct es_summary *w = &want->s[i], *g = &got->s[i];
        assert_string_equal(got->name[i], want->name[i]);
        assert_int_equal(g->count, w->count);
        assert_int_equal(g->errors, w->errors);
        assert_int_equal(g->n_instances, w->n_instances);
        /* same buckets: the merged quantiles are the single collector's, exactly */
        assert_int_equal(g->p50_ms, w->p50_ms);
        assert_int_equal(g->p90_ms, w->p90_ms);
        assert_int_equal(g->p99_ms, w->p99_ms);
        assert_int_equal(g->n_points, w->n_points);
        for (size_t k = 0; k < w->n_points; k++) {
            assert_int_equal(got->pts[i][k].minute_ms, want->pts[i][k].minute_ms);
            assert_int_equal(got->pts[i][k].count, want->pts[i][k].count);
            assert_int_equal(got->pts[i][k].errors, want->pts[i][k].errors);
            assert_int_equal(got->pts[i][k].p50_ms, want->pts[i][k].p50_ms);
            assert_int_equal(got->pts[i][k].p99_ms, want->pts[i][k].p99_ms);
        }
        assert_true(g->last_seen_ms <= NOW_MS && g->last_seen_ms > NOW_MS - 60000);
        total += g->count;
    }
    assert_int_equal(total, 3001);

    /* pages: limit 2, then after the last one */
    memset(got, 0, sizeof(*got));
    assert_int_equal(
        endpoint_partials_query_page(f->st, "svc", 600, NOW_MS, NULL, 2, keep, got, &more), SKP_OK);
    assert_true(more);
    assert_int_equal(got->n, 2);
    assert_string_equal(got->name[1], "/b");
    memset(got, 0, sizeof(*got));
    assert_int_equal(
        endpoint_partials_query_page(f->st, "svc", 600, NOW_MS, "/b", 2, keep, got, &more), SKP_OK);
    assert_false(more);
    assert_int_equal(got->n, 1);
    assert_string_equal(got->name[0], "/c");

    /* a short window: only the current minute */
    memset(got, 0, sizeof(*got));
    memset(want, 0, sizeof(*want));
    assert_int_equal(endpoint_stats_query(all, "svc", 30, NOW_MS, keep, want), SKP_OK);
    assert_int_equal(
        endpoint_partials_query_page(f->st, "svc", 30, NOW_MS, NULL, 0, keep, got, NULL), SKP_OK);
    assert_int_equal(got->n, want->n);
    for (size_t i = 0; i < want->n; i++)
        assert_int_equal(got->s[i].count, want->s[i].count);

    /* another service, and bad arguments */
    memset(got, 0, sizeof(*got));
    assert_int_equal(
        endpoint_partials_query_page(f->st, "none", 600, NOW_MS, NULL, 0, keep, got, NULL), SKP_OK);
    assert_int_equal(got->n, 0);
    assert_int_equal(
        endpoint_partials_query_page(f->st, "svc", 0, NOW_MS, NULL, 0, keep, got, NULL),
        SKP_EINVAL);
    assert_int_equal(
        endpoint_partials_query_page(f->st, NULL, 60, NOW_MS, NULL, 0, keep, got, NULL),
        SKP_EINVAL);
    skpx_free(want);
    skpx_free(got);
    for (int i = 0; i < 3; i++)
        endpoint_stats_free(part[i]);
    endpoint_stats_free(all);
}

static void malformed_histogram_row_left_out(void **state)
{
    struct fixture *f = *state;
    int64_t minute = NOW_MS / 60000 * 60000;
    static const uint8_t bad[] = {0x80}; /* a varint cut off */
    struct es_hist h = {0};
    assert_int_equal(es_hist_add(&h, 40, 3, NULL), SKP_OK);
    uint8_t good[16];
    size_t good_len = es_hist_encode(&h, good);
    es_hist_cleanup(&h);
    const struct store_endpoint_minute rows[] = {
        {.writer = 1,
         .service = "s",
         .instance = "i",
         .endpoint = "/x",
         .minute_ms = minute,
         .count = 3,
         .errors = 1,
         .hist = good,
         .hist_len = good_len},
        {.writer = 2,
         .service = "s",
         .instance = "i",
         .endpoint = "/x",
         .minute_ms = minute,
         .count = 5,
         .errors = 0,
         .hist = bad,
         .hist_len = sizeof(bad)},
    };
    assert_int_equal(store_put_endpoint_minutes(f->st, rows, 2), SKP_OK);
    struct got *got = skpx_calloc(1, sizeof(*got));
    assert_int_equal(endpoint_partials_query_page(f->st, "s", 60, NOW_MS, NULL, 0, keep, got, NULL),
                     SKP_OK);
    assert_int_equal(got->n, 1);
    assert_int_equal(got->s[0].count, 3);
    assert_int_equal(got->s[0].errors, 1);
    assert_int_equal(got->s[0].p50_ms, 40);
    skpx_free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(merged_equals_one_collector, setup, teardown),
        cmocka_unit_test_setup_teardown(malformed_histogram_row_left_out, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
