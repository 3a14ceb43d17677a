/* test_cpu_acct.c - the CPU accounting of process cpu tasks (agent/cpu_acct.h): threads that
 * start after the first round count from 0, a thread that ends between rounds gets the process CPU
 * no live thread accounts for (bounded by the wall time it may have run), slow CPU waits as
 * pending, a reused tid is a new thread, the table stays bounded, nothing leaks on allocation
 * failure. Every case checks the conservation law: samples + given + pending = process CPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cpu_acct.h"
#include "common/alloc.h"
#include "harness/skp_alloc_faults.h"

#define MS 1000000LL

struct gives {
    int64_t to_tid[64]; /* CPU given per tid (tids < 64 in these tests) */
    int64_t to_none;
    int64_t to_others; /* tids >= 64 */
    int n_calls;
};

static void give(void *ud, struct skpx_acct_thread *t, int64_t ns)
{
    struct gives *g = ud;
    assert_true(ns > 0);
    g->n_calls++;
    if (t && t->tid < 64)
        g->to_tid[t->tid] += ns;
    else if (t)
        g->to_others += ns;
    else
        g->to_none += ns;
}

/* A thread-per-request process: the main thread (tid 1) and short workers, each 25 ms of CPU, one
 * after the other; rounds every 10 ms. The runner takes each thread's pending CPU at every round
 * (as a capture would) and remembers a stack for it. */
static void test_short_threads_conserve_cpu(void **state)
{
    (void)state;
    struct skpx_acct a;
    struct gives g;
    memset(&g, 0, sizeof(g));
    assert_int_equal(skpx_acct_init(&a), SKP_OK);
    int64_t proc = 500 * MS; /* CPU before the window: not ours */
    int64_t main_cpu = 400 * MS;
    int64_t taken = 0;
    uint64_t ids[3] = {7, 8, 9};
    /* round 1: the baseline */
    skpx_acct_round_begin(&a, 0, proc);
    struct skpx_acct_thread *t = skpx_acct_observe(&a, 1, main_cpu, true);
    assert_non_null(t);
    assert_int_equal(t->seen_ns - t->done_ns, 0);
    skpx_acct_round_end(&a, give, &g);
    /* workers 10..19 each live 25 ms from 10 ms + 30 ms * k: seen at 2 or 3 rounds, and they run
     * 0..9 ms after their last round, which only the process clock tells */
    int64_t started[64] = {0};
    int64_t cpu_at_end = 0;
    for (int r = 1; r <= 40; r++) {
        int64_t now = r * 10 * MS;
        /* process CPU: main uses 1 ms per round, workers run when alive */
        main_cpu += 1 * MS;
        proc += 1 * MS;
        for (int w = 10; w < 20; w++) {
            int64_t s = 10 * MS + (w - 10) * 30 * MS;
            int64_t e = s + 25 * MS;
            int64_t lo = now - 10 * MS > s ? now - 10 * MS : s;
            int64_t hi = now < e ? now : e;
            if (hi > lo)
                proc += hi - lo;
            started[w] = s;
        }
        skpx_acct_round_begin(&a, now, proc);
        t = skpx_acct_observe(&a, 1, main_cpu, true);
        taken += skpx_acct_take(t);
        for (int w = 10; w < 20; w++) {
            int64_t e = started[w] + 25 * MS;
            if (now < started[w] || now >= e)
                continue; /* not alive at this round */
            t = skpx_acct_observe(&a, w, now - started[w], true);
            assert_non_null(t);
            taken += skpx_acct_take(t);
            assert_int_equal(skpx_acct_set_ids(t, ids, 3), SKP_OK);
        }
        skpx_acct_round_end(&a, give, &g);
    }
    cpu_at_end = proc - 500 * MS;
    skpx_acct_finish(&a, give, &g);
    int64_t given = g.to_none;
    for (int w = 0; w < 64; w++)
        given += g.to_tid[w];
    /* conservation: every nanosecond the process used is in a sample or given */
    assert_int_equal(taken + given + a.pending_end, cpu_at_end);
    /* each worker holds its 25 ms: taken at rounds plus its tail */
    for (int w = 10; w < 19; w++) /* the last one ends after the window's last round */
        assert_true(g.to_tid[w] > 0 && g.to_tid[w] < 25 * MS);
    assert_int_equal(g.to_none, 0);
    skpx_acct_cleanup(&a);
}

