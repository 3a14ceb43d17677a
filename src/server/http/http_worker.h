/* http_worker.h - runs the HTTP API's heavy reads (analyses, exports) on a worker thread so a
 * large analysis never stalls agent ingestion on the event loop. Each job opens its own
 * read-only store connection (SQLite WAL lets it read while the loop writes; a fresh
 * connection per job also means no cache of the worker can go stale after a retention purge),
 * computes a complete response, and the reply is sent from the loop thread.
 *
 * Threading: submit/stop on the loop thread; `run` on the worker thread; `done` on the loop
 * thread. A request whose client went away meanwhile is still answered into libevent, which
 * discards it (an incoming request that has not been answered is detached from its dead
 * connection, not freed). */
#ifndef SKP_SERVER_HTTP_WORKER_H
#define SKP_SERVER_HTTP_WORKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/job_queue.h"
#include "server/store/store.h"
#include "skyprof/skp_err.h"

struct event_base;
struct evhttp_request;
struct http_api;
struct http_worker;

/* Jobs waiting for the worker; more are refused with 503 (a client hammering analyses cannot
 * queue unbounded work). */
#define HTTP_WORKER_QUEUE_MAX 64
/* Longest Content-Disposition value a job may set. */
#define HTTP_JOB_DISPOSITION_MAX 256

/* A response being built (http_int.h's http_response_* builders) and sent by http_send. */
struct http_response {
    int code;
    char *body; /* owned (skpx_malloc'd) unless `borrowed` */
    size_t body_len;
    const char *content_type;                   /* static; NULL = application/json */
    char disposition[HTTP_JOB_DISPOSITION_MAX]; /* Content-Disposition value, "" = none */
    bool borrowed;     /* body belongs to the caller (loop shorthands only) */
    bool oom;          /* the JSON could not be built: a static 500 body is sent */
    char *next_cursor; /* owned (skpx); sent as X-Next-Cursor (http_page.h); NULL = none */
};

struct http_job {
    struct job_queue_item qi; /* its link in the worker's queue (server/job_queue.h) */
    struct http_api *api;
    struct evhttp_request *req;
    uint64_t req_id; /* the request's id, for log lines */
    /* Worker thread: computes the response into the fields below. */
    void (*run)(struct http_job *j, struct store *st);
    /* Frees the job and whatever run/submit attached to it (any thread). */
    void (*destroy)(struct http_job *j);
    char *id;                 /* owned: the task or segment a job of one id reads; may be NULL */
    struct http_response res; /* what run() computed */
};

/* Starts the worker thread for the database at `db_path` (copied). Borrows base.
 * Errors: SKP_ENOMEM, SKP_EIO (thread or pipe creation failed). */
SKP_MUST_CHECK skp_err http_worker_start(struct event_base *base, const char *db_path,
                                         struct http_worker **out);
/* Queues `j` (ownership moves to the worker on SKP_OK). Errors: SKP_EFULL (queue full),
 * SKP_ESTATE (stopping). */
SKP_MUST_CHECK skp_err http_worker_submit(struct http_worker *w, struct http_job *j);
/* Stops and joins the thread; jobs not yet answered are destroyed without a reply (their
 * connections are being closed anyway). NULL ok. */
void http_worker_stop(struct http_worker *w);

/* Shorthands for run(), the same builders as the loop's replies (http_int.h) applied to j->res:
 * a JSON body (`json` stolen), {"error": msg}, or a store error (404 for SKP_ENOTFOUND, else
 * 503/500, logged rate-limited with j->req_id). */
void http_job_set_json(struct http_job *j, int code, void *json);
void http_job_set_error(struct http_job *j, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void http_job_set_store_error(struct http_job *j, skp_err err, const char *what);

#endif
