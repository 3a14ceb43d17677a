/* test_task_context.c - task context slots and the sampler: parallel limit, endpoint match,
 * counter rollback, threshold from segment start, sampling budget (>=), sequence numbers,
 * immediate release at request end (also mid-capture), capture failure, max profiling time,
 * drift-free sampler thread, capture_prepare before each iteration's captures; held dumps under a
 * threshold (sent in order with their own times and sequences when the request passes it, freed
 * with nothing sent when it ends under it, drops counted when a hold is full, budget taken only
 * by requests that pass); and a multi-threaded stress of attempt/release against the sampler and
 * task restarts, with and without a threshold (also built with ThreadSanitizer). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/sampler.h"
#include "agent/task_context.h"
#include "common/clock.h"
#include "fakes.h"

struct env {
    struct fake_clock clock;
    struct fake_source src;
    struct skyprof_stack_source vt;
    struct skp__task_ctx ctx;
    struct skp__snapshot_queue q;
    struct skp__sampler s;
};

static struct skp__task task_of(const char *ep, int thr, int period, int max)
{
    struct skp__task t;
    memset(&t, 0, sizeof(t));
    snprintf(t.task_id, sizeof(t.task_id), "task-1");
    snprintf(t.endpoint, sizeof(t.endpoint), "%s", ep);
    t.duration_min = 1;
    t.min_duration_threshold_ms = thr;
    t.dump_period_ms = period;
    t.max_sampling_count = max;
    return t;
}

static struct env *env_new(int max_parallel, int thr, int max_sampling, int depth)
{
    static struct env e; /* large: keep it off the stack */
    memset(&e, 0, sizeof(e));
    fake_clock_init(&e.clock, 1000000);
    fake_source_init(&e.src, depth);
    e.vt = fake_source_vtable(&e.src);
    skp__task_ctx_init(&e.ctx);
    assert_int_equal(skp__snapshot_queue_init(&e.q, 1000, 1 << 24), SKP_OK);
    assert_int_equal(skp__sampler_init(&e.s, &e.ctx, &e.q, &e.clock.clock, 500, 600000), SKP_OK);
    struct skp__task t = task_of("/ep", thr, 10, max_sampling);
    skp__task_ctx_start(&e.ctx, &t, max_parallel, &e.vt);
    skp__sampler_task_begin(&e.s, 10); /* what skp__sampler_start does first */
    return &e;
}

static void env_free(struct env *e)
{
    skp__sampler_task_end(&e->s);
    skp__task_ctx_stop(&e->ctx);
    skp__sampler_cleanup(&e->s);
    skp__snapshot_queue_cleanup(&e->q);
}

static int64_t g_times[256]; /* dump times of the last drain */

static int drain(struct env *e, int32_t *seqs, char (*segs)[64], int cap)
{
    int n = 0;
    struct skp__snapshot *s;
    while ((s = skp__snapshot_queue_pop(&e->q))) {
        if (n < cap) {
            seqs[n] = s->sequence;
            snprintf(segs[n], 64, "%s", s->segment_id);
        }
        if (n < 256)
            g_times[n] = s->time_ms;
        n++;
        skp__snapshot_free(s);
    }
    return n;
}

static void test_parallel_limit_and_endpoint(void **state)
{
    (void)state;
    struct env *e = env_new(5, 0, 9, 3);
    struct skp__profiling_ref refs[7];
    int64_t now = skp__now_ms(&e->clock.clock);
    assert_false(skp__task_ctx_attempt(&e->ctx, "/other", "s", now, 1, &refs[0]));
    assert_false(skp__task_ctx_attempt(&e->ctx, "/EP", "s", now, 1, &refs[0])); /* exact */
    for (int i = 0; i < 5; i++)
        assert_true(skp__task_ctx_attempt(&e->ctx, "/ep", "s", now, 1, &refs[i]));
    assert_false(skp__task_ctx_attempt(&e->ctx, "/ep", "s", now, 1, &refs[5]));
    assert_int_equal(atomic_load(&e->ctx.n_profiling), 5);
    assert_int_equal(atomic_load(&e->src.attaches), 5);
    skp__task_ctx_release(&refs[2]);
    assert_int_equal(atomic_load(&e->ctx.n_profiling), 4);
    assert_int_equal(atomic_load(&e->src.releases), 1);
    skp__task_ctx_release(&refs[2]); /* twice: no-op */
    assert_int_equal(atomic_load(&e->ctx.n_profiling), 4);
    assert_true(skp__task_ctx_attempt(&e->ctx, "/ep", "s", now, 1, &refs[6]));
    /* task stop frees every slot and releases the handles */
    skp__task_ctx_stop(&e->ctx);
    assert_int_equal(skp__task_ctx_busy_slots(&e->ctx), 0);
    assert_int_equal(atomic_load(&e->src.releases), 6);
    assert_false(skp__task_ctx_attempt(&e->ctx, "/ep", "s", now, 1, &refs[5]));
    /* stale release after stop does nothing */
    skp__task_ctx_release(&refs[0]);
    assert_int_equal(atomic_load(&e->src.releases), 6);
    env_free(e);
}

