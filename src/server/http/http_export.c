/* http_export.c - downloads of an analysis in exchange formats (export.h: pprof, collapsed,
 * speedscope, html, json) for a whole task or a segment (optionally a time window), with a
 * Content-Disposition attachment filename, rendered as a worker job (http_worker.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/grow.h"
#include "server/analysis/analyzer.h"
#include "server/export/export.h"
#include "server/http/http_int.h"

/* A filename for Content-Disposition: "skyprof-<id>.<ext>", with every byte outside
 * [A-Za-z0-9._-] replaced so no header injection or path trick is possible. */
static void make_filename(char *out, size_t cap, const char *kind, const char *id, const char *ext)
{
    int n = snprintf(out, cap, "skyprof-%s-", kind);
    size_t k = n > 0 ? (size_t)n : 0;
    for (const char *p = id; *p && k + 1 + strlen(ext) + 2 < cap && k < 120; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '-' || c == '_';
        out[k++] = ok ? c : '_';
    }
    snprintf(out + k, cap - k, ".%s", ext);
}

bool http_query_names(struct http_ctx *cx, bool *readable)
{
    bool full = false;
    *readable = true;
    if (!http_query_either(cx, "names", "short", "full", &full))
        return false;
    *readable = !full;
    return true;
}

static bool parse_format(struct http_ctx *cx, enum export_format *f)
{
    const char *s = http_query(cx, "format");
    if (!s)
        s = "json";
    if (export_format_parse(s, f)) {
        http_reply_field_error(cx, 400, "format",
                               "format must be one of pprof, collapsed, speedscope, html, json");
        return false;
    }
    return true;
}

struct export_job {
    struct http_job base;
    bool is_task; /* base.id: the task's, else the segment's */
    enum export_format format;
    bool readable_names;
    bool has_range;
    int64_t start, end;
    bool span_window; /* no range: the spans' window rather than the whole life */
    uint64_t max_snapshots;
};

/* Renders `a` (consumed) as the job's response. */
static void render(struct export_job *e, struct analysis *a, const struct export_meta *meta)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    skp_err err = export_render(a, e->format, meta, &buf, &len);
    analysis_free(a);
    if (err) {
        http_job_set_error(&e->base, 500, "export failed: %s", skp_strerror(err));
        return;
    }
    char fname[192];
    make_filename(fname, sizeof(fname), e->is_task ? "task" : "segment", e->base.id,
                  export_file_ext(e->format));
    http_response_bytes(&e->base.res, 200, export_content_type(e->format), (char *)buf, len);
    snprintf(e->base.res.disposition, sizeof(e->base.res.disposition),
             "attachment; filename=\"%s\"", fname);
}

/* A task's profiled segments (ids and trace ids, owned), for the labelled pprof. */
struct seg_list {
    struct seg_ref {
        char *id, *trace;
    } * v;
    size_t n, cap;
};

/* Tasks with more profiled segments than this export without per-segment labels. */
#define EXPORT_MAX_LABELLED_SEGMENTS 1000

static skp_err seg_list_push(void *ud, const struct store_profiled_segment *s)
{
    struct seg_list *l = ud;
    if (l->n == EXPORT_MAX_LABELLED_SEGMENTS)
        return SKP_ETOOBIG;
    if (skpx_grow(&l->v, &l->cap, l->n + 1, sizeof(*l->v), 16))
        return SKP_ENOMEM;
    struct seg_ref *r = &l->v[l->n++];
    r->id = skpx_strdup(s->segment_id);
    r->trace = skpx_strdup(s->trace_id ? s->trace_id : "");
    return r->id && r->trace ? SKP_OK : SKP_ENOMEM;
}

/* A task's pprof with every sample labelled by its segment and trace: one analysis per profiled
 * segment. Returns false (nothing sent) when the segments' snapshots do not add up to the task's
 * (a segment shared with another task, a segment not listed) or on any failure: the caller then
 * exports the task's analysis as one part. */
static bool render_task_pprof_by_segment(struct export_job *e, struct store *st,
                                         const struct analyze_opts *o, const struct analysis *all,
                                         const struct export_meta *meta)
{
    struct seg_list l = {0};
    struct export_part *parts = NULL;
    size_t n_parts = 0;
    bool done = false;
    skp_err err = store_list_profiled_segments(st, e->base.id, seg_list_push, &l);
    if (!err && l.n > 0)
        parts = skpx_calloc(l.n, sizeof(*parts));
    uint64_t sum = 0;
    for (size_t i = 0; !err && parts && i < l.n; i++) {
        struct analysis *a = NULL;
        err = analyze_segment_all(st, l.v[i].id, o, &a);
        if (err) {
            analysis_free(a);
            break;
        }
        parts[n_parts++] =
            (struct export_part){.a = a, .segment_id = l.v[i].id, .trace_id = l.v[i].trace};
        sum += a->n_snapshots;
    }
    if (!err && parts && n_parts == l.n && sum == all->n_snapshots) {
        uint8_t *buf = NULL;
        size_t len = 0;
        if (export_render_pprof_labelled(parts, n_parts, meta, &buf, &len) == SKP_OK) {
            char fname[192];
            make_filename(fname, sizeof(fname), "task", e->base.id, export_file_ext(EXPORT_PPROF));
            http_response_bytes(&e->base.res, 200, export_content_type(EXPORT_PPROF), (char *)buf,
                                len);
            snprintf(e->base.res.disposition, sizeof(e->base.res.disposition),
                     "attachment; filename=\"%s\"", fname);
            done = true;
        }
    }
    for (size_t i = 0; i < n_parts; i++)
        analysis_free((struct analysis *)parts[i].a);
    skpx_free(parts);
    for (size_t i = 0; i < l.n; i++) {
        skpx_free(l.v[i].id);
        skpx_free(l.v[i].trace);
    }
    skpx_free(l.v);
    return done;
}

