/* http_async_analyze.c - trees and downloads of an async-profiler task's uploaded JFR files, as
 * HTTP worker jobs (a file is up to --jfr-max-bytes; parsing stays off the event loop):
 *   GET /api/v1/async-profiler/tasks/{id}/analyze?eventType=&instances=a,b&thread=&granularity=
 *   GET /api/v1/async-profiler/tasks/{id}/download?format=pprof|collapsed|speedscope|html&(same)
 *   GET /api/v1/async-profiler/tasks/{id}/timeline?eventType=&instances=&buckets=
 * from=&to= (ms since the epoch, both or neither) keep the samples that started in that range
 * (analyze, download). The timeline lays the samples out per thread over time (jfr_timeline.h).
 * eventType picks the tree (execution: CPU/WALL/CTIMER/ITIMER samples; native; alloc; lock;
 * live; OAP's names accepted too); default: the tree of the task's first event. The chosen files
 * are parsed with one parser into one tree (jfr_tree.h); a file that does not parse is listed in
 * "errors" (with the parser's message) and the others still count. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "server/analyzer.h"
#include "server/export.h"
#include "server/http_int.h"
#include "server/http_pprof.h"
#include "server/jfr_timeline.h"
#include "server/jfr_tree.h"
#include "server/store_proc.h"

#define FILTER_MAX 65536
#define THREAD_MAX 1024

struct ja_job {
    struct http_job base;
    char *task_id;
    char *instances;  /* comma-separated filter, NULL = all */
    char *thread;     /* NULL = all threads */
    char *event_type; /* NULL = from the task's first event */
    bool without_lines;
    bool download;
    bool timeline;
    uint32_t buckets; /* timeline only */
    bool has_range;   /* from/to given */
    int64_t from_ms, to_ms;
    bool readable_names; /* names=short (the default) */
    enum export_format format;
};

/* Feeds one recording to a tree or a timeline. */
typedef skp_err (*ja_add_cb)(void *ud, const uint8_t *buf, size_t len, struct jfr_error *err);

static skp_err add_to_tree(void *ud, const uint8_t *buf, size_t len, struct jfr_error *err)
{
    return jfr_tree_add_mem(ud, buf, len, err);
}

static skp_err add_to_timeline(void *ud, const uint8_t *buf, size_t len, struct jfr_error *err)
{
    return jfr_timeline_add_mem(ud, buf, len, err);
}

static void ja_destroy(struct http_job *j)
{
    struct ja_job *p = (struct ja_job *)j;
    skpx_free(p->task_id);
    skpx_free(p->instances);
    skpx_free(p->thread);
    skpx_free(p->event_type);
    skpx_free(p);
}

/* The tree a task's first event shows (CPU, WALL, CTIMER, ITIMER → execution). */
static enum jfr_kind default_kind(const char *events)
{
    char first[16] = "";
    size_t n = events ? strcspn(events, ",") : 0;
    if (n < sizeof(first)) {
        memcpy(first, events, n);
        first[n] = '\0';
    }
    enum jfr_kind k = JFR_KIND_EXECUTION;
    if (jfr_kind_parse(first, &k))
        k = JFR_KIND_EXECUTION;
    return k;
}

static skp_err add_files(struct store *st, const struct ja_job *p, ja_add_cb add, void *ud,
                         json_t *used, json_t *errors)
{
    struct proc_file *files = NULL;
    size_t n = 0;
    skp_err err = store_proc_list_files(st, p->task_id, &files, &n);
    if (err)
        return err;
    for (size_t i = 0; i < n && !err; i++) {
        if (!http_instance_chosen(p->instances, files[i].instance))
            continue;
        uint8_t *data = NULL;
        size_t len = 0;
        err = store_proc_get_file(st, p->task_id, files[i].id, &data, &len, NULL);
        if (err)
            break;
        struct jfr_error why;
        skp_err pe = add(ud, data, len, &why);
        skpx_free(data);
        if (pe == SKP_ENOMEM) {
            err = pe;
            break;
        }
        if (pe) {
            json_array_append_new(errors,
                                  json_pack("{s:I,s:s,s:s}", "fileId", (json_int_t)files[i].id,
                                            "instanceName", files[i].instance, "error",
                                            why.msg[0] ? why.msg : skp_strerror(pe)));
            continue;
        }
        json_array_append_new(used, json_pack("{s:I,s:s,s:I}", "id", (json_int_t)files[i].id,
                                              "instanceName", files[i].instance, "size",
                                              (json_int_t)files[i].size_bytes));
    }
    store_proc_files_free(files, n);
    return err;
}

