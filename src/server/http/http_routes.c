/* http_routes.c - the HTTP API's routes as data: {methods, pattern, handler}, matched in order
 * against the decoded path segments. A pattern is "/"-separated literals and "{name}" captures
 * (one whole segment each); a handler gets the captures as arguments. HEAD is served wherever
 * GET is. docs/api.md documents exactly this table (tests/unit/server/test_http_routes.c
 * checks both directions), so a new route is one row here plus its section there.
 * Loop thread only. */
#include <event2/buffer.h>
#include <stdio.h>
#include <string.h>

#include "server/formats/utf8.h"
#include "server/http/http_ebpf.h"
#include "server/http/http_int.h"
#include "server/http/http_pprof.h"

const struct http_route http_routes[] = {
    {HTTP_M_GET, "/healthz", .h0 = http_healthz},
    {HTTP_M_GET, "/livez", .h0 = http_livez},
    {HTTP_M_GET, "/metrics", .h0 = http_metrics},
    {HTTP_M_GET, "/api/v1/profile/tasks", .h0 = http_tasks_list},
    {HTTP_M_POST, "/api/v1/profile/tasks", .h0 = http_tasks_create},
    {HTTP_M_GET, "/api/v1/profile/tasks/{id}", .h1 = http_tasks_get},
    {HTTP_M_GET, "/api/v1/profile/tasks/{id}/logs", .h1 = http_tasks_logs},
    {HTTP_M_GET, "/api/v1/profile/tasks/{id}/segments", .h1 = http_tasks_segments},
    {HTTP_M_POST, "/api/v1/profile/tasks/{id}/cancel", .h1 = http_tasks_cancel},
    {HTTP_M_GET, "/api/v1/profile/tasks/{id}/analyze", .h1 = http_analyze_task},
    {HTTP_M_GET, "/api/v1/profile/tasks/{id}/export", .h1 = http_export_task},
    {HTTP_M_POST, "/api/v1/profile/analyze", .h0 = http_analyze_post},
    {HTTP_M_GET, "/api/v1/profile/segments/{segmentId}/analyze", .h1 = http_analyze_segment},
    {HTTP_M_GET, "/api/v1/profile/segments/{segmentId}/export", .h1 = http_export_segment},
    {HTTP_M_GET, "/api/v1/profile/segments/{segmentId}/timeline", .h1 = http_timeline_segment},
    {HTTP_M_POST, "/api/v1/profile/compare", .h0 = http_compare_post},
    {HTTP_M_GET, "/api/v1/pprof/tasks", .h0 = http_pprof_list},
    {HTTP_M_POST, "/api/v1/pprof/tasks", .h0 = http_pprof_create},
    {HTTP_M_GET, "/api/v1/pprof/tasks/{id}", .h1 = http_pprof_get},
    {HTTP_M_GET, "/api/v1/pprof/tasks/{id}/analyze", .h1 = http_pprof_analyze},
    {HTTP_M_GET, "/api/v1/pprof/tasks/{id}/download", .h1 = http_pprof_download},
    {HTTP_M_GET, "/api/v1/pprof/tasks/{id}/files/{fileId}", .h2 = http_pprof_file},
    {HTTP_M_POST, "/api/v1/pprof/tasks/{id}/cancel", .h1 = http_pprof_cancel},
    {HTTP_M_GET, "/api/v1/async-profiler/tasks", .h0 = http_async_list},
    {HTTP_M_POST, "/api/v1/async-profiler/tasks", .h0 = http_async_create},
    {HTTP_M_GET, "/api/v1/async-profiler/tasks/{id}", .h1 = http_async_get},
    {HTTP_M_GET, "/api/v1/async-profiler/tasks/{id}/analyze", .h1 = http_async_analyze},
    {HTTP_M_GET, "/api/v1/async-profiler/tasks/{id}/download", .h1 = http_async_download},
    {HTTP_M_GET, "/api/v1/async-profiler/tasks/{id}/timeline", .h1 = http_async_timeline},
    {HTTP_M_GET, "/api/v1/async-profiler/tasks/{id}/files/{fileId}", .h2 = http_async_file},
    {HTTP_M_GET, "/api/v1/ebpf/processes", .h0 = http_ebpf_processes},
    {HTTP_M_GET, "/api/v1/ebpf/tasks/{id}/analyze", .h1 = http_ebpf_analyze},
    {HTTP_M_GET, "/api/v1/ebpf/tasks/{id}/download", .h1 = http_ebpf_download},
    {HTTP_M_POST, "/api/v1/async-profiler/tasks/{id}/cancel", .h1 = http_async_cancel},
    {HTTP_M_GET, "/api/v1/services", .h0 = http_services_list},
    {HTTP_M_GET, "/api/v1/services/{name}/instances", .h1 = http_services_instances},
    {HTTP_M_GET, "/api/v1/services/{name}/endpoints/stats", .h1 = http_endpoint_stats},
    {HTTP_M_GET, "/api/v1/services/{name}/endpoints", .h1 = http_services_endpoints},
    {HTTP_M_GET, "/api/v1/continuous/policies", .h0 = http_continuous_list},
    {HTTP_M_GET | HTTP_M_PUT | HTTP_M_DELETE, "/api/v1/continuous/policies/{service}",
     .h1 = http_continuous_policy},
    {HTTP_M_GET, "/api/v1/continuous/policies/{service}/values", .h1 = http_continuous_values},
    {HTTP_M_GET, "/api/v1/profile/triggers", .h0 = http_triggers_list},
    {HTTP_M_POST, "/graphql", .h0 = http_graphql_post},
};
const size_t http_n_routes = sizeof(http_routes) / sizeof(http_routes[0]);

