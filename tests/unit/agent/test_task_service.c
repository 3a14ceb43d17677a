/* test_agent_logic.c - pure agent components: ring, sw8, config/env, serial LRU, command
 * service (dup, unknown, malformed), task validation table, overlap, scheduling, cursor,
 * snapshot building (order, innermost truncation). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/command_dispatch.h"
#include "agent/command_service.h"
#include "agent/config.h"
#include "agent/ring.h"
#include "agent/snapshot.h"
#include "agent/sw8.h"
#include "agent/task_service.h"
#include "common/alloc.h"
#include "fakes.h"

/* --- ring ------------------------------------------------------------------------------------ */
static void test_ring_full_drops_and_counts(void **state)
{
    (void)state;
    struct skp__ring r;
    assert_int_equal(skp__ring_init(&r, 3), SKP_OK);
    int v[5];
    assert_true(skp__ring_push(&r, &v[0]));
    assert_true(skp__ring_push(&r, &v[1]));
    assert_true(skp__ring_push(&r, &v[2]));
    assert_false(skp__ring_push(&r, &v[3])); /* limit 3 although the capacity is 4 */
    assert_int_equal(atomic_load(&r.dropped), 1);
    assert_int_equal(skp__ring_size(&r), 3);
    assert_ptr_equal(skp__ring_pop(&r), &v[0]);
    assert_true(skp__ring_push(&r, &v[4]));
    assert_ptr_equal(skp__ring_pop(&r), &v[1]);
    assert_ptr_equal(skp__ring_pop(&r), &v[2]);
    assert_ptr_equal(skp__ring_pop(&r), &v[4]);
    assert_null(skp__ring_pop(&r));
    /* many laps */
    for (int i = 0; i < 1000; i++) {
        assert_true(skp__ring_push(&r, &v[i % 5]));
        assert_ptr_equal(skp__ring_pop(&r), &v[i % 5]);
    }
    skp__ring_cleanup(&r);
    assert_int_equal(skp__ring_init(&r, 0), SKP_EINVAL);
}

/* --- sw8 ------------------------------------------------------------------------------------- */
static void test_sw8_roundtrip(void **state)
{
    (void)state;
    struct skyprof_sw8 in = {1, "trace.1.2", "seg.3.4", 7, "svc", "inst@host", "/api/x", "10.0.0.1:80"};
    char buf[SKYPROF_SW8_MAX];
    int n = skyprof_sw8_format(&in, buf, sizeof(buf));
    assert_true(n > 0);
    /* known encoding of the first fields */
    assert_true(strncmp(buf, "1-dHJhY2UuMS4y-c2VnLjMuNA==-7-c3Zj-", 35) == 0);
    struct skyprof_sw8 out;
    char store[1024];
    assert_int_equal(skyprof_sw8_parse(buf, &out, store, sizeof(store)), SKP_OK);
    assert_int_equal(out.sample, 1);
    assert_string_equal(out.trace_id, "trace.1.2");
    assert_string_equal(out.parent_segment_id, "seg.3.4");
    assert_int_equal(out.parent_span_id, 7);
    assert_string_equal(out.parent_service, "svc");
    assert_string_equal(out.parent_instance, "inst@host");
    assert_string_equal(out.parent_endpoint, "/api/x");
    assert_string_equal(out.peer, "10.0.0.1:80");
    /* extra trailing fields are tolerated */
    char longer[SKYPROF_SW8_MAX + 16];
    snprintf(longer, sizeof(longer), "%s-ZXh0cmE=", buf);
    assert_int_equal(skyprof_sw8_parse(longer, &out, store, sizeof(store)), SKP_OK);
    /* too small store */
    assert_int_equal(skyprof_sw8_parse(buf, &out, store, 8), SKP_ETOOBIG);
    /* too small output */
    assert_int_equal(skyprof_sw8_format(&in, buf, 10), -1);
}

