/* http_async_analyze.c - trees and downloads of an async-profiler task's uploaded JFR files, as
 * HTTP worker jobs (a file is up to --jfr-max-bytes; parsing stays off the event loop; the
 * analysis and download are http_proc_analyze.h's job with the JFR format below):
 *   GET /api/v1/async-profiler/tasks/{id}/analyze?eventType=&instances=a,b&thread=&granularity=
 *   GET /api/v1/async-profiler/tasks/{id}/download?format=pprof|collapsed|speedscope|html&(same)
 *   GET /api/v1/async-profiler/tasks/{id}/timeline?eventType=&instances=&buckets=
 * from=&to= (ms since the epoch, both or neither) keep the samples that started in that range
 * (analyze, download). The timeline lays the samples out per thread over time (jfr_timeline.h).
 * eventType picks the tree (execution: CPU/WALL/CTIMER/ITIMER samples; native; alloc; lock;
 * live; OAP's names accepted too); default: the tree of the task's first event. The chosen files
 * are parsed with one parser into one tree (jfr_tree.h); a file that does not parse is listed in
 * "errors" (with the parser's message) and the others still count. */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "server/analysis/analyzer.h"
#include "server/http/http_int.h"
#include "server/http/http_pprof.h"
#include "server/http/http_proc_analyze.h"
#include "server/analysis/jfr_timeline.h"
#include "server/analysis/jfr_tree.h"

#define THREAD_MAX 1024

_Static_assert(sizeof(((struct jfr_error *)0)->msg) <= HTTP_PROC_WHY_MAX, "a parser's reason fits");

struct ja_job {
    struct http_proc_job proc;
    char *thread;  /* NULL = all threads */
    bool has_kind; /* eventType given: `kind`, else the task's first event */
    enum jfr_kind kind;
    bool without_lines;
    uint32_t buckets; /* timeline only */
    bool has_range;   /* from/to given */
    int64_t from_ms, to_ms;
};

/* The tree of one analysis, and what the parser saw on the way. */
struct ja_acc {
    struct jfr_tree *tree;
    struct jfr_summary sum;
    enum jfr_kind kind;
};

/* What a parse of one recording means for the job: a file that does not parse is left out (with
 * the parser's message), running out of memory ends the job. */
static skp_err file_verdict(skp_err err, const struct jfr_error *e, char *why, bool *bad_file)
{
    if (err && err != SKP_ENOMEM) {
        *bad_file = true;
        snprintf(why, HTTP_PROC_WHY_MAX, "%s", e->msg[0] ? e->msg : skp_strerror(err));
    }
    return err;
}

static skp_err add_to_tree(void *acc, const uint8_t *buf, size_t len, char *why, bool *bad_file)
{
    struct jfr_error e = {0};
    skp_err err = jfr_tree_add_mem(((struct ja_acc *)acc)->tree, buf, len, &e);
    return file_verdict(err, &e, why, bad_file);
}