const char *http_path_segment(const char *p, size_t *n)
{
    while (*p == '/')
        p++;
    if (!*p)
        return NULL;
    const char *e = strchr(p, '/');
    *n = e ? (size_t)(e - p) : strlen(p);
    return p;
}

bool http_route_match(const char *pattern, char *const *seg, size_t n_seg, const char **caps,
                      size_t *n_caps)
{
    size_t i = 0;
    size_t n = 0;
    *n_caps = 0;
    for (const char *p = pattern; (p = http_path_segment(p, &n)) != NULL; p += n) {
        if (i == n_seg)
            return false;
        if (p[0] == '{') {
            if (*n_caps == HTTP_ROUTE_MAX_CAPTURES)
                return false;
            caps[(*n_caps)++] = seg[i];
        } else if (strlen(seg[i]) != n || memcmp(seg[i], p, n) != 0) {
            return false;
        }
        i++;
    }
    return i == n_seg;
}

static unsigned method_bit(enum evhttp_cmd_type m)
{
    switch (m) {
    case EVHTTP_REQ_GET:
    case EVHTTP_REQ_HEAD:
        return HTTP_M_GET;
    case EVHTTP_REQ_POST:
        return HTTP_M_POST;
    case EVHTTP_REQ_PUT:
        return HTTP_M_PUT;
    case EVHTTP_REQ_DELETE:
        return HTTP_M_DELETE;
    default:
        return 0;
    }
}

void http_method_not_allowed(struct http_ctx *cx, unsigned allowed)
{
    static const char *const names[] = {"GET", "POST", "PUT", "DELETE"};
    char allow[32] = "";
    size_t n = 0;
    for (unsigned i = 0; i < 4; i++)
        if (allowed & (1u << i))
            n += (size_t)snprintf(allow + n, sizeof(allow) - n, "%s%s", n ? ", " : "", names[i]);
    if (!n)
        snprintf(allow, sizeof(allow), "GET");
    evhttp_add_header(evhttp_request_get_output_headers(cx->req), "Allow", allow);
    http_reply_error(cx, 405, "method not allowed (allowed: %s)", allow);
}

/* CSRF checks of a mutating route, one for every method (http_guard_mutation); replies 415/403
 * and returns false if refused. */
static bool mutation_allowed(struct http_ctx *cx)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(cx->req);
    const char *origin = evhttp_find_header(in, "Origin");
    int code = http_guard_mutation(&cx->api->guard, evhttp_find_header(in, "Content-Type"),
                                   evbuffer_get_length(evhttp_request_get_input_buffer(cx->req)),
                                   origin, evhttp_find_header(in, "Host"));
    if (code == 415) {
        cx->api->metrics->http_guard_refused++;
        http_reply_error(cx, 415,
                         "a request that changes something needs Content-Type: "
                         "application/json");
        return false;
    }
    if (code) {
        cx->api->metrics->http_guard_refused++;
        http_reply_error(cx, 403,
                         "cross-site request refused: Origin '%s' is not this server "
                         "(list it in skyprofd --allowed-origins)",
                         origin);
        return false;
    }
    return true;
}

void http_route(struct http_ctx *cx)
{
    unsigned want = method_bit(cx->method);
    unsigned allowed = 0;
    for (size_t i = 0; i < http_n_routes; i++) {
        const struct http_route *r = &http_routes[i];
        const char *caps[HTTP_ROUTE_MAX_CAPTURES];
        size_t n_caps;
        if (!http_route_match(r->pattern, cx->seg, cx->n_seg, caps, &n_caps))
            continue;
        if (!(r->methods & want)) {
            allowed |= r->methods;
            continue;
        }
        if (want != HTTP_M_GET && !mutation_allowed(cx))
            return;
        for (size_t k = 0; k < n_caps; k++) {
            if (!skp_utf8_valid(caps[k], strlen(caps[k]))) {
                cx->api->metrics->names_refused++;
                http_reply_error(cx, 400, "a name in the path is not UTF-8");
                return;
            }
        }
        if (r->h2 && n_caps == 2)
            r->h2(cx, caps[0], caps[1]);
        else if (r->h1 && n_caps == 1)
            r->h1(cx, caps[0]);
        else
            r->h0(cx);
        return;
    }
    if (allowed)
        http_method_not_allowed(cx, allowed);
    else if (cx->n_seg > 0 && strcmp(cx->seg[0], "api") == 0)
        http_reply_error(cx, 404, "no such API route: %s", cx->raw_path);
    else if (want == HTTP_M_GET)
        http_static_serve(cx);
    else
        http_method_not_allowed(cx, HTTP_M_GET);
}
