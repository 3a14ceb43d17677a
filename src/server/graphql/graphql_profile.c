/* graphql_profile.c - resolvers of trace profiling (profile.graphqls's fields) and of the trace
 * queries the profiling view links to: tasks through the task service (OAP's validation), their
 * logs and profiled segments from the store, analyses through the analyzer (the HTTP API's
 * POST /api/v1/profile/analyze is the other door to analyze_segments). skyprofd keeps the
 * segments of profile tasks only, so queryBasicTraces and queryTrace answer from those. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/sat.h"
#include "server/analysis/analyzer.h"
#include "server/formats/utf8.h"
#include "server/graphql/graphql.h"
#include "server/stats/metrics.h"
#include "server/store/span_json.h"
#include "server/tasks/task_service.h"

/* ---- task logs ---- */

struct log_walk {
    const char *service;
    json_t *out;
};

static skp_err log_row(void *ud, const struct store_task_log *l)
{
    struct log_walk *w = ud;
    char id[512], inst[GRAPHQL_ID_MAX];
    /* the HTTP API's log id (http_tasks.c): task, instance, operation, time */
    snprintf(id, sizeof(id), "%s_%s_%d_%" PRId64, l->task_id, l->instance, (int)l->op, l->time_ms);
    if (!graphql_child_id(w->service, l->instance, inst, sizeof(inst)))
        inst[0] = '\0';
    json_t *j = json_pack("{s:o,s:s,s:o,s:s,s:I}", "id", skp_json_str(id), "instanceId", inst,
                          "instanceName", skp_json_str(l->instance), "operationType",
                          l->op == STORE_TASK_NOTIFIED ? "NOTIFIED" : "EXECUTION_FINISHED",
                          "operationTime", (json_int_t)l->time_ms);
    return j && json_array_append_new(w->out, j) == 0 ? SKP_OK : SKP_ENOMEM;
}

static skp_err task_logs(struct store *st, const char *task_id, const char *service, json_t **out)
{
    struct log_walk w = {.service = service, .out = json_array()};
    skp_err err = w.out ? store_list_task_logs(st, task_id, log_row, &w) : SKP_ENOMEM;
    if (err) {
        json_decref(w.out);
        return err;
    }
    *out = w.out;
    return SKP_OK;
}

static skp_err r_task_logs(struct gql_call *c, json_t **out)
{
    struct graphql_ctx *x = c->ctx;
    const char *id = graphql_arg_str(c, "taskID");
    struct store_task t = {0};
    skp_err err = id ? store_get_task(x->store, id, &t) : SKP_ENOTFOUND;
    if (err == SKP_ENOTFOUND) {
        *out = json_array(); /* OAP answers an unknown task with no logs */
        return *out ? SKP_OK : SKP_ENOMEM;
    }
    if (!err)
        err = task_logs(x->store, id, t.service, out);
    store_task_cleanup(&t);
    return err ? graphql_read_failed(c, err, "task logs") : SKP_OK;
}

/* ---- task list ---- */

struct task_walk {
    struct store *st;
    json_t *out;
};

static skp_err task_row(void *ud, const struct store_task *t)
{
    struct task_walk *w = ud;
    if (json_array_size(w->out) >= GRAPHQL_LIST_MAX)
        return SKP_EFULL;
    char sid[GRAPHQL_ID_MAX];
    if (!graphql_service_id(t->service, sid, sizeof(sid)))
        return SKP_OK;
    json_t *j =
        json_pack("{s:o,s:s,s:o,s:o,s:I,s:i,s:i,s:i,s:i}", "id", skp_json_str(t->id), "serviceId",
                  sid, "serviceName", skp_json_str(t->service), "endpointName",
                  skp_json_str(t->endpoint), "startTime", (json_int_t)t->start_time, "duration",
                  t->duration_min, "minDurationThreshold", t->min_duration_threshold, "dumpPeriod",
                  t->dump_period, "maxSamplingCount", t->max_sampling_count);
    return j && json_array_append_new(w->out, j) == 0 ? SKP_OK : SKP_ENOMEM;
}

