/* sampler.c - the sampling loop (see sampler.h).
 * Differences from SkyWalking, on purpose: a request becomes PROFILING and gets its first dump in
 * the same iteration in which it passes the threshold (SkyWalking dumps one period later), and
 * under a threshold it is sampled from its start into a hold, sent only if it passes (SkyWalking
 * never sees the beginning of a slow request); the sampling budget check is `>=` (exactly
 * max_sampling_count segments are sent) and a held request that ends under the threshold does
 * not consume it; a full queue drops the snapshot instead of blocking (Python) and the sequence
 * number is still consumed, so the backend sees the gap; a request that ended is never sampled
 * again (Python keeps sampling). */
#include "agent/sampler.h"

#include <string.h>

#include "agent/agent_limits.h"
#include "agent/agent_thread.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"

/* Frees the capture buffers; frames == NULL is what tells cleanup the sampler holds none. */
static void buffers_free(struct skp__sampler *s)
{
    skpx_free(s->frames);
    skpx_free(s->scratch);
    s->frames = NULL;
    s->scratch = NULL;
}

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
        buffers_free(s);
        return SKP_ENOMEM;
    }
    pthread_mutex_init(&s->run_lock, NULL);
    pthread_mutex_init(&s->mu, NULL);
    if (skp__cond_init_mono(&s->cv)) {
        pthread_mutex_destroy(&s->run_lock);
        pthread_mutex_destroy(&s->mu);
        buffers_free(s);
        return SKP_EIO;
    }
    return SKP_OK;
}

void skp__sampler_cleanup(struct skp__sampler *s)
{
    if (!s || !s->frames)
        return;
    skp__sampler_task_end(s);
    pthread_mutex_destroy(&s->run_lock);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    buffers_free(s);
}

/* --- holds ---------------------------------------------------------------------------------- */
void skp__sampler_task_begin(struct skp__sampler *s, int64_t period_ms)
{
    struct skp__task_ctx *ctx = s->ctx;
    pthread_mutex_lock(&s->run_lock);
    if (s->holds) { /* a task_end was skipped: its dumps are not sent */
        for (int i = 0; i < s->n_holds; i++)
            atomic_fetch_add(&s->held_discarded, skp__snapshot_hold_discard(&s->holds[i]));
        skpx_free(s->holds);
        s->holds = NULL;
        s->n_holds = 0;
    }
    int64_t thr = ctx->task.min_duration_threshold_ms;
    int n = ctx->max_parallel;
    if (thr <= 0 || !ctx->source.capture || n < 1) {
        pthread_mutex_unlock(&s->run_lock);
        return;
    }
    if (period_ms < 1)
        period_ms = 1;
    int64_t want = thr / period_ms + 3; /* dumps before a request passes it, and some slack */
    uint32_t cap = want > SKP_HOLD_DUMPS_MAX ? SKP_HOLD_DUMPS_MAX : (uint32_t)want;
    size_t head = (size_t)n * sizeof(struct skp__snapshot_hold);
    struct skp__snapshot_hold *holds =
        skpx_calloc(1, head + (size_t)n * cap * sizeof(struct skp__snapshot *));
    if (!holds) {
        SKPX_WARN("skyprof: no memory for the held dumps of %d slots: requests are sampled only "
                  "once past the threshold",
                  n);
        pthread_mutex_unlock(&s->run_lock);
        return;
    }
    struct skp__snapshot **ents = (struct skp__snapshot **)(void *)((char *)holds + head);
    for (int i = 0; i < n; i++)
        skp__snapshot_hold_init(&holds[i], ents + (size_t)i * cap, cap, SKP_HOLD_BYTES_MAX / n);
    s->holds = holds;
    s->n_holds = n;
    pthread_mutex_unlock(&s->run_lock);
}

void skp__sampler_task_end(struct skp__sampler *s)
{
    pthread_mutex_lock(&s->run_lock);
    for (int i = 0; i < s->n_holds; i++)
        atomic_fetch_add(&s->held_discarded, skp__snapshot_hold_discard(&s->holds[i]));
    skpx_free(s->holds);
    s->holds = NULL;
    s->n_holds = 0;
    pthread_mutex_unlock(&s->run_lock);
}

void skp__sampler_forget(struct skp__sampler *s)
{
    /* the fork gate let the sampler reach its wait: the holds are consistent */
    for (int i = 0; i < s->n_holds; i++)
        (void)skp__snapshot_hold_discard(&s->holds[i]);
    SKPX_FREE_ALL(s->holds, s->frames, s->scratch);
    s->holds = NULL;
    s->n_holds = 0;
    s->frames = NULL;
    s->scratch = NULL;
}