/* A lost sample (the thread did not answer in time) skips that dump only: the request stays
 * sampled, no sequence number is used, and a lost first dump gives its budget unit back. */
static void test_lost_sample_skips_dump(void **state)
{
    (void)state;
    struct env *e = env_new(5, 0, 1, 3); /* max sampling count 1 */
    struct skp__profiling_ref r;
    int64_t start = skp__now_ms(&e->clock.clock);
    assert_true(skp__task_ctx_attempt(&e->ctx, "/ep", "seg-A", start, 1, &r));
    int32_t seqs[16];
    char segs[16][64];
    atomic_store(&e->src.lose, 2);
    skp__sampler_run_once(&e->s, start + 10); /* first dump lost */
    skp__sampler_run_once(&e->s, start + 20); /* lost again */
    assert_int_equal(drain(e, seqs, segs, 16), 0);
    assert_int_equal(atomic_load(&e->ctx.total_started), 0); /* budget unit returned */
    assert_int_equal(atomic_load(&e->s.capture_lost), 2);
    assert_int_equal(atomic_load(&e->s.capture_failures), 0);
    skp__sampler_run_once(&e->s, start + 30);
    skp__sampler_run_once(&e->s, start + 40);
    assert_int_equal(drain(e, seqs, segs, 16), 2);
    assert_int_equal(seqs[0], 0); /* sequences stay dense */
    assert_int_equal(seqs[1], 1);
    assert_int_equal(atomic_load(&e->src.releases), 0); /* still profiled */
    /* a hard failure (thread gone) still ends sampling of the request */
    atomic_store(&e->src.fail, 1);
    skp__sampler_run_once(&e->s, start + 50);
    assert_int_equal(atomic_load(&e->s.capture_failures), 1);
    assert_int_equal(atomic_load(&e->src.releases), 1);
    atomic_store(&e->src.fail, 0);
    skp__task_ctx_release(&r);
    env_free(e);
}

static void test_counter_rolled_back_without_slot(void **state)
{
    (void)state;
    struct env *e = env_new(2, 0, 9, 3);
    /* two slots held by something the counter does not know about (e.g. a stale owner) */
    atomic_store(&e->ctx.slots[0].word, SKP_SLOT_WORD(77, SKP_SLOT_PENDING));
    atomic_store(&e->ctx.slots[1].word, SKP_SLOT_WORD(78, SKP_SLOT_PENDING));
    struct skp__profiling_ref r;
    assert_false(skp__task_ctx_attempt(&e->ctx, "/ep", "s", 0, 1, &r));
    assert_int_equal(atomic_load(&e->ctx.n_profiling), 0); /* SkyWalking would leave 1 */
    atomic_store(&e->ctx.slots[0].word, SKP_SLOT_WORD(77, SKP_SLOT_FREE));
    atomic_store(&e->ctx.slots[1].word, SKP_SLOT_WORD(78, SKP_SLOT_FREE));
    env_free(e);
}

/* Under a threshold a request is sampled from its start into its hold; nothing is queued until
 * it passes the threshold, then every held dump is queued in capture order with its own time and
 * sequence number, before the dump of that iteration. */
