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
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>

#include "common/log.h"
#include "server/analysis/analyzer.h"
#include "server/http/http_api.h"
#include "server/http/http_guard.h"
#include "server/http/http_worker.h"
#include "server/store/store.h"

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
    char *web_root; /* NULL when the folder does not exist */
    uint64_t max_analyze_snapshots;
    int64_t (*now_ms)(void);
    struct http_worker *worker;            /* NULL: heavy reads run on the loop */
    uint64_t next_req_id;                  /* loop thread only */
    struct endpoint_stats *endpoint_stats; /* borrowed; NULL = none kept */
    struct cont_eval *cont_eval;           /* borrowed; NULL = none */
    struct http_guard guard;               /* Host/Origin policy (http_guard.h) */
    char *db_problem;                      /* the start-up integrity check's finding; NULL = fine */
    bool db_remote;           /* a database server (PostgreSQL): /healthz asks it (store_check) */
    struct http_conns *conns; /* owned; the connection guard (http_conn.c) */
};

struct http_ctx {
    struct http_api *api;
    struct evhttp_request *req;
    enum evhttp_cmd_type method;
    char *seg[HTTP_MAX_SEGMENTS]; /* decoded path segments (owned) */
    size_t n_seg;
    uint64_t req_id;        /* on every log line of the request and in X-Request-Id */
    const char *raw_path;   /* still percent-encoded */
    struct evkeyvalq query; /* decoded query parameters */
};

int64_t http_now(const struct http_api *api);

/* Logs one line of request `cx` (or a job's req_id), tagged with its request id. */
#define HTTP_LOG(level, req_id, fmt, ...)                                                          \
    skpx_log((level), "http req %" PRIu64 ": " fmt, (uint64_t)(req_id), __VA_ARGS__)

/* ---- The one reply path (http_response.c) ----
 * A response is built into a struct http_response, on the loop or by a worker job, with the
 * http_response_* builders; http_send sends it from the loop thread. The http_reply_* functions
 * are the loop's build-and-send shorthands, the http_job_set_* ones (http_worker.h) the jobs'. */

/* Serialises `j` compactly into a new skpx buffer (NUL-terminated; caller frees with skpx_free);
 * NULL on allocation failure. Borrows j (NULL ok: returns NULL). */
/* Builders: each replaces what `r` held. `body` of http_response_json is stolen (decref'd; NULL
 * means it could not be built and gives a 500). http_response_bytes takes ownership of `body`
 * (skpx-allocated). */
void http_response_bytes(struct http_response *r, int code, const char *content_type, char *body,
                         size_t len);
