/* grpc_client_driver.c - drives skpx_grpc_client against the Python grpcio interop server
 * (test_client_interop.py). One subcommand per scenario; prints `key=value` lines the Python
 * test checks and exits 0 only when the scenario's own expectations hold ("FAIL: ..." else).
 *
 *   grpc_client_driver unary <target> [--service S] [--expect ok|ETOOBIG|ETIMEDOUT|EGRPC:<n>]
 *   grpc_client_driver stream <target> --count N
 *   grpc_client_driver deadline <target>          slow call times out, next call still works
 *   grpc_client_driver killreconnect <target>     long stream until the server dies, then
 *                                                 unary attempts until the server is back
 *   grpc_client_driver fork <target>              call, fork, calls in child and parent
 *   grpc_client_driver perf <target> --count N --rounds R   streaming throughput (any server)
 * Common options: --auth T, --max-msg N, --timeout MS, --path P, --backoff-min/--backoff-max MS.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/Command.pb-c.h"
#include "profile/Profile.pb-c.h"
#include "wire/grpc_client.h"

#define PATH_QUERY "/skywalking.v3.ProfileTask/getProfileTaskCommands"
#define PATH_SNAPSHOT "/skywalking.v3.ProfileTask/collectSnapshot"
#define PATH_FINISH "/skywalking.v3.ProfileTask/reportTaskFinish"
#define N_FRAMES 20
#define LAST_COMMAND_TIME INT64_C(1700000000123)

struct opts {
    const char *cmd;
    const char *target;
    const char *auth;
    const char *service;
    const char *expect;
    const char *path;
    long count;
    long max_msg;
    long timeout_ms;
    long backoff_min_ms;
    long backoff_max_ms;
    long repeat;
    long pause_ms;
};

static long parse_long(const char *s)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || !end || *end) {
        fprintf(stderr, "bad number: %s\n", s);
        exit(2);
    }
    return v;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
    memset(o, 0, sizeof(*o));
    if (argc < 3)
        return -1;
    o->cmd = argv[1];
    o->target = argv[2];
    o->service = "interop-svc";
    o->expect = "ok";
    o->timeout_ms = 10000;
    o->count = 10000;
    for (int i = 3; i < argc; i++) {
        if (i + 1 >= argc)
            return -1;
        const char *k = argv[i];
        const char *v = argv[++i];
        if (!strcmp(k, "--auth"))
            o->auth = v;
        else if (!strcmp(k, "--service"))
            o->service = v;
        else if (!strcmp(k, "--expect"))
            o->expect = v;
        else if (!strcmp(k, "--path"))
            o->path = v;
        else if (!strcmp(k, "--count"))
            o->count = parse_long(v);
        else if (!strcmp(k, "--max-msg"))
            o->max_msg = parse_long(v);
        else if (!strcmp(k, "--repeat"))
            o->repeat = parse_long(v);
        else if (!strcmp(k, "--pause-ms"))
            o->pause_ms = parse_long(v);
        else if (!strcmp(k, "--timeout"))
            o->timeout_ms = parse_long(v);
        else if (!strcmp(k, "--backoff-min"))
            o->backoff_min_ms = parse_long(v);
        else if (!strcmp(k, "--backoff-max") || !strcmp(k, "--rounds"))
            o->backoff_max_ms = parse_long(v);
        else
            return -1;
    }
    return 0;
}

static struct skpx_grpc_client *make_client(const struct opts *o)
{
    struct skpx_grpc_client_opts co = {
        .target = o->target,
        .authentication = o->auth,
        .user_agent = "skyprof-interop-driver",
        .backoff_min_ms = (int)o->backoff_min_ms,
        .backoff_max_ms = (int)o->backoff_max_ms,
        .max_msg = (size_t)o->max_msg,
    };
    struct skpx_grpc_client *c = NULL;
    skp_err err = skpx_grpc_client_new(&co, &c);
    if (err) {
        printf("FAIL: client_new: %s\n", skp_strerror(err));
        exit(1);
    }
    return c;
}

static const char *err_name(skp_err e)
{
    switch (e) {
    case SKP_OK:
        return "OK";
    case SKP_EINVAL:
        return "EINVAL";
    case SKP_ENOMEM:
        return "ENOMEM";
    case SKP_ETIMEDOUT:
        return "ETIMEDOUT";
    case SKP_EUNAVAILABLE:
        return "EUNAVAILABLE";
    case SKP_EPROTO:
        return "EPROTO";
    case SKP_ETOOBIG:
        return "ETOOBIG";
    case SKP_EGRPC:
        return "EGRPC";
    default:
        return "EOTHER";
    }
}

static void print_hex(const char *key, const char *s)
{
    printf("%s=", key);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        printf("%02x", *p);
    printf("\n");
}

static const char *arg_value(const Skywalking__V3__Command *cmd, const char *key)
{
    for (size_t i = 0; i < cmd->n_args; i++)
        if (cmd->args[i]->key && !strcmp(cmd->args[i]->key, key))
            return cmd->args[i]->value;
    return NULL;
}

/* getProfileTaskCommands; the server echoes the query into a Command's args. */
static skp_err do_query(struct skpx_grpc_client *c, const struct opts *o, const char *service,
                        int timeout_ms, struct skpx_grpc_result *res, bool *fields_ok)
{
    Skywalking__V3__ProfileTaskCommandQuery q = SKYWALKING__V3__PROFILE_TASK_COMMAND_QUERY__INIT;
    q.service = (char *)service;
    q.serviceinstance = "inst-\xc3\xa9-1"; /* non-ASCII on purpose: "inst-é-1" */
    q.lastcommandtime = LAST_COMMAND_TIME;
    ProtobufCMessage *resp = NULL;
    *fields_ok = false;
    skp_err err =
        skpx_grpc_client_unary(c, o->path ? o->path : PATH_QUERY, &q.base,
                               &skywalking__v3__commands__descriptor, &resp, timeout_ms, res);
    if (err)
        return err;
    Skywalking__V3__Commands *cmds = (Skywalking__V3__Commands *)resp;
    if (cmds->n_commands == 1 && cmds->commands[0]->command &&
        !strcmp(cmds->commands[0]->command, "QueryEcho")) {
        const Skywalking__V3__Command *cmd = cmds->commands[0];
        const char *s = arg_value(cmd, "service");
        const char *si = arg_value(cmd, "serviceInstance");
        const char *t = arg_value(cmd, "lastCommandTime");
        char want_t[32];
        snprintf(want_t, sizeof(want_t), "%" PRId64, LAST_COMMAND_TIME);
        *fields_ok = s && si && t && !strcmp(s, service) && !strcmp(si, q.serviceinstance) &&
                     !strcmp(t, want_t);
        const char *auth = arg_value(cmd, "authentication");
        printf("server_saw_auth=%s\n", auth ? auth : "");
    }
    protobuf_c_message_free_unpacked(resp, NULL);
    return SKP_OK;
}