static void test_threshold_sequence_release(void **state)
{
    (void)state;
    struct env *e = env_new(5, 100, 9, 4);
    struct skp__profiling_ref r;
    int64_t start = skp__now_ms(&e->clock.clock);
    assert_true(skp__task_ctx_attempt(&e->ctx, "/ep", "seg-A", start, 1, &r));
    int32_t seqs[16];
    char segs[16][64];
    skp__sampler_run_once(&e->s, start + 10);
    skp__sampler_run_once(&e->s, start + 50);
    skp__sampler_run_once(&e->s, start + 100); /* not > threshold yet */
    assert_int_equal(drain(e, seqs, segs, 16), 0);
    assert_int_equal(atomic_load(&e->src.captures), 3);
    assert_int_equal(atomic_load(&e->s.held), 3);
    assert_int_equal(atomic_load(&e->ctx.total_started), 0); /* no budget taken yet */
    skp__sampler_run_once(&e->s, start + 101); /* passes: the hold, then this iteration's dump */
    skp__sampler_run_once(&e->s, start + 111);
    int n = drain(e, seqs, segs, 16);
    assert_int_equal(n, 5);
    const int64_t want_t[5] = {10, 50, 100, 101, 111};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(seqs[i], i);
        assert_int_equal(g_times[i], start + want_t[i]);
        assert_string_equal(segs[i], "seg-A");
    }
    assert_int_equal(atomic_load(&e->s.held_sent), 3);
    assert_int_equal(atomic_load(&e->ctx.total_started), 1);
    /* request ends: released at once, never sampled again */
    skp__task_ctx_release(&r);
    assert_int_equal(atomic_load(&e->src.releases), 1);
    skp__sampler_run_once(&e->s, start + 131);
    assert_int_equal(drain(e, seqs, segs, 16), 0);
    assert_int_equal(atomic_load(&e->src.captures), 5);
    /* a new request in the same slot starts again at sequence 0 */
    assert_true(skp__task_ctx_attempt(&e->ctx, "/ep", "seg-B", start + 131, 1, &r));
    skp__sampler_run_once(&e->s, start + 300);
    assert_int_equal(drain(e, seqs, segs, 16), 1);
    assert_int_equal(seqs[0], 0);
    assert_string_equal(segs[0], "seg-B");
    skp__task_ctx_release(&r);
    assert_int_equal(atomic_load(&e->s.held_discarded), 0);
    env_free(e);
}

/* A request that ends under the threshold frees its slot at once (on its own thread, which never
 * touches the hold) and its dumps at the sampler's next iteration: nothing is sent and no budget
 * is taken. A new request that claims the slot meanwhile starts a hold of its own. */
static void test_end_under_threshold_sends_nothing(void **state)
{
    (void)state;
    struct env *e = env_new(1, 100, 1, 3); /* one slot, max sampling count 1 */
    struct skp__profiling_ref r;
    int64_t t0 = skp__now_ms(&e->clock.clock);
    assert_true(skp__task_ctx_attempt(&e->ctx, "/ep", "fast-1", t0, 1, &r));
    skp__sampler_run_once(&e->s, t0 + 10);
    skp__sampler_run_once(&e->s, t0 + 20);
    skp__task_ctx_release(&r); /* ends at 25 ms */
    assert_int_equal(skp__task_ctx_busy_slots(&e->ctx), 0);
    assert_int_equal(atomic_load(&e->src.releases), 1);
    skp__sampler_run_once(&e->s, t0 + 30);
    int32_t seqs[16];
    char segs[16][64];
    assert_int_equal(drain(e, seqs, segs, 16), 0);
    assert_int_equal(atomic_load(&e->s.held), 2);
    assert_int_equal(atomic_load(&e->s.held_discarded), 2);
    assert_int_equal(skp__snapshot_hold_count(&e->s.holds[0]), 0);
    assert_int_equal(e->s.holds[0].owner, 0);
    assert_int_equal(atomic_load(&e->ctx.total_started), 0);
    /* the next request ends under the threshold too, and its slot is claimed again before the
     * sampler runs: the old dumps are freed, the new request is held from sequence 0 */
    assert_true(skp__task_ctx_attempt(&e->ctx, "/ep", "fast-2", t0 + 30, 1, &r));
    skp__sampler_run_once(&e->s, t0 + 40);
    skp__task_ctx_release(&r);
    assert_true(skp__task_ctx_attempt(&e->ctx, "/ep", "slow", t0 + 45, 1, &r));
    skp__sampler_run_once(&e->s, t0 + 50);
    assert_int_equal(atomic_load(&e->s.held_discarded), 3);
    skp__sampler_run_once(&e->s, t0 + 146); /* slow passes its threshold (101 ms) */
    assert_int_equal(drain(e, seqs, segs, 16), 2);
    assert_int_equal(seqs[0], 0);
    assert_int_equal(g_times[0], t0 + 50);
    assert_int_equal(seqs[1], 1);
    assert_string_equal(segs[0], "slow");
    assert_string_equal(segs[1], "slow");
    assert_int_equal(atomic_load(&e->ctx.total_started), 1); /* only the request that passed */
    skp__task_ctx_release(&r);
    env_free(e);
}

/* A hold full by count keeps the earliest and the latest dumps; the dropped ones are counted in
 * the sampler's held_dropped and in the queue's drop counter (the agent's snapshots_dropped), and
 * their sequence numbers stay unused (a visible gap). */