static json_t *summary_json(const struct jfr_summary *s)
{
    json_t *kinds = json_object(), *threads = json_array();
    for (int k = 0; kinds && k < JFR_KIND_COUNT; k++)
        json_object_set_new(kinds, jfr_kind_name((enum jfr_kind)k),
                            json_pack("{s:I,s:I,s:s}", "events", (json_int_t)s->n_events[k],
                                      "weight", (json_int_t)s->weight[k], "unit",
                                      jfr_kind_unit((enum jfr_kind)k)));
    for (size_t i = 0; threads && i < s->n_threads; i++)
        json_array_append_new(threads, json_pack("{s:s,s:I,s:I}", "name", s->threads[i].name,
                                                 "events", (json_int_t)s->threads[i].n_events,
                                                 "weight", (json_int_t)s->threads[i].weight));
    return json_pack("{s:o*,s:o*,s:I,s:I}", "eventKinds", kinds, "threads", threads,
                     "threadsOmitted", (json_int_t)s->n_threads_dropped, "chunks",
                     (json_int_t)s->n_chunks);
}

/* {from, to, bucketMs, buckets, frames: [leaf function], threads: [{name, weight, cells:
 * [[bucket, frame, leafWeight, weight]]}], threadsOmitted, samples, untimed, dropped, eventType,
 * unit, files, errors} */
static json_t *timeline_json(const struct jfr_timeline_view *v)
{
    json_t *frames = json_array(), *threads = json_array();
    for (size_t i = 0; frames && i < v->n_frames; i++)
        if (json_array_append_new(frames, json_string(v->frames[i])) != 0)
            goto fail;
    for (size_t i = 0; threads && i < v->n_threads; i++) {
        const struct jfr_timeline_thread *th = &v->threads[i];
        json_t *cells = json_array();
        for (size_t c = 0; cells && c < th->n_cells; c++) {
            const struct jfr_timeline_cell *x = &th->cells[c];
            if (json_array_append_new(
                    cells, json_pack("[I,I,I,I]", (json_int_t)x->bucket, (json_int_t)x->frame,
                                     (json_int_t)x->leaf_weight, (json_int_t)x->weight)) != 0) {
                json_decref(cells);
                goto fail;
            }
        }
        if (json_array_append_new(threads, json_pack("{s:s,s:I,s:o*}", "name", th->name, "weight",
                                                     (json_int_t)th->weight, "cells", cells)) != 0)
            goto fail;
    }
    return json_pack("{s:I,s:I,s:I,s:I,s:o*,s:o*,s:I,s:I,s:I,s:I}", "from", (json_int_t)v->from_ms,
                     "to", (json_int_t)v->to_ms, "bucketMs", (json_int_t)v->bucket_ms, "buckets",
                     (json_int_t)v->n_buckets, "frames", frames, "threads", threads,
                     "threadsOmitted", (json_int_t)v->n_threads_omitted, "samples",
                     (json_int_t)v->n_samples, "untimed", (json_int_t)v->n_untimed, "dropped",
                     (json_int_t)v->n_dropped);
fail:
    json_decref(frames);
    json_decref(threads);
    return NULL;
}

static void timeline_run(struct http_job *j, struct store *st, const struct ja_job *p,
                         const struct proc_task *t, enum jfr_kind kind)
{
    struct jfr_timeline *tl = NULL;
    const struct jfr_timeline_view *v = NULL;
    json_t *used = json_array(), *errors = json_array(), *body = NULL;
    skp_err err = jfr_timeline_new(kind, &tl);
    if (!err && (!used || !errors))
        err = SKP_ENOMEM;
    if (!err)
        err = add_files(st, p, add_to_timeline, tl, used, errors);
    if (!err)
        err = jfr_timeline_finish(tl, p->buckets, &v);
    if (!err && !(body = timeline_json(v)))
        err = SKP_ENOMEM;
    if (err) {
        http_job_set_store_error(j, err, "JFR timeline");
        goto out;
    }
    json_object_set_new(body, "taskId", json_string(t->id));
    json_object_set_new(body, "eventType", json_string(jfr_kind_name(kind)));
    json_object_set_new(body, "unit", json_string(jfr_kind_unit(kind)));
    json_object_set_new(body, "files", used);
    json_object_set_new(body, "errors", errors);
    used = errors = NULL;
    http_job_set_json(j, 200, body);
out:
    json_decref(used);
    json_decref(errors);
    jfr_timeline_free(tl);
}

