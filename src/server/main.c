/* main.c - skyprofd: process concerns only. Parses the configuration, opens the store, runs
 * the gRPC collector, the HTTP API/UI and the retention timer on ONE libevent loop, and shuts
 * down gracefully on SIGTERM/SIGINT (stop accepting, let in-flight gRPC calls finish and
 * commit, close the store, exit 0), so no acknowledged snapshot is lost. A second signal
 * during the grace period exits at once (still closing the store cleanly). */
#include <errno.h>
#include <inttypes.h>
#include <event2/event.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "server/collector/collector.h"
#include "server/collector/collector_turns.h"
#include "server/config.h"
#include "server/graphql/graphql.h"
#include "server/stats/segment_keep.h"
#include "server/http/http_api.h"
#include "server/stats/metrics.h"
#include "server/stats/retention.h"
#include "server/store/store_stall.h"
#include "server/store/store.h"
#include "wire/grpc_server.h"

#ifndef SKP_WEB_INSTALL_DIR
#define SKP_WEB_INSTALL_DIR "/usr/local/share/skyprof/web"
#endif
/* How long in-flight gRPC calls may take to finish after SIGTERM. */
#define SHUTDOWN_GRACE_MS 10000

extern char **environ;

struct daemon {
    struct event_base *base;
    struct skpx_grpc_server *grpc;
    struct http_api *http;
    struct event *sig_term;
    struct event *sig_int;
    struct event *trim_ev;
    int64_t trim_peak;   /* highest live bytes since the last trim */
    uint64_t trim_conns; /* open connections at the last check */
    bool stopping;
};

/* Memory back to the OS after bursts: glibc keeps freed heap (and the arenas of the worker
 * threads) mapped. When live allocations fell by SKYPROFD_TRIM_BYTES from their peak, or many
 * connections closed (nghttp2's and libevent's buffers are not in our counter), trim. */
#define SKYPROFD_TRIM_PERIOD_MS 2000
#define SKYPROFD_TRIM_BYTES (8 << 20)
#define SKYPROFD_TRIM_CONNS 256

static void on_trim(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct daemon *d = arg;
    int64_t live = skpx_alloc_live_bytes();
    struct skpx_grpc_server_stats gs;
    skpx_grpc_server_get_stats(d->grpc, &gs);
    uint64_t conns = gs.connections_open;
    bool conns_fell = conns + SKYPROFD_TRIM_CONNS <= d->trim_conns;
    if (live > d->trim_peak)
        d->trim_peak = live;
    if (d->trim_peak - live >= SKYPROFD_TRIM_BYTES || conns_fell) {
        malloc_trim(0);
        d->trim_peak = live;
    }
    if (conns_fell || conns > d->trim_conns)
        d->trim_conns = conns;
}

static void on_grpc_drained(void *ud)
{
    struct daemon *d = ud;
    SKPX_INFO("all gRPC calls finished; exiting");
    event_base_loopexit(d->base, NULL);
}

static void on_signal(evutil_socket_t sig, short what, void *ud)
{
    (void)what;
    struct daemon *d = ud;
    if (d->stopping) {
        SKPX_WARN("second signal %d: exiting without waiting for in-flight calls", (int)sig);
        event_base_loopbreak(d->base);
        return;
    }
    d->stopping = true;
    SKPX_INFO("signal %d: shutting down (finishing in-flight calls)", (int)sig);
    http_api_stop_accepting(d->http);
    skpx_grpc_server_shutdown(d->grpc, SHUTDOWN_GRACE_MS, on_grpc_drained, d);
}

/* mkdir -p of the folder holding `file`. */
static int make_parent_dirs(const char *file)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof(buf), "%s", file) >= (int)sizeof(buf))
        return -1;
    char *dir = dirname(buf);
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s", dir);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* --web-root default: the build tree's web/dist next to the executable, else the install
 * location (relative to the executable, then the configured prefix). Returns a new string or
 * NULL (no UI found). */
static char *default_web_root(void)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *dir = dirname(exe);
        /* Build tree (<build>/src/server/skyprofd -> <build>/web/dist), then an installation
         * moved away from its configured prefix (<prefix>/bin -> <prefix>/share). */
        static const char *rel[] = {"/../web/dist", "/../../web/dist", "/../share/skyprof/web"};
        for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
            char cand[PATH_MAX];
            if (snprintf(cand, sizeof(cand), "%s%s", dir, rel[i]) < (int)sizeof(cand) &&
                is_dir(cand)) {
                char real[PATH_MAX];
                return skpx_strdup(realpath(cand, real) ? real : cand);
            }
        }
    }
    return is_dir(SKP_WEB_INSTALL_DIR) ? skpx_strdup(SKP_WEB_INSTALL_DIR) : NULL;
}