static skp_err add_to_timeline(void *tl, const uint8_t *buf, size_t len, char *why, bool *bad_file)
{
    struct jfr_error e = {0};
    return file_verdict(jfr_timeline_add_mem(tl, buf, len, &e), &e, why, bad_file);
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

/* The event kind job `p` shows for the task with `events`. */
static enum jfr_kind job_kind(const struct ja_job *p, const char *events)
{
    return p->has_kind ? p->kind : default_kind(events);
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

/* The timeline job's run (its own reply; the files are fed as the analysis feeds them). */
static void timeline_run(struct http_job *j, struct store *st)
{
    struct ja_job *p = (struct ja_job *)j;
    struct proc_task t = {0};
    struct jfr_timeline *tl = NULL;
    const struct jfr_timeline_view *v = NULL;
    json_t *used = json_array(), *errors = json_array(), *body = NULL;
    if (!http_proc_load_task(&p->proc, st, &t))
        goto out;
    enum jfr_kind kind = job_kind(p, t.events);
    skp_err err = jfr_timeline_new(kind, &tl);
    if (!err && (!used || !errors))
        err = SKP_ENOMEM;
    if (!err)
        err = http_proc_add_files(st, &p->proc, add_to_timeline, tl, used, errors);
    if (!err)
        err = jfr_timeline_finish(tl, p->buckets, &v);
    if (!err && !(body = timeline_json(v)))
        err = SKP_ENOMEM;
    if (err) {
        http_job_set_store_error(j, err, "JFR timeline");
        goto out;
    }
    json_object_set_new(body, "taskId", json_string(t.id));
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
    store_proc_task_cleanup(&t);
}

static skp_err ja_begin(const struct http_proc_job *j, const struct proc_task *t, void **out)
{
    const struct ja_job *p = (const struct ja_job *)j;
    *out = NULL;
    struct ja_acc *acc = skpx_calloc(1, sizeof(*acc));
    if (!acc)
        return SKP_ENOMEM;
    acc->kind = job_kind(p, t->events);
    struct jfr_analyze_opts o = {.kind = acc->kind,
                                 .thread = p->thread,
                                 .without_lines = p->without_lines,
                                 .has_range = p->has_range,
                                 .from_ms = p->from_ms,
                                 .to_ms = p->to_ms};
    *out = acc;
    return jfr_tree_new(&o, &acc->sum, &acc->tree);
}

static skp_err ja_finish(void *acc, struct analysis **out)
{
    return jfr_tree_finish(((struct ja_acc *)acc)->tree, out);
}

static void ja_too_big(struct http_job *j)
{
    http_job_set_error(j, 413, "the merged JFR tree is too large");
}

static void ja_describe(void *acc, const struct http_proc_job *j, const struct proc_task *t,
                        char *title, struct export_meta *meta, char *fname)
{
    const struct ja_job *p = (const struct ja_job *)j;
    enum jfr_kind k = ((struct ja_acc *)acc)->kind;
    const char *kind = jfr_kind_name(k);
    snprintf(title, HTTP_PROC_TITLE_MAX, "async-profiler task %.200s %.40s (%s%s%.100s)", t->id,
             t->events, kind, p->thread ? ", thread " : "", p->thread ? p->thread : "");
    meta->title = title;
    meta->task_id = t->id;
    meta->time_ms = t->create_time;
    meta->value_type = kind;
    meta->value_unit = k == JFR_KIND_EXECUTION || k == JFR_KIND_NATIVE ? "count" : jfr_kind_unit(k);
    http_async_filename(fname, HTTP_PROC_FNAME_MAX, t->id, kind, export_file_ext(j->format));
}

static skp_err ja_annotate(void *accp, const struct http_proc_job *j, const struct proc_task *t,
                           const struct analysis *a, json_t *body)
{
    const struct ja_job *p = (const struct ja_job *)j;
    const struct ja_acc *acc = accp;
    json_t *sj = summary_json(&acc->sum);
    if (!sj)
        return SKP_ENOMEM;
    int64_t total = 0;
    for (size_t i = 0; i < a->n_trees; i++)
        total += (int64_t)a->trees[i].nodes[0].count;
    json_object_set_new(body, "taskId", json_string(t->id));
    json_object_set_new(body, "events", json_string(t->events));
    json_object_set_new(body, "eventType", json_string(jfr_kind_name(acc->kind)));
    json_object_set_new(body, "unit", json_string(jfr_kind_unit(acc->kind)));
    if (acc->sum.alloc_source)
        json_object_set_new(body, "allocSource", json_string(acc->sum.alloc_source));
    json_object_set_new(body, "thread", p->thread ? json_string(p->thread) : json_null());
    if (p->has_range) {
        json_object_set_new(body, "from", json_integer(p->from_ms));
        json_object_set_new(body, "to", json_integer(p->to_ms));
    }
    json_object_set_new(body, "total", json_integer((json_int_t)total));
    json_object_set_new(body, "samples", json_integer((json_int_t)a->n_snapshots));
    json_object_update(body, sj);
    json_decref(sj);
    return SKP_OK;
}

static const char *ja_unit(void *acc)
{
    return jfr_kind_unit(((struct ja_acc *)acc)->kind);
}

static void ja_free(void *accp)
{
    struct ja_acc *acc = accp;
    if (!acc)
        return;
    jfr_tree_free(acc->tree);
    jfr_summary_cleanup(&acc->sum);
    skpx_free(acc);
}

static void ja_job_cleanup(struct http_proc_job *j)
{
    skpx_free(((struct ja_job *)j)->thread);
}

static const struct http_proc_format jfr_format = {
    .kind = PROC_KIND_ASYNC_PROFILER,
    .task_what = "async-profiler task",
    .analysis_what = "JFR analysis",
    .file_sizes = true,
    .begin = ja_begin,
    .add = add_to_tree,
    .finish = ja_finish,
    .reply_too_big = ja_too_big,
    .describe = ja_describe,
    .annotate = ja_annotate,
    .unit = ja_unit,
    .free = ja_free,
    .job_cleanup = ja_job_cleanup,
};

struct http_proc_job *http_jfr_job_new(const char *task_id, const char *inst,
                                       const char *event_type, const char *thread, bool by_function)
{
    struct ja_job *p = skpx_calloc(1, sizeof(*p));
    bool ok = p && http_proc_job_init(&p->proc, &jfr_format, task_id, inst) &&
              (!thread || !*thread || (p->thread = skpx_strdup(thread)));
    if (!ok) {
        http_proc_job_free(p ? &p->proc : NULL);
        return NULL;
    }
    p->has_kind = event_type && *event_type;
    if (p->has_kind && jfr_kind_parse(event_type, &p->kind))
        p->kind = JFR_KIND_EXECUTION;
    p->without_lines = by_function;
    return &p->proc;
}

static void dispatch(struct http_ctx *cx, const char *id, bool download, bool timeline)
{
    enum export_format f;
    bool readable;
    if (!http_proc_query_download(cx, download, &f, &readable))
        return;
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
    if (!http_proc_query_instances(cx, inst))
        return;
    if (thread && strlen(thread) > THREAD_MAX) {
        http_reply_field_error(cx, 400, "thread", "thread name too long");
        return;
    }
    bool by_function = false; /* granularity= (empty) is lines here */
    if (gran && *gran && !http_query_either(cx, "granularity", "lines", "functions", &by_function))
        return;
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
    struct http_proc_job *j = http_jfr_job_new(id, inst, type, thread, by_function);
    if (!http_proc_job_ready(cx, j, download, f, readable))
        return;
    struct ja_job *p = (struct ja_job *)j;
    p->buckets = (uint32_t)buckets;
    p->has_range = has_from;
    p->from_ms = from;
    p->to_ms = to;
    if (timeline)
        j->base.run = timeline_run;
    http_proc_job_dispatch(cx, j);
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
