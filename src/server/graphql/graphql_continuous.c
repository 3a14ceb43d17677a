/* graphql_continuous.c - the strategy editor of SkyWalking's Continuous Profiling widget
 * (continuous-profiling.graphqls): setContinuousProfilingPolicy through the same steps as the
 * HTTP API's PUT /api/v1/continuous/policies/{service} (cont_policy_from_input with OAP's
 * validation texts, the evaluator's room, store_cont_put_policy, cont_eval_set_policy), and
 * queryContinuousProfilingServiceTargets from the stored policy with the triggers' counts,
 * queryContinuousProfilingMonitoringInstances from the registry, the eBPF processes
 * (store_ebpf.h: host processes, OAP's detect type VM) and the triggers of the target. A
 * policy's targets and check items that only skyprofd has (TRACE, PPROF_*, ENDPOINT_*) have no
 * name in the protocol and are left out of its answer. */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "server/continuous/continuous_eval.h"
#include "server/continuous/continuous_policy.h"
#include "server/formats/utf8.h"
#include "server/graphql/graphql.h"
#include "server/store/store_continuous.h"
#include "server/store/store_ebpf.h"

/* Triggers counted per target for one answer (the newest first). */
#define GRAPHQL_TRIGGERS_MAX 10000

static skp_err r_set_policy(struct gql_call *c, json_t **out)
{
    struct graphql_ctx *x = c->ctx;
    json_t *r = json_object_get(c->args, "request");
    if (!graphql_writable(c))
        return SKP_ESTATE;
    char *service = graphql_service_of(json_string_value(json_object_get(r, "serviceId")));
    if (!service) {
        *out = json_pack("{s:b,s:s}", "status", 0, "errorReason", "serviceId is not a service id");
        return *out ? SKP_OK : SKP_ENOMEM;
    }
    /* the protocol's input is the HTTP API's body plus serviceId */
    json_t *in = json_pack("{s:O}", "targets", json_object_get(r, "targets"));
    struct cont_policy p;
    char reason[256] = "";
    skp_err err = in ? cont_policy_from_input(service, in, &p, reason, sizeof(reason)) : SKP_ENOMEM;
    json_decref(in);
    bool have = err == SKP_OK;
    const char *refused = err == SKP_EINVAL ? reason : NULL;
    if (err == SKP_EINVAL)
        err = SKP_OK;
    if (have && x->cont_eval && !cont_eval_policy_room(x->cont_eval, service))
        refused = "too many continuous-profiling policies: remove one or raise skyprofd "
                  "--max-policies";
    if (have && !refused)
        err = store_cont_put_policy(x->store, service, p.uuid, p.json, x->now_ms);
    /* stored but not evaluated only without memory: the HTTP API answers success there too */
    if (have && !refused && !err && x->cont_eval)
        (void)!cont_eval_set_policy(x->cont_eval, &p);
    if (have)
        cont_policy_cleanup(&p);
    skpx_free(service);
    if (refused) {
        *out = json_pack("{s:b,s:s}", "status", 0, "errorReason", refused);
        return *out ? SKP_OK : SKP_ENOMEM;
    }
    if (err) {
        snprintf(c->error, sizeof(c->error), "the policy could not be stored: %s",
                 skp_strerror(err));
        return err;
    }
    *out = json_pack("{s:b,s:n}", "status", 1, "errorReason");
    return *out ? SKP_OK : SKP_ENOMEM;
}

/* Triggers of one service per target name: count and latest time. */
struct trig_walk {
    json_t *by_target; /* name -> [count, last_ms] */
    size_t n;
};

static skp_err trig_row(void *ud, const struct store_cont_trigger *t)
{
    struct trig_walk *w = ud;
    if (++w->n > GRAPHQL_TRIGGERS_MAX || !t->target)
        return SKP_OK;
    json_t *e = json_object_get(w->by_target, t->target);
    if (!e) {
        e = json_pack("[i,I]", 0, (json_int_t)0);
        if (!e || json_object_set_new(w->by_target, t->target, e) != 0)
            return SKP_ENOMEM;
    }
    json_array_set_new(e, 0, json_integer(json_integer_value(json_array_get(e, 0)) + 1));
    if (t->time_ms > json_integer_value(json_array_get(e, 1)))
        json_array_set_new(e, 1, json_integer((json_int_t)t->time_ms));
    return SKP_OK;
}

struct policy_walk {
    const char *service;
    struct cont_policy p;
    bool found;
};

static skp_err policy_row(void *ud, const struct store_cont_policy_row *r)
{
    struct policy_walk *w = ud;
    if (w->found || strcmp(r->service, w->service) != 0)
        return SKP_OK;
    skp_err err = cont_policy_from_stored(w->service, r->json, &w->p);
    w->found = err == SKP_OK;
    return err == SKP_EINVAL ? SKP_OK : err; /* an unreadable row is no policy */
}