static skp_err r_task_list(struct gql_call *c, json_t **out)
{
    struct graphql_ctx *x = c->ctx;
    const char *sid = graphql_arg_str(c, "serviceId");
    const char *ep = graphql_arg_str(c, "endpointName");
    char *service = sid && *sid ? graphql_service_of(sid) : NULL;
    struct task_walk w = {.st = x->store, .out = json_array()};
    skp_err err = SKP_OK;
    if (!w.out)
        return SKP_ENOMEM;
    if (sid && *sid && !service)
        goto done; /* an id of no service: no task */
    /* the store's list holds no logs; each task's are read after the walk (no nested listing) */
    err = store_list_tasks(x->store, service, ep && *ep ? ep : NULL, task_row, &w);
    if (err == SKP_EFULL)
        err = SKP_OK;
    size_t i;
    json_t *t;
    json_array_foreach(w.out, i, t) {
        json_t *logs = NULL;
        if (!err)
            err = task_logs(x->store, json_string_value(json_object_get(t, "id")),
                            json_string_value(json_object_get(t, "serviceName")), &logs);
        if (!err)
            json_object_set_new(t, "logs", logs);
    }
done:
    skpx_free(service);
    if (err) {
        json_decref(w.out);
        return graphql_read_failed(c, err, "tasks");
    }
    *out = w.out;
    return SKP_OK;
}

/* ---- profiled segments ---- */

/* Distinct non-empty entry span names in span order; the segment's endpoint, else `dflt`, when
 * it has none (the UI needs at least one). */
static json_t *endpoint_names(const struct store_profiled_segment *seg, const char *dflt)
{
    json_t *names = json_array();
    for (size_t i = 0; names && i < seg->n_spans; i++) {
        const char *op = seg->spans[i].operation;
        if (seg->spans[i].type != STORE_SPAN_ENTRY || !op || !*op)
            continue;
        bool seen = false;
        size_t k;
        json_t *nm;
        json_t *e = skp_json_str(op);
        json_array_foreach(names, k, nm)
            seen = seen || json_equal(nm, e);
        if (seen)
            json_decref(e);
        else if (!e || json_array_append_new(names, e) != 0)
            goto fail;
    }
    if (names && json_array_size(names) == 0) {
        const char *n = seg->endpoint && *seg->endpoint ? seg->endpoint : dflt ? dflt : "";
        if (json_array_append_new(names, skp_json_str(n)) != 0)
            goto fail;
    }
    return names;
fail:
    json_decref(names);
    return NULL;
}

static json_t *spans_json(const struct store_profiled_segment *seg, bool profiled)
{
    json_t *spans = json_array();
    for (size_t i = 0; spans && i < seg->n_spans; i++) {
        json_t *o = span_json_build(seg->segment_id, seg->service, seg->instance, &seg->spans[i]);
        if (o && profiled)
            json_object_set_new(o, "profiled", json_true());
        if (o && !profiled) {
            json_object_set_new(o, "traceId", skp_json_str(seg->trace_id));
            json_object_set_new(o, "attachedEvents", json_array());
        }
        if (!o || json_array_append_new(spans, o) != 0) {
            json_decref(spans);
            return NULL;
        }
    }
    return spans;
}

static int64_t seg_duration(const struct store_profiled_segment *seg)
{
    int64_t end = seg->end_ms < seg->start_ms ? seg->start_ms : seg->end_ms;
    return skpx_sat_sub_i64(end, seg->start_ms);
}

struct seg_walk {
    const char *task_endpoint;
    json_t *out;
};

static skp_err seg_row(void *ud, const struct store_profiled_segment *seg)
{
    struct seg_walk *w = ud;
    char inst[GRAPHQL_ID_MAX] = "";
    if (seg->instance && *seg->instance)
        graphql_child_id(seg->service, seg->instance, inst, sizeof(inst));
    char start[24];
    snprintf(start, sizeof(start), "%" PRId64, seg->start_ms);
    int64_t d = seg_duration(seg);
    json_t *j = json_pack("{s:o,s:s,s:o,s:o,s:I,s:s,s:o}", "traceId", skp_json_str(seg->trace_id),
                          "instanceId", inst, "instanceName", skp_json_str(seg->instance),
                          "endpointNames", endpoint_names(seg, w->task_endpoint), "duration",
                          (json_int_t)(d > INT32_MAX ? INT32_MAX : d), "start", start, "spans",
                          spans_json(seg, true));
    /* the segment id is not a field of ProfiledTraceSegments; its spans carry it */
    return j && json_array_append_new(w->out, j) == 0 ? SKP_OK : SKP_ENOMEM;
}

