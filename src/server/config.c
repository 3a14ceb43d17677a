/* config.c - flag and environment parsing for skyprofd (see config.h). */
#include "server/config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/log.h"
#include "server/http/http_guard.h"
#include "server/stats/segment_keep.h"

enum opt_kind { OPT_STR, OPT_DAYS, OPT_LEVEL, OPT_U64, OPT_ADDR, OPT_GRACE };

struct opt {
    const char *flag; /* "--grpc-addr" */
    const char *env;  /* "SKYPROF_GRPC_ADDR", NULL if none */
    enum opt_kind kind;
    size_t offset; /* of the field in struct config */
};

#define OFF(f) offsetof(struct config, f)
static const struct opt opts[] = {
    {"--grpc-addr", "SKYPROF_GRPC_ADDR", OPT_ADDR, OFF(grpc_addr)},
    {"--http-addr", "SKYPROF_HTTP_ADDR", OPT_ADDR, OFF(http_addr)},
    {"--db", "SKYPROF_DB", OPT_STR, OFF(db_path)},
    {"--auth-token", "SKYPROF_AUTH_TOKEN", OPT_STR, OFF(auth_token)},
    {"--api-token", "SKYPROF_API_TOKEN", OPT_STR, OFF(api_token)},
    {"--web-root", "SKYPROF_WEB_ROOT", OPT_STR, OFF(web_root)},
    {"--ui-root", "SKYPROF_UI_ROOT", OPT_STR, OFF(web_root)}, /* SkyWalking's UI: same field */
    {"--retention-days", "SKYPROF_RETENTION_DAYS", OPT_DAYS, OFF(retention_days)},
    {"--log-level", "SKYPROF_LOG_LEVEL", OPT_LEVEL, OFF(log_level)},
    {"--max-analyze-snapshots", "SKYPROF_MAX_ANALYZE_SNAPSHOTS", OPT_U64,
     OFF(max_analyze_snapshots)},
    {"--pprof-max-bytes", "SKYPROF_PPROF_MAX_BYTES", OPT_U64, OFF(pprof_max_bytes)},
    {"--keep-segments", "SKYPROF_KEEP_SEGMENTS", OPT_STR, OFF(keep_segments)},
    {"--keep-grace-s", "SKYPROF_KEEP_GRACE_S", OPT_GRACE, OFF(keep_grace_s)},
    {"--jfr-max-bytes", "SKYPROF_JFR_MAX_BYTES", OPT_U64, OFF(jfr_max_bytes)},
    {"--max-segment-spans", "SKYPROF_MAX_SEGMENT_SPANS", OPT_U64, OFF(max_segment_spans)},
    {"--max-policies", "SKYPROF_MAX_POLICIES", OPT_U64, OFF(max_policies)},
    {"--max-endpoints-per-service", "SKYPROF_MAX_ENDPOINTS_PER_SERVICE", OPT_U64,
     OFF(max_endpoints)},
    {"--grpc-max-connections", "SKYPROF_GRPC_MAX_CONNECTIONS", OPT_U64, OFF(grpc_max_connections)},
    {"--http-max-connections", "SKYPROF_HTTP_MAX_CONNECTIONS", OPT_U64, OFF(http_max_connections)},
    {"--max-conns-per-peer", "SKYPROF_MAX_CONNS_PER_PEER", OPT_U64, OFF(max_conns_per_peer)},
    {"--grpc-idle-timeout-ms", "SKYPROF_GRPC_IDLE_TIMEOUT_MS", OPT_U64, OFF(grpc_idle_timeout_ms)},
    {"--grpc-stream-idle-timeout-ms", "SKYPROF_GRPC_STREAM_IDLE_TIMEOUT_MS", OPT_U64,
     OFF(grpc_stream_idle_timeout_ms)},
    {"--grpc-memory-budget", "SKYPROF_GRPC_MEMORY_BUDGET", OPT_U64, OFF(grpc_memory_budget)},
    {"--max-decoded-bytes", "SKYPROF_MAX_DECODED_BYTES", OPT_U64, OFF(max_decoded_bytes)},
    {"--http-request-timeout-ms", "SKYPROF_HTTP_REQUEST_TIMEOUT_MS", OPT_U64,
     OFF(http_request_timeout_ms)},
    {"--http-body-budget", "SKYPROF_HTTP_BODY_BUDGET", OPT_U64, OFF(http_body_budget)},
    {"--continuous-slot-ms", "SKYPROF_CONTINUOUS_SLOT_MS", OPT_U64, OFF(continuous_slot_ms)},
    {"--continuous-check-interval-ms", "SKYPROF_CONTINUOUS_CHECK_INTERVAL_MS", OPT_U64,
     OFF(continuous_check_ms)},
    {"--allowed-origins", "SKYPROF_ALLOWED_ORIGINS", OPT_STR, OFF(allowed_origins)},
    {"--db-stall-ms", "SKYPROF_DB_STALL_MS", OPT_U64, OFF(db_stall_ms)},
    {"--graphql-max-answer-bytes", "SKYPROF_GRAPHQL_MAX_ANSWER_BYTES", OPT_U64,
     OFF(graphql_max_answer_bytes)},
};
#undef OFF

