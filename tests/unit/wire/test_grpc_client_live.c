/* test_grpc_client_live.c - skpx_grpc_client against our own gRPC server (src/wire/grpc_server.c)
 * running in a forked child process: unary and streaming calls, stream reuse, server graceful
 * shutdown (GOAWAY) followed by a transparent reconnect, and allocation-failure injection over
 * whole calls (every allocation of the client and of nghttp2 goes through skpx_ and is failed in
 * turn: each call must end in a defined error, never crash, never leak).
 * The server lives in its own process so fault injection (process-global) only hits the client. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "common/alloc.h"
#include "harness/skp_alloc_faults.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/Command.pb-c.h"
#include "profile/Profile.pb-c.h"
#include "wire/grpc_client.h"
#include "wire/grpc_server.h"

#define PATH_QUERY "/skywalking.v3.ProfileTask/getProfileTaskCommands"
#define PATH_SNAPSHOT "/skywalking.v3.ProfileTask/collectSnapshot"
#define N_FAULT_POINTS 400

/* ---- the server child ------------------------------------------------------------------- */

static struct event_base *g_base;
static struct skpx_grpc_server *g_srv;

static void answer(struct skpx_grpc_call *call, const char *name, const char *count)
{
    Skywalking__V3__KeyStringValuePair kv = SKYWALKING__V3__KEY_STRING_VALUE_PAIR__INIT;
    Skywalking__V3__KeyStringValuePair *kvs[1] = {&kv};
    Skywalking__V3__Command cmd = SKYWALKING__V3__COMMAND__INIT;
    Skywalking__V3__Command *cmds[1] = {&cmd};
    Skywalking__V3__Commands resp = SKYWALKING__V3__COMMANDS__INIT;
    kv.key = "count";
    kv.value = (char *)count;
    cmd.command = (char *)name;
    cmd.n_args = 1;
    cmd.args = kvs;
    resp.n_commands = 1;
    resp.commands = cmds;
    skpx_grpc_call_finish(call, &resp.base, SKPX_GRPC_OK, NULL);
}

static int count_msg(struct skpx_grpc_call *call, void *ud, const ProtobufCMessage *msg,
                     const uint8_t *raw, size_t raw_len)
{
    (void)ud;
    (void)msg;
    (void)raw;
    (void)raw_len;
    uintptr_t n = (uintptr_t)skpx_grpc_call_get_data(call);
    skpx_grpc_call_set_data(call, (void *)(n + 1));
    return SKPX_GRPC_OK;
}

static void count_end(struct skpx_grpc_call *call, void *ud)
{
    (void)ud;
    char buf[32];
    snprintf(buf, sizeof(buf), "%lu", (unsigned long)(uintptr_t)skpx_grpc_call_get_data(call));
    answer(call, "Ack", buf);
}

static void on_shutdown_done(void *ud)
{
    (void)ud;
    event_base_loopbreak(g_base);
}

static void on_sigusr1(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    skpx_grpc_server_shutdown(g_srv, 2000, on_shutdown_done, NULL);
}

/* Runs in the child: serves until SIGKILL, or until SIGUSR1 asks for a graceful shutdown. */
static void server_child(int port_fd)
{
    /* A server process ignores SIGPIPE, as skyprofd does (libevent writes with write()). */
    signal(SIGPIPE, SIG_IGN);
    if (getenv("SKP_TEST_DEBUG"))
        skpx_log_set_sink(skpx_log_sink_fd, (void *)(intptr_t)2, SKPX_LOG_DEBUG);
    g_base = event_base_new();
    if (!g_base || skpx_grpc_server_new(g_base, NULL, &g_srv) != SKP_OK)
        _exit(2);
    struct skpx_grpc_method query = {
        .path = PATH_QUERY,
        .request_desc = &skywalking__v3__profile_task_command_query__descriptor,
        .on_message = count_msg,
        .on_end = count_end,
    };
    struct skpx_grpc_method snap = {
        .path = PATH_SNAPSHOT,
        .client_streaming = true,
        .request_desc = &skywalking__v3__thread_snapshot__descriptor,
        .on_message = count_msg,
        .on_end = count_end,
    };
    uint16_t port = 0;
    if (skpx_grpc_server_add_method(g_srv, &query) || skpx_grpc_server_add_method(g_srv, &snap) ||
        skpx_grpc_server_listen(g_srv, "127.0.0.1:0", &port))
        _exit(2);
    struct event *sig = evsignal_new(g_base, SIGUSR1, on_sigusr1, NULL);
    evsignal_add(sig, NULL);
    if (write(port_fd, &port, sizeof(port)) != (ssize_t)sizeof(port))
        _exit(2);
    close(port_fd);
    event_base_dispatch(g_base);
    _exit(0);
}

