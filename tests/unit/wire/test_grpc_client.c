/* test_grpc_client.c - skpx_grpc_client against misbehaving peers on real loopback sockets:
 * bad targets, refused connections and backoff, silent peers (deadline), peers that close at
 * once or while we stream (no SIGPIPE: no handler is installed, the process must survive),
 * bounded memory while the peer does not read, allocation failures in client_new.
 * Peers are plain TCP listeners run by a helper thread; the interop suite covers real servers. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "harness/skp_alloc_faults.h"
#include "common/clock.h"
#include "profile/Profile.pb-c.h"
#include "common/Command.pb-c.h"
#include "wire/grpc_client.h"

#define PATH_QUERY "/skywalking.v3.ProfileTask/getProfileTaskCommands"
#define PATH_SNAPSHOT "/skywalking.v3.ProfileTask/collectSnapshot"
/* Generous bound for "returns promptly" checks: they catch hangs, not slowness. */
#define PROMPT_BOUND_MS 10000

/* ---- loopback peers --------------------------------------------------------------------- */

enum peer_mode {
    PEER_SILENT,            /* accept, never read or write, hold until stopped */
    PEER_CLOSE,             /* accept and close at once */
    PEER_READ_CLOSE,        /* accept, read a little, then close (the client is mid-write) */
    PEER_OPEN_WINDOW_RESET, /* accept, open HTTP/2 flow control wide, read 256 KiB, reset */
};

struct peer {
    int lfd;
    int port;
    enum peer_mode mode;
    pthread_t thr;
    int stop_pipe[2];
    int n_accepted;
};

