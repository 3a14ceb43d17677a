/* graphql_pprof.c - resolvers of pprof.graphqls and async-profiler.graphqls (SkyWalking's Pprof
 * and Async Profiling widgets): tasks through the process-task rules (tasks/proc_task.h,
 * proc_task_async.h: OAP's validation texts), their list and per-instance progress from
 * store_proc.h, and the analysis of the uploaded files with the decoders and analyzers the HTTP
 * API's /api/v1/pprof and /api/v1/async-profiler analyze routes use (pprof_decode.h +
 * pprof_analyze.h, jfr_tree.h), shaped as the protocol's single tree (roots' parentId "-1",
 * total = inclusive value, self = self value). */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "server/analysis/jfr_tree.h"
#include "server/analysis/pprof_analyze.h"
#include "server/formats/pprof_decode.h"
#include "server/formats/utf8.h"
#include "server/graphql/graphql.h"
#include "server/store/store_proc.h"
#include "server/tasks/proc_task.h"
#include "server/tasks/proc_task_async.h"

/* The protocol's event names and ours. */
static const char *const k_events[][2] = {
    {"CPU", "cpu"},       {"HEAP", "heap"},           {"BLOCK", "block"},
    {"MUTEX", "mutex"},   {"GOROUTINE", "goroutine"}, {"THREADCREATE", "threadcreate"},
    {"ALLOCS", "allocs"},
};

static const char *event_of(const char *name, int from, int to)
{
    for (size_t i = 0; name && i < sizeof(k_events) / sizeof(k_events[0]); i++)
        if (strcmp(k_events[i][from], name) == 0)
            return k_events[i][to];
    return NULL;
}

/* The answer of a task creation (pprof or async-profiler) from proc_task_create's outcome:
 * a refusal in the protocol's shape (bad: our own argument check), a storage error as a GraphQL
 * error, or SUCCESS with the id. Takes ownership of id. */
static skp_err creation_answer(struct gql_call *c, skp_err err, const char *bad,
                               const struct proc_error *e, char *id, json_t **out)
{
    if (bad || ((err == SKP_EINVAL || err == SKP_EEXIST) && e->reason)) {
        skpx_free(id);
        *out = json_pack("{s:s,s:s,s:n}", "code",
                         err == SKP_EEXIST ? "ALREADY_PROFILING_ERROR" : "ARGUMENT_ERROR",
                         "errorReason", bad ? bad : e->reason, "id");
        return graphql_oom_or(out);
    }
    if (err) {
        skpx_free(id);
        snprintf(c->error, sizeof(c->error), "the task could not be stored: %s", skp_strerror(err));
        return err;
    }
    *out = json_pack("{s:s,s:n,s:s}", "code", "SUCCESS", "errorReason", "id", id);
    skpx_free(id);
    return graphql_oom_or(out);
}

/* Creates a task of `kind` from a creation request r: its serviceId and serviceInstanceIds
 * (checked to be the service's) complete req, which holds the kind's own fields, and the outcome
 * is answered as creation_answer does. */
static skp_err create_task(struct gql_call *c, json_t *r, enum proc_kind kind,
                           struct proc_request *req, json_t **out)
{
    struct graphql_ctx *x = c->ctx;
    if (!graphql_writable(c))
        return SKP_ESTATE;
    char *service = graphql_service_of(json_string_value(json_object_get(r, "serviceId")));
    json_t *ids = json_object_get(r, "serviceInstanceIds");
    size_t n = json_array_size(ids);
    char **names = skpx_calloc(n ? n : 1, sizeof(*names));
    skp_err err = names ? SKP_OK : SKP_ENOMEM;
    const char *bad = service ? NULL : "serviceId is not a service id";
    for (size_t i = 0; !err && i < n && !bad; i++) {
        char *svc = NULL;
        if (!graphql_split_child(json_string_value(json_array_get(ids, i)), &svc, &names[i]) ||
            strcmp(svc, service) != 0)
            bad = "serviceInstanceIds must be instances of the service";
        skpx_free(svc);
    }
    req->service = service;
    req->instances = (const char *const *)names;
    req->n_instances = n;
    struct proc_error e = {0};
    char *id = NULL;
    if (!err && !bad)
        err = proc_task_create(x->store, kind, req, x->now_ms, &e, &id);
    for (size_t i = 0; names && i < n; i++)
        skpx_free(names[i]);
    skpx_free(names);
    skpx_free(service);
    return creation_answer(c, err, bad, &e, id, out);
}

