/* http_api.c - the evhttp server of skyprofd: listener, routing, bearer-token check, body
 * limits and JSON reply helpers. Route handlers live in http_tasks.c, http_analyze.c,
 * http_services.c, http_export.c and http_static.c. Every request is answered on the loop
 * thread before the callback returns. */
#include "server/http/http_api.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/pct.h"
#include "server/config.h"
#include "server/formats/utf8.h"
#include "server/stats/endpoint_stats.h"
#include "server/http/http_conn.h"
#include "server/graphql/graphql.h"
#include "server/http/http_int.h"

/* evhttp refuses bodies above this on its own (413 before we see them); between
 * HTTP_BODY_MAX and this we answer with a JSON 413 ourselves. */
#define HTTP_BODY_HARD_MAX (HTTP_BODY_MAX * 2)
/* Headers of one request. */
#define HTTP_HEADERS_MAX (64u << 10)
/* Idle/slow connection timeout. */
#define HTTP_TIMEOUT_S 30

int64_t http_now(const struct http_api *api)
{
    return api->now_ms ? api->now_ms() : skpx_now_ms();
}

void http_count(struct http_api *api, int code)
{
    int cls = code / 100;
    api->metrics->http_requests[cls >= 1 && cls <= 5 ? cls : 0]++;
}

const char *http_query(struct http_ctx *cx, const char *name)
{
    return evhttp_find_header(&cx->query, name);
}

bool http_query_int(struct http_ctx *cx, const char *name, bool *present, int64_t *out)
{
    const char *v = http_query(cx, name);
    *present = v != NULL;
    if (!v)
        return true;
    char *end = NULL;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || errno) {
        http_reply_field_error(cx, 400, name, "must be an integer (ms since the epoch)");
        return false;
    }
    *out = x;
    return true;
}

bool http_query_either(struct http_ctx *cx, const char *name, const char *dflt, const char *other,
                       bool *is_other)
{
    const char *s = http_query(cx, name);
    *is_other = s && strcmp(s, other) == 0;
    if (s && !*is_other && strcmp(s, dflt) != 0) {
        char msg[128];
        snprintf(msg, sizeof(msg), "%s must be %s or %s", name, dflt, other);
        http_reply_field_error(cx, 400, name, msg);
        return false;
    }
    return true;
}

json_t *http_read_json(struct http_ctx *cx)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(cx->req);
    size_t len = evbuffer_get_length(in);
    if (len > HTTP_BODY_MAX) {
        http_reply_error(cx, 413, "request body larger than %u bytes", HTTP_BODY_MAX);
        return NULL;
    }
    if (len == 0) {
        http_reply_error(cx, 400, "empty request body (JSON expected)");
        return NULL;
    }
    const char *p = (const char *)evbuffer_pullup(in, -1);
    json_error_t jerr;
    json_t *j = json_loadb(p, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!j)
        http_reply_error(cx, 400, "malformed JSON: %s (line %d, column %d)", jerr.text, jerr.line,
                         jerr.column);
    return j;
}

bool http_body_int(struct http_ctx *cx, json_t *body, const char *name, bool required, int64_t *out)
{
    json_t *v = json_object_get(body, name);
    if (!v || json_is_null(v)) {
        if (!required)
            return true;
        char msg[96];
        snprintf(msg, sizeof(msg), "missing field '%s'", name);
        http_reply_field_error(cx, 400, name, msg);
        return false;
    }
    if (!json_is_integer(v)) {
        char msg[96];
        snprintf(msg, sizeof(msg), "'%s' must be an integer", name);
        http_reply_field_error(cx, 400, name, msg);
        return false;
    }
    *out = json_integer_value(v);
    return true;
}

void http_job_dispatch(struct http_ctx *cx, struct http_job *j)
{
    j->api = cx->api;
    j->req = cx->req;
    j->req_id = cx->req_id;
    if (cx->api->worker) {
        skp_err err = http_worker_submit(cx->api->worker, j);
        if (!err)
            return;
        j->destroy(j);
        http_reply_error(cx, 503, "%s",
                         err == SKP_EFULL ? "too many analyses in progress, retry"
                                          : "server is shutting down");
        return;
    }
    j->run(j, cx->api->store);
    http_send(cx, &j->res);
    j->destroy(j);
}