static const char usage[] =
    "usage: skyprofd [options]\n"
    "SkyWalking-compatible profiling backend: gRPC collector, HTTP API and web UI.\n"
    "\n"
    "  --grpc-addr HOST:PORT          agent gRPC listener (default " CONFIG_DEFAULT_GRPC_ADDR
    "; port 0 = any)\n"
    "  --http-addr HOST:PORT          HTTP API + UI listener (default " CONFIG_DEFAULT_HTTP_ADDR
    ")\n"
    "  --db PATH|URL                  SQLite database (default " CONFIG_DEFAULT_DB
    "; folder created),\n"
    "                                 or postgresql://user@host:port/db?sslmode=... (env "
    "SKYPROF_DB)\n"
    "  --auth-token TOKEN             agents must send it as `authentication` metadata\n"
    "  --api-token TOKEN              POST/DELETE HTTP calls need `Authorization: Bearer TOKEN`\n"
    "  --db-stall-ms MS               PostgreSQL: an answer not there within MS drops the\n"
    "                                 connection, the call fails (default 50; 0 = wait)\n"
    "  --retention-days N             delete data older than N days, hourly (default 3; 0 = "
    "never)\n"
    "  --log-level LEVEL              error|warn|info|debug (default info)\n"
    "  --web-root DIR                 UI assets (default: build tree web/dist, else "
    "PREFIX/share/skyprof/web)\n"
    "  --ui-root DIR                  serve a built SkyWalking UI (booster-ui dist/) instead\n"
    "                                 of skyprof's, beside POST /graphql\n"
    "  --graphql-max-answer-bytes N   largest GraphQL answer (default 67108864 = 64 MiB)\n"
    "  --max-analyze-snapshots N      cap on snapshots per analysis (default 0 = unlimited)\n"
    "  --pprof-max-bytes N            largest process-profile file an agent may upload\n"
    "                                 (default 31457280 = 30 MiB, at most 1 GiB)\n"
    "  --keep-segments MODE           trace segments stored: profiled (default; those with\n"
    "                                 snapshots), sampled:N (also 1 in N others), all, none\n"
    "  --keep-grace-s N               how long a segment waits for its snapshots (default 30)\n"
    "  --jfr-max-bytes N              largest JFR file (async-profiler task) an agent may upload\n"
    "                                 (default 31457280 = 30 MiB, at most 1 GiB)\n"
    "  --max-segment-spans N          trace segments with more spans are refused with\n"
    "                                 RESOURCE_EXHAUSTED before decoding (default 10000)\n"
    "  --max-policies N               continuous-profiling policies held; a new service's\n"
    "                                 policy beyond them is refused with 409 (default 1000)\n"
    "  --max-endpoints-per-service N  endpoints whose statistics are kept per service; more are\n"
    "                                 not tracked (default 1000)\n"
    "  --grpc-max-connections N       open gRPC connections (default 3/4 of the fd limit)\n"
    "  --http-max-connections N       open HTTP connections (default 1/4 of the fd limit)\n"
    "  --max-conns-per-peer N         connections from one IP per listener (default 256)\n"
    "  --grpc-idle-timeout-ms N       close gRPC connections without calls idle this long\n"
    "                                 (default 120000)\n"
    "  --grpc-stream-idle-timeout-ms N  cancel calls whose client sends nothing this long\n"
    "                                 (default 120000)\n"
    "  --grpc-memory-budget N         bytes all gRPC calls may buffer (default 268435456)\n"
    "  --max-decoded-bytes N          memory one gRPC message may decode into (default 67108864)\n"
    "  --http-request-timeout-ms N    an HTTP request's headers and body must arrive within\n"
    "                                 (default 30000)\n"
    "  --http-body-budget N           bytes of HTTP bodies buffered at once (default 67108864)\n"
    "  --continuous-slot-ms MS        continuous profiling: slot length (default 1000; tests\n"
    "                                 shorten it: periods and durations count slots)\n"
    "  --continuous-check-interval-ms MS  how often policies are evaluated (default: a slot)\n"
    "  --allowed-origins LIST         comma-separated http(s)://HOST[:PORT] origins whose pages\n"
    "                                 may call the API, and host names it answers for\n"
    "                                 (default: only this server, by IP or dotless name)\n"
    "  --help, -h                     this text\n"
    "  --version, -V                  print the version\n"
    "\n"
    "Environment (overridden by flags): SKYPROF_GRPC_ADDR, SKYPROF_HTTP_ADDR, SKYPROF_DB,\n"
    "SKYPROF_AUTH_TOKEN, SKYPROF_API_TOKEN, SKYPROF_RETENTION_DAYS, SKYPROF_LOG_LEVEL,\n"
    "SKYPROF_WEB_ROOT, SKYPROF_MAX_ANALYZE_SNAPSHOTS, SKYPROF_PPROF_MAX_BYTES,\n"
    "SKYPROF_KEEP_SEGMENTS, SKYPROF_KEEP_GRACE_S, SKYPROF_JFR_MAX_BYTES,\n"
    "SKYPROF_MAX_SEGMENT_SPANS, SKYPROF_ALLOWED_ORIGINS; each limit flag --x-y has SKYPROF_X_Y.\n";

