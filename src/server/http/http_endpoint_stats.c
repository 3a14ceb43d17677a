/* http_endpoint_stats.c - GET /api/v1/services/{name}/endpoints/stats?window=SECONDS: per
 * endpoint request count, error count and rate, p50/p90/p99 latency over the window, and one
 * point per minute (count, errors, p50, p99) for the UI's sparklines. Read from the collector's
 * in-memory statistics (endpoint_stats.h). Runs on the loop. */
#include "server/stats/endpoint_stats.h"
#include "server/http/http_int.h"
#include "server/formats/utf8.h"

#define STATS_DEFAULT_WINDOW_S 900

static skp_err summary_push(void *ud, const struct es_summary *s)
{
    json_t *arr = ((json_t **)ud)[0];
    int window_s = (int)(intptr_t)((json_t **)ud)[1];
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
    json_t *arr = json_array();
    json_t *ud[2] = {arr, (json_t *)(intptr_t)window};
    int64_t now = http_now(cx->api);
    skp_err err = arr ? SKP_OK : SKP_ENOMEM;
    if (!err && cx->api->endpoint_stats)
        err = endpoint_stats_query(cx->api->endpoint_stats, service, (int)window, now, summary_push,
                                   ud);
    if (err) {
        json_decref(arr);
        http_reply_store_error(cx, err, "endpoint statistics");
        return;
    }
    http_reply_json(cx, 200,
                    json_pack("{s:o, s:I, s:I, s:o}", "service", skp_json_str(service), "window",
                              (json_int_t)window, "now", (json_int_t)now, "endpoints", arr));
}
