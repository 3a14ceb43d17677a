/* http_analyze.c - analysis routes: POST /api/v1/profile/analyze (the UI's segment time
 * windows, OAP's getSegmentsProfileAnalyze), a task's whole data, a segment's whole life or
 * (?window=span) its spans' window. Each takes ?granularity=lines (default) or functions (the
 * tree built on functions, durations computed on it: analyzer.h).
 * Input is validated on the loop; the analysis itself runs as a worker job (http_worker.h). */
#include <string.h>

#include "common/alloc.h"
#include "server/analysis/analyzer.h"
#include "server/http/http_int.h"

enum analyze_kind { AK_QUERIES, AK_TASK, AK_SEGMENT };

struct analyze_job {
    struct http_job base;
    enum analyze_kind kind;
    char *id;                /* task or segment id */
    struct analyze_query *q; /* AK_QUERIES; segment ids owned */
    size_t n;
    bool span_window; /* AK_SEGMENT: the spans' window, not the whole life */
    bool by_function;
    uint64_t max_snapshots;
};

static void analyze_destroy(struct http_job *j)
{
    struct analyze_job *a = (struct analyze_job *)j;
    for (size_t i = 0; i < a->n; i++)
        skpx_free((char *)a->q[i].segment_id);
    SKPX_FREE_ALL(a->q, a->id, a);
}

static void analyze_run(struct http_job *j, struct store *st)
{
    struct analyze_job *a = (struct analyze_job *)j;
    struct analyze_opts o = {.max_snapshots = a->max_snapshots, .by_function = a->by_function};
    struct analysis *res = NULL;
    skp_err err;
    if (a->kind == AK_TASK) {
        struct store_task t = {0};
        err = store_get_task(st, a->id, &t);
        if (err) {
            http_job_set_store_error(j, err, "task");
            return;
        }
        store_task_cleanup(&t);
        err = analyze_task(st, a->id, &o, &res);
    } else if (a->kind == AK_SEGMENT) {
        err = http_segment_analysis(st, a->id, a->span_window, &o, &res);
    } else {
        err = analyze_segments(st, a->q, a->n, &o, &res);
    }
    if (http_job_analysis_failed(j, err, res))
        return;
    json_t *doc = analysis_to_json(res);
    analysis_free(res);
    http_job_set_json(j, 200, doc);
}

static struct analyze_job *job_new(struct http_ctx *cx, enum analyze_kind kind, const char *id)
{
    struct analyze_job *a = http_job_new(cx, sizeof(*a), analyze_run, analyze_destroy);
    if (!a || (id && !http_job_strdup(cx, &a->base, &a->id, id)))
        return NULL;
    a->kind = kind;
    a->max_snapshots = cx->api->max_analyze_snapshots;
    return a;
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

static void bad_query(struct http_ctx *cx, const char *msg, const char *field, size_t i)
{
    http_reply_json(
        cx, 400, json_pack("{s:s,s:s,s:I}", "error", msg, "field", field, "index", (json_int_t)i));
}

void http_analyze_post(struct http_ctx *cx)
{
    bool by_function;
    if (!http_query_either(cx, "granularity", "lines", "functions", &by_function))
        return;
    json_t *body = http_read_json(cx);
    struct analyze_job *a = NULL;
    if (!body)
        return;
    if (!json_is_array(body)) {
        http_reply_error(cx, 400,
                         "request body must be an array of "
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
    a = job_new(cx, AK_QUERIES, NULL);
    if (!a)
        goto out;
    a->by_function = by_function;
    a->q = skpx_calloc(n, sizeof(*a->q));
    if (!a->q) {
        http_reply_error(cx, 500, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(body, i);
        json_t *sid = json_object_get(e, "segmentId");
        json_t *tr = json_object_get(e, "timeRange");
        if (!json_is_object(e) || !json_is_string(sid) || !json_string_length(sid)) {
            bad_query(cx, "each query needs a non-empty string segmentId", "segmentId", i);
            goto out;
        }
        if (!json_is_object(tr)) {
            bad_query(cx, "timeRange must be an object", "timeRange", i);
            goto out;
        }
        struct analyze_query *q = &a->q[i];
        if (!range_member(cx, tr, "start", i, &q->start_ms) ||
            !range_member(cx, tr, "end", i, &q->end_ms))
            goto out;
        if (q->start_ms > q->end_ms) {
            bad_query(cx, "timeRange.start is after timeRange.end", "timeRange", i);
            goto out;
        }
        q->segment_id = skpx_strdup(json_string_value(sid));
        if (!q->segment_id) {
            http_reply_error(cx, 500, "out of memory");
            goto out;
        }
        a->n = i + 1;
    }
    http_job_dispatch(cx, &a->base);
    a = NULL;
out:
    if (a)
        analyze_destroy(&a->base);
    json_decref(body);
}

static void dispatch_simple(struct http_ctx *cx, enum analyze_kind kind, const char *id,
                            bool span_window)
{
    bool by_function;
    if (!http_query_either(cx, "granularity", "lines", "functions", &by_function))
        return;
    struct analyze_job *a = job_new(cx, kind, id);
    if (!a)
        return;
    a->span_window = span_window;
    a->by_function = by_function;
    http_job_dispatch(cx, &a->base);
}

bool http_query_window(struct http_ctx *cx, bool *span_window)
{
    const char *w = http_query(cx, "window");
    *span_window = w && strcmp(w, "span") == 0;
    if (w && !*span_window && strcmp(w, "all") != 0) {
        http_reply_field_error(cx, 400, "window", "must be \"all\" or \"span\"");
        return false;
    }
    return true;
}

skp_err http_segment_analysis(struct store *st, const char *segment_id, bool span_window,
                              const struct analyze_opts *o, struct analysis **out)
{
    *out = NULL;
    if (span_window) {
        struct store_segment_info info = {0};
        skp_err err = store_get_segment_info(st, segment_id, &info);
        bool known = !err && info.has_window;
        struct analyze_query q = {
            .segment_id = segment_id, .start_ms = info.start_ms, .end_ms = info.end_ms};
        store_segment_info_cleanup(&info);
        if (err && err != SKP_ENOTFOUND)
            return err;
        if (known)
            return analyze_segments(st, &q, 1, o, out);
    }
    return analyze_segment_all(st, segment_id, o, out);
}

bool http_job_analysis_failed(struct http_job *j, skp_err err, struct analysis *a)
{
    if (!err)
        return false;
    analysis_free(a);
    http_job_set_store_error(j, err, "analysis");
    return true;
}

void http_analyze_task(struct http_ctx *cx, const char *id)
{
    dispatch_simple(cx, AK_TASK, id, false);
}

void http_analyze_segment(struct http_ctx *cx, const char *segment_id)
{
    bool span_window;
    if (http_query_window(cx, &span_window))
        dispatch_simple(cx, AK_SEGMENT, segment_id, span_window);
}
