/* graphql_meta.c - resolvers of the protocol's metadata fields: version, time, TTLs, menu,
 * layers, services, instances and endpoints, from the store's registry (ManagementService) and
 * the endpoint statistics, with OAP's ids (graphql.h). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"
#include "server/formats/utf8.h"
#include "server/graphql/graphql.h"
#include "server/stats/endpoint_stats.h"

#ifndef SKP_VERSION
#define SKP_VERSION "dev"
#endif

/* The layer of a service row: agents that name none are GENERAL, as OAP files them. */
static const char *layer_of(const char *layer)
{
    return layer && *layer ? layer : "GENERAL";
}

static skp_err r_version(struct gql_call *c, json_t **out)
{
    (void)c;
    *out = json_string("skyprofd " SKP_VERSION);
    return *out ? SKP_OK : SKP_ENOMEM;
}

static skp_err r_time_info(struct gql_call *c, json_t **out)
{
    struct graphql_ctx *x = c->ctx;
    time_t now = (time_t)(x->now_ms / 1000);
    struct tm tm;
    long off = localtime_r(&now, &tm) ? tm.tm_gmtoff : 0;
    char tz[32];
    int a = (int)((off < 0 ? -off : off) % 86400); /* offsets are within a day */
    snprintf(tz, sizeof(tz), "%c%02d%02d", off < 0 ? '-' : '+', a / 3600, a % 3600 / 60);
    *out = json_pack("{s:s,s:I}", "timezone", tz, "currentTimestamp", (json_int_t)x->now_ms);
    return *out ? SKP_OK : SKP_ENOMEM;
}

static skp_err r_records_ttl(struct gql_call *c, json_t **out)
{
    (void)c;
    int d = graphql_retention_days();
    *out =
        json_pack("{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "normal", d, "trace", d,
                  "zipkinTrace", d, "log", d, "browserErrorLog", d, "coldNormal", -1, "coldTrace",
                  -1, "coldZipkinTrace", -1, "coldLog", -1, "coldBrowserErrorLog", -1);
    return *out ? SKP_OK : SKP_ENOMEM;
}

static skp_err r_metrics_ttl(struct gql_call *c, json_t **out)
{
    (void)c;
    int d = graphql_retention_days();
    *out = json_pack("{s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "metadata", d, "minute", d, "hour", d, "day",
                     d, "coldMinute", -1, "coldHour", -1, "coldDay", -1);
    return *out ? SKP_OK : SKP_ENOMEM;
}

/* A Service object of OAP's: "group::name" names carry their group. */
static json_t *service_json(const char *name, const char *layer)
{
    char id[GRAPHQL_ID_MAX];
    if (!graphql_service_id(name, id, sizeof(id)))
        return NULL;
    const char *sep = strstr(name, "::");
    char *group = sep ? skpx_strndup(name, (size_t)(sep - name)) : NULL;
    json_t *j =
        json_pack("{s:s,s:o,s:o,s:o,s:[s],s:b}", "id", id, "name", skp_json_str(name), "group",
                  skp_json_str(group ? group : ""), "shortName", skp_json_str(sep ? sep + 2 : name),
                  "layers", layer_of(layer), "normal", 1);
    skpx_free(group);
    return j;
}

struct svc_walk {
    json_t *out;       /* array of services, or of layers */
    const char *layer; /* filter; NULL = all */
    const char *name;  /* find one by name; NULL = all */
    bool layers_only;
    json_t *found;
};

static skp_err svc_row(void *ud, const struct store_service_row *r)
{
    struct svc_walk *w = ud;
    const char *layer = layer_of(r->layer);
    if (w->layers_only) {
        size_t i;
        json_t *v;
        json_array_foreach(w->out, i, v)
            if (strcmp(json_string_value(v), layer) == 0)
                return SKP_OK;
        json_t *s = skp_json_str(layer);
        return s && json_array_append_new(w->out, s) == 0 ? SKP_OK : SKP_ENOMEM;
    }
    if (w->name) {
        if (strcmp(r->name, w->name) != 0)
            return SKP_OK;
        w->found = service_json(r->name, r->layer);
        return w->found ? SKP_EFULL : SKP_ENOMEM; /* EFULL: stop, found */
    }
    if (w->layer && strcmp(w->layer, layer) != 0)
        return SKP_OK;
    if (json_array_size(w->out) >= GRAPHQL_LIST_MAX)
        return SKP_EFULL;
    json_t *s = service_json(r->name, r->layer);
    return s && json_array_append_new(w->out, s) == 0 ? SKP_OK : SKP_ENOMEM;
}

