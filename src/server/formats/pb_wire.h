/* pb_wire.h - the protobuf wire format as the server's two hand-written decoders read it
 * (pprof_decode.c, segment_scan.c): the wire types and stepping over one field's value. Every
 * read is bounds-checked against the enclosing message's end. Pure, thread-safe, header-only. */
#ifndef SKP_SERVER_FORMATS_PB_WIRE_H
#define SKP_SERVER_FORMATS_PB_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/varint.h"

enum {
    WT_VARINT = 0,
    WT_I64 = 1,
    WT_LEN = 2,
    WT_I32 = 5,
};

/* Moves *p (the message ends at end) past one value of wire type wt: a varint (its value in
 * *v), 8 or 4 fixed bytes, or a length prefix and its payload (the payload in
 * [*payload, *payload_end)). False when the value is malformed or runs past end (*p is then
 * where skpx_varint_read / skpx_varint_read_len leave it, or unmoved for fixed bytes), and for
 * the group types (3, 4) and the reserved ones (6, 7). */
static inline bool pb_wire_value(const uint8_t **p, const uint8_t *end, int wt, uint64_t *v,
                                 const uint8_t **payload, const uint8_t **payload_end)
{
    if (wt == WT_LEN) { /* strings and sub-messages: the common case first */
        uint64_t n;
        if (!skpx_varint_read_len(p, end, &n))
            return false;
        *payload = *p;
        *payload_end = *p + n;
        *p += n;
        return true;
    }
    if (wt == WT_VARINT)
        return skpx_varint_read(p, end, v);
    if (wt != WT_I64 && wt != WT_I32)
        return false; /* groups (3, 4) and the reserved types (6, 7) */
    size_t n = wt == WT_I64 ? 8 : 4;
    if ((size_t)(end - *p) < n)
        return false;
    *p += n;
    return true;
}

#endif
