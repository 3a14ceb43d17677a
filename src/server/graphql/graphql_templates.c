/* graphql_templates.c - dashboards (ui-configuration.graphqls): the dashboards users save from
 * SkyWalking's UI, in the store (store_templates.h), and skyprofd's default dashboards, written
 * for skyprofd: one Service dashboard per layer of the registered services (GENERAL always)
 * holding the five profiling widgets of SkyWalking's UI in tabs (trace profiling, eBPF,
 * continuous profiling, async-profiler, pprof), and one root dashboard per layer (its services,
 * the page the UI's menu item of the layer opens, each service leading to the former). A stored
 * row with a default's id (the user changed or disabled it) replaces that default. */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "server/formats/utf8.h"
#include "server/graphql/graphql.h"
#include "server/store/store_templates.h"
#include "server/tasks/task_service.h"

/* The default dashboards' name and the prefix of their ids. */
#define TEMPLATE_DEFAULT_NAME "skyprof-profiling"
#define TEMPLATE_DEFAULT_ID_PREFIX "skyprof-default-"
/* The root dashboards' (a layer's service list) name and the prefix of their ids. */
#define TEMPLATE_ROOT_NAME "skyprof-services"
#define TEMPLATE_ROOT_ID_PREFIX "skyprof-root-"

/* One tab holding one profiling widget of `type` (the UI's WidgetType). */
static json_t *tab(const char *name, const char *type)
{
    return json_pack("{s:s,s:[{s:i,s:i,s:i,s:i,s:s,s:s,s:s,s:{},s:{}}]}", "name", name, "children",
                     "x", 0, "y", 0, "w", 24, "h", 48, "i", "0", "id", "0", "type", type, "widget",
                     "graph");
}

/* The continuous-profiling tab: the policy editor, and below it the UI's task timeline (the
 * triggered tasks and, for eBPF ones, their flame graphs through the eBPF profiling fields). */
static json_t *timeline_tab(void)
{
    json_t *t = tab("Continuous Profiling", "ContinuousProfiling");
    json_t *kids = json_object_get(t, "children");
    json_object_set_new(json_array_get(kids, 0), "h", json_integer(30));
    if (kids &&
        json_array_append_new(kids, json_pack("{s:i,s:i,s:i,s:i,s:s,s:s,s:s,s:{},s:{}}", "x", 0,
                                              "y", 30, "w", 24, "h", 30, "i", "1", "id", "1",
                                              "type", "TaskTimeline", "widget", "graph")) != 0) {
        json_decref(t);
        return NULL;
    }
    return t;
}

/* The configuration text of the default dashboard of `layer` (caller frees with skpx_free). */
static char *default_configuration(const char *layer)
{
    json_t *tabs =
        json_pack("[o,o,o,o,o]", tab("Trace Profiling", "Profile"), tab("eBPF Profiling", "Ebpf"),
                  timeline_tab(), tab("Async Profiling", "AsyncProfiling"), tab("Pprof", "Pprof"));
    json_t *c =
        tabs ? json_pack("{s:o,s:s,s:s,s:b,s:[{s:i,s:i,s:i,s:i,s:s,s:s,s:s,s:i,s:o}]}", "layer",
                         skp_json_str(layer), "entity", "Service", "name", TEMPLATE_DEFAULT_NAME,
                         "isRoot", 0, "children", "x", 0, "y", 0, "w", 24, "h", 52, "i", "0", "id",
                         "0", "type", "Tab", "activedTabIndex", 0, "children", tabs)
             : NULL;
    char *out = skp_json_text(c, NULL);
    json_decref(c);
    return out;
}

/* The configuration text of the root dashboard of `layer`, the page its menu item opens: the
 * layer's services (the UI's ServiceList, no metrics), each leading to the default dashboard. */
static char *root_configuration(const char *layer)
{
    json_t *c = json_pack("{s:o,s:s,s:s,s:b,s:[{s:i,s:i,s:i,s:i,s:s,s:s,s:s,s:{s:s},s:{s:s,s:s,"
                          "s:i,s:b},s:[],s:[]}]}",
                          "layer", skp_json_str(layer), "entity", "All", "name", TEMPLATE_ROOT_NAME,
                          "isRoot", 1, "children", "x", 0, "y", 0, "w", 24, "h", 40, "i", "0", "id",
                          "0", "type", "Widget", "widget", "title", "Services", "graph", "type",
                          "ServiceList", "dashboardName", TEMPLATE_DEFAULT_NAME, "fontSize", 12,
                          "showGroup", 1, "expressions", "metricConfig");
    char *out = skp_json_text(c, NULL);
    json_decref(c);
    return out;
}

