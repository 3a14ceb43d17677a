/* sw8.c - SkyWalking cross-process propagation header `sw8`:
 *   sample-base64(traceId)-base64(parentSegmentId)-parentSpanId-base64(parentService)-
 *   base64(parentInstance)-base64(parentEndpoint)-base64(addressUsedAtClient)
 * Parsing is strict about the first eight fields (anything after them is ignored for forward
 * compatibility) and never allocates: decoded text goes into caller storage. */
#include "agent/sw8.h"

#include <stdbool.h>
#include <string.h>

#include "skyprof/skyprof.h"

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int skp__base64_encode(const char *in, size_t n, char *out, size_t cap)
{
    size_t need = (n + 2) / 3 * 4;
    if (need + 1 > cap)
        return -1;
    const unsigned char *s = (const unsigned char *)in;
    size_t j = 0;
    size_t i = 0;
    for (; i + 2 < n; i += 3) {
        unsigned v = (unsigned)s[i] << 16 | (unsigned)s[i + 1] << 8 | s[i + 2];
        out[j++] = b64[v >> 18];
        out[j++] = b64[(v >> 12) & 63];
        out[j++] = b64[(v >> 6) & 63];
        out[j++] = b64[v & 63];
    }
    if (i < n) {
        unsigned v = (unsigned)s[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)s[i + 1] << 8;
        out[j++] = b64[v >> 18];
        out[j++] = b64[(v >> 12) & 63];
        out[j++] = i + 1 < n ? b64[(v >> 6) & 63] : '=';
        out[j++] = '=';
    }
    out[j] = '\0';
    return (int)j;
}

/* The 6-bit value of a base64 digit (its index in the encoder's alphabet), -1 for another byte. */
static int b64_val(unsigned char c)
{
    const char *at = memchr(b64, c, sizeof(b64) - 1);
    return at ? (int)(at - b64) : -1;
}

int skp__base64_decode(const char *in, size_t n, char *out, size_t cap)
{
    while (n > 0 && in[n - 1] == '=')
        n--;
    if (n % 4 == 1)
        return -1;
    size_t outlen = n / 4 * 3 + (n % 4 ? n % 4 - 1 : 0);
    if (outlen + 1 > cap)
        return -1;
    unsigned acc = 0;
    int bits = 0;
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64_val((unsigned char)in[i]);
        if (v < 0)
            return -1;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[j++] = (char)((acc >> bits) & 0xff);
        }
    }
    out[j] = '\0';
    if (memchr(out, '\0', j))
        return -1; /* embedded NUL: not a usable string */
    return (int)j;
}

skp_err skyprof_sw8_parse(const char *header, struct skyprof_sw8 *out, char *store,
                          size_t store_cap)
{
    const char *field[8];
    size_t len[8];
    memset(out, 0, sizeof(*out));
    if (!header || !store)
        return SKP_EINVAL;
    const char *p = header;
    for (int i = 0; i < 8; i++) {
        const char *dash = strchr(p, '-');
        field[i] = p;
        len[i] = dash ? (size_t)(dash - p) : strlen(p);
        if (i < 7 && !dash)
            return SKP_EINVAL;
        p = dash ? dash + 1 : p + len[i];
    }
    if (len[0] != 1 || (field[0][0] != '0' && field[0][0] != '1'))
        return SKP_EINVAL;
    out->sample = field[0][0] - '0';
    /* parentSpanId: a non-negative decimal */
    if (len[3] == 0 || len[3] > 9)
        return SKP_EINVAL;
    int span = 0;
    for (size_t i = 0; i < len[3]; i++) {
        if (field[3][i] < '0' || field[3][i] > '9')
            return SKP_EINVAL;
        span = span * 10 + (field[3][i] - '0');
    }
    out->parent_span_id = span;
    static const int b64_fields[6] = {1, 2, 4, 5, 6, 7};
    const char **dst[6] = {&out->trace_id,        &out->parent_segment_id, &out->parent_service,
                           &out->parent_instance, &out->parent_endpoint,   &out->peer};
    size_t used = 0;
    for (int k = 0; k < 6; k++) {
        int i = b64_fields[k];
        if (used >= store_cap)
            return SKP_ETOOBIG;
        if (len[i] / 4 * 3 + 3 > store_cap - used)
            return SKP_ETOOBIG;
        int n = skp__base64_decode(field[i], len[i], store + used, store_cap - used);
        if (n < 0)
            return SKP_EINVAL;
        *dst[k] = store + used;
        used += (size_t)n + 1;
    }
    if (!out->trace_id[0] || !out->parent_segment_id[0])
        return SKP_EINVAL;
    return SKP_OK;
}

int skyprof_sw8_format(const struct skyprof_sw8 *in, char *buf, size_t cap)
{
    const char *parts[6] = {in->trace_id,        in->parent_segment_id, in->parent_service,
                            in->parent_instance, in->parent_endpoint,   in->peer};
    size_t j = 0;
    if (cap < 3)
        return -1;
    buf[j++] = in->sample ? '1' : '0';
    for (int k = 0; k < 6; k++) {
        if (j + 1 >= cap)
            return -1;
        buf[j++] = '-';
        const char *s = parts[k] ? parts[k] : "";
        int n = skp__base64_encode(s, strlen(s), buf + j, cap - j);
        if (n < 0)
            return -1;
        j += (size_t)n;
        if (k == 1) {
            /* parentSpanId sits between the segment id and the service */
            char num[16];
            int m = 0;
            unsigned v = in->parent_span_id < 0 ? 0u : (unsigned)in->parent_span_id;
            do {
                num[m++] = (char)('0' + v % 10);
                v /= 10;
            } while (v && m < 15);
            if (j + 1 + (size_t)m + 1 > cap)
                return -1;
            buf[j++] = '-';
            while (m > 0)
                buf[j++] = num[--m];
        }
    }
    buf[j] = '\0';
    return (int)j;
}
