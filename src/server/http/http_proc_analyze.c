/* http_proc_analyze.c - one worker job for "analyze (or download) the stored files of a process
 * profiling task", pprof and JFR alike; the format's parts come from its struct
 * http_proc_format (http_proc_analyze.h). Files are read from the store one at a time, so a
 * job holds at most one file's bytes besides the format's accumulator. */
#include "server/http/http_proc_analyze.h"

#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "server/analysis/analyzer.h"
#include "server/http/http_int.h"

bool http_proc_query_download(struct http_ctx *cx, bool download, enum export_format *format,
                              bool *readable)
{
    *format = EXPORT_JSON;
    *readable = true;
    if (!download)
        return true;
    if (!http_query_names(cx, readable))
        return false;
    const char *s = http_query(cx, "format");
    if (!s)
        s = "pprof";
    if (export_format_parse(s, format) || *format == EXPORT_JSON) {
        http_reply_field_error(cx, 400, "format",
                               "format must be one of pprof, collapsed, speedscope, html");
        return false;
    }
    return true;
}

bool http_proc_query_instances(struct http_ctx *cx, const char *inst)
{
    if (inst && strlen(inst) > HTTP_PROC_FILTER_MAX) {
        http_reply_field_error(cx, 400, "instances", "instances filter too long");
        return false;
    }
    return true;
}

bool http_proc_job_init(struct http_proc_job *j, const struct http_proc_format *fmt,
                        const char *task_id, const char *inst)
{
    j->fmt = fmt;
    j->format = EXPORT_JSON;
    j->readable_names = true;
    return (j->task_id = skpx_strdup(task_id)) &&
           (!inst || !*inst || (j->instances = skpx_strdup(inst)));
}

bool http_proc_job_ready(struct http_ctx *cx, struct http_proc_job *j, bool download,
                         enum export_format format, bool readable)
{
    if (!j) {
        http_reply_error(cx, 500, "out of memory");
        return false;
    }
    j->download = download;
    j->format = format;
    j->readable_names = readable;
    return true;
}

void http_proc_job_free(struct http_proc_job *j)
{
    if (!j)
        return;
    j->fmt->job_cleanup(j);
    SKPX_FREE_ALL(j->task_id, j->instances, j);
}

static void job_destroy(struct http_job *j)
{
    http_proc_job_free((struct http_proc_job *)j);
}

skp_err http_proc_get_task(struct store *st, const struct http_proc_format *fmt, const char *id,
                           struct proc_task *t)
{
    skp_err err = store_proc_get_task(st, id, t);
    if (!err && t->kind != fmt->kind)
        err = SKP_ENOTFOUND;
    return err;
}

bool http_proc_load_task(struct http_proc_job *j, struct store *st, struct proc_task *t)
{
    skp_err err = http_proc_get_task(st, j->fmt, j->task_id, t);
    if (err)
        http_job_set_store_error(&j->base, err, j->fmt->task_what);
    return !err;
}

/* Lists file `f` in `used`, or with the reason `why` in `errors`. */
static void list_file(const struct http_proc_job *j, const struct proc_file *f, const char *why,
                      json_t *used, json_t *errors)
{
    if (why) {
        json_array_append_new(errors, json_pack("{s:I,s:s,s:s}", "fileId", (json_int_t)f->id,
                                                "instanceName", f->instance, "error", why));
        return;
    }
    json_t *entry =
        j->fmt->file_sizes
            ? json_pack("{s:I,s:s,s:I}", "id", (json_int_t)f->id, "instanceName", f->instance,
                        "size", (json_int_t)f->size_bytes)
            : json_pack("{s:I,s:s}", "id", (json_int_t)f->id, "instanceName", f->instance);
    json_array_append_new(used, entry);
}

