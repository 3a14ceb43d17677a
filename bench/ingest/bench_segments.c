/* bench_segments.c - trace-segment ingest of a real skyprofd (issue 18): segments/s acknowledged
 * with a --keep-segments policy, skyprofd's CPU per segment (its utime+stime, so the figure is
 * per core whatever else the machine runs), its RSS after the ingest with E distinct
 * endpoints, and the bytes the database grew by per segment. The segments are unprofiled
 * (no task, no snapshots): the bulk of production traffic. Each has 5 spans (~0.6 KB packed)
 * and an entry-span latency drawn from a skewed distribution; clients are threads of this
 * process using the agent's C gRPC client (their CPU is not skyprofd's).
 *
 * Usage: bench_segments [--segments N] [--endpoints E] [--clients C] [--stream-size S]
 *                       [--keep MODE]... [--skyprofd PATH]
 * Several --keep flags run one daemon each, side by side (default: profiled, then all). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/Common.pb-c.h"
#include "common/Command.pb-c.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "language-agent/Tracing.pb-c.h"
#include "wire/grpc_client.h"

#define PATH_SEG "/skywalking.v3.TraceSegmentReportService/collect"
#define SPANS 5
#define MAX_CLIENTS 8

static long n_endpoints = 100;
static int64_t t_now;

struct proc {
    pid_t pid;
    int grpc_port, http_port;
    char dir[64], db[128];
};

static int proc_start(const char *exe, const char *keep, struct proc *d)
{
    snprintf(d->dir, sizeof(d->dir), "/tmp/skp-bench-seg-XXXXXX");
    if (!mkdtemp(d->dir))
        return -1;
    snprintf(d->db, sizeof(d->db), "%s/skyprof.db", d->dir);
    int p[2];
    if (pipe(p) != 0)
        return -1;
    d->pid = fork();
    if (d->pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        execl(exe, exe, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--db",
              d->db, "--log-level", "warn", "--keep-segments", keep, (char *)NULL);
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
            d->grpc_port = atoi(g + strlen("grpc listening on 127.0.0.1:"));
        if (h)
            d->http_port = atoi(h + strlen("http listening on 127.0.0.1:"));
    }
    close(p[0]);
    return d->grpc_port && d->http_port ? 0 : -1;
}

static void proc_stop(struct proc *d)
{
    kill(d->pid, SIGTERM);
    int st;
    waitpid(d->pid, &st, 0);
    char p[200];
    static const char *const sfx[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof(p), "%s%s", d->db, sfx[i]);
        unlink(p);
    }
    rmdir(d->dir);
}

/* "VmRSS:" / "VmHWM:" of /proc/pid/status, bytes. */
static uint64_t status_kb(pid_t pid, const char *key)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    uint64_t v = 0;
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, key, strlen(key)) == 0)
            v = strtoull(line + strlen(key), NULL, 10) * 1024;
    if (f)
        fclose(f);
    return v;
}

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

static uint64_t file_bytes(const char *db)
{
    uint64_t total = 0;
    char p[200];
    static const char *const sfx[] = {"", "-wal"};
    for (int i = 0; i < 2; i++) {
        struct stat sb;
        snprintf(p, sizeof(p), "%s%s", db, sfx[i]);
        if (stat(p, &sb) == 0)
            total += (uint64_t)sb.st_size;
    }
    return total;
}

/* GET of one /metrics line's value. */
static double metric(int port, const char *name)
{
    static char resp[1 << 18];
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    const char req[] = "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n";
    if (write(fd, req, sizeof(req) - 1) < 0) {
        close(fd);
        return -1;
    }
    size_t have = 0;
    ssize_t r;
    while (have < sizeof(resp) - 1 && (r = read(fd, resp + have, sizeof(resp) - 1 - have)) > 0)
        have += (size_t)r;
    close(fd);
    resp[have] = '\0';
    char key[128];
    snprintf(key, sizeof(key), "\n%s ", name);
    char *m = strstr(resp, key);
    return m ? strtod(m + strlen(key), NULL) : -1;
}

struct client {
    int idx, port;
    long quota, stream_size, acked;
    int failed;
    char error[256];
};

