/* task_context.h - the running task as the tracer and the sampler see it: at most max_parallel
 * slots, each holding one profiled request (segment) and its thread.
 *
 * Design. There is one context object per process (it lives in the never-freed tracer hub), so a
 * request thread may keep a pointer to its slot across task and agent restarts. Each slot has one
 * atomic word = (claim sequence << 8) | state; every transition is a CAS on it, and the sequence
 * (bumped on each claim) makes a stale owner's CAS fail after its slot was recycled.
 *   FREE -> CLAIMED (request, at entry_begin) -> PENDING (published; under a threshold the
 *   sampler captures it into a hold, sampler.h) -> PROFILING (sampler, after the threshold)
 *   <-> CAPTURING (sampler, during one capture, from PENDING or PROFILING);
 *   request end: PENDING/PROFILING -> RELEASING -> FREE, or CAPTURING -> ENDED (the sampler then
 *   releases when its capture returns); the sampler frees slots it stops itself (thread gone,
 *   max profiling time, sampling budget spent); task stop frees every slot.
 * Task fields are written only while `live` is 0 and no request is inside an attempt (`users`);
 * an attempt increments `users` and re-checks `live` before reading them (no lock).
 * Lock-free throughout; stack source callbacks run outside any lock. */
#ifndef SKP_AGENT_TASK_CONTEXT_H
#define SKP_AGENT_TASK_CONTEXT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/agent_limits.h"
#include "agent/task_service.h"
#include "skyprof/skyprof.h"

enum skp__slot_state {
    SKP_SLOT_FREE = 0,
    SKP_SLOT_CLAIMED = 1,
    SKP_SLOT_PENDING = 2,
    SKP_SLOT_PROFILING = 3,
    SKP_SLOT_CAPTURING = 4,
    SKP_SLOT_ENDED = 5,
    SKP_SLOT_RELEASING = 6,
};

#define SKP_SLOT_WORD(seq, st) (((uint64_t)(seq) << 8) | (uint64_t)(st))
#define SKP_SLOT_SEQ(w) ((w) >> 8)
#define SKP_SLOT_STATE(w) ((enum skp__slot_state)((w)&0xff))

struct skp__slot {
    _Atomic uint64_t word;
    /* written by the claimant before PENDING is published; read-only afterwards */
    char segment_id[SKP_ID_MAX];
    int64_t segment_start_ms;
    int tid;
    void *thread_handle;
    /* sampler-owned (reset by the claimant) */
    int64_t profiling_start_ms;
    int32_t dump_seq;  /* next sequence number (held dumps use them too) */
    bool budget_taken; /* this request counts in total_started */
};

struct skp__task_ctx {
    _Atomic int users;     /* requests inside attempt() */
    _Atomic int live;      /* 1 while the task accepts requests */
    struct skp__task task; /* stable while live */
    int max_parallel;
    struct skyprof_stack_source source; /* stable while live */
    _Atomic int n_profiling;            /* SkyWalking's currentProfilingCount */
    _Atomic int total_started;          /* segments whose first dump happened (sampling budget) */
    _Atomic uint64_t n_slots_taken;
    struct skp__slot slots[SKYPROF_MAX_PARALLEL_CAP];
};

/* What a request keeps to release its slot. */
struct skp__profiling_ref {
    struct skp__task_ctx *ctx; /* NULL = not profiled */
    int slot;
    uint64_t seq;
};

/* Zeroes a context (process start only). */
void skp__task_ctx_init(struct skp__task_ctx *ctx);

/* Publishes `task` (copied) with `max_parallel` slots and the stack source (copied). Waits for
 * in-flight attempts of the previous task to leave. Caller: the task owner (one thread). */
void skp__task_ctx_start(struct skp__task_ctx *ctx, const struct skp__task *task, int max_parallel,
                         const struct skyprof_stack_source *source);

/* Stops accepting requests, waits for in-flight attempts, and frees every slot (releasing thread
 * handles through the source). The sampler must not be running. Caller: the task owner. */
void skp__task_ctx_stop(struct skp__task_ctx *ctx);

/* Request thread, at the first entry span of a segment (hot path when a task is live; a single
 * relaxed load otherwise). SkyWalking's attemptProfiling, fixed: endpoint must match exactly,
 * fewer than max_parallel requests profiled, sampling budget not spent (total >= max => none);
 * the parallel counter is rolled back when no slot is free. On success fills *ref and returns
 * true. */
bool skp__task_ctx_attempt(struct skp__task_ctx *ctx, const char *endpoint, const char *segment_id,
                           int64_t segment_start_ms, int tid, struct skp__profiling_ref *ref);

/* Request thread, at segment end: releases the slot at once (or hands the release to the sampler
 * when it is capturing this thread right now). NULL ctx in ref ok. */
void skp__task_ctx_release(struct skp__profiling_ref *ref);

/* Sampler side: frees a slot the sampler holds in state CAPTURING or ENDED (its capture finished,
 * or it stops sampling this request). */
void skp__task_ctx_sampler_free(struct skp__task_ctx *ctx, int slot, uint64_t seq);

/* Number of slots whose state is not FREE (for tests/stats). */
int skp__task_ctx_busy_slots(struct skp__task_ctx *ctx);

#endif