static void test_sw8_malformed(void **state)
{
    (void)state;
    static const char *bad[] = {
        "",
        "1",
        "1-dHJhY2U=-c2Vn-0-c3Zj-aW5zdA==-ZXA=",        /* 7 fields */
        "2-dHJhY2U=-c2Vn-0-c3Zj-aW5zdA==-ZXA=-cGVlcg==", /* sample flag */
        "1-dHJhY2U=-c2Vn-x-c3Zj-aW5zdA==-ZXA=-cGVlcg==", /* span id */
        "1-dHJhY2U=-c2Vn--c3Zj-aW5zdA==-ZXA=-cGVlcg==",  /* empty span id */
        "1-dHJh!2U=-c2Vn-0-c3Zj-aW5zdA==-ZXA=-cGVlcg==", /* bad base64 */
        "1--c2Vn-0-c3Zj-aW5zdA==-ZXA=-cGVlcg==",         /* empty trace id */
        "1-dHJhY2U=--0-c3Zj-aW5zdA==-ZXA=-cGVlcg==",     /* empty segment id */
        "1-dHJhY2U=-c2Vn-0-c3Zj-aW5zdA==-ZXA=-cGVlc",    /* truncated base64 */
        "1-AA==-c2Vn-0-c3Zj-aW5zdA==-ZXA=-cGVlcg==",     /* NUL byte inside */
    };
    char store[512];
    struct skyprof_sw8 out;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        skp_err e = skyprof_sw8_parse(bad[i], &out, store, sizeof(store));
        if (e == SKP_OK)
            fail_msg("accepted malformed sw8 #%zu: %s", i, bad[i]);
    }
    assert_int_equal(skyprof_sw8_parse("1-dHJhY2U=-c2Vn-0-c3Zj-aW5zdA==-ZXA=-cGVlcg==", &out,
                                       store, sizeof(store)),
                     SKP_OK);
    assert_string_equal(out.peer, "peer");
    char b64[16];
    assert_int_equal(skp__base64_encode("ab", 2, b64, sizeof(b64)), 4);
    assert_string_equal(b64, "YWI=");
    assert_int_equal(skp__base64_decode("YWI", 3, b64, sizeof(b64)), 2); /* padding optional */
    assert_string_equal(b64, "ab");
}

