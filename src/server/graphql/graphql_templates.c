/* graphql_templates.c - dashboards (ui-configuration.graphqls): skyprofd's default dashboards,
 * written for skyprofd, one Service dashboard per layer of the registered services (GENERAL
 * always) holding the five profiling widgets of SkyWalking's UI in tabs: trace profiling, eBPF,
 * continuous profiling, async-profiler and pprof. */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "server/formats/utf8.h"
#include "server/graphql/graphql.h"

/* The default dashboards' name and the prefix of their ids. */
#define TEMPLATE_DEFAULT_NAME "skyprof-profiling"
#define TEMPLATE_DEFAULT_ID_PREFIX "skyprof-default-"

/* One tab holding one profiling widget of `type` (the UI's WidgetType). */
static json_t *tab(const char *name, const char *type)
{
    return json_pack("{s:s,s:[{s:i,s:i,s:i,s:i,s:s,s:s,s:s,s:{},s:{}}]}", "name", name, "children",
                     "x", 0, "y", 0, "w", 24, "h", 48, "i", "0", "id", "0", "type", type, "widget",
                     "graph");
}

/* The configuration text of the default dashboard of `layer` (caller frees with skpx_free). */
static char *default_configuration(const char *layer)
{
    json_t *tabs =
        json_pack("[o,o,o,o,o]", tab("Trace Profiling", "Profile"), tab("eBPF Profiling", "Ebpf"),
                  tab("Continuous Profiling", "ContinuousProfiling"),
                  tab("Async Profiling", "AsyncProfiling"), tab("Pprof", "Pprof"));
    json_t *c =
        tabs ? json_pack("{s:o,s:s,s:s,s:b,s:[{s:i,s:i,s:i,s:i,s:s,s:s,s:s,s:i,s:o}]}", "layer",
                         skp_json_str(layer), "entity", "Service", "name", TEMPLATE_DEFAULT_NAME,
                         "isRoot", 0, "children", "x", 0, "y", 0, "w", 24, "h", 52, "i", "0", "id",
                         "0", "type", "Tab", "activedTabIndex", 0, "children", tabs)
             : NULL;
    size_t n = c ? json_dumpb(c, NULL, 0, JSON_COMPACT) : 0;
    char *out = n ? skpx_malloc(n + 1) : NULL;
    if (out) {
        json_dumpb(c, out, n, JSON_COMPACT);
        out[n] = '\0';
    }
    json_decref(c);
    return out;
}

static json_t *default_template(const char *layer)
{
    char id[512];
    snprintf(id, sizeof(id), TEMPLATE_DEFAULT_ID_PREFIX "%s", layer);
    char *conf = default_configuration(layer);
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

/* The default dashboards, one per layer. */
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
        json_t *t = default_template(json_string_value(l));
        if (!t || json_array_append_new(out, t) != 0)
            err = SKP_ENOMEM;
    }
    json_decref(w.layers);
    if (err)
        snprintf(c->error, sizeof(c->error), "dashboards could not be read: %s", skp_strerror(err));
    return err;
}

static skp_err r_all_templates(struct gql_call *c, json_t **out)
{
    json_t *a = json_array();
    skp_err err = a ? defaults(c, a) : SKP_ENOMEM;
    if (err) {
        json_decref(a);
        return err;
    }
    *out = a;
    return SKP_OK;
}

static skp_err r_template(struct gql_call *c, json_t **out)
{
    const char *id = json_string_value(json_object_get(c->args, "id"));
    json_t *all = NULL;
    skp_err err = r_all_templates(c, &all);
    if (err)
        return err;
    size_t i;
    json_t *t;
    *out = NULL;
    json_array_foreach(all, i, t)
        if (!*out && strcmp(json_string_value(json_object_get(t, "id")), id) == 0)
            *out = json_incref(t);
    json_decref(all);
    if (!*out)
        *out = json_null();
    return SKP_OK;
}

/* Dashboards are not stored yet: a change is refused with a status the UI shows. */
static skp_err r_refuse_change(struct gql_call *c, json_t **out)
{
    json_t *setting = json_object_get(c->args, "setting");
    const char *id = json_string_value(json_object_get(setting, "id"));
    if (!id)
        id = json_string_value(json_object_get(c->args, "id"));
    *out = json_pack("{s:s,s:b,s:s}", "id", id ? id : "", "status", 0, "message",
                     "skyprofd keeps its default dashboards only: changes are not stored");
    return *out ? SKP_OK : SKP_ENOMEM;
}

const struct gql_resolver graphql_template_resolvers[] = {
    {"Query", "getAllTemplates", r_all_templates},
    {"Query", "getTemplate", r_template},
    {"Mutation", "addTemplate", r_refuse_change},
    {"Mutation", "changeTemplate", r_refuse_change},
    {"Mutation", "disableTemplate", r_refuse_change},
};
const size_t graphql_n_template_resolvers =
    sizeof(graphql_template_resolvers) / sizeof(graphql_template_resolvers[0]);