static skp_err r_task_segments(struct gql_call *c, json_t **out)
{
    struct graphql_ctx *x = c->ctx;
    const char *id = graphql_arg_str(c, "taskID");
    struct store_task t = {0};
    skp_err err = store_get_task(x->store, id, &t);
    if (err == SKP_ENOTFOUND) {
        *out = json_array();
        return *out ? SKP_OK : SKP_ENOMEM;
    }
    struct seg_walk w = {.task_endpoint = t.endpoint, .out = json_array()};
    if (!err && !w.out)
        err = SKP_ENOMEM;
    if (!err)
        err = store_list_profiled_segments_page(x->store, id, NULL, GRAPHQL_LIST_MAX, seg_row, &w,
                                                NULL);
    store_task_cleanup(&t);
    if (err) {
        json_decref(w.out);
        return graphql_read_failed(c, err, "profiled segments");
    }
    *out = w.out;
    return SKP_OK;
}

/* ---- analysis ---- */

static skp_err r_segments_analyze(struct gql_call *c, json_t **out)
{
    struct graphql_ctx *x = c->ctx;
    json_t *queries = json_object_get(c->args, "queries");
    size_t n = json_array_size(queries);
    if (n == 0 || n > 1000) {
        snprintf(c->error, sizeof(c->error), "between 1 and 1000 queries are needed");
        return SKP_EINVAL;
    }
    struct analyze_query *q = skpx_calloc(n, sizeof(*q));
    if (!q)
        return SKP_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(queries, i);
        json_t *tr = json_object_get(e, "timeRange");
        q[i].segment_id = json_string_value(json_object_get(e, "segmentId"));
        q[i].start_ms = json_integer_value(json_object_get(tr, "start"));
        q[i].end_ms = json_integer_value(json_object_get(tr, "end"));
        if (q[i].start_ms > q[i].end_ms) {
            snprintf(c->error, sizeof(c->error), "queries[%zu]: timeRange.start is after end", i);
            skpx_free(q);
            return SKP_EINVAL;
        }
    }
    struct analyze_opts o = {.max_snapshots = x->max_analyze_snapshots};
    struct analysis *res = NULL;
    skp_err err = analyze_segments(x->store, q, n, &o, &res);
    skpx_free(q);
    if (!err) {
        *out = analysis_to_json(res);
        if (!*out)
            err = SKP_ENOMEM;
    }
    analysis_free(res);
    return err ? graphql_read_failed(c, err, "the analysis") : SKP_OK;
}

/* ---- task creation ---- */

static skp_err r_create_task(struct gql_call *c, json_t **out)
{
    struct graphql_ctx *x = c->ctx;
    json_t *r = json_object_get(c->args, "creationRequest");
    if (!graphql_writable(c))
        return SKP_ESTATE;
    if (!json_is_object(r)) {
        *out = json_pack("{s:s,s:n}", "errorReason", "creationRequest is required", "id");
        return *out ? SKP_OK : SKP_ENOMEM;
    }
    char *service = graphql_service_of(json_string_value(json_object_get(r, "serviceId")));
    struct task_request req = {
        .service = service,
        .endpoint = json_string_value(json_object_get(r, "endpointName")),
        .start_time = json_integer_value(json_object_get(r, "startTime")),
        .duration_min = json_integer_value(json_object_get(r, "duration")),
        .min_duration_threshold = json_integer_value(json_object_get(r, "minDurationThreshold")),
        .dump_period = json_integer_value(json_object_get(r, "dumpPeriod")),
        .max_sampling_count = json_integer_value(json_object_get(r, "maxSamplingCount")),
    };
    struct task_error e = {0};
    char *id = NULL;
    skp_err err = task_create(x->store, &req, x->now_ms, &e, &id);
    skpx_free(service);
    if ((err == SKP_EINVAL || err == SKP_EEXIST) && e.reason) {
        if (x->metrics)
            x->metrics->tasks_rejected++;
        *out = json_pack("{s:s,s:n}", "errorReason", e.reason, "id");
        return *out ? SKP_OK : SKP_ENOMEM;
    }
    if (err) {
        snprintf(c->error, sizeof(c->error), "the task could not be stored: %s", skp_strerror(err));
        return err;
    }
    if (x->metrics)
        x->metrics->tasks_created++;
    *out = json_pack("{s:n,s:s}", "errorReason", "id", id);
    skpx_free(id);
    return *out ? SKP_OK : SKP_ENOMEM;
}

/* ---- traces: the profiled segments ---- */

