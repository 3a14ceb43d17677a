/* harness.c - see harness.h. */
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <event2/http.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "server/collector/collector.h"
#include "server/http/http_int.h"
#include "server/stats/metrics.h"
#include "server/stats/segment_keep.h"
#include "server/store/store.h"
#include "wire/grpc_server.h"

/* An exchange that has not settled by then is a hang (the server's own timeouts are longer). */
#define EXCHANGE_DEADLINE_S 20

static struct {
    bool up;
    unsigned rounds;
    char dir[64];
    char db[128];
    struct event_base *base;
    struct store *st;
    struct metrics m;
    struct collector col;
    struct skpx_grpc_server *grpc;
    uint16_t grpc_port;
    struct http_api *http;
    struct sockaddr_un http_addr; /* the API's listening unix socket */
} S;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void set_nonblocking(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    FUZZ_CHECK(fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0);
}

static void remove_db(void)
{
    static const char *const sfx[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
        char p[160];
        snprintf(p, sizeof(p), "%s%s", S.db, sfx[i]);
        unlink(p);
    }
}

static void open_store(void)
{
    remove_db();
    FUZZ_CHECK(store_open(S.db, NULL, &S.st) == SKP_OK);
    S.col.store = S.st;
    if (S.http)
        S.http->store = S.st;
    struct keep_policy kp = {0};
    FUZZ_CHECK(keep_policy_parse("profiled", &kp) == SKP_OK);
    FUZZ_CHECK(collector_segments_start(&S.col, NULL, &kp) == SKP_OK);
    /* goProfileReport needs a stored trace task: the seeds' task id "1". */
    struct store_task t = {.id = "1",
                           .service = "shop",
                           .endpoint = "GET:/items",
                           .start_time = 1700000000000,
                           .duration_min = 10,
                           .dump_period = 10,
                           .max_sampling_count = 5,
                           .create_time = 1700000000000};
    FUZZ_CHECK(store_insert_task(S.st, &t) == SKP_OK);
}

static void close_store(void)
{
    collector_segments_stop(&S.col);
    store_close(S.st);
    S.st = NULL;
    remove_db();
}

/* Tasks for the agents' polls to find: a trace task and a pprof task (whatever the API says). */
static void seed_tasks(void)
{
    static const char *const bodies[][2] = {
        {"/api/v1/profile/tasks",
         "{\"service\":\"shop\",\"endpointName\":\"GET:/items\",\"duration\":10,"
         "\"minDurationThreshold\":0,\"dumpPeriod\":10,\"maxSamplingCount\":5}"},
        {"/api/v1/pprof/tasks", "{\"service\":\"shop\",\"events\":[\"cpu\"],\"duration\":5,"
                                "\"serviceInstanceIds\":[\"i1\"]}"},
    };
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        char req[1024];
        int n = snprintf(req, sizeof(req),
                         "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         "Content-Length: %zu\r\n\r\n%s",
                         bodies[i][0], strlen(bodies[i][1]), bodies[i][1]);
        FUZZ_CHECK(n > 0 && (size_t)n < sizeof(req));
        (void)fuzz_server_http_exchange((const uint8_t *)req, (size_t)n);
    }
}

static void stop_server(void)
{
    if (!S.up)
        return;
    http_api_free(S.http);
    unlink(S.http_addr.sun_path);
    skpx_grpc_server_free(S.grpc);
    close_store();
    event_base_free(S.base);
    rmdir(S.dir);
    S.up = false;
}

void fuzz_server_start(void)
{
    if (S.up) {
        if (++S.rounds % FUZZ_SERVER_STORE_ROUNDS == 0) {
            close_store();
            open_store();
            seed_tasks();
        }
        return;
    }
    signal(SIGPIPE, SIG_IGN);
    skpx_log_set_sink(NULL, NULL, SKPX_LOG_ERROR);
    const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(S.dir, sizeof(S.dir), "%s/skp-fuzz-XXXXXX", tmp);
    FUZZ_CHECK(mkdtemp(S.dir) != NULL);
    snprintf(S.db, sizeof(S.db), "%s/fuzz.db", S.dir);
    S.base = event_base_new();
    FUZZ_CHECK(S.base);
    S.col = (struct collector){.metrics = &S.m, .max_segment_spans = 10000};
    open_store();
    FUZZ_CHECK(skpx_grpc_server_new(S.base, NULL, &S.grpc) == SKP_OK);
    FUZZ_CHECK(collector_register(&S.col, S.grpc) == SKP_OK);
    FUZZ_CHECK(skpx_grpc_server_listen(S.grpc, "127.0.0.1:0", &S.grpc_port) == SKP_OK);
    struct http_api_opts ho = {.store = S.st, .metrics = &S.m, .grpc = S.grpc};
    FUZZ_CHECK(http_api_new(S.base, &ho, &S.http) == SKP_OK);
    /* The API accepts on a unix socket: a connection per input leaves no TIME_WAIT behind. */
    S.http_addr.sun_family = AF_UNIX;
    snprintf(S.http_addr.sun_path, sizeof(S.http_addr.sun_path), "%s/http.sock", S.dir);
    int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    FUZZ_CHECK(lfd >= 0);
    FUZZ_CHECK(bind(lfd, (struct sockaddr *)&S.http_addr, sizeof(S.http_addr)) == 0);
    FUZZ_CHECK(listen(lfd, 64) == 0);
    set_nonblocking(lfd);
    FUZZ_CHECK(evhttp_accept_socket(S.http->http, lfd) == 0);
    S.up = true;
    atexit(stop_server);
    seed_tasks();
}