static void test_hold_overflow_counted(void **state)
{
    (void)state;
    struct env *e = env_new(5, 50, 9, 2); /* 50 / 10 + 3 = 8 held dumps per slot */
    assert_int_equal(e->s.holds[0].cap, 8);
    struct skp__profiling_ref r;
    int64_t t0 = skp__now_ms(&e->clock.clock);
    assert_true(skp__task_ctx_attempt(&e->ctx, "/ep", "seg", t0, 1, &r));
    for (int i = 0; i < 20; i++) /* 20 dumps under the threshold (a sampler driven at 2.5 ms) */
        skp__sampler_run_once(&e->s, t0 + 2 * i + i / 2);
    assert_int_equal(atomic_load(&e->s.held), 20);
    assert_int_equal(atomic_load(&e->s.held_dropped), 12);
    assert_int_equal(atomic_load(&e->q.dropped), 12);
    skp__sampler_run_once(&e->s, t0 + 51);
    int32_t seqs[16];
    char segs[16][64];
    assert_int_equal(drain(e, seqs, segs, 16), 9);
    const int32_t want[9] = {0, 1, 2, 3, 16, 17, 18, 19, 20};
    for (int i = 0; i < 9; i++)
        assert_int_equal(seqs[i], want[i]);
    assert_int_equal(g_times[8], t0 + 51);
    skp__task_ctx_release(&r);
    env_free(e);
}

/* Lost samples under the threshold use no sequence number; a failed capture (thread gone) frees
 * the slot and the hold; the budget spent by others stops a held request when it passes; a task
 * stop frees every hold without sending it. */
static void test_hold_lost_failed_budget_stop(void **state)
{
    (void)state;
    struct env *e = env_new(5, 100, 1, 2); /* max sampling count 1 */
    struct skp__profiling_ref r[3];
    int64_t t0 = skp__now_ms(&e->clock.clock);
    assert_true(skp__task_ctx_attempt(&e->ctx, "/ep", "a", t0, 1, &r[0]));
    atomic_store(&e->src.lose, 1);
    skp__sampler_run_once(&e->s, t0 + 10); /* lost */
    skp__sampler_run_once(&e->s, t0 + 20);
    assert_int_equal(atomic_load(&e->s.capture_lost), 1);
    assert_int_equal(skp__snapshot_hold_count(&e->s.holds[0]), 1);
    assert_int_equal(e->s.holds[0].ents[0]->sequence, 0);
    atomic_store(&e->src.fail, 1);
    skp__sampler_run_once(&e->s, t0 + 30); /* thread gone: slot and hold freed */
    atomic_store(&e->src.fail, 0);
    assert_int_equal(skp__task_ctx_busy_slots(&e->ctx), 0);
    assert_int_equal(atomic_load(&e->s.held_discarded), 1);
    skp__task_ctx_release(&r[0]);
    /* b and c held; b passes first and takes the only budget unit; c is stopped when it passes */
    assert_true(skp__task_ctx_attempt(&e->ctx, "/ep", "b", t0 + 30, 1, &r[1]));
    assert_true(skp__task_ctx_attempt(&e->ctx, "/ep", "c", t0 + 35, 1, &r[2]));
    skp__sampler_run_once(&e->s, t0 + 40);
    skp__sampler_run_once(&e->s, t0 + 131); /* b passes, c not yet */
    skp__sampler_run_once(&e->s, t0 + 136); /* c passes: no budget, stopped, hold freed */
    int32_t seqs[16];
    char segs[16][64];
    assert_int_equal(drain(e, seqs, segs, 16), 3);
    for (int i = 0; i < 3; i++)
        assert_string_equal(segs[i], "b");
    assert_int_equal(atomic_load(&e->s.held_discarded), 1 + 2);
    assert_int_equal(skp__task_ctx_busy_slots(&e->ctx), 1);
    skp__task_ctx_release(&r[1]);
    skp__task_ctx_release(&r[2]);
    /* a task stop frees what is held */
    struct skp__task t = task_of("/ep", 100, 10, 9);
    skp__sampler_task_end(&e->s);
    skp__task_ctx_stop(&e->ctx);
    skp__task_ctx_start(&e->ctx, &t, 5, &e->vt);
    skp__sampler_task_begin(&e->s, 10);
    assert_true(skp__task_ctx_attempt(&e->ctx, "/ep", "d", t0 + 200, 1, &r[0]));
    skp__sampler_run_once(&e->s, t0 + 210);
    skp__sampler_run_once(&e->s, t0 + 220);
    uint64_t before = atomic_load(&e->s.held_discarded);
    skp__sampler_task_end(&e->s);
    assert_int_equal(atomic_load(&e->s.held_discarded), before + 2);
    assert_null(e->s.holds);
    assert_int_equal(drain(e, seqs, segs, 16), 0);
    skp__task_ctx_release(&r[0]);
    env_free(e);
}