static json_t *default_template(const char *layer, bool root)
{
    char id[512];
    snprintf(id, sizeof(id), "%s%s", root ? TEMPLATE_ROOT_ID_PREFIX : TEMPLATE_DEFAULT_ID_PREFIX,
             layer);
    char *conf = root ? root_configuration(layer) : default_configuration(layer);
    json_t *j = conf ? json_pack("{s:o,s:s}", "id", skp_json_str(id), "configuration", conf) : NULL;
    skpx_free(conf);
    return j;
}

struct layer_walk {
    json_t *layers;
};

static skp_err layer_row(void *ud, const struct store_service_row *r)
{
    struct layer_walk *w = ud;
    const char *l = r->layer && *r->layer ? r->layer : "GENERAL";
    size_t i;
    json_t *v;
    json_array_foreach(w->layers, i, v)
        if (strcmp(json_string_value(v), l) == 0)
            return SKP_OK;
    if (json_array_size(w->layers) >= 64)
        return SKP_EFULL; /* layers are a short fixed list in SkyWalking */
    json_t *s = skp_json_str(l);
    return s && json_array_append_new(w->layers, s) == 0 ? SKP_OK : SKP_ENOMEM;
}

/* The default dashboards, two per layer: the profiling one and the root one. */
static skp_err defaults(struct gql_call *c, json_t *out)
{
    struct graphql_ctx *x = c->ctx;
    struct layer_walk w = {.layers = json_pack("[s]", "GENERAL")};
    skp_err err = w.layers ? store_list_services(x->store, layer_row, &w) : SKP_ENOMEM;
    if (err == SKP_EFULL)
        err = SKP_OK;
    size_t i;
    json_t *l;
    json_array_foreach(w.layers, i, l) {
        if (err)
            break;
        for (int root = 0; root < 2 && !err; root++) {
            json_t *t = default_template(json_string_value(l), root);
            if (!t || json_array_append_new(out, t) != 0)
                err = SKP_ENOMEM;
        }
    }
    json_decref(w.layers);
    return err ? graphql_read_failed(c, err, "dashboards") : SKP_OK;
}

static skp_err stored_row(void *ud, const struct store_template_row *r)
{
    json_t *o = json_pack("{s:o,s:o,s:b}", "id", skp_json_str(r->id), "configuration",
                          skp_json_str(r->configuration), "disabled", (int)r->disabled);
    return o && json_array_append_new(ud, o) == 0 ? SKP_OK : SKP_ENOMEM;
}

/* Every template, stored ones (disabled ones flagged) first then the defaults not stored. */
static skp_err all_templates(struct gql_call *c, json_t **out)
{
    struct graphql_ctx *x = c->ctx;
    json_t *stored = json_array(), *defs = json_array();
    skp_err err = stored && defs ? store_list_templates(x->store, stored_row, stored) : SKP_ENOMEM;
    if (err && err != SKP_ENOMEM)
        graphql_read_failed(c, err, "dashboards");
    if (!err)
        err = defaults(c, defs);
    size_t i, k;
    json_t *d, *t;
    json_array_foreach(defs, i, d) {
        bool replaced = false;
        json_array_foreach(stored, k, t)
            replaced = replaced || json_equal(json_object_get(t, "id"), json_object_get(d, "id"));
        if (!err && !replaced && json_array_append(stored, d) != 0)
            err = SKP_ENOMEM;
    }
    json_decref(defs);
    if (err) {
        json_decref(stored);
        return err;
    }
    *out = stored;
    return SKP_OK;
}

static skp_err r_all_templates(struct gql_call *c, json_t **out)
{
    json_t *all = NULL;
    skp_err err = all_templates(c, &all);
    json_t *a = err ? NULL : json_array();
    size_t i;
    json_t *t;
    json_array_foreach(all, i, t)
        if (a && !json_is_true(json_object_get(t, "disabled")) && json_array_append(a, t) != 0)
            err = SKP_ENOMEM;
    json_decref(all);
    if (err || !a) {
        json_decref(a);
        return err ? err : SKP_ENOMEM;
    }
    *out = a;
    return SKP_OK;
}

