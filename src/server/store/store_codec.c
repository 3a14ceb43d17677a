/* store_codec.c - the column formats both store backends share (store_codec.h). */
#include "server/store/store_codec.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/varint.h"
#include "common/alloc.h"
#include "common/err.h"
#include "common/log.h"
#include "server/store/span_json.h"
#include "server/formats/utf8.h"

/* ---- spans: struct store_span <-> JSON text ---- */

/* Compact JSON text of a segment's spans; caller frees with skpx_free. NULL on ENOMEM. */
char *store_spans_to_text(const struct store_segment *seg, size_t *len)
{
    json_t *spans = json_array();
    char *text = NULL;
    for (size_t i = 0; spans && i < seg->n_spans; i++) {
        json_t *o = span_json_build(seg->segment_id, seg->service, seg->instance, &seg->spans[i]);
        if (!o || json_array_append_new(spans, o) != 0)
            goto out;
    }
    if (!spans)
        return NULL;
    *len = json_dumpb(spans, NULL, 0, JSON_COMPACT);
    text = skpx_malloc(*len + 1);
    if (text && json_dumpb(spans, text, *len, JSON_COMPACT) != *len) {
        skpx_free(text);
        text = NULL;
    }
    if (text)
        text[*len] = '\0';
out:
    json_decref(spans);
    return text;
}

void store_span_rows_cleanup(struct store_span_rows *r)
{
    json_decref((json_t *)r->root);
    SKPX_FREE_ALL(r->spans, r->refs, r->kvs, r->logs);
    memset(r, 0, sizeof(*r));
}

static const char *member_str(const json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

static size_t kv_fill(const json_t *a, struct store_kv *kv)
{
    size_t n = 0, i;
    json_t *e;
    json_array_foreach(a, i, e) {
        kv[n].key = member_str(e, "key");
        kv[n].value = member_str(e, "value");
        n++;
    }
    return n;
}

/* Parses a span column. An unreadable one (never written by this backend) gives no spans,
 * logged; only allocation failure is an error. */
skp_err store_span_rows_parse(const char *segment_id, const char *text, struct store_span_rows *r)
{
    memset(r, 0, sizeof(*r));
    json_t *root = json_loads(text, 0, NULL);
    if (!json_is_array(root)) {
        SKPX_ERROR("store: spans of segment %s are unreadable", segment_id);
        json_decref(root);
        return SKP_OK;
    }
    r->root = root;
    size_t n = json_array_size(root), n_refs = 0, n_kv = 0, n_logs = 0, i, j;
    json_t *sp, *e;
    json_array_foreach(root, i, sp) {
        n_refs += json_array_size(json_object_get(sp, "refs"));
        n_kv += json_array_size(json_object_get(sp, "tags"));
        json_t *lg = json_object_get(sp, "logs");
        n_logs += json_array_size(lg);
        json_array_foreach(lg, j, e)
            n_kv += json_array_size(json_object_get(e, "data"));
    }
    r->spans = n ? skpx_calloc(n, sizeof(*r->spans)) : NULL;
    r->refs = n_refs ? skpx_calloc(n_refs, sizeof(*r->refs)) : NULL;
    r->kvs = n_kv ? skpx_calloc(n_kv, sizeof(*r->kvs)) : NULL;
    r->logs = n_logs ? skpx_calloc(n_logs, sizeof(*r->logs)) : NULL;
    if ((n && !r->spans) || (n_refs && !r->refs) || (n_kv && !r->kvs) || (n_logs && !r->logs)) {
        store_span_rows_cleanup(r);
        return SKP_ENOMEM;
    }
    size_t at_ref = 0, at_kv = 0, at_log = 0;
    json_array_foreach(root, i, sp) {
        struct store_span *o = &r->spans[i];
        o->span_id = (int32_t)json_integer_value(json_object_get(sp, "spanId"));
        o->parent_span_id = (int32_t)json_integer_value(json_object_get(sp, "parentSpanId"));
        o->start_ms = json_integer_value(json_object_get(sp, "startTime"));
        o->end_ms = json_integer_value(json_object_get(sp, "endTime"));
        o->operation = member_str(sp, "endpointName");
        o->peer = member_str(sp, "peer");
        o->type = span_json_type_of(json_string_value(json_object_get(sp, "type")),
                                    STORE_SPAN_TYPE_UNKNOWN);
        o->layer = span_json_layer_of(json_string_value(json_object_get(sp, "layer")),
                                      STORE_LAYER_UNKNOWN);
        o->component_id = (int32_t)strtol(member_str(sp, "component"), NULL, 10);
        o->is_error = json_is_true(json_object_get(sp, "isError"));
        o->refs = r->refs + at_ref;
        json_array_foreach(json_object_get(sp, "refs"), j, e) {
            struct store_span_ref *rf = &r->refs[at_ref++];
            rf->trace_id = member_str(e, "traceId");
            rf->parent_segment_id = member_str(e, "parentSegmentId");
            rf->parent_span_id = (int32_t)json_integer_value(json_object_get(e, "parentSpanId"));
            rf->cross_thread = strcmp(member_str(e, "type"), "CROSS_THREAD") == 0;
            o->n_refs++;
        }
        o->tags = r->kvs + at_kv;
        o->n_tags = kv_fill(json_object_get(sp, "tags"), r->kvs + at_kv);
        at_kv += o->n_tags;
        o->logs = r->logs + at_log;
        json_array_foreach(json_object_get(sp, "logs"), j, e) {
            struct store_span_log *lo = &r->logs[at_log++];
            lo->time_ms = json_integer_value(json_object_get(e, "time"));
            lo->data = r->kvs + at_kv;
            lo->n_data = kv_fill(json_object_get(e, "data"), r->kvs + at_kv);
            at_kv += lo->n_data;
            o->n_logs++;
        }
    }
    r->n_spans = n;
    return SKP_OK;
}

/* ---- instance properties: JSON object text ---- */

char *store_props_to_text(const struct store_kv *props, size_t n, const char **language)
{
    char *text = NULL;
    if (language)
        *language = NULL;
    json_t *obj = json_object();
    if (!obj)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (!props[i].key)
            continue;
        const char *v = props[i].value ? props[i].value : "";
        if (language && strcmp(props[i].key, "language") == 0)
            *language = v;
        char *key = skp_utf8_sanitize(props[i].key);
        int rc = key ? json_object_set_new(obj, key, skp_json_str(v)) : -1;
        skpx_free(key);
        if (rc != 0)
            goto out;
    }
    text = skp_json_text(obj, NULL);
out:
    json_decref(obj);
    return text;
}

