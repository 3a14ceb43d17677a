/* graphql_ebpf.c - resolvers of the protocol's eBPF profiling schema (SkyWalking's eBPF
 * Profiling widget and the Continuous Profiling widget's task timeline).
 *
 * skyprofd's eBPF profiles are those of continuous-profiling triggers: an agent (skyprof's, or
 * rover) reports a triggered ON_CPU / OFF_CPU / NETWORK task (ContinuousProfilingService), the
 * trigger is stored with its causes (store_continuous.h, task kind "ebpf") and the agent uploads
 * the stacks (EBPFProfilingService.collectProfilingData, store_ebpf.h). So:
 *   queryEBPFProfilingTasks      the triggers of task kind "ebpf" (trigger type
 *                                CONTINUOUS_PROFILING); FIXED_TIME (the default): none;
 *   queryEBPFProfilingSchedules  one schedule per process that uploaded stacks for the task:
 *                                scheduleId = taskId "_" processId, from the trigger time (or
 *                                the first upload, if earlier) to the latest upload;
 *   analysisEBPFProfilingResult  the schedules' stacks within the time ranges' span, analysed by
 *                                analysis/ebpf_analyze.h (the HTTP API's /api/v1/ebpf analysis):
 *                                one tree per root frame, roots' parentId "0", dumpCount = the
 *                                inclusive value (COUNT: dumps or switches; DURATION: OFF_CPU ns);
 *   queryPrepareCreateEBPFProfilingTaskData  the service's process labels, couldProfiling false;
 *   createEBPFProfilingFixedTimeTask, createEBPFNetworkProfiling, keepEBPFNetworkProfiling
 *                                status false with the reason: skyprofd hands no eBPF task to
 *                                agents (EBPFProfilingService.queryTasks answers none).
 * The store keeps a stack's frames, not which of them were kernel frames: every element is
 * USER_SPACE. */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "server/analysis/ebpf_analyze.h"
#include "server/formats/utf8.h"
#include "server/graphql/graphql.h"
#include "server/store/store_continuous.h"
#include "server/store/store_ebpf.h"

/* Triggers one task listing looks through. */
#define EBPF_TRIGGERS_MAX 10000
/* Processes (schedules) of one task, schedules of one analysis. */
#define EBPF_SCHEDULES_MAX 1000

/* The n bytes at s as a JSON string (invalid UTF-8 replaced); NULL when out of memory. */
static json_t *strn_json(const char *s, size_t n)
{
    char *t = skpx_strndup(s, n);
    json_t *j = t ? skp_json_str(t) : NULL;
    skpx_free(t);
    return j;
}

/* The lines of `text` as a JSON array of strings (empty lines left out). */
static json_t *lines_json(const char *text)
{
    json_t *out = json_array();
    for (const char *s = text ? text : ""; out && *s;) {
        const char *e = strchr(s, '\n');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len && json_array_append_new(out, strn_json(s, len)) != 0) {
            json_decref(out);
            return NULL;
        }
        s += len + (e ? 1 : 0);
    }
    return out;
}

/* ---- processes -------------------------------------------------------------------------------
 */

/* The protocol's Process of a stored process (OAP's shape: ids, VM detect type). */
static json_t *process_json(const struct store_ebpf_process *p)
{
    char sid[GRAPHQL_ID_MAX], iid[GRAPHQL_ID_MAX];
    const char *svc = p->service ? p->service : "", *inst = p->instance ? p->instance : "";
    if (!graphql_service_id(svc, sid, sizeof(sid)) ||
        !graphql_child_id(svc, inst, iid, sizeof(iid)))
        return json_null();
    json_t *attrs = json_array(), *labels = lines_json(p->labels);
    for (const char *s = p->properties ? p->properties : ""; attrs && *s;) {
        const char *e = strchr(s, '\n');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        const char *tab = memchr(s, '\t', len);
        if (tab &&
            json_array_append_new(
                attrs, json_pack("{s:o,s:o}", "name", strn_json(s, (size_t)(tab - s)), "value",
                                 strn_json(tab + 1, len - (size_t)(tab - s) - 1)))) {
            json_decref(attrs);
            attrs = NULL;
        }
        s += len + (e ? 1 : 0);
    }
    json_t *o =
        attrs && labels
            ? json_pack("{s:o,s:o,s:s,s:o,s:s,s:o,s:o,s:s,s:O,s:O}", "id", skp_json_str(p->id),
                        "name", skp_json_str(p->process_name), "serviceId", sid, "serviceName",
                        skp_json_str(svc), "instanceId", iid, "instanceName", skp_json_str(inst),
                        "agentId", skp_json_str(p->agent_id ? p->agent_id : ""), "detectType", "VM",
                        "attributes", attrs, "labels", labels)
            : NULL;
    json_decref(attrs);
    json_decref(labels);
    return o;
}

