/* span_json.c - SkyWalking's span in JSON, one builder for the store and the API (span_json.h).
 * "component" is the agent's numeric component id as a string: the id -> name table
 * (component-libraries.yml) is not part of skyprof. */
#include "server/store/span_json.h"

#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "server/formats/utf8.h"

static const char *const k_type_names[] = {"Entry", "Exit", "Local", "Unknown"};
static const char *const k_layer_names[] = {"Unknown", "Database", "RPCFramework", "Http",
                                            "MQ",      "Cache",    "FAAS"};

const char *span_json_type_name(enum store_span_type t)
{
    return (unsigned)t < SKP_ARRAY_LEN(k_type_names) ? k_type_names[t] : "Unknown";
}

const char *span_json_layer_name(enum store_span_layer l)
{
    return (unsigned)l < SKP_ARRAY_LEN(k_layer_names) ? k_layer_names[l] : "Unknown";
}

static int name_index(const char *const *names, size_t n, const char *name, int dflt)
{
    for (size_t i = 0; name && i < n; i++)
        if (strcmp(names[i], name) == 0)
            return (int)i;
    return dflt;
}

enum store_span_type span_json_type_of(const char *name, enum store_span_type dflt)
{
    return (enum store_span_type)name_index(k_type_names, SKP_ARRAY_LEN(k_type_names), name,
                                            (int)dflt);
}

enum store_span_layer span_json_layer_of(const char *name, enum store_span_layer dflt)
{
    return (enum store_span_layer)name_index(k_layer_names, SKP_ARRAY_LEN(k_layer_names), name,
                                             (int)dflt);
}

/* A JSON array of the n items item(v, i) builds; NULL when one could not be built or added. */
static json_t *array_of(const void *v, size_t n, json_t *(*item)(const void *v, size_t i))
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        json_t *o = item(v, i);
        if (!o || json_array_append_new(a, o) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *kv_item(const void *v, size_t i)
{
    const struct store_kv *kv = (const struct store_kv *)v + i;
    return json_pack("{s:o, s:o}", "key", skp_json_str(kv->key), "value", skp_json_str(kv->value));
}

static json_t *ref_item(const void *v, size_t i)
{
    const struct store_span_ref *r = (const struct store_span_ref *)v + i;
    return json_pack("{s:o, s:o, s:i, s:s}", "traceId", skp_json_str(r->trace_id),
                     "parentSegmentId", skp_json_str(r->parent_segment_id), "parentSpanId",
                     (int)r->parent_span_id, "type",
                     r->cross_thread ? "CROSS_THREAD" : "CROSS_PROCESS");
}

static json_t *log_item(const void *v, size_t i)
{
    const struct store_span_log *l = (const struct store_span_log *)v + i;
    json_t *data = array_of(l->data, l->n_data, kv_item);
    return data ? json_pack("{s:I, s:o}", "time", (json_int_t)l->time_ms, "data", data) : NULL;
}

json_t *span_json_build(const char *segment_id, const char *service, const char *instance,
                        const struct store_span *sp)
{
    json_t *refs = array_of(sp->refs, sp->n_refs, ref_item);
    json_t *logs = array_of(sp->logs, sp->n_logs, log_item);
    json_t *tags = array_of(sp->tags, sp->n_tags, kv_item);
    if (!refs || !logs || !tags) {
        json_decref(refs);
        json_decref(logs);
        json_decref(tags);
        return NULL;
    }
    char component[16];
    snprintf(component, sizeof(component), "%d", (int)sp->component_id);
    return json_pack(
        "{s:i, s:i, s:o, s:o, s:o, s:o, s:I, s:I, s:o, s:s, s:o, s:s, s:b, s:s, "
        "s:o, s:o}",
        "spanId", (int)sp->span_id, "parentSpanId", (int)sp->parent_span_id, "segmentId",
        skp_json_str(segment_id), "refs", refs, "serviceCode", skp_json_str(service),
        "serviceInstanceName", skp_json_str(instance), "startTime", (json_int_t)sp->start_ms,
        "endTime", (json_int_t)sp->end_ms, "endpointName", skp_json_str(sp->operation), "type",
        span_json_type_name(sp->type), "peer", skp_json_str(sp->peer), "component", component,
        "isError", (int)sp->is_error, "layer", span_json_layer_name(sp->layer), "tags", tags,
        "logs", logs); /* "o" steals refs/tags/logs, also on failure */
}