/* The protocol's monitor types (the agent-side five). */
static bool protocol_monitor(enum cont_monitor m)
{
    return m == CONT_MON_PROCESS_CPU || m == CONT_MON_PROCESS_THREAD_COUNT ||
           m == CONT_MON_SYSTEM_LOAD || m == CONT_MON_HTTP_ERROR_RATE ||
           m == CONT_MON_HTTP_AVG_RESPONSE_TIME;
}

static json_t *item_json(const struct cont_item *it)
{
    json_t *uris = it->n_uris ? json_array() : json_null();
    for (size_t i = 0; json_is_array(uris) && i < it->n_uris; i++)
        json_array_append_new(uris, skp_json_str(it->uri_list[i]));
    return uris ? json_pack("{s:s,s:o,s:I,s:I,s:o,s:o}", "type", cont_monitor_name(it->type),
                            "threshold", skp_json_str(it->threshold_text), "period",
                            (json_int_t)it->period_s, "count", (json_int_t)it->count, "uriList",
                            uris, "uriRegex",
                            it->uri_regex ? skp_json_str(it->uri_regex) : json_null())
                : NULL;
}

static skp_err r_targets(struct gql_call *c, json_t **out)
{
    struct graphql_ctx *x = c->ctx;
    char *service = graphql_service_of(json_string_value(json_object_get(c->args, "serviceId")));
    struct policy_walk pw = {.service = service};
    struct trig_walk tw = {.by_target = json_object()};
    json_t *targets = json_array();
    skp_err err = targets && tw.by_target ? SKP_OK : SKP_ENOMEM;
    if (!err && service)
        err = store_cont_list_policies(x->store, service, policy_row, &pw);
    if (!err && pw.found)
        err =
            store_cont_list_triggers(x->store, service, NULL, GRAPHQL_TRIGGERS_MAX, trig_row, &tw);
    for (size_t i = 0; !err && pw.found && i < pw.p.n_targets; i++) {
        const struct cont_target_spec *t = &pw.p.targets[i];
        if (t->type != CONT_TARGET_ON_CPU && t->type != CONT_TARGET_OFF_CPU &&
            t->type != CONT_TARGET_NETWORK)
            continue; /* ours only (TRACE, PPROF_*): no name in the protocol */
        json_t *items = json_array();
        for (size_t k = 0; items && k < t->n_items; k++)
            if (protocol_monitor(t->items[k].type) &&
                json_array_append_new(items, item_json(&t->items[k])) != 0) {
                json_decref(items);
                items = NULL;
            }
        json_t *trig = json_object_get(tw.by_target, cont_target_name(t->type));
        json_int_t last = json_integer_value(json_array_get(trig, 1));
        json_t *o =
            items ? json_pack("{s:s,s:o,s:I,s:o}", "type", cont_target_name(t->type), "checkItems",
                              items, "triggeredCount", json_integer_value(json_array_get(trig, 0)),
                              "lastTriggerTimestamp", last ? json_integer(last) : json_null())
                  : NULL;
        if (!o || json_array_append_new(targets, o) != 0)
            err = SKP_ENOMEM;
    }
    if (pw.found)
        cont_policy_cleanup(&pw.p);
    json_decref(tw.by_target);
    skpx_free(service);
    return graphql_list_answer(c, err, targets, "the policy", out);
}

/* Trigger counts of one target per instance and per process: key -> [count, last_ms]. */
struct mon_walk {
    const char *target;
    json_t *by_instance, *by_process;
    size_t n;
};

static skp_err count_into(json_t *map, const char *key, int64_t time_ms)
{
    json_t *e = json_object_get(map, key);
    if (!e) {
        e = json_pack("[i,I]", 0, (json_int_t)0);
        if (!e || json_object_set_new(map, key, e) != 0)
            return SKP_ENOMEM;
    }
    json_array_set_new(e, 0, json_integer(json_integer_value(json_array_get(e, 0)) + 1));
    if (time_ms > json_integer_value(json_array_get(e, 1)))
        json_array_set_new(e, 1, json_integer((json_int_t)time_ms));
    return SKP_OK;
}

static skp_err mon_trigger(void *ud, const struct store_cont_trigger *t)
{
    struct mon_walk *w = ud;
    if (++w->n > GRAPHQL_TRIGGERS_MAX || !t->target || strcmp(t->target, w->target) != 0)
        return SKP_OK;
    skp_err err = t->instance ? count_into(w->by_instance, t->instance, t->time_ms) : SKP_OK;
    if (!err && t->process)
        err = count_into(w->by_process, t->process, t->time_ms);
    return err;
}

/* Sets triggeredCount and lastTriggerTimestamp of o from map[key]. */
static void set_counts(json_t *o, json_t *map, const char *key)
{
    json_t *e = json_object_get(map, key);
    json_int_t last = json_integer_value(json_array_get(e, 1));
    json_object_set_new(o, "triggeredCount",
                        json_integer(json_integer_value(json_array_get(e, 0))));
    json_object_set_new(o, "lastTriggerTimestamp", last ? json_integer(last) : json_null());
}