/* A forked child's copy of the sampler frees its holds with their dumps, its frames and scratch,
 * without its locks (ASan's leak check sees anything left). */
static void test_forget_frees_holds(void **state)
{
    (void)state;
    struct env *e = env_new(2, 100, 9, 3);
    struct skp__profiling_ref r;
    int64_t t0 = skp__now_ms(&e->clock.clock);
    assert_true(skp__task_ctx_attempt(&e->ctx, "/ep", "seg", t0, 1, &r));
    skp__sampler_run_once(&e->s, t0 + 10);
    skp__sampler_run_once(&e->s, t0 + 20);
    assert_int_equal(skp__snapshot_hold_count(&e->s.holds[0]), 2);
    skp__sampler_forget(&e->s);
    assert_null(e->s.holds);
    assert_null(e->s.frames);
    skp__task_ctx_release(&r);
    skp__task_ctx_stop(&e->ctx);
    skp__snapshot_queue_cleanup(&e->q);
    /* the locks of a forgotten sampler are left alone (a child never uses them) */
    pthread_mutex_destroy(&e->s.run_lock);
    pthread_mutex_destroy(&e->s.mu);
    pthread_cond_destroy(&e->s.cv);
}

/* No hold without a threshold, and a threshold larger than the cap is bounded. */
static void test_hold_sizes(void **state)
{
    (void)state;
    struct env *e = env_new(5, 0, 9, 2);
    assert_null(e->s.holds);
    env_free(e);
    e = env_new(4, 600000, 9, 2);
    assert_int_equal(e->s.n_holds, 4);
    assert_int_equal(e->s.holds[3].cap, SKP_HOLD_DUMPS_MAX);
    assert_int_equal(e->s.holds[3].max_bytes, SKP_HOLD_BYTES_MAX / 4);
    env_free(e);
}

static void test_sampling_budget_exact(void **state)
{
    (void)state;
    struct env *e = env_new(5, 0, 2, 2); /* max sampling count 2 */
    struct skp__profiling_ref r[4];
    int64_t t0 = skp__now_ms(&e->clock.clock);
    for (int i = 0; i < 3; i++) {
        char seg[16];
        snprintf(seg, sizeof(seg), "seg-%d", i);
        assert_true(skp__task_ctx_attempt(&e->ctx, "/ep", seg, t0, 1, &r[i]));
    }
    skp__sampler_run_once(&e->s, t0 + 10);
    int32_t seqs[16];
    char segs[16][64];
    int n = drain(e, seqs, segs, 16);
    assert_int_equal(n, 2); /* exactly 2 segments dumped; the third is stopped */
    assert_int_equal(atomic_load(&e->ctx.n_profiling), 2);
    assert_int_equal(atomic_load(&e->src.releases), 1);
    /* budget spent: no new slots */
    assert_false(skp__task_ctx_attempt(&e->ctx, "/ep", "seg-9", t0, 1, &r[3]));
    /* the two dumped segments keep being sampled */
    skp__sampler_run_once(&e->s, t0 + 20);
    assert_int_equal(drain(e, seqs, segs, 16), 2);
    assert_int_equal(seqs[0], 1);
    skp__task_ctx_release(&r[0]);
    skp__task_ctx_release(&r[1]);
    skp__task_ctx_release(&r[2]); /* already freed by the sampler: no-op */
    assert_int_equal(atomic_load(&e->src.releases), 3);
    env_free(e);
}

static void test_end_during_capture_and_failures(void **state)
{
    (void)state;
    struct env *e = env_new(5, 0, 9, 2);
    struct skp__profiling_ref r;
    int64_t t0 = skp__now_ms(&e->clock.clock);
    assert_true(skp__task_ctx_attempt(&e->ctx, "/ep", "seg", t0, 1, &r));
    e->src.end_during_capture = &r; /* the request ends while its stack is read */
    skp__sampler_run_once(&e->s, t0 + 10);
    int32_t seqs[4];
    char segs[4][64];
    assert_int_equal(drain(e, seqs, segs, 4), 1); /* the capture itself is kept */
    assert_int_equal(skp__task_ctx_busy_slots(&e->ctx), 0);
    assert_int_equal(atomic_load(&e->src.releases), 1);
    assert_int_equal(atomic_load(&e->ctx.n_profiling), 0);
    /* capture failure (thread gone): slot freed, counted */
    assert_true(skp__task_ctx_attempt(&e->ctx, "/ep", "seg2", t0, 1, &r));
    atomic_store(&e->src.fail, 1);
    skp__sampler_run_once(&e->s, t0 + 20);
    assert_int_equal(atomic_load(&e->s.capture_failures), 1);
    assert_int_equal(skp__task_ctx_busy_slots(&e->ctx), 0);
    atomic_store(&e->src.fail, 0);
    skp__task_ctx_release(&r);
    env_free(e);
}

