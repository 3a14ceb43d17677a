/* collector_continuous.c - continuous profiling on the gRPC side and skyprofd's evaluator loop:
 * skywalking.v3.ContinuousProfilingService (spec §3.2) queryPolicies (the uuid cursor: only
 * services whose policy uuid differs from the agent's, a removed policy as an empty UUID) and
 * reportProfilingTask (an agent-side trigger: recorded with its causes, answered with the TaskId
 * of the task the agent runs), and the evaluator's timer (collector_continuous_start): every
 * check interval it closes slots and evaluates; a firing target becomes a task and a trigger
 * (continuous_trigger.h). On a database several collectors share (PostgreSQL), the evaluator
 * judges every collector's requests and one collector at a time judges, the holder of a lease
 * (continuous_cluster.h). Runs on the server loop. */
#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/log.h"
#include "common/map.h"
#include "ebpf/profiling/ContinuousProfiling.pb-c.h"
#include "server/collector/collector.h"
#include "server/continuous/continuous_cluster.h"
#include "server/continuous/continuous_eval.h"
#include "server/continuous/continuous_trigger.h"
#include "server/store/store_continuous.h"

#define PATHS(method)                                                                              \
    "/skywalking.v3.ContinuousProfilingService/" method, "/ContinuousProfilingService/" method

/* Services one query may ask about. */
#define CONT_QUERY_MAX_SERVICES 64

struct collector_cont {
    struct cont_eval *eval;
    struct cont_cluster *cluster; /* NULL: the only collector (SQLite) */
    struct event *timer;
    int64_t synced_ms; /* cluster: when the policies were last read from the store */
};

/* Several collectors: how often each reads the policies another one may have changed. */
#define CONT_POLICY_SYNC_MS 2000

/* ---------------- queryPolicies ---------------- */

struct cmd_holder {
    Skywalking__V3__Commands resp;
    Skywalking__V3__Command cmd;
    Skywalking__V3__Command *cmdp[1];
    Skywalking__V3__KeyStringValuePair kv;
    Skywalking__V3__KeyStringValuePair *kvp[1];
    char serial[37];
    char *value; /* skpx-owned */
};

static void holder_free(struct collector_unary *u)
{
    struct cmd_holder *h = u->owned;
    if (!h)
        return;
    skpx_free(h->value);
    skpx_free(h);
    u->owned = NULL;
}

/* Attaches a one-command, one-arg answer to u (value is taken). */
static int answer_command(struct collector_unary *u, const char *command, const char *key,
                          char *value)
{
    struct cmd_holder *h = collector_unary_own(u, sizeof(*h), holder_free);
    if (!h) {
        skpx_free(value);
        return SKPX_GRPC_RESOURCE_EXHAUSTED;
    }
    h->value = value;
    skywalking__v3__key_string_value_pair__init(&h->kv);
    h->kv.key = (char *)key;
    h->kv.value = h->value;
    h->kvp[0] = &h->kv;
    skywalking__v3__command__init(&h->cmd);
    h->cmd.command = (char *)command;
    h->cmd.args = h->kvp;
    h->cmd.n_args = 1;
    skywalking__v3__commands__init(&h->resp);
    h->cmdp[0] = &h->cmd;
    h->resp.commands = h->cmdp;
    h->resp.n_commands = 1;
    u->resp = &h->resp.base;
    return SKPX_GRPC_OK;
}

struct policy_get {
    char *json;
    char uuid[129];
    bool found;
};

static skp_err policy_got(void *ud, const struct store_cont_policy_row *r)
{
    struct policy_get *g = ud;
    g->found = true;
    snprintf(g->uuid, sizeof(g->uuid), "%s", r->uuid);
    g->json = skpx_strdup(r->json);
    return g->json ? SKP_OK : SKP_ENOMEM;
}

static char *json_text(json_t *j)
{
    char *t = json_dumps(j, JSON_COMPACT);
    if (!t)
        return NULL;
    json_malloc_t jm;
    json_free_t jf;
    json_get_alloc_funcs(&jm, &jf);
    char *c = skpx_strdup(t);
    jf(t);
    return c;
}

