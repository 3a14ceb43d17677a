/* http_guard.c - Host, Origin and Content-Type checks of the HTTP API (see http_guard.h).
 * Design: the checks are pure functions over header values, so they are unit-tested without a
 * server; http_api.c calls the Host check for every request and http_routes.c the others for
 * every mutating route it dispatches. */
#include "server/http/http_guard.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Splits "host[:port]" / "[v6][:port]" into the host (without brackets) in h (cap bytes).
 * False if malformed or too long. */
static bool host_part(const char *authority, char *h, size_t cap)
{
    const char *end;
    const char *start = authority;
    if (authority[0] == '[') {
        end = strchr(authority, ']');
        if (!end || (end[1] != '\0' && end[1] != ':'))
            return false;
        start = authority + 1;
    } else {
        end = strchr(authority, ':');
        if (!end)
            end = authority + strlen(authority);
    }
    size_t n = (size_t)(end - start);
    if (n == 0 || n >= cap)
        return false;
    memcpy(h, start, n);
    h[n] = '\0';
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)h[i] <= 0x20 || h[i] == '/' || h[i] == '@')
            return false;
    return true;
}

static bool is_ip_literal(const char *h)
{
    unsigned char buf[16];
    return inet_pton(AF_INET, h, buf) == 1 || inet_pton(AF_INET6, h, buf) == 1;
}

static bool ends_with_ci(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcasecmp(s + a - b, suffix) == 0;
}

/* The authority ("host[:port]") of an origin "scheme://authority", or NULL. */
static const char *origin_authority(const char *origin)
{
    if (strncasecmp(origin, "http://", 7) == 0)
        return origin + 7;
    if (strncasecmp(origin, "https://", 8) == 0)
        return origin + 8;
    return NULL;
}

skp_err http_guard_init(struct http_guard *g, const char *http_addr, const char *allowed_origins,
                        char *why, size_t cap)
{
    memset(g, 0, sizeof(*g));
    if (why && cap)
        why[0] = '\0';
    char h[HTTP_GUARD_ORIGIN_MAX];
    if (http_addr && host_part(http_addr, h, sizeof(h)) && !is_ip_literal(h) && strcmp(h, "*") != 0)
        snprintf(g->listen_host, sizeof(g->listen_host), "%s", h);
    const char *p = allowed_origins ? allowed_origins : "";
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        while (n && (*p == ' ' || *p == '\t')) {
            p++;
            n--;
        }
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '/'))
            n--;
        if (n) {
            if (g->n_origins == HTTP_GUARD_MAX_ORIGINS || n >= HTTP_GUARD_ORIGIN_MAX) {
                snprintf(why, cap, "--allowed-origins: at most %d origins of %d characters",
                         HTTP_GUARD_MAX_ORIGINS, HTTP_GUARD_ORIGIN_MAX - 1);
                return SKP_EINVAL;
            }
            char *o = g->origins[g->n_origins];
            memcpy(o, p, n);
            o[n] = '\0';
            const char *auth = origin_authority(o);
            if (!auth || strchr(auth, '/') || !host_part(auth, h, sizeof(h))) {
                snprintf(why, cap, "--allowed-origins: '%.*s' is not http(s)://HOST[:PORT]",
                         (int)(n > 100 ? 100 : n), p);
                return SKP_EINVAL;
            }
            g->n_origins++;
        }
        if (!e)
            break;
        p = e + 1;
    }
    return SKP_OK;
}

bool http_guard_host_ok(const struct http_guard *g, const char *host)
{
    if (!host)
        return true; /* HTTP/1.0 tools; every browser sends Host */
    char h[HTTP_GUARD_ORIGIN_MAX];
    if (!host_part(host, h, sizeof(h)))
        return false;
    if (is_ip_literal(h) || !strchr(h, '.') || ends_with_ci(h, ".localhost"))
        return true;
    if (g->listen_host[0] && strcasecmp(h, g->listen_host) == 0)
        return true;
    for (size_t i = 0; i < g->n_origins; i++) {
        char oh[HTTP_GUARD_ORIGIN_MAX];
        if (host_part(origin_authority(g->origins[i]), oh, sizeof(oh)) && strcasecmp(oh, h) == 0)
            return true;
    }
    return false;
}

bool http_guard_origin_ok(const struct http_guard *g, const char *origin, const char *host)
{
    if (!origin)
        return true; /* not a browser (CLI, curl, agents): CSRF needs a browser */
    for (size_t i = 0; i < g->n_origins; i++)
        if (strcasecmp(origin, g->origins[i]) == 0)
            return true;
    const char *auth = origin_authority(origin);
    return auth && host && strcasecmp(auth, host) == 0; /* same origin ("null" never is) */
}

bool http_guard_is_json(const char *ct)
{
    if (!ct)
        return false;
    while (*ct == ' ')
        ct++;
    static const char k[] = "application/json";
    if (strncasecmp(ct, k, sizeof(k) - 1) != 0)
        return false;
    ct += sizeof(k) - 1;
    while (*ct == ' ')
        ct++;
    return *ct == '\0' || *ct == ';';
}

int http_guard_mutation(const struct http_guard *g, const char *content_type, size_t body_len,
                        const char *origin, const char *host)
{
    if ((body_len > 0 || content_type) && !http_guard_is_json(content_type))
        return 415;
    if (!http_guard_origin_ok(g, origin, host))
        return 403;
    return 0;
}
