/* http_endpoint_stats.c - GET /api/v1/services/{name}/endpoints/stats?window=SECONDS: per
 * endpoint request count, error count and rate, p50/p90/p99 latency over the window, and one
 * point per minute (count, errors, p50, p99) for the UI's sparklines. Read from the collector's
 * in-memory statistics (endpoint_stats.h). Runs on the loop: a page is bounded (`limit`, at most
 * STATS_PAGE_MAX endpoints, `cursor` = the last endpoint sent, X-Next-Cursor when more follow),
 * and so is a service's number of endpoints (--max-endpoints-per-service). */
#include "server/stats/endpoint_stats.h"
#include "server/http/http_int.h"
#include "server/formats/utf8.h"
#include "server/http/http_page.h"

#define STATS_DEFAULT_WINDOW_S 900
/* Endpoints per page: the default (the whole of a service under the default cap) and the most. */
#define STATS_PAGE_DEFAULT 1000
#define STATS_PAGE_MAX 1000

struct stats_acc {
    json_t *arr;
    int window_s;
    char last[1024]; /* the last endpoint sent (names are cut at 512 bytes), the next cursor */
};

static skp_err summary_push(void *ud, const struct es_summary *s)
{
    struct stats_acc *acc = ud;
    json_t *arr = acc->arr;
    int window_s = acc->window_s;
    snprintf(acc->last, sizeof(acc->last), "%s", s->endpoint);
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
    json_t *arr = json_array();
    struct stats_acc acc = {.arr = arr, .window_s = (int)window};
    int64_t now = http_now(cx->api);
    skp_err err = arr ? SKP_OK : SKP_ENOMEM;
    bool more = false;
    if (!err && cx->api->endpoint_stats)
        err = endpoint_stats_query_page(cx->api->endpoint_stats, service, (int)window, now,
                                        pg.has_cursor ? pg.part[0] : NULL, pg.limit, summary_push,
                                        &acc, &more);
    if (err) {
        json_decref(arr);
        http_reply_store_error(cx, err, "endpoint statistics");
        return;
    }
    char cursor[HTTP_CURSOR_MAX];
    const char *parts[1] = {acc.last};
    if (more && http_cursor_encode(cursor, sizeof(cursor), parts, 1))
        http_page_set_next(cx, cursor);
    http_reply_json(cx, 200,
                    json_pack("{s:o, s:I, s:I, s:o}", "service", skp_json_str(service), "window",
                              (json_int_t)window, "now", (json_int_t)now, "endpoints", arr));
}
