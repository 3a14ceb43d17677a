/* utf8.h - one code point written as UTF-8, and code point i of a string stored 1, 2 or 4 bytes
 * a character (CPython's compact str data, PEP 393), for the readers that turn such strings or
 * \u escapes into UTF-8. Pure, thread-safe, async-signal-safe. */
#ifndef SKP_COMMON_UTF8_H
#define SKP_COMMON_UTF8_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Writes cp (at most 0x10FFFF; the caller decides what a surrogate becomes) as 1 to 4 bytes of
 * UTF-8 at out; returns how many. */
static inline size_t skpx_utf8_put(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 63));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 63));
        out[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 63));
    out[2] = (char)(0x80 | ((cp >> 6) & 63));
    out[3] = (char)(0x80 | (cp & 63));
    return 4;
}

/* Code point i of data holding kind (1, 2 or 4) bytes a character, in host byte order. */
static inline uint32_t skpx_ucs_at(const uint8_t *data, size_t kind, size_t i)
{
    if (kind == 1)
        return data[i];
    if (kind == 2) {
        uint16_t v;
        memcpy(&v, data + 2 * i, 2);
        return v;
    }
    uint32_t cp;
    memcpy(&cp, data + 4 * i, 4);
    return cp;
}

#endif
