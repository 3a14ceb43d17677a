/* http_api.h - skyprofd's HTTP API (JSON over evhttp) and the static web UI, on the server's
 * event loop (docs/api.md lists every route). Single-threaded: every handler runs on the loop
 * and reads/writes the store synchronously. */
#ifndef SKP_SERVER_HTTP_API_H
#define SKP_SERVER_HTTP_API_H

#include <stdint.h>

#include "server/stats/metrics.h"
#include "server/store/store.h"
#include "skyprof/skp_err.h"
#include "wire/grpc_server.h"

struct event_base;
struct http_api;

/* Largest request body the API reads (a task or an analyze query list is far smaller). */
#define HTTP_BODY_MAX (1u << 20)

struct http_api_opts {
    struct store *store;            /* borrowed */
    struct metrics *metrics;        /* borrowed */
    struct skpx_grpc_server *grpc;  /* borrowed, for /metrics; may be NULL */
    const char *api_token;          /* copied; NULL = no token needed */
    const char *web_root;           /* copied; NULL or missing folder = "UI not built" page */
    uint64_t max_analyze_snapshots; /* 0 = unlimited */
    const char *db_path;            /* copied; analyses/exports run on a worker thread with
                                     * their own connection to it. NULL = on the loop. */
    int64_t (*now_ms)(void);        /* NULL = skpx_now_ms */
    struct endpoint_stats *endpoint_stats; /* borrowed; NULL = no endpoint statistics route */
    /* Connection limits (http_conn.c); 0 = the default. */
    size_t max_connections;      /* open connections (default 1024) */
    size_t max_conns_per_peer;   /* from one IP address (default 256) */
    int request_timeout_ms;      /* request line + headers + body (default 30000) */
    size_t body_budget;          /* request bodies held at once (default 64 MiB) */
    struct cont_eval *cont_eval; /* borrowed; NULL = policies are stored, not evaluated */
    const char *http_addr;       /* borrowed: --http-addr, whose host name is served */
    const char *allowed_origins; /* borrowed: --allowed-origins (comma-separated) */
    const char *db_problem;      /* copied: store_check's finding, NULL or "" = none */
};

/* Creates the API on `base` (borrowed). Caller frees with http_api_free.
 * Errors: SKP_ENOMEM, SKP_EINVAL (malformed allowed_origins). */
SKP_MUST_CHECK skp_err http_api_new(struct event_base *base, const struct http_api_opts *opts,
                                    struct http_api **out);
/* Listens on "host:port" (port 0 = any; *bound_port receives the port, may be NULL).
 * Errors: SKP_EINVAL (bad address), SKP_EIO (bind failed, detail logged). */
SKP_MUST_CHECK skp_err http_api_listen(struct http_api *h, const char *addr, uint16_t *bound_port);
/* Stops accepting new connections (in-flight requests still complete). NULL ok. */
void http_api_stop_accepting(struct http_api *h);
/* Closes every connection and frees. NULL ok. */
void http_api_free(struct http_api *h);

#endif
