/* http_endpoint_stats.c - GET /api/v1/services/{name}/endpoints/stats?window=SECONDS: per
 * endpoint request count, error count and rate, p50/p90/p99 latency over the window, and one
 * point per minute (count, errors, p50, p99) for the UI's sparklines. Read from the collector's
 * in-memory statistics (endpoint_stats.h). A page is bounded (`limit`, at most STATS_PAGE_MAX
 * endpoints, `cursor` = the last endpoint sent, X-Next-Cursor when more follow), and so is a
 * service's number of endpoints (--max-endpoints-per-service).
 * Threads (issue 25): the statistics belong to the loop, so the loop copies the page's
 * summaries (plain numbers and names, bounded by the page) and a worker job builds and
 * serialises the JSON; the job never touches the statistics.
 * On a database server shared by several collectors (PostgreSQL) the worker instead merges the
 * partials every collector stored (stats/endpoint_partials.h), so each collector gives the
 * cluster's answer. */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/grow.h"
#include "server/stats/endpoint_partials.h"
#include "server/stats/endpoint_stats.h"
#include "server/http/http_int.h"
#include "server/formats/utf8.h"
#include "server/http/http_page.h"

#define STATS_DEFAULT_WINDOW_S 900
/* Endpoints per page: the default (the whole of a service under the default cap) and the most. */
#define STATS_PAGE_DEFAULT 1000
#define STATS_PAGE_MAX 1000

/* One endpoint of the page, copied out of the statistics on the loop. */
struct stats_row {
    struct es_summary sum; /* endpoint and points owned */
};

struct stats_job {
    struct http_job base;
    struct stats_row *rows;
    size_t n, cap;
    int window_s;
    int64_t now;
    bool more;
    bool merged;  /* read every collector's partials from the store (on the worker) */
    char *after;  /* merged: the cursor's endpoint, NULL = from the first */
    size_t limit; /* merged: the page size */
    char *service;
    char last[1024]; /* the last endpoint copied (names are cut at 512 bytes), the next cursor */
};

static void stats_destroy(struct http_job *j)
{
    struct stats_job *p = (struct stats_job *)j;
    for (size_t i = 0; i < p->n; i++) {
        skpx_free((char *)p->rows[i].sum.endpoint);
        skpx_free((struct es_point *)p->rows[i].sum.points);
    }
    SKPX_FREE_ALL(p->rows, p->after, p->service);
    http_response_cleanup(&j->res);
    skpx_free(p);
}

/* Loop thread: copies one summary of the page (at most STATS_PAGE_MAX are visited). */
static skp_err summary_copy(void *ud, const struct es_summary *s)
{
    struct stats_job *p = ud;
    if (skpx_grow(&p->rows, &p->cap, p->n + 1, sizeof(*p->rows), 64))
        return SKP_ENOMEM;
    struct es_summary c = *s;
    c.endpoint = skpx_strdup(s->endpoint ? s->endpoint : "");
    struct es_point *pts = s->n_points ? skpx_malloc(s->n_points * sizeof(*pts)) : NULL;
    if (!c.endpoint || (s->n_points && !pts)) {
        skpx_free((char *)c.endpoint);
        skpx_free(pts);
        return SKP_ENOMEM;
    }
    if (s->n_points)
        memcpy(pts, s->points, s->n_points * sizeof(*pts));
    c.points = pts;
    p->rows[p->n++].sum = c;
    snprintf(p->last, sizeof(p->last), "%s", c.endpoint);
    return SKP_OK;
}