static bool unary_as_expected(const struct opts *o, skp_err err, int status, bool fields_ok)
{
    if (!strcmp(o->expect, "ok"))
        return !err && fields_ok;
    if (!strncmp(o->expect, "EGRPC:", 6))
        return err == SKP_EGRPC && status == parse_long(o->expect + 6);
    return !strcmp(o->expect, err_name(err));
}

/* One or more (--repeat, --pause-ms between) unary calls on one client; each must meet
 * --expect. */
static int cmd_unary(const struct opts *o)
{
    struct skpx_grpc_client *c = make_client(o);
    long n = o->repeat > 0 ? o->repeat : 1;
    int rc = 0;
    for (long i = 0; i < n && !rc; i++) {
        if (i > 0 && o->pause_ms > 0)
            skpx_sleep_ns(o->pause_ms * 1000000LL);
        struct skpx_grpc_result res;
        bool fields_ok = false;
        skp_err err = do_query(c, o, o->service, (int)o->timeout_ms, &res, &fields_ok);
        printf("err=%s\nstatus=%d\n", err_name(err), res.status);
        print_hex("message_hex", res.message);
        printf("fields_ok=%d\n", fields_ok ? 1 : 0);
        if (!unary_as_expected(o, err, res.status, fields_ok)) {
            printf("FAIL: call %ld: expected %s (message: %s)\n", i, o->expect, res.message);
            rc = 1;
        }
    }
    struct skpx_grpc_client_stats st;
    skpx_grpc_client_get_stats(c, &st);
    printf("connects=%" PRIu64 "\nconnect_failures=%" PRIu64 "\ncalls_ok=%" PRIu64
           "\ncalls_failed=%" PRIu64 "\n",
           st.connects, st.connect_failures, st.calls_ok, st.calls_failed);
    skpx_grpc_client_free(c);
    return rc;
}

