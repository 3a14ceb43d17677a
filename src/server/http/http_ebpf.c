/* http_ebpf.c - processes registered through EBPFProcessService, and the analysis of the stacks
 * a triggered task's agents uploaded through collectProfilingData (see http_ebpf.h).
 *
 * Design: the stored stacks (summed per process, kind and symbols by the store) are put into a
 * pprof builder (src/wire/pprof_encode.h), encoded, and analysed by the process-profile code
 * (pprof_decode + pprof_analyze), so these tasks get the same trees, totals and exports as pprof
 * tasks. Sample types: ON_CPU "samples/count" (dumpCount); OFF_CPU "switches/count"
 * (switchCount) and "off_cpu/nanoseconds" (duration, the default). A symbol is one frame. */
#include "server/http/http_ebpf.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "server/analysis/analyzer.h"
#include "server/export/export.h"
#include "server/http/http_int.h"
#include "server/http/http_worker.h"
#include "server/analysis/pprof_analyze.h"
#include "server/formats/pprof_decode.h"
#include "server/store/store_ebpf.h"
#include "server/formats/utf8.h"
#include "wire/pprof_encode.h"

/* Memory budget of the profile built from one task's stacks. */
#define EBPF_PROFILE_BYTES_MAX (256u << 20)

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
    if (err) {
        json_decref(list);
        http_reply_store_error(cx, err, "eBPF processes");
        return;
    }
    http_reply_json(cx, 200, list);
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

struct ea_build {
    struct skpx_pprof *on, *off; /* one builder per kind, created on first use */
    struct skpx_pprof_frame frames[SKPX_PPROF_MAX_FRAMES];
    json_t *processes; /* process id -> {onCpuStacks, offCpuStacks} */
    uint64_t n_stacks;
    int64_t first_ms, last_ms;
    skp_err full; /* SKP_EFULL when a builder ran out of budget */
};

static void ea_destroy(struct http_job *j)
{
    struct ea_job *p = (struct ea_job *)j;
    skpx_free(p->task_id);
    skpx_free(p->process_id);
    skpx_free(p);
}

static skp_err builder_for(struct ea_build *b, enum store_ebpf_kind kind, struct skpx_pprof **out)
{
    struct skpx_pprof **slot = kind == STORE_EBPF_ON_CPU ? &b->on : &b->off;
    if (!*slot) {
        struct skpx_pprof_type on_types[] = {{"samples", "count"}};
        struct skpx_pprof_type off_types[] = {{"switches", "count"}, {"off_cpu", "nanoseconds"}};
        skp_err err = kind == STORE_EBPF_ON_CPU
                          ? skpx_pprof_new(on_types, 1, EBPF_PROFILE_BYTES_MAX, slot)
                          : skpx_pprof_new(off_types, 2, EBPF_PROFILE_BYTES_MAX, slot);
        if (err)
            return err;
    }
    *out = *slot;
    return SKP_OK;
}

static skp_err on_stack(void *ud, const struct store_ebpf_stack *s)
{
    struct ea_build *b = ud;
    struct skpx_pprof *prof = NULL;
    skp_err err = builder_for(b, s->kind, &prof);
    if (err)
        return err;
    size_t n = 0;
    for (const char *p = s->symbols; *p && n < SKPX_PPROF_MAX_FRAMES;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        b->frames[n++] = (struct skpx_pprof_frame){
            .func = len ? p : "?", .func_len = len ? len : 1, .file = "", .file_len = 0};
        p += len + (e ? 1 : 0);
    }
    int64_t values[2] = {s->count, s->duration_ns};
    err = skpx_pprof_add(prof, b->frames, n, values, NULL, 0);
    if (err == SKP_EFULL) {
        b->full = SKP_EFULL;
        return SKP_OK; /* dropped; the answer says the profile is partial */
    }
    if (err)
        return err;
    b->n_stacks++;
    if (!b->first_ms || s->time_ms < b->first_ms)
        b->first_ms = s->time_ms;
    if (s->time_ms > b->last_ms)
        b->last_ms = s->time_ms;
    json_t *pr = json_object_get(b->processes, s->process_id);
    if (!pr) {
        pr = json_pack("{s:I, s:I}", "onCpuStacks", (json_int_t)0, "offCpuStacks", (json_int_t)0);
        if (!pr || json_object_set_new(b->processes, s->process_id, pr))
            return SKP_ENOMEM;
    }
    const char *key = s->kind == STORE_EBPF_ON_CPU ? "onCpuStacks" : "offCpuStacks";
    json_object_set_new(pr, key, json_integer(json_integer_value(json_object_get(pr, key)) + 1));
    return SKP_OK;
}