/* Reads what is there; returns bytes read, and sets *eof when the peer closed. With
 * SKP_FUZZ_VERBOSE set, the bytes go to stderr (to see what the server answers a seed). */
static size_t drain(int fd, bool *eof)
{
    static int verbose = -1;
    if (verbose < 0)
        verbose = getenv("SKP_FUZZ_VERBOSE") != NULL;
    size_t total = 0;
    char buf[65536];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n > 0) {
            total += (size_t)n;
            if (verbose)
                fwrite(buf, 1, (size_t)n, stderr);
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            *eof = true;
        return total;
    }
}

/* Writes as much as the socket takes. */
static size_t push(int fd, const uint8_t *data, size_t len)
{
    ssize_t n = write(fd, data, len);
    return n > 0 ? (size_t)n : 0;
}

/* connect(), finishing one that a signal interrupted (libFuzzer's timer signals interrupt
 * blocking calls): the kernel goes on connecting, so wait until the socket is writable and
 * read the result. */
static bool connect_fully(int fd, const void *addr, socklen_t addr_len)
{
    if (connect(fd, (const struct sockaddr *)addr, addr_len) == 0)
        return true;
    if (errno != EINTR && errno != EINPROGRESS)
        return false;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int r;
    do
        r = poll(&p, 1, 5000);
    while (r < 0 && errno == EINTR);
    int err = 0;
    socklen_t err_len = sizeof(err);
    if (r != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len) != 0)
        return false;
    errno = err;
    return err == 0;
}

void fuzz_server_grpc_exchange(const uint8_t *data, size_t len)
{
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    FUZZ_CHECK(fd >= 0);
    /* Each connection from another source address of 127/8: when the server closes first, its
     * side stays in TIME_WAIT for a minute, and at hundreds of inputs a second one source
     * address would run out of ports. */
    static uint32_t k;
    k = (k + 1) % (250u * 250u);
    struct sockaddr_in src = {.sin_family = AF_INET};
    src.sin_addr.s_addr = htonl(0x7f010000u | (k / 250u) << 8 | (k % 250u + 1));
    FUZZ_CHECK(bind(fd, (struct sockaddr *)&src, sizeof(src)) == 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(S.grpc_port)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (!connect_fully(fd, &sin, sizeof(sin))) {
        fprintf(stderr, "fuzz harness: connect to the gRPC port: %s\n", strerror(errno));
        __builtin_trap();
    }
    set_nonblocking(fd);
    size_t pre = 0, sent = 0;
    bool eof = false;
    int quiet = 0;
    double deadline = now_s() + EXCHANGE_DEADLINE_S;
    while (!eof && quiet < 3) {
        if (pre < sizeof(preface) - 1)
            pre += push(fd, (const uint8_t *)preface + pre, sizeof(preface) - 1 - pre);
        else if (sent < len)
            sent += push(fd, data + sent, len - sent);
        event_base_loop(S.base, EVLOOP_NONBLOCK);
        size_t got = drain(fd, &eof);
        bool all_sent = pre == sizeof(preface) - 1 && sent == len;
        quiet = all_sent && got == 0 ? quiet + 1 : 0;
        FUZZ_CHECK(now_s() < deadline);
    }
    /* Reset, so neither side keeps the port in TIME_WAIT; the server must then let go. */
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    close(fd);
    struct skpx_grpc_server_stats st;
    if (getenv("SKP_FUZZ_VERBOSE")) {
        skpx_grpc_server_get_stats(S.grpc, &st);
        fprintf(stderr,
                "\n[grpc: %llu calls, %llu failed, %llu messages, %llu protocol errors; "
                "%llu segments, %llu snapshots received]\n",
                (unsigned long long)st.calls_started, (unsigned long long)st.calls_failed,
                (unsigned long long)st.messages_received, (unsigned long long)st.protocol_errors,
                (unsigned long long)S.m.segments_received,
                (unsigned long long)S.m.snapshots_received);
    }
    for (;;) {
        event_base_loop(S.base, EVLOOP_NONBLOCK);
        skpx_grpc_server_get_stats(S.grpc, &st);
        if (st.connections_open == 0)
            break;
        FUZZ_CHECK(now_s() < deadline);
    }
}

size_t fuzz_server_http_exchange(const uint8_t *data, size_t len)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    FUZZ_CHECK(fd >= 0);
    FUZZ_CHECK(connect_fully(fd, &S.http_addr, sizeof(S.http_addr)));
    set_nonblocking(fd);
    size_t sent = 0, total = 0;
    bool eof = false, half_closed = false;
    double deadline = now_s() + EXCHANGE_DEADLINE_S;
    while (!eof) {
        if (sent < len)
            sent += push(fd, data + sent, len - sent);
        if (sent == len && !half_closed) {
            shutdown(fd, SHUT_WR);
            half_closed = true;
        }
        event_base_loop(S.base, EVLOOP_NONBLOCK);
        total += drain(fd, &eof);
        FUZZ_CHECK(now_s() < deadline);
    }
    close(fd);
    return total;
}
