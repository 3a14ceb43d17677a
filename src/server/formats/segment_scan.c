/* segment_scan.c - see segment_scan.h. A protobuf wire reader over two message types:
 * SegmentObject {1 traceId, 2 traceSegmentId, 3 spans, 4 service, 5 serviceInstance} and
 * SpanObject {3 startTime, 4 endTime, 6 operationName, 8 spanType, 11 isError}; every other
 * field is skipped by its wire type. Every read is bounds-checked against the enclosing
 * message's end. */
#include "server/formats/segment_scan.h"

#include <string.h>

#include "common/varint.h"
#include "server/formats/pb_wire.h"

struct rd {
    const uint8_t *p;
    const uint8_t *end;
};

/* Reads a field's key and, for length-delimited fields, its payload range. Other wire types
 * are consumed (their value in *v for varints). *value is set to where the value's bytes
 * start (a length prefix included): they end at r->p on return. */
static bool field(struct rd *r, uint32_t *num, int *wt, uint64_t *v, struct rd *payload,
                  const uint8_t **value)
{
    uint64_t key;
    if (!skpx_varint_read(&r->p, r->end, &key) || key >> 3 == 0 || key >> 3 > UINT32_MAX)
        return false;
    *value = r->p;
    *num = (uint32_t)(key >> 3);
    *wt = (int)(key & 7);
    return pb_wire_value(&r->p, r->end, *wt, v, &payload->p, &payload->end);
}

/* A bool as protobuf-c reads it, whatever the wire type: true when any byte of the value (a
 * length prefix included) has a low 7-bit part, so the scan agrees with the stored decode. */
static bool wire_bool(const uint8_t *p, const uint8_t *end)
{
    for (; p < end; p++)
        if (*p & 0x7f)
            return true;
    return false;
}

struct span_fields {
    int64_t start, end;
    struct segment_slice op;
    uint64_t type;
    bool is_error;
};

static bool scan_span(struct rd r, struct span_fields *s)
{
    memset(s, 0, sizeof(*s));
    while (r.p < r.end) {
        uint32_t num;
        int wt;
        uint64_t v = 0;
        struct rd pl = {0};
        const uint8_t *value;
        if (!field(&r, &num, &wt, &v, &pl, &value))
            return false;
        if (num == 11)
            s->is_error = wire_bool(value, r.p);
        else if (wt == WT_VARINT) {
            if (num == 3)
                s->start = (int64_t)v;
            else if (num == 4)
                s->end = (int64_t)v;
            else if (num == 8)
                s->type = v;
        } else if (wt == WT_LEN && num == 6) {
            s->op.ptr = (const char *)pl.p;
            s->op.len = (size_t)(pl.end - pl.p);
        }
    }
    return true;
}

skp_err segment_scan(const uint8_t *buf, size_t len, struct segment_scan *out)
{
    memset(out, 0, sizeof(*out));
    if (!buf && len)
        return SKP_EINVAL;
    struct rd r = {buf, buf + len};
    static const char empty[1] = "";
    out->segment_id.ptr = out->trace_id.ptr = out->service.ptr = out->instance.ptr = empty;
    out->endpoint.ptr = empty;
    struct segment_slice first_op = {empty, 0};
    while (r.p < r.end) {
        uint32_t num;
        int wt;
        uint64_t v;
        struct rd pl = {0};
        const uint8_t *value;
        if (!field(&r, &num, &wt, &v, &pl, &value))
            return SKP_EPROTO;
        if (wt != WT_LEN)
            continue;
        struct segment_slice sl = {(const char *)pl.p, (size_t)(pl.end - pl.p)};
        switch (num) {
        case 1:
            out->trace_id = sl;
            break;
        case 2:
            out->segment_id = sl;
            break;
        case 4:
            out->service = sl;
            break;
        case 5:
            out->instance = sl;
            break;
        case 3: {
            struct span_fields s;
            if (!scan_span(pl, &s))
                return SKP_EPROTO;
            if (out->n_spans == 0 && s.op.ptr)
                first_op = s.op;
            out->n_spans++;
            if (!out->has_entry && s.type == 0) {
                out->has_entry = true;
                if (s.op.ptr)
                    out->endpoint = s.op;
                out->entry_start_ms = s.start;
                out->entry_end_ms = s.end;
                out->entry_is_error = s.is_error;
            }
            break;
        }
        default:
            break;
        }
    }
    if (!out->has_entry)
        out->endpoint = first_op;
    return SKP_OK;
}
