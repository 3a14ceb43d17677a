/* task_context.c - slots of the running task (see task_context.h for the state machine).
 * All atomics are sequentially consistent: the live/users handshake is a Dekker pattern. */
#include "agent/task_context.h"

#include <sched.h>
#include <string.h>

void skp__task_ctx_init(struct skp__task_ctx *ctx)
{
    memset(ctx, 0, sizeof(*ctx));
}

static void wait_no_users(struct skp__task_ctx *ctx)
{
    /* An attempt holds `users` for a few hundred ns (plus the source's thread_attach). */
    while (atomic_load(&ctx->users) != 0)
        sched_yield();
}

static void release_handle(struct skp__task_ctx *ctx, void *handle)
{
    if (handle && ctx->source.thread_release)
        ctx->source.thread_release(ctx->source.ud, handle);
}

void skp__task_ctx_start(struct skp__task_ctx *ctx, const struct skp__task *task, int max_parallel,
                         const struct skyprof_stack_source *source)
{
    atomic_store(&ctx->live, 0);
    wait_no_users(ctx);
    ctx->task = *task;
    if (max_parallel < 1)
        max_parallel = 1;
    if (max_parallel > SKYPROF_MAX_PARALLEL_CAP)
        max_parallel = SKYPROF_MAX_PARALLEL_CAP;
    ctx->max_parallel = max_parallel;
    if (source)
        ctx->source = *source;
    else
        memset(&ctx->source, 0, sizeof(ctx->source));
    atomic_store(&ctx->n_profiling, 0);
    atomic_store(&ctx->total_started, 0);
    atomic_store(&ctx->live, 1);
}

void skp__task_ctx_stop(struct skp__task_ctx *ctx)
{
    atomic_store(&ctx->live, 0);
    wait_no_users(ctx);
    for (int i = 0; i < SKYPROF_MAX_PARALLEL_CAP; i++) {
        struct skp__slot *s = &ctx->slots[i];
        for (;;) {
            uint64_t w = atomic_load(&s->word);
            uint64_t seq = SKP_SLOT_SEQ(w);
            enum skp__slot_state st = SKP_SLOT_STATE(w);
            if (st == SKP_SLOT_FREE)
                break;
            if (st == SKP_SLOT_RELEASING) { /* its owner is finishing the release */
                sched_yield();
                continue;
            }
            if (st == SKP_SLOT_CLAIMED) {
                /* the claimant is gone (users == 0) only after publishing, so this cannot
                 * happen; free it anyway, the claimant's publish CAS would fail */
                if (atomic_compare_exchange_strong(&s->word, &w, SKP_SLOT_WORD(seq, SKP_SLOT_FREE)))
                    break;
                continue;
            }
            if (atomic_compare_exchange_strong(&s->word, &w,
                                               SKP_SLOT_WORD(seq, SKP_SLOT_RELEASING))) {
                release_handle(ctx, s->thread_handle);
                atomic_store(&s->word, SKP_SLOT_WORD(seq, SKP_SLOT_FREE));
                break;
            }
        }
    }
    atomic_store(&ctx->n_profiling, 0);
}