void http_response_json(struct http_response *r, int code, json_t *body);
/* {"error": "<formatted>"} */
void http_response_error(struct http_response *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same from a va_list (the message is cut at 511 bytes); http_reply_error and
 * http_job_set_error build with it. */
void http_response_verror(struct http_response *r, int code, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
/* {"error": msg, "field": field} */
void http_response_field_error(struct http_response *r, int code, const char *field,
                               const char *msg);
/* Store failures: 404 "<what> not found" for SKP_ENOTFOUND, else 503 (500 for SKP_ENOMEM),
 * logged rate-limited with the request id. Thread-safe (loop and worker share the limiter). */
void http_response_store_error(struct http_response *r, uint64_t req_id, skp_err err,
                               const char *what);
/* Frees the body (unless borrowed); NULL ok. */
void http_response_cleanup(struct http_response *r);
/* Loop thread: evhttp_send_reply, except that a HEAD answer carries the body's length in
 * Content-Length and no body. `body` is borrowed (may be NULL). */
void http_send_reply(struct evhttp_request *req, int code, const char *reason,
                     struct evbuffer *body);
/* Loop thread: sends `r` (Content-Type, nosniff, X-Request-Id, Content-Disposition), counts
 * it, and cleans it up. Exactly once per request. */
void http_send(struct http_ctx *cx, struct http_response *r);

/* Loop shorthands: build and send at once. `body` is stolen (decref'd). */
void http_reply_json(struct http_ctx *cx, int code, json_t *body);
void http_reply_error(struct http_ctx *cx, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void http_reply_field_error(struct http_ctx *cx, int code, const char *field, const char *msg);
void http_reply_store_error(struct http_ctx *cx, skp_err err, const char *what);
/* A read's answer: 200 with `body` (stolen) when err is SKP_OK, else body dropped and the store
 * error (`what` names what was read). */
void http_reply_answer(struct http_ctx *cx, skp_err err, json_t *body, const char *what);
/* Raw bytes (borrowed, copied into the reply) with a content type and an optional extra header
 * (name/value may be NULL). */
void http_reply_bytes(struct http_ctx *cx, int code, const char *content_type, const void *data,
                      size_t len, const char *hdr_name, const char *hdr_value);
/* Counts a response sent by other means (static files). */
void http_count(struct http_api *api, int code);

/* Query parameter (decoded) or NULL. */
const char *http_query(struct http_ctx *cx, const char *name);
/* Parses the request body as JSON; on failure replies 400/413 and returns NULL. */
json_t *http_read_json(struct http_ctx *cx);
/* Reads the integer member `name` of the JSON object `body` into *out (left as it is when the
 * member is missing or null). False, with a 400 reply, when it is not an integer or, when
 * `required`, missing. */
bool http_body_int(struct http_ctx *cx, json_t *body, const char *name, bool required,
                   int64_t *out);

/* ---- Routes (http_routes.c): the table docs/api.md documents ---- */
#define HTTP_M_GET 1u /* HEAD is served by the GET route */
#define HTTP_M_POST 2u
#define HTTP_M_PUT 4u
#define HTTP_M_DELETE 8u
/* Most "{name}" captures in one pattern. */
#define HTTP_ROUTE_MAX_CAPTURES 2
struct http_route {
    unsigned methods;    /* HTTP_M_* bits */
    const char *pattern; /* "/api/v1/profile/tasks/{id}/logs" */
    /* Exactly one is set, taking as many captures as the pattern has. */
    void (*h0)(struct http_ctx *cx);
    void (*h1)(struct http_ctx *cx, const char *cap1);
    void (*h2)(struct http_ctx *cx, const char *cap1, const char *cap2);
};
extern const struct http_route http_routes[];
extern const size_t http_n_routes;
/* True if the decoded segments match `pattern`; caps[] then borrows the captured segments. */
/* The next segment of a request path or route pattern from `p`, '/'s skipped: its start, its
 * length in *n; NULL at the end. */
const char *http_path_segment(const char *p, size_t *n);
bool http_route_match(const char *pattern, char *const *seg, size_t n_seg, const char **caps,
                      size_t *n_caps);
/* Dispatches a request to its route; otherwise 405 (with Allow) when the path exists for other
 * methods, 404 under /api, the static UI for GET, 405 for anything else. Replies exactly once. */
void http_route(struct http_ctx *cx);
/* 405 with an Allow header listing `allowed` (HTTP_M_* bits). */
void http_method_not_allowed(struct http_ctx *cx, unsigned allowed);

/* Route handlers (http_api.c: healthz, metrics; http_tasks.c, http_analyze.c, http_services.c,
 * http_export.c, http_static.c). Each replies exactly once. */
void http_healthz(struct http_ctx *cx);
void http_livez(struct http_ctx *cx);
void http_metrics(struct http_ctx *cx);
void http_tasks_create(struct http_ctx *cx);
void http_tasks_list(struct http_ctx *cx);
void http_tasks_get(struct http_ctx *cx, const char *id);
void http_tasks_logs(struct http_ctx *cx, const char *id);
void http_tasks_segments(struct http_ctx *cx, const char *id);
/* http_cancel.c: POST …/tasks/{id}/cancel of each task kind. */
void http_tasks_cancel(struct http_ctx *cx, const char *id);
void http_pprof_cancel(struct http_ctx *cx, const char *id);
void http_async_cancel(struct http_ctx *cx, const char *id);
void http_analyze_post(struct http_ctx *cx);
void http_analyze_task(struct http_ctx *cx, const char *id);
void http_analyze_segment(struct http_ctx *cx, const char *segment_id);
void http_compare_post(struct http_ctx *cx);                             /* http_compare.c */
void http_timeline_segment(struct http_ctx *cx, const char *segment_id); /* http_timeline.c */
void http_export_task(struct http_ctx *cx, const char *id);
void http_export_segment(struct http_ctx *cx, const char *segment_id);
void http_services_list(struct http_ctx *cx);
void http_services_instances(struct http_ctx *cx, const char *name);
void http_endpoint_stats(struct http_ctx *cx, const char *service);
void http_services_endpoints(struct http_ctx *cx, const char *name); /* http_endpoints.c */
void http_static_serve(struct http_ctx *cx);
void http_graphql_post(struct http_ctx *cx); /* http_graphql.c: SkyWalking's query protocol */
/* http_continuous.c: policies (GET/PUT/DELETE by service), their list, the evaluator's values,
 * triggers; and the trigger of a task added to its JSON ("triggeredBy", "trigger"). */
void http_continuous_list(struct http_ctx *cx);
void http_continuous_policy(struct http_ctx *cx, const char *service);
void http_continuous_values(struct http_ctx *cx, const char *service);
void http_triggers_list(struct http_ctx *cx);
struct store_cont_trigger;
json_t *http_trigger_json(const struct store_cont_trigger *t);
skp_err http_task_trigger(struct http_ctx *cx, json_t *task);

/* A segment's analysis: its spans' window (what the UI analyses by default: the entry span,
 * which holds the others) when span_window and its SegmentObject is stored, else its whole life
 * (every dump, also those an agent took after the request ended). Errors: as analyze_segments. */
SKP_MUST_CHECK skp_err http_segment_analysis(struct store *st, const char *segment_id,
                                             bool span_window, const struct analyze_opts *o,
                                             struct analysis **out);
/* Worker: when an analysis failed (err), frees `a`, sets j's reply to the store error
 * ("analysis") and returns true. */
bool http_job_analysis_failed(struct http_job *j, skp_err err, struct analysis *a);
/* Parses the optional `window` query parameter: "all" (default) or "span". Replies 400 and
 * returns false when it is anything else. */
bool http_query_window(struct http_ctx *cx, bool *span_window);

/* Runs `j` on the worker (or inline without one) and replies with its result; takes
 * ownership of j. Replies 503 if the worker queue is full. */
void http_job_dispatch(struct http_ctx *cx, struct http_job *j);
/* http_job_dispatch after a part of the job done on the loop: when that failed (err), j is
 * destroyed instead and the store error replied (`what` names what was read). */
void http_job_dispatch_after(struct http_ctx *cx, struct http_job *j, skp_err err,
                             const char *what);
/* Allocates a zeroed job of `size` bytes (a struct whose first member is its struct http_job)
 * with run and destroy set; the caller passes it to http_job_dispatch or frees it with destroy.
 * Replies 500 and returns NULL when out of memory. */
void *http_job_new(struct http_ctx *cx, size_t size, void (*run)(struct http_job *, struct store *),
                   void (*destroy)(struct http_job *));
/* Stores a copy of `s` (borrowed) in *dst, a field of `j`. When out of memory, frees j with its
 * destroy, replies 500 and returns false. */
bool http_job_strdup(struct http_ctx *cx, struct http_job *j, char **dst, const char *s);
/* The destroy of a job that owns nothing but j->id: frees the id and the job. */
void http_job_free(struct http_job *j);

/* Task JSON with "status" and "logs" added; `task` is modified in place. */
skp_err http_task_decorate(struct http_ctx *cx, json_t *task);
/* A finished task without profiled segment gets "statusReason" (http_endpoints.c). */
skp_err http_task_explain(struct http_ctx *cx, json_t *task);
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
/* A query parameter that is one of two words: absent or `dflt` (*is_other = false), or `other`
 * (true); anything else replies 400 ("<name> must be <dflt> or <other>") and returns false. */
bool http_query_either(struct http_ctx *cx, const char *name, const char *dflt, const char *other,
                       bool *is_other);
/* True when `inst` is one of the comma-separated names of an `instances` query parameter;
 * an absent or empty filter (borrowed, may be NULL) chooses every instance. */
bool http_instance_chosen(const char *filter, const char *inst);
/* The `names` query parameter of the export routes: absent or "short" = readable frame names
 * (*readable = true), "full" = the full signatures. Replies 400 and returns false otherwise. */
bool http_query_names(struct http_ctx *cx, bool *readable);

#endif
