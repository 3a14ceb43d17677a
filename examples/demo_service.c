/* demo_service.c - a small HTTP/1.1 service in C profiled by libskyprof's native stack source.
 *
 * It is the seed example of SkyWalking's Python profiling report ported to C: POST / calls
 * method3() -> method2() -> method1(), each spending 20 ms, then does 500 ms of other work.
 *   POST /        sleeping variant (nanosleep), or CPU-burning with --mode cpu
 *   POST /sleep   always sleeping        POST /cpu   always CPU-burning
 *   GET  /health  "ok"
 * Every request opens an entry span named after the path without its query string ("/", "/cpu"),
 * the naming SkyWalking's Python agent uses for the same example, so a profile task for endpoint
 * "/" matches POST /. The incoming sw8 header, if any, continues the caller's trace.
 *
 * Server model: one accept loop, one thread per connection (at most DEMO_MAX_CONNS, the others get
 * 503), HTTP/1.1 keep-alive with Content-Length bodies (chunked request bodies are refused with
 * 411). Configuration: SW_AGENT_* environment (service name default "demo-c"), command line:
 *   demo_service [--host 127.0.0.1] [--port 9090|0] [--mode sleep|cpu] [--step-ms 20]
 *                [--method3-ms N (default: step)] [--other-ms 500] [--no-agent]
 * Prints "demo_service: listening on HOST:PORT" once it accepts connections. SIGINT/SIGTERM stop
 * it cleanly (connections closed, agent flushed). */
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "skyprof/skyprof.h"
#include "skyprof/skyprof_native.h"

#define DEMO_MAX_CONNS 64
#define DEMO_HEADER_MAX 16384          /* request line + headers */
#define DEMO_BODY_MAX (1024 * 1024)    /* request bodies are read and discarded */
#define DEMO_PATH_MAX 1024
#define DEMO_STOP_WAIT_MS 3000

/* Keep the profiled functions as real frames with their own names (no inlining, no clones). */
#if defined(__clang__)
#define DEMO_FRAME __attribute__((noinline))
#else
#define DEMO_FRAME __attribute__((noinline, noipa))
#endif

enum work_mode { WORK_SLEEP = 0, WORK_CPU = 1 };

static struct {
    int step_ms;
    int other_ms;
    int method3_ms;            /* method3's own time; -1 = step_ms (compare's slow run) */
    enum work_mode default_mode;
    int listen_fd;
    _Atomic bool stopping;
    pthread_mutex_t mu; /* guards conns[] and n_conns */
    pthread_cond_t cv;
    int conns[DEMO_MAX_CONNS];
    int n_conns;
} g = {.step_ms = 20, .other_ms = 500, .method3_ms = -1, .listen_fd = -1, .mu = PTHREAD_MUTEX_INITIALIZER,
       .cv = PTHREAD_COND_INITIALIZER};

/* ---- the work ------------------------------------------------------------------------------ */
static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Sleeps until a deadline: the profiler's signal interrupts nanosleep (EINTR), so sleep to an
 * absolute time instead of for a duration. */
DEMO_FRAME static void sleep_ms(int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ns = (int64_t)ts.tv_nsec + (int64_t)ms * 1000000;
    ts.tv_sec += ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

DEMO_FRAME static uint64_t burn_ms(int ms)
{
    volatile uint64_t x = 0;
    int64_t end = mono_ns() + (int64_t)ms * 1000000;
    while (mono_ns() < end) {
        for (int i = 0; i < 1000; i++)
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    }
    return x;
}

DEMO_FRAME static void spend(enum work_mode mode, int ms)
{
    if (mode == WORK_CPU)
        (void)burn_ms(ms);
    else
        sleep_ms(ms);
}

DEMO_FRAME static int method1(enum work_mode mode)
{
    spend(mode, g.step_ms);
    return 1;
}

DEMO_FRAME static int method2(enum work_mode mode)
{
    spend(mode, g.step_ms);
    return method1(mode) + 1;
}

DEMO_FRAME static int method3(enum work_mode mode)
{
    spend(mode, g.method3_ms >= 0 ? g.method3_ms : g.step_ms);
    return method2(mode) + 1;
}

DEMO_FRAME static int handle_seed_request(enum work_mode mode)
{
    int r = method3(mode);
    spend(mode, g.other_ms);
    return r;
}

/* ---- HTTP ---------------------------------------------------------------------------------- */
struct request {
    char method[16];
    char path[DEMO_PATH_MAX]; /* without the query string */
    char sw8[SKYPROF_SW8_MAX];
    long content_length;
    bool chunked;
    bool keep_alive;
};

static bool send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static bool respond(int fd, int status, const char *reason, const char *ctype, const char *body,
                    bool keep_alive)
{
    char head[512];
    size_t blen = strlen(body);
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: %s\r\n\r\n",
                     status, reason, ctype, blen, keep_alive ? "keep-alive" : "close");
    return send_all(fd, head, (size_t)n) && send_all(fd, body, blen);
}

