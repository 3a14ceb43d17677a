/* buf.h - a bounded growable byte buffer (curl's dynbuf): every buffer is created with a maximum
 * size, appends past it fail with SKP_ETOOBIG, and the first error is sticky so a renderer can
 * append freely and check once at the end. The bytes are always followed by a NUL (not counted in
 * len) so text output can be handed on as a C string. Single-threaded per buffer. */
#ifndef SKP_COMMON_BUF_H
#define SKP_COMMON_BUF_H

#include <stddef.h>
#include <stdint.h>

#include "skyprof/skp_err.h"

struct skpx_buf {
    uint8_t *data; /* owned; skpx_realloc'd; NUL after len once non-empty */
    size_t len;
    size_t cap;
    size_t max;  /* most bytes the buffer may hold (set by init) */
    skp_err err; /* first error; later appends are no-ops */
};

/* Initialises an empty buffer that may grow to `max` bytes (caller-provided storage).
 * Nothing is allocated until the first append. */
void skpx_buf_init(struct skpx_buf *b, size_t max);
/* Appends raw bytes / a NUL-terminated string / one byte / formatted text. Errors are sticky in
 * b->err: SKP_ETOOBIG (past max), SKP_ENOMEM, SKP_EINVAL (bad format). Borrows p/s. */
void skpx_buf_put(struct skpx_buf *b, const void *p, size_t n);
void skpx_buf_puts(struct skpx_buf *b, const char *s);
void skpx_buf_putc(struct skpx_buf *b, char c);
void skpx_buf_printf(struct skpx_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Empties the buffer for reuse, keeping its allocation and any sticky error. */
void skpx_buf_reset(struct skpx_buf *b);
/* Moves the bytes out (NUL-terminated, *out_len excludes the NUL; caller frees with skpx_free)
 * and leaves the buffer empty with its max kept. On a sticky error frees the bytes and returns
 * it with *out = NULL. An empty buffer yields a 1-byte allocation holding "". */
SKP_MUST_CHECK skp_err skpx_buf_take(struct skpx_buf *b, uint8_t **out, size_t *out_len);
/* Frees the bytes and clears the error (NULL ok); the buffer stays usable with its max. */
void skpx_buf_cleanup(struct skpx_buf *b);

#endif
