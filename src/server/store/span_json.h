/* span_json.h - SkyWalking's span in JSON (the field names of the GraphQL Span type: spanId,
 * parentSpanId, segmentId, refs, serviceCode, ...), built from the store's plain span row. One
 * shape for both uses: the store's span column (store_codec.c) and the API's segment listings
 * (http_segments.c). Pure functions, thread-safe. */
#ifndef SKP_SERVER_SPAN_JSON_H
#define SKP_SERVER_SPAN_JSON_H

#include <jansson.h>
#include <stddef.h>

#include "server/store/store.h"

/* "Entry", "Exit", "Local"; "Unknown" for anything else. */
const char *span_json_type_name(enum store_span_type t);
/* "Database", "RPCFramework", "Http", "MQ", "Cache", "FAAS"; "Unknown" for anything else. */
const char *span_json_layer_name(enum store_span_layer l);
/* The enum of a name above (dflt when unknown or NULL). */
enum store_span_type span_json_type_of(const char *name, enum store_span_type dflt);
enum store_span_layer span_json_layer_of(const char *name, enum store_span_layer dflt);

/* A new JSON object for span `sp` of the segment (segment_id, service, instance), every agent
 * string sanitized (skp_json_str); the caller owns it. NULL on ENOMEM. */
json_t *span_json_build(const char *segment_id, const char *service, const char *instance,
                        const struct store_span *sp);

#endif