/* Conditions of queryBasicTraces / queryTrace over the tasks' profiled segments. */
struct trace_scan {
    struct store *st;
    const char *trace_id;   /* NULL = any */
    const char *instance;   /* NULL = any */
    const char *endpoint;   /* NULL = any */
    int64_t min_ms, max_ms; /* duration bounds; max 0 = none */
    int state;              /* 0 all, 1 success, 2 error */
    size_t scanned;
    json_t *out;   /* BasicTrace objects or spans */
    bool as_spans; /* queryTrace */
    json_t *seen;  /* segment ids already taken (a segment profiled by two tasks) */
};

static bool seg_is_error(const struct store_profiled_segment *seg)
{
    for (size_t i = 0; i < seg->n_spans; i++)
        if (seg->spans[i].is_error)
            return true;
    return false;
}

static skp_err scan_seg(void *ud, const struct store_profiled_segment *seg)
{
    struct trace_scan *s = ud;
    if (++s->scanned > GRAPHQL_SCAN_MAX)
        return SKP_EFULL;
    if (!seg->has_object || json_object_get(s->seen, seg->segment_id))
        return SKP_OK;
    if (s->trace_id && strcmp(s->trace_id, seg->trace_id) != 0)
        return SKP_OK;
    if (s->instance && strcmp(s->instance, seg->instance) != 0)
        return SKP_OK;
    if (s->endpoint && strcmp(s->endpoint, seg->endpoint) != 0)
        return SKP_OK;
    int64_t d = seg_duration(seg);
    if (d < s->min_ms || (s->max_ms && d > s->max_ms))
        return SKP_OK;
    bool err = seg_is_error(seg);
    if ((s->state == 1 && err) || (s->state == 2 && !err))
        return SKP_OK;
    if (json_object_set_new(s->seen, seg->segment_id, json_true()) != 0)
        return SKP_ENOMEM;
    if (s->as_spans) {
        json_t *spans = spans_json(seg, false);
        if (!spans || json_array_extend(s->out, spans) != 0) {
            json_decref(spans);
            return SKP_ENOMEM;
        }
        json_decref(spans);
        return SKP_OK;
    }
    char start[24];
    snprintf(start, sizeof(start), "%" PRId64, seg->start_ms);
    json_t *j = json_pack("{s:o,s:o,s:I,s:s,s:b,s:[o]}", "segmentId", skp_json_str(seg->segment_id),
                          "endpointNames", endpoint_names(seg, NULL), "duration",
                          (json_int_t)(d > INT32_MAX ? INT32_MAX : d), "start", start, "isError",
                          (int)err, "traceIds", skp_json_str(seg->trace_id));
    return j && json_array_append_new(s->out, j) == 0 ? SKP_OK : SKP_ENOMEM;
}

static skp_err collect_task_id(void *ud, const struct store_task *t)
{
    json_t *j = skp_json_str(t->id);
    return j && json_array_append_new(ud, j) == 0 ? SKP_OK : SKP_ENOMEM;
}

/* Walks the profiled segments of the tasks of `service` (NULL = all). */
static skp_err scan_tasks(struct trace_scan *s, const char *service)
{
    json_t *ids = json_array();
    skp_err err = ids ? store_list_tasks(s->st, service, NULL, collect_task_id, ids) : SKP_ENOMEM;
    size_t i;
    json_t *id;
    json_array_foreach(ids, i, id) {
        if (err)
            break;
        err = store_list_profiled_segments(s->st, json_string_value(id), scan_seg, s);
    }
    json_decref(ids);
    return err == SKP_EFULL ? SKP_OK : err;
}

static int by_start_desc(const void *a, const void *b)
{
    const char *x = json_string_value(json_object_get(*(json_t *const *)a, "start"));
    const char *y = json_string_value(json_object_get(*(json_t *const *)b, "start"));
    long long p = x ? strtoll(x, NULL, 10) : 0, q = y ? strtoll(y, NULL, 10) : 0;
    return p == q ? 0 : p > q ? -1 : 1;
}

static int by_duration_desc(const void *a, const void *b)
{
    json_int_t p = json_integer_value(json_object_get(*(json_t *const *)a, "duration"));
    json_int_t q = json_integer_value(json_object_get(*(json_t *const *)b, "duration"));
    return p == q ? 0 : p > q ? -1 : 1;
}

