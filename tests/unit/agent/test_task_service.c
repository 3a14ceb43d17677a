/* test_task_service.c - task validation table, overlapping intervals, scheduling (start, stop,
 * preempt, one finish report), expired and late tasks, the command cursor. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/task_service.h"
#include "common/alloc.h"
#include "fakes.h"

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
        {"/a", 1, 0, 10, 1, true},       {"/a", 15, 0, 10, 9, true},  {"", 5, 0, 10, 5, false},
        {"/a", 0, 0, 10, 5, false},      {"/a", 16, 0, 10, 5, false}, {"/a", 5, -1, 10, 5, false},
        {"/a", 5, 0, 9, 5, false},       {"/a", 5, 0, 10, 0, false},  {"/a", 5, 0, 10, 10, false},
        {"/a", 5, 1000, 10000, 9, true},
    };
    struct skp__task_service ts;
    skp__task_service_init(&ts, 10);
    char reason[128];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct skp__task t =
            mk("x", cases[i].ep, cases[i].dur, cases[i].thr, cases[i].period, cases[i].max, 1000);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validation_table),
        cmocka_unit_test(test_overlap_intervals),
        cmocka_unit_test(test_schedule_start_stop_preempt_finish_once),
        cmocka_unit_test(test_schedule_expired_and_late),
        cmocka_unit_test(test_cursor_advances_for_rejected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
