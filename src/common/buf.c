/* buf.c - bounded growable byte buffer (see buf.h). Capacity doubles from 256 bytes, clamped to
 * max + 1 (the trailing NUL). */
#include "common/buf.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"

#define BUF_FIRST_CAP 256

void skpx_buf_init(struct skpx_buf *b, size_t max)
{
    memset(b, 0, sizeof(*b));
    b->max = max;
}

static bool reserve(struct skpx_buf *b, size_t n)
{
    if (b->err)
        return false;
    if (n > b->max || b->len > b->max - n) {
        b->err = SKP_ETOOBIG;
        return false;
    }
    size_t need = b->len + n + 1; /* + NUL */
    if (need <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : BUF_FIRST_CAP;
    while (cap < need && cap <= SIZE_MAX / 2)
        cap *= 2;
    if (cap < need || cap > b->max + 1)
        cap = need > b->max + 1 ? need : b->max + 1;
    uint8_t *d = skpx_realloc(b->data, cap);
    if (!d) {
        b->err = SKP_ENOMEM;
        return false;
    }
    b->data = d;
    b->cap = cap;
    return true;
}

void skpx_buf_put(struct skpx_buf *b, const void *p, size_t n)
{
    if (n == 0 || !reserve(b, n))
        return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void skpx_buf_puts(struct skpx_buf *b, const char *s)
{
    skpx_buf_put(b, s, strlen(s));
}

void skpx_buf_putc(struct skpx_buf *b, char c)
{
    skpx_buf_put(b, &c, 1);
}

void skpx_buf_printf(struct skpx_buf *b, const char *fmt, ...)
{
    if (b->err)
        return;
    va_list ap;
    va_start(ap, fmt);
    size_t room = b->data ? b->cap - b->len : 0;
    int n = vsnprintf(room ? (char *)b->data + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->err = SKP_EINVAL;
        return;
    }
    if ((size_t)n < room) { /* fitted, NUL written by vsnprintf */
        if ((size_t)n > b->max - b->len) {
            b->data[b->len] = '\0';
            b->err = SKP_ETOOBIG;
            return;
        }
        b->len += (size_t)n;
        return;
    }
    if (room)
        b->data[b->len] = '\0';
    if (!reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void skpx_buf_reset(struct skpx_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

skp_err skpx_buf_take(struct skpx_buf *b, uint8_t **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    skp_err err = b->err;
    if (err) {
        skpx_buf_cleanup(b);
        return err;
    }
    if (!b->data) {
        b->data = skpx_malloc(1);
        if (!b->data)
            return SKP_ENOMEM;
        b->data[0] = '\0';
    }
    *out = b->data;
    *out_len = b->len;
    skpx_buf_init(b, b->max);
    return SKP_OK;
}

void skpx_buf_cleanup(struct skpx_buf *b)
{
    if (!b)
        return;
    skpx_free(b->data);
    skpx_buf_init(b, b->max);
}
