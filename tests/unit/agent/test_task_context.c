/* test_task_context.c - task context slots and the sampler: parallel limit, endpoint match,
 * counter rollback, threshold from segment start, sampling budget (>=), sequence numbers,
 * immediate release at request end (also mid-capture), capture failure, max profiling time,
 * drift-free sampler thread, capture_prepare before each iteration's captures; and a
 * multi-threaded stress of attempt/release against the sampler and task restarts (also built with
 * ThreadSanitizer). */
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
    return &e;
}

static void env_free(struct env *e)
{
    skp__task_ctx_stop(&e->ctx);
    skp__sampler_cleanup(&e->s);
    skp__snapshot_queue_cleanup(&e->q);
}

static int drain(struct env *e, int32_t *seqs, char (*segs)[64], int cap)
{
    int n = 0;
    struct skp__snapshot *s;
    while ((s = skp__snapshot_queue_pop(&e->q))) {
        if (n < cap) {
            seqs[n] = s->sequence;
            snprintf(segs[n], 64, "%s", s->segment_id);
        }
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

static void test_threshold_sequence_release(void **state)
{
    (void)state;
    struct env *e = env_new(5, 100, 9, 4);
    struct skp__profiling_ref r;
    int64_t start = skp__now_ms(&e->clock.clock);
    assert_true(skp__task_ctx_attempt(&e->ctx, "/ep", "seg-A", start, 1, &r));
    int32_t seqs[16];
    char segs[16][64];
    skp__sampler_run_once(&e->s, start + 50);
    skp__sampler_run_once(&e->s, start + 100); /* not > threshold yet */
    assert_int_equal(drain(e, seqs, segs, 16), 0);
    skp__sampler_run_once(&e->s, start + 101); /* passes: dumped in the same iteration */
    skp__sampler_run_once(&e->s, start + 111);
    skp__sampler_run_once(&e->s, start + 121);
    int n = drain(e, seqs, segs, 16);
    assert_int_equal(n, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(seqs[i], i);
        assert_string_equal(segs[i], "seg-A");
    }
    /* request ends: released at once, never sampled again */
    skp__task_ctx_release(&r);
    assert_int_equal(atomic_load(&e->src.releases), 1);
    skp__sampler_run_once(&e->s, start + 131);
    assert_int_equal(drain(e, seqs, segs, 16), 0);
    assert_int_equal(atomic_load(&e->src.captures), 3);
    /* a new request in the same slot starts again at sequence 0 */
    assert_true(skp__task_ctx_attempt(&e->ctx, "/ep", "seg-B", start + 131, 1, &r));
    skp__sampler_run_once(&e->s, start + 300);
    assert_int_equal(drain(e, seqs, segs, 16), 1);
    assert_int_equal(seqs[0], 0);
    assert_string_equal(segs[0], "seg-B");
    skp__task_ctx_release(&r);
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
 * once, before any capture), then captures them: not the requests below the threshold, nor
 * those out of budget. A request that ends after the prepare is still captured once, then its
 * slot is freed. */
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
    skp__sampler_run_once(&e->s, t0 + 20); /* nobody past the threshold: no prepare */
    assert_int_equal(atomic_load(&e->src.prepares), 0);
    assert_int_equal(atomic_load(&e->src.captures), 0);
    skp__sampler_run_once(&e->s, t0 + 60); /* seg-0 and seg-1 are due, seg-2/3 not yet */
    assert_int_equal(atomic_load(&e->src.prepares), 1);
    assert_int_equal(atomic_load(&e->src.prepared_n), 2);
    assert_int_equal(atomic_load(&e->src.captures_at_prepare), 0);
    assert_int_equal(atomic_load(&e->src.captures), 2);
    /* all four due now; the budget (3) leaves room for one more first dump */
    skp__sampler_run_once(&e->s, t0 + 100);
    assert_int_equal(atomic_load(&e->src.prepares), 2);
    assert_int_equal(atomic_load(&e->src.prepared_n), 3);
    assert_int_equal(atomic_load(&e->src.captures_at_prepare), 2);
    assert_int_equal(atomic_load(&e->src.captures), 5);
    int32_t seqs[16];
    char segs[16][64];
    assert_int_equal(drain(e, seqs, segs, 16), 5);
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
};

static void *worker(void *arg)
{
    struct stress *st = arg;
    for (int i = 0; i < STRESS_ITERS; i++) {
        struct skp__profiling_ref r;
        if (skp__task_ctx_attempt(&st->e->ctx, "/ep", "seg", skpx_now_ms() - 100, 1, &r)) {
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

static void test_concurrent_slots(void **state)
{
    (void)state;
    struct env *e = env_new(3, 0, 9, 4);
    struct stress st = {.e = e};
    /* an unlimited budget for the stress: the budget is tested above */
    e->ctx.task.max_sampling_count = 1 << 30;
    pthread_t w[STRESS_THREADS], smp;
    pthread_create(&smp, NULL, sampler_loop, &st);
    for (int i = 0; i < STRESS_THREADS; i++)
        pthread_create(&w[i], NULL, worker, &st);
    /* restart the task a few times while requests come and go */
    struct skp__task t = task_of("/ep", 0, 10, 1 << 30);
    for (int k = 0; k < 5; k++) {
        usleep(3000);
        atomic_store(&st.stop, 1);
        pthread_join(smp, NULL); /* the sampler is stopped before a task stops */
        skp__task_ctx_stop(&e->ctx);
        skp__task_ctx_start(&e->ctx, &t, 3, &e->vt);
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
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parallel_limit_and_endpoint),
        cmocka_unit_test(test_counter_rolled_back_without_slot),
        cmocka_unit_test(test_threshold_sequence_release),
        cmocka_unit_test(test_lost_sample_skips_dump),
        cmocka_unit_test(test_sampling_budget_exact),
        cmocka_unit_test(test_end_during_capture_and_failures),
        cmocka_unit_test(test_prepare_before_captures),
        cmocka_unit_test(test_max_profiling_time),
        cmocka_unit_test(test_depth_truncation_in_sampler),
        cmocka_unit_test(test_sampler_thread_runs_and_stops),
        cmocka_unit_test(test_sampler_skips_late_ticks),
        cmocka_unit_test(test_concurrent_slots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