static void ja_run(struct http_job *j, struct store *st)
{
    struct ja_job *p = (struct ja_job *)j;
    struct proc_task t = {0};
    skp_err err = store_proc_get_task(st, p->task_id, &t);
    if (!err && t.kind != PROC_KIND_ASYNC_PROFILER)
        err = SKP_ENOTFOUND;
    if (err) {
        store_proc_task_cleanup(&t);
        http_job_set_store_error(j, err, "async-profiler task");
        return;
    }
    struct jfr_analyze_opts o = {.thread = p->thread,
                                 .without_lines = p->without_lines,
                                 .has_range = p->has_range,
                                 .from_ms = p->from_ms,
                                 .to_ms = p->to_ms};
    o.kind = default_kind(t.events);
    if (p->event_type && jfr_kind_parse(p->event_type, &o.kind)) {
        http_job_set_error(j, 400,
                           "unknown eventType (execution, native, alloc, lock, live, "
                           "or CPU, WALL, CTIMER, ITIMER, ALLOC, LOCK)");
        store_proc_task_cleanup(&t);
        return;
    }
    if (p->timeline) {
        timeline_run(j, st, p, &t, o.kind);
        store_proc_task_cleanup(&t);
        return;
    }
    struct jfr_summary sum;
    memset(&sum, 0, sizeof(sum));
    struct jfr_tree *tree = NULL;
    struct analysis *a = NULL;
    json_t *used = json_array(), *errors = json_array();
    err = jfr_tree_new(&o, &sum, &tree);
    if (!err && (!used || !errors))
        err = SKP_ENOMEM;
    if (!err)
        err = add_files(st, p, add_to_tree, tree, used, errors);
    if (!err)
        err = jfr_tree_finish(tree, &a);
    if (err == SKP_ETOOBIG) {
        http_job_set_error(j, 413, "the merged JFR tree is too large");
        goto out;
    }
    if (err) {
        http_job_set_store_error(j, err, "JFR analysis");
        goto out;
    }
    const char *kind = jfr_kind_name(o.kind);
    if (p->download) {
        char title[512];
        snprintf(title, sizeof(title), "async-profiler task %.200s %.40s (%s%s%.100s)", t.id,
                 t.events, kind, p->thread ? ", thread " : "", p->thread ? p->thread : "");
        struct export_meta meta = {
            .title = title,
            .task_id = t.id,
            .time_ms = t.create_time,
            .value_type = kind,
            .value_unit = o.kind == JFR_KIND_EXECUTION || o.kind == JFR_KIND_NATIVE
                              ? "count"
                              : jfr_kind_unit(o.kind),
            .readable_names = p->readable_names,
        };
        uint8_t *buf = NULL;
        size_t len = 0;
        err = export_render(a, p->format, &meta, &buf, &len);
        if (err) {
            http_job_set_error(j, 500, "export failed: %s", skp_strerror(err));
            goto out;
        }
        char fname[192];
        http_async_filename(fname, sizeof(fname), t.id, kind, export_file_ext(p->format));
        http_response_bytes(&j->res, 200, export_content_type(p->format), (char *)buf, len);
        snprintf(j->res.disposition, sizeof(j->res.disposition), "attachment; filename=\"%s\"",
                 fname);
        goto out;
    }
    json_t *body = analysis_to_json(a);
    json_t *sj = summary_json(&sum);
    if (!body || !sj) {
        json_decref(body);
        json_decref(sj);
        http_job_set_error(j, 500, "out of memory");
        goto out;
    }
    int64_t total = 0;
    for (size_t i = 0; i < a->n_trees; i++)
        total += (int64_t)a->trees[i].nodes[0].count;
    json_object_set_new(body, "taskId", json_string(t.id));
    json_object_set_new(body, "events", json_string(t.events));
    json_object_set_new(body, "eventType", json_string(kind));
    json_object_set_new(body, "unit", json_string(jfr_kind_unit(o.kind)));
    if (sum.alloc_source)
        json_object_set_new(body, "allocSource", json_string(sum.alloc_source));
    json_object_set_new(body, "thread", p->thread ? json_string(p->thread) : json_null());
    if (p->has_range) {
        json_object_set_new(body, "from", json_integer(p->from_ms));
        json_object_set_new(body, "to", json_integer(p->to_ms));
    }
    json_object_set_new(body, "total", json_integer((json_int_t)total));
    json_object_set_new(body, "samples", json_integer((json_int_t)a->n_snapshots));
    json_object_update(body, sj);
    json_decref(sj);
    json_object_set_new(body, "files", used);
    json_object_set_new(body, "errors", errors);
    used = errors = NULL;
    http_job_set_json(j, 200, body);
out:
    json_decref(used);
    json_decref(errors);
    analysis_free(a);
    jfr_tree_free(tree);
    jfr_summary_cleanup(&sum);
    store_proc_task_cleanup(&t);
}