static struct skp__snapshot_hold *hold_of(struct skp__sampler *s, int i)
{
    return i < s->n_holds ? &s->holds[i] : NULL;
}

/* Frees what a hold keeps for a request that is gone. */
static void hold_discard(struct skp__sampler *s, int i)
{
    struct skp__snapshot_hold *h = hold_of(s, i);
    if (h && h->owner)
        atomic_fetch_add(&s->held_discarded, skp__snapshot_hold_discard(h));
}

/* --- one iteration --------------------------------------------------------------------------- */
/* Captures one slot the sampler holds in CAPTURING, into the queue or (`hold`) into its hold.
 * Returns false if sampling of this request must stop (capture failed). */
static bool capture_slot(struct skp__sampler *s, int i, bool hold, int64_t now_ms)
{
    struct skp__task_ctx *ctx = s->ctx;
    struct skp__slot *slot = &ctx->slots[i];
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
        if (!hold && slot->dump_seq == 0 && slot->budget_taken) {
            atomic_fetch_sub(&ctx->total_started, 1);
            slot->budget_taken = false;
        }
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
    if (hold) {
        atomic_fetch_add_explicit(&s->held, 1, memory_order_relaxed);
        uint32_t dropped = skp__snapshot_hold_add(&s->holds[i], snap);
        if (dropped) {
            atomic_fetch_add(&s->held_dropped, dropped);
            atomic_fetch_add(&s->queue->dropped, dropped);
        }
        return true;
    }
    (void)skp__snapshot_queue_push(s->queue, snap);
    return true;
}

/* Hands slot i (held in CAPTURING since claim `seq`) back in state `back`, or frees it (and its
 * hold) when `keep` is false or the request ended meanwhile. */
static void put_back(struct skp__sampler *s, int i, uint64_t seq, enum skp__slot_state back,
                     bool keep)
{
    struct skp__task_ctx *ctx = s->ctx;
    uint64_t expect = SKP_SLOT_WORD(seq, SKP_SLOT_CAPTURING);
    if (keep &&
        atomic_compare_exchange_strong(&ctx->slots[i].word, &expect, SKP_SLOT_WORD(seq, back)))
        return;
    hold_discard(s, i);
    skp__task_ctx_sampler_free(ctx, i, seq); /* stopped by us, or ended while captured */
}

/* A slot taken by the first pass of an iteration, to capture in the second. */
struct due_slot {
    int i;
    uint64_t seq;
    bool hold; /* under the threshold: into the hold, back to PENDING */
};

/* An iteration runs in two passes. The first frees the holds of requests that ended, and takes
 * every due slot into CAPTURING: requests under the threshold when they have a hold, requests
 * past it (promoted to PROFILING with their budget unit; their hold queued first), stopping those
 * past profile.duration or out of budget. Then the source is told which handles follow
 * (capture_prepare: it may read them all in one batch), and the second pass captures them and
 * hands each slot back. A request that ends meanwhile sees CAPTURING and leaves its slot to us
 * (ENDED), as during a single capture. */
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
        struct skp__snapshot_hold *h = hold_of(s, i);
        uint64_t w = atomic_load(&slot->word);
        enum skp__slot_state st = SKP_SLOT_STATE(w);
        uint64_t seq = SKP_SLOT_SEQ(w);
        /* a hold whose request ended (slot freed or claimed again) is freed, never sent */
        if (h && h->owner && (h->owner != seq || st == SKP_SLOT_FREE || st == SKP_SLOT_RELEASING))
            hold_discard(s, i);
        if (st != SKP_SLOT_PENDING && st != SKP_SLOT_PROFILING)
            continue;
        /* Own the slot before reading its fields: the request may end meanwhile (-> ENDED). */
        if (!atomic_compare_exchange_strong(&slot->word, &w,
                                            SKP_SLOT_WORD(seq, SKP_SLOT_CAPTURING)))
            continue;
        if (st == SKP_SLOT_PENDING) {
            if (now_ms - slot->segment_start_ms <= ctx->task.min_duration_threshold_ms) {
                if (!h || !ctx->source.capture) {
                    put_back(s, i, seq, SKP_SLOT_PENDING, true);
                    continue;
                }
                h->owner = seq;
                due[n_due] = (struct due_slot){i, seq, true};
                handles[n_due++] = slot->thread_handle;
                continue;
            }
            slot->profiling_start_ms = now_ms;
        }
        if (now_ms - slot->profiling_start_ms >= s->max_profiling_ms) {
            put_back(s, i, seq, SKP_SLOT_PROFILING, false); /* SkyWalking profile.duration */
            continue;
        }
        if (!ctx->source.capture) {
            put_back(s, i, seq, SKP_SLOT_PROFILING, true); /* no source: held, not captured */
            continue;
        }
        /* SkyWalking consumes the budget at a segment's first dump; we at the first dump that is
         * sent (a held request's, when it passes the threshold); `>=` makes it exact. */
        if (!slot->budget_taken) {
            if (atomic_fetch_add(&ctx->total_started, 1) >= ctx->task.max_sampling_count) {
                put_back(s, i, seq, SKP_SLOT_PROFILING, false);
                continue;
            }
            slot->budget_taken = true;
        }
        if (h && h->owner == seq) {
            uint32_t n = skp__snapshot_hold_flush(h, s->queue);
            atomic_fetch_add_explicit(&s->held_sent, n, memory_order_relaxed);
        }
        due[n_due] = (struct due_slot){i, seq, false};
        handles[n_due++] = slot->thread_handle;
    }
    if (n_due > 0 && ctx->source.capture_prepare)
        ctx->source.capture_prepare(ctx->source.ud, handles, n_due);
    for (size_t k = 0; k < n_due; k++) {
        bool keep = capture_slot(s, due[k].i, due[k].hold, now_ms);
        put_back(s, due[k].i, due[k].seq, due[k].hold ? SKP_SLOT_PENDING : SKP_SLOT_PROFILING,
                 keep);
    }
    pthread_mutex_unlock(&s->run_lock);
}