static skp_err r_create(struct gql_call *c, json_t **out)
{
    json_t *r = json_object_get(c->args, "pprofTaskCreationRequest");
    const char *ev = event_of(json_string_value(json_object_get(r, "events")), 0, 1);
    struct proc_request req = {
        .events = &ev,
        .n_events = ev ? 1 : 0,
        .duration = json_integer_value(json_object_get(r, "duration")),
        .dump_period = json_integer_value(json_object_get(r, "dumpPeriod")),
    };
    return create_task(c, r, PROC_KIND_PPROF, &req, out);
}

static json_t *task_json(const struct proc_task *t)
{
    char sid[GRAPHQL_ID_MAX], iid[GRAPHQL_ID_MAX];
    const char *ev = event_of(t->events, 1, 0);
    if (!ev || !graphql_service_id(t->service, sid, sizeof(sid)))
        return json_null(); /* an event of ours the protocol cannot name (wall) */
    json_t *inst = json_array();
    for (size_t i = 0; inst && i < t->n_instances; i++)
        if (graphql_child_id(t->service, t->instances[i], iid, sizeof(iid)) &&
            json_array_append_new(inst, json_string(iid)) != 0) {
            json_decref(inst);
            inst = NULL;
        }
    return inst ? json_pack("{s:o,s:s,s:o,s:I,s:s,s:I,s:I}", "id", skp_json_str(t->id), "serviceId",
                            sid, "serviceInstanceIds", inst, "createTime",
                            (json_int_t)t->create_time, "events", ev, "duration",
                            (json_int_t)(t->duration_s / 60), "dumpPeriod",
                            (json_int_t)t->dump_period)
                : NULL;
}

/* A task list of one kind (queryPprofTaskList, queryAsyncProfilerTaskList): the service's
 * tasks, newest first, each as to_json builds it (JSON null: not shown). */
static skp_err list_tasks(struct gql_call *c, json_t **out, enum proc_kind kind,
                          json_t *(*to_json)(const struct proc_task *))
{
    struct graphql_ctx *x = c->ctx;
    json_t *r = json_object_get(c->args, "request");
    json_int_t limit = json_integer_value(json_object_get(r, "limit"));
    char *service = graphql_service_of(json_string_value(json_object_get(r, "serviceId")));
    struct proc_task *v = NULL;
    size_t n = 0;
    json_t *tasks = json_array();
    skp_err err =
        service && tasks
            ? store_proc_list_tasks(
                  x->store, kind, service,
                  limit > 0 && limit < GRAPHQL_LIST_MAX ? (size_t)limit : GRAPHQL_LIST_MAX, &v, &n)
            : SKP_OK;
    for (size_t i = 0; !err && i < n; i++) {
        json_t *t = to_json(&v[i]);
        if (!t || (!json_is_null(t) && json_array_append(tasks, t) != 0))
            err = SKP_ENOMEM;
        json_decref(t);
    }
    store_proc_tasks_free(v, n);
    if (err) {
        json_decref(tasks);
        skpx_free(service);
        return graphql_read_failed(
            c, err, kind == PROC_KIND_PPROF ? "pprof tasks" : "async-profiler tasks");
    }
    *out = service ? json_pack("{s:n,s:o}", "errorReason", "tasks", tasks)
                   : json_pack("{s:s,s:o}", "errorReason", "serviceId is not a service id", "tasks",
                               tasks);
    skpx_free(service);
    return graphql_oom_or(out);
}

static skp_err r_list(struct gql_call *c, json_t **out)
{
    return list_tasks(c, out, PROC_KIND_PPROF, task_json);
}

/* The protocol's log operation of ours (UPLOAD_INCOMPLETE, ours, is an execution error). */
static const char *log_op(const char *op, enum proc_kind kind)
{
    const char *const known[] = {PROC_LOG_NOTIFIED, PROC_LOG_FINISHED,
                                 kind == PROC_KIND_PPROF ? PROC_LOG_PPROF_TOO_LARGE
                                                         : PROC_LOG_JFR_TOO_LARGE,
                                 PROC_LOG_TASK_ERROR};
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (strcmp(op, known[i]) == 0)
            return known[i];
    return PROC_LOG_TASK_ERROR;
}

/* Reads task `id` into *t when it is of `kind`. *found is false when it is not (SKP_OK when there
 * is no task of that kind with that id, *t then cleaned up). */
static skp_err get_kind_task(struct graphql_ctx *x, const char *id, enum proc_kind kind,
                             struct proc_task *t, bool *found)
{
    skp_err err = store_proc_get_task(x->store, id, t);
    *found = !err && t->kind == kind;
    if (err == SKP_ENOTFOUND || (!err && !*found)) {
        store_proc_task_cleanup(t);
        return SKP_OK;
    }
    return err;
}