static int query_body(struct collector *c, struct collector_unary *u, const ProtobufCMessage *msg)
{
    const Skywalking__V3__ContinuousProfilingPolicyQuery *q = (const void *)msg;
    if (q->n_policies > CONT_QUERY_MAX_SERVICES) {
        return collector_unary_fail(u, SKPX_GRPC_INVALID_ARGUMENT, "at most %d services per query",
                                    CONT_QUERY_MAX_SERVICES);
    }
    json_t *list = json_array();
    if (!list)
        return SKPX_GRPC_RESOURCE_EXHAUSTED;
    skp_err err = SKP_OK;
    for (size_t i = 0; i < q->n_policies && !err; i++) {
        const Skywalking__V3__ContinuousProfilingServicePolicyQuery *sq = q->policies[i];
        if (!sq || !sq->servicename || !sq->servicename[0])
            continue;
        const char *have = sq->uuid ? sq->uuid : "";
        struct policy_get g = {0};
        err = store_cont_list_policies(c->store, sq->servicename, policy_got, &g);
        if (err) {
            skpx_free(g.json);
            break;
        }
        json_t *el = NULL;
        if (g.found && strcmp(g.uuid, have) != 0) {
            struct cont_policy p;
            if (cont_policy_from_stored(sq->servicename, g.json, &p) == SKP_OK) {
                el = cont_policy_agent_json(sq->servicename, &p);
                cont_policy_cleanup(&p);
                if (!el)
                    err = SKP_ENOMEM;
            }
        } else if (!g.found && have[0]) {
            el = cont_policy_agent_json(sq->servicename, NULL); /* removed */
            if (!el)
                err = SKP_ENOMEM;
        }
        skpx_free(g.json);
        if (el && json_array_append_new(list, el))
            err = SKP_ENOMEM;
    }
    if (err) {
        json_decref(list);
        return collector_unary_store_failed(u, err, "policy lookup failed");
    }
    if (json_array_size(list) == 0) {
        json_decref(list);
        return SKPX_GRPC_OK; /* nothing changed: empty Commands */
    }
    char *text = json_text(list);
    json_decref(list);
    if (!text)
        return SKPX_GRPC_RESOURCE_EXHAUSTED;
    return answer_command(u, "ContinuousProfilingPolicyQuery", "ServiceWithPolicyJSON", text);
}
COLLECTOR_UNARY_ON_MESSAGE(on_query, query_body)

/* ---------------- reportProfilingTask ---------------- */

static const char *const k_cause_types[] = {"PROCESS_CPU", "PROCESS_THREAD_COUNT", "SYSTEM_LOAD",
                                            "HTTP_ERROR_RATE", "HTTP_AVG_RESPONSE_TIME"};
#define REPORT_MAX_CAUSES 32

static int report_body(struct collector *c, struct collector_unary *u, const ProtobufCMessage *msg)
{
    const Skywalking__V3__ContinuousProfilingReport *r = (const void *)msg;
    if (!r->servicename || !r->servicename[0]) {
        return collector_unary_fail(u, SKPX_GRPC_INVALID_ARGUMENT, "serviceName is required");
    }
    enum cont_target target;
    switch (r->target_case) {
    case SKYWALKING__V3__CONTINUOUS_PROFILING_REPORT__TARGET_ON_CPU:
        target = CONT_TARGET_ON_CPU;
        break;
    case SKYWALKING__V3__CONTINUOUS_PROFILING_REPORT__TARGET_OFF_CPU:
        target = CONT_TARGET_OFF_CPU;
        break;
    case SKYWALKING__V3__CONTINUOUS_PROFILING_REPORT__TARGET_NETWORK:
        target = CONT_TARGET_NETWORK;
        break;
    default:
        return collector_unary_fail(u, SKPX_GRPC_INVALID_ARGUMENT,
                                    "a target (onCPU, offCPU, network) is required");
    }
    struct store_cont_cause causes[REPORT_MAX_CAUSES];
    size_t n = 0;
    for (size_t i = 0; i < r->n_causes && n < REPORT_MAX_CAUSES; i++) {
        const Skywalking__V3__ContinuousProfilingCause *pc = r->causes[i];
        if (!pc)
            continue;
        struct store_cont_cause *sc = &causes[n];
        memset(sc, 0, sizeof(*sc));
        unsigned t = (unsigned)pc->type;
        sc->type =
            t < sizeof(k_cause_types) / sizeof(k_cause_types[0]) ? k_cause_types[t] : "UNKNOWN";
        if (pc->cause_case == SKYWALKING__V3__CONTINUOUS_PROFILING_CAUSE__CAUSE_SINGLE_VALUE &&
            pc->singlevalue) {
            sc->threshold = pc->singlevalue->threshold;
            sc->current = pc->singlevalue->current;
        } else if (pc->cause_case == SKYWALKING__V3__CONTINUOUS_PROFILING_CAUSE__CAUSE_URI &&
                   pc->uri) {
            sc->threshold = pc->uri->threshold;
            sc->current = pc->uri->current;
            sc->uri_is_regex =
                pc->uri->uri_case == SKYWALKING__V3__CONTINUOUS_PROFILING_URICAUSE__URI_REGEX;
            sc->uri = sc->uri_is_regex ? pc->uri->regex : pc->uri->path;
        }
        n++;
    }
    struct cont_trigger_req req = {
        .service = r->servicename,
        .instance = r->instancename && r->instancename[0] ? r->instancename : NULL,
        .process = r->processname && r->processname[0] ? r->processname : NULL,
        .target = target,
        .from_agent = true,
        .causes = causes,
        .n_causes = n,
        .duration_s = r->duration,
    };
    struct cont_trigger_result res;
    skp_err err = continuous_trigger_record(c->store, &req, collector_now(c), &res);
    if (err)
        return collector_unary_store_failed(u, err, "trigger not stored");
    char *id = skpx_strdup(res.task_id);
    if (!id)
        return SKPX_GRPC_RESOURCE_EXHAUSTED;
    return answer_command(u, "ContinuousProfilingReportTask", "TaskId", id);
}
COLLECTOR_UNARY_ON_MESSAGE(on_report, report_body)