/* One iteration first tells the source every handle it is about to capture (capture_prepare,
 * once, before any capture), then captures them: the requests under the threshold (into their
 * holds) and those past it, not those out of budget. A request that ends after the prepare is
 * still captured once, then its slot is freed. */
static void test_prepare_before_captures(void **state)
{
    (void)state;
    struct env *e = env_new(5, 50, 3, 2); /* threshold 50 ms, max sampling count 3 */
    struct skp__profiling_ref r[5];
    int64_t t0 = skp__now_ms(&e->clock.clock);
    for (int i = 0; i < 4; i++) {
        char seg[16];
        snprintf(seg, sizeof(seg), "seg-%d", i);
        assert_true(skp__task_ctx_attempt(&e->ctx, "/ep", seg, i < 2 ? t0 : t0 + 40, 1, &r[i]));
    }
    int32_t seqs[16];
    char segs[16][64];
    skp__sampler_run_once(&e->s, t0 + 20); /* nobody past the threshold: all held */
    assert_int_equal(atomic_load(&e->src.prepares), 1);
    assert_int_equal(atomic_load(&e->src.prepared_n), 4);
    assert_int_equal(atomic_load(&e->src.captures_at_prepare), 0);
    assert_int_equal(atomic_load(&e->src.captures), 4);
    assert_int_equal(drain(e, seqs, segs, 16), 0);
    skp__sampler_run_once(&e->s, t0 + 60); /* seg-0 and seg-1 pass, seg-2/3 are held */
    assert_int_equal(atomic_load(&e->src.prepares), 2);
    assert_int_equal(atomic_load(&e->src.prepared_n), 4);
    assert_int_equal(atomic_load(&e->src.captures_at_prepare), 4);
    assert_int_equal(atomic_load(&e->src.captures), 8);
    assert_int_equal(drain(e, seqs, segs, 16), 4); /* 2 held + 2 new */
    /* all four past it now; the budget (3) leaves room for one more request: seg-2 (slot
     * order); seg-3 is stopped, its hold freed */
    skp__sampler_run_once(&e->s, t0 + 100);
    assert_int_equal(atomic_load(&e->src.prepares), 3);
    assert_int_equal(atomic_load(&e->src.prepared_n), 3);
    assert_int_equal(atomic_load(&e->src.captures_at_prepare), 8);
    assert_int_equal(atomic_load(&e->src.captures), 11);
    assert_int_equal(drain(e, seqs, segs, 16), 5); /* seg-0, seg-1, seg-2's 2 held + 1 new */
    assert_int_equal(atomic_load(&e->s.held_discarded), 2);
    /* seg-0 ends during the capture of the iteration it was prepared for: captured, freed */
    e->src.end_during_capture = &r[0];
    skp__sampler_run_once(&e->s, t0 + 110);
    assert_int_equal(atomic_load(&e->src.prepared_n), 3);
    assert_int_equal(drain(e, seqs, segs, 16), 3);
    skp__sampler_run_once(&e->s, t0 + 120);
    assert_int_equal(atomic_load(&e->src.prepared_n), 2);
    assert_int_equal(drain(e, seqs, segs, 16), 2);
    for (int i = 0; i < 4; i++)
        skp__task_ctx_release(&r[i]);
    assert_int_equal(skp__task_ctx_busy_slots(&e->ctx), 0);
    assert_int_equal(atomic_load(&e->src.attaches), atomic_load(&e->src.releases));
    env_free(e);
}

static void test_max_profiling_time(void **state)
{
    (void)state;
    struct env *e = env_new(5, 0, 9, 2);
    e->s.max_profiling_ms = 1000;
    struct skp__profiling_ref r;
    int64_t t0 = skp__now_ms(&e->clock.clock);
    assert_true(skp__task_ctx_attempt(&e->ctx, "/ep", "seg", t0, 1, &r));
    skp__sampler_run_once(&e->s, t0 + 10); /* profiling starts at t0+10 */
    skp__sampler_run_once(&e->s, t0 + 1009);
    skp__sampler_run_once(&e->s, t0 + 1010); /* >= 1000 ms of profiling: stop */
    int32_t seqs[8];
    char segs[8][64];
    assert_int_equal(drain(e, seqs, segs, 8), 2);
    assert_int_equal(skp__task_ctx_busy_slots(&e->ctx), 0);
    skp__task_ctx_release(&r);
    env_free(e);
}