struct server {
    pid_t pid;
    int port;
};

static void server_start(struct server *s)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    fflush(NULL);
    s->pid = fork();
    assert_true(s->pid >= 0);
    if (s->pid == 0) {
        /* A failed assertion in the parent skips server_kill(): never outlive the test. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(p[0]);
        server_child(p[1]);
    }
    close(p[1]);
    uint16_t port = 0;
    assert_int_equal(read(p[0], &port, sizeof(port)), (ssize_t)sizeof(port));
    close(p[0]);
    s->port = port;
}

static int server_wait(struct server *s)
{
    int st = 0;
    while (waitpid(s->pid, &st, 0) < 0 && errno == EINTR) {
    }
    return st;
}

static void server_kill(struct server *s)
{
    kill(s->pid, SIGKILL);
    (void)server_wait(s);
}

/* ---- client side ------------------------------------------------------------------------ */

static struct skpx_grpc_client *client_for(int port)
{
    char target[64];
    snprintf(target, sizeof(target), "127.0.0.1:%d", port);
    struct skpx_grpc_client_opts o = {.target = target, .backoff_min_ms = 1, .backoff_max_ms = 1};
    struct skpx_grpc_client *c = NULL;
    assert_int_equal(skpx_grpc_client_new(&o, &c), SKP_OK);
    return c;
}

static const char *ack_count(const ProtobufCMessage *m)
{
    const Skywalking__V3__Commands *cmds = (const Skywalking__V3__Commands *)m;
    if (cmds->n_commands != 1 || cmds->commands[0]->n_args != 1)
        return NULL;
    return cmds->commands[0]->args[0]->value;
}

static skp_err query(struct skpx_grpc_client *c, struct skpx_grpc_result *res)
{
    Skywalking__V3__ProfileTaskCommandQuery q = SKYWALKING__V3__PROFILE_TASK_COMMAND_QUERY__INIT;
    q.service = "svc";
    q.serviceinstance = "inst";
    q.lastcommandtime = -1;
    ProtobufCMessage *resp = NULL;
    skp_err err = skpx_grpc_client_unary(c, PATH_QUERY, &q.base,
                                         &skywalking__v3__commands__descriptor, &resp, 10000, res);
    if (!err) {
        const char *n = ack_count(resp);
        assert_non_null(n);
        assert_string_equal(n, "1");
        protobuf_c_message_free_unpacked(resp, NULL);
    } else {
        assert_null(resp);
    }
    return err;
}

struct src {
    long n_total;
    long n_sent;
    Skywalking__V3__ThreadSnapshot snap;
    Skywalking__V3__ThreadStack stack;
    char *frames[20];
};

static int next_snap(void *ud, const ProtobufCMessage **msg)
{
    struct src *s = ud;
    if (s->n_sent >= s->n_total)
        return 0;
    s->snap.sequence = (int32_t)s->n_sent++;
    *msg = &s->snap.base;
    return 1;
}

static void src_init(struct src *s, long n)
{
    memset(s, 0, sizeof(*s));
    Skywalking__V3__ThreadSnapshot snap = SKYWALKING__V3__THREAD_SNAPSHOT__INIT;
    Skywalking__V3__ThreadStack stack = SKYWALKING__V3__THREAD_STACK__INIT;
    s->snap = snap;
    s->stack = stack;
    for (int i = 0; i < 20; i++)
        s->frames[i] = "org.example.Service.method(Service.java:123)";
    s->stack.n_codesignatures = 20;
    s->stack.codesignatures = s->frames;
    s->snap.taskid = "task";
    s->snap.tracesegmentid = "segment";
    s->snap.stack = &s->stack;
    s->n_total = n;
}

static skp_err stream(struct skpx_grpc_client *c, long n, struct skpx_grpc_result *res)
{
    struct src s;
    src_init(&s, n);
    ProtobufCMessage *resp = NULL;
    skp_err err = skpx_grpc_client_stream(c, PATH_SNAPSHOT, next_snap, &s,
                                          &skywalking__v3__commands__descriptor, &resp, 30000, res);
    if (!err) {
        char want[32];
        snprintf(want, sizeof(want), "%ld", n);
        const char *got = ack_count(resp);
        assert_non_null(got);
        assert_string_equal(got, want);
        protobuf_c_message_free_unpacked(resp, NULL);
    } else {
        assert_null(resp);
    }
    return err;
}

/* ---- tests ------------------------------------------------------------------------------ */

static void test_unary_and_stream(void **state)
{
    (void)state;
    struct server s;
    server_start(&s);
    struct skpx_grpc_client *c = client_for(s.port);
    struct skpx_grpc_result res;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(query(c, &res), SKP_OK);
        assert_int_equal(res.status, 0);
    }
    assert_int_equal(stream(c, 0, &res), SKP_OK);
    assert_int_equal(stream(c, 1, &res), SKP_OK);
    assert_int_equal(stream(c, 50000, &res), SKP_OK); /* many windows' and buffers' worth */
    assert_int_equal(query(c, &res), SKP_OK);
    struct skpx_grpc_client_stats st;
    skpx_grpc_client_get_stats(c, &st);
    assert_int_equal(st.connects, 1);
    assert_int_equal(st.calls_ok, 7);
    assert_int_equal(st.calls_failed, 0);
    assert_true(st.bytes_sent > 50000u * 900u);
    /* A unary request spanning several DATA frames. */
    char *big = skpx_malloc(100 * 1024 + 1);
    assert_non_null(big);
    memset(big, 's', 100 * 1024);
    big[100 * 1024] = '\0';
    Skywalking__V3__ProfileTaskCommandQuery q = SKYWALKING__V3__PROFILE_TASK_COMMAND_QUERY__INIT;
    q.service = big;
    ProtobufCMessage *resp = NULL;
    assert_int_equal(skpx_grpc_client_unary(c, PATH_QUERY, &q.base,
                                            &skywalking__v3__commands__descriptor, &resp, 10000,
                                            &res),
                     SKP_OK);
    assert_string_equal(ack_count(resp), "1");
    protobuf_c_message_free_unpacked(resp, NULL);
    skpx_free(big);
    skpx_grpc_client_disconnect(c);
    assert_int_equal(query(c, &res), SKP_OK); /* reconnects at once after a disconnect */
    skpx_grpc_client_get_stats(c, &st);
    assert_int_equal(st.connects, 2);
    skpx_grpc_client_free(c);
    server_kill(&s);
}

