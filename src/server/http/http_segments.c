/* http_segments.c - the JSON of a task's profiled segments (GET /api/v1/profile/tasks/{id}/
 * segments, docs/api.md), built from the store's plain segment rows. Every string is agent
 * bytes and goes through skp_json_str. Runs on the thread of the request. */
#include <stdio.h>
#include <string.h>

#include "common/sat.h"
#include "server/http/http_int.h"
#include "server/store/span_json.h"
#include "server/formats/utf8.h"

/* The API's span: the stored shape plus "profiled" (this listing holds profiled segments). */
static json_t *span_json(const struct store_profiled_segment *seg, const struct store_span *sp)
{
    json_t *o = span_json_build(seg->segment_id, seg->service, seg->instance, sp);
    if (o && json_object_set_new(o, "profiled", json_true()) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
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
        json_array_foreach(names, j, nm)
            seen = seen || json_equal(nm, ep);
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
                     (json_int_t)skpx_sat_sub_i64(end, seg->start_ms), "spans", spans);
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