static void test_depth_truncation_in_sampler(void **state)
{
    (void)state;
    struct env *e = env_new(5, 0, 9, 1000); /* stack deeper than max depth 500 */
    struct skp__profiling_ref r;
    int64_t t0 = skp__now_ms(&e->clock.clock);
    assert_true(skp__task_ctx_attempt(&e->ctx, "/ep", "seg", t0, 1, &r));
    skp__sampler_run_once(&e->s, t0 + 10);
    struct skp__snapshot *s = skp__snapshot_queue_pop(&e->q);
    assert_non_null(s);
    assert_int_equal(s->n_frames, 500);
    /* innermost kept: the last frame is the deepest one (f999), the first is f500 */
    assert_memory_equal(s->text + s->frames[499].off, "f999", 4);
    assert_memory_equal(s->text + s->frames[0].off, "f500", 4);
    skp__snapshot_free(s);
    skp__task_ctx_release(&r);
    env_free(e);
}

static void test_sampler_thread_runs_and_stops(void **state)
{
    (void)state;
    struct env *e = env_new(5, 0, 9, 2);
    e->s.clock = &skp__clock_real;
    struct skp__profiling_ref r;
    assert_true(skp__task_ctx_attempt(&e->ctx, "/ep", "seg", skpx_now_ms(), 1, &r));
    assert_int_equal(skp__sampler_start(&e->s, 10, skpx_now_ms() + 60000), SKP_OK);
    assert_int_equal(skp__sampler_start(&e->s, 10, skpx_now_ms() + 60000), SKP_ESTATE);
    int64_t deadline = skpx_mono_ms() + 10000;
    while (atomic_load(&e->s.captured) < 5 && skpx_mono_ms() < deadline)
        usleep(2000);
    skp__sampler_stop(&e->s);
    assert_true(atomic_load(&e->s.captured) >= 5);
    assert_true(skp__sampler_rate_hz(&e->s) > 0.0);
    /* the loop ends by itself at stop_at */
    assert_int_equal(skp__sampler_start(&e->s, 10, skpx_now_ms() - 1), SKP_OK);
    skp__sampler_stop(&e->s);
    skp__task_ctx_release(&r);
    struct skp__snapshot *s;
    while ((s = skp__snapshot_queue_pop(&e->q)))
        skp__snapshot_free(s);
    env_free(e);
}

static void test_sampler_skips_late_ticks(void **state)
{
    (void)state;
    struct env *e = env_new(5, 0, 9, 2);
    e->s.clock = &skp__clock_real;
    atomic_store(&e->src.capture_sleep_us, 25000); /* each capture takes 2.5 periods */
    struct skp__profiling_ref r;
    assert_true(skp__task_ctx_attempt(&e->ctx, "/ep", "seg", skpx_now_ms() - 10, 1, &r));
    int64_t t0 = skpx_mono_ns();
    assert_int_equal(skp__sampler_start(&e->s, 10, skpx_now_ms() + 60000), SKP_OK);
    int64_t deadline = skpx_mono_ms() + 10000;
    while (atomic_load(&e->s.captured) < 6 && skpx_mono_ms() < deadline)
        usleep(5000);
    skp__sampler_stop(&e->s);
    int64_t elapsed = skpx_mono_ns() - t0;
    uint64_t runs = atomic_load(&e->s.runs);
    /* missed ticks are skipped, not run back to back: every run took >= 25 ms */
    assert_true(atomic_load(&e->s.late_ticks) > 0);
    assert_true(runs <= (uint64_t)(elapsed / 25000000) + 1);
    skp__task_ctx_release(&r);
    struct skp__snapshot *s;
    while ((s = skp__snapshot_queue_pop(&e->q)))
        skp__snapshot_free(s);
    env_free(e);
}

/* --- concurrency ----------------------------------------------------------------------------- */
#define STRESS_THREADS 6
#define STRESS_ITERS 3000

struct stress {
    struct env *e;
    _Atomic int stop;
    _Atomic int over_limit;
    _Atomic int taken;
    int threshold_ms;
    int64_t deadline_ms; /* monotonic */
};

static void *worker(void *arg)
{
    struct stress *st = arg;
    /* under a threshold, go on past STRESS_ITERS until the sampler has caught a held request at
     * least once: on a loaded machine it may not have run during the first iterations */
    for (int i = 0; i < STRESS_ITERS || (st->threshold_ms > 0 && atomic_load(&st->e->s.held) == 0 &&
                                         skpx_mono_ms() < st->deadline_ms);
         i++) {
        struct skp__profiling_ref r;
        /* with a threshold, every other request starts now: held, and mostly ends under it */
        int64_t ago = st->threshold_ms > 0 && i % 2 ? 0 : 100;
        if (skp__task_ctx_attempt(&st->e->ctx, "/ep", "seg", skpx_now_ms() - ago, 1, &r)) {
            atomic_fetch_add(&st->taken, 1);
            if (atomic_load(&st->e->ctx.n_profiling) > 3)
                atomic_store(&st->over_limit, 1);
            if (i % 3 == 0)
                sched_yield();
            skp__task_ctx_release(&r);
        }
    }
    return NULL;
}

