/* test_endpoint_stats.c - the endpoint statistics: exact counts, quantiles within 1 % of a
 * sorted reference, the window bound (memory flat once the window has passed), the per-minute
 * roll-up, and the histogram's storage encoding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "server/stats/endpoint_stats.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t ref_quantile(const uint64_t *sorted, size_t n, double q)
{
    double r = q * (double)n;
    size_t rank = (size_t)r;
    if ((double)rank < r)
        rank++;
    if (rank == 0)
        rank = 1;
    return sorted[rank - 1];
}

static void assert_within_1pct(uint64_t got, uint64_t want)
{
    double d = got > want ? (double)(got - want) : (double)(want - got);
    if (d > 0.01 * (double)want + 1e-9) {
        fail_msg("quantile %llu vs reference %llu", (unsigned long long)got,
                 (unsigned long long)want);
    }
}

/* xorshift: reproducible values without the C library's rand state */
static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void buckets_are_monotonic_and_tight(void **state)
{
    (void)state;
    uint64_t prev = 0;
    for (size_t i = 1; i < ES_HIST_BUCKETS; i++) {
        uint64_t lo = es_bucket_lo(i);
        assert_true(lo > prev);
        assert_int_equal(es_bucket_of(lo), i);
        assert_int_equal(es_bucket_of(lo - 1), i - 1);
        uint64_t mid = es_bucket_mid(i);
        assert_int_equal(es_bucket_of(mid), i);
        prev = lo;
    }
    for (uint64_t v = 0; v < 128; v++)
        assert_int_equal(es_bucket_mid(es_bucket_of(v)), v); /* exact below 128 ms */
    assert_int_equal(es_bucket_of(UINT64_MAX), es_bucket_of(UINT32_MAX));
    assert_true(es_bucket_of(UINT32_MAX) < ES_HIST_BUCKETS);
}

static void quantiles_within_1pct_of_sorted_reference(void **state)
{
    (void)state;
    enum { N = 20000 };
    static uint64_t v[N];
    uint64_t seed = 88172645463325252ull;
    const double qs[] = {0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0};
    for (int dist = 0; dist < 3; dist++) {
        struct es_hist h = {0};
        for (size_t i = 0; i < N; i++) {
            uint64_t r = rnd(&seed);
            if (dist == 0)
                v[i] = r % 100000; /* uniform 0..100 s */
            else if (dist == 1)
                v[i] = (uint64_t)1 << (r % 30) | (r >> 40) % 1000; /* log spread */
            else
                v[i] = 40 + (r % 5 == 0 ? 3000 + r % 200 : r % 20); /* bimodal */
            assert_int_equal(es_hist_add(&h, v[i], 1, NULL), SKP_OK);
        }
        qsort(v, N, sizeof(v[0]), cmp_u64);
        assert_int_equal(h.total, N);
        for (size_t k = 0; k < sizeof(qs) / sizeof(qs[0]); k++)
            assert_within_1pct(es_hist_quantile(&h, qs[k]), ref_quantile(v, N, qs[k]));
        es_hist_cleanup(&h);
    }
}

static void encoding_round_trips_and_rejects_garbage(void **state)
{
    (void)state;
    struct es_hist h = {0}, back = {0};
    uint64_t vals[] = {0, 1, 127, 128, 5000, 5001, 1u << 30};
    for (size_t i = 0; i < 7; i++)
        assert_int_equal(es_hist_add(&h, vals[i], (uint32_t)i + 1, NULL), SKP_OK);
    uint8_t buf[128];
    assert_true(es_hist_encoded_max(&h) <= sizeof(buf));
    size_t len = es_hist_encode(&h, buf);
    assert_int_equal(es_hist_decode(buf, len, &back), SKP_OK);
    assert_int_equal(back.n, h.n);
    assert_int_equal(back.total, h.total);
    assert_memory_equal(back.b, h.b, h.n * sizeof(*h.b));
    es_hist_cleanup(&back);
    uint8_t bad1[] = {0x80};             /* truncated varint */
    uint8_t bad2[] = {0x05, 0x00};       /* zero count */
    uint8_t bad3[] = {0xff, 0x7f, 0x01}; /* index out of range */
    assert_int_equal(es_hist_decode(bad1, 1, &back), SKP_EINVAL);
    assert_int_equal(es_hist_decode(bad2, 2, &back), SKP_EINVAL);
    assert_int_equal(es_hist_decode(bad3, 3, &back), SKP_EINVAL);
    es_hist_cleanup(&h);
}

