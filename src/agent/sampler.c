/* sampler.c - the sampling loop (see sampler.h).
 * Differences from SkyWalking, on purpose: a request becomes PROFILING and gets its first dump in
 * the same iteration in which it passes the threshold (SkyWalking dumps one period later); the
 * sampling budget check is `>=` (exactly max_sampling_count segments are dumped); a full queue
 * drops the snapshot instead of blocking (Python) and the sequence number is still consumed, so
 * the backend sees the gap; a request that ended is never sampled again (Python keeps sampling). */
#include "agent/sampler.h"

#include <string.h>

#include "agent/agent_limits.h"
#include "agent/agent_thread.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"

skp_err skp__sampler_init(struct skp__sampler *s, struct skp__task_ctx *ctx,
                          struct skp__snapshot_queue *queue, const struct skp__clock *clock,
                          uint32_t max_depth, int64_t max_profiling_ms)
{
    memset(s, 0, sizeof(*s));
    s->ctx = ctx;
    s->queue = queue;
    s->clock = clock;
    s->max_depth = max_depth ? max_depth : 1;
    s->max_profiling_ms = max_profiling_ms;
    s->frames = skpx_calloc(s->max_depth, sizeof(*s->frames));
    s->scratch = skpx_malloc(SKP_CAPTURE_SCRATCH_BYTES);
    if (!s->frames || !s->scratch) {
        skpx_free(s->frames);
        skpx_free(s->scratch);
        s->frames = NULL;
        s->scratch = NULL;
        return SKP_ENOMEM;
    }
    pthread_mutex_init(&s->run_lock, NULL);
    pthread_mutex_init(&s->mu, NULL);
    if (skp__cond_init_mono(&s->cv)) {
        pthread_mutex_destroy(&s->run_lock);
        pthread_mutex_destroy(&s->mu);
        skpx_free(s->frames);
        skpx_free(s->scratch);
        s->frames = NULL;
        s->scratch = NULL;
        return SKP_EIO;
    }
    return SKP_OK;
}

void skp__sampler_cleanup(struct skp__sampler *s)
{
    if (!s || !s->frames)
        return;
    pthread_mutex_destroy(&s->run_lock);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    skpx_free(s->frames);
    skpx_free(s->scratch);
    s->frames = NULL;
    s->scratch = NULL;
}

/* Captures one slot the sampler holds in CAPTURING (its sampling budget already taken). Returns
 * false if sampling of this request must stop (capture failed). */
static bool capture_slot(struct skp__sampler *s, struct skp__slot *slot, int64_t now_ms)
{
    struct skp__task_ctx *ctx = s->ctx;
    struct skyprof_capture cap = {
        .frames = s->frames,
        .cap = s->max_depth,
        .scratch = s->scratch,
        .scratch_cap = SKP_CAPTURE_SCRATCH_BYTES,
    };
    int rc = ctx->source.capture(ctx->source.ud, slot->thread_handle, slot->tid, &cap);
    if (rc == SKYPROF_CAPTURE_LOST) {
        /* One sample lost (the thread did not answer in time): skip this dump, keep sampling.
         * No sequence number is used, and a first dump gives its budget unit back. */
        atomic_fetch_add_explicit(&s->capture_lost, 1, memory_order_relaxed);
        if (slot->dump_seq == 0)
            atomic_fetch_sub(&ctx->total_started, 1);
        return true;
    }
    if (rc < 0 || cap.n == 0 || cap.scratch_len > cap.scratch_cap) {
        atomic_fetch_add_explicit(&s->capture_failures, 1, memory_order_relaxed);
        return false;
    }
    struct skp__snapshot *snap = skp__snapshot_new(ctx->task.task_id, slot->segment_id, now_ms,
                                                   slot->dump_seq, &cap, s->max_depth);
    slot->dump_seq++; /* consumed even when the snapshot is dropped: the gap stays visible */
    if (!snap) {
        atomic_fetch_add(&s->queue->dropped, 1);
        return true;
    }
    atomic_fetch_add_explicit(&s->captured, 1, memory_order_relaxed);
    (void)skp__snapshot_queue_push(s->queue, snap);
    return true;
}

/* Hands slot i (held in CAPTURING since claim `seq`) back in state `back`, or frees it when
 * `keep` is false or the request ended meanwhile. */
static void put_back(struct skp__task_ctx *ctx, int i, uint64_t seq, enum skp__slot_state back,
                     bool keep)
{
    uint64_t expect = SKP_SLOT_WORD(seq, SKP_SLOT_CAPTURING);
    if (keep &&
        atomic_compare_exchange_strong(&ctx->slots[i].word, &expect, SKP_SLOT_WORD(seq, back)))
        return;
    skp__task_ctx_sampler_free(ctx, i, seq); /* stopped by us, or ended while captured */
}

/* A slot taken by the first pass of an iteration, to capture in the second. */
struct due_slot {
    int i;
    uint64_t seq;
};

/* An iteration runs in two passes. The first takes every due slot into CAPTURING (promoting
 * requests past the threshold, stopping those past profile.duration or out of budget); then the
 * source is told which handles follow (capture_prepare: it may read them all in one batch), and
 * the second pass captures them and hands each slot back. A request that ends meanwhile sees
 * CAPTURING and leaves its slot to us (ENDED), as during a single capture. */