/* --- config ---------------------------------------------------------------------------------- */
static void test_config_defaults_env(void **state)
{
    (void)state;
    struct skyprof_config c;
    skyprof_config_init_defaults(&c);
    assert_string_equal(c.backend, "127.0.0.1:11800");
    assert_int_equal(c.poll_interval_ms, 20000);
    assert_int_equal(c.heartbeat_period_ms, 30000);
    assert_int_equal(c.max_parallel, 5);
    assert_int_equal(c.max_stack_depth, 500);
    assert_int_equal(c.snapshot_buffer_size, 4500);
    assert_int_equal(c.max_profiling_ms, 600000);
    assert_true(c.profile_active);
    assert_string_equal(c.instance, "");
    assert_int_equal(skyprof_config_validate(&c), SKP_OK);

    setenv("SW_AGENT_NAME", "orders", 1);
    setenv("SW_AGENT_INSTANCE_NAME", "i-1", 1);
    setenv("SW_AGENT_COLLECTOR_BACKEND_SERVICES", "oap:11800,oap2:11800", 1);
    setenv("SW_AGENT_AUTHENTICATION", "tok", 1);
    setenv("SW_AGENT_PROFILE_ACTIVE", "False", 1);
    setenv("SW_AGENT_PROFILE_MAX_PARALLEL", "3", 1);
    setenv("SW_AGENT_PROFILE_DUMP_MAX_STACK_DEPTH", "64", 1);
    setenv("SW_AGENT_PROFILE_SNAPSHOT_TRANSPORT_BUFFER_SIZE", "100", 1);
    setenv("SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL", "5", 1);
    setenv("SW_AGENT_COLLECTOR_HEARTBEAT_PERIOD", "7", 1);
    setenv("SKYPROF_MAX_PROFILING_MS", "1234", 1);
    setenv("SKYPROF_LOG_LEVEL", "debug", 1);
    assert_int_equal(skyprof_config_from_env(&c), SKP_OK);
    assert_string_equal(c.service, "orders");
    assert_string_equal(c.instance, "i-1");
    assert_string_equal(c.backend, "oap:11800");
    assert_string_equal(c.authentication, "tok");
    assert_false(c.profile_active);
    assert_int_equal(c.max_parallel, 3);
    assert_int_equal(c.max_stack_depth, 64);
    assert_int_equal(c.snapshot_buffer_size, 100);
    assert_int_equal(c.poll_interval_ms, 5000);
    assert_int_equal(c.heartbeat_period_ms, 7000);
    assert_int_equal(c.max_profiling_ms, 1234);
    assert_int_equal(c.log_level, SKYPROF_LOG_DEBUG);
    /* malformed values: error, field untouched, others still applied */
    setenv("SW_AGENT_PROFILE_MAX_PARALLEL", "lots", 1);
    setenv("SW_AGENT_NAME", "billing", 1);
    assert_int_equal(skyprof_config_from_env(&c), SKP_EINVAL);
    assert_int_equal(c.max_parallel, 3);
    assert_string_equal(c.service, "billing");
    const char *vars[] = {"SW_AGENT_NAME", "SW_AGENT_INSTANCE_NAME",
                          "SW_AGENT_COLLECTOR_BACKEND_SERVICES", "SW_AGENT_AUTHENTICATION",
                          "SW_AGENT_PROFILE_ACTIVE", "SW_AGENT_PROFILE_MAX_PARALLEL",
                          "SW_AGENT_PROFILE_DUMP_MAX_STACK_DEPTH",
                          "SW_AGENT_PROFILE_SNAPSHOT_TRANSPORT_BUFFER_SIZE",
                          "SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL",
                          "SW_AGENT_COLLECTOR_HEARTBEAT_PERIOD", "SKYPROF_MAX_PROFILING_MS",
                          "SKYPROF_LOG_LEVEL"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        unsetenv(vars[i]);
    /* validation */
    c.max_parallel = 0;
    assert_int_equal(skyprof_config_validate(&c), SKP_EINVAL);
    c.max_parallel = SKYPROF_MAX_PARALLEL_CAP + 1;
    assert_int_equal(skyprof_config_validate(&c), SKP_EINVAL);
    c.max_parallel = 5;
    snprintf(c.backend, sizeof(c.backend), "nohostport");
    assert_int_equal(skyprof_config_validate(&c), SKP_EINVAL);
    char inst[256];
    skp__config_gen_instance(inst, sizeof(inst));
    assert_non_null(strchr(inst, '@'));
    assert_int_equal(strchr(inst, '@') - inst, 32);
}

/* --- serial LRU ------------------------------------------------------------------------------ */
static void test_serial_lru_evicts_oldest(void **state)
{
    (void)state;
    struct skp__serial_lru l;
    skp__serial_lru_init(&l);
    char s[32];
    for (int i = 0; i < SKP_SERIAL_LRU; i++) {
        snprintf(s, sizeof(s), "s%d", i);
        skp__serial_lru_add(&l, s);
    }
    assert_true(skp__serial_lru_contains(&l, "s0"));
    assert_true(skp__serial_lru_contains(&l, "s63"));
    skp__serial_lru_add(&l, "s64"); /* evicts s0 */
    assert_false(skp__serial_lru_contains(&l, "s0"));
    assert_true(skp__serial_lru_contains(&l, "s1"));
    assert_true(skp__serial_lru_contains(&l, "s64"));
    skp__serial_lru_add(&l, "s65"); /* evicts s1 */
    assert_false(skp__serial_lru_contains(&l, "s1"));
    assert_true(skp__serial_lru_contains(&l, "s2"));
}

/* --- commands -------------------------------------------------------------------------------- */
struct cmd_env {
    struct skp__task_service ts;
    struct skp__command_dispatch d;
    struct skp__command_service cs;
};

static void cmd_env_init(struct cmd_env *e)
{
    skp__task_service_init(&e->ts, 10);
    skp__command_dispatch_init(&e->d);
    assert_int_equal(skp__command_dispatch_register(&e->d, SKP_PROFILE_TASK_COMMAND,
                                                    skp__profile_command_exec, &e->ts),
                     SKP_OK);
    skp__command_service_init(&e->cs, &e->d);
}

static void receive(struct cmd_env *e, Skywalking__V3__Command *c)
{
    Skywalking__V3__Commands cmds = SKYWALKING__V3__COMMANDS__INIT;
    cmds.n_commands = 1;
    cmds.commands = &c;
    skp__command_service_receive(&e->cs, &cmds);
}

static void test_command_dedup_unknown_malformed(void **state)
{
    (void)state;
    struct cmd_env e;
    cmd_env_init(&e);
    Skywalking__V3__Command *c =
        make_task_command("sn-1", "t1", "/ep", "5", "0", "10", "5", "100000", "5000");
    receive(&e, c);
    assert_int_equal(e.ts.n_tasks, 1);
    assert_int_equal(e.ts.last_command_time, 5000);
    receive(&e, c); /* same serial: skipped */
    assert_int_equal(e.cs.n_duplicate, 1);
    assert_int_equal(e.ts.n_tasks, 1);
    free_command(c);

    /* unknown command name: ignored, service continues */
    Skywalking__V3__Command *u = make_task_command("sn-2", NULL, NULL, NULL, NULL, NULL, NULL,
                                                   NULL, NULL);
    free(u->command);
    u->command = strdup("EBPFProfilingTaskQuery");
    receive(&e, u);
    assert_int_equal(e.cs.n_ignored, 1);
    free_command(u);

    /* malformed (non-numeric Duration / missing DumpPeriod): rejected, cursor still moves */
    Skywalking__V3__Command *m1 =
        make_task_command("sn-3", "t2", "/ep", "five", "0", "10", "5", "900000", "6000");
    receive(&e, m1);
    assert_int_equal(e.ts.n_tasks, 1);
    assert_int_equal(e.ts.last_command_time, 6000);
    assert_non_null(strstr(e.ts.last_reject_reason, "Duration"));
    Skywalking__V3__Command *m2 =
        make_task_command("sn-4", "t3", "/ep", "5", "0", NULL, "5", "900000", "7000");
    receive(&e, m2);
    assert_int_equal(e.ts.last_command_time, 7000);
    /* missing serial number: ignored */
    Skywalking__V3__Command *m3 =
        make_task_command(NULL, "t4", "/ep", "5", "0", "10", "5", "2000000", "8000");
    receive(&e, m3);
    assert_int_equal(e.ts.n_tasks, 1);
    /* and a good command after all that still works */
    Skywalking__V3__Command *ok =
        make_task_command("sn-5", "t5", "/ep", "1", "0", "10", "1", "5000000", "9000");
    receive(&e, ok);
    assert_int_equal(e.ts.n_tasks, 2);
    assert_int_equal(e.ts.last_command_time, 9000);
    assert_int_equal(e.cs.n_executed, 2);
    free_command(m1);
    free_command(m2);
    free_command(m3);
    free_command(ok);
}

/* --- validation ------------------------------------------------------------------------------ */
static struct skp__task mk(const char *id, const char *ep, int dur, int thr, int period, int max,
                           int64_t start)
{
    struct skp__task t;
    memset(&t, 0, sizeof(t));
    snprintf(t.task_id, sizeof(t.task_id), "%s", id);
    snprintf(t.endpoint, sizeof(t.endpoint), "%s", ep);
    t.duration_min = dur;
    t.min_duration_threshold_ms = thr;
    t.dump_period_ms = period;
    t.max_sampling_count = max;
    t.start_time_ms = start;
    t.create_time_ms = start - 1;
    return t;
}

static void test_validation_table(void **state)
{
    (void)state;
    static const struct {
        const char *ep;
        int dur, thr, period, max;
        bool ok;
    } cases[] = {
        {"/a", 1, 0, 10, 1, true},   {"/a", 15, 0, 10, 9, true},  {"", 5, 0, 10, 5, false},
        {"/a", 0, 0, 10, 5, false},  {"/a", 16, 0, 10, 5, false}, {"/a", 5, -1, 10, 5, false},
        {"/a", 5, 0, 9, 5, false},   {"/a", 5, 0, 10, 0, false},  {"/a", 5, 0, 10, 10, false},
        {"/a", 5, 1000, 10000, 9, true},
    };
    struct skp__task_service ts;
    skp__task_service_init(&ts, 10);
    char reason[128];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct skp__task t = mk("x", cases[i].ep, cases[i].dur, cases[i].thr, cases[i].period,
                                cases[i].max, 1000);
        skp_err e = skp__task_validate(&ts, &t, reason, sizeof(reason));
        if ((e == SKP_OK) != cases[i].ok)
            fail_msg("case %zu: expected %s, got %s (%s)", i, cases[i].ok ? "ok" : "reject",
                     skp_strerror(e), reason);
    }
}

