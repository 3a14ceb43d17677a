/* http_client.h - a small blocking HTTP/1.1 client for the CLI: one request per connection
 * (Connection: close), IPv4/IPv6 via getaddrinfo, a deadline on every wait, Content-Length or
 * chunked bodies, bounded response size. No TLS (skyprofd's API is plain HTTP; put a proxy in
 * front for TLS). Single-threaded; no global state. */
#ifndef SKP_CLI_HTTP_CLIENT_H
#define SKP_CLI_HTTP_CLIENT_H

#include <stddef.h>

#include "skyprof/skp_err.h"

/* Largest response body accepted: exports of very large analyses stay well below this. */
#define CLI_HTTP_MAX_RESPONSE_BYTES ((size_t)512 * 1024 * 1024)
/* Longest URL path + query we build. */
#define CLI_HTTP_MAX_TARGET 4096

struct http_url {
    char host[256]; /* without brackets for IPv6 literals */
    char port[8];
    char base[512]; /* path prefix without a trailing '/', "" for none */
};

/* Longest X-Next-Cursor kept (skyprofd's listing pages, docs/api.md). */
#define HTTP_CLIENT_CURSOR_MAX 4096

struct http_response {
    int status; /* e.g. 200 */
    char content_type[128];
    char next_cursor[HTTP_CLIENT_CURSOR_MAX]; /* X-Next-Cursor, "" when the listing is complete */
    char *body; /* owned, NUL-terminated (the NUL is not counted in body_len) */
    size_t body_len;
};

/* Parses "http://host[:port][/base]" (port defaults to 80). Errors: SKP_EINVAL (other scheme,
 * empty host, bad port, too long). */
SKP_MUST_CHECK skp_err http_url_parse(const char *url, struct http_url *out);

/* Sends `method target` with an optional body (content type application/json when body is not
 * NULL) and an optional bearer token; waits at most timeout_ms for each step.
 * `target` is the path (with query) below url->base, starting with '/'. On SKP_OK *resp owns
 * the body; release with http_response_cleanup (also safe after a failure), which leaves *resp
 * empty again (as before the request). A failed request leaves it so.
 * Errors: SKP_EUNAVAILABLE (resolve/connect failed), SKP_ETIMEDOUT, SKP_EIO (send/recv),
 * SKP_EPROTO (malformed response), SKP_ETOOBIG, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err http_request(const struct http_url *url, const char *method,
                                    const char *target, const char *token, const char *body,
                                    size_t body_len, int timeout_ms, struct http_response *resp);
void http_response_cleanup(struct http_response *resp);

/* Appends `s` percent-encoded (everything but unreserved characters) to dst (NUL-terminated,
 * capacity cap). Returns false if it does not fit. */
int http_path_escape(char *dst, size_t cap, const char *s);

#endif