const char *config_usage(void)
{
    return usage;
}

bool config_addr_valid(const char *addr)
{
    if (!addr)
        return false;
    const char *colon = strrchr(addr, ':');
    if (!colon || colon[1] == '\0')
        return false;
    if (addr[0] == '[') {
        /* [v6]:port */
        if (colon == addr || colon[-1] != ']')
            return false;
    } else if (memchr(addr, ':', (size_t)(colon - addr))) {
        return false; /* bare IPv6 needs brackets */
    }
    for (const char *p = addr; p < colon; p++)
        if (*p == ' ' || *p == '/' || (unsigned char)*p < 0x20)
            return false;
    unsigned long port = 0;
    for (const char *p = colon + 1; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        port = port * 10 + (unsigned long)(*p - '0');
        if (port > 65535)
            return false;
    }
    return true;
}

/* Parses a non-negative decimal integer with no sign, spaces or trailing garbage. */
static bool parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    if (!s || !*s)
        return false;
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (max - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* Applies one value; `origin` names the flag or variable in errors. */
static skp_err apply(struct config *cfg, const struct opt *o, const char *val, const char *origin,
                     char err[CONFIG_ERR_MAX])
{
    char *base = (char *)cfg;
    switch (o->kind) {
    case OPT_ADDR:
        if (!config_addr_valid(val)) {
            snprintf(err, CONFIG_ERR_MAX, "%s: invalid address '%s' (want HOST:PORT)", origin, val);
            return SKP_EINVAL;
        }
        /* fall through */
    case OPT_STR: {
        if (o->kind == OPT_STR &&
            (!strcmp(o->flag, "--db") || !strcmp(o->flag, "--web-root") ||
             !strcmp(o->flag, "--ui-root")) &&
            !*val) {
            snprintf(err, CONFIG_ERR_MAX, "%s: empty path", origin);
            return SKP_EINVAL;
        }
        struct keep_policy kp;
        if (!strcmp(o->flag, "--keep-segments") && keep_policy_parse(val, &kp) != SKP_OK) {
            snprintf(err, CONFIG_ERR_MAX,
                     "%s: '%s' is not none|profiled|all|sampled:N (N in 1..1000000)", origin, val);
            return SKP_EINVAL;
        }
        if (!strcmp(o->flag, "--allowed-origins")) {
            static struct http_guard g; /* ~8 KiB: not on the stack; config is single-threaded */
            char why[CONFIG_ERR_MAX];
            if (http_guard_init(&g, NULL, val, why, sizeof(why)) != SKP_OK) {
                snprintf(err, CONFIG_ERR_MAX, "%s", why);
                return SKP_EINVAL;
            }
        }
        char **slot = (char **)(void *)(base + o->offset);
        char *copy = NULL;
        /* An empty token means "no token" (lets a flag switch off an env setting). */
        if (*val || o->kind == OPT_ADDR ||
            (strcmp(o->flag, "--auth-token") && strcmp(o->flag, "--api-token"))) {
            copy = skpx_strdup(val);
            if (!copy)
                return SKP_ENOMEM;
        }
        skpx_free(*slot);
        *slot = copy;
        return SKP_OK;
    }
    case OPT_DAYS: {
        uint64_t v;
        if (!parse_u64(val, CONFIG_MAX_RETENTION_DAYS, &v)) {
            snprintf(err, CONFIG_ERR_MAX, "%s: '%s' is not a number of days in 0..%d", origin, val,
                     CONFIG_MAX_RETENTION_DAYS);
            return SKP_EINVAL;
        }
        cfg->retention_days = (int)v;
        return SKP_OK;
    }
    case OPT_LEVEL: {
        int lvl = skpx_log_level_parse(val);
        if (lvl < 0) {
            snprintf(err, CONFIG_ERR_MAX, "%s: unknown log level '%s' (error|warn|info|debug)",
                     origin, val);
            return SKP_EINVAL;
        }
        cfg->log_level = lvl;
        return SKP_OK;
    }
    case OPT_GRACE: {
        uint64_t v;
        if (!parse_u64(val, 3600, &v) || v == 0) {
            snprintf(err, CONFIG_ERR_MAX, "%s: '%s' is not a number of seconds in 1..3600", origin,
                     val);
            return SKP_EINVAL;
        }
        cfg->keep_grace_s = (int)v;
        return SKP_OK;
    }
    case OPT_U64: {
        uint64_t v;
        bool bytes = o->offset == offsetof(struct config, pprof_max_bytes) ||
                     o->offset == offsetof(struct config, jfr_max_bytes);
        if (!parse_u64(val, bytes ? CONFIG_MAX_PPROF_BYTES : UINT64_MAX, &v) || (bytes && v == 0)) {
            if (bytes)
                snprintf(err, CONFIG_ERR_MAX, "%s: '%s' is not a byte count in 1..%u", origin, val,
                         (unsigned)CONFIG_MAX_PPROF_BYTES);
            else
                snprintf(err, CONFIG_ERR_MAX, "%s: '%s' is not a non-negative integer", origin,
                         val);
            return SKP_EINVAL;
        }
        *(uint64_t *)((char *)cfg + o->offset) = v;
        return SKP_OK;
    }
    }
    return SKP_EINVAL;
}

static const char *env_get(char *const *env, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; env && env[i]; i++)
        if (!strncmp(env[i], name, n) && env[i][n] == '=')
            return env[i] + n + 1;
    return NULL;
}