static skp_err progress(struct gql_call *c, enum proc_kind kind, json_t **out)
{
    struct graphql_ctx *x = c->ctx;
    const char *id = json_string_value(json_object_get(c->args, "taskId"));
    struct proc_task t = {0};
    struct proc_log *logs = NULL;
    size_t n_logs = 0;
    bool found = false;
    skp_err err = get_kind_task(x, id, kind, &t, &found);
    if (!err && !found) {
        *out = json_pack("{s:[],s:[],s:[]}", "logs", "errorInstanceIds", "successInstanceIds");
        return graphql_oom_or(out);
    }
    if (!err)
        err = store_proc_list_logs(x->store, id, &logs, &n_logs);
    json_t *jl = json_array(), *ok = json_array(), *bad = json_array();
    if (!err && (!jl || !ok || !bad))
        err = SKP_ENOMEM;
    for (size_t i = 0; !err && i < n_logs; i++) {
        char iid[GRAPHQL_ID_MAX] = "", lid[512];
        graphql_child_id(t.service, logs[i].instance, iid, sizeof(iid));
        snprintf(lid, sizeof(lid), "%s_%s_%s_%lld", id, logs[i].instance, logs[i].op,
                 (long long)logs[i].time_ms);
        json_t *l =
            json_pack("{s:o,s:s,s:o,s:s,s:I}", "id", skp_json_str(lid), "instanceId", iid,
                      "instanceName", skp_json_str(logs[i].instance), "operationType",
                      log_op(logs[i].op, kind), "operationTime", (json_int_t)logs[i].time_ms);
        if (!l || json_array_append_new(jl, l) != 0)
            err = SKP_ENOMEM;
    }
    struct proc_progress *pr = err ? NULL : skpx_calloc(PROC_MAX_INSTANCES, sizeof(*pr));
    size_t n_pr = 0;
    if (!err && !pr)
        err = SKP_ENOMEM;
    if (!err)
        proc_task_progress(&t, logs, n_logs, pr, PROC_MAX_INSTANCES, &n_pr);
    for (size_t i = 0; !err && i < n_pr; i++) {
        char iid[GRAPHQL_ID_MAX];
        if (!graphql_child_id(t.service, pr[i].instance, iid, sizeof(iid)))
            continue;
        json_t *to = pr[i].failed_ms ? bad : pr[i].uploaded_ms ? ok : NULL;
        if (to && json_array_append_new(to, json_string(iid)) != 0)
            err = SKP_ENOMEM;
    }
    skpx_free(pr);
    store_proc_logs_free(logs, n_logs);
    store_proc_task_cleanup(&t);
    if (err) {
        json_decref(jl);
        json_decref(ok);
        json_decref(bad);
        return graphql_read_failed(c, err, "the task's progress");
    }
    *out =
        json_pack("{s:o,s:o,s:o}", "logs", jl, "errorInstanceIds", bad, "successInstanceIds", ok);
    return graphql_oom_or(out);
}

static skp_err r_progress(struct gql_call *c, json_t **out)
{
    return progress(c, PROC_KIND_PPROF, out);
}

static skp_err r_async_progress(struct gql_call *c, json_t **out)
{
    return progress(c, PROC_KIND_ASYNC_PROFILER, out);
}

/* Whether `inst` is one of the request's instance ids (none: every instance). */
static bool chosen(const json_t *ids, const char *service, const char *inst)
{
    char iid[GRAPHQL_ID_MAX];
    if (json_array_size(ids) == 0)
        return true;
    if (!graphql_child_id(service, inst, iid, sizeof(iid)))
        return false;
    size_t i;
    json_t *v;
    json_array_foreach(ids, i, v)
        if (json_is_string(v) && strcmp(json_string_value(v), iid) == 0)
            return true;
    return false;
}

/* The analysis's trees as the protocol's one tree: ids renumbered across trees, roots "-1";
 * `type` (may be NULL) is the async-profiler tree's event type. */