static bool header_is(const char *line, size_t len, const char *name, const char **value)
{
    size_t nl = strlen(name);
    if (len <= nl || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
        return false;
    const char *v = line + nl + 1;
    while (*v == ' ' || *v == '\t')
        v++;
    *value = v;
    return true;
}

/* Parses the head in buf[0..head_len) (NUL-terminated by the caller). */
static bool parse_head(char *buf, struct request *rq)
{
    char target[DEMO_PATH_MAX];
    char version[16];
    memset(rq, 0, sizeof(*rq));
    char *eol = strstr(buf, "\r\n");
    if (!eol)
        return false;
    *eol = '\0';
    if (sscanf(buf, "%15s %1023s %15s", rq->method, target, version) != 3)
        return false;
    if (strncmp(version, "HTTP/1.", 7) != 0)
        return false;
    rq->keep_alive = strcmp(version, "HTTP/1.1") == 0;
    size_t plen = strcspn(target, "?#");
    memcpy(rq->path, target, plen);
    rq->path[plen] = '\0';
    for (char *line = eol + 2; *line;) {
        char *end = strstr(line, "\r\n");
        if (!end)
            break;
        *end = '\0';
        size_t len = (size_t)(end - line);
        const char *v = NULL;
        if (header_is(line, len, "Content-Length", &v)) {
            char *stop = NULL;
            long cl = strtol(v, &stop, 10);
            if (stop == v || cl < 0)
                return false;
            rq->content_length = cl;
        } else if (header_is(line, len, "Transfer-Encoding", &v)) {
            rq->chunked = strcasestr(v, "chunked") != NULL;
        } else if (header_is(line, len, "Connection", &v)) {
            if (strcasestr(v, "close"))
                rq->keep_alive = false;
            else if (strcasestr(v, "keep-alive"))
                rq->keep_alive = true;
        } else if (header_is(line, len, "sw8", &v)) {
            snprintf(rq->sw8, sizeof(rq->sw8), "%s", v);
        }
        line = end + 2;
    }
    return true;
}

static bool route(int fd, const struct request *rq)
{
    static const char seed_body[] = "{\"song\": \"Despacito\", \"artist\": \"Luis Fonsi\"}";
    bool post = strcmp(rq->method, "POST") == 0;
    bool get = strcmp(rq->method, "GET") == 0;

    if (get && strcmp(rq->path, "/health") == 0)
        return respond(fd, 200, "OK", "text/plain", "ok", rq->keep_alive);
    if (post && (strcmp(rq->path, "/") == 0 || strcmp(rq->path, "/sleep") == 0 ||
                 strcmp(rq->path, "/cpu") == 0)) {
        enum work_mode mode = g.default_mode;
        if (strcmp(rq->path, "/cpu") == 0)
            mode = WORK_CPU;
        else if (strcmp(rq->path, "/sleep") == 0)
            mode = WORK_SLEEP;
        skyprof_span *span = skyprof_entry_begin(rq->path, rq->sw8[0] ? rq->sw8 : NULL);
        skyprof_span_set_layer(span, SKYPROF_LAYER_HTTP);
        skyprof_span_add_tag(span, "http.method", rq->method);
        skyprof_span_add_tag(span, "url", rq->path);
        (void)handle_seed_request(mode);
        skyprof_span_add_tag(span, "http.status_code", "200");
        skyprof_entry_end(span);
        return respond(fd, 200, "OK", "application/json", seed_body, rq->keep_alive);
    }
    return respond(fd, 404, "Not Found", "text/plain", "not found", rq->keep_alive);
}

/* Reads and discards n body bytes, first from the bytes already buffered. */
static bool discard_body(int fd, char *buf, size_t *have, size_t n)
{
    size_t from_buf = *have < n ? *have : n;
    memmove(buf, buf + from_buf, *have - from_buf);
    *have -= from_buf;
    n -= from_buf;
    char sink[4096];
    while (n) {
        ssize_t r = recv(fd, sink, n < sizeof(sink) ? n : sizeof(sink), 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        n -= (size_t)r;
    }
    return true;
}

static void serve_connection(int fd)
{
    char buf[DEMO_HEADER_MAX + 1];
    size_t have = 0;

    for (;;) {
        char *end = NULL;
        for (;;) {
            buf[have] = '\0';
            end = strstr(buf, "\r\n\r\n");
            if (end)
                break;
            if (have >= DEMO_HEADER_MAX) {
                (void)respond(fd, 431, "Request Header Fields Too Large", "text/plain", "too large",
                              false);
                return;
            }
            ssize_t r = recv(fd, buf + have, DEMO_HEADER_MAX - have, 0);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                return;
            have += (size_t)r;
        }
        size_t head_len = (size_t)(end - buf) + 4;
        struct request rq;
        end[2] = '\0'; /* keep the last header's CRLF for the line parser */
        bool ok = parse_head(buf, &rq);
        memmove(buf, buf + head_len, have - head_len);
        have -= head_len;
        if (!ok) {
            (void)respond(fd, 400, "Bad Request", "text/plain", "bad request", false);
            return;
        }
        if (rq.chunked) {
            (void)respond(fd, 411, "Length Required", "text/plain", "length required", false);
            return;
        }
        if (rq.content_length > DEMO_BODY_MAX) {
            (void)respond(fd, 413, "Payload Too Large", "text/plain", "too large", false);
            return;
        }
        if (!discard_body(fd, buf, &have, (size_t)rq.content_length))
            return;
        if (!route(fd, &rq) || !rq.keep_alive || atomic_load(&g.stopping))
            return;
    }
}

static void *connection_main(void *arg)
{
    int fd = (int)(intptr_t)arg;
    serve_connection(fd);
    pthread_mutex_lock(&g.mu);
    for (int i = 0; i < g.n_conns; i++) {
        if (g.conns[i] == fd) {
            g.conns[i] = g.conns[--g.n_conns];
            break;
        }
    }
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    close(fd);
    return NULL;
}

static void *signal_main(void *arg)
{
    sigset_t *set = arg;
    int sig = 0;
    sigwait(set, &sig);
    atomic_store(&g.stopping, true);
    shutdown(g.listen_fd, SHUT_RDWR); /* wakes accept() */
    return NULL;
}

static int listen_on(const char *host, int port, int *bound_port)
{
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        fprintf(stderr, "demo_service: bad --host %s (IPv4 address expected)\n", host);
        return -1;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    socklen_t len = sizeof(sa);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 128) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        perror("demo_service: bind/listen");
        close(fd);
        return -1;
    }
    *bound_port = ntohs(sa.sin_port);
    return fd;
}