void config_cleanup(struct config *cfg)
{
    if (!cfg)
        return;
    SKPX_FREE_ALL(cfg->grpc_addr, cfg->http_addr, cfg->db_path, cfg->auth_token, cfg->api_token,
                  cfg->allowed_origins, cfg->web_root, cfg->keep_segments);
    memset(cfg, 0, sizeof(*cfg));
}

skp_err config_parse(struct config *cfg, int argc, char *const *argv, char *const *env,
                     char err[CONFIG_ERR_MAX])
{
    skp_err e = SKP_OK;
    memset(cfg, 0, sizeof(*cfg));
    err[0] = '\0';
    cfg->grpc_addr = skpx_strdup(CONFIG_DEFAULT_GRPC_ADDR);
    cfg->http_addr = skpx_strdup(CONFIG_DEFAULT_HTTP_ADDR);
    cfg->db_path = skpx_strdup(CONFIG_DEFAULT_DB);
    cfg->retention_days = CONFIG_DEFAULT_RETENTION_DAYS;
    cfg->db_stall_ms = CONFIG_DEFAULT_DB_STALL_MS;
    cfg->pprof_max_bytes = CONFIG_DEFAULT_PPROF_MAX_BYTES;
    cfg->jfr_max_bytes = CONFIG_DEFAULT_JFR_MAX_BYTES;
    cfg->log_level = SKPX_LOG_INFO;
    if (!cfg->grpc_addr || !cfg->http_addr || !cfg->db_path) {
        e = SKP_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < SKP_ARRAY_LEN(opts); i++) {
        const char *v = env_get(env, opts[i].env);
        if (v) {
            e = apply(cfg, &opts[i], v, opts[i].env, err);
            if (e)
                goto out;
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            cfg->show_help = true;
            continue;
        }
        if (!strcmp(a, "--version") || !strcmp(a, "-V")) {
            cfg->show_version = true;
            continue;
        }
        const struct opt *o = NULL;
        const char *val = NULL;
        for (size_t k = 0; k < SKP_ARRAY_LEN(opts); k++) {
            size_t n = strlen(opts[k].flag);
            if (!strncmp(a, opts[k].flag, n) && (a[n] == '\0' || a[n] == '=')) {
                o = &opts[k];
                val = a[n] == '=' ? a + n + 1 : NULL;
                break;
            }
        }
        if (!o) {
            snprintf(err, CONFIG_ERR_MAX, "unknown option '%s' (see --help)", a);
            e = SKP_EINVAL;
            goto out;
        }
        if (!val) {
            if (i + 1 >= argc) {
                snprintf(err, CONFIG_ERR_MAX, "%s needs a value", o->flag);
                e = SKP_EINVAL;
                goto out;
            }
            val = argv[++i];
        }
        e = apply(cfg, o, val, o->flag, err);
        if (e)
            goto out;
    }
out:
    if (e) {
        if (e == SKP_ENOMEM && !err[0])
            snprintf(err, CONFIG_ERR_MAX, "out of memory");
        /* One line whatever the offending value held: control bytes (a newline would forge a
         * second log line, an escape sequence drive the terminal) become '?'. */
        for (char *c = err; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                *c = '?';
        char keep[CONFIG_ERR_MAX];
        memcpy(keep, err, CONFIG_ERR_MAX);
        config_cleanup(cfg);
        memcpy(err, keep, CONFIG_ERR_MAX);
    }
    return e;
}