/* A thread born and dead between two rounds: its CPU sits in the balance until a thread vanishes
 * (and each vanished thread takes at most the wall time since it was seen), then the rest at the
 * end goes to give(NULL). */
static void test_balance_bounded_and_kept(void **state)
{
    (void)state;
    struct skpx_acct a;
    struct gives g;
    memset(&g, 0, sizeof(g));
    assert_int_equal(skpx_acct_init(&a), SKP_OK);
    skpx_acct_round_begin(&a, 0, 0);
    assert_non_null(skpx_acct_observe(&a, 1, 0, true));
    assert_non_null(skpx_acct_observe(&a, 2, 0, true));
    skpx_acct_round_end(&a, give, &g);
    /* round 2: 30 ms of CPU from an unseen thread; nobody vanished */
    skpx_acct_round_begin(&a, 10 * MS, 30 * MS);
    uint64_t ids[1] = {4};
    assert_non_null(skpx_acct_observe(&a, 1, 0, true));
    assert_int_equal(skpx_acct_set_ids(skpx_acct_observe(&a, 2, 0, true), ids, 1), SKP_OK);
    skpx_acct_round_end(&a, give, &g);
    assert_int_equal(g.n_calls, 0);
    assert_int_equal(a.balance, 30 * MS);
    /* round 3: thread 2 vanished with a stack (seen 10 ms ago): takes at most 10 ms */
    skpx_acct_round_begin(&a, 20 * MS, 30 * MS);
    assert_non_null(skpx_acct_observe(&a, 1, 0, true));
    skpx_acct_round_end(&a, give, &g);
    assert_int_equal(g.to_tid[2], 10 * MS);
    assert_int_equal(a.balance, 20 * MS);
    skpx_acct_finish(&a, give, &g);
    assert_int_equal(g.to_none, 20 * MS);
    assert_int_equal(a.balance, 0);
    skpx_acct_cleanup(&a);
}

/* Pending CPU of a vanished thread with a stack is given even without a process clock, that of
 * one without a stack goes to the others through the balance; a reused tid (lower clock) starts
 * over; a tid observed twice in one round counts once; finish gives pending CPU only to
 * threads with a stack. */
static void test_pending_reuse_and_twice(void **state)
{
    (void)state;
    struct skpx_acct a;
    struct gives g;
    memset(&g, 0, sizeof(g));
    uint64_t ids[1] = {1};
    assert_int_equal(skpx_acct_init(&a), SKP_OK);
    skpx_acct_round_begin(&a, 0, -1); /* process clock unknown: no balance at all */
    assert_non_null(skpx_acct_observe(&a, 5, 100 * MS, true));
    skpx_acct_round_end(&a, give, &g);
    skpx_acct_round_begin(&a, 10 * MS, -1);
    struct skpx_acct_thread *t = skpx_acct_observe(&a, 5, 103 * MS, true);
    assert_int_equal(t->seen_ns - t->done_ns, 3 * MS);
    assert_false(t->is_new);
    t = skpx_acct_observe(&a, 5, 104 * MS, true); /* twice: updated, counted once */
    assert_int_equal(t->delta_ns, 4 * MS);
    assert_int_equal(a.seen_sum, 4 * MS);
    skpx_acct_round_end(&a, give, &g);
    skpx_acct_round_begin(&a, 20 * MS, -1);
    t = skpx_acct_observe(&a, 5, 2 * MS, true); /* lower: a new thread with the same tid */
    assert_true(t->is_new);
    assert_int_equal(t->done_ns, 0);
    assert_int_equal(t->seen_ns, 2 * MS);
    assert_int_equal(skpx_acct_set_ids(t, ids, 1), SKP_OK);
    struct skpx_acct_thread *u = skpx_acct_observe(&a, 6, 1 * MS, true); /* new, no stack */
    assert_non_null(u);
    skpx_acct_round_end(&a, give, &g);
    skpx_acct_round_begin(&a, 30 * MS, -1);
    /* both vanish: 5 gets its pending CPU and, having a stack, 6's (which has none) */
    skpx_acct_round_end(&a, give, &g);
    assert_int_equal(g.to_tid[5], 3 * MS);
    assert_int_equal(g.to_tid[6], 0);
    assert_int_equal(a.n_used, 0);
    /* finish: a live thread with a stack gets its pending CPU, one without is counted apart */
    skpx_acct_round_begin(&a, 40 * MS, -1);
    t = skpx_acct_observe(&a, 7, 3 * MS, true);
    assert_int_equal(skpx_acct_set_ids(t, ids, 1), SKP_OK);
    assert_non_null(skpx_acct_observe(&a, 8, 4 * MS, false));
    skpx_acct_round_end(&a, give, &g);
    skpx_acct_finish(&a, give, &g);
    assert_int_equal(g.to_tid[7], 3 * MS);
    assert_int_equal(g.to_tid[8], 0);
    assert_int_equal(a.pending_end, 4 * MS);
    skpx_acct_cleanup(&a);
}

