/* escape.c - control-character escaping for terminals and log lines (see escape.h).
 * Design: one pass over the bytes with a small UTF-8 validator. A well-formed multi-byte
 * character is copied whole unless it is a C1 control; anything else that is not printable
 * ASCII becomes an escape. Backslash itself is left alone: the aim is that no byte sequence can
 * move the cursor, forge a line or recolour the terminal, not a reversible encoding. */
#include "common/escape.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Length of the well-formed UTF-8 character at p (n bytes left), or 0 if it is not one
 * (overlong forms, surrogates and code points above U+10FFFF are not well-formed). */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    unsigned char c = p[0];
    size_t len;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        cp = c & 0x1fu;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        cp = c & 0x0fu;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        cp = c & 0x07u;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0u) != 0x80u)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3fu);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

/* The escape of byte c at p (one of \n \r \t \xNN) into e (>= 5 bytes); returns its length. */
static size_t byte_escape(unsigned char c, char *e)
{
    switch (c) {
    case '\n':
        memcpy(e, "\\n", 2);
        return 2;
    case '\r':
        memcpy(e, "\\r", 2);
        return 2;
    case '\t':
        memcpy(e, "\\t", 2);
        return 2;
    default:
        snprintf(e, 5, "\\x%02x", c);
        return 4;
    }
}

size_t skpx_escape_ctl(const char *s, size_t n, char *out, size_t cap)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0;
    if (cap == 0)
        return 0;
    for (size_t i = 0; i < n;) {
        char e[8];
        const char *src;
        size_t len, used;
        unsigned char c = p[i];
        if (c >= 0x20 && c < 0x7f) {
            src = (const char *)&p[i];
            len = used = 1;
        } else if (c >= 0x80 && (used = utf8_len(&p[i], n - i)) != 0) {
            if (used == 2 && c == 0xc2 && p[i + 1] <= 0x9f) { /* C1 control */
                snprintf(e, sizeof(e), "\\u%04x", (unsigned)p[i + 1]);
                src = e;
                len = 6;
            } else {
                src = (const char *)&p[i];
                len = used;
            }
        } else {
            len = byte_escape(c, e);
            src = e;
            used = 1;
        }
        if (o + len >= cap)
            break;
        memcpy(out + o, src, len);
        o += len;
        i += used;
    }
    out[o] = '\0';
    return o;
}

bool skpx_escape_needed(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        if (c >= 0x20 && c < 0x7f) {
            i++;
            continue;
        }
        size_t used = c >= 0x80 ? utf8_len(&p[i], n - i) : 0;
        if (used == 0 || (used == 2 && c == 0xc2 && p[i + 1] <= 0x9f))
            return true;
        i += used;
    }
    return false;
}