/* ---- client stream ---------------------------------------------------------------------- */

struct snap_src {
    long n_total; /* messages to send; < 0 = until the call fails */
    long n_sent;
    long progress_every;
    uLong crc;
    Skywalking__V3__ThreadSnapshot snap;
    Skywalking__V3__ThreadStack stack;
    char seg[32];
    char frames[N_FRAMES][64];
    char *frame_ptrs[N_FRAMES];
};

static void crc_field(uLong *crc, const char *s)
{
    *crc = crc32(*crc, (const Bytef *)s, (uInt)strlen(s) + 1); /* includes the NUL separator */
}

static int next_snapshot(void *ud, const ProtobufCMessage **msg)
{
    struct snap_src *s = ud;
    if (s->n_total >= 0 && s->n_sent >= s->n_total)
        return 0;
    long i = s->n_sent;
    snprintf(s->seg, sizeof(s->seg), "seg-%ld", i / 10);
    for (int f = 0; f < N_FRAMES; f++)
        snprintf(s->frames[f], sizeof(s->frames[f]),
                 "com.example.svc.Layer%02d.handle%06ld(L.java:%d)", f, i % 1000000, f + 10);
    s->snap.tracesegmentid = s->seg;
    s->snap.time = LAST_COMMAND_TIME + i;
    s->snap.sequence = (int32_t)i;
    char num[32];
    crc_field(&s->crc, s->snap.taskid);
    crc_field(&s->crc, s->seg);
    snprintf(num, sizeof(num), "%" PRId64, s->snap.time);
    crc_field(&s->crc, num);
    snprintf(num, sizeof(num), "%d", s->snap.sequence);
    crc_field(&s->crc, num);
    for (int f = 0; f < N_FRAMES; f++)
        crc_field(&s->crc, s->frames[f]);
    s->n_sent++;
    if (s->progress_every > 0 && s->n_sent % s->progress_every == 0) {
        printf("pulled %ld\n", s->n_sent);
        fflush(stdout);
    }
    *msg = &s->snap.base;
    return 1;
}

static void snap_src_init(struct snap_src *s, long n_total)
{
    memset(s, 0, sizeof(*s));
    s->n_total = n_total;
    s->crc = crc32(0, Z_NULL, 0);
    Skywalking__V3__ThreadSnapshot snap = SKYWALKING__V3__THREAD_SNAPSHOT__INIT;
    Skywalking__V3__ThreadStack stack = SKYWALKING__V3__THREAD_STACK__INIT;
    s->snap = snap;
    s->stack = stack;
    for (int f = 0; f < N_FRAMES; f++)
        s->frame_ptrs[f] = s->frames[f];
    s->stack.n_codesignatures = N_FRAMES;
    s->stack.codesignatures = s->frame_ptrs;
    s->snap.taskid = "task-interop";
    s->snap.stack = &s->stack;
}