static void dispatch(struct http_ctx *cx, const char *id, bool download, bool timeline)
{
    enum export_format f = EXPORT_JSON;
    bool readable = true;
    if (download) {
        if (!http_query_names(cx, &readable))
            return;
        const char *s = http_query(cx, "format");
        if (!s)
            s = "pprof";
        if (export_format_parse(s, &f) || f == EXPORT_JSON) {
            http_reply_field_error(cx, 400, "format",
                                   "format must be one of pprof, collapsed, speedscope, html");
            return;
        }
    }
    const char *inst = http_query(cx, "instances");
    const char *type = http_query(cx, "eventType");
    const char *thread = http_query(cx, "thread");
    const char *gran = http_query(cx, "granularity");
    enum jfr_kind k;
    if (type && *type && jfr_kind_parse(type, &k)) {
        http_reply_field_error(cx, 400, "eventType",
                               "eventType must be one of execution, native, alloc, lock, live "
                               "(or CPU, WALL, CTIMER, ITIMER, ALLOC, LOCK)");
        return;
    }
    if (inst && strlen(inst) > FILTER_MAX) {
        http_reply_field_error(cx, 400, "instances", "instances filter too long");
        return;
    }
    if (thread && strlen(thread) > THREAD_MAX) {
        http_reply_field_error(cx, 400, "thread", "thread name too long");
        return;
    }
    if (gran && *gran && strcmp(gran, "lines") != 0 && strcmp(gran, "functions") != 0) {
        http_reply_field_error(cx, 400, "granularity", "granularity must be lines or functions");
        return;
    }
    bool has_from = false, has_to = false, has_buckets = false;
    int64_t from = 0, to = 0, buckets = JFR_TIMELINE_DEFAULT_BUCKETS;
    if (!http_query_int(cx, "from", &has_from, &from) || !http_query_int(cx, "to", &has_to, &to))
        return;
    if (has_from != has_to) {
        http_reply_field_error(cx, 400, has_from ? "to" : "from",
                               "give both from and to, or neither");
        return;
    }
    if (has_from && (from <= 0 || from > to)) {
        http_reply_field_error(cx, 400, "from", "from must be positive and not after to");
        return;
    }
    if (timeline && !http_query_int(cx, "buckets", &has_buckets, &buckets))
        return;
    if (has_buckets && (buckets < 1 || buckets > JFR_TIMELINE_MAX_BUCKETS)) {
        http_reply_field_error(cx, 400, "buckets", "buckets must be 1..2000");
        return;
    }
    struct ja_job *p = skpx_calloc(1, sizeof(*p));
    bool ok = p && (p->task_id = skpx_strdup(id)) &&
              (!inst || !*inst || (p->instances = skpx_strdup(inst))) &&
              (!thread || !*thread || (p->thread = skpx_strdup(thread))) &&
              (!type || !*type || (p->event_type = skpx_strdup(type)));
    if (!ok) {
        if (p)
            ja_destroy(&p->base);
        http_reply_error(cx, 500, "out of memory");
        return;
    }
    p->without_lines = gran && strcmp(gran, "functions") == 0;
    p->download = download;
    p->timeline = timeline;
    p->buckets = (uint32_t)buckets;
    p->has_range = has_from;
    p->from_ms = from;
    p->to_ms = to;
    p->format = f;
    p->readable_names = readable;
    p->base.run = ja_run;
    p->base.destroy = ja_destroy;
    http_job_dispatch(cx, &p->base);
}

void http_async_analyze(struct http_ctx *cx, const char *id)
{
    dispatch(cx, id, false, false);
}

void http_async_download(struct http_ctx *cx, const char *id)
{
    dispatch(cx, id, true, false);
}

void http_async_timeline(struct http_ctx *cx, const char *id)
{
    dispatch(cx, id, false, true);
}