int64_t skp__sampler_tick_ns(int64_t start_ns, int64_t k, int64_t period_ns, uint64_t *rng)
{
    int64_t at = start_ns + k * period_ns;
    if (k <= 0 || period_ns < 2)
        return at;
    uint64_t x = *rng; /* xorshift64 */
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *rng = x;
    return at - period_ns / 2 + (int64_t)(x % (uint64_t)period_ns);
}

static void *sampler_main(void *arg)
{
    struct skp__sampler *s = arg;
    /* The schedule runs on the real monotonic clock (the condition variable waits on it); the
     * clock seam provides the wall time stamped into snapshots and the task's end. */
    int64_t period_ns = s->period_ms * 1000000;
    int64_t start = skpx_mono_ns();
    int64_t k = 0;
    uint64_t rng = (uint64_t)start ^ (uint64_t)(uintptr_t)s;
    if (!rng)
        rng = 1;
    pthread_mutex_lock(&s->mu);
    while (!s->stop_requested) {
        pthread_mutex_unlock(&s->mu);
        int64_t now_ms = skp__now_ms(s->clock);
        if (now_ms >= s->stop_at_ms)
            goto done_unlocked;
        skp__sampler_run_once(s, now_ms);
        k++;
        int64_t now = skpx_mono_ns();
        int64_t next = skp__sampler_tick_ns(start, k, period_ns, &rng);
        if (now > next + period_ns) {
            /* more than a period late (slow captures, host overload): skip, don't bunch */
            int64_t behind = (now - start) / period_ns + 1;
            atomic_fetch_add_explicit(&s->late_ticks, (uint64_t)(behind - k), memory_order_relaxed);
            k = behind;
            next = skp__sampler_tick_ns(start, k, period_ns, &rng);
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
    skp__sampler_task_begin(s, s->period_ms);
    s->stop_at_ms = stop_at_ms;
    s->stop_requested = false;
    atomic_store(&s->task_runs, 0);
    int64_t now = skpx_mono_ns();
    atomic_store(&s->task_start_ns, now);
    atomic_store(&s->task_last_ns, now);
    skp_err err = skp__thread_start(&s->thread, "skp-sampler", sampler_main, s);
    if (err) {
        skp__sampler_task_end(s);
        return err;
    }
    s->thread_running = true;
    return SKP_OK;
}

void skp__sampler_stop(struct skp__sampler *s)
{
    if (s->thread_running) {
        pthread_mutex_lock(&s->mu);
        s->stop_requested = true;
        pthread_cond_signal(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
        s->thread_running = false;
    }
    if (s->frames)
        skp__sampler_task_end(s);
}

double skp__sampler_rate_hz(struct skp__sampler *s)
{
    int64_t runs = atomic_load(&s->task_runs);
    int64_t dt = atomic_load(&s->task_last_ns) - atomic_load(&s->task_start_ns);
    if (runs < 2 || dt <= 0)
        return 0.0;
    return (double)(runs - 1) * 1e9 / (double)dt;
}
