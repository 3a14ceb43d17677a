/* bench_grpc_stream.c - client-streaming throughput of skyprof's gRPC pair on loopback.
 *
 * The server (src/wire/grpc_server.c, decoding every ThreadSnapshot with protobuf-c as the
 * backend does) runs its libevent loop in a second thread; the main thread streams
 * ThreadSnapshots (20 frames of ~40-byte strings, ~1 KB packed) with our client
 * (src/wire/grpc_client.c) and reports messages/s, the median over several streams.
 *
 * Usage:
 *   bench_grpc_stream [--rounds N] [--sizes 10000,100000]   run the C pair and print figures
 *   bench_grpc_stream --serve                              only serve: print "PORT <n>", run
 *                                                          until stdin closes (for grpcio runs)
 */
#include <event2/event.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/Command.pb-c.h"
#include "common/clock.h"
#include "profile/Profile.pb-c.h"
#include "wire/grpc_server.h"
#include "wire/grpc_client.h"

#define BENCH_FRAMES 20
#define BENCH_MAX_ROUNDS 32
#define BENCH_MAX_SIZES 8
#define BENCH_PATH "/skywalking.v3.ProfileTask/collectSnapshot"

/* ---------------------------------------------------------------- server side */

struct bench_server {
    struct event_base *base;
    struct skpx_grpc_server *srv;
    struct event *stop_ev;
    int stop_pipe[2];
    uint16_t port;
    uint64_t bad_messages; /* messages whose content was not what the client sent */
    int64_t cpu_ns;        /* CPU time of the server thread (load-independent cost) */
};

static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct stream_count {
    uint64_t n;
    uint64_t frames;
};

static int srv_message(struct skpx_grpc_call *call, void *ud, const ProtobufCMessage *msg,
                       const uint8_t *raw, size_t raw_len)
{
    (void)raw;
    (void)raw_len;
    struct bench_server *bs = ud;
    const Skywalking__V3__ThreadSnapshot *s = (const Skywalking__V3__ThreadSnapshot *)msg;
    struct stream_count *sc = skpx_grpc_call_get_data(call);
    if (!sc) {
        sc = skpx_xcalloc(1, sizeof(*sc));
        skpx_grpc_call_set_data(call, sc);
    }
    if ((uint64_t)s->sequence != sc->n || !s->stack || s->stack->n_codesignatures != BENCH_FRAMES)
        bs->bad_messages++;
    sc->frames += s->stack ? s->stack->n_codesignatures : 0;
    sc->n++;
    return SKPX_GRPC_OK;
}

static void srv_end(struct skpx_grpc_call *call, void *ud)
{
    (void)ud;
    struct stream_count *sc = skpx_grpc_call_get_data(call);
    char count[32];
    snprintf(count, sizeof(count), "%llu", (unsigned long long)(sc ? sc->n : 0));
    Skywalking__V3__KeyStringValuePair kv = SKYWALKING__V3__KEY_STRING_VALUE_PAIR__INIT;
    Skywalking__V3__KeyStringValuePair *kvp[1] = {&kv};
    Skywalking__V3__Command cmd = SKYWALKING__V3__COMMAND__INIT;
    Skywalking__V3__Command *cmds[1] = {&cmd};
    Skywalking__V3__Commands resp = SKYWALKING__V3__COMMANDS__INIT;
    kv.key = "count";
    kv.value = count;
    cmd.command = "SnapshotAck";
    cmd.n_args = 1;
    cmd.args = kvp;
    resp.n_commands = 1;
    resp.commands = cmds;
    skpx_grpc_call_finish(call, &resp.base, SKPX_GRPC_OK, NULL);
}

static void srv_close(struct skpx_grpc_call *call, void *ud, int status)
{
    (void)ud;
    (void)status;
    skpx_free(skpx_grpc_call_get_data(call));
}

static void stop_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct bench_server *bs = arg;
    event_base_loopbreak(bs->base);
}

