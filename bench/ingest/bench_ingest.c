/* bench_ingest.c - end-to-end ingest throughput of skyprofd: gRPC client streams ->
 * collectSnapshot -> batched SQLite commits -> acknowledged. The daemon is the real skyprofd
 * binary in its own process (port 0, temporary database); the clients are threads of this
 * process using the agent's C gRPC client (src/wire/grpc_client.c). Snapshots carry 20-frame
 * stacks drawn (skewed, as hot paths dominate real profiles) from a pool of distinct stacks that
 * share prefixes like real call trees. Reports snapshots/s (acknowledged = committed), idle RSS
 * and peak RSS of skyprofd under ingest, next to the targets, and checks through /metrics
 * that every snapshot was stored.
 *
 * Usage: bench_ingest [--snapshots N] [--clients C] [--stream-size S] [--stacks D]
 *                     [--skyprofd PATH] [--keep-db] [--analyze-while]
 *                     [--db URL] [--daemons K] [--analyze]
 * --analyze-while keeps requesting the whole task's analysis over HTTP during the ingest.
 * --db URL runs skyprofd on that database (a postgresql:// URL: bench/server/bench_pg_ingest.py)
 * instead of a temporary SQLite file; --daemons K starts K skyprofd on it (several collectors,
 * one database: only with --db) and spreads the clients over them; --analyze times the whole
 * task's analysis over HTTP after the ingest (3 runs, on the last daemon).
 * The last line, "RESULT key=value ...", is for scripts.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include "common/Command.pb-c.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "profile/Profile.pb-c.h"
#include "wire/grpc_client.h"

#define FRAMES 20
#define SEG_SNAPSHOTS 500       /* snapshots per segment (a slow request sampled 500 times) */
#define VOCAB 600               /* distinct frame strings */
#define MAX_CLIENTS 16
#define MAX_DAEMONS 4
#define PATH_SNAP "/skywalking.v3.ProfileTask/collectSnapshot"

static char *vocab[VOCAB];
static char ***stacks;          /* stacks[d][FRAMES] */
static int n_stacks = 1000;
static char task_id[256] = "bench-task";
static int64_t t_base;

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static void build_pool(void)
{
    static const char *pkgs[] = {"com.shop.order", "com.shop.payment", "com.shop.catalog",
                                 "org.springframework.web", "org.apache.catalina", "io.netty",
                                 "com.zaxxer.hikari", "org.hibernate", "java.util.concurrent",
                                 "com.fasterxml.jackson"};
    static const char *cls[] = {"Controller", "Service", "Repository", "Handler", "Filter",
                                "Invoker", "Pool", "Session", "Executor", "Mapper", "Client",
                                "Serializer"};
    static const char *verbs[] = {"handle", "process", "invoke", "find", "save", "doFilter",
                                  "execute", "read", "write", "serialize", "lookup", "apply"};
    for (int i = 0; i < VOCAB; i++) {
        char buf[160];
        snprintf(buf, sizeof(buf), "%s.%s%d.%s%d(%s%d.java:%d)", pkgs[i % 10], cls[(i / 10) % 12],
                 i % 7, verbs[(i / 3) % 12], i % 5, cls[(i / 10) % 12], i % 7, 40 + (i * 37) % 900);
        vocab[i] = skpx_xstrdup(buf);
    }
    /* Shallow frames vary little (a few entry points), deep ones a lot: stacks share prefixes
     * the way real call trees do. */
    stacks = skpx_xcalloc((size_t)n_stacks, sizeof(*stacks));
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (int d = 0; d < n_stacks; d++) {
        stacks[d] = skpx_xcalloc(FRAMES, sizeof(char *));
        for (int j = 0; j < FRAMES; j++) {
            int spread = 2 + j * j * 2;
            if (spread > VOCAB)
                spread = VOCAB;
            stacks[d][j] = vocab[(j * 29 + (int)(xorshift(&rng) % (uint64_t)spread)) % VOCAB];
        }
    }
}

/* ---------------------------------------------------------------- skyprofd process */

struct daemon {
    pid_t pid;
    int grpc_port;
    int http_port;
    char dir[64];
};