static void export_run(struct http_job *j, struct store *st)
{
    struct export_job *e = (struct export_job *)j;
    struct analyze_opts o = {.max_snapshots = e->max_snapshots};
    struct analysis *a = NULL;
    skp_err err;
    if (e->is_task) {
        struct store_task t = {0};
        err = store_get_task(st, e->base.id, &t);
        if (err) {
            http_job_set_store_error(j, err, "task");
            return;
        }
        err = analyze_task(st, e->base.id, &o, &a);
        if (http_job_analysis_failed(j, err, a)) {
            store_task_cleanup(&t);
            return;
        }
        char title[640];
        snprintf(title, sizeof(title), "task %s %s", t.id, t.endpoint);
        struct export_meta meta = {
            .title = title,
            .task_id = t.id,
            .endpoint = t.endpoint,
            .dump_period_ms = t.dump_period,
            .time_ms = t.start_time,
            .readable_names = e->readable_names,
        };
        if (e->format == EXPORT_PPROF && render_task_pprof_by_segment(e, st, &o, a, &meta)) {
            analysis_free(a);
            store_task_cleanup(&t);
            return;
        }
        render(e, a, &meta);
        store_task_cleanup(&t);
        return;
    }
    if (e->has_range) {
        struct analyze_query q = {.segment_id = e->base.id, .start_ms = e->start, .end_ms = e->end};
        err = analyze_segments(st, &q, 1, &o, &a);
    } else {
        err = http_segment_analysis(st, e->base.id, e->span_window, &o, &a);
    }
    if (http_job_analysis_failed(j, err, a))
        return;
    /* Trace id, endpoint and the task's dump period (the sample weight); a segment the store
     * does not know (an empty analysis) is exported without them. */
    struct store_segment_info info = {0};
    err = store_get_segment_info(st, e->base.id, &info);
    if (err && err != SKP_ENOTFOUND) {
        analysis_free(a);
        http_job_set_store_error(j, err, "segment");
        return;
    }
    char title[600];
    snprintf(title, sizeof(title), "segment %s", e->base.id);
    struct export_meta meta = {
        .title = title,
        .segment_id = e->base.id,
        .trace_id = info.trace_id,
        .endpoint = info.endpoint,
        .dump_period_ms = info.dump_period,
        .time_ms = e->has_range ? e->start : 0,
        .readable_names = e->readable_names,
    };
    render(e, a, &meta);
    store_segment_info_cleanup(&info);
}

static struct export_job *export_job_new(struct http_ctx *cx, bool is_task, const char *id,
                                         enum export_format f)
{
    bool readable;
    if (!http_query_names(cx, &readable))
        return NULL;
    struct export_job *e = http_job_new(cx, sizeof(*e), export_run, http_job_free);
    if (!e || !http_job_strdup(cx, &e->base, &e->base.id, id))
        return NULL;
    e->is_task = is_task;
    e->format = f;
    e->readable_names = readable;
    e->max_snapshots = cx->api->max_analyze_snapshots;
    return e;
}

void http_export_task(struct http_ctx *cx, const char *id)
{
    enum export_format f;
    if (!parse_format(cx, &f))
        return;
    struct export_job *e = export_job_new(cx, true, id, f);
    if (e)
        http_job_dispatch(cx, &e->base);
}

void http_export_segment(struct http_ctx *cx, const char *segment_id)
{
    enum export_format f;
    if (!parse_format(cx, &f))
        return;
    bool has_start = false, has_end = false;
    int64_t start = 0, end = 0;
    if (!http_query_int(cx, "start", &has_start, &start) ||
        !http_query_int(cx, "end", &has_end, &end))
        return;
    if (has_start != has_end) {
        http_reply_field_error(cx, 400, has_start ? "end" : "start",
                               "give both start and end, or neither");
        return;
    }
    if (has_start && start > end) {
        http_reply_field_error(cx, 400, "start", "start is after end");
        return;
    }
    bool span_window;
    if (!http_query_window(cx, &span_window))
        return;
    if (span_window && has_start) {
        http_reply_field_error(cx, 400, "window", "give start and end, or window=span");
        return;
    }
    struct export_job *e = export_job_new(cx, false, segment_id, f);
    if (!e)
        return;
    e->span_window = span_window;
    e->has_range = has_start;
    e->start = start;
    e->end = end;
    http_job_dispatch(cx, &e->base);
}