static int server_start(struct bench_server *bs, int stop_fd)
{
    bs->base = event_base_new();
    if (!bs->base || skpx_grpc_server_new(bs->base, NULL, &bs->srv) != SKP_OK)
        return -1;
    struct skpx_grpc_method m = {
        .path = BENCH_PATH,
        .client_streaming = true,
        .request_desc = &skywalking__v3__thread_snapshot__descriptor,
        .on_message = srv_message,
        .on_end = srv_end,
        .on_close = srv_close,
        .ud = bs,
    };
    if (skpx_grpc_server_add_method(bs->srv, &m) != SKP_OK)
        return -1;
    /* Compat path, as the backend registers it (agents of older SkyWalking versions). */
    m.path = "/ProfileTask/collectSnapshot";
    if (skpx_grpc_server_add_method(bs->srv, &m) != SKP_OK)
        return -1;
    if (skpx_grpc_server_listen(bs->srv, "127.0.0.1:0", &bs->port) != SKP_OK)
        return -1;
    bs->stop_ev = event_new(bs->base, stop_fd, EV_READ, stop_cb, bs);
    event_add(bs->stop_ev, NULL);
    return 0;
}

static void server_cleanup(struct bench_server *bs)
{
    skpx_grpc_server_free(bs->srv);
    if (bs->stop_ev)
        event_free(bs->stop_ev);
    if (bs->base)
        event_base_free(bs->base);
}

static void *server_thread(void *arg)
{
    struct bench_server *bs = arg;
    int64_t t0 = thread_cpu_ns();
    event_base_dispatch(bs->base);
    bs->cpu_ns = thread_cpu_ns() - t0;
    return NULL;
}

/* ---------------------------------------------------------------- client side */

struct gen {
    Skywalking__V3__ThreadSnapshot snap;
    Skywalking__V3__ThreadStack stack;
    char *frames[BENCH_FRAMES];
    char frame_buf[BENCH_FRAMES][48];
    uint64_t sent;
    uint64_t total;
};

static void gen_init(struct gen *g, uint64_t total)
{
    memset(g, 0, sizeof(*g));
    skywalking__v3__thread_snapshot__init(&g->snap);
    skywalking__v3__thread_stack__init(&g->stack);
    for (int i = 0; i < BENCH_FRAMES; i++) {
        /* ~40-byte code signatures, like "module.Class.method(file.py:123)". */
        snprintf(g->frame_buf[i], sizeof(g->frame_buf[i]),
                 "app.service.Handler.method_%02d(h.py:%d)", i, 100 + i);
        g->frames[i] = g->frame_buf[i];
    }
    g->stack.n_codesignatures = BENCH_FRAMES;
    g->stack.codesignatures = g->frames;
    g->snap.taskid = "3f2a9c1e-8b7d-4e6f-a5c4-1d2e3f4a5b6c";
    g->snap.tracesegmentid = "a1b2c3d4e5f60718293a4b5c6d7e8f90.42.17000000000000001";
    g->snap.stack = &g->stack;
    g->total = total;
}

static int gen_next(void *ud, const ProtobufCMessage **msg)
{
    struct gen *g = ud;
    if (g->sent == g->total)
        return 0;
    g->snap.sequence = (int32_t)g->sent;
    g->snap.time = 1700000000000LL + (int64_t)g->sent;
    g->sent++;
    *msg = &g->snap.base;
    return 1;
}

static size_t gen_packed_size(void)
{
    struct gen g;
    gen_init(&g, 1);
    g.snap.sequence = 12345;
    g.snap.time = 1700000000000LL;
    return protobuf_c_message_get_packed_size(&g.snap.base);
}