static const struct collector_unary_route routes[] = {
    {PATHS("queryPolicies"), &skywalking__v3__continuous_profiling_policy_query__descriptor,
     on_query},
    {PATHS("reportProfilingTask"), &skywalking__v3__continuous_profiling_report__descriptor,
     on_report},
};

skp_err collector_continuous_register(struct collector *c, struct skpx_grpc_server *srv)
{
    return collector_add_unary(c, srv, routes, sizeof(routes) / sizeof(routes[0]));
}

/* ---------------- the evaluator ---------------- */

static int64_t on_fire(void *ud, const struct cont_fire *f)
{
    struct collector *c = ud;
    /* several collectors: the first claim of this window records it, whoever judged */
    if (c->cont->cluster && !cont_cluster_claim(c->cont->cluster, f->policy->service,
                                                cont_target_name(f->target), f->window_end_ms))
        return 0;
    struct store_cont_cause causes[CONT_EVAL_MAX_CAUSES];
    int64_t min_ms = -1;
    for (size_t i = 0; i < f->n_causes; i++) {
        const struct cont_cause *k = &f->causes[i];
        causes[i] = (struct store_cont_cause){.type = cont_monitor_name(k->type),
                                              .uri = k->uri,
                                              .threshold = k->threshold,
                                              .current = k->current,
                                              .window_s = k->window_s,
                                              .hits = k->hits};
        if (min_ms < 0)
            min_ms = k->type == CONT_MON_ENDPOINT_ERROR_RATE ? 0 : (int64_t)k->threshold;
    }
    struct cont_trigger_req req = {
        .service = f->policy->service,
        .instance = f->n_instances == 1 ? f->instances[0] : NULL,
        .target = f->target,
        .causes = causes,
        .n_causes = f->n_causes,
        .duration_s = f->policy->execute_s,
        .endpoint = f->n_causes ? f->causes[0].uri : NULL,
        .min_duration_ms = min_ms < 0 ? 0 : min_ms,
        .instances = f->instances,
        .n_instances = f->n_instances,
    };
    struct cont_trigger_result res;
    if (continuous_trigger_record(c->store, &req, f->now_ms, &res) != SKP_OK) {
        static struct skpx_log_limit lim;
        skpx_log_limited(&lim, SKPX_LOG_WARN, "continuous: trigger of %s not stored",
                         f->policy->service);
    }
    if (c->metrics)
        c->metrics->continuous_triggers++;
    return res.task_end_ms;
}

/* The policies set or removed through another collector (the store is the truth): a stored
 * policy whose uuid differs from the one evaluated here is installed, one no longer stored is
 * removed. */
struct policy_sync {
    struct cont_eval *e;
    struct skpx_strmap listed;
};

static skp_err sync_one(void *ud, const struct store_cont_policy_row *r)
{
    struct policy_sync *y = ud;
    skp_err err = skpx_strmap_put(&y->listed, r->service, 1);
    const char *have = cont_eval_policy_uuid(y->e, r->service);
    if (err || (have && strcmp(have, r->uuid) == 0))
        return err;
    struct cont_policy p;
    if (cont_policy_from_stored(r->service, r->json, &p) != SKP_OK)
        return SKP_OK;
    if (!have && !cont_eval_policy_room(y->e, r->service)) {
        cont_policy_cleanup(&p);
        return SKP_OK;
    }
    return cont_eval_set_policy(y->e, &p);
}

static bool still_listed(void *ud, const char *service)
{
    uint32_t one;
    return skpx_strmap_get(&((struct policy_sync *)ud)->listed, service, &one);
}

