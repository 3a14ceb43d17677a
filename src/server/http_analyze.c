/* http_analyze.c - analysis routes: POST /api/v1/profile/analyze (the UI's segment time
 * windows, OAP's getSegmentsProfileAnalyze), a task's whole data, a segment's whole life. */
#include <string.h>

#include "common/alloc.h"
#include "server/analyzer.h"
#include "server/http_int.h"

static void reply_analysis(struct http_ctx *cx, skp_err err, struct analysis *a)
{
    if (err) {
        analysis_free(a);
        http_reply_store_error(cx, err, "analysis");
        return;
    }
    json_t *j = analysis_to_json(a);
    analysis_free(a);
    if (!j) {
        http_reply_error(cx, 500, "out of memory");
        return;
    }
    http_reply_json(cx, 200, j);
}

static bool range_member(struct http_ctx *cx, json_t *tr, const char *name, size_t idx,
                         int64_t *out)
{
    json_t *v = json_object_get(tr, name);
    if (!json_is_integer(v)) {
        http_reply_json(cx, 400,
                        json_pack("{s:s,s:s,s:I}", "error",
                                  "timeRange.start and timeRange.end must be integers (ms)",
                                  "field", name, "index", (json_int_t)idx));
        return false;
    }
    *out = json_integer_value(v);
    return true;
}

void http_analyze_post(struct http_ctx *cx)
{
    json_t *body = http_read_json(cx);
    struct analyze_query *q = NULL;
    if (!body)
        return;
    if (!json_is_array(body)) {
        http_reply_error(cx, 400, "request body must be an array of "
                                  "{segmentId, timeRange:{start, end}}");
        goto out;
    }
    size_t n = json_array_size(body);
    if (n == 0) {
        http_reply_error(cx, 400, "at least one query is needed");
        goto out;
    }
    if (n > HTTP_ANALYZE_MAX_QUERIES) {
        http_reply_error(cx, 400, "at most %d queries per request", HTTP_ANALYZE_MAX_QUERIES);
        goto out;
    }
    q = skpx_calloc(n, sizeof(*q));
    if (!q) {
        http_reply_error(cx, 500, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(body, i);
        json_t *sid = json_object_get(e, "segmentId");
        json_t *tr = json_object_get(e, "timeRange");
        if (!json_is_object(e) || !json_is_string(sid) || !json_string_length(sid)) {
            http_reply_json(cx, 400, json_pack("{s:s,s:s,s:I}", "error",
                                               "each query needs a non-empty string segmentId",
                                               "field", "segmentId", "index", (json_int_t)i));
            goto out;
        }
        if (!json_is_object(tr)) {
            http_reply_json(cx, 400,
                            json_pack("{s:s,s:s,s:I}", "error", "timeRange must be an object",
                                      "field", "timeRange", "index", (json_int_t)i));
            goto out;
        }
        q[i].segment_id = json_string_value(sid);
        if (!range_member(cx, tr, "start", i, &q[i].start_ms) ||
            !range_member(cx, tr, "end", i, &q[i].end_ms))
            goto out;
        if (q[i].start_ms > q[i].end_ms) {
            http_reply_json(cx, 400, json_pack("{s:s,s:s,s:I}", "error",
                                               "timeRange.start is after timeRange.end",
                                               "field", "timeRange", "index", (json_int_t)i));
            goto out;
        }
    }
    struct analyze_opts o = {.max_snapshots = cx->api->max_analyze_snapshots};
    struct analysis *a = NULL;
    skp_err err = analyze_segments(cx->api->store, q, n, &o, &a);
    reply_analysis(cx, err, a);
out:
    skpx_free(q);
    json_decref(body);
}

void http_analyze_task(struct http_ctx *cx, const char *id)
{
    struct store_task t = {0};
    skp_err err = store_get_task(cx->api->store, id, &t);
    if (err) {
        http_reply_store_error(cx, err, "task");
        return;
    }
    store_task_cleanup(&t);
    struct analyze_opts o = {.max_snapshots = cx->api->max_analyze_snapshots};
    struct analysis *a = NULL;
    err = analyze_task(cx->api->store, id, &o, &a);
    reply_analysis(cx, err, a);
}

void http_analyze_segment(struct http_ctx *cx, const char *segment_id)
{
    struct analyze_opts o = {.max_snapshots = cx->api->max_analyze_snapshots};
    struct analysis *a = NULL;
    skp_err err = analyze_segment_all(cx->api->store, segment_id, &o, &a);
    reply_analysis(cx, err, a);
}