void http_job_dispatch_after(struct http_ctx *cx, struct http_job *j, skp_err err, const char *what)
{
    if (err) {
        j->destroy(j);
        http_reply_store_error(cx, err, what);
        return;
    }
    http_job_dispatch(cx, j);
}

void *http_job_new(struct http_ctx *cx, size_t size, void (*run)(struct http_job *, struct store *),
                   void (*destroy)(struct http_job *))
{
    struct http_job *j = skpx_calloc(1, size);
    if (!j) {
        http_reply_error(cx, 500, "out of memory");
        return NULL;
    }
    j->run = run;
    j->destroy = destroy;
    return j;
}

bool http_job_strdup(struct http_ctx *cx, struct http_job *j, char **dst, const char *s)
{
    *dst = skpx_strdup(s);
    if (*dst)
        return true;
    j->destroy(j);
    http_reply_error(cx, 500, "out of memory");
    return false;
}

void http_job_free(struct http_job *j)
{
    SKPX_FREE_ALL(j->id, j);
}

/* Percent-decodes [s, s+n) into a new string; NULL if malformed, too long or containing NUL. */
static char *decode_segment(const char *s, size_t n)
{
    if (n > HTTP_SEGMENT_MAX * 3)
        return NULL;
    char *out = skpx_malloc(n + 1);
    if (!out)
        return NULL;
    bool bad = false;
    size_t k = skpx_pct_decode(s, n, out, n + 1, &bad);
    if (bad || k > HTTP_SEGMENT_MAX) {
        skpx_free(out);
        return NULL;
    }
    return out;
}

/* "Bearer <want>" in `authz` (may be NULL), compared in constant time so the token cannot be
 * guessed byte by byte from timings. */
static bool token_matches(const char *want, const char *authz)
{
    if (!authz || strncmp(authz, "Bearer ", 7) != 0)
        return false;
    const char *tok = authz + 7;
    size_t la = strlen(tok), lb = strlen(want);
    unsigned char diff = (unsigned char)(la != lb);
    for (size_t i = 0; i < la; i++)
        diff |= (unsigned char)(tok[i] ^ want[i % (lb ? lb : 1)]);
    return diff == 0;
}

/* The connection guard's early check, when a mutating request's headers are in (its body not
 * read yet). The same rule as authorized(). */
static bool early_token_ok(void *ud, enum http_framing_method method, const char *authz)
{
    (void)method;
    const struct http_api *api = ud;
    return !api->api_token || token_matches(api->api_token, authz);
}

static bool authorized(struct http_ctx *cx)
{
    if (!cx->api->api_token)
        return true;
    if (cx->method != EVHTTP_REQ_POST && cx->method != EVHTTP_REQ_DELETE &&
        cx->method != EVHTTP_REQ_PUT && cx->method != EVHTTP_REQ_PATCH)
        return true;
    return token_matches(
        cx->api->api_token,
        evhttp_find_header(evhttp_request_get_input_headers(cx->req), "Authorization"));
}

void http_healthz(struct http_ctx *cx)
{
    if (cx->api->db_problem) {
        http_reply_json(
            cx, 503,
            json_pack("{s:s, s:s}", "status", "database corrupt", "database", cx->api->db_problem));
        return;
    }
    /* A database server may be down or changed under us: ask it (one short query; while the
     * store backs off between reconnects it answers at once). SQLite's file is checked at start
     * (its check reads the whole file). */
    char detail[256] = "";
    if (cx->api->db_remote && store_check(cx->api->store, detail, sizeof(detail)) != SKP_OK) {
        http_reply_json(cx, 503,
                        json_pack("{s:s, s:o}", "status", "database unavailable", "database",
                                  skp_json_str(detail[0] ? detail : "unreachable")));
        return;
    }
    http_reply_json(cx, 200, json_pack("{s:s}", "status", "ok"));
}

/* The process runs and its loop answers: nothing else is asked (for liveness probes, which
 * restart the process; /healthz says whether it can do its work). */
void http_livez(struct http_ctx *cx)
{
    http_reply_json(cx, 200, json_pack("{s:s}", "status", "ok"));
}