static void test_overlap_intervals(void **state)
{
    (void)state;
    struct skp__task_service ts;
    skp__task_service_init(&ts, 10);
    const int64_t M = 60000;
    struct skp__task a = mk("a", "/a", 5, 0, 10, 5, 100 * M); /* [100, 105) */
    assert_int_equal(skp__task_service_add(&ts, &a), SKP_OK);
    static const struct {
        int64_t start;
        int dur;
        bool ok;
    } cases[] = {
        {95, 5, true},   /* [95,100) touches: ok */
        {105, 5, true},  /* [105,110) touches: ok */
        {96, 5, false},  /* end inside */
        {104, 5, false}, /* start inside */
        {99, 10, false}, /* encloses the old one (Java misses this) */
        {101, 1, false}, /* inside */
        {120, 1, true},  /* far after; Python's buggy check rejects tasks ending after an old one */
    };
    char reason[128];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct skp__task t = mk("n", "/a", cases[i].dur, 0, 10, 5, cases[i].start * M);
        skp_err e = skp__task_validate(&ts, &t, reason, sizeof(reason));
        if ((e == SKP_OK) != cases[i].ok)
            fail_msg("overlap case %zu wrong: %s", i, reason);
    }
}

/* --- scheduling ------------------------------------------------------------------------------ */
static void test_schedule_start_stop_preempt_finish_once(void **state)
{
    (void)state;
    struct skp__task_service ts;
    skp__task_service_init(&ts, 10);
    const int64_t M = 60000;
    struct skp__task_action act;
    int64_t next;
    struct skp__task a = mk("a", "/a", 2, 0, 10, 5, 10 * M);
    assert_int_equal(skp__task_service_add(&ts, &a), SKP_OK);
    /* before StartTime: nothing, next event at StartTime */
    assert_int_equal(skp__task_service_next(&ts, 9 * M, &act, &next), SKP_TASK_ACTION_NONE);
    assert_int_equal(next, 10 * M);
    /* at StartTime: START, stops after Duration */
    assert_int_equal(skp__task_service_next(&ts, 10 * M, &act, &next), SKP_TASK_ACTION_START);
    assert_string_equal(act.task.task_id, "a");
    assert_int_equal(act.stop_at_ms, 12 * M);
    assert_int_equal(skp__task_service_next(&ts, 10 * M + 1, &act, &next), SKP_TASK_ACTION_NONE);
    assert_int_equal(next, 12 * M);
    assert_int_equal(skp__task_service_next(&ts, 12 * M - 1, &act, &next), SKP_TASK_ACTION_NONE);
    assert_int_equal(skp__task_service_next(&ts, 12 * M, &act, &next), SKP_TASK_ACTION_STOP);
    assert_string_equal(act.task.task_id, "a");
    assert_false(act.preempted);
    /* finish exactly once */
    assert_int_equal(skp__task_service_next(&ts, 13 * M, &act, &next), SKP_TASK_ACTION_NONE);
    assert_int_equal(skp__task_service_stop_active(&ts, &act), false);
    assert_int_equal(ts.n_finished, 1);
    assert_int_equal(ts.n_tasks, 0);

    /* b runs [20, 25); at 25 it ends normally and c (validated, adjacent) starts */
    struct skp__task b = mk("b", "/b", 5, 0, 10, 5, 20 * M);
    assert_int_equal(skp__task_service_add(&ts, &b), SKP_OK);
    assert_int_equal(skp__task_service_next(&ts, 20 * M, &act, &next), SKP_TASK_ACTION_START);
    struct skp__task c = mk("c", "/c", 1, 0, 10, 5, 25 * M);
    assert_int_equal(skp__task_service_add(&ts, &c), SKP_OK);
    assert_int_equal(skp__task_service_next(&ts, 25 * M, &act, &next), SKP_TASK_ACTION_STOP);
    assert_string_equal(act.task.task_id, "b");
    assert_false(act.preempted);
    assert_int_equal(skp__task_service_next(&ts, 25 * M, &act, &next), SKP_TASK_ACTION_START);
    assert_string_equal(act.task.task_id, "c");
    assert_int_equal(skp__task_service_next(&ts, 26 * M, &act, &next), SKP_TASK_ACTION_STOP);
    assert_string_equal(act.task.task_id, "c");
    assert_int_equal(ts.n_finished, 3);

    /* preemption: validation keeps windows apart, so put a task whose start falls inside the
     * running one straight into the list (as a task with a skewed clock would behave) */
    struct skp__task d = mk("d", "/d", 5, 0, 10, 5, 40 * M);
    assert_int_equal(skp__task_service_add(&ts, &d), SKP_OK);
    assert_int_equal(skp__task_service_next(&ts, 40 * M, &act, &next), SKP_TASK_ACTION_START);
    ts.tasks[ts.n_tasks] = mk("e", "/e", 1, 0, 10, 5, 42 * M);
    ts.started[ts.n_tasks] = false;
    ts.n_tasks++;
    assert_int_equal(skp__task_service_next(&ts, 42 * M, &act, &next), SKP_TASK_ACTION_STOP);
    assert_string_equal(act.task.task_id, "d");
    assert_true(act.preempted);
    assert_int_equal(skp__task_service_next(&ts, 42 * M, &act, &next), SKP_TASK_ACTION_START);
    assert_string_equal(act.task.task_id, "e");
    assert_int_equal(skp__task_service_next(&ts, 43 * M, &act, &next), SKP_TASK_ACTION_STOP);
    assert_int_equal(ts.n_finished, 5);
    assert_int_equal(skp__task_service_next(&ts, 60 * M, &act, &next), SKP_TASK_ACTION_NONE);

    /* two tasks delivered late: the one whose window is over is dropped, the other starts */
    struct skp__task f = mk("f", "/f", 1, 0, 10, 5, 70 * M);
    struct skp__task g = mk("g", "/g", 1, 0, 10, 5, 71 * M);
    assert_int_equal(skp__task_service_add(&ts, &f), SKP_OK);
    assert_int_equal(skp__task_service_add(&ts, &g), SKP_OK);
    assert_int_equal(skp__task_service_next(&ts, 71 * M + 10, &act, &next), SKP_TASK_ACTION_START);
    assert_string_equal(act.task.task_id, "g");
}