skp_err store_props_parse(const char *text, struct store_props *out)
{
    memset(out, 0, sizeof(*out));
    json_t *props = json_loads(text ? text : "", 0, NULL);
    size_t n = json_is_object(props) ? json_object_size(props) : 0;
    out->root = props;
    if (!n)
        return SKP_OK;
    out->kv = skpx_calloc(n, sizeof(*out->kv));
    if (!out->kv)
        return SKP_ENOMEM;
    const char *key;
    json_t *val;
    json_object_foreach(props, key, val) {
        if (out->n < n && json_is_string(val)) {
            out->kv[out->n].key = key;
            out->kv[out->n].value = json_string_value(val);
            out->n++;
        }
    }
    return SKP_OK;
}

void store_props_cleanup(struct store_props *p)
{
    json_decref((json_t *)p->root);
    skpx_free(p->kv);
    memset(p, 0, sizeof(*p));
}

/* ---- stacks: frame ids as LEB128 varints ---- */

/* LEB128 varints: frame ids are small, so a 20-frame stack is ~20-40 bytes. */
size_t store_encode_ids(const uint32_t *ids, size_t n, uint8_t *buf)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += skpx_varint_put(buf + len, ids[i]);
    return len;
}

size_t store_decode_ids(const uint8_t *b, size_t len, uint32_t *ids, size_t max)
{
    size_t n = 0;
    size_t i = 0;
    while (i < len) {
        uint32_t v = 0;
        int shift = 0;
        for (;;) {
            if (i >= len || shift > 28)
                return SIZE_MAX;
            uint8_t c = b[i++];
            v |= (uint32_t)(c & 0x7f) << shift;
            if (!(c & 0x80))
                break;
            shift += 7;
        }
        if (n == max)
            return SIZE_MAX;
        ids[n++] = v;
    }
    return n;
}