static void *sampler_loop(void *arg)
{
    struct stress *st = arg;
    while (!atomic_load(&st->stop)) {
        skp__sampler_run_once(&st->e->s, skpx_now_ms());
        struct skp__snapshot *s;
        while ((s = skp__snapshot_queue_pop(&st->e->q)))
            skp__snapshot_free(s);
    }
    return NULL;
}

static void concurrent_slots(int threshold_ms)
{
    struct env *e = env_new(3, threshold_ms, 9, 4);
    struct stress st = {
        .e = e, .threshold_ms = threshold_ms, .deadline_ms = skpx_mono_ms() + 20000};
    /* an unlimited budget for the stress: the budget is tested above */
    e->ctx.task.max_sampling_count = 1 << 30;
    pthread_t w[STRESS_THREADS], smp;
    pthread_create(&smp, NULL, sampler_loop, &st);
    for (int i = 0; i < STRESS_THREADS; i++)
        pthread_create(&w[i], NULL, worker, &st);
    /* restart the task a few times while requests come and go */
    struct skp__task t = task_of("/ep", threshold_ms, 10, 1 << 30);
    for (int k = 0; k < 5; k++) {
        usleep(3000);
        atomic_store(&st.stop, 1);
        pthread_join(smp, NULL); /* the sampler is stopped before a task stops */
        skp__sampler_task_end(&e->s);
        skp__task_ctx_stop(&e->ctx);
        skp__task_ctx_start(&e->ctx, &t, 3, &e->vt);
        skp__sampler_task_begin(&e->s, 10);
        atomic_store(&st.stop, 0);
        pthread_create(&smp, NULL, sampler_loop, &st);
    }
    for (int i = 0; i < STRESS_THREADS; i++)
        pthread_join(w[i], NULL);
    atomic_store(&st.stop, 1);
    pthread_join(smp, NULL);
    assert_int_equal(atomic_load(&st.over_limit), 0);
    assert_int_equal(atomic_load(&e->ctx.n_profiling), 0);
    assert_int_equal(skp__task_ctx_busy_slots(&e->ctx), 0);
    assert_true(atomic_load(&st.taken) > 0);
    /* every handle attached was released exactly once */
    assert_int_equal(atomic_load(&e->src.attaches), atomic_load(&e->src.releases));
    env_free(e);
    if (threshold_ms > 0) /* held dumps were taken, and each was sent, dropped or freed */
        assert_true(atomic_load(&e->s.held) > 0);
    if (threshold_ms > 0)
        assert_int_equal(atomic_load(&e->s.held), atomic_load(&e->s.held_sent) +
                                                      atomic_load(&e->s.held_dropped) +
                                                      atomic_load(&e->s.held_discarded));
}

static void test_concurrent_slots(void **state)
{
    (void)state;
    concurrent_slots(0);
}

/* The same with a threshold some requests pass (they start up to 100 ms in the past): holds
 * filled, flushed and freed while slots are claimed and released. */
static void test_concurrent_slots_held(void **state)
{
    (void)state;
    concurrent_slots(50);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parallel_limit_and_endpoint),
        cmocka_unit_test(test_counter_rolled_back_without_slot),
        cmocka_unit_test(test_threshold_sequence_release),
        cmocka_unit_test(test_end_under_threshold_sends_nothing),
        cmocka_unit_test(test_hold_overflow_counted),
        cmocka_unit_test(test_hold_lost_failed_budget_stop),
        cmocka_unit_test(test_hold_sizes),
        cmocka_unit_test(test_forget_frees_holds),
        cmocka_unit_test(test_lost_sample_skips_dump),
        cmocka_unit_test(test_sampling_budget_exact),
        cmocka_unit_test(test_end_during_capture_and_failures),
        cmocka_unit_test(test_prepare_before_captures),
        cmocka_unit_test(test_max_profiling_time),
        cmocka_unit_test(test_depth_truncation_in_sampler),
        cmocka_unit_test(test_sampler_thread_runs_and_stops),
        cmocka_unit_test(test_sampler_skips_late_ticks),
        cmocka_unit_test(test_concurrent_slots),
        cmocka_unit_test(test_concurrent_slots_held),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