static skp_err walk_services(struct gql_call *c, struct svc_walk *w)
{
    struct graphql_ctx *x = c->ctx;
    skp_err err = store_list_services(x->store, svc_row, w);
    if (err == SKP_EFULL)
        err = SKP_OK;
    return err ? graphql_read_failed(c, err, "services") : SKP_OK;
}

static skp_err r_list_layers(struct gql_call *c, json_t **out)
{
    struct svc_walk w = {.out = json_array(), .layers_only = true};
    skp_err err = w.out ? walk_services(c, &w) : SKP_ENOMEM;
    return graphql_list_answer(c, err, w.out, NULL, out);
}

static skp_err r_list_services(struct gql_call *c, json_t **out)
{
    const char *layer = graphql_arg_str(c, "layer");
    struct svc_walk w = {.out = json_array(), .layer = layer && *layer ? layer : NULL};
    skp_err err = w.out ? walk_services(c, &w) : SKP_ENOMEM;
    return graphql_list_answer(c, err, w.out, NULL, out);
}

/* A menu item of the protocol (subItems empty). */
static json_t *menu_item(const char *title, const char *icon, const char *layer,
                         const char *description, const char *i18n)
{
    return json_pack("{s:o,s:o,s:o,s:b,s:[],s:o,s:n,s:o}", "title", skp_json_str(title), "icon",
                     icon ? json_string(icon) : json_null(), "layer", skp_json_str(layer),
                     "activate", 1, "subItems", "description",
                     description ? json_string(description) : json_null(), "documentLink",
                     "i18nKey", i18n ? json_string(i18n) : json_null());
}

/* The UI's side menu: one group, General Service, holding the layers of skyprofd's services
 * (GENERAL, titled Services as OAP's menu does, always; others by their name). A sub-item leads
 * to the layer's root dashboard (its service list). */
static skp_err r_menu(struct gql_call *c, json_t **out)
{
    struct svc_walk w = {.out = json_array(), .layers_only = true};
    skp_err err = w.out ? walk_services(c, &w) : SKP_ENOMEM;
    json_t *group =
        err ? NULL : menu_item("General Service", "general_service", "", NULL, "general_service");
    json_t *subs = json_object_get(group, "subItems");
    json_t *general =
        subs ? menu_item("Services", NULL, "GENERAL",
                         "The services whose agents report to skyprofd", "general_service_services")
             : NULL;
    if (!err && (!general || json_array_append_new(subs, general) != 0))
        err = SKP_ENOMEM;
    size_t i;
    json_t *v;
    json_array_foreach(w.out, i, v) {
        const char *layer = json_string_value(v);
        if (err || strcmp(layer, "GENERAL") == 0)
            continue;
        json_t *it = menu_item(layer, NULL, layer, NULL, NULL);
        if (!it || json_array_append_new(subs, it) != 0)
            err = SKP_ENOMEM;
    }
    json_decref(w.out);
    *out = err ? NULL : json_pack("[o]", group);
    if (err || !*out) {
        if (err)
            json_decref(group);
        return err ? err : SKP_ENOMEM;
    }
    return SKP_OK;
}

/* The service named `name`, or null. */
static skp_err find_service(struct gql_call *c, const char *name, json_t **out)
{
    struct svc_walk w = {.name = name};
    skp_err err = name ? walk_services(c, &w) : SKP_OK;
    if (err)
        return err;
    *out = w.found ? w.found : json_null();
    return SKP_OK;
}

static skp_err r_get_service(struct gql_call *c, json_t **out)
{
    char *name = graphql_service_of(graphql_arg_str(c, "serviceId"));
    skp_err err = find_service(c, name, out);
    skpx_free(name);
    return err;
}

static skp_err r_find_service(struct gql_call *c, json_t **out)
{
    return find_service(c, graphql_arg_str(c, "serviceName"), out);
}