/* Collects the service's processes: id -> Process, and the union of their labels. */
struct proc_walk {
    json_t *by_id;  /* may be NULL */
    json_t *labels; /* may be NULL: label -> true */
};

static skp_err proc_row(void *ud, const struct store_ebpf_process *p)
{
    struct proc_walk *w = ud;
    if (json_object_size(w->by_id) >= EBPF_SCHEDULES_MAX * 10)
        return SKP_EFULL;
    if (w->by_id && p->id) {
        json_t *o = process_json(p);
        if (!o || (!json_is_null(o) && json_object_set_nocheck(w->by_id, p->id, o) != 0)) {
            json_decref(o);
            return SKP_ENOMEM;
        }
        json_decref(o);
    }
    for (const char *s = p->labels ? p->labels : ""; w->labels && *s;) {
        const char *e = strchr(s, '\n');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        json_t *one = len ? strn_json(s, len) : NULL;
        if (len &&
            (!one || json_object_set_new(w->labels, json_string_value(one), json_true()) != 0)) {
            json_decref(one);
            return SKP_ENOMEM;
        }
        json_decref(one);
        s += len + (e ? 1 : 0);
    }
    return SKP_OK;
}

/* ---- tasks ----------------------------------------------------------------------------------
 */

static const char *const k_cause_types[] = {"PROCESS_CPU", "PROCESS_THREAD_COUNT", "SYSTEM_LOAD",
                                            "HTTP_ERROR_RATE", "HTTP_AVG_RESPONSE_TIME"};

static bool protocol_cause(const char *type)
{
    for (size_t i = 0; type && i < sizeof(k_cause_types) / sizeof(k_cause_types[0]); i++)
        if (strcmp(type, k_cause_types[i]) == 0)
            return true;
    return false;
}

/* A cause as the protocol's: values x 100 (its integers), a message saying what crossed. */
static json_t *cause_json(const struct store_cont_cause *k)
{
    char msg[1200];
    json_int_t th = (json_int_t)(k->threshold * 100.0), cur = (json_int_t)(k->current * 100.0);
    if (k->uri)
        snprintf(msg, sizeof(msg), "%s of %.1000s: %g >= %g", k->type, k->uri, k->current,
                 k->threshold);
    else
        snprintf(msg, sizeof(msg), "%s: %g >= %g", k->type, k->current, k->threshold);
    if (!k->uri)
        return json_pack("{s:s,s:{s:I,s:I},s:n,s:o}", "type", k->type, "singleValue", "threshold",
                         th, "current", cur, "uri", "message", skp_json_str(msg));
    return json_pack("{s:s,s:n,s:{s:o,s:o,s:I,s:I},s:o}", "type", k->type, "singleValue", "uri",
                     "uriRegex", k->uri_is_regex ? skp_json_str(k->uri) : json_null(), "uriPath",
                     k->uri_is_regex ? json_null() : skp_json_str(k->uri), "threshold", th,
                     "current", cur, "message", skp_json_str(msg));
}

struct task_walk {
    struct store *st;
    const char *instance; /* filter; NULL = any */
    json_t *targets;      /* filter; NULL or [] = any */
    json_t *out;
    json_t *procs; /* service -> {process id -> Process}, read on first need */
    size_t n;
};

