/* pct.h - the one percent-decoder (RFC 3986 %XX escapes), used for HTTP path segments and for
 * gRPC's grpc-message trailer. Pure function, thread-safe. */
#ifndef SKP_COMMON_PCT_H
#define SKP_COMMON_PCT_H

#include <stdbool.h>
#include <stddef.h>

/* Decodes [in, in+in_len) into `out` (cap bytes, always NUL-terminated when cap > 0; truncated if
 * too small). A '%' not followed by two hex digits is copied as is. Returns the decoded length
 * (which may be >= cap: the caller sees the truncation). If `malformed` is not NULL it is set to
 * true when the input had a bad escape or decoded to a NUL byte (callers that need exact text,
 * like URL paths, refuse such input; gRPC decodes what it can). Borrows in; NULL out ok when
 * cap == 0 (measures). */
size_t skpx_pct_decode(const char *in, size_t in_len, char *out, size_t cap, bool *malformed);

#endif
