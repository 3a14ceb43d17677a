/* http_pprof.c - process-profiling task routes under /api/v1/pprof/tasks (and, with the same
 * handlers by kind, the async-profiler tasks under /api/v1/async-profiler/tasks): create
 * (OAP's validation texts, 201 {id} / 400 {errorReason}), list, get with logs, per-instance
 * progress and stored files, and the download of one stored file (a worker job: files are up
 * to --pprof-max-bytes). Analysis and merged downloads: http_pprof_analyze.c. */
#include <event2/http.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/log.h"
#include "server/http/http_int.h"
#include "server/http/http_pprof.h"
#include "server/tasks/proc_task.h"

/* Reads a JSON array of strings, or one string, into a borrowed vector (max entries). Replies
 * 400 and returns false when malformed. */
static bool member_strs(struct http_ctx *cx, json_t *body, const char *name, const char **vec,
                        size_t max, size_t *n)
{
    json_t *v = json_object_get(body, name);
    *n = 0;
    if (!v || json_is_null(v))
        return true;
    if (json_is_string(v)) {
        vec[(*n)++] = json_string_value(v);
        return true;
    }
    char msg[128];
    if (!json_is_array(v)) {
        snprintf(msg, sizeof(msg), "'%s' must be a list of strings", name);
        http_reply_field_error(cx, 400, name, msg);
        return false;
    }
    if (json_array_size(v) > max) {
        snprintf(msg, sizeof(msg), "'%s' cannot have more than %zu entries", name, max);
        http_reply_field_error(cx, 400, name, msg);
        return false;
    }
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
        if (!json_is_string(e) || strlen(json_string_value(e)) != json_string_length(e)) {
            snprintf(msg, sizeof(msg), "'%s' must be a list of strings", name);
            http_reply_field_error(cx, 400, name, msg);
            return false;
        }
        vec[(*n)++] = json_string_value(e);
    }
    return true;
}

static const char *kind_label(enum proc_kind kind)
{
    return kind == PROC_KIND_ASYNC_PROFILER ? "async-profiler task" : "pprof task";
}

static void create_kind(struct http_ctx *cx, enum proc_kind kind)
{
    json_t *body = http_read_json(cx);
    if (!body)
        return;
    const char **inst = NULL;
    const char *events[8];
    struct proc_request r = {0};
    if (!json_is_object(body)) {
        http_reply_error(cx, 400, "request body must be a JSON object");
        goto out;
    }
    json_t *sv = json_object_get(body, "service");
    if (sv && !json_is_null(sv) && !json_is_string(sv)) {
        http_reply_field_error(cx, 400, "service", "'service' must be a string");
        goto out;
    }
    r.service = sv ? json_string_value(sv) : NULL;
    inst = skpx_calloc(PROC_MAX_INSTANCES + 1, sizeof(*inst));
    if (!inst) {
        http_reply_error(cx, 500, "out of memory");
        goto out;
    }
    if (!member_strs(cx, body, "serviceInstanceIds", inst, PROC_MAX_INSTANCES + 1,
                     &r.n_instances) ||
        !member_strs(cx, body, "events", events, 8, &r.n_events) ||
        !http_body_int(cx, body, "duration", false, &r.duration) ||
        !http_body_int(cx, body, "dumpPeriod", false, &r.dump_period) ||
        !http_body_int(cx, body, "samplingRate", false, &r.sampling_hz))
        goto out;
    json_t *xa = json_object_get(body, "execArgs");
    if (xa && !json_is_null(xa) && !json_is_string(xa)) {
        http_reply_field_error(cx, 400, "execArgs", "'execArgs' must be a string");
        goto out;
    }
    r.exec_args = kind == PROC_KIND_ASYNC_PROFILER && xa ? json_string_value(xa) : NULL;
    r.instances = inst;
    r.events = events;
    struct proc_error e = {0};
    char *id = NULL;
    skp_err err = proc_task_create(cx->api->store, kind, &r, http_now(cx->api), &e, &id);
    if ((err == SKP_EINVAL || err == SKP_EEXIST) && e.reason) {
        http_reply_json(cx, 400,
                        json_pack("{s:s,s:s?}", "errorReason", e.reason, "field", e.field));
        goto out;
    }
    if (err) {
        http_reply_store_error(cx, err, kind_label(kind));
        goto out;
    }
    SKPX_INFO("%s %s created: service=%s event=%s duration=%" PRId64 "%s", kind_label(kind), id,
              r.service, r.events[0], r.duration, kind == PROC_KIND_PPROF ? "min" : "s");
    http_reply_json(cx, 201, json_pack("{s:s}", "id", id));
    skpx_free(id);
out:
    skpx_free(inst);
    json_decref(body);
}

void http_pprof_create(struct http_ctx *cx)
{
    create_kind(cx, PROC_KIND_PPROF);
}

void http_async_create(struct http_ctx *cx)
{
    create_kind(cx, PROC_KIND_ASYNC_PROFILER);
}