struct src {
    struct client *c;
    long i, n, base;
    uint64_t rng;
    Skywalking__V3__SegmentObject seg;
    Skywalking__V3__SpanObject spans[SPANS];
    Skywalking__V3__SpanObject *span_ptrs[SPANS];
    Skywalking__V3__KeyStringValuePair tag;
    Skywalking__V3__KeyStringValuePair *tags[1];
    char id[64], trace[64], ep[48], url[96];
};

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int next_segment(void *ud, const ProtobufCMessage **msg)
{
    struct src *s = ud;
    if (s->i == s->n)
        return 0;
    long k = s->base + s->i;
    uint64_t r = xorshift(&s->rng);
    snprintf(s->id, sizeof(s->id), "bench.%d.%ld.%08" PRIx64, s->c->idx, k, r & 0xffffffff);
    snprintf(s->trace, sizeof(s->trace), "trace.%d.%ld", s->c->idx, k);
    snprintf(s->ep, sizeof(s->ep), "/api/v1/item-%ld/{id}", (long)(r >> 20) % n_endpoints);
    snprintf(s->url, sizeof(s->url), "http://shop-api:8080%s", s->ep);
    /* skewed latency: mostly 5-60 ms, a tail to seconds */
    uint64_t u = r % 1000;
    int64_t lat = 5 + (int64_t)(u * u * u / 400000);
    int64_t t0 = t_now - 1000 - (int64_t)(r % 500);
    for (int i = 0; i < SPANS; i++) {
        s->spans[i].starttime = t0 + i;
        s->spans[i].endtime = t0 + (i == 0 ? lat : lat / 2);
    }
    s->spans[0].operationname = s->ep;
    s->spans[0].iserror = (r & 0xff) == 0;
    s->tag.value = s->url;
    s->seg.traceid = s->trace;
    s->seg.tracesegmentid = s->id;
    *msg = &s->seg.base;
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
    struct src s = {.c = c, .rng = 0x9e3779b97f4a7c15ull + (uint64_t)c->idx * 7919};
    skywalking__v3__segment_object__init(&s.seg);
    skywalking__v3__key_string_value_pair__init(&s.tag);
    s.tag.key = "http.url";
    s.tags[0] = &s.tag;
    static const char *const ops[SPANS] = {"", "SELECT shop.items", "GET /inventory",
                                           "redis GET", "render"};
    for (int i = 0; i < SPANS; i++) {
        skywalking__v3__span_object__init(&s.spans[i]);
        s.spans[i].spanid = i;
        s.spans[i].parentspanid = i - 1;
        s.spans[i].operationname = (char *)ops[i];
        s.spans[i].spantype = i == 0 ? SKYWALKING__V3__SPAN_TYPE__Entry
                                     : SKYWALKING__V3__SPAN_TYPE__Exit;
        s.spans[i].spanlayer = i == 0 ? SKYWALKING__V3__SPAN_LAYER__Http
                                      : SKYWALKING__V3__SPAN_LAYER__Database;
        s.spans[i].componentid = 7000 + i;
        s.spans[i].peer = i ? "db.internal:5432" : "";
        s.span_ptrs[i] = &s.spans[i];
    }
    s.spans[0].n_tags = 1;
    s.spans[0].tags = s.tags;
    s.seg.service = "shop-api";
    s.seg.serviceinstance = "shop-api-7d9f@10.0.0.7";
    s.seg.n_spans = SPANS;
    s.seg.spans = s.span_ptrs;
    while (c->acked < c->quota) {
        s.i = 0;
        s.base = c->acked;
        s.n = c->quota - c->acked < c->stream_size ? c->quota - c->acked : c->stream_size;
        ProtobufCMessage *resp = NULL;
        struct skpx_grpc_result res;
        skp_err err = skpx_grpc_client_stream(cl, PATH_SEG, next_segment, &s,
                                              &skywalking__v3__commands__descriptor, &resp,
                                              120000, &res);
        if (err) {
            c->failed = 1;
            snprintf(c->error, sizeof(c->error), "%s (status %d)", skp_strerror(err), res.status);
            break;
        }
        protobuf_c_message_free_unpacked(resp, NULL);
        c->acked += s.n;
    }
    skpx_grpc_client_free(cl);
    return NULL;
}