struct seen {
    size_t n;
    char ep[32][32];
    uint64_t count[32], errors[32], p50[32], p99[32];
    size_t n_inst[32];
    size_t n_points[32];
    uint64_t point_count[32][16];
};

static skp_err seen_cb(void *ud, const struct es_summary *s)
{
    struct seen *v = ud;
    assert_true(v->n < 32);
    size_t i = v->n++;
    snprintf(v->ep[i], 32, "%s", s->endpoint);
    v->count[i] = s->count;
    v->errors[i] = s->errors;
    v->p50[i] = s->p50_ms;
    v->p99[i] = s->p99_ms;
    v->n_inst[i] = s->n_instances;
    v->n_points[i] = s->n_points;
    for (size_t k = 0; k < s->n_points && k < 16; k++)
        v->point_count[i][k] = s->points[k].count;
    return SKP_OK;
}

static void counts_are_exact_per_endpoint_and_minute(void **state)
{
    (void)state;
    struct endpoint_stats *es = NULL;
    assert_int_equal(endpoint_stats_new(NULL, &es), SKP_OK);
    const int64_t t0 = 1700000000000 / 60000 * 60000; /* a minute boundary */
    const int64_t now = t0 + 5 * 60000 + 30000;
    /* /a: 3 minutes x 100 requests on two instances, every 10th an error */
    for (int m = 0; m < 3; m++)
        for (int i = 0; i < 100; i++)
            assert_int_equal(endpoint_stats_record(es, "svc", i % 2 ? "i1" : "i2", "/a",
                                                   t0 + (3 + m) * 60000 - 60000 + i * 100, 10 + i,
                                                   i % 10 == 0, now),
                             SKP_OK);
    assert_int_equal(endpoint_stats_record(es, "svc", "i1", "/b", now - 1000, 7, false, now),
                     SKP_OK);
    assert_int_equal(endpoint_stats_record(es, "other", "i1", "/a", now, 7, false, now), SKP_OK);
    /* older than the window: dropped and counted */
    assert_int_equal(endpoint_stats_record(es, "svc", "i1", "/a", now - 16 * 60000, 1, false, now),
                     SKP_OK);
    struct seen s = {0};
    assert_int_equal(endpoint_stats_query(es, "svc", 900, now, seen_cb, &s), SKP_OK);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.ep[0], "/a");
    assert_int_equal(s.count[0], 300);
    assert_int_equal(s.errors[0], 30);
    assert_int_equal(s.n_inst[0], 2);
    assert_int_equal(s.n_points[0], 15);
    assert_int_equal(s.point_count[0][15 - 1 - 5 + 2], 100); /* minute t0+2min */
    assert_int_equal(s.point_count[0][15 - 1 - 5 + 4], 100);
    assert_int_equal(s.point_count[0][14], 0);
    assert_within_1pct(s.p50[0], 59); /* latencies 10..109, each minute the same */
    assert_within_1pct(s.p99[0], 108);
    assert_string_equal(s.ep[1], "/b");
    assert_int_equal(s.count[1], 1);
    /* a 1-minute window sees only the current minute */
    memset(&s, 0, sizeof(s));
    assert_int_equal(endpoint_stats_query(es, "svc", 60, now, seen_cb, &s), SKP_OK);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.ep[0], "/b");
    uint64_t c, e;
    endpoint_stats_rate(es, "svc", "/b", 10, now, &c, &e);
    assert_int_equal(c, 1);
    struct endpoint_stats_counters k;
    endpoint_stats_counters(es, &k);
    assert_int_equal(k.recorded, 302);
    assert_int_equal(k.dropped_late, 1);
    assert_int_equal(k.keys, 4);
    endpoint_stats_free(es);
}

struct flushed {
    size_t rows;
    uint64_t count;
    int fail;
};

static skp_err flush_cb(void *ud, const struct es_minute_row *rows, size_t n)
{
    struct flushed *f = ud;
    if (f->fail)
        return SKP_EIO;
    f->rows += n;
    for (size_t i = 0; i < n; i++) {
        f->count += rows[i].count;
        assert_int_equal(rows[i].hist->total, rows[i].count);
    }
    return SKP_OK;
}