static skp_err r_basic_traces(struct gql_call *c, json_t **out)
{
    struct graphql_ctx *x = c->ctx;
    json_t *cond = json_object_get(c->args, "condition");
    char *service = NULL, *isvc = NULL, *inst = NULL, *esvc = NULL, *ep = NULL;
    const char *sid = json_string_value(json_object_get(cond, "serviceId"));
    const char *iid = json_string_value(json_object_get(cond, "serviceInstanceId"));
    const char *eid = json_string_value(json_object_get(cond, "endpointId"));
    const char *tid = json_string_value(json_object_get(cond, "traceId"));
    const char *state = json_string_value(json_object_get(cond, "traceState"));
    const char *order = json_string_value(json_object_get(cond, "queryOrder"));
    json_t *paging = json_object_get(cond, "paging");
    struct trace_scan s = {.st = x->store, .out = json_array(), .seen = json_object()};
    skp_err err = s.out && s.seen ? SKP_OK : SKP_ENOMEM;
    bool none = false; /* an id that names nothing matches nothing */
    if (sid && *sid && !(service = graphql_service_of(sid)))
        none = true;
    if (iid && *iid && !graphql_split_child(iid, &isvc, &inst))
        none = true;
    if (eid && *eid && !graphql_split_child(eid, &esvc, &ep))
        none = true;
    s.trace_id = tid && *tid ? tid : NULL;
    s.instance = inst;
    s.endpoint = ep;
    s.min_ms = json_integer_value(json_object_get(cond, "minTraceDuration"));
    s.max_ms = json_integer_value(json_object_get(cond, "maxTraceDuration"));
    s.state = state && strcmp(state, "SUCCESS") == 0 ? 1 : state && strcmp(state, "ERROR") == 0;
    if (state && strcmp(state, "ERROR") == 0)
        s.state = 2;
    if (!err && !none)
        err = scan_tasks(&s, service ? service : isvc ? isvc : esvc);
    SKPX_FREE_ALL(service, isvc, inst, esvc, ep);
    json_decref(s.seen);
    if (err) {
        json_decref(s.out);
        return graphql_read_failed(c, err, "traces");
    }
    /* order, then the page (pageNum from 1) */
    size_t n = json_array_size(s.out);
    json_t **v = skpx_calloc(n ? n : 1, sizeof(*v));
    if (!v) {
        json_decref(s.out);
        return SKP_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        v[i] = json_array_get(s.out, i);
    qsort(v, n, sizeof(*v),
          order && strcmp(order, "BY_DURATION") == 0 ? by_duration_desc : by_start_desc);
    json_int_t size = json_integer_value(json_object_get(paging, "pageSize"));
    json_int_t num = json_integer_value(json_object_get(paging, "pageNum"));
    if (size <= 0 || size > GRAPHQL_LIST_MAX)
        size = GRAPHQL_LIST_MAX;
    if (num <= 0)
        num = 1;
    json_t *page = json_array();
    for (size_t i = (size_t)((num - 1) * size); page && i < n && i < (size_t)(num * size); i++)
        json_array_append(page, v[i]);
    skpx_free(v);
    json_decref(s.out);
    *out = page ? json_pack("{s:o,s:n}", "traces", page, "debuggingTrace") : NULL;
    return *out ? SKP_OK : SKP_ENOMEM;
}

static skp_err r_query_trace(struct gql_call *c, json_t **out)
{
    struct graphql_ctx *x = c->ctx;
    struct trace_scan s = {.st = x->store,
                           .trace_id = json_string_value(json_object_get(c->args, "traceId")),
                           .as_spans = true,
                           .out = json_array(),
                           .seen = json_object()};
    skp_err err = s.out && s.seen ? scan_tasks(&s, NULL) : SKP_ENOMEM;
    json_decref(s.seen);
    if (err) {
        json_decref(s.out);
        return graphql_read_failed(c, err, "the trace");
    }
    *out = json_pack("{s:o,s:n}", "spans", s.out, "debuggingTrace");
    return *out ? SKP_OK : SKP_ENOMEM;
}

const struct gql_resolver graphql_profile_resolvers[] = {
    {"Query", "getProfileTaskList", r_task_list},
    {"Query", "getProfileTaskLogs", r_task_logs},
    {"Query", "getProfileTaskSegments", r_task_segments},
    {"Query", "getSegmentsProfileAnalyze", r_segments_analyze},
    {"Query", "queryBasicTraces", r_basic_traces},
    {"Query", "queryTrace", r_query_trace},
    {"Mutation", "createProfileTask", r_create_task},
};
const size_t graphql_n_profile_resolvers =
    sizeof(graphql_profile_resolvers) / sizeof(graphql_profile_resolvers[0]);