/* The stored id of the trigger's process (its service's processes, read once per service). */
static skp_err process_id_of(struct task_walk *w, const struct store_cont_trigger *t,
                             const char **id)
{
    *id = NULL;
    json_t *m = json_object_get(w->procs, t->service);
    if (!m) {
        struct proc_walk pw = {.by_id = json_object()};
        if (!pw.by_id || json_object_set_new_nocheck(w->procs, t->service, pw.by_id) != 0)
            return SKP_ENOMEM;
        skp_err err = store_ebpf_list_processes(w->st, t->service, proc_row, &pw);
        if (err && err != SKP_EFULL && err != SKP_ENOTSUP)
            return err;
        m = pw.by_id;
    }
    const char *k;
    json_t *v;
    char *inst = skp_utf8_sanitize(t->instance ? t->instance : "");
    char *name = skp_utf8_sanitize(t->process ? t->process : "");
    json_object_foreach(m, k, v) {
        if (inst && name &&
            strcmp(json_string_value(json_object_get(v, "instanceName")), inst) == 0 &&
            strcmp(json_string_value(json_object_get(v, "name")), name) == 0)
            *id = k;
    }
    skpx_free(inst);
    skpx_free(name);
    return SKP_OK;
}

static json_t *task_json(struct task_walk *w, const struct store_cont_trigger *t)
{
    char sid[GRAPHQL_ID_MAX], iid[GRAPHQL_ID_MAX];
    if (!graphql_service_id(t->service, sid, sizeof(sid)))
        return json_null();
    const char *pid = NULL;
    if (t->process && process_id_of(w, t, &pid) != SKP_OK)
        return NULL;
    bool has_inst = t->instance && graphql_child_id(t->service, t->instance, iid, sizeof(iid));
    json_t *causes = json_array();
    for (size_t i = 0; causes && i < t->n_causes; i++) {
        if (!protocol_cause(t->causes[i].type))
            continue; /* a monitor type of ours the protocol cannot name */
        json_t *k = cause_json(&t->causes[i]);
        if (!k || json_array_append_new(causes, k) != 0) {
            json_decref(causes);
            causes = NULL;
        }
    }
    return causes
               ? json_pack("{s:o,s:s,s:o,s:o,s:o,s:[],s:o,s:o,s:I,s:s,s:n,s:o,s:s,s:I}", "taskId",
                           skp_json_str(t->task_id), "serviceId", sid, "serviceName",
                           skp_json_str(t->service), "serviceInstanceId",
                           has_inst ? json_string(iid) : json_null(), "serviceInstanceName",
                           t->instance ? skp_json_str(t->instance) : json_null(), "processLabels",
                           "processId", pid ? json_string(pid) : json_null(), "processName",
                           t->process ? skp_json_str(t->process) : json_null(), "taskStartTime",
                           (json_int_t)t->time_ms, "triggerType", "CONTINUOUS_PROFILING",
                           "fixedTriggerDuration", "continuousProfilingCauses", causes,
                           "targetType", t->target, "createTime", (json_int_t)t->time_ms)
               : NULL;
}

static bool target_chosen(const json_t *targets, const char *target)
{
    if (json_array_size(targets) == 0)
        return true;
    size_t i;
    json_t *v;
    json_array_foreach(targets, i, v)
        if (json_is_string(v) && strcmp(json_string_value(v), target) == 0)
            return true;
    return false;
}

static skp_err task_row(void *ud, const struct store_cont_trigger *t)
{
    struct task_walk *w = ud;
    if (++w->n > EBPF_TRIGGERS_MAX || json_array_size(w->out) >= GRAPHQL_LIST_MAX)
        return SKP_EFULL;
    if (!t->task_kind || strcmp(t->task_kind, "ebpf") != 0 || !t->task_id || !t->target ||
        !t->service)
        return SKP_OK;
    if (strcmp(t->target, "ON_CPU") != 0 && strcmp(t->target, "OFF_CPU") != 0 &&
        strcmp(t->target, "NETWORK") != 0)
        return SKP_OK;
    if (!target_chosen(w->targets, t->target) ||
        (w->instance && (!t->instance || strcmp(t->instance, w->instance) != 0)))
        return SKP_OK;
    json_t *o = task_json(w, t);
    if (!o)
        return SKP_ENOMEM;
    if (json_is_null(o))
        return SKP_OK;
    return json_array_append_new(w->out, o) == 0 ? SKP_OK : SKP_ENOMEM;
}