void skp__sampler_run_once(struct skp__sampler *s, int64_t now_ms)
{
    struct skp__task_ctx *ctx = s->ctx;
    pthread_mutex_lock(&s->run_lock);
    atomic_fetch_add_explicit(&s->runs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->task_runs, 1, memory_order_relaxed);
    atomic_store_explicit(&s->task_last_ns, skpx_mono_ns(), memory_order_relaxed);
    struct due_slot due[SKYPROF_MAX_PARALLEL_CAP];
    void *handles[SKYPROF_MAX_PARALLEL_CAP];
    size_t n_due = 0;
    int n_slots =
        ctx->max_parallel < SKYPROF_MAX_PARALLEL_CAP ? ctx->max_parallel : SKYPROF_MAX_PARALLEL_CAP;
    for (int i = 0; i < n_slots; i++) {
        struct skp__slot *slot = &ctx->slots[i];
        uint64_t w = atomic_load(&slot->word);
        enum skp__slot_state st = SKP_SLOT_STATE(w);
        uint64_t seq = SKP_SLOT_SEQ(w);
        if (st != SKP_SLOT_PENDING && st != SKP_SLOT_PROFILING)
            continue;
        /* Own the slot before reading its fields: the request may end meanwhile (-> ENDED). */
        if (!atomic_compare_exchange_strong(&slot->word, &w,
                                            SKP_SLOT_WORD(seq, SKP_SLOT_CAPTURING)))
            continue;
        if (st == SKP_SLOT_PENDING) {
            if (now_ms - slot->segment_start_ms <= ctx->task.min_duration_threshold_ms) {
                put_back(ctx, i, seq, SKP_SLOT_PENDING, true);
                continue;
            }
            slot->profiling_start_ms = now_ms;
        }
        if (now_ms - slot->profiling_start_ms >= s->max_profiling_ms) {
            put_back(ctx, i, seq, SKP_SLOT_PROFILING, false); /* SkyWalking profile.duration */
            continue;
        }
        if (!ctx->source.capture) {
            put_back(ctx, i, seq, SKP_SLOT_PROFILING, true); /* no source: held, not captured */
            continue;
        }
        /* SkyWalking consumes the budget at a segment's first dump; `>=` makes it exact. */
        if (slot->dump_seq == 0 &&
            atomic_fetch_add(&ctx->total_started, 1) >= ctx->task.max_sampling_count) {
            put_back(ctx, i, seq, SKP_SLOT_PROFILING, false);
            continue;
        }
        due[n_due] = (struct due_slot){i, seq};
        handles[n_due++] = slot->thread_handle;
    }
    if (n_due > 0 && ctx->source.capture_prepare)
        ctx->source.capture_prepare(ctx->source.ud, handles, n_due);
    for (size_t k = 0; k < n_due; k++) {
        bool keep = capture_slot(s, &ctx->slots[due[k].i], now_ms);
        put_back(ctx, due[k].i, due[k].seq, SKP_SLOT_PROFILING, keep);
    }
    pthread_mutex_unlock(&s->run_lock);
}

static void *sampler_main(void *arg)
{
    struct skp__sampler *s = arg;
    /* The schedule runs on the real monotonic clock (the condition variable waits on it); the
     * clock seam provides the wall time stamped into snapshots and the task's end. */
    int64_t period_ns = s->period_ms * 1000000;
    int64_t start = skpx_mono_ns();
    int64_t k = 0;
    pthread_mutex_lock(&s->mu);
    while (!s->stop_requested) {
        pthread_mutex_unlock(&s->mu);
        int64_t now_ms = skp__now_ms(s->clock);
        if (now_ms >= s->stop_at_ms)
            goto done_unlocked;
        skp__sampler_run_once(s, now_ms);
        k++;
        int64_t now = skpx_mono_ns();
        int64_t next = start + k * period_ns;
        if (now > next + period_ns) {
            /* more than a period late (slow captures, host overload): skip, don't bunch */
            int64_t behind = (now - start) / period_ns + 1;
            atomic_fetch_add_explicit(&s->late_ticks, (uint64_t)(behind - k), memory_order_relaxed);
            k = behind;
            next = start + k * period_ns;
        }
        pthread_mutex_lock(&s->mu);
        while (!s->stop_requested && skpx_mono_ns() < next)
            skp__cond_wait_until(&s->cv, &s->mu, next);
    }
    pthread_mutex_unlock(&s->mu);
done_unlocked:
    return NULL;
}

skp_err skp__sampler_start(struct skp__sampler *s, int64_t period_ms, int64_t stop_at_ms)
{
    if (s->thread_running)
        return SKP_ESTATE;
    s->period_ms = period_ms > 0 ? period_ms : 1;
    s->stop_at_ms = stop_at_ms;
    s->stop_requested = false;
    atomic_store(&s->task_runs, 0);
    int64_t now = skpx_mono_ns();
    atomic_store(&s->task_start_ns, now);
    atomic_store(&s->task_last_ns, now);
    skp_err err = skp__thread_start(&s->thread, "skp-sampler", sampler_main, s);
    if (err)
        return err;
    s->thread_running = true;
    return SKP_OK;
}

void skp__sampler_stop(struct skp__sampler *s)
{
    if (!s->thread_running)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop_requested = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    s->thread_running = false;
}

double skp__sampler_rate_hz(struct skp__sampler *s)
{
    int64_t runs = atomic_load(&s->task_runs);
    int64_t dt = atomic_load(&s->task_last_ns) - atomic_load(&s->task_start_ns);
    if (runs < 2 || dt <= 0)
        return 0.0;
    return (double)(runs - 1) * 1e9 / (double)dt;
}