/* The template `id` (a new reference) or NULL; disabled ones count when with_disabled. */
static skp_err find_template(struct gql_call *c, const char *id, bool with_disabled, json_t **found)
{
    json_t *all = NULL;
    *found = NULL;
    skp_err err = all_templates(c, &all);
    size_t i;
    json_t *t;
    json_array_foreach(all, i, t)
        if (!*found && strcmp(json_string_value(json_object_get(t, "id")), id) == 0 &&
            (with_disabled || !json_is_true(json_object_get(t, "disabled"))))
            *found = json_incref(t);
    json_decref(all);
    return err;
}

static skp_err r_template(struct gql_call *c, json_t **out)
{
    json_t *t = NULL;
    skp_err err = find_template(c, json_string_value(json_object_get(c->args, "id")), false, &t);
    if (err)
        return err;
    if (t)
        json_object_del(t, "disabled");
    *out = t ? t : json_null();
    return SKP_OK;
}

static skp_err change_status(json_t **out, const char *id, bool ok, const char *message)
{
    *out =
        json_pack("{s:o,s:b,s:s?}", "id", skp_json_str(id), "status", (int)ok, "message", message);
    return *out ? SKP_OK : SKP_ENOMEM;
}

/* A configuration must be a JSON object (the UI's dashboard); NULL when it is, else why not. */
static const char *bad_configuration(const char *conf)
{
    json_error_t e;
    json_t *j = conf ? json_loads(conf, 0, &e) : NULL;
    bool ok = json_is_object(j);
    json_decref(j);
    if (conf && strlen(conf) > STORE_TEMPLATE_MAX_BYTES)
        return "the configuration is too large";
    return ok ? NULL : "the configuration must be a JSON object";
}

static skp_err put(struct gql_call *c, const char *id, const char *conf, json_t **out)
{
    struct graphql_ctx *x = c->ctx;
    skp_err err = store_put_template(x->store, id, conf, x->now_ms);
    if (err) {
        snprintf(c->error, sizeof(c->error), "the dashboard could not be stored: %s",
                 skp_strerror(err));
        return err;
    }
    return change_status(out, id, true, NULL);
}

static skp_err r_add_template(struct gql_call *c, json_t **out)
{
    const char *conf =
        json_string_value(json_object_get(json_object_get(c->args, "setting"), "configuration"));
    const char *why = bad_configuration(conf);
    if (!graphql_writable(c))
        return SKP_ESTATE;
    if (why)
        return change_status(out, "", false, why);
    /* a random id, as OAP gives new templates UUIDs */
    char id[37];
    task_uuid(id);
    return put(c, id, conf, out);
}

static skp_err r_change_template(struct gql_call *c, json_t **out)
{
    json_t *setting = json_object_get(c->args, "setting");
    const char *id = json_string_value(json_object_get(setting, "id"));
    const char *conf = json_string_value(json_object_get(setting, "configuration"));
    const char *why = bad_configuration(conf);
    if (!graphql_writable(c))
        return SKP_ESTATE;
    if (why)
        return change_status(out, id, false, why);
    json_t *t = NULL;
    skp_err err = find_template(c, id, false, &t);
    json_decref(t);
    if (err)
        return err;
    if (!t)
        return change_status(out, id, false, "no such dashboard");
    return put(c, id, conf, out);
}

static skp_err r_disable_template(struct gql_call *c, json_t **out)
{
    struct graphql_ctx *x = c->ctx;
    const char *id = json_string_value(json_object_get(c->args, "id"));
    if (!graphql_writable(c))
        return SKP_ESTATE;
    json_t *t = NULL;
    skp_err err = find_template(c, id, false, &t);
    if (!err && t) {
        /* a default that was never stored is stored first, so disabling it sticks */
        err = store_put_template(x->store, id,
                                 json_string_value(json_object_get(t, "configuration")), x->now_ms);
        if (!err)
            err = store_disable_template(x->store, id, x->now_ms);
        if (err)
            snprintf(c->error, sizeof(c->error), "the dashboard could not be disabled: %s",
                     skp_strerror(err));
    }
    bool found = t != NULL;
    json_decref(t);
    if (err)
        return err;
    return change_status(out, id, found, found ? NULL : "no such dashboard");
}

const struct gql_resolver graphql_template_resolvers[] = {
    {"Query", "getAllTemplates", r_all_templates},
    {"Query", "getTemplate", r_template},
    {"Mutation", "addTemplate", r_add_template},
    {"Mutation", "changeTemplate", r_change_template},
    {"Mutation", "disableTemplate", r_disable_template},
};
const size_t graphql_n_template_resolvers =
    sizeof(graphql_template_resolvers) / sizeof(graphql_template_resolvers[0]);