static json_t *tree_json(const struct analysis *a, const char *type)
{
    json_t *els = json_array();
    uint64_t base = 0;
    for (size_t k = 0; els && k < a->n_trees; k++) {
        const struct analysis_tree *t = &a->trees[k];
        for (size_t i = 0; i < t->n_nodes; i++) {
            const struct analysis_node *nd = &t->nodes[i];
            char id[24], parent[24];
            snprintf(id, sizeof(id), "%llu", (unsigned long long)(base + nd->id));
            if (nd->parent_id)
                snprintf(parent, sizeof(parent), "%llu",
                         (unsigned long long)(base + nd->parent_id));
            else
                snprintf(parent, sizeof(parent), "-1");
            json_t *e =
                json_pack("{s:s,s:s,s:o,s:I,s:I}", "id", id, "parentId", parent, "codeSignature",
                          skp_json_str(nd->code_signature), "total", (json_int_t)nd->count, "self",
                          (json_int_t)nd->duration_child_excluded);
            if (!e || json_array_append_new(els, e) != 0) {
                json_decref(els);
                return NULL;
            }
        }
        base += t->n_nodes;
    }
    if (els && type)
        return json_pack("{s:{s:s,s:o}}", "tree", "type", type, "elements", els);
    return els ? json_pack("{s:{s:o}}", "tree", "elements", els) : NULL;
}

/* The answer of an analysis query once `err` says how the analysis went: the tree (tree_json;
 * {"tree": null} when no such task was `found`), else the error "the <what> analysis failed"
 * in c->error. Frees `res` (may be NULL). */
static skp_err analysis_answer(struct gql_call *c, skp_err err, bool found, struct analysis *res,
                               const char *type, const char *what, json_t **out)
{
    if (!err) {
        *out = found ? tree_json(res, type) : json_pack("{s:n}", "tree");
        err = *out ? SKP_OK : SKP_ENOMEM;
    }
    analysis_free(res);
    if (err)
        snprintf(c->error, sizeof(c->error), "the %s analysis failed: %s", what, skp_strerror(err));
    return err;
}

/* Adds one uploaded file's bytes to an analysis: SKP_ENOMEM stops it, a file that does not
 * decode is left out (as the HTTP API does). */
typedef skp_err (*file_add_fn)(void *acc, const uint8_t *data, size_t len);

/* Hands the files of task `id` (of `kind`) that the chosen instances (ids) uploaded to
 * add(acc, ...). *found is false (SKP_OK) when there is no task of that kind with that id. */
static skp_err add_task_files(struct graphql_ctx *x, const char *id, enum proc_kind kind,
                              json_t *ids, file_add_fn add, void *acc, bool *found)
{
    struct proc_task t = {0};
    struct proc_file *files = NULL;
    size_t n = 0;
    skp_err err = get_kind_task(x, id, kind, &t, found);
    if (!err && !*found)
        return SKP_OK;
    if (!err)
        err = store_proc_list_files(x->store, id, &files, &n);
    for (size_t i = 0; !err && i < n; i++) {
        if (!chosen(ids, t.service, files[i].instance))
            continue;
        uint8_t *data = NULL;
        size_t len = 0;
        err = store_proc_get_file(x->store, id, files[i].id, &data, &len, NULL);
        if (!err)
            err = add(acc, data, len);
        skpx_free(data);
    }
    store_proc_files_free(files, n);
    store_proc_task_cleanup(&t);
    return err;
}

static skp_err pprof_add_file(void *an, const uint8_t *data, size_t len)
{
    struct pprof_profile *prof = NULL;
    char why[256] = "";
    skp_err err = pprof_decode(data, len, 0, &prof, why);
    if (!err)
        err = pprof_analyze_add(an, prof);
    else if (err != SKP_ENOMEM)
        err = SKP_OK;
    pprof_free(prof);
    return err;
}

static skp_err r_analyze(struct gql_call *c, json_t **out)
{
    struct graphql_ctx *x = c->ctx;
    json_t *r = json_object_get(c->args, "request");
    const char *id = json_string_value(json_object_get(r, "taskId"));
    struct pprof_analyze *an = NULL;
    struct analysis *res = NULL;
    bool found = false;
    skp_err err = pprof_analyze_new(NULL, false, &an);
    if (!err)
        err = add_task_files(x, id, PROC_KIND_PPROF, json_object_get(r, "instanceIds"),
                             pprof_add_file, an, &found);
    if (!err && found)
        err = pprof_analyze_finish(an, &res);
    pprof_analyze_free(an);
    return analysis_answer(c, err, found, res, NULL, "pprof", out);
}

/* ---- async-profiler ---- */