static int cmd_stream(const struct opts *o)
{
    struct skpx_grpc_client *c = make_client(o);
    struct snap_src *src = skpx_calloc(1, sizeof(*src));
    if (!src) {
        printf("FAIL: out of memory\n");
        return 1;
    }
    snap_src_init(src, o->count);
    struct skpx_grpc_result res;
    ProtobufCMessage *resp = NULL;
    int64_t t0 = skpx_mono_ns();
    skp_err err = skpx_grpc_client_stream(c, PATH_SNAPSHOT, next_snapshot, src,
                                          &skywalking__v3__commands__descriptor, &resp,
                                          (int)o->timeout_ms, &res);
    int64_t dt = skpx_mono_ns() - t0;
    int rc = 0;
    printf("err=%s\nstatus=%d\nmessage=%s\n", err_name(err), res.status, res.message);
    printf("sent=%ld\nclient_crc=%lu\nelapsed_ms=%.1f\nmsg_per_s=%.0f\n", src->n_sent, src->crc,
           dt / 1e6, dt > 0 ? src->n_sent / (dt / 1e9) : 0.0);
    if (err) {
        printf("FAIL: stream failed\n");
        rc = 1;
    } else {
        Skywalking__V3__Commands *cmds = (Skywalking__V3__Commands *)resp;
        const char *count = NULL, *crc = NULL;
        if (cmds->n_commands == 1) {
            count = arg_value(cmds->commands[0], "count");
            crc = arg_value(cmds->commands[0], "crc");
        }
        printf("server_count=%s\nserver_crc=%s\n", count ? count : "", crc ? crc : "");
        char want_count[32], want_crc[32];
        snprintf(want_count, sizeof(want_count), "%ld", src->n_sent);
        snprintf(want_crc, sizeof(want_crc), "%lu", src->crc);
        if (!count || !crc || strcmp(count, want_count) || strcmp(crc, want_crc)) {
            printf("FAIL: server count/checksum differ\n");
            rc = 1;
        }
        protobuf_c_message_free_unpacked(resp, NULL);
    }
    struct skpx_grpc_client_stats st;
    skpx_grpc_client_get_stats(c, &st);
    printf("connects=%" PRIu64 "\nbytes_sent=%" PRIu64 "\n", st.connects, st.bytes_sent);
    skpx_free(src);
    skpx_grpc_client_free(c);
    return rc;
}

/* ---- deadline --------------------------------------------------------------------------- */

static skp_err do_finish(struct skpx_grpc_client *c, const char *task, int timeout_ms,
                         struct skpx_grpc_result *res)
{
    Skywalking__V3__ProfileTaskFinishReport r = SKYWALKING__V3__PROFILE_TASK_FINISH_REPORT__INIT;
    r.service = "interop-svc";
    r.serviceinstance = "inst-1";
    r.taskid = (char *)task;
    ProtobufCMessage *resp = NULL;
    skp_err err = skpx_grpc_client_unary(
        c, PATH_FINISH, &r.base, &skywalking__v3__commands__descriptor, &resp, timeout_ms, res);
    if (!err)
        protobuf_c_message_free_unpacked(resp, NULL);
    return err;
}

static int cmd_finish(const struct opts *o)
{
    /* reportTaskFinish with --service as the task id (the server aborts task "abort"). */
    struct skpx_grpc_client *c = make_client(o);
    struct skpx_grpc_result res;
    skp_err err = do_finish(c, o->service, (int)o->timeout_ms, &res);
    printf("err=%s\nstatus=%d\n", err_name(err), res.status);
    print_hex("message_hex", res.message);
    skpx_grpc_client_free(c);
    if (!strncmp(o->expect, "EGRPC:", 6)) {
        long st = parse_long(o->expect + 6);
        if (err != SKP_EGRPC || res.status != st) {
            printf("FAIL: expected EGRPC status %ld\n", st);
            return 1;
        }
        return 0;
    }
    if (strcmp(o->expect, err_name(err)) && !(err == SKP_OK && !strcmp(o->expect, "ok"))) {
        printf("FAIL: expected %s\n", o->expect);
        return 1;
    }
    return 0;
}

