/* sampler.h - the sampling loop of the active task: every dump period it visits each slot,
 * promotes requests running longer than the threshold to PROFILING and captures their stacks
 * through the stack source into snapshots (dropped and counted when the queue is full; the
 * sampler never blocks on it). The thread (skp-sampler) exists only while a task is active.
 * Drift-free schedule: tick k runs at start + k * period; a slow capture shortens the next wait,
 * ticks more than one period late are skipped (counted), never bunched.
 * Threading: start/stop by the task owner; run_once may also be called by another thread (bench
 * hook): a mutex serializes iterations. */
#ifndef SKP_AGENT_SAMPLER_H
#define SKP_AGENT_SAMPLER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/agent_clock.h"
#include "agent/snapshot.h"
#include "agent/task_context.h"

struct skp__sampler {
    struct skp__task_ctx *ctx;         /* borrowed */
    struct skp__snapshot_queue *queue; /* borrowed */
    const struct skp__clock *clock;    /* borrowed */
    uint32_t max_depth;
    int64_t max_profiling_ms;
    struct skyprof_frame *frames; /* owned, max_depth entries */
    char *scratch;                /* owned, SKP_CAPTURE_SCRATCH_BYTES */
    pthread_mutex_t run_lock;     /* one iteration at a time */
    /* thread */
    pthread_t thread;
    bool thread_running;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop_requested; /* under mu */
    int64_t period_ms;
    int64_t stop_at_ms; /* wall clock: the loop ends by itself then */
    /* stats */
    _Atomic uint64_t runs;
    _Atomic uint64_t captured;
    _Atomic uint64_t capture_failures;
    _Atomic uint64_t capture_lost; /* SKYPROF_CAPTURE_LOST: dump skipped, request kept */
    _Atomic uint64_t late_ticks;
    _Atomic int64_t task_runs; /* iterations of the current task */
    _Atomic int64_t task_start_ns;
    _Atomic int64_t task_last_ns;
};

/* Errors: SKP_ENOMEM, SKP_EIO. */
SKP_MUST_CHECK skp_err skp__sampler_init(struct skp__sampler *s, struct skp__task_ctx *ctx,
                                         struct skp__snapshot_queue *queue,
                                         const struct skp__clock *clock, uint32_t max_depth,
                                         int64_t max_profiling_ms);
/* The thread must be stopped. Safe after a failed init (zeroed struct). */
void skp__sampler_cleanup(struct skp__sampler *s);

/* One iteration over the slots at wall time now_ms (see the header comment). */
void skp__sampler_run_once(struct skp__sampler *s, int64_t now_ms);

/* Starts skp-sampler with the given period; it ends by itself at stop_at_ms (wall clock).
 * Errors: SKP_ESTATE (already running), SKP_EIO. */
SKP_MUST_CHECK skp_err skp__sampler_start(struct skp__sampler *s, int64_t period_ms,
                                          int64_t stop_at_ms);
/* Stops and joins the thread (bounded by one capture). No-op when not running. */
void skp__sampler_stop(struct skp__sampler *s);

/* Iterations per second over the current (or last) task. */
double skp__sampler_rate_hz(struct skp__sampler *s);

#endif