static skp_err r_async_create(struct gql_call *c, json_t **out)
{
    json_t *r = json_object_get(c->args, "asyncProfilerTaskCreationRequest");
    json_t *evs = json_object_get(r, "events");
    size_t n_ev = json_array_size(evs);
    const char **events = skpx_calloc(n_ev ? n_ev : 1, sizeof(*events));
    if (!events)
        return SKP_ENOMEM;
    for (size_t i = 0; i < n_ev; i++)
        events[i] = json_string_value(json_array_get(evs, i));
    struct proc_request req = {
        .events = events,
        .n_events = n_ev,
        .duration = json_integer_value(json_object_get(r, "duration")),
        .exec_args = json_string_value(json_object_get(r, "execArgs")),
    };
    skp_err err = create_task(c, r, PROC_KIND_ASYNC_PROFILER, &req, out);
    skpx_free(events);
    return err;
}

static json_t *async_task_json(const struct proc_task *t)
{
    char sid[GRAPHQL_ID_MAX], iid[GRAPHQL_ID_MAX];
    if (!graphql_service_id(t->service, sid, sizeof(sid)))
        return json_null();
    json_t *inst = json_array(), *evs = json_array();
    for (size_t i = 0; inst && i < t->n_instances; i++)
        if (graphql_child_id(t->service, t->instances[i], iid, sizeof(iid)))
            json_array_append_new(inst, json_string(iid));
    /* stored upper case and comma-joined ("CPU,ALLOC"): the protocol's enum names */
    for (const char *p = t->events ? t->events : ""; evs && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len)
            json_array_append_new(evs, json_stringn(p, len));
        p += len + (e ? 1 : 0);
    }
    json_t *j = inst && evs ? json_pack("{s:o,s:s,s:O,s:I,s:O,s:I,s:o}", "id", skp_json_str(t->id),
                                        "serviceId", sid, "serviceInstanceIds", inst, "createTime",
                                        (json_int_t)t->create_time, "events", evs, "duration",
                                        (json_int_t)t->duration_s, "execArgs",
                                        t->exec_args ? skp_json_str(t->exec_args) : json_null())
                            : NULL;
    json_decref(inst);
    json_decref(evs);
    return j;
}

static skp_err r_async_list(struct gql_call *c, json_t **out)
{
    return list_tasks(c, out, PROC_KIND_ASYNC_PROFILER, async_task_json);
}

static skp_err jfr_add_file(void *tree, const uint8_t *data, size_t len)
{
    struct jfr_error je = {0};
    skp_err err = jfr_tree_add_mem(tree, data, len, &je);
    return err == SKP_ENOMEM ? err : SKP_OK; /* a file that does not parse is left out */
}

static skp_err r_async_analyze(struct gql_call *c, json_t **out)
{
    struct graphql_ctx *x = c->ctx;
    json_t *r = json_object_get(c->args, "request");
    const char *id = json_string_value(json_object_get(r, "taskId"));
    const char *type = json_string_value(json_object_get(r, "eventType"));
    json_t *ids = json_object_get(r, "instanceIds");
    struct jfr_analyze_opts opts = {.kind = JFR_KIND_EXECUTION};
    if (type && strcmp(type, "PROFILER_LIVE_OBJECT") == 0)
        opts.kind = JFR_KIND_LIVE; /* the protocol's name of async-profiler's live objects */
    else if (!type || jfr_kind_parse(type, &opts.kind) != SKP_OK) {
        snprintf(c->error, sizeof(c->error), "eventType %s is not analysed",
                 type ? type : "(none)");
        return SKP_EINVAL;
    }
    struct jfr_summary sum = {0};
    struct jfr_tree *tree = NULL;
    struct analysis *res = NULL;
    bool found = false;
    skp_err err = jfr_tree_new(&opts, &sum, &tree);
    if (!err)
        err = add_task_files(x, id, PROC_KIND_ASYNC_PROFILER, ids, jfr_add_file, tree, &found);
    if (!err && found)
        err = jfr_tree_finish(tree, &res);
    jfr_tree_free(tree);
    jfr_summary_cleanup(&sum);
    return analysis_answer(c, err, found, res, type, "JFR", out);
}

const struct gql_resolver graphql_pprof_resolvers[] = {
    {"Mutation", "createPprofTask", r_create},
    {"Query", "queryPprofTaskList", r_list},
    {"Query", "queryPprofTaskProgress", r_progress},
    {"Query", "queryPprofAnalyze", r_analyze},
    {"Mutation", "createAsyncProfilerTask", r_async_create},
    {"Query", "queryAsyncProfilerTaskList", r_async_list},
    {"Query", "queryAsyncProfilerTaskProgress", r_async_progress},
    {"Query", "queryAsyncProfilerAnalyze", r_async_analyze},
};
const size_t graphql_n_pprof_resolvers =
    sizeof(graphql_pprof_resolvers) / sizeof(graphql_pprof_resolvers[0]);
