/* http_conn.h - skyprofd's guard over evhttp's connections: the limits evhttp 2.1 does not have.
 * Every connection evhttp accepts is created through evhttp_set_bevcb, and the guard watches its
 * input bytes (an evbuffer callback, before evhttp parses them) with the strict framing scanner
 * (http_framing.h). It enforces:
 * - a connection cap per listener (the listener pauses at the cap, resumes when one closes) and a
 *   per-peer cap; accept paused on EMFILE/ENFILE (rate-limited log, retried after 250 ms);
 * - a deadline for each request's line, headers and body together (slow trickling is 408);
 * - the API token, checked when the headers are in and before the body is read (401);
 * - a server-wide budget for request bodies held at once (503);
 * - strict framing (400/413/414/431/501/505 and close), chunked request bodies included.
 * A refusal writes a short JSON answer straight to the socket and shuts it down; evhttp then
 * reads EOF and frees the connection. A refusal never overtakes the answer to an earlier
 * pipelined request of the same connection: it waits until that answer was written.
 * Single-threaded: everything runs on the loop. */
#ifndef SKP_SERVER_HTTP_CONN_H
#define SKP_SERVER_HTTP_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/http/http_framing.h"
#include "server/stats/metrics.h"
#include "skyprof/skp_err.h"

struct event_base;
struct evhttp;
struct evhttp_request;
struct evhttp_bound_socket;
struct http_conns;

/* Early token check: true when a request with `method` and Authorization value `authz` (NULL
 * when absent or too long) may go on. */
typedef bool (*http_conns_token_cb)(void *ud, enum http_framing_method method, const char *authz);

struct http_conns_opts {
    size_t max_connections;       /* 0 = 1024 */
    size_t max_conns_per_peer;    /* 0 = 256 */
    int request_timeout_ms;       /* 0 = 30000 */
    size_t body_budget;           /* 0 = 64 MiB */
    uint64_t max_body;            /* largest body accepted (413 beyond) */
    http_conns_token_cb token_ok; /* NULL = no early check */
    void *token_ud;
    struct metrics *metrics; /* borrowed; the counters live there */
};

/* Creates the guard and installs it on `http` (both borrowed; `http` must be freed before the
 * guard). Caller frees with http_conns_free. Errors: SKP_ENOMEM. */
SKP_MUST_CHECK skp_err http_conns_new(struct event_base *base, struct evhttp *http,
                                      const struct http_conns_opts *opts, struct http_conns **out);
/* Takes charge of a bound socket's listener (pausing, accept errors). Borrowed. */
void http_conns_add_listener(struct http_conns *hc, struct evhttp_bound_socket *sock);
/* Forgets the listener (before evhttp_del_accept_socket). NULL ok. */
void http_conns_remove_listener(struct http_conns *hc);
/* Called by the request handler for every request evhttp hands over, before answering it: the
 * guard learns when its answer is written (evhttp_request_set_on_complete_cb on `req`, which
 * the handler must not set itself), so refusals of later pipelined requests wait for it.
 * Borrows both; hc NULL ok. Loop thread only. */
void http_conns_request_begin(struct http_conns *hc, struct evhttp_request *req);
/* Frees the guard; evhttp (and so every connection) must be gone already. NULL ok. */
void http_conns_free(struct http_conns *hc);

#endif
