/* http_int.h - shared by the http_*.c files of the HTTP API: the API object, the request
 * context passed to route handlers, and the reply helpers (which also count responses by
 * status class for /metrics). */
#ifndef SKP_SERVER_HTTP_INT_H
#define SKP_SERVER_HTTP_INT_H

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/http_api.h"
#include "server/store.h"
#include "server/http_worker.h"

/* Path segments a route may have (/api/v1/profile/segments/{id}/export has six). */
#define HTTP_MAX_SEGMENTS 8
/* Longest decoded path segment (ids, service names). */
#define HTTP_SEGMENT_MAX 2048
/* Queries one analyze request may carry. */
#define HTTP_ANALYZE_MAX_QUERIES 1000

struct http_api {
    struct event_base *base;
    struct evhttp *http;
    struct evhttp_bound_socket *sock;
    struct store *store;
    struct metrics *metrics;
    struct skpx_grpc_server *grpc;
    char *api_token;
    char *web_root;            /* NULL when the folder does not exist */
    uint64_t max_analyze_snapshots;
    int64_t (*now_ms)(void);
    struct http_worker *worker; /* NULL: heavy reads run on the loop */
};

struct http_ctx {
    struct http_api *api;
    struct evhttp_request *req;
    enum evhttp_cmd_type method;
    char *seg[HTTP_MAX_SEGMENTS]; /* decoded path segments (owned) */
    size_t n_seg;
    const char *raw_path;      /* still percent-encoded */
    struct evkeyvalq query;    /* decoded query parameters */
};

int64_t http_now(const struct http_api *api);

/* Replies. Each sends exactly one response and counts it. `body` is stolen (decref'd). */
void http_reply_json(struct http_ctx *cx, int code, json_t *body);
/* {"error": "<formatted>"} */
void http_reply_error(struct http_ctx *cx, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* {"error": msg, "field": field} */
void http_reply_field_error(struct http_ctx *cx, int code, const char *field, const char *msg);
/* Store failures: 404 for SKP_ENOTFOUND, 503 otherwise. */
void http_reply_store_error(struct http_ctx *cx, skp_err err, const char *what);
/* Raw bytes with a content type and optional extra header (name/value may be NULL). */
void http_reply_bytes(struct http_ctx *cx, int code, const char *content_type, const void *data,
                      size_t len, const char *hdr_name, const char *hdr_value);
/* Counts a response sent by other means (static files). */
void http_count(struct http_api *api, int code);

/* Query parameter (decoded) or NULL. */
const char *http_query(struct http_ctx *cx, const char *name);
/* Parses the request body as JSON; on failure replies 400/413 and returns NULL. */
json_t *http_read_json(struct http_ctx *cx);

/* Route handlers (http_tasks.c, http_analyze.c, http_services.c, http_export.c,
 * http_static.c). Each replies exactly once. */
void http_tasks_create(struct http_ctx *cx);
void http_tasks_list(struct http_ctx *cx);
void http_tasks_get(struct http_ctx *cx, const char *id);
void http_tasks_logs(struct http_ctx *cx, const char *id);
void http_tasks_segments(struct http_ctx *cx, const char *id);
void http_analyze_post(struct http_ctx *cx);
void http_analyze_task(struct http_ctx *cx, const char *id);
void http_analyze_segment(struct http_ctx *cx, const char *segment_id);
void http_export_task(struct http_ctx *cx, const char *id);
void http_export_segment(struct http_ctx *cx, const char *segment_id);
void http_services_list(struct http_ctx *cx);
void http_services_instances(struct http_ctx *cx, const char *name);
void http_static_serve(struct http_ctx *cx);

/* Runs `j` on the worker (or inline without one) and replies with its result; takes
 * ownership of j. Replies 503 if the worker queue is full. */
void http_job_dispatch(struct http_ctx *cx, struct http_job *j);

/* Task JSON with "status" and "logs" added; `task` is modified in place. */
skp_err http_task_decorate(struct http_ctx *cx, json_t *task);
/* JSON of store rows, shaped as docs/api.md says (http_segments.c, http_services.c,
 * http_tasks.c). Each returns a new reference, NULL on allocation failure. */
json_t *http_segment_json(const struct store_profiled_segment *seg);
json_t *http_task_json(const struct store_task *t);
json_t *http_task_log_json(const struct store_task_log *l);
/* Appends v (stolen; NULL means allocation failed) to the array arr. */
SKP_MUST_CHECK skp_err http_push_json(json_t *arr, json_t *v);
/* store_*_cb callbacks collecting the rows' JSON into the json_t array passed as ud. */
skp_err http_segment_push(void *ud, const struct store_profiled_segment *seg);
skp_err http_task_push(void *ud, const struct store_task *t);
skp_err http_task_log_push(void *ud, const struct store_task_log *l);
skp_err http_service_push(void *ud, const struct store_service_row *r);
skp_err http_instance_push(void *ud, const struct store_instance_row *r);
/* Parses an optional integer query parameter; replies 400 and returns false if malformed. */
bool http_query_int(struct http_ctx *cx, const char *name, bool *present, int64_t *out);

#endif