skp_err http_proc_add_files(struct store *st, const struct http_proc_job *j, http_proc_add_cb add,
                            void *acc, json_t *used, json_t *errors)
{
    struct proc_file *files = NULL;
    size_t n = 0;
    skp_err err = store_proc_list_files(st, j->task_id, &files, &n);
    if (err)
        return err;
    for (size_t i = 0; i < n && !err; i++) {
        if (!http_instance_chosen(j->instances, files[i].instance))
            continue;
        uint8_t *data = NULL;
        size_t len = 0;
        err = store_proc_get_file(st, j->task_id, files[i].id, &data, &len, NULL);
        if (err)
            break;
        char why[HTTP_PROC_WHY_MAX] = "";
        bool bad_file = false;
        err = add(acc, data, len, why, &bad_file);
        skpx_free(data);
        if (bad_file)
            err = SKP_OK;
        if (!err && used)
            list_file(j, &files[i], bad_file ? why : NULL, used, errors);
    }
    store_proc_files_free(files, n);
    return err;
}

skp_err http_proc_analysis(struct store *st, const struct http_proc_job *j,
                           const struct proc_task *t, void **acc, struct analysis **out,
                           json_t *used, json_t *errors)
{
    *out = NULL;
    skp_err err = j->fmt->begin(j, t, acc);
    if (!err)
        err = http_proc_add_files(st, j, j->fmt->add, *acc, used, errors);
    if (!err)
        err = j->fmt->finish(*acc, out);
    return err;
}

/* The export of `a` as the job's download. */
static void reply_download(struct http_proc_job *j, void *acc, const struct proc_task *t,
                           const struct analysis *a)
{
    char title[HTTP_PROC_TITLE_MAX] = "", fname[HTTP_PROC_FNAME_MAX] = "";
    struct export_meta meta = {0};
    j->fmt->describe(acc, j, t, title, &meta, fname);
    meta.readable_names = j->readable_names;
    uint8_t *buf = NULL;
    size_t len = 0;
    skp_err err = export_render(a, j->format, &meta, &buf, &len);
    if (err) {
        http_job_set_error(&j->base, 500, "export failed: %s", skp_strerror(err));
        return;
    }
    http_response_bytes(&j->base.res, 200, export_content_type(j->format), (char *)buf, len);
    snprintf(j->base.res.disposition, sizeof(j->base.res.disposition),
             "attachment; filename=\"%s\"", fname);
}

/* The tree of `a` as JSON with the format's fields, then "files" and "errors" (both stolen). */
static void reply_json(struct http_proc_job *j, void *acc, const struct proc_task *t,
                       const struct analysis *a, json_t *used, json_t *errors)
{
    json_t *body = analysis_to_json(a);
    if (!body || j->fmt->annotate(acc, j, t, a, body)) {
        json_decref(body);
        json_decref(used);
        json_decref(errors);
        http_job_set_error(&j->base, 500, "out of memory");
        return;
    }
    json_object_set_new(body, "files", used);
    json_object_set_new(body, "errors", errors);
    http_job_set_json(&j->base, 200, body);
}

static void job_run(struct http_job *hj, struct store *st)
{
    struct http_proc_job *j = (struct http_proc_job *)hj;
    const struct http_proc_format *fmt = j->fmt;
    struct proc_task t = {0};
    if (!http_proc_load_task(j, st, &t)) {
        store_proc_task_cleanup(&t);
        return;
    }
    void *acc = NULL;
    struct analysis *a = NULL;
    json_t *used = json_array(), *errors = json_array();
    skp_err err =
        used && errors ? http_proc_analysis(st, j, &t, &acc, &a, used, errors) : SKP_ENOMEM;
    if (err == SKP_ETOOBIG)
        fmt->reply_too_big(hj);
    else if (err)
        http_job_set_store_error(hj, err, fmt->analysis_what);
    else if (j->download)
        reply_download(j, acc, &t, a);
    else {
        reply_json(j, acc, &t, a, used, errors);
        used = errors = NULL;
    }
    json_decref(used);
    json_decref(errors);
    analysis_free(a);
    fmt->free(acc);
    store_proc_task_cleanup(&t);
}

void http_proc_job_dispatch(struct http_ctx *cx, struct http_proc_job *j)
{
    if (!j->base.run)
        j->base.run = job_run;
    j->base.destroy = job_destroy;
    http_job_dispatch(cx, &j->base);
}
