/* grpc_test_server.c - the gRPC server of src/wire with a few SkyWalking-shaped test methods, for
 * the interop suite (driven by grpcio and hand-built HTTP/2 frames). Prints "PORT <n>" once it
 * listens on 127.0.0.1:0; SIGTERM starts a graceful shutdown; at exit prints the server stats and
 * how many calls were opened and closed (they must match), then exits 0 (3 when they differ).
 * SIGPIPE keeps its default action on purpose: peers that vanish must never raise it.
 *
 * Progress lines for tests that must know a call reached the server: "PROGRESS <taskId> 200" when a
 * snapshot stream's 200th message arrives, "ASYNC_WAIT" when an asynchronous answer is pending.
 *
 * Usage: grpc_test_server [max_msg_bytes [auth_token [max_connections [grace_ms]]]] */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "common/alloc.h"
#include "common/log.h"
#include "common/Command.pb-c.h"
#include "profile/Profile.pb-c.h"
#include "wire/grpc_server.h"

#define TEST_ASYNC_DELAY_MS 150
#define TEST_MAX_ARGS 8

static uint64_t g_opened;
static uint64_t g_closed;
static const char *g_token = "secret-token";
static struct event_base *g_base;
static struct skpx_grpc_server *g_srv;
static int g_grace_ms = 10000;

struct stream_state {
    uint64_t count;
    uint64_t checksum;   /* FNV-1a 64 over the fields of every message, see fnv_* below */
    struct event *timer; /* async finish */
    struct skpx_grpc_call *call;
    char service[256];
    char instance[256];
    int64_t last;
};

static void fnv_bytes(uint64_t *h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        *h ^= b[i];
        *h *= 1099511628211ULL;
    }
}

static void fnv_str(uint64_t *h, const char *s)
{
    fnv_bytes(h, s, strlen(s));
    fnv_bytes(h, "\n", 1);
}

/* Replies with one Command named `name` carrying `n` key/value args. */
static void finish_command(struct skpx_grpc_call *call, const char *name, const char *const *kv,
                           size_t n)
{
    Skywalking__V3__KeyStringValuePair pairs[TEST_MAX_ARGS];
    Skywalking__V3__KeyStringValuePair *pp[TEST_MAX_ARGS];
    Skywalking__V3__Command cmd = SKYWALKING__V3__COMMAND__INIT;
    Skywalking__V3__Command *cmds[1] = {&cmd};
    Skywalking__V3__Commands resp = SKYWALKING__V3__COMMANDS__INIT;
    for (size_t i = 0; i < n && i < TEST_MAX_ARGS; i++) {
        skywalking__v3__key_string_value_pair__init(&pairs[i]);
        pairs[i].key = (char *)kv[2 * i];
        pairs[i].value = (char *)kv[2 * i + 1];
        pp[i] = &pairs[i];
    }
    cmd.command = (char *)name;
    cmd.n_args = n;
    cmd.args = pp;
    resp.n_commands = 1;
    resp.commands = cmds;
    skpx_grpc_call_finish(call, &resp.base, SKPX_GRPC_OK, NULL);
}

static int on_start_count(struct skpx_grpc_call *call, void *ud)
{
    (void)call;
    (void)ud;
    g_opened++;
    return SKPX_GRPC_OK;
}

static void on_close_count(struct skpx_grpc_call *call, void *ud, int status)
{
    (void)ud;
    (void)status;
    struct stream_state *st = skpx_grpc_call_get_data(call);
    if (st) {
        if (st->timer)
            event_free(st->timer);
        skpx_free(st);
    }
    g_closed++;
}

static struct stream_state *state_of(struct skpx_grpc_call *call)
{
    struct stream_state *st = skpx_grpc_call_get_data(call);
    if (!st) {
        st = skpx_xcalloc(1, sizeof(*st));
        st->checksum = 14695981039346656037ULL;
        st->call = call;
        skpx_grpc_call_set_data(call, st);
    }
    return st;
}

/* ---- collectSnapshot: count + checksum, sequence must equal the message index */

static int snap_message(struct skpx_grpc_call *call, void *ud, const ProtobufCMessage *msg,
                        const uint8_t *raw, size_t raw_len)
{
    (void)ud;
    (void)raw;
    (void)raw_len;
    const Skywalking__V3__ThreadSnapshot *s = (const Skywalking__V3__ThreadSnapshot *)msg;
    struct stream_state *st = state_of(call);
    if ((uint64_t)s->sequence != st->count)
        return SKPX_GRPC_INVALID_ARGUMENT;
    char num[64];
    fnv_str(&st->checksum, s->taskid);
    fnv_str(&st->checksum, s->tracesegmentid);
    snprintf(num, sizeof(num), "%lld", (long long)s->time);
    fnv_str(&st->checksum, num);
    snprintf(num, sizeof(num), "%d", s->sequence);
    fnv_str(&st->checksum, num);
    if (s->stack) {
        for (size_t i = 0; i < s->stack->n_codesignatures; i++)
            fnv_str(&st->checksum, s->stack->codesignatures[i]);
    }
    st->count++;
    if (st->count == 200) {
        printf("PROGRESS %s 200\n", s->taskid);
        fflush(stdout);
    }
    return SKPX_GRPC_OK;
}