static skp_err r_tasks(struct gql_call *c, json_t **out)
{
    struct graphql_ctx *x = c->ctx;
    const char *svc_id = json_string_value(json_object_get(c->args, "serviceId"));
    const char *inst_id = json_string_value(json_object_get(c->args, "serviceInstanceId"));
    const char *trigger = json_string_value(json_object_get(c->args, "triggerType"));
    /* FIXED_TIME when absent (the protocol's rule): skyprofd runs no fixed-time tasks */
    *out = json_array();
    if (!*out)
        return SKP_ENOMEM;
    if (!trigger || strcmp(trigger, "CONTINUOUS_PROFILING") != 0)
        return SKP_OK;
    char *service = svc_id && *svc_id ? graphql_service_of(svc_id) : NULL;
    char *isvc = NULL, *inst = NULL;
    if (inst_id && *inst_id && !graphql_split_child(inst_id, &isvc, &inst))
        goto done; /* not an instance id: no task is of it */
    if (svc_id && *svc_id && !service)
        goto done;
    if (service && isvc && strcmp(service, isvc) != 0)
        goto done;
    struct task_walk w = {.st = x->store,
                          .instance = inst,
                          .targets = json_object_get(c->args, "targets"),
                          .out = *out,
                          .procs = json_object()};
    skp_err err = w.procs ? store_cont_list_triggers(x->store, service ? service : isvc, NULL,
                                                     EBPF_TRIGGERS_MAX, task_row, &w)
                          : SKP_ENOMEM;
    json_decref(w.procs);
    if (err && err != SKP_EFULL) {
        SKPX_FREE_ALL(service, isvc, inst);
        json_decref(*out);
        *out = NULL;
        return graphql_read_failed(c, err, "the eBPF profiling tasks");
    }
done:
    SKPX_FREE_ALL(service, isvc, inst);
    return SKP_OK;
}

/* ---- schedules ------------------------------------------------------------------------------
 */

struct one_trigger {
    bool found;
    char *service;
    int64_t time_ms;
};

static skp_err trigger_row(void *ud, const struct store_cont_trigger *t)
{
    struct one_trigger *o = ud;
    if (o->found || !t->task_kind || strcmp(t->task_kind, "ebpf") != 0)
        return SKP_OK;
    o->found = true;
    o->time_ms = t->time_ms;
    o->service = skpx_strdup(t->service ? t->service : "");
    return o->service ? SKP_OK : SKP_ENOMEM;
}

/* Per process of a task: [first, last] upload time of its summed stacks. */
static skp_err span_row(void *ud, const struct store_ebpf_stack *s)
{
    json_t *spans = ud;
    json_t *e = json_object_get(spans, s->process_id);
    if (!e) {
        if (json_object_size(spans) >= EBPF_SCHEDULES_MAX)
            return SKP_OK;
        e = json_pack("[I,I]", (json_int_t)s->time_ms, (json_int_t)s->time_ms);
        return e && json_object_set_new_nocheck(spans, s->process_id, e) == 0 ? SKP_OK : SKP_ENOMEM;
    }
    if (s->time_ms < json_integer_value(json_array_get(e, 0)))
        json_array_set_new(e, 0, json_integer(s->time_ms));
    if (s->time_ms > json_integer_value(json_array_get(e, 1)))
        json_array_set_new(e, 1, json_integer(s->time_ms));
    return SKP_OK;
}

