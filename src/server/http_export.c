/* http_export.c - downloads of an analysis in exchange formats (export.h: pprof, collapsed,
 * speedscope, html, json) for a whole task or a segment (optionally a time window), with a
 * Content-Disposition attachment filename. Built without the exporters (SKP_HAVE_EXPORT unset,
 * while export.c does not exist yet) the routes answer 501. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "server/analyzer.h"
#include "server/http_int.h"

#ifdef SKP_HAVE_EXPORT
#include "server/export.h"

/* A filename for Content-Disposition: "skyprof-<id>.<ext>", with every byte outside
 * [A-Za-z0-9._-] replaced so no header injection or path trick is possible. */
static void make_filename(char *out, size_t cap, const char *kind, const char *id,
                          const char *ext)
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

static void render(struct http_ctx *cx, struct analysis *a, enum export_format f,
                   const struct export_meta *meta, const char *kind, const char *id)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    skp_err err = export_render(a, f, meta, &buf, &len);
    analysis_free(a);
    if (err) {
        http_reply_error(cx, 500, "export failed: %s", skp_strerror(err));
        return;
    }
    char fname[192], disp[256];
    make_filename(fname, sizeof(fname), kind, id, export_file_ext(f));
    snprintf(disp, sizeof(disp), "attachment; filename=\"%s\"", fname);
    http_reply_bytes(cx, 200, export_content_type(f), buf, len, "Content-Disposition", disp);
    skpx_free(buf);
}

void http_export_task(struct http_ctx *cx, const char *id)
{
    enum export_format f;
    if (!parse_format(cx, &f))
        return;
    struct store_task t = {0};
    skp_err err = store_get_task(cx->api->store, id, &t);
    if (err) {
        http_reply_store_error(cx, err, "task");
        return;
    }
    struct analyze_opts o = {.max_snapshots = cx->api->max_analyze_snapshots};
    struct analysis *a = NULL;
    err = analyze_task(cx->api->store, id, &o, &a);
    if (err) {
        store_task_cleanup(&t);
        analysis_free(a);
        http_reply_store_error(cx, err, "analysis");
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
    };
    render(cx, a, f, &meta, "task", id);
    store_task_cleanup(&t);
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
    struct analyze_opts o = {.max_snapshots = cx->api->max_analyze_snapshots};
    struct analysis *a = NULL;
    skp_err err;
    if (has_start) {
        struct analyze_query q = {.segment_id = segment_id, .start_ms = start, .end_ms = end};
        err = analyze_segments(cx->api->store, &q, 1, &o, &a);
    } else {
        err = analyze_segment_all(cx->api->store, segment_id, &o, &a);
    }
    if (err) {
        analysis_free(a);
        http_reply_store_error(cx, err, "analysis");
        return;
    }
    char title[600];
    snprintf(title, sizeof(title), "segment %s", segment_id);
    struct export_meta meta = {
        .title = title,
        .segment_id = segment_id,
        .time_ms = has_start ? start : 0,
    };
    render(cx, a, f, &meta, "segment", segment_id);
}

#else

void http_export_task(struct http_ctx *cx, const char *id)
{
    (void)id;
    http_reply_error(cx, 501, "exports are not built into this skyprofd");
}

void http_export_segment(struct http_ctx *cx, const char *segment_id)
{
    (void)segment_id;
    http_reply_error(cx, 501, "exports are not built into this skyprofd");
}

#endif
