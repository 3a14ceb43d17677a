/* utf8.c - UTF-8 validation and repair (RFC 3629 well-formedness, table 3-7 of Unicode). */
#include "server/formats/utf8.h"

#include <stdint.h>
#include <string.h>

#include "common/alloc.h"

/* Length of the well-formed sequence at s[0..n), or 0 if the first byte starts none. */
static size_t seq_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0; /* no overlongs */
        else if (c == 0xed)
            hi = 0x9f; /* no surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f; /* <= U+10FFFF */
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return len;
}

bool skp_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t l = seq_len(p + i, n - i);
        if (!l)
            return false;
        i += l;
    }
    return true;
}

char *skp_utf8_sanitize(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s);
    if (n > (SIZE_MAX - 1) / 3)
        return NULL;
    char *out = skpx_malloc(n * 3 + 1);
    if (!out)
        return NULL;
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, o = 0;
    while (i < n) {
        size_t l = seq_len(p + i, n - i);
        if (l) {
            memcpy(out + o, p + i, l);
            o += l;
            i += l;
        } else {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    out[o] = '\0';
    return out;
}

char *skp_json_text(const json_t *j, size_t *len)
{
    if (len)
        *len = 0;
    size_t n = j ? json_dumpb(j, NULL, 0, JSON_COMPACT) : 0;
    char *text = n ? skpx_malloc(n + 1) : NULL;
    if (!text)
        return NULL;
    if (json_dumpb(j, text, n, JSON_COMPACT) != n) {
        skpx_free(text);
        return NULL;
    }
    text[n] = '\0';
    if (len)
        *len = n;
    return text;
}

json_t *skp_json_str(const char *s)
{
    if (!s)
        s = "";
    size_t n = strlen(s);
    if (skp_utf8_valid(s, n))
        return json_stringn(s, n);
    char *fixed = skp_utf8_sanitize(s);
    if (!fixed)
        return NULL;
    json_t *j = json_string(fixed);
    skpx_free(fixed);
    return j;
}