static skp_err r_schedules(struct gql_call *c, json_t **out)
{
    struct graphql_ctx *x = c->ctx;
    const char *tid = json_string_value(json_object_get(c->args, "taskId"));
    struct one_trigger t = {0};
    json_t *spans = json_object(), *list = json_array();
    struct proc_walk pw = {.by_id = json_object()};
    skp_err err = spans && list && pw.by_id ? SKP_OK : SKP_ENOMEM;
    if (!err && tid && *tid)
        err = store_cont_list_triggers(x->store, NULL, tid, 1, trigger_row, &t);
    if (!err && t.found)
        err = store_ebpf_scan_task(x->store, tid, NULL, 0, INT64_MAX, span_row, spans);
    if (!err && t.found && json_object_size(spans))
        err = store_ebpf_list_processes(x->store, t.service, proc_row, &pw);
    if (err == SKP_EFULL || err == SKP_ENOTSUP)
        err = SKP_OK;
    const char *pid;
    json_t *e;
    json_object_foreach(spans, pid, e) {
        json_t *proc = json_object_get(pw.by_id, pid);
        if (err || !proc)
            continue; /* a process not (or no longer) registered */
        int64_t first = json_integer_value(json_array_get(e, 0));
        int64_t start = t.time_ms && t.time_ms < first ? t.time_ms : first;
        int64_t end = json_integer_value(json_array_get(e, 1));
        char sched[1200];
        snprintf(sched, sizeof(sched), "%.1000s_%s", tid, pid);
        json_t *o = json_pack("{s:o,s:o,s:O,s:I,s:I}", "scheduleId", skp_json_str(sched), "taskId",
                              skp_json_str(tid), "process", proc, "startTime", (json_int_t)start,
                              "endTime", (json_int_t)(end > start ? end : start));
        if (!o || json_array_append_new(list, o) != 0)
            err = SKP_ENOMEM;
    }
    skpx_free(t.service);
    json_decref(spans);
    json_decref(pw.by_id);
    if (err) {
        json_decref(list);
        return graphql_read_failed(c, err, "the eBPF profiling schedules");
    }
    *out = list;
    return SKP_OK;
}

/* ---- analysis -------------------------------------------------------------------------------
 */

/* The analysis's trees as the protocol's: one per root, roots' parentId "0". */
static json_t *trees_json(const struct analysis *a)
{
    json_t *trees = json_array();
    for (size_t k = 0; trees && k < a->n_trees; k++) {
        const struct analysis_tree *t = &a->trees[k];
        json_t *els = json_array();
        for (size_t i = 0; els && i < t->n_nodes; i++) {
            const struct analysis_node *nd = &t->nodes[i];
            char id[16], parent[16];
            snprintf(id, sizeof(id), "%u", (unsigned)nd->id);
            snprintf(parent, sizeof(parent), "%u", (unsigned)nd->parent_id);
            json_t *e = json_pack("{s:s,s:s,s:o,s:s,s:I}", "id", id, "parentId", parent, "symbol",
                                  skp_json_str(nd->code_signature), "stackType", "USER_SPACE",
                                  "dumpCount", (json_int_t)nd->count);
            if (!e || json_array_append_new(els, e) != 0) {
                json_decref(els);
                els = NULL;
            }
        }
        if (!els || json_array_append_new(trees, json_pack("{s:o}", "elements", els)) != 0) {
            json_decref(trees);
            trees = NULL;
        }
    }
    return trees;
}

static skp_err r_analyze(struct gql_call *c, json_t **out)
{
    struct graphql_ctx *x = c->ctx;
    json_t *ids = json_object_get(c->args, "scheduleIdList");
    json_t *ranges = json_object_get(c->args, "timeRanges");
    const char *agg = json_string_value(json_object_get(c->args, "aggregateType"));
    /* the ranges' span: the UI sends one range per schedule, merged where they overlap */
    int64_t from = INT64_MAX, to = 0;
    size_t i;
    json_t *v;
    json_array_foreach(ranges, i, v) {
        int64_t s = json_integer_value(json_object_get(v, "start"));
        int64_t e = json_integer_value(json_object_get(v, "end"));
        from = s < from ? s : from;
        to = e > to ? e : to;
    }
    const char *tip = NULL;
    if (json_array_size(ids) > EBPF_SCHEDULES_MAX)
        tip = "too many schedules: at most 1000 are analysed at once";
    else if (json_array_size(ranges) == 0 || from > to)
        tip = "no time range to analyse";
    struct ebpf_build *b = NULL;
    skp_err err = tip ? SKP_OK : ebpf_build_new(&b);
    json_array_foreach(ids, i, v) {
        const char *sid = json_string_value(v);
        const char *us = sid ? strrchr(sid, '_') : NULL;
        if (err || tip || !us || us == sid || !us[1])
            continue; /* not one of our schedule ids: nothing of it */
        char *task = skpx_strndup(sid, (size_t)(us - sid));
        err = task ? ebpf_build_scan(b, x->store, task, us + 1, from, to) : SKP_ENOMEM;
        skpx_free(task);
    }
    struct ebpf_result r = {0};
    if (!err && !tip) {
        err = ebpf_build_finish(b, agg && strcmp(agg, "DURATION") == 0, &r);
        if (err == SKP_ENOTFOUND)
            tip = "no profile data in the schedules and time ranges";
        else if (err == SKP_ETOOBIG)
            tip = "the profile has too many stack elements to analyse";
        if (tip)
            err = SKP_OK;
        else if (!err && r.partial)
            tip = "partial: the profile reached its memory budget, some stacks are left out";
    }
    ebpf_build_free(b);
    json_t *trees = !err && r.analysis ? trees_json(r.analysis) : json_array();
    ebpf_result_cleanup(&r);
    if (err || !trees) {
        json_decref(trees);
        return graphql_read_failed(c, err ? err : SKP_ENOMEM, "the eBPF profile");
    }
    *out = json_pack("{s:o,s:o}", "tip", tip ? json_string(tip) : json_null(), "trees", trees);
    return graphql_oom_or(out);
}