static int run(const char *exe, const char *keep, long total, int n_clients, long stream_size)
{
    struct proc d = {0};
    if (proc_start(exe, keep, &d) != 0) {
        fprintf(stderr, "cannot start %s\n", exe);
        return 1;
    }
    skpx_sleep_ns(300 * 1000000ll);
    uint64_t bytes0 = file_bytes(d.db);
    uint64_t rss0 = status_kb(d.pid, "VmRSS:");
    double cpu0 = cpu_seconds(d.pid);
    t_now = skpx_now_ms();
    struct client cl[MAX_CLIENTS];
    pthread_t th[MAX_CLIENTS];
    int64_t t0 = skpx_mono_ns();
    for (int i = 0; i < n_clients; i++) {
        cl[i] = (struct client){.idx = i, .port = d.grpc_port, .quota = total / n_clients,
                                .stream_size = stream_size};
        pthread_create(&th[i], NULL, client_main, &cl[i]);
    }
    long acked = 0;
    int failed = 0;
    for (int i = 0; i < n_clients; i++) {
        pthread_join(th[i], NULL);
        acked += cl[i].acked;
        if (cl[i].failed) {
            failed = 1;
            fprintf(stderr, "client %d: %s\n", i, cl[i].error);
        }
    }
    double wall = (double)(skpx_mono_ns() - t0) / 1e9;
    double cpu = cpu_seconds(d.pid) - cpu0;
    uint64_t rss = status_kb(d.pid, "VmRSS:"), hwm = status_kb(d.pid, "VmHWM:");
    double received = metric(d.http_port, "skyprof_segments_received_total");
    double stored = metric(d.http_port, "skyprof_segments_stored_total");
    double dropped = metric(d.http_port, "skyprof_segments_dropped_total");
    uint64_t bytes = file_bytes(d.db);
    printf("--keep-segments %-9s %ld segments, %ld endpoints, %d client(s): %9.0f segments/s "
           "acked (wall), %9.0f segments per skyprofd CPU-second\n",
           keep, acked, n_endpoints, n_clients, acked / wall, cpu > 0 ? acked / cpu : 0.0);
    printf("    received %.0f stored %.0f dropped %.0f | db grew %.1f MB = %.1f bytes/segment | "
           "RSS idle %.1f MB, after %.1f MB, peak %.1f MB\n",
           received, stored, dropped, (double)(bytes - bytes0) / 1048576.0,
           acked ? (double)(bytes - bytes0) / (double)acked : 0.0, rss0 / 1048576.0,
           rss / 1048576.0, hwm / 1048576.0);
    if (received != (double)acked)
        failed = 1;
    proc_stop(&d);
    return failed;
}

int main(int argc, char **argv)
{
    long total = 200000, stream = 2000;
    int clients = 1;
    const char *exe = SKP_BENCH_SKYPROFD;
    const char *keeps[8];
    int n_keeps = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--segments") && v)
            total = atol(argv[++i]);
        else if (!strcmp(a, "--endpoints") && v)
            n_endpoints = atol(argv[++i]);
        else if (!strcmp(a, "--clients") && v)
            clients = atoi(argv[++i]);
        else if (!strcmp(a, "--stream-size") && v)
            stream = atol(argv[++i]);
        else if (!strcmp(a, "--keep") && v && n_keeps < 8)
            keeps[n_keeps++] = argv[++i];
        else if (!strcmp(a, "--skyprofd") && v)
            exe = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--segments N] [--endpoints E] [--clients C] "
                            "[--stream-size S] [--keep MODE]... [--skyprofd PATH]\n",
                    argv[0]);
            return 2;
        }
    }
    if (clients < 1 || clients > MAX_CLIENTS || total < clients || n_endpoints < 1)
        return 2;
    if (n_keeps == 0) {
        keeps[n_keeps++] = "profiled";
        keeps[n_keeps++] = "all";
    }
    int rc = 0;
    for (int i = 0; i < n_keeps; i++)
        rc |= run(exe, keeps[i], total, clients, stream);
    return rc;
}
