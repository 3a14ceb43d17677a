/* jfr_reader.c - the JFR parser's primitive readers: bounds-checked integers (LEB128-style
 * varints when the chunk says "compressed", big-endian otherwise) and strings in their five
 * encodings.
 *
 * A JFR varint carries 7 bits per byte, low bits first, with the high bit meaning "more"; the
 * ninth byte, if reached, carries 8 bits, so any 64-bit value fits in at most 9 bytes. */
#include "server/formats/jfr_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/utf8.h"

void jfr_str_read(struct jfr_cursor *c, struct jfr_str *out)
{
    memset(out, 0, sizeof(*out));
    uint8_t enc = jfr_u8(c);
    out->enc = (enum jfr_str_enc)enc;
    switch (enc) {
    case JFR_STR_NULL:
    case JFR_STR_EMPTY:
        return;
    case JFR_STR_POOL:
        out->pool_key = jfr_long(c);
        return;
    case JFR_STR_UTF8:
    case JFR_STR_LATIN1:
    case JFR_STR_CHARS: {
        int64_t n = jfr_int(c, 4);
        /* Bytes for UTF-8 and Latin-1; for chars, each takes at least one byte: either way a
         * count above what is left is a lie. */
        if (n < 0 || (uint64_t)n > jfr_left(c)) {
            c->bad = true;
            c->p = c->end;
            return;
        }
        out->ptr = c->p;
        out->len = (uint32_t)n;
        if (enc != JFR_STR_CHARS)
            c->p += n;
        else
            for (int64_t i = 0; i < n && !c->bad; i++)
                (void)jfr_int(c, 2);
        return;
    }
    default:
        c->bad = true;
        return;
    }
}

static void put_cp(uint32_t cp, char *buf, size_t *len, size_t cap)
{
    char tmp[4];
    size_t n = skpx_utf8_put(cp, tmp);
    if (*len + n >= cap)
        return;
    memcpy(buf + *len, tmp, n);
    *len += n;
    buf[*len] = '\0';
}

/* Length of the well-formed UTF-8 sequence at s (≤ n bytes), 0 if invalid. */
static size_t utf8_seq(const uint8_t *s, size_t n)
{
    uint8_t b = s[0];
    if (b < 0x80)
        return 1;
    size_t k;
    uint32_t min, cp;
    if ((b & 0xE0) == 0xC0) {
        k = 2;
        min = 0x80;
        cp = b & 0x1F;
    } else if ((b & 0xF0) == 0xE0) {
        k = 3;
        min = 0x800;
        cp = b & 0x0F;
    } else if ((b & 0xF8) == 0xF0) {
        k = 4;
        min = 0x10000;
        cp = b & 0x07;
    } else {
        return 0;
    }
    if (k > n)
        return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return k;
}

void jfr_str_append(const struct jfr_str *s, char *buf, size_t *len, size_t cap)
{
    if (cap == 0)
        return;
    buf[*len < cap ? *len : cap - 1] = '\0';
    switch (s->enc) {
    case JFR_STR_UTF8:
        for (uint32_t i = 0; i < s->len;) {
            size_t k = utf8_seq(s->ptr + i, s->len - i);
            if (k == 0) {
                put_cp(0xFFFD, buf, len, cap);
                i++;
                continue;
            }
            if (*len + k >= cap)
                return;
            memcpy(buf + *len, s->ptr + i, k);
            *len += k;
            buf[*len] = '\0';
            i += (uint32_t)k;
        }
        return;
    case JFR_STR_LATIN1:
        for (uint32_t i = 0; i < s->len; i++)
            put_cp(s->ptr[i], buf, len, cap);
        return;
    case JFR_STR_CHARS: {
        /* The string was validated when read; re-read its varints (always compressed here:
         * JDK writers only emit this encoding with compressed integers). */
        struct jfr_cursor c = {.p = s->ptr, .end = s->ptr + 5u * s->len, .compressed = true};
        for (uint32_t i = 0; i < s->len && !c.bad; i++) {
            uint32_t u = (uint32_t)jfr_int(&c, 2) & 0xFFFF;
            put_cp(u >= 0xD800 && u <= 0xDFFF ? 0xFFFD : u, buf, len, cap);
        }
        return;
    }
    default:
        return;
    }
}

skp_err jfr_fail(struct jfr_error *err, uint64_t offset, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
        err->offset = offset;
    }
    return SKP_EINVAL;
}
