/* varint.h - LEB128 varints (protobuf's base-128 form, 7 bits a byte, low bits first) into and out
 * of byte buffers: the pprof builder's sample keys and encoder, the store's stack blobs and the
 * endpoint-statistics histograms. Pure, thread-safe, header-only. */
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

/* Reads the varint at b[*at] (b has len bytes) into *v and moves *at past it. False when it runs
 * past len or past 64 bits (*at then points somewhere inside it). */
static inline bool skpx_varint_get(const uint8_t *b, size_t len, size_t *at, uint64_t *v)
{
    *v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (*at >= len)
            return false;
        uint8_t c = b[(*at)++];
        *v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            return true;
    }
    return false;
}

#endif