/* Messages larger than a DATA frame (~70 KiB each) are split across frames via the staging
 * buffer; small and large messages alternate so frame boundaries fall everywhere. */
struct big_src {
    long n_total;
    long n_sent;
    Skywalking__V3__ThreadSnapshot snap;
    Skywalking__V3__ThreadStack big;
    Skywalking__V3__ThreadStack small;
    char *frames[1000];
    char frame[72];
};

static int next_big(void *ud, const ProtobufCMessage **msg)
{
    struct big_src *s = ud;
    if (s->n_sent >= s->n_total)
        return 0;
    s->snap.stack = (s->n_sent % 3 == 0) ? &s->small : &s->big;
    s->snap.sequence = (int32_t)s->n_sent++;
    *msg = &s->snap.base;
    return 1;
}

static void test_messages_larger_than_a_frame(void **state)
{
    (void)state;
    struct server s;
    server_start(&s);
    struct skpx_grpc_client *c = client_for(s.port);
    struct big_src *b = skpx_calloc(1, sizeof(*b));
    assert_non_null(b);
    Skywalking__V3__ThreadSnapshot snap = SKYWALKING__V3__THREAD_SNAPSHOT__INIT;
    Skywalking__V3__ThreadStack st1 = SKYWALKING__V3__THREAD_STACK__INIT;
    Skywalking__V3__ThreadStack st2 = SKYWALKING__V3__THREAD_STACK__INIT;
    b->snap = snap;
    b->big = st1;
    b->small = st2;
    memset(b->frame, 'x', sizeof(b->frame) - 1);
    for (int i = 0; i < 1000; i++)
        b->frames[i] = b->frame;
    b->big.n_codesignatures = 1000;
    b->big.codesignatures = b->frames;
    b->small.n_codesignatures = 3;
    b->small.codesignatures = b->frames;
    b->snap.taskid = "task";
    b->snap.tracesegmentid = "segment";
    b->n_total = 300;
    assert_true(protobuf_c_message_get_packed_size(&b->big.base) > 64 * 1024);
    struct skpx_grpc_result res;
    ProtobufCMessage *resp = NULL;
    assert_int_equal(skpx_grpc_client_stream(c, PATH_SNAPSHOT, next_big, b,
                                             &skywalking__v3__commands__descriptor, &resp, 30000,
                                             &res),
                     SKP_OK);
    const char *n = ack_count(resp);
    assert_non_null(n);
    assert_string_equal(n, "300");
    protobuf_c_message_free_unpacked(resp, NULL);
    skpx_free(b);
    skpx_grpc_client_free(c);
    server_kill(&s);
}