static skp_err open_store(const char *path, struct store **st)
{
    struct store_opts o = {0};
    skp_err err = store_open(path, &o, st);
    if (!err)
        return SKP_OK;
    /* A database we may read but not write still serves the UI and the API's reads. */
    if (!store_target_is_file(path))
        return err;
    char buf[PATH_MAX];
    snprintf(buf, sizeof(buf), "%s", path);
    if (access(path, R_OK) == 0 && (access(path, W_OK) != 0 || access(dirname(buf), W_OK) != 0)) {
        o.read_only = true;
        err = store_open(path, &o, st);
        if (!err)
            SKPX_WARN("database %s is read-only: serving reads only, agent data and new tasks "
                      "will be refused",
                      path);
    }
    return err;
}

/* File descriptors kept out of the listeners' connection caps: SQLite (database, WAL, shm and
 * the workers' connections), the log, event loop internals, files being served. */
#define SKYPROFD_FD_RESERVE 64

/* Raises the soft fd limit to the hard one (this is our own process) and returns the fds the
 * two listeners may share. */
static uint64_t fd_budget(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 1024 - SKYPROFD_FD_RESERVE;
    if (rl.rlim_cur != RLIM_INFINITY &&
        (rl.rlim_max == RLIM_INFINITY || rl.rlim_cur < rl.rlim_max)) {
        struct rlimit want = rl;
        want.rlim_cur = rl.rlim_max == RLIM_INFINITY ? (rlim_t)1 << 20 : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &want) == 0)
            rl = want;
    }
    uint64_t n = rl.rlim_cur == RLIM_INFINITY ? (uint64_t)1 << 20 : (uint64_t)rl.rlim_cur;
    return n > 2 * SKYPROFD_FD_RESERVE ? n - SKYPROFD_FD_RESERVE : SKYPROFD_FD_RESERVE;
}

/* A configured connection cap, or `dflt`, never above `room`. */
static size_t conn_cap(const char *flag, uint64_t configured, uint64_t dflt, uint64_t room)
{
    uint64_t v = configured ? configured : dflt;
    if (v > room) {
        SKPX_WARN("%s %" PRIu64 " is above what the fd limit allows; using %" PRIu64, flag, v,
                  room);
        v = room;
    }
    return v ? (size_t)v : 1;
}

static int ms_opt(uint64_t v)
{
    return v > INT_MAX ? INT_MAX : (int)v;
}