static void sync_policies(struct collector *c)
{
    struct policy_sync y = {.e = c->cont->eval};
    skp_err err = store_cont_list_policies(c->store, NULL, sync_one, &y);
    if (!err)
        cont_eval_retain(c->cont->eval, still_listed, &y);
    skpx_strmap_cleanup(&y.listed);
    if (err) {
        static struct skpx_log_limit lim;
        skpx_log_limited(&lim, SKPX_LOG_WARN, "continuous: policies not read: %s",
                         skp_strerror(err));
    }
}

void collector_continuous_tick(struct collector *c)
{
    if (!c->cont)
        return;
    int64_t now = collector_now(c);
    bool judge = true;
    if (c->cont->cluster && now - c->cont->synced_ms >= CONT_POLICY_SYNC_MS) {
        c->cont->synced_ms = now;
        sync_policies(c);
    }
    if (c->cont->cluster) {
        cont_cluster_tick(c->cont->cluster, c->cont->eval, now, &judge);
        struct cont_cluster_counters cc;
        cont_cluster_counters(c->cont->cluster, &cc);
        if (c->metrics) {
            c->metrics->cont_lease_takeovers = cc.takeovers;
            c->metrics->cont_shares_written = cc.shares_written;
            c->metrics->cont_shares_read = cc.shares_read;
            c->metrics->cont_claims_lost = cc.claims_lost;
            c->metrics->cont_cluster_errors = cc.errors;
        }
    }
    if (c->metrics)
        c->metrics->cont_evaluator = judge;
    if (judge)
        cont_eval_tick(c->cont->eval, now, on_fire, c);
    else
        cont_eval_roll(c->cont->eval, now);
}

void collector_continuous_record(struct collector *c, const char *service, const char *instance,
                                 const char *endpoint, int64_t end_ms, int64_t latency_ms,
                                 bool is_error)
{
    if (c->cont)
        cont_eval_record(c->cont->eval, service, instance, endpoint, end_ms, latency_ms, is_error,
                         collector_now(c));
}

struct cont_eval *collector_continuous_eval(struct collector *c)
{
    return c->cont ? c->cont->eval : NULL;
}

static void on_timer(evutil_socket_t fd, short what, void *ud)
{
    (void)fd;
    (void)what;
    collector_continuous_tick(ud);
}

static skp_err load_policy(void *ud, const struct store_cont_policy_row *r)
{
    struct cont_eval *e = ud;
    struct cont_policy p;
    if (cont_policy_from_stored(r->service, r->json, &p) != SKP_OK) {
        SKPX_WARN("continuous: stored policy of %s not readable; skipped", r->service);
        return SKP_OK;
    }
    return cont_eval_set_policy(e, &p);
}

skp_err collector_continuous_start(struct collector *c, struct event_base *base, int64_t slot_ms,
                                   int64_t check_ms)
{
    c->cont = skpx_calloc(1, sizeof(*c->cont));
    if (!c->cont)
        return SKP_ENOMEM;
    if (check_ms <= 0)
        check_ms = slot_ms > 0 ? slot_ms : 1000;
    /* a store shared by several collectors: the cluster's statistics and one evaluator */
    skp_err err = cont_cluster_new(c->store, check_ms, collector_now(c), &c->cont->cluster);
    if (err == SKP_ENOTSUP)
        err = SKP_OK;
    if (err) {
        collector_continuous_stop(c);
        return err;
    }
    /* merged: a share is stored at the holder's next tick at the latest after its slot closed */
    struct cont_eval_opts o = {.slot_ms = slot_ms,
                               .max_policies = c->max_policies,
                               .merged = c->cont->cluster != NULL,
                               .merge_delay_ms = check_ms};
    err = cont_eval_new(&o, &c->cont->eval);
    if (!err)
        err = store_cont_list_policies(c->store, NULL, load_policy, c->cont->eval);
    if (!err)
        err = cont_cluster_replay(c->store, c->cont->eval, collector_now(c));
    if (!err && base) {
        c->cont->timer = event_new(base, -1, EV_PERSIST, on_timer, c);
        struct timeval tv = {.tv_sec = check_ms / 1000, .tv_usec = (check_ms % 1000) * 1000};
        if (!c->cont->timer || event_add(c->cont->timer, &tv) != 0)
            err = SKP_ENOMEM;
    }
    if (err)
        collector_continuous_stop(c);
    return err;
}

void collector_continuous_stop(struct collector *c)
{
    if (!c || !c->cont)
        return;
    if (c->cont->timer)
        event_free(c->cont->timer);
    cont_cluster_free(c->cont->cluster);
    cont_eval_free(c->cont->eval);
    skpx_free(c->cont);
    c->cont = NULL;
}