void http_metrics(struct http_ctx *cx)
{
    struct skpx_grpc_server_stats gs;
    struct store_stats ss;
    bool have_store = store_get_stats(cx->api->store, &ss) == SKP_OK;
    if (cx->api->endpoint_stats) {
        struct endpoint_stats_counters ec;
        endpoint_stats_counters(cx->api->endpoint_stats, &ec);
        cx->api->metrics->endpoints_untracked = ec.dropped_endpoints;
    }
    if (cx->api->grpc)
        skpx_grpc_server_get_stats(cx->api->grpc, &gs);
    char *text = NULL;
    size_t len = 0;
    /* Count this request before rendering so the scrape sees itself. */
    if (metrics_render(cx->api->metrics, cx->api->grpc ? &gs : NULL, have_store ? &ss : NULL, &text,
                       &len)) {
        http_reply_error(cx, 500, "out of memory");
        return;
    }
    char gql[1024]; /* the GraphQL door's counters (server/graphql/graphql.h) */
    size_t gql_len = graphql_metrics_text(gql, sizeof(gql));
    char *all = skpx_realloc(text, len + gql_len + 1);
    if (all) {
        memcpy(all + len, gql, gql_len);
        text = all;
        len += gql_len;
    }
    http_reply_bytes(cx, 200, "text/plain; version=0.0.4; charset=utf-8", text, len, NULL, NULL);
    skpx_free(text);
}

static void on_request(struct evhttp_request *req, void *ud)
{
    struct http_api *api = ud;
    struct http_ctx cx = {.api = api, .req = req, .method = evhttp_request_get_command(req)};
    cx.req_id = ++api->next_req_id;
    http_conns_request_begin(api->conns, req); /* refusals of later requests wait for this one */
    TAILQ_INIT(&cx.query);
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    const char *query = uri ? evhttp_uri_get_query(uri) : NULL;
    cx.raw_path = path && *path ? path : "/";
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);
    evhttp_add_header(out, "X-Frame-Options", "DENY");
    if (!http_guard_host_ok(&api->guard, evhttp_find_header(in, "Host"))) {
        /* DNS rebinding: a page of another site whose name now resolves to us. */
        static struct skpx_log_limit lim;
        skpx_log_limited(&lim, SKPX_LOG_WARN,
                         "http req %" PRIu64 ": refused Host '%s' (not served here; see "
                         "--allowed-origins)",
                         cx.req_id, evhttp_find_header(in, "Host"));
        api->metrics->http_guard_refused++;
        http_reply_error(&cx, 421,
                         "this server does not answer for host '%s' (DNS rebinding "
                         "protection; list it in skyprofd --allowed-origins)",
                         evhttp_find_header(in, "Host"));
        goto out;
    }
    if (!path || path[0] != '/') {
        http_reply_error(&cx, 400, "bad request target");
        goto out;
    }
    if (query && evhttp_parse_query_str(query, &cx.query) != 0) {
        http_reply_error(&cx, 400, "malformed query string");
        goto out;
    }
    /* Split and decode the path. Empty segments (a//b, trailing /) are skipped. */
    size_t n = 0;
    for (const char *p = path; (p = http_path_segment(p, &n)) != NULL; p += n) {
        if (cx.n_seg == HTTP_MAX_SEGMENTS) {
            http_reply_error(&cx, 404, "no such path");
            goto out;
        }
        cx.seg[cx.n_seg] = decode_segment(p, n);
        if (!cx.seg[cx.n_seg]) {
            http_reply_error(&cx, 400, "malformed path");
            goto out;
        }
        cx.n_seg++;
    }
    if (!authorized(&cx)) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
                          "Bearer realm=\"skyprof\"");
        http_reply_error(&cx, 401, "missing or wrong API token (Authorization: Bearer ...)");
        goto out;
    }
    http_route(&cx);
out:
    for (size_t i = 0; i < cx.n_seg; i++)
        skpx_free(cx.seg[i]);
    evhttp_clear_headers(&cx.query);
}