/* ---- creation -------------------------------------------------------------------------------
 */

static skp_err r_prepare(struct gql_call *c, json_t **out)
{
    struct graphql_ctx *x = c->ctx;
    char *service = graphql_service_of(json_string_value(json_object_get(c->args, "serviceId")));
    struct proc_walk pw = {.labels = json_object()};
    skp_err err = pw.labels ? SKP_OK : SKP_ENOMEM;
    if (!err && service)
        err = store_ebpf_list_processes(x->store, service, proc_row, &pw);
    if (err == SKP_ENOTSUP)
        err = SKP_OK;
    skpx_free(service);
    json_t *labels = err ? NULL : json_array();
    const char *k;
    json_t *v;
    json_object_foreach(pw.labels, k, v) {
        if (labels && json_array_append_new(labels, json_string(k)) != 0) {
            json_decref(labels);
            labels = NULL;
        }
    }
    json_decref(pw.labels);
    if (err || !labels)
        return graphql_read_failed(c, err ? err : SKP_ENOMEM, "the service's processes");
    /* no fixed-time task can run (see createEBPFProfilingFixedTimeTask) */
    *out = json_pack("{s:b,s:o}", "couldProfiling", 0, "processLabels", labels);
    return graphql_oom_or(out);
}

static skp_err refusal(const char *why, json_t **out)
{
    *out = json_pack("{s:b,s:s,s:n}", "status", 0, "errorReason", why, "id");
    return graphql_oom_or(out);
}

static skp_err r_create_fixed(struct gql_call *c, json_t **out)
{
    (void)c;
    return refusal("skyprofd runs no fixed-time eBPF tasks: its eBPF profiles are those of "
                   "continuous-profiling triggers (set a policy in the Continuous Profiling "
                   "widget; the agent's triggered tasks are listed there)",
                   out);
}

static skp_err r_create_network(struct gql_call *c, json_t **out)
{
    (void)c;
    return refusal("skyprofd runs no eBPF network profiling tasks", out);
}

static skp_err r_keep_network(struct gql_call *c, json_t **out)
{
    (void)c;
    *out = json_pack("{s:b,s:s}", "status", 0, "errorReason",
                     "no such network profiling task: skyprofd runs none");
    return graphql_oom_or(out);
}

const struct gql_resolver graphql_ebpf_resolvers[] = {
    {"Query", "queryEBPFProfilingTasks", r_tasks},
    {"Query", "queryEBPFProfilingSchedules", r_schedules},
    {"Query", "analysisEBPFProfilingResult", r_analyze},
    {"Query", "queryPrepareCreateEBPFProfilingTaskData", r_prepare},
    {"Mutation", "createEBPFProfilingFixedTimeTask", r_create_fixed},
    {"Mutation", "createEBPFNetworkProfiling", r_create_network},
    {"Mutation", "keepEBPFNetworkProfiling", r_keep_network},
};
const size_t graphql_n_ebpf_resolvers =
    sizeof(graphql_ebpf_resolvers) / sizeof(graphql_ebpf_resolvers[0]);
