/* skp_alloc_faults.h - the allocation-failure loop of the cmocka unit tests (STYLE.md §10,
 * "SKP_TEST_ALLOC_FAULTS"), written once: a body runs with its 1st, 2nd, ... allocation failing
 * (skpx_alloc_fail_after) until a run never reaches its failing allocation. After every run the
 * harness checks that the body answered SKP_OK or SKP_ENOMEM and that the allocator's live-byte
 * counter is back where it was (the body freed everything it made, on both paths).
 *
 *     static skp_err insert_body(void *ctx, long k)     // k: index of the failing allocation
 *     {
 *         struct fixture *f = ctx;
 *         return store_insert_snapshots(f->st, f->v, f->n, &dup);
 *     }
 *     struct skp_alloc_fault_runs r = skp_test_alloc_faults(insert_body, f, 500);
 *     assert_true(r.n_nomem > 0);
 *
 * Include after <cmocka.h>. Not thread-safe (the failure counter is process-wide). */
#ifndef SKP_TEST_ALLOC_FAULTS_H
#define SKP_TEST_ALLOC_FAULTS_H

#include <stdint.h>

#include "common/alloc.h"
#include "skyprof/skp_err.h"

/* One run of the body with the k-th allocation (0-based) failing. Returns SKP_OK or SKP_ENOMEM
 * (anything else fails the test); frees everything it allocated before returning. */
typedef skp_err (*skp_alloc_fault_body_cb)(void *ctx, long k);

struct skp_alloc_fault_runs {
    long runs;    /* bodies run, the last one without a failure */
    long n_ok;    /* runs answering SKP_OK (failures the body absorbed, and the last run) */
    long n_nomem; /* runs answering SKP_ENOMEM */
};

/* Runs body for k = 0, 1, ... until a run ends before its k-th allocation, at most max_runs
 * times (the test fails when the limit is reached first). Borrows ctx. */
static inline struct skp_alloc_fault_runs skp_test_alloc_faults(skp_alloc_fault_body_cb body,
                                                                void *ctx, long max_runs)
{
    struct skp_alloc_fault_runs r = {0, 0, 0};
    for (long k = 0; k < max_runs; k++) {
        int64_t live0 = skpx_alloc_live_bytes();
        skpx_alloc_fail_after(k);
        skp_err err = body(ctx, k);
        long remaining = skpx_alloc_fail_remaining();
        skpx_alloc_fail_after(-1);
        r.runs++;
        if (err != SKP_OK && err != SKP_ENOMEM)
            fail_msg("allocation %ld failing: body answered %d, not SKP_OK or SKP_ENOMEM", k,
                     (int)err);
        if (skpx_alloc_live_bytes() != live0)
            fail_msg("allocation %ld failing: %lld bytes leaked", k,
                     (long long)(skpx_alloc_live_bytes() - live0));
        if (err == SKP_OK)
            r.n_ok++;
        else
            r.n_nomem++;
        if (remaining > 0) /* this run never reached its failing allocation: all were tried */
            return r;
    }
    fail_msg("body still allocating after %ld runs", max_runs);
    return r;
}

#endif
