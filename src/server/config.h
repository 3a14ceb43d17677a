/* config.h - skyprofd's settings: defaults, then SKYPROF_* environment variables, then
 * command-line flags (flags win). Pure parsing, no I/O besides what the caller passes in, so
 * the unit tests drive it with fabricated argv/env arrays. Single-threaded. */
#ifndef SKP_SERVER_CONFIG_H
#define SKP_SERVER_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "skyprof/skp_err.h"

#define CONFIG_DEFAULT_GRPC_ADDR "127.0.0.1:11800"
#define CONFIG_DEFAULT_HTTP_ADDR "127.0.0.1:12800"
/* Spans one trace segment may carry: SkyWalking's agents stop at 300 per segment by default
 * (agent.span_limit_per_segment); 10000 leaves room for raised settings while a segment of
 * empty 2-byte spans can no longer make the daemon decode millions of them. */
#define CONFIG_DEFAULT_MAX_SEGMENT_SPANS 10000
/* Continuous-profiling policies skyprofd holds (one per service). */
#define CONFIG_DEFAULT_MAX_POLICIES 1000
/* Memory one gRPC message (and one trace segment) may decode into: a 4 MiB message of ordinary
 * content decodes into a few times its size; millions of empty sub-messages into gigabytes. */
#define CONFIG_DEFAULT_MAX_DECODED_BYTES (64u * 1024 * 1024)
#define CONFIG_DEFAULT_DB "./skyprof-data/skyprof.db"
#define CONFIG_DEFAULT_RETENTION_DAYS 3
#define CONFIG_DEFAULT_DB_STALL_MS 50 /* --db-stall-ms: the loop's wait for PostgreSQL */
/* Upper bound of --retention-days: 100 years keeps day*86400000 far from int64 overflow. */
#define CONFIG_MAX_RETENTION_DAYS 36500
/* Largest process-profile upload by default (OAP's 30 MiB) and at most (files are held in
 * memory while they arrive and stored as one SQLite BLOB). */
#define CONFIG_DEFAULT_PPROF_MAX_BYTES (30u * 1024 * 1024)
#define CONFIG_DEFAULT_JFR_MAX_BYTES (30u * 1024 * 1024)
#define CONFIG_MAX_PPROF_BYTES (1024u * 1024 * 1024)
/* Room for a config error message. */
#define CONFIG_ERR_MAX 256

struct config {
    char *grpc_addr; /* "host:port", port may be 0 */
    char *http_addr;
    char *db_path;
    char *auth_token;               /* NULL = agents need no token */
    char *api_token;                /* NULL = mutating HTTP calls need no token */
    char *web_root;                 /* NULL = let main pick the default */
    int retention_days;             /* 0 = keep forever */
    int log_level;                  /* enum skpx_log_level */
    uint64_t max_analyze_snapshots; /* 0 = unlimited */
    uint64_t pprof_max_bytes;       /* --pprof-max-bytes: largest pprof upload accepted */
    uint64_t jfr_max_bytes;     /* --jfr-max-bytes: largest JFR (async-profiler) upload accepted */
    char *keep_segments;        /* --keep-segments: none|profiled|sampled:N|all (NULL = profiled) */
    uint64_t max_segment_spans; /* --max-segment-spans; 0 = CONFIG_DEFAULT_MAX_SEGMENT_SPANS */
    uint64_t max_policies;      /* --max-policies; 0 = CONFIG_DEFAULT_MAX_POLICIES */
    uint64_t max_endpoints;     /* --max-endpoints-per-service; 0 = endpoint_stats.h's default */
    int keep_grace_s;           /* --keep-grace-s; 0 = the default */
    /* Connection and memory limits (issue 15; docs/server.md "Limits"). 0 = the default. */
    uint64_t grpc_max_connections;        /* --grpc-max-connections (default: from RLIMIT_NOFILE) */
    uint64_t http_max_connections;        /* --http-max-connections (default: from RLIMIT_NOFILE) */
    uint64_t max_conns_per_peer;          /* --max-conns-per-peer, both listeners (default 256) */
    uint64_t grpc_idle_timeout_ms;        /* --grpc-idle-timeout-ms (default 120000) */
    uint64_t grpc_stream_idle_timeout_ms; /* --grpc-stream-idle-timeout-ms (default 120000) */
    uint64_t grpc_memory_budget;          /* --grpc-memory-budget bytes (default 256 MiB) */
    uint64_t max_decoded_bytes;           /* --max-decoded-bytes per message (default 64 MiB) */
    uint64_t http_request_timeout_ms; /* --http-request-timeout-ms header+body (default 30000) */
    uint64_t http_body_budget;        /* --http-body-budget bytes, all connections (64 MiB) */
    /* Continuous profiling test settings (docs/continuous-profiling.md): the evaluator's slot
     * length and check interval in ms; 0 = 1000. Policies' periods and durations count slots. */
    uint64_t continuous_slot_ms;
    uint64_t continuous_check_ms;
    /* --db-stall-ms: longest wait of the event loop for a PostgreSQL answer before the
     * connection is dropped (store_stall.h); 0 = no bound */
    uint64_t db_stall_ms;
    char *allowed_origins; /* --allowed-origins: comma-separated http(s)://HOST[:PORT] */
    uint64_t graphql_max_answer_bytes; /* --graphql-max-answer-bytes; 0 = GQL_MAX_ANSWER_BYTES */
    bool show_help;
    bool show_version;
};

/* Fills *cfg from defaults, `env` (NULL-terminated "KEY=VALUE" array, may be NULL) and the
 * flags in argv[1..argc-1] ("--flag value" or "--flag=value"). On error *cfg is cleaned up
 * and `err` (cap CONFIG_ERR_MAX) holds a one-line reason naming the flag or variable.
 * Caller cleans up with config_cleanup. Errors: SKP_EINVAL (bad flag/value), SKP_ENOMEM. */
SKP_MUST_CHECK skp_err config_parse(struct config *cfg, int argc, char *const *argv,
                                    char *const *env, char err[CONFIG_ERR_MAX]);
/* Frees the strings of *cfg. Safe on a zeroed or already cleaned config. */
void config_cleanup(struct config *cfg);
/* Validates a "host:port" listen address (IPv4 literal, "localhost" or "*"/"" host, port
 * 0..65535). Borrows `addr`. */
bool config_addr_valid(const char *addr);
/* Usage text for --help (static). */
const char *config_usage(void);

#endif