static void flush_hands_each_finished_minute_once(void **state)
{
    (void)state;
    struct endpoint_stats *es = NULL;
    assert_int_equal(endpoint_stats_new(NULL, &es), SKP_OK);
    const int64_t t0 = 1700000000000 / 60000 * 60000;
    for (int i = 0; i < 50; i++)
        assert_int_equal(
            endpoint_stats_record(es, "s", "i", "/e", t0 + i * 1000, i, false, t0 + 60000), SKP_OK);
    struct flushed f = {.fail = 1};
    /* the current minute (t0+1min) is not finished; t0's minute is, after the grace */
    assert_int_equal(endpoint_stats_flush(es, t0 + 60000 + 5000, 10000, flush_cb, &f), SKP_OK);
    assert_int_equal(f.rows, 0);
    assert_int_equal(endpoint_stats_flush(es, t0 + 60000 + 10000, 10000, flush_cb, &f), SKP_EIO);
    f.fail = 0;
    assert_int_equal(endpoint_stats_flush(es, t0 + 60000 + 10000, 10000, flush_cb, &f), SKP_OK);
    assert_int_equal(f.rows, 1);
    assert_int_equal(f.count, 50);
    assert_int_equal(endpoint_stats_flush(es, t0 + 60000 + 20000, 10000, flush_cb, &f), SKP_OK);
    assert_int_equal(f.rows, 1); /* clean: not again */
    /* a late request of that minute makes it dirty again */
    assert_int_equal(endpoint_stats_record(es, "s", "i", "/e", t0 + 59000, 3, false, t0 + 70000),
                     SKP_OK);
    assert_int_equal(endpoint_stats_flush(es, t0 + 60000 + 20000, 10000, flush_cb, &f), SKP_OK);
    assert_int_equal(f.rows, 2);
    assert_int_equal(f.count, 50 + 51);
    endpoint_stats_free(es);
}

static void memory_is_flat_after_the_window(void **state)
{
    (void)state;
    struct endpoint_stats *es = NULL;
    struct endpoint_stats_opts o = {.window_min = 3};
    assert_int_equal(endpoint_stats_new(&o, &es), SKP_OK);
    const int64_t t0 = 1700000000000 / 60000 * 60000;
    uint64_t seed = 12345;
    size_t bytes_at[12] = {0}, buckets_at[12] = {0};
    for (int m = 0; m < 12; m++) {
        for (int i = 0; i < 2000; i++) {
            int64_t t = t0 + m * 60000 + i * 30;
            char ep[16];
            snprintf(ep, sizeof(ep), "/e%d", i % 20);
            assert_int_equal(
                endpoint_stats_record(es, "s", "i", ep, t, (int64_t)(rnd(&seed) % 5000), false, t),
                SKP_OK);
        }
        struct endpoint_stats_counters k;
        endpoint_stats_counters(es, &k);
        bytes_at[m] = k.bytes;
        buckets_at[m] = k.buckets;
    }
    /* once window + 1 minutes have been filled, neither buckets nor bytes grow */
    for (int m = 5; m < 12; m++) {
        assert_true(bytes_at[m] <= bytes_at[4] + bytes_at[4] / 10);
        assert_true(buckets_at[m] <= buckets_at[4] + buckets_at[4] / 10);
    }
    struct seen s = {0};
    assert_int_equal(endpoint_stats_query(es, "s", 3600, t0 + 11 * 60000 + 59999, seen_cb, &s),
                     SKP_OK);
    assert_int_equal(s.n, 20);
    assert_int_equal(s.n_points[0], 3); /* capped at the window */
    assert_int_equal(s.count[0], 3 * 100);
    endpoint_stats_free(es);
}

static void bounds_drop_and_count(void **state)
{
    (void)state;
    struct endpoint_stats *es = NULL;
    struct endpoint_stats_opts o = {.max_keys = 3, .max_buckets = 10};
    assert_int_equal(endpoint_stats_new(&o, &es), SKP_OK);
    const int64_t now = 1700000000000;
    for (int i = 0; i < 5; i++) {
        char ep[16];
        snprintf(ep, sizeof(ep), "/k%d", i);
        assert_int_equal(endpoint_stats_record(es, "s", "i", ep, now, 1, false, now), SKP_OK);
    }
    for (int i = 0; i < 20; i++)
        assert_int_equal(endpoint_stats_record(es, "s", "i", "/k0", now, 200 + i * 50, false, now),
                         SKP_OK);
    struct endpoint_stats_counters k;
    endpoint_stats_counters(es, &k);
    assert_int_equal(k.keys, 3);
    assert_int_equal(k.dropped_keys, 2);
    assert_int_equal(k.buckets, 10);
    assert_int_equal(k.dropped_buckets, 20 - 7); /* 3 buckets went to /k0../k2's first value */
    struct seen s = {0};
    assert_int_equal(endpoint_stats_query(es, "s", 60, now, seen_cb, &s), SKP_OK);
    assert_int_equal(s.count[0], 21); /* counted even when its latency was not kept */
    endpoint_stats_free(es);
}