static void test_schedule_expired_and_late(void **state)
{
    (void)state;
    struct skp__task_service ts;
    skp__task_service_init(&ts, 10);
    const int64_t M = 60000;
    struct skp__task_action act;
    int64_t next;
    /* whole window in the past: dropped, never started, no finish */
    struct skp__task a = mk("a", "/a", 1, 0, 10, 5, 1 * M);
    assert_int_equal(skp__task_service_add(&ts, &a), SKP_OK);
    assert_int_equal(skp__task_service_next(&ts, 5 * M, &act, &next), SKP_TASK_ACTION_NONE);
    assert_int_equal(ts.n_tasks, 0);
    assert_int_equal(ts.n_finished, 0);
    /* received after StartTime: runs only what is left of its window */
    struct skp__task b = mk("b", "/b", 3, 0, 10, 5, 10 * M);
    assert_int_equal(skp__task_service_add(&ts, &b), SKP_OK);
    assert_int_equal(skp__task_service_next(&ts, 11 * M, &act, &next), SKP_TASK_ACTION_START);
    assert_int_equal(act.stop_at_ms, 13 * M);
}

static void test_cursor_advances_for_rejected(void **state)
{
    (void)state;
    struct skp__task_service ts;
    skp__task_service_init(&ts, 10);
    assert_int_equal(ts.last_command_time, -1);
    struct skp__task bad = mk("bad", "", 5, 0, 10, 5, 1000);
    bad.create_time_ms = 777;
    assert_int_equal(skp__task_service_add(&ts, &bad), SKP_EINVAL);
    assert_int_equal(ts.last_command_time, 777);
    assert_int_equal(ts.n_rejected, 1);
    struct skp__task older = mk("old", "/a", 5, 0, 10, 5, 1000);
    older.create_time_ms = 500; /* never moves the cursor back */
    assert_int_equal(skp__task_service_add(&ts, &older), SKP_OK);
    assert_int_equal(ts.last_command_time, 777);
}