bool skp__task_ctx_attempt(struct skp__task_ctx *ctx, const char *endpoint, const char *segment_id,
                           int64_t segment_start_ms, int tid, struct skp__profiling_ref *ref)
{
    ref->ctx = NULL;
    if (!atomic_load_explicit(&ctx->live, memory_order_relaxed))
        return false; /* the no-task fast path: one load */
    atomic_fetch_add(&ctx->users, 1);
    bool ok = false;
    if (!atomic_load(&ctx->live))
        goto out;
    if (strcmp(ctx->task.endpoint, endpoint) != 0)
        goto out;
    int c = atomic_load(&ctx->n_profiling);
    if (c >= ctx->max_parallel)
        goto out;
    if (atomic_load(&ctx->total_started) >= ctx->task.max_sampling_count)
        goto out;
    if (!atomic_compare_exchange_strong(&ctx->n_profiling, &c, c + 1))
        goto out; /* lost a race: like SkyWalking, no retry */
    for (int i = 0; i < ctx->max_parallel; i++) {
        struct skp__slot *s = &ctx->slots[i];
        uint64_t w = atomic_load(&s->word);
        if (SKP_SLOT_STATE(w) != SKP_SLOT_FREE)
            continue;
        uint64_t seq = SKP_SLOT_SEQ(w) + 1;
        if (!atomic_compare_exchange_strong(&s->word, &w, SKP_SLOT_WORD(seq, SKP_SLOT_CLAIMED)))
            continue;
        size_t n = strlen(segment_id);
        if (n >= sizeof(s->segment_id))
            n = sizeof(s->segment_id) - 1;
        memcpy(s->segment_id, segment_id, n);
        s->segment_id[n] = '\0';
        s->segment_start_ms = segment_start_ms;
        s->tid = tid;
        s->dump_seq = 0;
        s->budget_taken = false;
        s->profiling_start_ms = 0;
        s->thread_handle = NULL;
        if (ctx->source.thread_attach) {
            s->thread_handle = ctx->source.thread_attach(ctx->source.ud);
            if (!s->thread_handle) {
                atomic_store(&s->word, SKP_SLOT_WORD(seq, SKP_SLOT_FREE));
                atomic_fetch_sub(&ctx->n_profiling, 1);
                goto out;
            }
        }
        uint64_t expect = SKP_SLOT_WORD(seq, SKP_SLOT_CLAIMED);
        if (!atomic_compare_exchange_strong(&s->word, &expect,
                                            SKP_SLOT_WORD(seq, SKP_SLOT_PENDING))) {
            release_handle(ctx, s->thread_handle);
            goto out;
        }
        atomic_fetch_add_explicit(&ctx->n_slots_taken, 1, memory_order_relaxed);
        ref->ctx = ctx;
        ref->slot = i;
        ref->seq = seq;
        ok = true;
        goto out;
    }
    atomic_fetch_sub(&ctx->n_profiling, 1); /* no free slot: roll the counter back */
out:
    atomic_fetch_sub(&ctx->users, 1);
    return ok;
}

void skp__task_ctx_release(struct skp__profiling_ref *ref)
{
    struct skp__task_ctx *ctx = ref->ctx;
    if (!ctx)
        return;
    ref->ctx = NULL;
    struct skp__slot *s = &ctx->slots[ref->slot];
    for (;;) {
        uint64_t w = atomic_load(&s->word);
        if (SKP_SLOT_SEQ(w) != ref->seq)
            return; /* recycled: the sampler or a task stop freed it */
        enum skp__slot_state st = SKP_SLOT_STATE(w);
        if (st == SKP_SLOT_PENDING || st == SKP_SLOT_PROFILING) {
            if (atomic_compare_exchange_strong(&s->word, &w,
                                               SKP_SLOT_WORD(ref->seq, SKP_SLOT_RELEASING))) {
                release_handle(ctx, s->thread_handle);
                atomic_fetch_sub(&ctx->n_profiling, 1);
                atomic_store(&s->word, SKP_SLOT_WORD(ref->seq, SKP_SLOT_FREE));
                return;
            }
        } else if (st == SKP_SLOT_CAPTURING) {
            /* the sampler is reading this thread's stack right now: it frees the slot when the
             * capture returns, so this thread never waits */
            if (atomic_compare_exchange_strong(&s->word, &w,
                                               SKP_SLOT_WORD(ref->seq, SKP_SLOT_ENDED)))
                return;
        } else {
            return;
        }
    }
}

void skp__task_ctx_sampler_free(struct skp__task_ctx *ctx, int slot, uint64_t seq)
{
    struct skp__slot *s = &ctx->slots[slot];
    uint64_t w = SKP_SLOT_WORD(seq, SKP_SLOT_CAPTURING);
    if (!atomic_compare_exchange_strong(&s->word, &w, SKP_SLOT_WORD(seq, SKP_SLOT_RELEASING))) {
        if (w != SKP_SLOT_WORD(seq, SKP_SLOT_ENDED))
            return; /* not ours */
        atomic_store(&s->word, SKP_SLOT_WORD(seq, SKP_SLOT_RELEASING));
    }
    release_handle(ctx, s->thread_handle);
    atomic_fetch_sub(&ctx->n_profiling, 1);
    atomic_store(&s->word, SKP_SLOT_WORD(seq, SKP_SLOT_FREE));
}

int skp__task_ctx_busy_slots(struct skp__task_ctx *ctx)
{
    int n = 0;
    for (int i = 0; i < SKYPROF_MAX_PARALLEL_CAP; i++)
        if (SKP_SLOT_STATE(atomic_load(&ctx->slots[i].word)) != SKP_SLOT_FREE)
            n++;
    return n;
}
