/* http_ebpf.c - processes registered through EBPFProcessService, and the analysis of the stacks
 * a triggered task's agents uploaded through collectProfilingData (see http_ebpf.h).
 *
 * Design: the analysis is analysis/ebpf_analyze.h's (GraphQL's analysisEBPFProfilingResult
 * calls it too), run as a worker job; OFF_CPU stacks are weighted by their duration here. */
#include "server/http/http_ebpf.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "server/analysis/ebpf_analyze.h"
#include "server/analysis/pprof_analyze.h"
#include "server/export/export.h"
#include "server/formats/utf8.h"
#include "server/http/http_int.h"
#include "server/http/http_worker.h"
#include "server/store/store_ebpf.h"

/* ---- processes ------------------------------------------------------------------------------ */
static json_t *lines_json(const char *text, bool pairs)
{
    json_t *out = pairs ? json_object() : json_array();
    if (!out)
        return NULL;
    for (const char *p = text; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char *line = skpx_strndup(p, n);
        if (!line)
            break;
        if (pairs) {
            char *tab = strchr(line, '\t');
            if (tab) {
                *tab = '\0';
                char *key = skp_utf8_sanitize(line);
                if (key)
                    json_object_set_new(out, key, skp_json_str(tab + 1));
                skpx_free(key);
            }
        } else {
            json_array_append_new(out, skp_json_str(line));
        }
        skpx_free(line);
        p += n + (e ? 1 : 0);
    }
    return out;
}

static skp_err process_push(void *ud, const struct store_ebpf_process *p)
{
    return http_push_json(
        ud, json_pack("{s:o, s:o, s:o, s:o, s:o, s:i, s:o, s:o, s:o, s:I, s:I}", "id",
                      skp_json_str(p->id), "serviceName", skp_json_str(p->service), "instanceName",
                      skp_json_str(p->instance), "processName", skp_json_str(p->process_name),
                      "layer", skp_json_str(p->layer), "pid", (int)p->pid, "labels",
                      lines_json(p->labels, false), "properties", lines_json(p->properties, true),
                      "agentId", skp_json_str(p->agent_id), "firstSeen", (json_int_t)p->first_ms,
                      "lastPing", (json_int_t)p->last_ping_ms));
}

void http_ebpf_processes(struct http_ctx *cx)
{
    const char *service = http_query(cx, "service");
    json_t *list = json_array();
    skp_err err =
        list ? store_ebpf_list_processes(cx->api->store, service && *service ? service : NULL,
                                         process_push, list)
             : SKP_ENOMEM;
    http_reply_answer(cx, err, list, "eBPF processes");
}

/* ---- analysis ------------------------------------------------------------------------------- */
struct ea_job {
    struct http_job base;
    char *task_id;
    char *process_id; /* NULL = every process */
    int64_t from_ms, to_ms;
    bool download;
    bool readable_names; /* names=short (the default) */
    enum export_format format;
};

static void ea_destroy(struct http_job *j)
{
    struct ea_job *p = (struct ea_job *)j;
    SKPX_FREE_ALL(p->task_id, p->process_id, p);
}

static void ea_run(struct http_job *j, struct store *st)
{
    struct ea_job *p = (struct ea_job *)j;
    struct ebpf_build *b = NULL;
    struct ebpf_result r = {0};
    skp_err err = ebpf_build_new(&b);
    if (!err)
        err = ebpf_build_scan(b, st, p->task_id, p->process_id, p->from_ms, p->to_ms);
    if (err) {
        http_job_set_store_error(j, err, "eBPF stacks");
        goto out;
    }
    err = ebpf_build_finish(b, true, &r);
    if (err == SKP_ENOTFOUND) {
        http_job_set_error(j, 404, "no profile data for task %.200s", p->task_id);
        goto out;
    }
    if (err == SKP_ETOOBIG) {
        http_job_set_error(j, 413, "the profile has more than %u tree nodes",
                           (unsigned)PPROF_ANALYZE_MAX_NODES);
        goto out;
    }
    if (err) {
        http_job_set_error(j, 500, "analysis failed: %s", skp_strerror(err));
        goto out;
    }
    if (p->download) {
        char title[512];
        snprintf(title, sizeof(title), "task %.200s %s", p->task_id,
                 r.on_cpu ? "ON_CPU" : "OFF_CPU");
        struct export_meta meta = {
            .title = title,
            .task_id = p->task_id,
            .time_ms = r.first_ms,
            .value_type = r.sample_type,
            .value_unit = r.unit,
            .readable_names = p->readable_names,
        };
        uint8_t *buf = NULL;
        size_t len = 0;
        err = export_render(r.analysis, p->format, &meta, &buf, &len);
        if (err) {
            http_job_set_error(j, 500, "export failed: %s", skp_strerror(err));
            goto out;
        }
        http_response_bytes(&j->res, 200, export_content_type(p->format), (char *)buf, len);
        snprintf(j->res.disposition, sizeof(j->res.disposition),
                 "attachment; filename=\"ebpf-task.%s\"", export_file_ext(p->format));
        goto out;
    }
    json_t *body = analysis_to_json(r.analysis);
    if (!body) {
        http_job_set_error(j, 500, "out of memory");
        goto out;
    }
    json_object_set_new(body, "taskId", skp_json_str(p->task_id));
    json_object_set_new(body, "target", json_string(r.on_cpu ? "ON_CPU" : "OFF_CPU"));
    json_object_set_new(body, "sampleType", json_string(r.sample_type));
    json_object_set_new(body, "unit", json_string(r.unit));
    json_object_set_new(body, "total", json_integer((json_int_t)r.total));
    json_object_set_new(body, "stacks", json_integer((json_int_t)r.n_stacks));
    json_object_set_new(body, "partial", json_boolean(r.partial));
    json_object_set_new(body, "firstUpload", json_integer((json_int_t)r.first_ms));
    json_object_set_new(body, "lastUpload", json_integer((json_int_t)r.last_ms));
    json_object_set_new(body, "processes", r.processes);
    r.processes = NULL;
    http_job_set_json(j, 200, body);
out:
    ebpf_result_cleanup(&r);
    ebpf_build_free(b);
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
    bool has_from = false, has_to = false;
    int64_t from = 0, to = INT64_MAX;
    if (!http_query_int(cx, "from", &has_from, &from) || !http_query_int(cx, "to", &has_to, &to))
        return; /* answered 400 */
    if (!has_from)
        from = 0;
    if (!has_to)
        to = INT64_MAX;
    const char *proc = http_query(cx, "processId");
    struct ea_job *p = http_job_new(cx, sizeof(*p), ea_run, ea_destroy);
    if (!p || !http_job_strdup(cx, &p->base, &p->task_id, id) ||
        (proc && *proc && !http_job_strdup(cx, &p->base, &p->process_id, proc)))
        return;
    p->from_ms = from;
    p->to_ms = to;
    p->download = download;
    p->format = f;
    p->readable_names = readable;
    http_job_dispatch(cx, &p->base);
}

void http_ebpf_analyze(struct http_ctx *cx, const char *task_id)
{
    dispatch(cx, task_id, false);
}

void http_ebpf_download(struct http_ctx *cx, const char *task_id)
{
    dispatch(cx, task_id, true);
}