/* Encodes builder `prof` and analyses it by `type`. */
static skp_err analyse(struct skpx_pprof *prof, const char *type, struct pprof_analyze **an_out,
                       struct analysis **out)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    skp_err err = skpx_pprof_encode(prof, false, &buf, &len);
    if (err)
        return err;
    struct pprof_profile *pp = NULL;
    err = pprof_decode(buf, len, 0, &pp, NULL);
    skpx_free(buf);
    if (!err)
        err = pprof_analyze_new(type, true, an_out);
    if (!err)
        err = pprof_analyze_add(*an_out, pp);
    if (!err)
        err = pprof_analyze_finish(*an_out, out);
    pprof_free(pp);
    return err;
}

static void ea_run(struct http_job *j, struct store *st)
{
    struct ea_job *p = (struct ea_job *)j;
    struct ea_build b = {.processes = json_object()};
    struct pprof_analyze *an = NULL;
    struct analysis *a = NULL;
    skp_err err = b.processes ? store_ebpf_scan_task(st, p->task_id, p->process_id, p->from_ms,
                                                     p->to_ms, on_stack, &b)
                              : SKP_ENOMEM;
    if (err) {
        http_job_set_store_error(j, err, "eBPF stacks");
        goto out;
    }
    if (!b.on && !b.off) {
        http_job_set_error(j, 404, "no profile data for task %.200s", p->task_id);
        goto out;
    }
    /* A task has one target: ON_CPU or OFF_CPU. Should both be present, ON_CPU is shown. */
    bool on = b.on != NULL;
    const char *type = on ? "samples" : "off_cpu";
    err = analyse(on ? b.on : b.off, type, &an, &a);
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
        snprintf(title, sizeof(title), "task %.200s %s", p->task_id, on ? "ON_CPU" : "OFF_CPU");
        struct export_meta meta = {
            .title = title,
            .task_id = p->task_id,
            .time_ms = b.first_ms,
            .value_type = type,
            .value_unit = on ? "count" : "nanoseconds",
            .readable_names = p->readable_names,
        };
        uint8_t *buf = NULL;
        size_t len = 0;
        err = export_render(a, p->format, &meta, &buf, &len);
        if (err) {
            http_job_set_error(j, 500, "export failed: %s", skp_strerror(err));
            goto out;
        }
        http_response_bytes(&j->res, 200, export_content_type(p->format), (char *)buf, len);
        snprintf(j->res.disposition, sizeof(j->res.disposition),
                 "attachment; filename=\"ebpf-task.%s\"", export_file_ext(p->format));
        goto out;
    }
    json_t *body = analysis_to_json(a);
    if (!body) {
        http_job_set_error(j, 500, "out of memory");
        goto out;
    }
    int64_t total = 0;
    uint64_t n_samples = 0;
    size_t n_skipped = 0;
    pprof_analyze_totals(an, &total, &n_samples, &n_skipped);
    json_object_set_new(body, "taskId", skp_json_str(p->task_id));
    json_object_set_new(body, "target", json_string(on ? "ON_CPU" : "OFF_CPU"));
    json_object_set_new(body, "sampleType", json_string(type));
    json_object_set_new(body, "unit", json_string(on ? "count" : "nanoseconds"));
    json_object_set_new(body, "total", json_integer((json_int_t)total));
    json_object_set_new(body, "stacks", json_integer((json_int_t)b.n_stacks));
    json_object_set_new(body, "partial", json_boolean(b.full == SKP_EFULL));
    json_object_set_new(body, "firstUpload", json_integer((json_int_t)b.first_ms));
    json_object_set_new(body, "lastUpload", json_integer((json_int_t)b.last_ms));
    json_object_set_new(body, "processes", b.processes);
    b.processes = NULL;
    http_job_set_json(j, 200, body);
out:
    json_decref(b.processes);
    skpx_pprof_free(b.on);
    skpx_pprof_free(b.off);
    analysis_free(a);
    pprof_analyze_free(an);
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
    struct ea_job *p = skpx_calloc(1, sizeof(*p));
    bool ok = p && (p->task_id = skpx_strdup(id)) &&
              (!proc || !*proc || (p->process_id = skpx_strdup(proc)));
    if (!ok) {
        if (p)
            ea_destroy(&p->base);
        http_reply_error(cx, 500, "out of memory");
        return;
    }
    p->from_ms = from;
    p->to_ms = to;
    p->download = download;
    p->format = f;
    p->readable_names = readable;
    p->base.run = ea_run;
    p->base.destroy = ea_destroy;
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
