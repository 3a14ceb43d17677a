/* http_pprof_analyze.c - analysis and merged downloads of a pprof task's stored files, as HTTP
 * worker jobs (files are decoded and merged off the event loop):
 *   GET /api/v1/pprof/tasks/{id}/analyze?instances=a,b&sampleType=cpu&granularity=lines|functions
 *   GET /api/v1/pprof/tasks/{id}/download?format=pprof|collapsed|speedscope|html&(same filters)
 * A file that does not decode is reported in "errors" and left out; the others still merge. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "server/analyzer.h"
#include "server/export.h"
#include "server/http_int.h"
#include "server/http_pprof.h"
#include "server/pprof_analyze.h"
#include "server/pprof_decode.h"
#include "server/store_proc.h"

/* Longest instances filter accepted. */
#define FILTER_MAX 65536

struct pa_job {
    struct http_job base;
    char *task_id;
    char *instances;   /* comma-separated filter, NULL = all */
    char *sample_type; /* NULL = the profiles' default */
    bool by_function;
    bool download;
    bool readable_names; /* names=short (the default) */
    enum export_format format;
};

static void pa_destroy(struct http_job *j)
{
    struct pa_job *p = (struct pa_job *)j;
    skpx_free(p->task_id);
    skpx_free(p->instances);
    skpx_free(p->sample_type);
    skpx_free(p);
}

/* Decodes and merges the chosen files into *out; per-file problems go into `errors`. */
static skp_err merge_files(struct store *st, const struct pa_job *p, struct pprof_analyze *an,
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
        struct pprof_profile *prof = NULL;
        char why[PPROF_ERR_MAX];
        skp_err de = pprof_decode(data, len, 0, &prof, why);
        skpx_free(data);
        if (de == SKP_ENOMEM) {
            err = de;
            break;
        }
        if (de) {
            json_array_append_new(errors,
                                  json_pack("{s:I,s:s,s:s}", "fileId", (json_int_t)files[i].id,
                                            "instanceName", files[i].instance, "error", why));
            continue;
        }
        err = pprof_analyze_add(an, prof);
        pprof_free(prof);
        if (!err)
            json_array_append_new(used, json_pack("{s:I,s:s}", "id", (json_int_t)files[i].id,
                                                  "instanceName", files[i].instance));
    }
    store_proc_files_free(files, n);
    return err;
}

static void pa_run(struct http_job *j, struct store *st)
{
    struct pa_job *p = (struct pa_job *)j;
    struct proc_task t = {0};
    skp_err err = store_proc_get_task(st, p->task_id, &t);
    if (!err && t.kind != PROC_KIND_PPROF)
        err = SKP_ENOTFOUND;
    if (err) {
        store_proc_task_cleanup(&t);
        http_job_set_store_error(j, err, "pprof task");
        return;
    }
    struct pprof_analyze *an = NULL;
    struct analysis *a = NULL;
    json_t *used = json_array(), *errors = json_array();
    err = pprof_analyze_new(p->sample_type, p->by_function, &an);
    if (!err && (!used || !errors))
        err = SKP_ENOMEM;
    if (!err)
        err = merge_files(st, p, an, used, errors);
    if (!err)
        err = pprof_analyze_finish(an, &a);
    if (err == SKP_ETOOBIG) {
        http_job_set_error(j, 413, "the merged profile has more than %u tree nodes",
                           (unsigned)PPROF_ANALYZE_MAX_NODES);
        goto out;
    }
    if (err) {
        http_job_set_store_error(j, err, "pprof analysis");
        goto out;
    }
    if (p->download) {
        char title[512];
        snprintf(title, sizeof(title), "pprof task %.200s %.40s (%.80s)", t.id, t.events,
                 pprof_analyze_type(an));
        struct export_meta meta = {
            .title = title,
            .task_id = t.id,
            .time_ms = t.create_time,
            .value_type = pprof_analyze_type(an)[0] ? pprof_analyze_type(an) : "samples",
            .value_unit = pprof_analyze_unit(an)[0] ? pprof_analyze_unit(an) : "count",
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
        http_pprof_filename(fname, sizeof(fname), t.id, "merged", export_file_ext(p->format));
        http_response_bytes(&j->res, 200, export_content_type(p->format), (char *)buf, len);
        snprintf(j->res.disposition, sizeof(j->res.disposition), "attachment; filename=\"%s\"",
                 fname);
        goto out;
    }
    json_t *body = analysis_to_json(a);
    const char *const *types = NULL;
    size_t n_types = pprof_analyze_types(an, &types);
    json_t *jt = json_array();
    for (size_t i = 0; jt && i < n_types; i++)
        json_array_append_new(jt, json_string(types[i]));
    int64_t total = 0;
    uint64_t n_samples = 0;
    size_t n_skipped = 0;
    pprof_analyze_totals(an, &total, &n_samples, &n_skipped);
    if (!body || !jt) {
        json_decref(body);
        json_decref(jt);
        http_job_set_error(j, 500, "out of memory");
        goto out;
    }
    json_object_set_new(body, "taskId", json_string(t.id));
    json_object_set_new(body, "event", json_string(t.events));
    json_object_set_new(body, "sampleType", json_string(pprof_analyze_type(an)));
    json_object_set_new(body, "unit", json_string(pprof_analyze_unit(an)));
    json_object_set_new(body, "sampleTypes", jt);
    json_object_set_new(body, "total", json_integer((json_int_t)total));
    json_object_set_new(body, "samples", json_integer((json_int_t)n_samples));
    json_object_set_new(body, "filesWithoutSampleType", json_integer((json_int_t)n_skipped));
    json_object_set_new(body, "files", used);
    json_object_set_new(body, "errors", errors);
    used = errors = NULL;
    http_job_set_json(j, 200, body);
out:
    json_decref(used);
    json_decref(errors);
    analysis_free(a);
    pprof_analyze_free(an);
    store_proc_task_cleanup(&t);
}

static void dispatch(struct http_ctx *cx, const char *id, bool download)
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
    const char *type = http_query(cx, "sampleType");
    const char *gran = http_query(cx, "granularity");
    if (inst && strlen(inst) > FILTER_MAX) {
        http_reply_field_error(cx, 400, "instances", "instances filter too long");
        return;
    }
    if (gran && strcmp(gran, "lines") != 0 && strcmp(gran, "functions") != 0) {
        http_reply_field_error(cx, 400, "granularity", "granularity must be lines or functions");
        return;
    }
    struct pa_job *p = skpx_calloc(1, sizeof(*p));
    bool ok = p && (p->task_id = skpx_strdup(id)) &&
              (!inst || !*inst || (p->instances = skpx_strdup(inst))) &&
              (!type || !*type || (p->sample_type = skpx_strdup(type)));
    if (!ok) {
        if (p)
            pa_destroy(&p->base);
        http_reply_error(cx, 500, "out of memory");
        return;
    }
    p->by_function = gran && strcmp(gran, "functions") == 0;
    p->download = download;
    p->format = f;
    p->readable_names = readable;
    p->base.run = pa_run;
    p->base.destroy = pa_destroy;
    http_job_dispatch(cx, &p->base);
}

void http_pprof_analyze(struct http_ctx *cx, const char *id)
{
    dispatch(cx, id, false);
}

void http_pprof_download(struct http_ctx *cx, const char *id)
{
    dispatch(cx, id, true);
}