static int cmd_deadline(const struct opts *o)
{
    struct skpx_grpc_client *c = make_client(o);
    struct skpx_grpc_result res;
    int rc = 0;
    int64_t t0 = skpx_mono_ms();
    skp_err err = do_finish(c, "slow", (int)o->timeout_ms, &res);
    int64_t dt = skpx_mono_ms() - t0;
    printf("slow_err=%s\nslow_elapsed_ms=%" PRId64 "\nslow_message=%s\n", err_name(err), dt,
           res.message);
    if (err != SKP_ETIMEDOUT) {
        printf("FAIL: expected ETIMEDOUT\n");
        rc = 1;
    }
    /* The connection survives a cancelled stream: the next call works on it. */
    bool fields_ok = false;
    err = do_query(c, o, o->service, 10000, &res, &fields_ok);
    struct skpx_grpc_client_stats st;
    skpx_grpc_client_get_stats(c, &st);
    printf("after_err=%s\nafter_fields_ok=%d\nconnects=%" PRIu64 "\n", err_name(err),
           fields_ok ? 1 : 0, st.connects);
    if (err || !fields_ok) {
        printf("FAIL: call after the timeout failed: %s\n", res.message);
        rc = 1;
    }
    skpx_grpc_client_free(c);
    return rc;
}

/* ---- server killed mid-stream, then reconnect ------------------------------------------- */

static int cmd_killreconnect(const struct opts *o)
{
    struct skpx_grpc_client *c = make_client(o);
    struct snap_src *src = skpx_calloc(1, sizeof(*src));
    if (!src) {
        printf("FAIL: out of memory\n");
        return 1;
    }
    snap_src_init(src, -1);
    src->progress_every = 5000;
    struct skpx_grpc_result res;
    ProtobufCMessage *resp = NULL;
    printf("streaming\n");
    fflush(stdout);
    skp_err err =
        skpx_grpc_client_stream(c, PATH_SNAPSHOT, next_snapshot, src,
                                &skywalking__v3__commands__descriptor, &resp, 120000, &res);
    printf("stream_err=%s\nstream_message=%s\nstream_sent=%ld\n", err_name(err), res.message,
           src->n_sent);
    fflush(stdout);
    skpx_free(src);
    if (!err)
        protobuf_c_message_free_unpacked(resp, NULL);
    if (err != SKP_EUNAVAILABLE) {
        printf("FAIL: expected EUNAVAILABLE after the server died\n");
        skpx_grpc_client_free(c);
        return 1;
    }
    /* Retry every 50 ms for up to 60 s; with backoff most attempts fail without connecting. */
    int64_t give_up = skpx_mono_ms() + 60000;
    long attempts = 0, fast_fails = 0;
    bool ok = false;
    while (skpx_mono_ms() < give_up) {
        struct skpx_grpc_client_stats before, after;
        skpx_grpc_client_get_stats(c, &before);
        bool fields_ok = false;
        attempts++;
        err = do_query(c, o, o->service, 3000, &res, &fields_ok);
        skpx_grpc_client_get_stats(c, &after);
        if (!err && fields_ok) {
            ok = true;
            break;
        }
        if (err == SKP_EUNAVAILABLE && after.connect_failures == before.connect_failures &&
            after.connects == before.connects)
            fast_fails++;
        printf("attempt %ld err=%s message=%s\n", attempts, err_name(err), res.message);
        fflush(stdout);
        skpx_sleep_ns(50 * 1000000LL);
    }
    struct skpx_grpc_client_stats st;
    skpx_grpc_client_get_stats(c, &st);
    printf("reconnected=%d\nattempts=%ld\nfast_fails=%ld\nconnects=%" PRIu64
           "\nconnect_failures=%" PRIu64 "\n",
           ok ? 1 : 0, attempts, fast_fails, st.connects, st.connect_failures);
    skpx_grpc_client_free(c);
    if (!ok) {
        printf("FAIL: never reconnected\n");
        return 1;
    }
    return 0;
}

