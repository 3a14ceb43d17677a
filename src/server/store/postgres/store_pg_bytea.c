/* store_pg_bytea.c - bytea hex text in and out (see store_pg_bytea.h). */
#include "server/store/postgres/store_pg_bytea.h"

#include <string.h>

#include "common/alloc.h"
#include "common/hex.h"

char *pg_bytea_hex(const uint8_t *p, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    if (n > (SIZE_MAX - 3) / 2)
        return NULL;
    char *s = skpx_malloc(2 * n + 3);
    if (!s)
        return NULL;
    s[0] = '\\';
    s[1] = 'x';
    for (size_t i = 0; i < n; i++) {
        s[2 + 2 * i] = digits[p[i] >> 4];
        s[3 + 2 * i] = digits[p[i] & 15];
    }
    s[2 + 2 * n] = '\0';
    return s;
}

skp_err pg_bytea_decode(const char *txt, uint8_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!txt || txt[0] != '\\' || txt[1] != 'x')
        return SKP_EPROTO;
    size_t len = strlen(txt + 2);
    if (len % 2)
        return SKP_EPROTO;
    uint8_t *b = skpx_malloc(len / 2 ? len / 2 : 1);
    if (!b)
        return SKP_ENOMEM;
    const char *h = txt + 2;
    for (size_t i = 0; i < len / 2; i++) {
        int hi = skpx_hex_value(h[2 * i]), lo = skpx_hex_value(h[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            skpx_free(b);
            return SKP_EPROTO;
        }
        b[i] = (uint8_t)(hi << 4 | lo);
    }
    *out = b;
    *n = len / 2;
    return SKP_OK;
}