/* More threads than the table holds: the extra ones are counted as untracked; threads coming and
 * going many times over (backward-shift deletion) keep every lookup right; unlisted threads that
 * end are given their pending CPU. */
static void test_bounded_table_churn(void **state)
{
    (void)state;
    struct skpx_acct a;
    struct gives g;
    memset(&g, 0, sizeof(g));
    assert_int_equal(skpx_acct_init(&a), SKP_OK);
    skpx_acct_round_begin(&a, 0, -1);
    for (int tid = 1; tid <= SKPX_ACCT_MAX + 10; tid++)
        (void)skpx_acct_observe(&a, tid, 0, true);
    assert_int_equal(a.n_used, SKPX_ACCT_MAX);
    assert_int_equal(a.untracked, 10);
    skpx_acct_round_end(&a, give, &g);
    /* a round that sees none of them: all forgotten (a round holds the old and the new ones
     * until its end) */
    skpx_acct_round_begin(&a, 0, -1);
    skpx_acct_round_end(&a, give, &g);
    assert_int_equal(a.n_used, 0);
    for (int r = 1; r <= 50; r++) { /* half the threads end, new ones come, every round */
        skpx_acct_round_begin(&a, r * MS, -1);
        for (int k = 0; k < SKPX_ACCT_MAX / 2; k++) {
            int tid = 100000 + r * 1000 + k;
            struct skpx_acct_thread *t = skpx_acct_observe(&a, tid, 1, false);
            assert_non_null(t);
            assert_true(t->is_new);
        }
        skpx_acct_round_end(&a, give, &g);
        assert_int_equal(a.n_used, SKPX_ACCT_MAX / 2);
        /* the previous round's threads ended with 2 ns pending each (their clock started at 0) */
        assert_int_equal(g.to_others, (int64_t)(r - 1) * (SKPX_ACCT_MAX / 2) * 2);
        /* every live thread is found again, not added twice */
        skpx_acct_round_begin(&a, r * MS + 1, -1);
        for (int k = 0; k < SKPX_ACCT_MAX / 2; k++) {
            struct skpx_acct_thread *t = skpx_acct_observe(&a, 100000 + r * 1000 + k, 2, false);
            assert_false(t->is_new);
            assert_int_equal(t->delta_ns, 1);
        }
        skpx_acct_round_end(&a, give, &g);
    }
    skpx_acct_cleanup(&a);
}

static skp_err ids_body(void *ctx, long k)
{
    (void)ctx;
    (void)k;
    struct skpx_acct a;
    skp_err err = skpx_acct_init(&a);
    if (err)
        return err;
    uint64_t ids[40];
    for (int i = 0; i < 40; i++)
        ids[i] = (uint64_t)i + 1;
    skpx_acct_round_begin(&a, 0, -1);
    struct skpx_acct_thread *t = skpx_acct_observe(&a, 3, 0, true);
    err = skpx_acct_set_ids(t, ids, 10);
    if (!err)
        err = skpx_acct_set_ids(t, ids, 40); /* grows */
    if (err)
        assert_int_equal(t->n_ids, 0); /* forgotten, not half-kept */
    skpx_acct_cleanup(&a);
    return err;
}

static void test_alloc_faults(void **state)
{
    (void)state;
    struct skp_alloc_fault_runs r = skp_test_alloc_faults(ids_body, NULL, 50);
    assert_true(r.n_nomem >= 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_short_threads_conserve_cpu),
        cmocka_unit_test(test_balance_bounded_and_kept),
        cmocka_unit_test(test_pending_reuse_and_twice),
        cmocka_unit_test(test_bounded_table_churn),
        cmocka_unit_test(test_alloc_faults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
