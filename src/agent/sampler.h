/* sampler.h - the sampling loop of the active task: every dump period it visits each slot and
 * captures the stack of each slotted request through the stack source into a snapshot (dropped
 * and counted when the queue is full; the sampler never blocks on it). The thread (skp-sampler)
 * exists only while a task is active.
 * Min-duration threshold: a request is sampled from its start, but while it runs under the
 * threshold its dumps go to its slot's hold (snapshot.h), not to the queue. When it passes the
 * threshold (it becomes PROFILING and takes its unit of the sampling budget) the hold is queued
 * in order, each dump with its own time and sequence number, and later dumps are queued as they
 * come; when it ends under the threshold the hold is freed at the sampler's next iteration and
 * nothing is sent. Holds are preallocated per slot when the task starts (skp__sampler_task_begin:
 * threshold / period + 3 entries, at most SKP_HOLD_DUMPS_MAX, and SKP_HOLD_BYTES_MAX shared by
 * the slots); the snapshots themselves are allocated on the sampler thread, as every snapshot
 * is. The request's thread never touches a hold. Without the holds (threshold 0, no source, or
 * no memory at task start) a request is captured only once past the threshold.
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
    /* holds of the current task, one per slot (NULL: none); owned, one block with their
     * arrays; changed only under run_lock */
    struct skp__snapshot_hold *holds;
    int n_holds;
    pthread_mutex_t run_lock; /* one iteration at a time */
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
    _Atomic uint64_t held;           /* dumps captured under the threshold into a hold */
    _Atomic uint64_t held_sent;      /* held dumps queued: their request passed the threshold */
    _Atomic uint64_t held_discarded; /* held dumps freed: request ended under it, task stopped */
    _Atomic uint64_t held_dropped;   /* held dumps dropped, hold full (also in queue->dropped) */
    _Atomic int64_t task_runs;       /* iterations of the current task */
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

/* Sets up the holds of the task just published in ctx (see the header comment), for a dump
 * period of period_ms. Without memory the task runs without holds (logged). Called by
 * skp__sampler_start; tests call it to drive run_once by hand. */
void skp__sampler_task_begin(struct skp__sampler *s, int64_t period_ms);
/* Frees the holds (their dumps are discarded, not sent). Called by skp__sampler_stop after the
 * thread is joined; before ctx's task stops. */
void skp__sampler_task_end(struct skp__sampler *s);
/* Forked child: frees the sampler's memory without touching its locks (the threads are gone). */
void skp__sampler_forget(struct skp__sampler *s);

/* Sets up the task's holds (skp__sampler_task_begin) and starts skp-sampler with the given
 * period; it ends by itself at stop_at_ms (wall clock). Errors: SKP_ESTATE (already running),
 * SKP_EIO (the holds are freed then). */
SKP_MUST_CHECK skp_err skp__sampler_start(struct skp__sampler *s, int64_t period_ms,
                                          int64_t stop_at_ms);
/* Stops and joins the thread (bounded by one capture), then skp__sampler_task_end. */
void skp__sampler_stop(struct skp__sampler *s);

/* The schedule's tick k of a task started at start_ns with period_ns: one instant drawn
 * uniformly from the k-th period, [start + (k - 1/2) period, start + (k + 1/2) period) (tick 0
 * is start), so dumps are a period apart on average and less than two apart. A fixed period
 * aliases with code that repeats at a divisor of it (two 1 ms functions alternating under a
 * 10 ms period were dumped always in the same one); a uniform instant in each period sees every
 * phase of such code equally. The analysis times each dump by its own step, so the jitter costs
 * it nothing. *rng is the caller's xorshift state (non-zero); pure, thread-safe for distinct
 * states. */
int64_t skp__sampler_tick_ns(int64_t start_ns, int64_t k, int64_t period_ns, uint64_t *rng);

/* Iterations per second over the current (or last) task. */
double skp__sampler_rate_hz(struct skp__sampler *s);

#endif