static void snap_end(struct skpx_grpc_call *call, void *ud)
{
    (void)ud;
    struct stream_state *st = state_of(call);
    char count[32], sum[32];
    snprintf(count, sizeof(count), "%llu", (unsigned long long)st->count);
    snprintf(sum, sizeof(sum), "%016llx", (unsigned long long)st->checksum);
    const char *kv[] = {"count", count, "checksum", sum};
    finish_command(call, "SnapshotAck", kv, 2);
}

/* ---- getProfileTaskCommands (and its compat path): echo the query */

static int query_message(struct skpx_grpc_call *call, void *ud, const ProtobufCMessage *msg,
                         const uint8_t *raw, size_t raw_len)
{
    (void)ud;
    (void)raw;
    (void)raw_len;
    const Skywalking__V3__ProfileTaskCommandQuery *q =
        (const Skywalking__V3__ProfileTaskCommandQuery *)msg;
    struct stream_state *st = state_of(call);
    st->count++;
    snprintf(st->service, sizeof(st->service), "%s", q->service);
    snprintf(st->instance, sizeof(st->instance), "%s", q->serviceinstance);
    st->last = q->lastcommandtime;
    return SKPX_GRPC_OK;
}

static void query_end(struct skpx_grpc_call *call, void *ud)
{
    (void)ud;
    struct stream_state *st = state_of(call);
    char last[32];
    snprintf(last, sizeof(last), "%lld", (long long)st->last);
    const char *ua = skpx_grpc_call_metadata(call, "user-agent");
    const char *kv[] = {"service",
                        st->service,
                        "serviceInstance",
                        st->instance,
                        "lastCommandTime",
                        last,
                        "path",
                        skpx_grpc_call_path(call),
                        "peer",
                        skpx_grpc_call_peer(call),
                        "user-agent",
                        ua ? ua : ""};
    finish_command(call, "Echo", kv, 6);
}

/* ---- reportTaskFinish: refused unless `authentication` equals the token */

static int auth_start(struct skpx_grpc_call *call, void *ud)
{
    g_opened++;
    (void)ud;
    const char *tok = skpx_grpc_call_metadata(call, "authentication");
    if (!tok || strcmp(tok, g_token) != 0)
        return SKPX_GRPC_UNAUTHENTICATED;
    return SKPX_GRPC_OK;
}

static int report_message(struct skpx_grpc_call *call, void *ud, const ProtobufCMessage *msg,
                          const uint8_t *raw, size_t raw_len)
{
    (void)ud;
    (void)raw;
    (void)raw_len;
    const Skywalking__V3__ProfileTaskFinishReport *r =
        (const Skywalking__V3__ProfileTaskFinishReport *)msg;
    struct stream_state *st = state_of(call);
    snprintf(st->service, sizeof(st->service), "%s", r->taskid);
    return SKPX_GRPC_OK;
}

static void report_end(struct skpx_grpc_call *call, void *ud)
{
    (void)ud;
    struct stream_state *st = state_of(call);
    const char *kv[] = {"taskId", st->service};
    finish_command(call, "Finished", kv, 1);
}

/* ---- goProfileReport: answered asynchronously from a timer after the stream ends, like the
 * backend's ack after a storage commit (TEST_ASYNC_DELAY_MS, or `x-delay-ms` metadata).
 * A payload "fail" answers DATA_LOSS. */

static int go_message(struct skpx_grpc_call *call, void *ud, const ProtobufCMessage *msg,
                      const uint8_t *raw, size_t raw_len)
{
    (void)ud;
    (void)raw;
    (void)raw_len;
    const Skywalking__V3__GoProfileData *d = (const Skywalking__V3__GoProfileData *)msg;
    struct stream_state *st = state_of(call);
    st->count++;
    st->checksum += d->payload.len;
    if (d->payload.len == 4 && memcmp(d->payload.data, "fail", 4) == 0)
        st->last = 1;
    return SKPX_GRPC_OK;
}

static void go_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct stream_state *st = arg;
    if (st->last) {
        skpx_grpc_call_finish(st->call, NULL, SKPX_GRPC_DATA_LOSS,
                              "commit failed: 100% \xe2\x9c\x97");
        return; /* st is freed by on_close */
    }
    char count[32], bytes[32];
    snprintf(count, sizeof(count), "%llu", (unsigned long long)st->count);
    snprintf(bytes, sizeof(bytes), "%llu",
             (unsigned long long)(st->checksum - 14695981039346656037ULL));
    const char *kv[] = {"count", count, "bytes", bytes};
    finish_command(st->call, "Committed", kv, 2);
}