static bool parse_int(const char *s, int lo, int hi, int *out)
{
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (!s[0] || !end || *end || v < lo || v > hi)
        return false;
    *out = (int)v;
    return true;
}

static void usage(void)
{
    fprintf(stderr, "usage: demo_service [--host ADDR] [--port N] [--mode sleep|cpu] "
                    "[--step-ms N] [--method3-ms N] [--other-ms N] [--no-agent]\n");
}

static void log_to_stderr(void *ud, enum skyprof_log_level level, const char *line)
{
    static const char *names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
    (void)ud;
    fprintf(stderr, "skyprof %s %s\n", names[level <= SKYPROF_LOG_DEBUG ? level : 0], line);
}

int main(int argc, char **argv)
{
    const char *host = "127.0.0.1";
    int port = 9090;
    bool use_agent = true;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--no-agent") == 0) {
            use_agent = false;
            continue;
        }
        if (!v) {
            usage();
            return 2;
        }
        i++;
        if (strcmp(a, "--host") == 0) {
            host = v;
        } else if (strcmp(a, "--port") == 0) {
            if (!parse_int(v, 0, 65535, &port))
                return usage(), 2;
        } else if (strcmp(a, "--mode") == 0) {
            if (strcmp(v, "sleep") == 0)
                g.default_mode = WORK_SLEEP;
            else if (strcmp(v, "cpu") == 0)
                g.default_mode = WORK_CPU;
            else
                return usage(), 2;
        } else if (strcmp(a, "--step-ms") == 0) {
            if (!parse_int(v, 0, 60000, &g.step_ms))
                return usage(), 2;
        } else if (strcmp(a, "--method3-ms") == 0) {
            if (!parse_int(v, 0, 60000, &g.method3_ms))
                return usage(), 2;
        } else if (strcmp(a, "--other-ms") == 0) {
            if (!parse_int(v, 0, 600000, &g.other_ms))
                return usage(), 2;
        } else {
            usage();
            return 2;
        }
    }

    /* SIGINT/SIGTERM are handled by one thread with sigwait; every other thread (connection
     * threads, and the agent's threads, which block all signals anyway) inherits the mask. */
    static sigset_t stop_set;
    sigemptyset(&stop_set);
    sigaddset(&stop_set, SIGINT);
    sigaddset(&stop_set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_set, NULL);

    skyprof_agent *agent = NULL;
    if (use_agent) {
        struct skyprof_config cfg;
        skyprof_config_init_defaults(&cfg);
        snprintf(cfg.service, sizeof(cfg.service), "%s", "demo-c");
        if (skyprof_config_from_env(&cfg) != SKP_OK)
            fprintf(stderr, "demo_service: some SW_AGENT_* variables were malformed (ignored)\n");
        cfg.log_sink = log_to_stderr;
        skp_err err = skyprof_agent_start(&cfg, skyprof_native_stack_source(), &agent);
        if (err)
            fprintf(stderr, "demo_service: profiling agent not started: %s\n", skp_strerror(err));
        else
            fprintf(stderr, "demo_service: agent service=%s instance=%s backend=%s\n", cfg.service,
                    skyprof_agent_instance(agent), cfg.backend);
    }

    int bound = 0;
    g.listen_fd = listen_on(host, port, &bound);
    if (g.listen_fd < 0) {
        skyprof_agent_stop(agent, 0);
        return 1;
    }
    pthread_t sig_thread;
    pthread_create(&sig_thread, NULL, signal_main, &stop_set);
    printf("demo_service: listening on %s:%d\n", host, bound);
    fflush(stdout);

    pthread_attr_t detached;
    pthread_attr_init(&detached);
    pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED);
    while (!atomic_load(&g.stopping)) {
        int fd = accept4(g.listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE)
                continue;
            break;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        pthread_mutex_lock(&g.mu);
        bool room = g.n_conns < DEMO_MAX_CONNS;
        if (room)
            g.conns[g.n_conns++] = fd;
        pthread_mutex_unlock(&g.mu);
        pthread_t th;
        if (!room || pthread_create(&th, &detached, connection_main, (void *)(intptr_t)fd) != 0) {
            if (room) {
                pthread_mutex_lock(&g.mu);
                for (int i = 0; i < g.n_conns; i++) {
                    if (g.conns[i] == fd) {
                        g.conns[i] = g.conns[--g.n_conns];
                        break;
                    }
                }
                pthread_mutex_unlock(&g.mu);
            }
            (void)respond(fd, 503, "Service Unavailable", "text/plain", "busy", false);
            close(fd);
        }
    }
    atomic_store(&g.stopping, true);
    pthread_attr_destroy(&detached);

    /* Close idle keep-alive connections and wait (bounded) for requests in progress. */
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += DEMO_STOP_WAIT_MS / 1000;
    pthread_mutex_lock(&g.mu);
    for (int i = 0; i < g.n_conns; i++)
        shutdown(g.conns[i], SHUT_RD);
    while (g.n_conns > 0) {
        if (pthread_cond_timedwait(&g.cv, &g.mu, &deadline) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&g.mu);
    skyprof_agent_stop(agent, 2000);
    close(g.listen_fd);
    pthread_kill(sig_thread, SIGTERM); /* no-op if it already returned; else ends its sigwait */
    pthread_join(sig_thread, NULL);
    printf("demo_service: stopped\n");
    return 0;
}