skp_err http_api_new(struct event_base *base, const struct http_api_opts *o, struct http_api **out)
{
    *out = NULL;
    struct http_api *h = skpx_calloc(1, sizeof(*h));
    if (!h)
        return SKP_ENOMEM;
    h->base = base;
    h->store = o->store;
    h->metrics = o->metrics;
    h->grpc = o->grpc;
    h->max_analyze_snapshots = o->max_analyze_snapshots;
    h->now_ms = o->now_ms;
    h->endpoint_stats = o->endpoint_stats;
    h->cont_eval = o->cont_eval;
    char why[256];
    if (http_guard_init(&h->guard, o->http_addr, o->allowed_origins, why, sizeof(why))) {
        SKPX_ERROR("http: %s", why);
        skpx_free(h);
        return SKP_EINVAL;
    }
    h->http = evhttp_new(base);
    if (!h->http)
        goto oom;
    if (o->api_token && o->api_token[0] && !(h->api_token = skpx_strdup(o->api_token)))
        goto oom;
    if (o->web_root && !(h->web_root = skpx_strdup(o->web_root)))
        goto oom;
    h->db_remote = o->db_path && !store_target_is_file(o->db_path);
    if (o->db_problem && o->db_problem[0] && !(h->db_problem = skpx_strdup(o->db_problem)))
        goto oom;
    evhttp_set_max_body_size(h->http, HTTP_BODY_HARD_MAX);
    evhttp_set_max_headers_size(h->http, HTTP_HEADERS_MAX);
    evhttp_set_timeout(h->http, HTTP_TIMEOUT_S);
    evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                            EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                            EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
    evhttp_set_gencb(h->http, on_request, h);
    struct http_conns_opts co = {
        .max_connections = o->max_connections,
        .max_conns_per_peer = o->max_conns_per_peer,
        .request_timeout_ms = o->request_timeout_ms,
        .body_budget = o->body_budget,
        .max_body = HTTP_BODY_HARD_MAX,
        .token_ok = early_token_ok,
        .token_ud = h,
        .metrics = o->metrics,
    };
    if (http_conns_new(base, h->http, &co, &h->conns) != SKP_OK)
        goto oom;
    if (o->db_path) {
        skp_err err = http_worker_start(base, o->db_path, &h->worker);
        if (err) {
            http_api_free(h);
            return err;
        }
    }
    *out = h;
    return SKP_OK;
oom:
    http_api_free(h);
    return SKP_ENOMEM;
}

skp_err http_api_listen(struct http_api *h, const char *addr, uint16_t *bound_port)
{
    if (!config_addr_valid(addr))
        return SKP_EINVAL;
    const char *colon = strrchr(addr, ':');
    char host[256];
    size_t hl = (size_t)(colon - addr);
    const char *hp = addr;
    if (addr[0] == '[') {
        hp = addr + 1;
        hl -= 2;
    }
    if (hl >= sizeof(host))
        return SKP_EINVAL;
    memcpy(host, hp, hl);
    host[hl] = '\0';
    if (!host[0] || !strcmp(host, "*"))
        snprintf(host, sizeof(host), "0.0.0.0");
    unsigned port = (unsigned)strtoul(colon + 1, NULL, 10);
    h->sock = evhttp_bind_socket_with_handle(h->http, host, (uint16_t)port);
    if (!h->sock) {
        SKPX_ERROR("http: cannot listen on %s: %s", addr, strerror(errno));
        return SKP_EIO;
    }
    http_conns_add_listener(h->conns, h->sock);
    if (bound_port) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        *bound_port = (uint16_t)port;
        if (getsockname(evhttp_bound_socket_get_fd(h->sock), (struct sockaddr *)&ss, &sl) == 0) {
            if (ss.ss_family == AF_INET)
                *bound_port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
            else if (ss.ss_family == AF_INET6)
                *bound_port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        }
    }
    return SKP_OK;
}

void http_api_stop_accepting(struct http_api *h)
{
    if (h && h->sock) {
        http_conns_remove_listener(h->conns);
        evhttp_del_accept_socket(h->http, h->sock);
        h->sock = NULL;
    }
}

void http_api_free(struct http_api *h)
{
    if (!h)
        return;
    /* The worker first: it holds requests that evhttp_free is about to release. */
    http_worker_stop(h->worker);
    if (h->http)
        evhttp_free(h->http);
    http_conns_free(h->conns); /* after evhttp: its connections' close callbacks use it */
    SKPX_FREE_ALL(h->api_token, h->web_root, h->db_problem, h);
}

bool http_instance_chosen(const char *filter, const char *inst)
{
    if (!filter || !*filter)
        return true;
    size_t n = strlen(inst);
    for (const char *p = filter; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && memcmp(p, inst, n) == 0)
            return true;
        p += len + (e ? 1 : 0);
    }
    return false;
}