static void test_graceful_shutdown_then_new_server(void **state)
{
    (void)state;
    struct server s;
    server_start(&s);
    struct skpx_grpc_client *c = client_for(s.port);
    struct skpx_grpc_result res;
    assert_int_equal(query(c, &res), SKP_OK);
    /* GOAWAY + close while the client is idle; the server process then exits. */
    kill(s.pid, SIGUSR1);
    int st = server_wait(&s);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* Nobody listens now: the client notices the closed connection and fails to reconnect. */
    assert_int_equal(query(c, &res), SKP_EUNAVAILABLE);
    struct server s2;
    server_start(&s2);
    skpx_grpc_client_free(c);
    c = client_for(s2.port);
    assert_int_equal(query(c, &res), SKP_OK);
    skpx_grpc_client_free(c);
    server_kill(&s2);
}

/* fault_sweep, one run: a fresh client, one whole call (connect, session, call, response) with
 * the k-th allocation failing; a failed call is retried once memory is back. */
struct sweep_run {
    int port;
    pid_t server_pid;
    bool is_stream;
    struct skpx_grpc_client *c;
    struct skpx_grpc_result res;
};

static void sweep_setup(void *ctx, long k)
{
    (void)k;
    struct sweep_run *r = ctx;
    r->c = client_for(r->port);
}

static skp_err sweep_body(void *ctx, long k)
{
    (void)k;
    struct sweep_run *r = ctx;
    return r->is_stream ? stream(r->c, 2000, &r->res) : query(r->c, &r->res);
}

static void sweep_check(void *ctx, long k, skp_err err)
{
    struct sweep_run *r = ctx;
    assert_true(err == SKP_OK || err == SKP_ENOMEM || err == SKP_EUNAVAILABLE || err == SKP_EPROTO);
    if (err) {
        /* The same client recovers once memory is back. */
        skpx_grpc_client_reset_backoff(r->c);
        char first[sizeof(r->res.message)];
        snprintf(first, sizeof(first), "%s", r->res.message);
        skp_err again = r->is_stream ? stream(r->c, 10, &r->res) : query(r->c, &r->res);
        if (again != SKP_OK) {
            int wst = 0;
            pid_t w = waitpid(r->server_pid, &wst, WNOHANG);
            print_error("fault at allocation %ld: %s (%s); retry: %s (%s); server %s\n", k,
                        skp_strerror(err), first, skp_strerror(again), r->res.message,
                        w == 0 ? "alive" : "exited");
            if (w > 0 && WIFSIGNALED(wst))
                print_error("server killed by signal %d\n", WTERMSIG(wst));
            if (w > 0 && WIFEXITED(wst))
                print_error("server exit status %d\n", WEXITSTATUS(wst));
        }
        assert_int_equal(again, SKP_OK);
    }
    skpx_grpc_client_free(r->c);
    r->c = NULL;
}

/* Fails the k-th allocation of one whole call for every k, until a call makes fewer. */
static void fault_sweep(int port, pid_t server_pid, bool is_stream)
{
    struct sweep_run run = {.port = port, .server_pid = server_pid, .is_stream = is_stream};
    struct skp_alloc_fault_loop loop = {.body = sweep_body,
                                        .setup = sweep_setup,
                                        .check = sweep_check,
                                        .ctx = &run,
                                        .max_runs = N_FAULT_POINTS,
                                        .other_errors = true};
    struct skp_alloc_fault_runs runs = skp_test_alloc_fault_loop(&loop);
    assert_true(runs.n_nomem + runs.n_other > 0);
}

static void test_unary_alloc_faults(void **state)
{
    (void)state;
    struct server s;
    server_start(&s);
    fault_sweep(s.port, s.pid, false);
    server_kill(&s);
}

static void test_stream_alloc_faults(void **state)
{
    (void)state;
    struct server s;
    server_start(&s);
    fault_sweep(s.port, s.pid, true);
    server_kill(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary_and_stream),
        cmocka_unit_test(test_messages_larger_than_a_frame),
        cmocka_unit_test(test_graceful_shutdown_then_new_server),
        cmocka_unit_test(test_unary_alloc_faults),
        cmocka_unit_test(test_stream_alloc_faults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