/* An async-profiler task: events as a list, duration in seconds, execArgs. */
static json_t *async_task_json(const struct proc_task *t, json_t *ids, int64_t now)
{
    json_t *ev = json_array();
    for (const char *p = t->events; ev && p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        json_array_append_new(ev, json_stringn(p, len));
        p += len + (e ? 1 : 0);
    }
    return json_pack("{s:s,s:s,s:o,s:b,s:o,s:I,s:s?,s:I,s:s}", "id", t->id, "service", t->service,
                     "serviceInstanceIds", ids ? ids : json_array(), "allLiveInstances",
                     t->all_live, "events", ev ? ev : json_array(), "duration",
                     (json_int_t)t->duration_s, "execArgs", t->exec_args, "createTime",
                     (json_int_t)t->create_time, "status", proc_task_status(t, now));
}

static json_t *task_json_base(const struct proc_task *t, int64_t now)
{
    json_t *ids = json_array();
    for (size_t i = 0; ids && i < t->n_instances; i++)
        json_array_append_new(ids, json_string(t->instances[i]));
    if (t->kind == PROC_KIND_ASYNC_PROFILER)
        return async_task_json(t, ids, now);
    return json_pack("{s:s,s:s,s:o,s:b,s:s,s:I,s:I,s:I,s:I,s:s}", "id", t->id, "service",
                     t->service, "serviceInstanceIds", ids ? ids : json_array(), "allLiveInstances",
                     t->all_live, "events", t->events, "duration", (json_int_t)(t->duration_s / 60),
                     "dumpPeriod", (json_int_t)t->dump_period, "samplingRate",
                     (json_int_t)t->sampling_hz, "createTime", (json_int_t)t->create_time, "status",
                     proc_task_status(t, now));
}

/* The task object, with "cancelledTime" when it was cancelled. */
static json_t *task_json(const struct proc_task *t, int64_t now)
{
    json_t *j = task_json_base(t, now);
    if (j && t->cancelled_ms)
        json_object_set_new(j, "cancelledTime", json_integer((json_int_t)t->cancelled_ms));
    return j;
}

/* Adds "logs", "progress" and "files" to a task object. */
static skp_err decorate(struct store *st, const struct proc_task *t, json_t *j)
{
    struct proc_log *logs = NULL;
    size_t n_logs = 0;
    struct proc_file *files = NULL;
    size_t n_files = 0;
    struct proc_progress *prog = NULL;
    skp_err err = store_proc_list_logs(st, t->id, &logs, &n_logs);
    if (!err)
        err = store_proc_list_files(st, t->id, &files, &n_files);
    if (err)
        goto out;
    size_t cap = t->n_instances + n_logs + 1, n_prog = 0;
    prog = skpx_calloc(cap, sizeof(*prog));
    if (!prog) {
        err = SKP_ENOMEM;
        goto out;
    }
    proc_task_progress(t, logs, n_logs, prog, cap, &n_prog);
    json_t *jl = json_array(), *jp = json_array(), *jf = json_array();
    for (size_t i = 0; jl && i < n_logs; i++)
        json_array_append_new(jl,
                              json_pack("{s:s,s:s,s:I,s:s?}", "instanceName", logs[i].instance,
                                        "operationType", logs[i].op, "operationTime",
                                        (json_int_t)logs[i].time_ms, "message", logs[i].message));
    for (size_t i = 0; jp && i < n_prog; i++) {
        const struct proc_progress *p = &prog[i];
        const char *state = p->uploaded_ms   ? "uploaded"
                            : p->failed_ms   ? "failed"
                            : p->notified_ms ? "notified"
                                             : "waiting";
        json_array_append_new(
            jp, json_pack("{s:s,s:s,s:I,s:I,s:I,s:s?,s:s?}", "instanceName", p->instance, "state",
                          state, "notifiedTime", (json_int_t)p->notified_ms, "uploadedTime",
                          (json_int_t)p->uploaded_ms, "failedTime", (json_int_t)p->failed_ms,
                          "failedOperation", p->failed_op, "failedReason", p->failed_reason));
    }
    for (size_t i = 0; jf && i < n_files; i++)
        json_array_append_new(jf, json_pack("{s:I,s:s,s:I,s:I}", "id", (json_int_t)files[i].id,
                                            "instanceName", files[i].instance, "time",
                                            (json_int_t)files[i].time_ms, "size",
                                            (json_int_t)files[i].size_bytes));
    if (!jl || !jp || !jf) {
        json_decref(jl);
        json_decref(jp);
        json_decref(jf);
        err = SKP_ENOMEM;
        goto out;
    }
    json_object_set_new(j, "logs", jl);
    json_object_set_new(j, "progress", jp);
    json_object_set_new(j, "files", jf);
out:
    skpx_free(prog);
    store_proc_logs_free(logs, n_logs);
    store_proc_files_free(files, n_files);
    return err;
}