/* --- snapshots ------------------------------------------------------------------------------- */
static void test_snapshot_root_first_and_innermost_kept(void **state)
{
    (void)state;
    struct skyprof_frame fr[8];
    const char *names[] = {"inner", "mid2", "mid1", "root"}; /* innermost first */
    for (int i = 0; i < 4; i++) {
        fr[i].kind = SKYPROF_FRAME_STR;
        fr[i].str = names[i];
        fr[i].len = (uint32_t)strlen(names[i]);
        fr[i].addr = 0;
    }
    struct skyprof_capture cap = {.frames = fr, .cap = 8, .n = 4};
    struct skp__snapshot *s = skp__snapshot_new("task", "seg", 42, 3, &cap, 8);
    assert_non_null(s);
    assert_int_equal(s->n_frames, 4);
    assert_int_equal(s->sequence, 3);
    assert_string_equal(s->task_id, "task");
    assert_string_equal(s->segment_id, "seg");
    assert_memory_equal(s->text + s->frames[0].off, "root", 4);
    assert_memory_equal(s->text + s->frames[3].off, "inner", 5);
    skp__snapshot_free(s);
    /* depth 2: the two innermost frames survive, root-first */
    s = skp__snapshot_new("task", "seg", 42, 0, &cap, 2);
    assert_int_equal(s->n_frames, 2);
    assert_memory_equal(s->text + s->frames[0].off, "mid2", 4);
    assert_memory_equal(s->text + s->frames[1].off, "inner", 5);
    skp__snapshot_free(s);
    /* address frames keep the address */
    fr[0].kind = SKYPROF_FRAME_ADDR;
    fr[0].addr = 0x1234;
    s = skp__snapshot_new("t", "s", 1, 0, &cap, 8);
    assert_int_equal(s->frames[3].kind, SKYPROF_FRAME_ADDR);
    assert_int_equal(s->frames[3].addr, 0x1234);
    skp__snapshot_free(s);
    cap.n = 0;
    assert_null(skp__snapshot_new("t", "s", 1, 0, &cap, 8));
}