static skp_err summary_push(json_t *arr, const struct es_summary *s, int window_s)
{
    json_t *pts = json_array();
    if (!pts)
        return SKP_ENOMEM;
    for (size_t i = 0; i < s->n_points; i++) {
        const struct es_point *p = &s->points[i];
        skp_err err = http_push_json(
            pts, json_pack("{s:I, s:I, s:I, s:I, s:I}", "t", (json_int_t)p->minute_ms, "count",
                           (json_int_t)p->count, "errors", (json_int_t)p->errors, "p50",
                           (json_int_t)p->p50_ms, "p99", (json_int_t)p->p99_ms));
        if (err) {
            json_decref(pts);
            return err;
        }
    }
    double secs = (double)s->n_points * 60.0;
    if (secs > window_s)
        secs = window_s;
    return http_push_json(
        arr, json_pack("{s:o, s:I, s:I, s:f, s:f, s:I, s:I, s:I, s:I, s:I, s:o}", "endpoint",
                       skp_json_str(s->endpoint), "count", (json_int_t)s->count, "errors",
                       (json_int_t)s->errors, "errorRate",
                       s->count ? (double)s->errors / (double)s->count : 0.0, "rps",
                       secs > 0 ? (double)s->count / secs : 0.0, "p50", (json_int_t)s->p50_ms,
                       "p90", (json_int_t)s->p90_ms, "p99", (json_int_t)s->p99_ms, "instances",
                       (json_int_t)s->n_instances, "lastSeen", (json_int_t)s->last_seen_ms,
                       "points", pts));
}

/* Worker thread: the page's JSON from the copied rows. */
static void stats_run(struct http_job *j, struct store *st)
{
    struct stats_job *p = (struct stats_job *)j;
    json_t *arr = json_array();
    skp_err err = arr ? SKP_OK : SKP_ENOMEM;
    if (!err && p->merged)
        err = endpoint_partials_query_page(st, p->service, p->window_s, p->now, p->after, p->limit,
                                           summary_copy, p, &p->more);
    for (size_t i = 0; !err && i < p->n; i++)
        err = summary_push(arr, &p->rows[i].sum, p->window_s);
    if (err) {
        json_decref(arr);
        http_job_set_store_error(j, err, "endpoint statistics");
        return;
    }
    http_job_set_json(j, 200,
                      json_pack("{s:o, s:I, s:I, s:o}", "service", skp_json_str(p->service),
                                "window", (json_int_t)p->window_s, "now", (json_int_t)p->now,
                                "endpoints", arr));
    char cursor[HTTP_CURSOR_MAX];
    const char *parts[1] = {p->last};
    if (p->more && http_cursor_encode(cursor, sizeof(cursor), parts, 1))
        j->res.next_cursor = skpx_strdup(cursor); /* after the body: it resets the reply */
}

void http_endpoint_stats(struct http_ctx *cx, const char *service)
{
    bool present = false;
    int64_t window = STATS_DEFAULT_WINDOW_S;
    if (!http_query_int(cx, "window", &present, &window))
        return;
    if (present && (window < 1 || window > 24 * 3600)) {
        http_reply_field_error(cx, 400, "window", "'window' must be 1..86400 seconds");
        return;
    }
    if (window > ES_DEFAULT_WINDOW_MIN * 60)
        window = ES_DEFAULT_WINDOW_MIN * 60;
    struct http_page pg;
    if (!http_page_parse(cx, STATS_PAGE_DEFAULT, STATS_PAGE_MAX, &pg))
        return;
    if (pg.has_cursor && pg.n_parts != 1) {
        http_reply_field_error(cx, 400, "cursor", "not a cursor of this listing");
        return;
    }
    struct stats_job *p = http_job_new(cx, sizeof(*p), stats_run, stats_destroy);
    if (!p || !http_job_strdup(cx, &p->base, &p->service, service))
        return;
    p->window_s = (int)window;
    p->now = http_now(cx->api);
    skp_err err = SKP_OK;
    if (cx->api->db_remote && cx->api->endpoint_stats) {
        p->merged = true;
        p->limit = pg.limit;
        if (pg.has_cursor && !(p->after = skpx_strdup(pg.part[0])))
            err = SKP_ENOMEM;
    } else if (cx->api->endpoint_stats)
        err = endpoint_stats_query_page(cx->api->endpoint_stats, service, p->window_s, p->now,
                                        pg.has_cursor ? pg.part[0] : NULL, pg.limit, summary_copy,
                                        p, &p->more);
    http_job_dispatch_after(cx, &p->base, err, "endpoint statistics");
}