/* OAP's Language enum from an agent's "language" property. */
static const char *language_of(const char *lang)
{
    static const char *const known[] = {"JAVA", "DOTNET", "NODEJS", "PYTHON",
                                        "RUBY", "GO",     "LUA",    "PHP"};
    char up[16] = "";
    for (size_t i = 0; lang && lang[i] && i + 1 < sizeof(up); i++)
        up[i] = (char)(lang[i] >= 'a' && lang[i] <= 'z' ? lang[i] - 32 : lang[i]);
    if (strcmp(up, "C++") == 0 || strcmp(up, "C") == 0 || strcmp(up, "NATIVE") == 0)
        return "UNKNOWN";
    if (strcmp(up, "NODE") == 0)
        return "NODEJS";
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (strcmp(up, known[i]) == 0)
            return known[i];
    return "UNKNOWN";
}

struct inst_walk {
    const char *service;
    const char *name; /* find one; NULL = all */
    json_t *out;
};

static skp_err inst_row(void *ud, const struct store_instance_row *r)
{
    struct inst_walk *w = ud;
    if (w->name && strcmp(w->name, r->name) != 0)
        return SKP_OK;
    if (json_array_size(w->out) >= GRAPHQL_LIST_MAX)
        return SKP_EFULL;
    char id[GRAPHQL_ID_MAX];
    json_t *attrs = json_array();
    if (!attrs || !graphql_child_id(w->service, r->name, id, sizeof(id))) {
        json_decref(attrs);
        return attrs ? SKP_OK : SKP_ENOMEM; /* a name too long for an id is not listed */
    }
    for (size_t i = 0; i < r->n_props; i++) {
        json_t *a = json_pack("{s:o,s:o}", "name", skp_json_str(r->props[i].key), "value",
                              skp_json_str(r->props[i].value));
        if (!a || json_array_append_new(attrs, a) != 0) {
            json_decref(attrs);
            return SKP_ENOMEM;
        }
    }
    json_t *j =
        json_pack("{s:s,s:o,s:o,s:s,s:s}", "id", id, "name", skp_json_str(r->name), "attributes",
                  attrs, "language", language_of(r->language), "instanceUUID", id);
    return j && json_array_append_new(w->out, j) == 0 ? SKP_OK : SKP_ENOMEM;
}

static skp_err list_instances(struct gql_call *c, const char *service, const char *name,
                              json_t **out)
{
    struct graphql_ctx *x = c->ctx;
    struct inst_walk w = {.service = service, .name = name, .out = json_array()};
    skp_err err = w.out ? store_list_instances(x->store, service, inst_row, &w) : SKP_ENOMEM;
    if (err == SKP_EFULL || err == SKP_ENOTFOUND)
        err = SKP_OK; /* an unknown service has no instances */
    return graphql_list_answer(c, err, w.out, "instances", out);
}

static skp_err r_list_instances(struct gql_call *c, json_t **out)
{
    char *service = graphql_service_of(graphql_arg_str(c, "serviceId"));
    skp_err err = service ? list_instances(c, service, NULL, out) : SKP_OK;
    if (!service)
        *out = json_array();
    skpx_free(service);
    return *out ? err : SKP_ENOMEM;
}

static skp_err r_get_instance(struct gql_call *c, json_t **out)
{
    char *service, *name;
    if (!graphql_split_child(graphql_arg_str(c, "instanceId"), &service, &name)) {
        *out = json_null();
        return SKP_OK;
    }
    json_t *list = NULL;
    skp_err err = list_instances(c, service, name, &list);
    if (!err) {
        json_t *first = json_array_get(list, 0);
        *out = first ? json_incref(first) : json_null();
    }
    json_decref(list);
    skpx_free(service);
    skpx_free(name);
    return err;
}

/* ---- endpoints: the names of the endpoint statistics (in memory on the loop, rolled up in the
 * store before that) and of the service's profile tasks ---- */

struct ep_walk {
    const char *service;
    const char *keyword; /* substring filter; NULL/"" = all */
    size_t limit;
    json_t *out;
    json_t *seen; /* name -> true */
};