struct names {
    char name[8][16];
    size_t n;
};

static skp_err names_cb(void *ud, const struct es_summary *s)
{
    struct names *n = ud;
    if (n->n < 8)
        snprintf(n->name[n->n], sizeof(n->name[0]), "%s", s->endpoint);
    n->n++;
    return SKP_OK;
}

/* Issue 25 #3: a service's endpoints were unbounded (100k made a 111 MB listing built on the
 * loop). Now at most max_endpoints_per_service per service (other instances of a known endpoint
 * and other services still count), and a listing comes in pages. */
static void endpoints_per_service_capped_and_paged(void **state)
{
    (void)state;
    struct endpoint_stats *es = NULL;
    struct endpoint_stats_opts o = {.max_endpoints_per_service = 3};
    assert_int_equal(endpoint_stats_new(&o, &es), SKP_OK);
    const int64_t now = 1700000000000;
    for (int i = 0; i < 6; i++) {
        char ep[16];
        snprintf(ep, sizeof(ep), "/e%d", i);
        assert_int_equal(endpoint_stats_record(es, "s", "i1", ep, now, 5, false, now), SKP_OK);
        assert_int_equal(endpoint_stats_record(es, "s", "i2", ep, now, 5, false, now), SKP_OK);
    }
    assert_int_equal(endpoint_stats_record(es, "other", "i1", "/e5", now, 5, false, now), SKP_OK);
    struct endpoint_stats_counters k;
    endpoint_stats_counters(es, &k);
    assert_int_equal(k.keys, 3 * 2 + 1);          /* /e0../e2 on both instances + other's */
    assert_int_equal(k.dropped_endpoints, 3 * 2); /* /e3../e5 of s, each instance */
    struct names n = {0};
    bool more = true;
    assert_int_equal(endpoint_stats_query_page(es, "s", 60, now, NULL, 2, names_cb, &n, &more),
                     SKP_OK);
    assert_int_equal(n.n, 2);
    assert_string_equal(n.name[0], "/e0");
    assert_string_equal(n.name[1], "/e1");
    assert_true(more);
    memset(&n, 0, sizeof(n));
    assert_int_equal(endpoint_stats_query_page(es, "s", 60, now, "/e1", 2, names_cb, &n, &more),
                     SKP_OK);
    assert_int_equal(n.n, 1);
    assert_string_equal(n.name[0], "/e2");
    assert_false(more);
    endpoint_stats_free(es);
    /* The default cap. */
    assert_int_equal(endpoint_stats_new(NULL, &es), SKP_OK);
    for (int i = 0; i < ES_DEFAULT_MAX_ENDPOINTS_PER_SERVICE + 10; i++) {
        char ep[16];
        snprintf(ep, sizeof(ep), "/d%d", i);
        assert_int_equal(endpoint_stats_record(es, "s", "i", ep, now, 5, false, now), SKP_OK);
    }
    endpoint_stats_counters(es, &k);
    assert_int_equal(k.keys, ES_DEFAULT_MAX_ENDPOINTS_PER_SERVICE);
    assert_int_equal(k.dropped_endpoints, 10);
    endpoint_stats_free(es);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(buckets_are_monotonic_and_tight),
        cmocka_unit_test(quantiles_within_1pct_of_sorted_reference),
        cmocka_unit_test(encoding_round_trips_and_rejects_garbage),
        cmocka_unit_test(counts_are_exact_per_endpoint_and_minute),
        cmocka_unit_test(flush_hands_each_finished_minute_once),
        cmocka_unit_test(memory_is_flat_after_the_window),
        cmocka_unit_test(bounds_drop_and_count),
        cmocka_unit_test(endpoints_per_service_capped_and_paged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