static void test_snapshot_queue_bounds(void **state)
{
    (void)state;
    struct skyprof_frame fr = {0, "x", 1, SKYPROF_FRAME_STR};
    struct skyprof_capture cap = {.frames = &fr, .cap = 1, .n = 1};
    struct skp__snapshot_queue q;
    assert_int_equal(skp__snapshot_queue_init(&q, 2, 1 << 20), SKP_OK);
    assert_true(skp__snapshot_queue_push(&q, skp__snapshot_new("t", "s", 1, 0, &cap, 1)));
    assert_true(skp__snapshot_queue_push(&q, skp__snapshot_new("t", "s", 1, 1, &cap, 1)));
    assert_false(skp__snapshot_queue_push(&q, skp__snapshot_new("t", "s", 1, 2, &cap, 1)));
    assert_int_equal(atomic_load(&q.dropped), 1);
    skp__snapshot_queue_cleanup(&q);
    /* byte budget */
    assert_int_equal(skp__snapshot_queue_init(&q, 100, 10), SKP_OK);
    assert_false(skp__snapshot_queue_push(&q, skp__snapshot_new("t", "s", 1, 0, &cap, 1)));
    assert_int_equal(atomic_load(&q.dropped), 1);
    assert_int_equal(atomic_load(&q.bytes), 0);
    skp__snapshot_queue_cleanup(&q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_full_drops_and_counts),
        cmocka_unit_test(test_sw8_roundtrip),
        cmocka_unit_test(test_sw8_malformed),
        cmocka_unit_test(test_config_defaults_env),
        cmocka_unit_test(test_serial_lru_evicts_oldest),
        cmocka_unit_test(test_command_dedup_unknown_malformed),
        cmocka_unit_test(test_validation_table),
        cmocka_unit_test(test_overlap_intervals),
        cmocka_unit_test(test_schedule_start_stop_preempt_finish_once),
        cmocka_unit_test(test_schedule_expired_and_late),
        cmocka_unit_test(test_cursor_advances_for_rejected),
        cmocka_unit_test(test_snapshot_root_first_and_innermost_kept),
        cmocka_unit_test(test_snapshot_queue_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