/* One stream of `n` messages; returns msg/s or -1. */
static double run_stream(struct skpx_grpc_client *cl, uint64_t n)
{
    struct gen g;
    gen_init(&g, n);
    struct skpx_grpc_result res;
    ProtobufCMessage *resp = NULL;
    int64_t t0 = skpx_mono_ns();
    skp_err err =
        skpx_grpc_client_stream(cl, BENCH_PATH, gen_next, &g,
                                &skywalking__v3__commands__descriptor, &resp, 120000, &res);
    int64_t dt = skpx_mono_ns() - t0;
    if (err) {
        fprintf(stderr, "stream failed: %s (status %d: %s)\n", skp_strerror(err), res.status,
                res.message);
        return -1;
    }
    Skywalking__V3__Commands *c = (Skywalking__V3__Commands *)resp;
    bool ok = c->n_commands == 1 && c->commands[0]->n_args == 1 &&
              strtoull(c->commands[0]->args[0]->value, NULL, 10) == n;
    protobuf_c_message_free_unpacked(resp, NULL);
    if (!ok) {
        fprintf(stderr, "server acknowledged a wrong count\n");
        return -1;
    }
    return (double)n * 1e9 / (double)dt;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int serve_only(void)
{
    struct bench_server bs = {0};
    /* stdin closing (the driving script exits) stops the server. */
    if (server_start(&bs, 0) != 0) {
        fprintf(stderr, "cannot start server\n");
        return 1;
    }
    printf("PORT %u\n", bs.port);
    fflush(stdout);
    event_base_dispatch(bs.base);
    struct skpx_grpc_server_stats st;
    skpx_grpc_server_get_stats(bs.srv, &st);
    fprintf(stderr, "served %llu messages in %llu calls, %llu bad\n",
            (unsigned long long)st.messages_received, (unsigned long long)st.calls_started,
            (unsigned long long)bs.bad_messages);
    server_cleanup(&bs);
    return bs.bad_messages ? 1 : 0;
}

int main(int argc, char **argv)
{
    int rounds = 5;
    uint64_t sizes[BENCH_MAX_SIZES] = {10000, 100000};
    int n_sizes = 2;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--serve") == 0)
            return serve_only();
        if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
            rounds = (int)strtol(argv[++i], NULL, 10);
            if (rounds < 1 || rounds > BENCH_MAX_ROUNDS)
                rounds = 5;
        } else if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc) {
            n_sizes = 0;
            char *p = argv[++i];
            while (*p && n_sizes < BENCH_MAX_SIZES) {
                sizes[n_sizes++] = strtoull(p, &p, 10);
                if (*p == ',')
                    p++;
            }
        } else {
            fprintf(stderr, "usage: %s [--serve] [--rounds N] [--sizes a,b]\n", argv[0]);
            return 2;
        }
    }
    struct bench_server bs = {0};
    if (pipe(bs.stop_pipe) != 0 || server_start(&bs, bs.stop_pipe[0]) != 0) {
        fprintf(stderr, "cannot start server\n");
        return 1;
    }
    pthread_t th;
    pthread_create(&th, NULL, server_thread, &bs);

    char target[64];
    snprintf(target, sizeof(target), "127.0.0.1:%u", bs.port);
    struct skpx_grpc_client_opts copts = {.target = target};
    struct skpx_grpc_client *cl = NULL;
    if (skpx_grpc_client_new(&copts, &cl) != SKP_OK) {
        fprintf(stderr, "cannot create client\n");
        return 1;
    }
    printf("message: ThreadSnapshot, %d frames, %zu bytes packed\n", BENCH_FRAMES,
           gen_packed_size());
    int rc = 0;
    (void)run_stream(cl, 1000); /* warm-up: connect, grow buffers */
    uint64_t n_sent = 0;
    int64_t client_cpu0 = thread_cpu_ns();
    for (int s = 0; s < n_sizes; s++) {
        double rates[BENCH_MAX_ROUNDS];
        for (int r = 0; r < rounds; r++) {
            rates[r] = run_stream(cl, sizes[s]);
            if (rates[r] < 0)
                rc = 1;
            n_sent += sizes[s];
        }
        qsort(rates, (size_t)rounds, sizeof(double), cmp_double);
        printf("skyprof client -> skyprof server: %8llu msgs/stream: median %.0f msg/s "
               "(min %.0f, max %.0f, %d streams)\n",
               (unsigned long long)sizes[s], rates[rounds / 2], rates[0], rates[rounds - 1],
               rounds);
    }
    int64_t client_cpu = thread_cpu_ns() - client_cpu0;
    skpx_grpc_client_free(cl);
    if (write(bs.stop_pipe[1], "x", 1) != 1)
        rc = 1;
    pthread_join(th, NULL);
    /* CPU per message does not depend on what else the machine runs (wall-clock rates do). */
    uint64_t n_all = n_sent + 1000;
    printf("CPU per message: client %.0f ns (%.0f msg/s per core), server %.0f ns "
           "(%.0f msg/s per core, incl. protobuf decode)\n",
           (double)client_cpu / (double)n_sent, 1e9 * (double)n_sent / (double)client_cpu,
           (double)bs.cpu_ns / (double)n_all, 1e9 * (double)n_all / (double)bs.cpu_ns);
    if (bs.bad_messages) {
        fprintf(stderr, "server saw %llu unexpected messages\n",
                (unsigned long long)bs.bad_messages);
        rc = 1;
    }
    server_cleanup(&bs);
    close(bs.stop_pipe[0]);
    close(bs.stop_pipe[1]);
    fflush(stdout);
    return rc;
}