struct mon_instances {
    const char *service;
    json_t *out;
    struct mon_walk *w;
};

static skp_err mon_instance(void *ud, const struct store_instance_row *r)
{
    struct mon_instances *m = ud;
    char id[GRAPHQL_ID_MAX];
    if (json_array_size(m->out) >= GRAPHQL_LIST_MAX)
        return SKP_EFULL;
    if (!graphql_child_id(m->service, r->name, id, sizeof(id)))
        return SKP_OK;
    json_t *attrs = json_array();
    for (size_t i = 0; attrs && i < r->n_props; i++)
        if (json_array_append_new(attrs,
                                  json_pack("{s:o,s:o}", "name", skp_json_str(r->props[i].key),
                                            "value", skp_json_str(r->props[i].value))) != 0) {
            json_decref(attrs);
            attrs = NULL;
        }
    json_t *o = attrs ? json_pack("{s:s,s:o,s:o,s:[]}", "id", id, "name", skp_json_str(r->name),
                                  "attributes", attrs, "processes")
                      : NULL;
    if (!o)
        return SKP_ENOMEM;
    set_counts(o, m->w->by_instance, r->name);
    return json_array_append_new(m->out, o) == 0 ? SKP_OK : SKP_ENOMEM;
}

static skp_err mon_process(void *ud, const struct store_ebpf_process *p)
{
    struct mon_instances *m = ud;
    size_t i;
    json_t *inst, *found = NULL;
    json_array_foreach(m->out, i, inst) {
        const char *name = json_string_value(json_object_get(inst, "name"));
        /* the instance's name went through skp_json_str: compare sanitized text */
        char *want = p->instance ? skp_utf8_sanitize(p->instance) : NULL;
        if (want && name && strcmp(name, want) == 0)
            found = inst;
        skpx_free(want);
        if (found)
            break;
    }
    json_t *procs = json_object_get(found, "processes");
    if (!procs || json_array_size(procs) >= GRAPHQL_LIST_MAX)
        return SKP_OK;
    json_t *labels = json_array();
    for (const char *s = p->labels ? p->labels : ""; labels && *s;) {
        const char *e = strchr(s, '\n');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        char *one = len ? skpx_strndup(s, len) : NULL;
        if (one)
            json_array_append_new(labels, skp_json_str(one));
        skpx_free(one);
        s += len + (e ? 1 : 0);
    }
    /* skyprofd keeps host processes only (collector_ebpf.c): OAP's detect type VM */
    json_t *o = labels
                    ? json_pack("{s:o,s:o,s:s,s:o}", "id", skp_json_str(p->id), "name",
                                skp_json_str(p->process_name), "detectType", "VM", "labels", labels)
                    : NULL;
    if (!o)
        return SKP_ENOMEM;
    set_counts(o, m->w->by_process, p->process_name ? p->process_name : "");
    return json_array_append_new(procs, o) == 0 ? SKP_OK : SKP_ENOMEM;
}

static skp_err r_monitoring(struct gql_call *c, json_t **out)
{
    struct graphql_ctx *x = c->ctx;
    char *service = graphql_service_of(json_string_value(json_object_get(c->args, "serviceId")));
    struct mon_walk w = {.target = json_string_value(json_object_get(c->args, "target")),
                         .by_instance = json_object(),
                         .by_process = json_object()};
    struct mon_instances m = {.service = service, .out = json_array(), .w = &w};
    skp_err err = m.out && w.by_instance && w.by_process ? SKP_OK : SKP_ENOMEM;
    if (!err && service)
        err = store_cont_list_triggers(x->store, service, NULL, GRAPHQL_TRIGGERS_MAX, mon_trigger,
                                       &w);
    if (!err && service)
        err = store_list_instances(x->store, service, mon_instance, &m);
    if (err == SKP_EFULL || err == SKP_ENOTFOUND)
        err = SKP_OK;
    if (!err && service)
        err = store_ebpf_list_processes(x->store, service, mon_process, &m);
    if (err == SKP_ENOTSUP)
        err = SKP_OK; /* a store without the eBPF tables: no processes */
    json_decref(w.by_instance);
    json_decref(w.by_process);
    skpx_free(service);
    return graphql_list_answer(c, err, m.out, "the monitored instances", out);
}

const struct gql_resolver graphql_continuous_resolvers[] = {
    {"Mutation", "setContinuousProfilingPolicy", r_set_policy},
    {"Query", "queryContinuousProfilingServiceTargets", r_targets},
    {"Query", "queryContinuousProfilingMonitoringInstances", r_monitoring},
};
const size_t graphql_n_continuous_resolvers =
    sizeof(graphql_continuous_resolvers) / sizeof(graphql_continuous_resolvers[0]);