static int start_daemon(const char *exe, const char *db_url, struct daemon *d)
{
    snprintf(d->dir, sizeof(d->dir), "/tmp/skp-bench-ingest-XXXXXX");
    if (!mkdtemp(d->dir))
        return -1;
    char path[128];
    snprintf(path, sizeof(path), "%s/skyprof.db", d->dir);
    const char *db = db_url ? db_url : path;
    int p[2];
    if (pipe(p) != 0)
        return -1;
    d->pid = fork();
    if (d->pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        execl(exe, exe, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--db", db,
              "--log-level", "warn", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    char buf[512];
    size_t have = 0;
    int64_t deadline = skpx_mono_ms() + 30000;
    while ((!d->grpc_port || !d->http_port) && skpx_mono_ms() < deadline) {
        struct pollfd pf = {.fd = p[0], .events = POLLIN};
        if (poll(&pf, 1, 1000) <= 0)
            continue;
        ssize_t n = read(p[0], buf + have, sizeof(buf) - 1 - have);
        if (n <= 0)
            break;
        have += (size_t)n;
        buf[have] = '\0';
        char *g = strstr(buf, "grpc listening on 127.0.0.1:");
        char *h = strstr(buf, "http listening on 127.0.0.1:");
        if (g)
            d->grpc_port = (int)strtol(g + strlen("grpc listening on 127.0.0.1:"), NULL, 10);
        if (h)
            d->http_port = (int)strtol(h + strlen("http listening on 127.0.0.1:"), NULL, 10);
    }
    close(p[0]);
    return d->grpc_port && d->http_port ? 0 : -1;
}

static uint64_t rss_of(pid_t pid)
{
    char path[64], buf[128];
    snprintf(path, sizeof(path), "/proc/%d/statm", (int)pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    unsigned long long size, res;
    if (sscanf(buf, "%llu %llu", &size, &res) != 2)
        return 0;
    return res * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* One HTTP/1.0 request; returns the body (static buffer) or NULL. */
static char *http(int port, const char *method, const char *path, const char *body)
{
    static char resp[1 << 20];
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return NULL;
    }
    char req[1024];
    int n = snprintf(req, sizeof(req),
                     "%s %s HTTP/1.0\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     method, path, body ? strlen(body) : 0, body ? body : "");
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return NULL;
    }
    size_t have = 0;
    ssize_t r;
    while (have < sizeof(resp) - 1 && (r = read(fd, resp + have, sizeof(resp) - 1 - have)) > 0)
        have += (size_t)r;
    char sink[65536]; /* a body larger than resp: read to its end (timings include it) */
    while (have == sizeof(resp) - 1 && read(fd, sink, sizeof(sink)) > 0)
        ;
    close(fd);
    resp[have] = '\0';
    char *b = strstr(resp, "\r\n\r\n");
    return b ? b + 4 : NULL;
}

/* ---------------------------------------------------------------- clients */

struct client {
    int idx;
    int port;
    uint64_t quota;            /* snapshots to send */
    uint64_t stream_size;
    uint64_t sent_acked;
    uint64_t streams;
    int failed;
    char error[320];
};

struct stream_src {
    struct client *c;
    uint64_t i, n;
    uint64_t rng;
    Skywalking__V3__ThreadSnapshot snap;
    Skywalking__V3__ThreadStack stack;
    char seg[96];
};

static int next_snapshot(void *ud, const ProtobufCMessage **msg)
{
    struct stream_src *s = ud;
    if (s->i == s->n)
        return 0;
    uint64_t seq = s->i % SEG_SNAPSHOTS;
    if (seq == 0)
        snprintf(s->seg, sizeof(s->seg), "bench-seg-%d-%" PRIu64 "-%" PRIu64, s->c->idx,
                 s->c->streams, s->i / SEG_SNAPSHOTS);
    /* Skewed choice: squaring a uniform draw favours low indexes (hot stacks). */
    uint64_t u = xorshift(&s->rng) % 10000;
    int d = (int)((u * u / 10000) * (uint64_t)n_stacks / 10000);
    s->stack.codesignatures = stacks[d];
    s->stack.n_codesignatures = FRAMES;
    s->snap.tracesegmentid = s->seg;
    s->snap.sequence = (int32_t)seq;
    s->snap.time = t_base + (int64_t)seq * 10;
    *msg = &s->snap.base;
    s->i++;
    return 1;
}

static void *client_main(void *ud)
{
    struct client *c = ud;
    char target[64];
    snprintf(target, sizeof(target), "127.0.0.1:%d", c->port);
    struct skpx_grpc_client_opts o = {.target = target};
    struct skpx_grpc_client *cl = NULL;
    if (skpx_grpc_client_new(&o, &cl)) {
        c->failed = 1;
        return NULL;
    }
    struct stream_src s = {.c = c, .rng = 0x1234567ull + (uint64_t)c->idx * 7919};
    skywalking__v3__thread_snapshot__init(&s.snap);
    skywalking__v3__thread_stack__init(&s.stack);
    s.snap.taskid = task_id;
    s.snap.stack = &s.stack;
    while (c->sent_acked < c->quota) {
        s.i = 0;
        s.n = c->quota - c->sent_acked < c->stream_size ? c->quota - c->sent_acked : c->stream_size;
        ProtobufCMessage *resp = NULL;
        struct skpx_grpc_result res;
        skp_err err = skpx_grpc_client_stream(cl, PATH_SNAP, next_snapshot, &s,
                                              &skywalking__v3__commands__descriptor, &resp, 120000,
                                              &res);
        if (err) {
            c->failed = 1;
            snprintf(c->error, sizeof(c->error), "%s (status %d: %.200s)", skp_strerror(err),
                     res.status, res.message);
            break;
        }
        protobuf_c_message_free_unpacked(resp, NULL);
        c->sent_acked += s.n;
        c->streams++;
    }
    skpx_grpc_client_free(cl);
    return NULL;
}

/* --analyze-while: a thread that keeps analysing the whole task over HTTP during the ingest
 * (analyses run on skyprofd's worker thread, so ingestion should not wait for them). */
static volatile int analysing = 1;
static uint64_t n_analyses;
static int http_port_g;

static char *http(int port, const char *method, const char *path, const char *body);

static void *analyse_loop(void *ud)
{
    (void)ud;
    char path[400];
    snprintf(path, sizeof(path), "/api/v1/profile/tasks/%s/analyze", task_id);
    while (analysing) {
        if (http(http_port_g, "GET", path, NULL))
            n_analyses++;
    }
    return NULL;
}

static volatile int sampling = 1;
static uint64_t peak_rss;

static void *rss_sampler(void *ud)
{
    pid_t pid = *(pid_t *)ud;
    while (sampling) {
        uint64_t r = rss_of(pid);
        if (r > peak_rss)
            peak_rss = r;
        skpx_sleep_ns(20 * 1000000ll);
    }
    return NULL;
}

/* utime + stime of a process in seconds (its CPU consumption, independent of how busy the
 * machine is). */
static double cpu_seconds(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double mb(uint64_t b)
{
    return (double)b / (1024.0 * 1024.0);
}

int main(int argc, char **argv)
{
    uint64_t total = 1000000, stream_size = 10000;
    int n_clients = 2;
    int keep = 0;
    int analyze_while = 0;
    const char *exe = SKP_BENCH_SKYPROFD;
    const char *db_url = NULL;
    int n_daemons = 1;
    int analyze_after = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--snapshots") && i + 1 < argc)
            total = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--clients") && i + 1 < argc)
            n_clients = (int)strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--stream-size") && i + 1 < argc)
            stream_size = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--stacks") && i + 1 < argc)
            n_stacks = (int)strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--skyprofd") && i + 1 < argc)
            exe = argv[++i];
        else if (!strcmp(argv[i], "--keep-db"))
            keep = 1;
        else if (!strcmp(argv[i], "--analyze-while"))
            analyze_while = 1;
        else if (!strcmp(argv[i], "--db") && i + 1 < argc)
            db_url = argv[++i];
        else if (!strcmp(argv[i], "--daemons") && i + 1 < argc)
            n_daemons = (int)strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--analyze"))
            analyze_after = 1;
        else {
            fprintf(stderr, "usage: %s [--snapshots N] [--clients C] [--stream-size S] "
                            "[--stacks D] [--skyprofd PATH] [--keep-db] [--analyze-while] "
                            "[--db URL] [--daemons K] [--analyze]\n", argv[0]);
            return 2;
        }
    }
    if (n_daemons < 1 || n_daemons > MAX_DAEMONS || (n_daemons > 1 && !db_url)) {
        fprintf(stderr, "--daemons: 1..%d, more than 1 only with --db\n", MAX_DAEMONS);
        return 2;
    }
    if (n_clients < 1 || n_clients > MAX_CLIENTS || n_stacks < 1 || !total || !stream_size) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    build_pool();
    struct daemon dd[MAX_DAEMONS];
    memset(dd, 0, sizeof(dd));
    for (int k = 0; k < n_daemons; k++) {
        if (start_daemon(exe, db_url, &dd[k]) != 0) {
            fprintf(stderr, "cannot start %s\n", exe);
            for (int j = 0; j < k; j++)
                kill(dd[j].pid, SIGTERM);
            return 1;
        }
    }
    struct daemon d = dd[0]; /* the task is created on, and RSS sampled of, the first */
    t_base = skpx_now_ms();
    char *body = http(d.http_port, "POST", "/api/v1/profile/tasks",
                      "{\"service\":\"bench\",\"endpointName\":\"/bench\",\"duration\":15,"
                      "\"minDurationThreshold\":0,\"dumpPeriod\":10,\"maxSamplingCount\":9}");
    char *id = body ? strstr(body, "\"id\":\"") : NULL;
    if (id) {
        id += 6;
        size_t n = strcspn(id, "\"");
        if (n < sizeof(task_id)) {
            memcpy(task_id, id, n);
            task_id[n] = '\0';
        }
    }
    skpx_sleep_ns(1000 * 1000000ll); /* settle */
    uint64_t idle_rss = rss_of(d.pid);

    struct client cl[MAX_CLIENTS];
    pthread_t th[MAX_CLIENTS], sampler, analyser;
    http_port_g = d.http_port;
    memset(cl, 0, sizeof(cl));
    pthread_create(&sampler, NULL, rss_sampler, &d.pid);
    double cpu0 = 0;
    for (int k = 0; k < n_daemons; k++)
        cpu0 += cpu_seconds(dd[k].pid);
    if (analyze_while)
        pthread_create(&analyser, NULL, analyse_loop, NULL);
    int64_t t0 = skpx_mono_ns();
    for (int i = 0; i < n_clients; i++) {
        cl[i] = (struct client){.idx = i, .port = dd[i % n_daemons].grpc_port,
                                .stream_size = stream_size,
                                .quota = total / (uint64_t)n_clients +
                                         (i == 0 ? total % (uint64_t)n_clients : 0)};
        pthread_create(&th[i], NULL, client_main, &cl[i]);
    }
    uint64_t acked = 0, streams = 0;
    int failed = 0;
    for (int i = 0; i < n_clients; i++) {
        pthread_join(th[i], NULL);
        acked += cl[i].sent_acked;
        streams += cl[i].streams;
        if (cl[i].failed) {
            failed = 1;
            fprintf(stderr, "client %d failed: %s\n", i, cl[i].error);
        }
    }
    double secs = (double)(skpx_mono_ns() - t0) / 1e9;
    double cpu = -cpu0;
    for (int k = 0; k < n_daemons; k++)
        cpu += cpu_seconds(dd[k].pid);
    if (analyze_while) {
        analysing = 0;
        pthread_join(analyser, NULL);
    }
    sampling = 0;
    pthread_join(sampler, NULL);
    uint64_t after_rss = rss_of(d.pid);

    uint64_t stored = 0, dup = 0;
    for (int k = 0; k < n_daemons; k++) {
        char *m = http(dd[k].http_port, "GET", "/metrics", NULL);
        char *p = m ? strstr(m, "\nskyprof_snapshots_stored_total ") : NULL;
        if (p)
            stored += strtoull(p + strlen("\nskyprof_snapshots_stored_total "), NULL, 10);
        p = m ? strstr(m, "\nskyprof_snapshots_duplicate_total ") : NULL;
        if (p)
            dup += strtoull(p + strlen("\nskyprof_snapshots_duplicate_total "), NULL, 10);
    }
    /* The whole task's analysis (every snapshot acknowledged above), timed 3 times on the last
     * daemon: with several daemons, not the one that created the task. */
    double an_ms[3] = {0, 0, 0};
    size_t an_bytes = 0;
    if (analyze_after) {
        char path[400];
        snprintf(path, sizeof(path), "/api/v1/profile/tasks/%s/analyze", task_id);
        for (int r = 0; r < 3; r++) {
            int64_t a0 = skpx_mono_ns();
            char *b = http(dd[n_daemons - 1].http_port, "GET", path, NULL);
            an_ms[r] = (double)(skpx_mono_ns() - a0) / 1e6;
            an_bytes = b ? strlen(b) : 0;
        }
    }
    char db[128], wal[140];
    snprintf(db, sizeof(db), "%s/skyprof.db", d.dir);
    snprintf(wal, sizeof(wal), "%s-wal", db);
    struct stat sb = {0}, sw = {0};
    stat(db, &sb);
    stat(wal, &sw);

    int status = 0;
    for (int k = n_daemons - 1; k >= 0; k--) {
        kill(dd[k].pid, SIGTERM);
        waitpid(dd[k].pid, &status, 0); /* the first daemon's status is reported */
        if (k > 0)
            rmdir(dd[k].dir);
    }

    double rate = (double)acked / secs;
    printf("bench_ingest: %" PRIu64 " snapshots (%d frames, %d distinct stacks, %d per segment) "
           "in %" PRIu64 " streams from %d client thread(s) to %d skyprofd on %s, %.2f s\n",
           acked, FRAMES, n_stacks, SEG_SNAPSHOTS, streams, n_clients, n_daemons,
           db_url ? "a database URL" : "SQLite", secs);
    printf("  %-28s %12s   %s\n", "figure", "measured", "target");
    printf("  %-28s %12.0f   >= 100000  %s\n", "acked snapshots/s (durable)", rate,
           rate >= 100000 ? "ok" : "BELOW");
    printf("  %-28s %12.0f   (%.2f s of skyprofd CPU: %.1f us/snapshot; machine load makes "
           "wall-clock rates noisy)\n",
           "snapshots per skyprofd CPU-s", cpu > 0 ? (double)acked / cpu : 0.0, cpu,
           acked ? cpu * 1e6 / (double)acked : 0.0);
    printf("  %-28s %10.1f MB   <= 20 MB   %s\n", "skyprofd idle RSS", mb(idle_rss),
           mb(idle_rss) <= 20 ? "ok" : "ABOVE");
    printf("  %-28s %10.1f MB\n", "skyprofd peak RSS (ingest)", mb(peak_rss));
    printf("  %-28s %10.1f MB\n", "skyprofd RSS after ingest", mb(after_rss));
    printf("  %-28s %12" PRIu64 "   (+%" PRIu64 " duplicates) of %" PRIu64 " acked  %s\n",
           "stored (metrics)", stored, dup, acked, stored + dup == acked ? "ok" : "MISMATCH");
    if (!db_url)
        printf("  %-28s %10.1f MB   (%.0f bytes/snapshot)\n", "database + WAL",
               mb((uint64_t)(sb.st_size + sw.st_size)),
               acked ? (double)(sb.st_size + sw.st_size) / (double)acked : 0.0);
    if (analyze_after) {
        double lo = an_ms[0];
        for (int r = 1; r < 3; r++)
            lo = an_ms[r] < lo ? an_ms[r] : lo;
        printf("  %-28s %10.0f ms   <= 2000 ms  %s (runs %.0f / %.0f / %.0f ms, %zu bytes of JSON)\n",
               "whole-task analysis", lo, lo <= 2000 ? "ok" : "ABOVE", an_ms[0], an_ms[1],
               an_ms[2], an_bytes);
    }
    if (analyze_while)
        printf("  %-28s %12" PRIu64 "   (whole-task analyses served during the ingest; their CPU is "
               "included above)\n",
               "concurrent analyses", n_analyses);
    printf("  skyprofd exit: %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    printf("RESULT acked=%" PRIu64 " secs=%.3f rate=%.0f cpu=%.3f stored=%" PRIu64
           " dup=%" PRIu64 " daemons=%d file_bytes=%lld analyze_ms=%.1f,%.1f,%.1f\n",
           acked, secs, rate, cpu, stored, dup, n_daemons,
           db_url ? 0LL : (long long)(sb.st_size + sw.st_size), an_ms[0], an_ms[1], an_ms[2]);
    if (!keep) {
        unlink(db);
        unlink(wal);
        char shm[140];
        snprintf(shm, sizeof(shm), "%s-shm", db);
        unlink(shm);
        rmdir(d.dir);
    } else {
        printf("  database kept in %s\n", d.dir);
    }
    return failed || stored + dup != acked ? 1 : 0;
}