static skp_err ep_add(struct ep_walk *w, const char *name)
{
    if (!name || !*name || json_object_get(w->seen, name))
        return SKP_OK;
    if (w->keyword && *w->keyword && !strstr(name, w->keyword))
        return SKP_OK;
    if (json_array_size(w->out) >= w->limit)
        return SKP_EFULL;
    char id[GRAPHQL_ID_MAX];
    if (!graphql_child_id(w->service, name, id, sizeof(id)))
        return SKP_OK;
    json_t *j = json_pack("{s:s,s:o}", "id", id, "name", skp_json_str(name));
    if (!j || json_array_append_new(w->out, j) != 0 ||
        json_object_set_new(w->seen, name, json_true()) != 0)
        return SKP_ENOMEM;
    return SKP_OK;
}

static skp_err ep_memory(void *ud, const struct es_summary *s)
{
    return ep_add(ud, s->endpoint);
}

static skp_err ep_minute(void *ud, const struct store_endpoint_minute *m)
{
    return ep_add(ud, m->endpoint);
}

static skp_err ep_task(void *ud, const struct store_task *t)
{
    return ep_add(ud, t->endpoint);
}

static skp_err r_find_endpoint(struct gql_call *c, json_t **out)
{
    struct graphql_ctx *x = c->ctx;
    json_int_t limit = json_integer_value(json_object_get(c->args, "limit"));
    char *service = graphql_service_of(graphql_arg_str(c, "serviceId"));
    struct ep_walk w = {.service = service,
                        .keyword = graphql_arg_str(c, "keyword"),
                        .limit = limit <= 0 || limit > GRAPHQL_LIST_MAX ? GRAPHQL_LIST_MAX
                                                                        : (size_t)limit,
                        .out = json_array(),
                        .seen = json_object()};
    skp_err err = w.out && w.seen ? SKP_OK : SKP_ENOMEM;
    if (!err && service && x->endpoint_stats)
        err = endpoint_stats_query(x->endpoint_stats, service, ES_DEFAULT_WINDOW_MIN * 60,
                                   x->now_ms, ep_memory, &w);
    int days = graphql_retention_days();
    int64_t from = x->now_ms - (int64_t)(days > 0 ? days : 7) * 86400000;
    if (!err && service)
        err =
            store_list_endpoint_minutes(x->store, service, from, x->now_ms + 60000, ep_minute, &w);
    if (!err && service)
        err = store_list_tasks(x->store, service, NULL, ep_task, &w);
    if (err == SKP_EFULL)
        err = SKP_OK;
    skpx_free(service);
    json_decref(w.seen);
    return graphql_list_answer(c, err, w.out, "endpoints", out);
}

static skp_err r_endpoint_info(struct gql_call *c, json_t **out)
{
    const char *id = graphql_arg_str(c, "endpointId");
    char *service, *name;
    if (!graphql_split_child(id, &service, &name)) {
        *out = json_null();
        return SKP_OK;
    }
    char sid[GRAPHQL_ID_MAX];
    *out = graphql_service_id(service, sid, sizeof(sid))
               ? json_pack("{s:s,s:o,s:s,s:o}", "id", id, "name", skp_json_str(name), "serviceId",
                           sid, "serviceName", skp_json_str(service))
               : json_null();
    skpx_free(service);
    skpx_free(name);
    return *out ? SKP_OK : SKP_ENOMEM;
}

const struct gql_resolver graphql_meta_resolvers[] = {
    {"Query", "version", r_version},
    {"Mutation", "version", r_version},
    {"Query", "getTimeInfo", r_time_info},
    {"Query", "getMenuItems", r_menu},
    {"Query", "getRecordsTTL", r_records_ttl},
    {"Query", "getMetricsTTL", r_metrics_ttl},
    {"Query", "hasQueryTracesV2Support", gql_resolve_false},
    {"Query", "listLayers", r_list_layers},
    {"Query", "listServices", r_list_services},
    {"Query", "getService", r_get_service},
    {"Query", "findService", r_find_service},
    {"Query", "listInstances", r_list_instances},
    {"Query", "getInstance", r_get_instance},
    {"Query", "findEndpoint", r_find_endpoint},
    {"Query", "getEndpointInfo", r_endpoint_info},
};
const size_t graphql_n_meta_resolvers =
    sizeof(graphql_meta_resolvers) / sizeof(graphql_meta_resolvers[0]);
