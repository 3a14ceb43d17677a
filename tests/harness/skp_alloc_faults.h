/* skp_alloc_faults.h - the allocation-failure loop of the cmocka unit tests (STYLE.md §10,
 * "SKP_TEST_ALLOC_FAULTS"), written once: a body runs with its 1st, 2nd, ... allocation failing
 * (skpx_alloc_fail_after) until a run never reaches its failing allocation. After every run the
 * harness checks that the body answered SKP_OK or SKP_ENOMEM (or, when the loop allows it, another
 * error) and that the allocator's live-byte counter is back where it was (everything made was
 * freed, on both paths).
 *
 *     static skp_err insert_body(void *ctx, long k)     // k: index of the failing allocation
 *     {
 *         struct fixture *f = ctx;
 *         return store_insert_snapshots(f->st, f->v, f->n, &dup);
 *     }
 *     struct skp_alloc_fault_runs r = skp_test_alloc_faults(insert_body, f, 500);
 *     assert_true(r.n_nomem > 0);
 *
 * A loop that needs a fresh fixture per run (opened with nothing failing) or checks what a run
 * left behind uses struct skp_alloc_fault_loop's setup and check hooks instead.
 *
 * Include after <cmocka.h>. Not thread-safe (the failure counter is process-wide). */
#ifndef SKP_TEST_ALLOC_FAULTS_H
#define SKP_TEST_ALLOC_FAULTS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/alloc.h"
#include "skyprof/skp_err.h"

/* One run of the body with the k-th allocation (0-based) failing. Returns SKP_OK or SKP_ENOMEM
 * (anything else fails the test unless the loop sets other_errors). */
typedef skp_err (*skp_alloc_fault_body_cb)(void *ctx, long k);
/* Runs before a run, with no failure armed (e.g. opens a fresh fixture). */
typedef void (*skp_alloc_fault_setup_cb)(void *ctx, long k);
/* Runs after a run, with no failure armed: checks what the body left (err: its answer) and frees
 * what setup and body made. */
typedef void (*skp_alloc_fault_check_cb)(void *ctx, long k, skp_err err);

struct skp_alloc_fault_loop {
    skp_alloc_fault_body_cb body;   /* required */
    skp_alloc_fault_setup_cb setup; /* NULL = none */
    skp_alloc_fault_check_cb check; /* NULL = none */
    void *ctx;                      /* borrowed, handed to the three */
    long max_runs;                  /* the test fails when the body still allocates after these */
    bool other_errors;              /* errors besides SKP_ENOMEM are failed runs too (n_other) */
};

struct skp_alloc_fault_runs {
    long runs;    /* bodies run, the last one without a failure */
    long n_ok;    /* runs answering SKP_OK (failures the body absorbed, and the last run) */
    long n_nomem; /* runs answering SKP_ENOMEM */
    long n_other; /* runs answering another error (only with other_errors) */
};

/* Runs loop->body for k = 0, 1, ... (setup before and check after each run, the live bytes
 * counted from before setup to after check) until a run ends before its k-th allocation, at most
 * max_runs times. Borrows loop. */
static inline struct skp_alloc_fault_runs skp_test_alloc_fault_loop(
    const struct skp_alloc_fault_loop *loop)
{
    struct skp_alloc_fault_runs r = {0, 0, 0, 0};
    for (long k = 0; k < loop->max_runs; k++) {
        int64_t live0 = skpx_alloc_live_bytes();
        if (loop->setup)
            loop->setup(loop->ctx, k);
        skpx_alloc_fail_after(k);
        skp_err err = loop->body(loop->ctx, k);
        long remaining = skpx_alloc_fail_remaining();
        skpx_alloc_fail_after(-1);
        r.runs++;
        if (err != SKP_OK && err != SKP_ENOMEM && !loop->other_errors)
            fail_msg("allocation %ld failing: body answered %d, not SKP_OK or SKP_ENOMEM", k,
                     (int)err);
        if (loop->check)
            loop->check(loop->ctx, k, err);
        if (skpx_alloc_live_bytes() != live0)
            fail_msg("allocation %ld failing: %lld bytes leaked", k,
                     (long long)(skpx_alloc_live_bytes() - live0));
        if (err == SKP_OK)
            r.n_ok++;
        else if (err == SKP_ENOMEM)
            r.n_nomem++;
        else
            r.n_other++;
        if (remaining > 0) /* this run never reached its failing allocation: all were tried */
            return r;
    }
    fail_msg("body still allocating after %ld runs", loop->max_runs);
    return r;
}

/* The loop with a body alone (no setup, no check, SKP_OK / SKP_ENOMEM only). Borrows ctx. */
static inline struct skp_alloc_fault_runs skp_test_alloc_faults(skp_alloc_fault_body_cb body,
                                                                void *ctx, long max_runs)
{
    struct skp_alloc_fault_loop loop = {.body = body, .ctx = ctx, .max_runs = max_runs};
    return skp_test_alloc_fault_loop(&loop);
}

#endif