static void *peer_main(void *arg)
{
    struct peer *p = arg;
    int held[16];
    int n_held = 0;
    for (;;) {
        struct pollfd pfd[2] = {{.fd = p->lfd, .events = POLLIN},
                                {.fd = p->stop_pipe[0], .events = POLLIN}};
        if (poll(pfd, 2, -1) < 0 && errno != EINTR)
            break;
        if (pfd[1].revents)
            break;
        if (!(pfd[0].revents & POLLIN))
            continue;
        int fd = accept(p->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        __atomic_add_fetch(&p->n_accepted, 1, __ATOMIC_SEQ_CST);
        if (p->mode == PEER_CLOSE) {
            close(fd);
        } else if (p->mode == PEER_OPEN_WINDOW_RESET) {
            /* SETTINGS(INITIAL_WINDOW_SIZE = 2^31-1) + connection WINDOW_UPDATE: the client may
             * stream without waiting for us, so it is writing when the reset lands. */
            static const uint8_t frames[] = {
                0,    0, 6, 4, 0, 0, 0, 0, 0, 0, 4,    0x7f, 0xff, 0xff,
                0xff, 0, 0, 4, 8, 0, 0, 0, 0, 0, 0x7f, 0xff, 0x00, 0x00,
            };
            (void)send(fd, frames, sizeof(frames), MSG_NOSIGNAL);
            char buf[16384];
            size_t got = 0;
            while (got < 256 * 1024) {
                ssize_t n = recv(fd, buf, sizeof(buf), 0);
                if (n <= 0)
                    break;
                got += (size_t)n;
            }
            struct linger lg = {.l_onoff = 1, .l_linger = 0};
            (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
            close(fd); /* RST */
        } else if (p->mode == PEER_READ_CLOSE) {
            char buf[4096];
            (void)recv(fd, buf, sizeof(buf), 0);
            close(fd);
        } else if (n_held < (int)(sizeof(held) / sizeof(held[0]))) {
            held[n_held++] = fd;
        } else {
            close(fd);
        }
    }
    for (int i = 0; i < n_held; i++)
        close(held[i]);
    return NULL;
}

static int listen_any(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    socklen_t al = sizeof(a);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static void peer_start(struct peer *p, enum peer_mode mode)
{
    memset(p, 0, sizeof(*p));
    p->mode = mode;
    p->lfd = listen_any(&p->port);
    assert_int_equal(listen(p->lfd, 16), 0);
    assert_int_equal(pipe(p->stop_pipe), 0);
    assert_int_equal(pthread_create(&p->thr, NULL, peer_main, p), 0);
}

static void peer_stop(struct peer *p)
{
    assert_int_equal(write(p->stop_pipe[1], "x", 1), 1);
    pthread_join(p->thr, NULL);
    close(p->lfd);
    close(p->stop_pipe[0]);
    close(p->stop_pipe[1]);
}

/* A port that refuses connections: bound (so nobody else takes it during the test) but not
 * listening. */
static int closed_port_fd(int *port)
{
    return listen_any(port);
}

static struct skpx_grpc_client *client_for(int port, int backoff_min_ms)
{
    char target[64];
    snprintf(target, sizeof(target), "127.0.0.1:%d", port);
    struct skpx_grpc_client_opts o = {
        .target = target, .backoff_min_ms = backoff_min_ms, .backoff_max_ms = backoff_min_ms * 4};
    struct skpx_grpc_client *c = NULL;
    assert_int_equal(skpx_grpc_client_new(&o, &c), SKP_OK);
    assert_non_null(c);
    return c;
}

static skp_err query(struct skpx_grpc_client *c, int timeout_ms, struct skpx_grpc_result *res)
{
    Skywalking__V3__ProfileTaskCommandQuery q = SKYWALKING__V3__PROFILE_TASK_COMMAND_QUERY__INIT;
    q.service = "svc";
    q.serviceinstance = "inst";
    ProtobufCMessage *resp = (ProtobufCMessage *)1;
    skp_err err = skpx_grpc_client_unary(
        c, PATH_QUERY, &q.base, &skywalking__v3__commands__descriptor, &resp, timeout_ms, res);
    if (err)
        assert_null(resp);
    else
        protobuf_c_message_free_unpacked(resp, NULL);
    return err;
}

/* ---- tests ------------------------------------------------------------------------------ */

static void test_bad_targets(void **state)
{
    (void)state;
    static const char *bad[] = {
        "",       "nohostport", ":80",   "host:",    "host:0",      "host:65536",   "host:8o",
        "::1:80", "[::1]80",    "[::1]", "ho st:80", "host:123456", "user@host:80", "host/x:80",
    };
    struct skpx_grpc_client *c = (struct skpx_grpc_client *)1;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct skpx_grpc_client_opts o = {.target = bad[i]};
        assert_int_equal(skpx_grpc_client_new(&o, &c), SKP_EINVAL);
        assert_null(c);
    }
    struct skpx_grpc_client_opts none = {.target = NULL};
    assert_int_equal(skpx_grpc_client_new(&none, &c), SKP_EINVAL);
    assert_int_equal(skpx_grpc_client_new(NULL, &c), SKP_EINVAL);
    struct skpx_grpc_client_opts bad_auth = {.target = "127.0.0.1:1", .authentication = "a\r\nb"};
    assert_int_equal(skpx_grpc_client_new(&bad_auth, &c), SKP_EINVAL);
    struct skpx_grpc_client_opts bad_timeout = {.target = "127.0.0.1:1", .connect_timeout_ms = -1};
    assert_int_equal(skpx_grpc_client_new(&bad_timeout, &c), SKP_EINVAL);

    static const char *good[] = {"127.0.0.1:1", "[::1]:8080", "localhost:11800",
                                 "oap.example.internal:65535"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        struct skpx_grpc_client_opts o = {.target = good[i], .authentication = "tok"};
        assert_int_equal(skpx_grpc_client_new(&o, &c), SKP_OK);
        skpx_grpc_client_free(c);
    }
    skpx_grpc_client_free(NULL);
    skpx_grpc_client_disconnect(NULL);
    skpx_grpc_client_reset_backoff(NULL);
}

static void test_bad_call_args(void **state)
{
    (void)state;
    struct skpx_grpc_client *c = client_for(1, 100);
    struct skpx_grpc_result res;
    Skywalking__V3__ProfileTaskCommandQuery q = SKYWALKING__V3__PROFILE_TASK_COMMAND_QUERY__INIT;
    ProtobufCMessage *resp = NULL;
    assert_int_equal(skpx_grpc_client_unary(c, "no-slash", &q.base, NULL, NULL, 100, &res),
                     SKP_EINVAL);
    assert_int_equal(skpx_grpc_client_unary(c, PATH_QUERY, NULL, NULL, NULL, 100, &res),
                     SKP_EINVAL);
    assert_int_equal(skpx_grpc_client_unary(c, PATH_QUERY, &q.base,
                                            &skywalking__v3__commands__descriptor, NULL, 100, &res),
                     SKP_EINVAL);
    assert_int_equal(skpx_grpc_client_stream(c, PATH_SNAPSHOT, NULL, NULL, NULL, &resp, 100, NULL),
                     SKP_EINVAL);
    assert_null(resp);
    struct skpx_grpc_client_stats st;
    skpx_grpc_client_get_stats(c, &st);
    assert_int_equal(st.connects + st.connect_failures, 0); /* never touched the network */
    assert_int_equal(st.calls_failed, 4);
    skpx_grpc_client_free(c);
}

static void test_refused_then_backoff(void **state)
{
    (void)state;
    int port;
    int hold = closed_port_fd(&port);
    struct skpx_grpc_client *c = client_for(port, 60000);
    struct skpx_grpc_result res;
    struct skpx_grpc_client_stats st;

    int64_t t0 = skpx_mono_ms();
    assert_int_equal(query(c, 5000, &res), SKP_EUNAVAILABLE);
    assert_true(skpx_mono_ms() - t0 < PROMPT_BOUND_MS);
    assert_int_equal(res.status, -1);
    assert_non_null(strstr(res.message, "cannot connect"));
    skpx_grpc_client_get_stats(c, &st);
    assert_int_equal(st.connect_failures, 1);
    assert_int_equal(st.connects, 0);
    assert_int_equal(st.calls_failed, 1);

    /* Within the backoff window: fails at once, no connect attempt. */
    assert_int_equal(query(c, 5000, &res), SKP_EUNAVAILABLE);
    assert_non_null(strstr(res.message, "backing off"));
    skpx_grpc_client_get_stats(c, &st);
    assert_int_equal(st.connect_failures, 1);
    assert_int_equal(st.calls_failed, 2);

    /* reset_backoff: the next call tries again (and fails again). */
    skpx_grpc_client_reset_backoff(c);
    assert_int_equal(query(c, 5000, &res), SKP_EUNAVAILABLE);
    skpx_grpc_client_get_stats(c, &st);
    assert_int_equal(st.connect_failures, 2);
    skpx_grpc_client_free(c);
    close(hold);
}

static void test_backoff_expires(void **state)
{
    (void)state;
    int port;
    int hold = closed_port_fd(&port);
    struct skpx_grpc_client *c = client_for(port, 50);
    struct skpx_grpc_result res;
    struct skpx_grpc_client_stats st;
    assert_int_equal(query(c, 1000, &res), SKP_EUNAVAILABLE);
    /* Poll until a new attempt is made once the (short) backoff has passed. */
    int64_t end = skpx_mono_ms() + PROMPT_BOUND_MS;
    do {
        skpx_sleep_ns(10 * 1000000LL);
        assert_int_equal(query(c, 1000, &res), SKP_EUNAVAILABLE);
        skpx_grpc_client_get_stats(c, &st);
    } while (st.connect_failures < 2 && skpx_mono_ms() < end);
    assert_int_equal(st.connect_failures, 2);
    skpx_grpc_client_free(c);
    close(hold);
}

static void test_connect_timeout(void **state)
{
    (void)state;
    /* A listener with a full accept queue drops further SYNs: connect() stays pending. */
    int port;
    int lfd = listen_any(&port);
    assert_int_equal(listen(lfd, 0), 0);
    int fill[3];
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    for (int i = 0; i < 3; i++) {
        fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        assert_true(fill[i] >= 0);
        (void)connect(fill[i], (struct sockaddr *)&a, sizeof(a));
    }
    skpx_sleep_ns(100 * 1000000LL); /* let the queued handshakes settle */
    char target[64];
    snprintf(target, sizeof(target), "127.0.0.1:%d", port);
    struct skpx_grpc_client_opts o = {
        .target = target, .connect_timeout_ms = 300, .backoff_min_ms = 60000};
    struct skpx_grpc_client *c = NULL;
    assert_int_equal(skpx_grpc_client_new(&o, &c), SKP_OK);
    struct skpx_grpc_result res;
    int64_t t0 = skpx_mono_ms();
    assert_int_equal(query(c, 5000, &res), SKP_EUNAVAILABLE);
    int64_t dt = skpx_mono_ms() - t0;
    assert_non_null(strstr(res.message, "timed out"));
    assert_true(dt >= 250 && dt < PROMPT_BOUND_MS);
    struct skpx_grpc_client_stats st;
    skpx_grpc_client_get_stats(c, &st);
    assert_int_equal(st.connect_failures, 1);
    skpx_grpc_client_free(c);
    /* A call deadline shorter than the connect timeout bounds the connect too: with a 60 s
     * connect timeout, a 100 ms call returns long before. */
    o.connect_timeout_ms = 60000;
    assert_int_equal(skpx_grpc_client_new(&o, &c), SKP_OK);
    t0 = skpx_mono_ms();
    assert_int_equal(query(c, 100, &res), SKP_EUNAVAILABLE);
    assert_true(skpx_mono_ms() - t0 < PROMPT_BOUND_MS);
    skpx_grpc_client_free(c);
    for (int i = 0; i < 3; i++)
        close(fill[i]);
    close(lfd);
}

static void test_silent_peer_deadline(void **state)
{
    (void)state;
    struct peer p;
    peer_start(&p, PEER_SILENT);
    struct skpx_grpc_client *c = client_for(p.port, 60000);
    struct skpx_grpc_result res;
    int64_t t0 = skpx_mono_ms();
    assert_int_equal(query(c, 300, &res), SKP_ETIMEDOUT);
    int64_t dt = skpx_mono_ms() - t0;
    assert_true(dt >= 250); /* not before the deadline (allowing for ms rounding) */
    assert_true(dt < PROMPT_BOUND_MS);
    assert_int_equal(res.status, -1);
    struct skpx_grpc_client_stats st;
    skpx_grpc_client_get_stats(c, &st);
    assert_int_equal(st.connects, 1);
    /* The peer never spoke HTTP/2: the connection was dropped and backoff applies. */
    assert_int_equal(query(c, 300, &res), SKP_EUNAVAILABLE);
    skpx_grpc_client_get_stats(c, &st);
    assert_int_equal(st.connects, 1);
    skpx_grpc_client_free(c);
    peer_stop(&p);
}

static void test_peer_closes_after_accept(void **state)
{
    (void)state;
    struct peer p;
    peer_start(&p, PEER_CLOSE);
    struct skpx_grpc_client *c = client_for(p.port, 60000);
    struct skpx_grpc_result res;
    int64_t t0 = skpx_mono_ms();
    assert_int_equal(query(c, 5000, &res), SKP_EUNAVAILABLE);
    assert_true(skpx_mono_ms() - t0 < PROMPT_BOUND_MS);
    assert_true(res.message[0] != '\0');
    assert_int_equal(res.status, -1);
    /* Backoff after a connection that never served a call. */
    assert_int_equal(query(c, 5000, &res), SKP_EUNAVAILABLE);
    assert_non_null(strstr(res.message, "backing off"));
    struct skpx_grpc_client_stats st;
    skpx_grpc_client_get_stats(c, &st);
    assert_int_equal(st.connects, 1);
    skpx_grpc_client_free(c);
    peer_stop(&p);
}

/* Infinite source of ~1 KiB snapshots; counts pulls. */
struct src {
    long n_pulled;
    Skywalking__V3__ThreadSnapshot snap;
    Skywalking__V3__ThreadStack stack;
    char *frames[20];
    char frame[64];
};

static int next_snap(void *ud, const ProtobufCMessage **msg)
{
    struct src *s = ud;
    s->n_pulled++;
    s->snap.sequence = (int32_t)s->n_pulled;
    *msg = &s->snap.base;
    return 1;
}

static void src_init(struct src *s)
{
    memset(s, 0, sizeof(*s));
    Skywalking__V3__ThreadSnapshot snap = SKYWALKING__V3__THREAD_SNAPSHOT__INIT;
    Skywalking__V3__ThreadStack stack = SKYWALKING__V3__THREAD_STACK__INIT;
    s->snap = snap;
    s->stack = stack;
    memset(s->frame, 'f', sizeof(s->frame) - 1);
    for (int i = 0; i < 20; i++)
        s->frames[i] = s->frame;
    s->stack.n_codesignatures = 20;
    s->stack.codesignatures = s->frames;
    s->snap.taskid = "task";
    s->snap.tracesegmentid = "segment";
    s->snap.stack = &s->stack;
}

static void test_stream_to_peer_that_closes_no_sigpipe(void **state)
{
    (void)state;
    /* The peer reads one chunk and closes while we stream: our sends hit a closed socket.
     * No SIGPIPE handler is installed; SIGPIPE would kill this test process. */
    for (int round = 0; round < 3; round++) {
        struct peer p;
        peer_start(&p, PEER_READ_CLOSE);
        struct skpx_grpc_client *c = client_for(p.port, 60000);
        struct src s;
        src_init(&s);
        struct skpx_grpc_result res;
        ProtobufCMessage *resp = NULL;
        skp_err err =
            skpx_grpc_client_stream(c, PATH_SNAPSHOT, next_snap, &s,
                                    &skywalking__v3__commands__descriptor, &resp, 5000, &res);
        assert_int_equal(err, SKP_EUNAVAILABLE);
        assert_null(resp);
        skpx_grpc_client_free(c);
        peer_stop(&p);
    }
}

static void test_stream_to_peer_that_resets_no_sigpipe(void **state)
{
    (void)state;
    /* The client streams flat out into a wide-open window when the peer resets: sends after
     * the reset fail with ECONNRESET/EPIPE, which must not raise SIGPIPE (no handler is
     * installed here: SIGPIPE would kill the test). */
    for (int round = 0; round < 5; round++) {
        struct peer p;
        peer_start(&p, PEER_OPEN_WINDOW_RESET);
        struct skpx_grpc_client *c = client_for(p.port, 60000);
        struct src s;
        src_init(&s);
        struct skpx_grpc_result res;
        ProtobufCMessage *resp = NULL;
        skp_err err =
            skpx_grpc_client_stream(c, PATH_SNAPSHOT, next_snap, &s,
                                    &skywalking__v3__commands__descriptor, &resp, 10000, &res);
        assert_int_equal(err, SKP_EUNAVAILABLE);
        assert_true(s.n_pulled > 200); /* it did stream past the default 64 KiB window */
        skpx_grpc_client_free(c);
        peer_stop(&p);
    }
}

static void test_stream_memory_bounded_when_peer_never_reads(void **state)
{
    (void)state;
    struct peer p;
    peer_start(&p, PEER_SILENT);
    int64_t live0 = skpx_alloc_live_bytes();
    struct skpx_grpc_client *c = client_for(p.port, 60000);
    struct src s;
    src_init(&s);
    struct skpx_grpc_result res;
    ProtobufCMessage *resp = NULL;
    skp_err err = skpx_grpc_client_stream(c, PATH_SNAPSHOT, next_snap, &s,
                                          &skywalking__v3__commands__descriptor, &resp, 500, &res);
    assert_int_equal(err, SKP_ETIMEDOUT);
    /* The peer never granted more than HTTP/2's default 64 KiB window, so only about that
     * much was pulled from the source, whatever the deadline. */
    assert_true(s.n_pulled > 0);
    assert_true(s.n_pulled * 1000 < 200 * 1024);
    /* Buffers held during the call: far below what an unbounded producer would have queued. */
    assert_true(skpx_alloc_live_bytes() - live0 < 2 * 1024 * 1024);
    skpx_grpc_client_free(c);
    assert_int_equal(skpx_alloc_live_bytes(), live0);
    peer_stop(&p);
}

static int abort_src(void *ud, const ProtobufCMessage **msg)
{
    (void)msg;
    int *n = ud;
    (*n)++;
    return -1;
}

static void test_stream_source_abort(void **state)
{
    (void)state;
    struct peer p;
    peer_start(&p, PEER_SILENT);
    struct skpx_grpc_client *c = client_for(p.port, 60000);
    int n = 0;
    struct skpx_grpc_result res;
    ProtobufCMessage *resp = NULL;
    assert_int_equal(skpx_grpc_client_stream(c, PATH_SNAPSHOT, abort_src, &n,
                                             &skywalking__v3__commands__descriptor, &resp, 5000,
                                             &res),
                     SKP_EINVAL);
    assert_int_equal(n, 1);
    skpx_grpc_client_free(c);
    peer_stop(&p);
}

static skp_err client_new_body(void *ctx, long k)
{
    (void)ctx;
    (void)k;
    struct skpx_grpc_client_opts o = {
        .target = "127.0.0.1:1", .authentication = "tok", .user_agent = "ua/1"};
    struct skpx_grpc_client *c = NULL;
    skp_err err = skpx_grpc_client_new(&o, &c);
    if (err)
        assert_null(c);
    skpx_grpc_client_free(c);
    return err;
}

static void test_new_survives_alloc_failures(void **state)
{
    (void)state;
    struct skp_alloc_fault_runs runs = skp_test_alloc_faults(client_new_body, NULL, 200);
    assert_true(runs.n_ok > 0);
}

/* test_calls_survive_alloc_failures, one run: a fresh client, one call against the refusing
 * port. */
struct refused_run {
    int port;
    struct skpx_grpc_client *c;
};

static void refused_setup(void *ctx, long k)
{
    (void)k;
    struct refused_run *r = ctx;
    r->c = client_for(r->port, 1);
}

static skp_err refused_body(void *ctx, long k)
{
    (void)k;
    struct refused_run *r = ctx;
    struct skpx_grpc_result res;
    return query(r->c, 1000, &res);
}

static void refused_check(void *ctx, long k, skp_err err)
{
    (void)k;
    struct refused_run *r = ctx;
    assert_true(err == SKP_EUNAVAILABLE || err == SKP_ENOMEM);
    skpx_grpc_client_free(r->c);
    r->c = NULL;
}

static void test_calls_survive_alloc_failures(void **state)
{
    (void)state;
    /* Every allocation of a call against a refusing port, failed in turn: ENOMEM or
     * EUNAVAILABLE, never a crash or a leak. */
    struct refused_run run = {0};
    int hold = closed_port_fd(&run.port);
    struct skp_alloc_fault_loop loop = {.body = refused_body,
                                        .setup = refused_setup,
                                        .check = refused_check,
                                        .ctx = &run,
                                        .max_runs = 500,
                                        .other_errors = true};
    struct skp_alloc_fault_runs runs = skp_test_alloc_fault_loop(&loop);
    assert_true(runs.n_other > 0); /* the last run: refused, nothing failing */
    close(hold);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_targets),
        cmocka_unit_test(test_bad_call_args),
        cmocka_unit_test(test_refused_then_backoff),
        cmocka_unit_test(test_backoff_expires),
        cmocka_unit_test(test_connect_timeout),
        cmocka_unit_test(test_silent_peer_deadline),
        cmocka_unit_test(test_peer_closes_after_accept),
        cmocka_unit_test(test_stream_to_peer_that_closes_no_sigpipe),
        cmocka_unit_test(test_stream_to_peer_that_resets_no_sigpipe),
        cmocka_unit_test(test_stream_memory_bounded_when_peer_never_reads),
        cmocka_unit_test(test_stream_source_abort),
        cmocka_unit_test(test_new_survives_alloc_failures),
        cmocka_unit_test(test_calls_survive_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
