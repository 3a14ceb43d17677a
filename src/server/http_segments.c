/* http_segments.c - the JSON of a task's profiled segments (GET /api/v1/profile/tasks/{id}/
 * segments, docs/api.md), built from the store's plain segment rows. Every string is agent
 * bytes and goes through skp_json_str. Runs on the thread of the request. */
#include <stdio.h>
#include <string.h>

#include "common/sat.h"
#include "server/http_int.h"
#include "server/utf8.h"

static const char *span_type_name(enum store_span_type t)
{
    switch (t) {
    case STORE_SPAN_ENTRY:
        return "Entry";
    case STORE_SPAN_EXIT:
        return "Exit";
    case STORE_SPAN_LOCAL:
        return "Local";
    default:
        return "Unknown";
    }
}

static const char *span_layer_name(enum store_span_layer l)
{
    switch (l) {
    case STORE_LAYER_DATABASE:
        return "Database";
    case STORE_LAYER_RPC_FRAMEWORK:
        return "RPCFramework";
    case STORE_LAYER_HTTP:
        return "Http";
    case STORE_LAYER_MQ:
        return "MQ";
    case STORE_LAYER_CACHE:
        return "Cache";
    case STORE_LAYER_FAAS:
        return "FAAS";
    default:
        return "Unknown";
    }
}

static json_t *kv_array(const struct store_kv *kv, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        json_t *o = json_pack("{s:o, s:o}", "key", skp_json_str(kv[i].key), "value",
                              skp_json_str(kv[i].value));
        if (!o || json_array_append_new(a, o) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *span_json(const struct store_profiled_segment *seg, const struct store_span *sp)
{
    json_t *refs = json_array();
    json_t *logs = json_array();
    json_t *tags = kv_array(sp->tags, sp->n_tags);
    if (!refs || !logs || !tags)
        goto fail;
    for (size_t i = 0; i < sp->n_refs; i++) {
        const struct store_span_ref *r = &sp->refs[i];
        json_t *ro = json_pack("{s:o, s:o, s:i, s:s}", "traceId", skp_json_str(r->trace_id),
                               "parentSegmentId", skp_json_str(r->parent_segment_id),
                               "parentSpanId", (int)r->parent_span_id, "type",
                               r->cross_thread ? "CROSS_THREAD" : "CROSS_PROCESS");
        if (!ro || json_array_append_new(refs, ro) != 0)
            goto fail;
    }
    for (size_t i = 0; i < sp->n_logs; i++) {
        json_t *data = kv_array(sp->logs[i].data, sp->logs[i].n_data);
        json_t *lo = data ? json_pack("{s:I, s:o}", "time", (json_int_t)sp->logs[i].time_ms,
                                      "data", data)
                          : NULL;
        if (!lo || json_array_append_new(logs, lo) != 0)
            goto fail;
    }
    /* "component" is the agent's numeric component id as a string: the id → name table
     * (component-libraries.yml) is not part of skyprof. */
    char component[16];
    snprintf(component, sizeof(component), "%d", (int)sp->component_id);
    return json_pack("{s:i, s:i, s:o, s:o, s:o, s:o, s:I, s:I, s:o, s:s, s:o, s:s, s:b, s:s, "
                     "s:o, s:o, s:b}",
                     "spanId", (int)sp->span_id, "parentSpanId", (int)sp->parent_span_id,
                     "segmentId", skp_json_str(seg->segment_id), "refs", refs, "serviceCode",
                     skp_json_str(seg->service), "serviceInstanceName",
                     skp_json_str(seg->instance), "startTime", (json_int_t)sp->start_ms,
                     "endTime", (json_int_t)sp->end_ms, "endpointName",
                     skp_json_str(sp->operation), "type", span_type_name(sp->type), "peer",
                     skp_json_str(sp->peer), "component", component, "isError",
                     (int)sp->is_error, "layer", span_layer_name(sp->layer), "tags", tags,
                     "logs", logs, "profiled", 1); /* "o" steals refs/tags/logs */
fail:
    json_decref(refs);
    json_decref(logs);
    json_decref(tags);
    return NULL;
}

/* Distinct non-empty Entry span names in span order; the segment's endpoint when it has none. */
static json_t *endpoint_names(const struct store_profiled_segment *seg)
{
    json_t *names = json_array();
    if (!names || !seg->has_object)
        return names;
    for (size_t i = 0; i < seg->n_spans; i++) {
        if (seg->spans[i].type != STORE_SPAN_ENTRY)
            continue;
        json_t *ep = skp_json_str(seg->spans[i].operation);
        if (!ep)
            goto fail;
        bool seen = json_string_length(ep) == 0;
        size_t j;
        json_t *nm;
        json_array_foreach(names, j, nm) seen = seen || json_equal(nm, ep);
        if (seen)
            json_decref(ep);
        else if (json_array_append_new(names, ep) != 0)
            goto fail;
    }
    if (json_array_size(names) == 0 && seg->endpoint && *seg->endpoint &&
        json_array_append_new(names, skp_json_str(seg->endpoint)) != 0)
        goto fail;
    return names;
fail:
    json_decref(names);
    return NULL;
}

json_t *http_segment_json(const struct store_profiled_segment *seg)
{
    json_t *spans = json_array();
    json_t *names = endpoint_names(seg);
    if (!spans || !names)
        goto fail;
    for (size_t i = 0; i < seg->n_spans; i++) {
        json_t *o = span_json(seg, &seg->spans[i]);
        if (!o || json_array_append_new(spans, o) != 0)
            goto fail;
    }
    int64_t end = seg->end_ms < seg->start_ms ? seg->start_ms : seg->end_ms;
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:I, s:I, s:o}", "segmentId",
                     skp_json_str(seg->segment_id), "traceId", skp_json_str(seg->trace_id),
                     "service", skp_json_str(seg->service), "instanceName",
                     skp_json_str(seg->instance), "endpointNames", names, "start",
                     (json_int_t)seg->start_ms, "duration",
                     (json_int_t)skpx_sat_sub_i64(end, seg->start_ms),
                     "spans", spans);
fail:
    json_decref(spans);
    json_decref(names);
    return NULL;
}

skp_err http_push_json(json_t *arr, json_t *v)
{
    if (!v)
        return SKP_ENOMEM;
    return json_array_append_new(arr, v) == 0 ? SKP_OK : SKP_ENOMEM;
}

skp_err http_segment_push(void *ud, const struct store_profiled_segment *seg)
{
    return http_push_json(ud, http_segment_json(seg));
}