/* "host:port" with the port replaced by the bound one. */
static void print_listening(const char *what, const char *addr, uint16_t port)
{
    const char *colon = strrchr(addr, ':');
    int hl = (int)(colon - addr);
    printf("skyprofd: %s listening on %.*s:%u\n", what, hl, addr, (unsigned)port);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    /* Once, before any JSON exists: jansson allocates through our counting wrappers, so its
     * memory shows in the live-byte figures (bodies are serialised into our own buffers either
     * way, see skp_json_text). */
    json_set_alloc_funcs(skpx_malloc, skpx_free);
    struct config cfg;
    char cerr[CONFIG_ERR_MAX];
    if (config_parse(&cfg, argc, argv, environ, cerr)) {
        fprintf(stderr, "skyprofd: %s\n", cerr);
        return 2;
    }
    if (cfg.show_help) {
        fputs(config_usage(), stdout);
        config_cleanup(&cfg);
        return 0;
    }
    if (cfg.show_version) {
        printf("skyprofd %s\n", SKP_VERSION);
        config_cleanup(&cfg);
        return 0;
    }
    skpx_log_set_sink(skpx_log_sink_fd, (void *)(intptr_t)STDERR_FILENO,
                      (enum skpx_log_level)cfg.log_level);
    /* A client closing its socket must not kill the server (libevent writes with write()). */
    signal(SIGPIPE, SIG_IGN);

    int rc = 1;
    struct daemon d = {0};
    struct store *st = NULL;
    struct retention *ret = NULL;
    char *web_root = NULL;
    struct metrics m = {.start_ms = skpx_now_ms()};
    struct collector col = {
        .metrics = &m,
        .auth_token = cfg.auth_token,
        .pprof_max_bytes = cfg.pprof_max_bytes,
        .jfr_max_bytes = cfg.jfr_max_bytes,
        .max_segment_spans =
            cfg.max_segment_spans ? cfg.max_segment_spans : CONFIG_DEFAULT_MAX_SEGMENT_SPANS,
        .max_decoded_bytes =
            cfg.max_decoded_bytes ? cfg.max_decoded_bytes : CONFIG_DEFAULT_MAX_DECODED_BYTES,
        .max_policies = cfg.max_policies ? cfg.max_policies : CONFIG_DEFAULT_MAX_POLICIES,
        .max_endpoints_per_service = (size_t)cfg.max_endpoints,
        .shared_stats = !store_target_is_file(cfg.db_path)};

    char db_shown[512]; /* a URL's password stays out of the log */
    store_target_shown(cfg.db_path, db_shown, sizeof(db_shown));
    if (store_target_is_file(cfg.db_path) && make_parent_dirs(cfg.db_path) != 0) {
        SKPX_ERROR("cannot create the folder of %s: %s", cfg.db_path, strerror(errno));
        goto out;
    }
    skp_err err = open_store(cfg.db_path, &st);
    if (err) {
        SKPX_ERROR("cannot open database %s: %s", db_shown, skp_strerror(err));
        goto out;
    }
    col.store = st;
    /* The loop waits for PostgreSQL at most this long per answer (set after the start's
     * migration, which may take long; store_stall.h). */
    store_set_stall_ms(st, (int64_t)cfg.db_stall_ms);
    /* A database damaged mid-file opens and migrates fine, then fails ingest after ingest:
     * check it once at start and let /healthz say so. */
    char db_problem[512];
    int64_t check_t0 = skpx_mono_ms();
    if (store_check(st, db_problem, sizeof(db_problem)) != SKP_OK)
        SKPX_ERROR("database %s failed its integrity check (%s): %s. Ingest and reads may "
                   "fail; /healthz reports it. %s",
                   db_shown,
                   store_target_is_file(cfg.db_path) ? "PRAGMA quick_check" : "schema version",
                   db_problem,
                   store_target_is_file(cfg.db_path)
                       ? "Restore a backup, or move the file away to start empty."
                       : "Is another skyprofd version migrating it?");
    else
        SKPX_INFO("database %s: integrity check ok (%" PRId64 " ms)", db_shown,
                  skpx_mono_ms() - check_t0);
    web_root = cfg.web_root ? skpx_strdup(cfg.web_root) : default_web_root();
    if (cfg.web_root && !is_dir(cfg.web_root))
        SKPX_WARN("web root %s is not a folder: the UI will not be served", cfg.web_root);
    else if (!web_root)
        SKPX_WARN("web UI assets not found (build the web target or pass --web-root)");

    d.base = event_base_new();
    if (!d.base) {
        SKPX_ERROR("event_base_new failed");
        goto out;
    }
    struct keep_policy kp = {0};
    err = keep_policy_parse(cfg.keep_segments ? cfg.keep_segments : "profiled", &kp);
    kp.grace_ms = (int64_t)cfg.keep_grace_s * 1000;
    if (!err)
        err = collector_segments_start(&col, d.base, &kp);
    uint64_t fds = fd_budget();
    struct skpx_grpc_server_opts go = {
        .max_connections =
            conn_cap("--grpc-max-connections", cfg.grpc_max_connections, fds / 4 * 3, fds),
        .max_conns_per_peer = (size_t)cfg.max_conns_per_peer,
        .idle_timeout_ms = ms_opt(cfg.grpc_idle_timeout_ms),
        .stream_idle_timeout_ms = ms_opt(cfg.grpc_stream_idle_timeout_ms),
        .memory_budget = (size_t)cfg.grpc_memory_budget,
        .max_decoded_bytes = (size_t)cfg.max_decoded_bytes,
    };
    if (!err) {
        int64_t slot = cfg.continuous_slot_ms > 0 && cfg.continuous_slot_ms <= 3600000
                           ? (int64_t)cfg.continuous_slot_ms
                           : 1000;
        int64_t check = cfg.continuous_check_ms > 0 && cfg.continuous_check_ms <= 3600000
                            ? (int64_t)cfg.continuous_check_ms
                            : slot;
        err = collector_continuous_start(&col, d.base, slot, check);
    }
    if (!err)
        err = collector_goprofile_start(&col, d.base);
    if (!err)
        err = collector_turns_start(&col, d.base);
    if (!err)
        err = skpx_grpc_server_new(d.base, &go, &d.grpc);
    if (!err)
        err = collector_register(&col, d.grpc);
    if (err) {
        SKPX_ERROR("gRPC server setup failed: %s", skp_strerror(err));
        goto out;
    }
    uint16_t grpc_port = 0, http_port = 0;
    err = skpx_grpc_server_listen(d.grpc, cfg.grpc_addr, &grpc_port);
    if (err) {
        SKPX_ERROR("cannot listen for gRPC on %s: %s", cfg.grpc_addr, skp_strerror(err));
        goto out;
    }
    struct http_api_opts ho = {
        .store = st,
        .metrics = &m,
        .grpc = d.grpc,
        .api_token = cfg.api_token,
        .web_root = web_root,
        .max_analyze_snapshots = cfg.max_analyze_snapshots,
        .db_path = cfg.db_path,
        .endpoint_stats = col.stats,
        .max_connections = conn_cap("--http-max-connections", cfg.http_max_connections, fds / 4,
                                    fds - go.max_connections),
        .max_conns_per_peer = (size_t)cfg.max_conns_per_peer,
        .request_timeout_ms = ms_opt(cfg.http_request_timeout_ms),
        .body_budget = (size_t)cfg.http_body_budget,
        .cont_eval = collector_continuous_eval(&col),
        .http_addr = cfg.http_addr,
        .allowed_origins = cfg.allowed_origins,
        .db_problem = db_problem,
    };
    graphql_set_max_answer_bytes(cfg.graphql_max_answer_bytes);
    graphql_set_retention_days(cfg.retention_days);
    err = http_api_new(d.base, &ho, &d.http);
    if (!err)
        err = http_api_listen(d.http, cfg.http_addr, &http_port);
    if (err) {
        SKPX_ERROR("cannot listen for HTTP on %s: %s", cfg.http_addr, skp_strerror(err));
        goto out;
    }
    err = retention_start(d.base, st, &m, cfg.retention_days, &ret);
    if (err)
        goto out;
    d.sig_term = evsignal_new(d.base, SIGTERM, on_signal, &d);
    d.sig_int = evsignal_new(d.base, SIGINT, on_signal, &d);
    d.trim_ev = event_new(d.base, -1, EV_PERSIST, on_trim, &d);
    struct timeval trim_tv = {SKYPROFD_TRIM_PERIOD_MS / 1000, 0};
    if (!d.trim_ev || event_add(d.trim_ev, &trim_tv) != 0) {
        SKPX_ERROR("cannot start the memory trim timer");
        goto out;
    }
    if (!d.sig_term || !d.sig_int || evsignal_add(d.sig_term, NULL) ||
        evsignal_add(d.sig_int, NULL)) {
        SKPX_ERROR("cannot install signal events");
        goto out;
    }
    print_listening("grpc", cfg.grpc_addr, grpc_port);
    print_listening("http", cfg.http_addr, http_port);
    SKPX_INFO("skyprofd %s: db=%s web-root=%s retention=%d day(s) auth=%s api-token=%s",
              SKP_VERSION, db_shown, web_root ? web_root : "(none)", cfg.retention_days,
              cfg.auth_token ? "on" : "off", cfg.api_token ? "on" : "off");

    if (event_base_dispatch(d.base) < 0) {
        SKPX_ERROR("event loop failed");
        goto out;
    }
    rc = 0;
out:
    retention_stop(ret);
    http_api_free(d.http);
    skpx_grpc_server_free(d.grpc);
    collector_goprofile_stop(&col);
    collector_turns_stop(&col);
    collector_segments_stop(&col);
    collector_continuous_stop(&col);
    if (d.sig_term)
        event_free(d.sig_term);
    if (d.sig_int)
        event_free(d.sig_int);
    if (d.trim_ev)
        event_free(d.trim_ev);
    store_close(st);
    if (d.base)
        event_base_free(d.base);
    skpx_free(web_root);
    config_cleanup(&cfg);
    if (rc == 0)
        SKPX_INFO("skyprofd stopped");
    return rc;
}
