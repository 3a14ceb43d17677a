/* varint.h - LEB128 varints (protobuf's base-128 form, 7 bits a byte, low bits first) into and out
 * of byte buffers: the pprof builder's sample keys and encoder, the store's stack blobs, the
 * endpoint-statistics histograms and the server's pprof and segment decoders. Pure, thread-safe,
 * header-only. */
#ifndef SKP_COMMON_VARINT_H
#define SKP_COMMON_VARINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Most bytes one varint takes. */
#define SKPX_VARINT_MAX 10

/* Writes v at out (room for SKPX_VARINT_MAX bytes); returns the bytes written (1..10). */
static inline size_t skpx_varint_put(uint8_t *out, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

/* Reads the varint at *p (the buffer ends at end) into *v and moves *p past it. False when it runs
 * past end or past SKPX_VARINT_MAX bytes (*p then points somewhere inside it). The 10th byte
 * gives bit 63 only: its other bits are dropped, as protobuf-c and Go's pprof reader drop them
 * (the server's pprof and segment decoders must accept what those accept). */
static inline bool skpx_varint_read(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (*p >= end)
            return false;
        uint8_t c = *(*p)++;
        *v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            return true;
    }
    return false;
}

/* Reads a length prefix (a length-delimited protobuf field's) as skpx_varint_read does; false
 * also when the n bytes it announces run past end (*p then is just past the prefix). */
static inline bool skpx_varint_read_len(const uint8_t **p, const uint8_t *end, uint64_t *n)
{
    return skpx_varint_read(p, end, n) && *n <= (uint64_t)(end - *p);
}

/* skpx_varint_read at b[*at] (b has len bytes), moving *at. */
static inline bool skpx_varint_get(const uint8_t *b, size_t len, size_t *at, uint64_t *v)
{
    const uint8_t *p = b + *at;
    bool ok = skpx_varint_read(&p, b + len, v);
    *at = (size_t)(p - b);
    return ok;
}

#endif