/* ---- fork ------------------------------------------------------------------------------- */

static int calls_ok(struct skpx_grpc_client *c, const struct opts *o, const char *who, int n)
{
    for (int i = 0; i < n; i++) {
        struct skpx_grpc_result res;
        bool fields_ok = false;
        char svc[64];
        snprintf(svc, sizeof(svc), "%s-%d", who, i);
        skp_err err = do_query(c, o, svc, 10000, &res, &fields_ok);
        if (err || !fields_ok) {
            printf("%s call %d failed: %s %s\n", who, i, err_name(err), res.message);
            return 0;
        }
    }
    return 1;
}

static int cmd_fork(const struct opts *o)
{
    struct skpx_grpc_client *c = make_client(o);
    if (!calls_ok(c, o, "before", 1)) {
        printf("FAIL: first call\n");
        skpx_grpc_client_free(c);
        return 1;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        printf("FAIL: fork: %s\n", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        struct skpx_grpc_client_stats st;
        int ok = calls_ok(c, o, "child", 5);
        skpx_grpc_client_get_stats(c, &st);
        printf("child_ok=%d\nchild_connects=%" PRIu64 "\n", ok, st.connects);
        fflush(stdout);
        skpx_grpc_client_free(c);
        exit(ok ? 0 : 1);
    }
    int ok = calls_ok(c, o, "parent", 5);
    int wst = 0;
    while (waitpid(pid, &wst, 0) < 0 && errno == EINTR) {
    }
    /* The child's exit must not have disturbed the parent's connection. */
    int ok_after = calls_ok(c, o, "parent-after", 2);
    struct skpx_grpc_client_stats st;
    skpx_grpc_client_get_stats(c, &st);
    int child_rc = WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
    printf("parent_ok=%d\nparent_after_ok=%d\nparent_connects=%" PRIu64 "\nchild_rc=%d\n", ok,
           ok_after, st.connects, child_rc);
    skpx_grpc_client_free(c);
    if (!ok || !ok_after || child_rc != 0 || st.connects != 1) {
        printf("FAIL: fork scenario\n");
        return 1;
    }
    return 0;
}

/* ---- perf: fixed ThreadSnapshot (20 frames x ~42 bytes), only sequence/time change --------- */

struct perf_src {
    long n_total;
    long n_sent;
    Skywalking__V3__ThreadSnapshot snap;
    Skywalking__V3__ThreadStack stack;
    char frames[N_FRAMES][64];
    char *frame_ptrs[N_FRAMES];
};

static int next_perf(void *ud, const ProtobufCMessage **msg)
{
    struct perf_src *s = ud;
    if (s->n_sent >= s->n_total)
        return 0;
    s->snap.sequence = (int32_t)s->n_sent;
    s->snap.time = LAST_COMMAND_TIME + s->n_sent;
    s->n_sent++;
    *msg = &s->snap.base;
    return 1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int cmd_perf(const struct opts *o)
{
    enum { MAX_ROUNDS = 64 };
    struct skpx_grpc_client *c = make_client(o);
    struct perf_src *src = skpx_calloc(1, sizeof(*src));
    if (!src) {
        printf("FAIL: out of memory\n");
        return 1;
    }
    Skywalking__V3__ThreadSnapshot snap = SKYWALKING__V3__THREAD_SNAPSHOT__INIT;
    Skywalking__V3__ThreadStack stack = SKYWALKING__V3__THREAD_STACK__INIT;
    src->snap = snap;
    src->stack = stack;
    for (int f = 0; f < N_FRAMES; f++) {
        snprintf(src->frames[f], sizeof(src->frames[f]),
                 "com.example.svc.Layer%02d.handle%06d(L.java:%d)", f, f * 7919, f + 10);
        src->frame_ptrs[f] = src->frames[f];
    }
    src->stack.n_codesignatures = N_FRAMES;
    src->stack.codesignatures = src->frame_ptrs;
    src->snap.taskid = "task-perf-0123456789";
    src->snap.tracesegmentid = "seg-perf-0123456789abcdef";
    src->snap.stack = &src->stack;
    long rounds = o->backoff_max_ms > 0 ? o->backoff_max_ms : 5; /* --rounds via --backoff-max */
    if (rounds > MAX_ROUNDS)
        rounds = MAX_ROUNDS;
    double rate[MAX_ROUNDS];
    int rc = 0;
    printf("msg_bytes=%zu\n", protobuf_c_message_get_packed_size(&src->snap.base));
    for (long r = 0; r < rounds; r++) {
        src->n_total = o->count;
        src->n_sent = 0;
        struct skpx_grpc_result res;
        ProtobufCMessage *resp = NULL;
        int64_t t0 = skpx_mono_ns();
        skp_err err = skpx_grpc_client_stream(c, PATH_SNAPSHOT, next_perf, src,
                                              &skywalking__v3__commands__descriptor, &resp,
                                              (int)o->timeout_ms, &res);
        int64_t dt = skpx_mono_ns() - t0;
        if (err) {
            printf("FAIL: round %ld: %s %s\n", r, err_name(err), res.message);
            rc = 1;
            break;
        }
        Skywalking__V3__Commands *cmds = (Skywalking__V3__Commands *)resp;
        const char *count = cmds->n_commands == 1 ? arg_value(cmds->commands[0], "count") : NULL;
        char want[32];
        snprintf(want, sizeof(want), "%ld", src->n_sent);
        bool count_ok = count && !strcmp(count, want);
        protobuf_c_message_free_unpacked(resp, NULL);
        if (!count_ok) {
            printf("FAIL: round %ld: server counted %s of %ld messages\n", r,
                   count ? count : "(none)", src->n_sent);
            rc = 1;
            break;
        }
        rate[r] = src->n_sent / (dt / 1e9);
        printf("round %ld msg_per_s=%.0f\n", r, rate[r]);
    }
    if (!rc) {
        qsort(rate, (size_t)rounds, sizeof(rate[0]), cmp_double);
        printf("median_msg_per_s=%.0f\n", rate[rounds / 2]);
    }
    struct skpx_grpc_client_stats st;
    skpx_grpc_client_get_stats(c, &st);
    printf("connects=%" PRIu64 "\nbytes_sent=%" PRIu64 "\n", st.connects, st.bytes_sent);
    skpx_free(src);
    /* What an idle, connected client keeps (its buffers + the nghttp2 session). */
    printf("idle_client_live_bytes=%lld\n", (long long)skpx_alloc_live_bytes());
    skpx_grpc_client_free(c);
    return rc;
}

int main(int argc, char **argv)
{
    struct opts o;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (parse_opts(argc, argv, &o) != 0) {
        fprintf(stderr,
                "usage: %s unary|finish|stream|deadline|killreconnect|fork|perf <host:port> "
                "[options]\n",
                argv[0]);
        return 2;
    }
    if (!strcmp(o.cmd, "unary"))
        return cmd_unary(&o);
    if (!strcmp(o.cmd, "finish"))
        return cmd_finish(&o);
    if (!strcmp(o.cmd, "stream"))
        return cmd_stream(&o);
    if (!strcmp(o.cmd, "deadline"))
        return cmd_deadline(&o);
    if (!strcmp(o.cmd, "killreconnect"))
        return cmd_killreconnect(&o);
    if (!strcmp(o.cmd, "fork"))
        return cmd_fork(&o);
    if (!strcmp(o.cmd, "perf"))
        return cmd_perf(&o);
    fprintf(stderr, "unknown subcommand %s\n", o.cmd);
    return 2;
}