static void list_kind(struct http_ctx *cx, enum proc_kind kind)
{
    const char *service = http_query(cx, "service");
    struct proc_task *v = NULL;
    size_t n = 0;
    skp_err err = store_proc_list_tasks(cx->api->store, kind, service && *service ? service : NULL,
                                        0, &v, &n);
    if (err) {
        http_reply_store_error(cx, err, kind_label(kind));
        return;
    }
    json_t *list = json_array();
    int64_t now = http_now(cx->api);
    for (size_t i = 0; list && !err && i < n; i++) {
        json_t *j = task_json(&v[i], now);
        err = j ? decorate(cx->api->store, &v[i], j) : SKP_ENOMEM;
        if (!err)
            err = http_task_trigger(cx, j);
        if (j)
            json_array_append_new(list, j);
    }
    store_proc_tasks_free(v, n);
    http_reply_answer(cx, !list && !err ? SKP_ENOMEM : err, list, kind_label(kind));
}

void http_pprof_list(struct http_ctx *cx)
{
    list_kind(cx, PROC_KIND_PPROF);
}

void http_async_list(struct http_ctx *cx)
{
    list_kind(cx, PROC_KIND_ASYNC_PROFILER);
}

static void get_kind(struct http_ctx *cx, const char *id, enum proc_kind kind)
{
    struct proc_task t = {0};
    skp_err err = store_proc_get_task(cx->api->store, id, &t);
    if (!err && t.kind != kind)
        err = SKP_ENOTFOUND;
    if (err) {
        store_proc_task_cleanup(&t);
        http_reply_store_error(cx, err, kind_label(kind));
        return;
    }
    json_t *j = task_json(&t, http_now(cx->api));
    err = j ? decorate(cx->api->store, &t, j) : SKP_ENOMEM;
    if (!err)
        err = http_task_trigger(cx, j); /* "triggeredBy" when a policy started it */
    store_proc_task_cleanup(&t);
    http_reply_answer(cx, err, j, kind_label(kind));
}

void http_pprof_get(struct http_ctx *cx, const char *id)
{
    get_kind(cx, id, PROC_KIND_PPROF);
}

void http_async_get(struct http_ctx *cx, const char *id)
{
    get_kind(cx, id, PROC_KIND_ASYNC_PROFILER);
}

/* ---------------- one stored file ---------------- */

struct file_job {
    struct http_job base; /* base.id: the task's */
    int64_t file_id;
    enum proc_kind kind;
};

static void filename(char *out, size_t cap, const char *prefix, const char *task_id,
                     const char *what, const char *ext)
{
    int n = snprintf(out, cap, "%s", prefix);
    size_t k = n > 0 ? (size_t)n : 0;
    for (const char *p = task_id; *p && k + 64 < cap && k < 120; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '-' || c == '_';
        out[k++] = ok ? c : '_';
    }
    snprintf(out + k, cap - k, "-%s.%s", what, ext);
}

void http_pprof_filename(char *out, size_t cap, const char *task_id, const char *what,
                         const char *ext)
{
    filename(out, cap, "skyprof-pprof-", task_id, what, ext);
}

void http_async_filename(char *out, size_t cap, const char *task_id, const char *what,
                         const char *ext)
{
    filename(out, cap, "skyprof-jfr-", task_id, what, ext);
}

static void file_run(struct http_job *j, struct store *st)
{
    struct file_job *f = (struct file_job *)j;
    uint8_t *data = NULL;
    size_t len = 0;
    skp_err err = store_proc_get_file(st, f->base.id, f->file_id, &data, &len, NULL);
    if (err) {
        http_job_set_store_error(j, err, "file");
        return;
    }
    char what[32], fname[192];
    snprintf(what, sizeof(what), "file%" PRId64, f->file_id);
    if (f->kind == PROC_KIND_ASYNC_PROFILER)
        http_async_filename(fname, sizeof(fname), f->base.id, what, "jfr");
    else
        http_pprof_filename(fname, sizeof(fname), f->base.id, what, "pb.gz");
    http_response_bytes(&j->res, 200, "application/octet-stream", (char *)data, len);
    snprintf(j->res.disposition, sizeof(j->res.disposition), "attachment; filename=\"%s\"", fname);
}

static void file_kind(struct http_ctx *cx, const char *id, const char *file_id, enum proc_kind kind)
{
    char *end = NULL;
    long long fid = strtoll(file_id, &end, 10);
    if (!*file_id || *end || fid <= 0) {
        http_reply_error(cx, 404, "no such file: %s", file_id);
        return;
    }
    struct file_job *f = http_job_new(cx, sizeof(*f), file_run, http_job_free);
    if (!f || !http_job_strdup(cx, &f->base, &f->base.id, id))
        return;
    f->file_id = fid;
    f->kind = kind;
    http_job_dispatch(cx, &f->base);
}

void http_pprof_file(struct http_ctx *cx, const char *id, const char *file_id)
{
    file_kind(cx, id, file_id, PROC_KIND_PPROF);
}

void http_async_file(struct http_ctx *cx, const char *id, const char *file_id)
{
    file_kind(cx, id, file_id, PROC_KIND_ASYNC_PROFILER);
}