static void go_end(struct skpx_grpc_call *call, void *ud)
{
    (void)ud;
    struct stream_state *st = state_of(call);
    st->timer = evtimer_new(g_base, go_timer_cb, st);
    /* `x-delay-ms` metadata overrides the delay (tests that cancel first use a long one). */
    const char *delay = skpx_grpc_call_metadata(call, "x-delay-ms");
    long ms = delay ? strtol(delay, NULL, 10) : TEST_ASYNC_DELAY_MS;
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(st->timer, &tv);
    printf("ASYNC_WAIT\n");
    fflush(stdout);
}

/* ---- process */

static void shutdown_done(void *ud)
{
    (void)ud;
    event_base_loopbreak(g_base);
}

static void on_sigterm(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    printf("SHUTDOWN\n");
    fflush(stdout);
    skpx_grpc_server_shutdown(g_srv, g_grace_ms, shutdown_done, NULL);
}

static void add(const struct skpx_grpc_method *m)
{
    if (skpx_grpc_server_add_method(g_srv, m) != SKP_OK) {
        fprintf(stderr, "cannot register %s\n", m->path);
        exit(2);
    }
}

int main(int argc, char **argv)
{
    struct skpx_grpc_server_opts opts = {0};
    if (argc > 1)
        opts.max_msg = strtoul(argv[1], NULL, 10);
    if (argc > 2)
        g_token = argv[2];
    if (argc > 3)
        opts.max_connections = strtoul(argv[3], NULL, 10);
    if (argc > 4)
        g_grace_ms = (int)strtol(argv[4], NULL, 10);
    skpx_log_set_sink(skpx_log_sink_fd, (void *)(intptr_t)2,
                      getenv("SKP_TEST_DEBUG") ? SKPX_LOG_DEBUG : SKPX_LOG_INFO);
    g_base = event_base_new();
    if (!g_base || skpx_grpc_server_new(g_base, &opts, &g_srv) != SKP_OK)
        return 2;

    struct skpx_grpc_method snap = {
        .path = "/skywalking.v3.ProfileTask/collectSnapshot",
        .client_streaming = true,
        .request_desc = &skywalking__v3__thread_snapshot__descriptor,
        .on_start = on_start_count,
        .on_message = snap_message,
        .on_end = snap_end,
        .on_close = on_close_count,
    };
    struct skpx_grpc_method query = {
        .path = "/skywalking.v3.ProfileTask/getProfileTaskCommands",
        .request_desc = &skywalking__v3__profile_task_command_query__descriptor,
        .on_start = on_start_count,
        .on_message = query_message,
        .on_end = query_end,
        .on_close = on_close_count,
    };
    struct skpx_grpc_method query_compat = query;
    query_compat.path = "/ProfileTask/getProfileTaskCommands";
    struct skpx_grpc_method report = {
        .path = "/skywalking.v3.ProfileTask/reportTaskFinish",
        .request_desc = &skywalking__v3__profile_task_finish_report__descriptor,
        .on_start = auth_start,
        .on_message = report_message,
        .on_end = report_end,
        .on_close = on_close_count,
    };
    struct skpx_grpc_method go = {
        .path = "/skywalking.v3.ProfileTask/goProfileReport",
        .client_streaming = true,
        .request_desc = &skywalking__v3__go_profile_data__descriptor,
        .on_start = on_start_count,
        .on_message = go_message,
        .on_end = go_end,
        .on_close = on_close_count,
    };
    add(&snap);
    add(&query);
    add(&query_compat);
    add(&report);
    add(&go);
    if (skpx_grpc_server_add_method(g_srv, &snap) != SKP_EEXIST)
        return 2;

    uint16_t port = 0;
    if (skpx_grpc_server_listen(g_srv, "127.0.0.1:0", &port) != SKP_OK)
        return 2;
    struct event *sig = evsignal_new(g_base, SIGTERM, on_sigterm, NULL);
    evsignal_add(sig, NULL);
    printf("PORT %u\n", port);
    fflush(stdout);

    event_base_dispatch(g_base);

    struct skpx_grpc_server_stats stats;
    skpx_grpc_server_get_stats(g_srv, &stats);
    skpx_grpc_server_free(g_srv);
    event_free(sig);
    event_base_free(g_base);
    printf("STATS accepted=%llu open=%llu calls=%llu failed=%llu messages=%llu "
           "protocol_errors=%llu\n",
           (unsigned long long)stats.connections_accepted,
           (unsigned long long)stats.connections_open, (unsigned long long)stats.calls_started,
           (unsigned long long)stats.calls_failed, (unsigned long long)stats.messages_received,
           (unsigned long long)stats.protocol_errors);
    printf("CALLS opened=%llu closed=%llu\n", (unsigned long long)g_opened,
           (unsigned long long)g_closed);
    printf("LIVE_BYTES %lld\n", (long long)skpx_alloc_live_bytes());
    fflush(stdout);
    return g_opened == g_closed ? 0 : 3;
}
