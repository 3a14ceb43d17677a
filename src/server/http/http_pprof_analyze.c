/* http_pprof_analyze.c - analysis and merged downloads of a pprof task's stored files, as HTTP
 * worker jobs (files are decoded and merged off the event loop; http_proc_analyze.h):
 *   GET /api/v1/pprof/tasks/{id}/analyze?instances=a,b&sampleType=cpu&granularity=lines|functions
 *   GET /api/v1/pprof/tasks/{id}/download?format=pprof|collapsed|speedscope|html&(same filters)
 * A file that does not decode is reported in "errors" and left out; the others still merge. */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "server/analysis/analyzer.h"
#include "server/http/http_int.h"
#include "server/http/http_pprof.h"
#include "server/http/http_proc_analyze.h"
#include "server/analysis/pprof_analyze.h"
#include "server/formats/pprof_decode.h"

_Static_assert(PPROF_ERR_MAX <= HTTP_PROC_WHY_MAX, "a decoder's reason fits");

struct pa_job {
    struct http_proc_job proc;
    char *sample_type; /* NULL = the profiles' default */
    bool by_function;
};

static skp_err pa_begin(const struct http_proc_job *j, const struct proc_task *t, void **acc)
{
    (void)t;
    const struct pa_job *p = (const struct pa_job *)j;
    struct pprof_analyze *an = NULL;
    skp_err err = pprof_analyze_new(p->sample_type, p->by_function, &an);
    *acc = an;
    return err;
}

/* Decodes one file and merges it. */
static skp_err pa_add(void *acc, const uint8_t *buf, size_t len, char *why, bool *bad_file)
{
    struct pprof_profile *prof = NULL;
    skp_err err = pprof_decode(buf, len, 0, &prof, why);
    if (err) {
        *bad_file = err != SKP_ENOMEM;
        return err;
    }
    err = pprof_analyze_add(acc, prof);
    pprof_free(prof);
    return err;
}

static skp_err pa_finish(void *acc, struct analysis **out)
{
    return pprof_analyze_finish(acc, out);
}

static void pa_too_big(struct http_job *j)
{
    http_job_set_error(j, 413, "the merged profile has more than %u tree nodes",
                       (unsigned)PPROF_ANALYZE_MAX_NODES);
}

static void pa_describe(void *acc, const struct http_proc_job *j, const struct proc_task *t,
                        char *title, struct export_meta *meta, char *fname)
{
    const struct pprof_analyze *an = acc;
    snprintf(title, HTTP_PROC_TITLE_MAX, "pprof task %.200s %.40s (%.80s)", t->id, t->events,
             pprof_analyze_type(an));
    meta->title = title;
    meta->task_id = t->id;
    meta->time_ms = t->create_time;
    meta->value_type = pprof_analyze_type(an)[0] ? pprof_analyze_type(an) : "samples";
    meta->value_unit = pprof_analyze_unit(an)[0] ? pprof_analyze_unit(an) : "count";
    http_pprof_filename(fname, HTTP_PROC_FNAME_MAX, t->id, "merged", export_file_ext(j->format));
}

static skp_err pa_annotate(void *acc, const struct http_proc_job *j, const struct proc_task *t,
                           const struct analysis *a, json_t *body)
{
    (void)j;
    (void)a;
    const struct pprof_analyze *an = acc;
    const char *const *types = NULL;
    size_t n_types = pprof_analyze_types(an, &types);
    json_t *jt = json_array();
    for (size_t i = 0; jt && i < n_types; i++)
        json_array_append_new(jt, json_string(types[i]));
    if (!jt)
        return SKP_ENOMEM;
    int64_t total = 0;
    uint64_t n_samples = 0;
    size_t n_skipped = 0;
    pprof_analyze_totals(an, &total, &n_samples, &n_skipped);
    json_object_set_new(body, "taskId", json_string(t->id));
    json_object_set_new(body, "event", json_string(t->events));
    json_object_set_new(body, "sampleType", json_string(pprof_analyze_type(an)));
    json_object_set_new(body, "unit", json_string(pprof_analyze_unit(an)));
    json_object_set_new(body, "sampleTypes", jt);
    json_object_set_new(body, "total", json_integer((json_int_t)total));
    json_object_set_new(body, "samples", json_integer((json_int_t)n_samples));
    json_object_set_new(body, "filesWithoutSampleType", json_integer((json_int_t)n_skipped));
    return SKP_OK;
}

static const char *pa_unit(void *acc)
{
    const char *unit = pprof_analyze_unit(acc);
    return unit[0] ? unit : "count";
}

static void pa_free(void *acc)
{
    pprof_analyze_free(acc);
}

static void pa_job_cleanup(struct http_proc_job *j)
{
    skpx_free(((struct pa_job *)j)->sample_type);
}

static const struct http_proc_format pprof_format = {
    .kind = PROC_KIND_PPROF,
    .task_what = "pprof task",
    .analysis_what = "pprof analysis",
    .file_sizes = false,
    .begin = pa_begin,
    .add = pa_add,
    .finish = pa_finish,
    .reply_too_big = pa_too_big,
    .describe = pa_describe,
    .annotate = pa_annotate,
    .unit = pa_unit,
    .free = pa_free,
    .job_cleanup = pa_job_cleanup,
};

struct http_proc_job *http_pprof_job_new(const char *task_id, const char *inst,
                                         const char *sample_type, bool by_function)
{
    struct pa_job *p = skpx_calloc(1, sizeof(*p));
    bool ok = p && http_proc_job_init(&p->proc, &pprof_format, task_id, inst) &&
              (!sample_type || !*sample_type || (p->sample_type = skpx_strdup(sample_type)));
    if (!ok) {
        http_proc_job_free(p ? &p->proc : NULL);
        return NULL;
    }
    p->by_function = by_function;
    return &p->proc;
}

static void dispatch(struct http_ctx *cx, const char *id, bool download)
{
    enum export_format f;
    bool readable;
    if (!http_proc_query_download(cx, download, &f, &readable))
        return;
    const char *inst = http_query(cx, "instances");
    const char *type = http_query(cx, "sampleType");
    bool by_function = false;
    if (!http_proc_query_instances(cx, inst) ||
        !http_query_either(cx, "granularity", "lines", "functions", &by_function))
        return;
    struct http_proc_job *j = http_pprof_job_new(id, inst, type, by_function);
    if (http_proc_job_ready(cx, j, download, f, readable))
        http_proc_job_dispatch(cx, j);
}

void http_pprof_analyze(struct http_ctx *cx, const char *id)
{
    dispatch(cx, id, false);
}

void http_pprof_download(struct http_ctx *cx, const char *id)
{
    dispatch(cx, id, true);
}
