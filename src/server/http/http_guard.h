/* http_guard.h - the HTTP API's cross-site defences (issue 15, finding 7):
 *   - Host: a request whose Host names something other than this server is refused with 421,
 *     so a DNS-rebinding page (evil.example resolving to 127.0.0.1) cannot read or change
 *     anything. Accepted: IP literals, names without a dot (localhost, the machine's short
 *     name), *.localhost, the host of --http-addr, and the hosts of --allowed-origins;
 *   - mutating requests (every method but GET: POST, PUT, DELETE alike, http_guard_mutation)
 *     need `Content-Type: application/json` when they carry a body or any Content-Type (415
 *     otherwise: a form or a no-cors text/plain POST from another site is refused, and a
 *     cross-site JSON request needs a CORS preflight we never grant) and, when the browser
 *     sends an Origin, an Origin equal to http(s)://<Host> or listed in --allowed-origins (403
 *     otherwise);
 *   - every response carries X-Frame-Options: DENY; the UI's pages a Content-Security-Policy
 *     that allows assets from this server only.
 * Loop thread only (the list is read-only after http_guard_init). */
#ifndef SKP_SERVER_HTTP_GUARD_H
#define SKP_SERVER_HTTP_GUARD_H

#include <stdbool.h>
#include <stddef.h>

#include "skyprof/skp_err.h"

/* Most --allowed-origins entries, and the longest one. */
#define HTTP_GUARD_MAX_ORIGINS 32
#define HTTP_GUARD_ORIGIN_MAX 256

/* The policy the UI's pages are served with. */
#define HTTP_GUARD_CSP                                                                             \
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "                    \
    "img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; "         \
    "form-action 'self'; frame-ancestors 'none'"

struct http_guard {
    char origins[HTTP_GUARD_MAX_ORIGINS][HTTP_GUARD_ORIGIN_MAX]; /* "scheme://host[:port]" */
    size_t n_origins;
    char listen_host[HTTP_GUARD_ORIGIN_MAX]; /* host of --http-addr ("" for any/IP) */
};

/* Fills *g from --http-addr (borrowed, may be NULL) and the comma-separated --allowed-origins
 * list (borrowed, may be NULL or ""). Each origin must be "http://host[:port]" or
 * "https://host[:port]" without path. Errors: SKP_EINVAL (a malformed or too long entry, or too
 * many; `why` (cap bytes) says which). */
SKP_MUST_CHECK skp_err http_guard_init(struct http_guard *g, const char *http_addr,
                                       const char *allowed_origins, char *why, size_t cap);
/* True if a request with this Host header (NULL = none sent) may be served. Pure. */
bool http_guard_host_ok(const struct http_guard *g, const char *host);
/* True if a mutating request with this Origin (NULL = none sent) and Host may proceed. Pure. */
bool http_guard_origin_ok(const struct http_guard *g, const char *origin, const char *host);
/* True if the Content-Type (NULL = none) is application/json, with parameters or not. Pure. */
bool http_guard_is_json(const char *content_type);
/* The one check of every mutating request, whatever its method: 0 if it may proceed, else the
 * status to refuse it with (415: a body or a Content-Type that is not JSON; 403: a foreign
 * Origin). A request without body and without Content-Type (a DELETE) needs only the Origin
 * check. Pure. */
int http_guard_mutation(const struct http_guard *g, const char *content_type, size_t body_len,
                        const char *origin, const char *host);

#endif
