/* test_snapshot.c - snapshot building (root first, innermost frames kept on truncation), the
 * bounded snapshot queue (count and byte budgets) and the holds of thresholded requests (capture
 * order kept, earliest and latest kept when full, drops counted, flush and discard). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/snapshot.h"
#include "common/alloc.h"
#include "fakes.h"

/* --- snapshots ------------------------------------------------------------------------------- */
static void test_snapshot_root_first_and_innermost_kept(void **state)
{
    (void)state;
    struct skyprof_frame fr[8];
    const char *names[] = {"inner", "mid2", "mid1", "root"}; /* innermost first */
    for (int i = 0; i < 4; i++) {
        fr[i].kind = SKYPROF_FRAME_STR;
        fr[i].str = names[i];
        fr[i].len = (uint32_t)strlen(names[i]);
        fr[i].addr = 0;
    }
    struct skyprof_capture cap = {.frames = fr, .cap = 8, .n = 4};
    struct skp__snapshot *s = skp__snapshot_new("task", "seg", 42, 3, &cap, 8);
    assert_non_null(s);
    assert_int_equal(s->n_frames, 4);
    assert_int_equal(s->sequence, 3);
    assert_string_equal(s->task_id, "task");
    assert_string_equal(s->segment_id, "seg");
    assert_memory_equal(s->text + s->frames[0].off, "root", 4);
    assert_memory_equal(s->text + s->frames[3].off, "inner", 5);
    skp__snapshot_free(s);
    /* depth 2: the two innermost frames survive, root-first */
    s = skp__snapshot_new("task", "seg", 42, 0, &cap, 2);
    assert_int_equal(s->n_frames, 2);
    assert_memory_equal(s->text + s->frames[0].off, "mid2", 4);
    assert_memory_equal(s->text + s->frames[1].off, "inner", 5);
    skp__snapshot_free(s);
    /* address frames keep the address */
    fr[0].kind = SKYPROF_FRAME_ADDR;
    fr[0].addr = 0x1234;
    s = skp__snapshot_new("t", "s", 1, 0, &cap, 8);
    assert_int_equal(s->frames[3].kind, SKYPROF_FRAME_ADDR);
    assert_int_equal(s->frames[3].addr, 0x1234);
    skp__snapshot_free(s);
    cap.n = 0;
    assert_null(skp__snapshot_new("t", "s", 1, 0, &cap, 8));
}

static void test_snapshot_queue_bounds(void **state)
{
    (void)state;
    struct skyprof_frame fr = {0, "x", 1, SKYPROF_FRAME_STR};
    struct skyprof_capture cap = {.frames = &fr, .cap = 1, .n = 1};
    struct skp__snapshot_queue q;
    assert_int_equal(skp__snapshot_queue_init(&q, 2, 1 << 20), SKP_OK);
    assert_true(skp__snapshot_queue_push(&q, skp__snapshot_new("t", "s", 1, 0, &cap, 1)));
    assert_true(skp__snapshot_queue_push(&q, skp__snapshot_new("t", "s", 1, 1, &cap, 1)));
    assert_false(skp__snapshot_queue_push(&q, skp__snapshot_new("t", "s", 1, 2, &cap, 1)));
    assert_int_equal(atomic_load(&q.dropped), 1);
    skp__snapshot_queue_cleanup(&q);
    /* byte budget */
    assert_int_equal(skp__snapshot_queue_init(&q, 100, 10), SKP_OK);
    assert_false(skp__snapshot_queue_push(&q, skp__snapshot_new("t", "s", 1, 0, &cap, 1)));
    assert_int_equal(atomic_load(&q.dropped), 1);
    assert_int_equal(atomic_load(&q.bytes), 0);
    skp__snapshot_queue_cleanup(&q);
}

/* --- holds ---------------------------------------------------------------------------------- */
static struct skp__snapshot *snap_seq(int32_t seq, int64_t time_ms)
{
    struct skyprof_frame fr = {0, "frame", 5, SKYPROF_FRAME_STR};
    struct skyprof_capture cap = {.frames = &fr, .cap = 1, .n = 1};
    return skp__snapshot_new("t", "s", time_ms, seq, &cap, 1);
}

/* Pops the queue into seqs (and times); returns the count. */
static int pop_all(struct skp__snapshot_queue *q, int32_t *seqs, int64_t *times, int cap)
{
    int n = 0;
    struct skp__snapshot *s;
    while ((s = skp__snapshot_queue_pop(q))) {
        if (n < cap) {
            seqs[n] = s->sequence;
            times[n] = s->time_ms;
        }
        n++;
        skp__snapshot_free(s);
    }
    return n;
}

static void test_hold_flush_in_order(void **state)
{
    (void)state;
    struct skp__snapshot *ents[8];
    struct skp__snapshot_hold h;
    skp__snapshot_hold_init(&h, ents, 8, 1 << 20);
    struct skp__snapshot_queue q;
    assert_int_equal(skp__snapshot_queue_init(&q, 100, 1 << 20), SKP_OK);
    for (int i = 0; i < 6; i++)
        assert_int_equal(skp__snapshot_hold_add(&h, snap_seq(i, 1000 + 10 * i)), 0);
    assert_int_equal(skp__snapshot_hold_count(&h), 6);
    assert_int_equal(skp__snapshot_hold_flush(&h, &q), 6);
    assert_int_equal(skp__snapshot_hold_count(&h), 0);
    assert_int_equal(h.bytes, 0);
    int32_t seqs[16];
    int64_t times[16];
    assert_int_equal(pop_all(&q, seqs, times, 16), 6);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(seqs[i], i);
        assert_int_equal(times[i], 1000 + 10 * i);
    }
    /* a hold is reusable after a flush and after a discard */
    h.owner = 7;
    assert_int_equal(skp__snapshot_hold_add(&h, snap_seq(0, 5)), 0);
    assert_int_equal(skp__snapshot_hold_discard(&h), 1);
    assert_int_equal(h.owner, 0);
    assert_int_equal(skp__snapshot_hold_count(&h), 0);
    assert_int_equal(skp__snapshot_hold_discard(&h), 0);
    skp__snapshot_queue_cleanup(&q);
}

/* Full by count: the earliest half stays, the rest is a ring of the latest; every dump that does
 * not stay is counted. */
static void test_hold_full_keeps_earliest_and_latest(void **state)
{
    (void)state;
    struct skp__snapshot *ents[8];
    struct skp__snapshot_hold h;
    skp__snapshot_hold_init(&h, ents, 8, 1 << 20);
    uint32_t dropped = 0;
    for (int i = 0; i < 20; i++)
        dropped += skp__snapshot_hold_add(&h, snap_seq(i, 100 + i));
    assert_int_equal(dropped, 12);
    assert_int_equal(skp__snapshot_hold_count(&h), 8);
    struct skp__snapshot_queue q;
    assert_int_equal(skp__snapshot_queue_init(&q, 100, 1 << 20), SKP_OK);
    assert_int_equal(skp__snapshot_hold_flush(&h, &q), 8);
    int32_t seqs[16];
    int64_t times[16];
    assert_int_equal(pop_all(&q, seqs, times, 16), 8);
    const int32_t want[8] = {0, 1, 2, 3, 16, 17, 18, 19};
    for (int i = 0; i < 8; i++) {
        assert_int_equal(seqs[i], want[i]);
        assert_int_equal(times[i], 100 + want[i]);
    }
    skp__snapshot_queue_cleanup(&q);
}

/* Full by bytes: the head takes half the bytes (always the first dump), the ring the rest; a
 * snapshot larger than the whole budget is dropped, the first one included. */
static void test_hold_byte_budget(void **state)
{
    (void)state;
    struct skp__snapshot *probe = snap_seq(0, 0);
    size_t b = probe->bytes;
    skp__snapshot_free(probe);
    struct skp__snapshot *ents[64];
    struct skp__snapshot_hold h;
    skp__snapshot_hold_init(&h, ents, 64, 6 * b); /* 3 in the head, 3 in the ring */
    uint32_t dropped = 0;
    for (int i = 0; i < 10; i++)
        dropped += skp__snapshot_hold_add(&h, snap_seq(i, i));
    assert_int_equal(dropped, 4);
    assert_int_equal(skp__snapshot_hold_count(&h), 6);
    assert_true(h.bytes <= 6 * b);
    struct skp__snapshot_queue q;
    assert_int_equal(skp__snapshot_queue_init(&q, 100, 1 << 20), SKP_OK);
    assert_int_equal(skp__snapshot_hold_flush(&h, &q), 6);
    int32_t seqs[16];
    int64_t times[16];
    assert_int_equal(pop_all(&q, seqs, times, 16), 6);
    const int32_t want[6] = {0, 1, 2, 7, 8, 9};
    for (int i = 0; i < 6; i++)
        assert_int_equal(seqs[i], want[i]);
    /* nothing fits a budget smaller than one snapshot: dropped and counted, never held */
    skp__snapshot_hold_init(&h, ents, 64, b - 1);
    assert_int_equal(skp__snapshot_hold_add(&h, snap_seq(0, 0)), 1);
    assert_int_equal(skp__snapshot_hold_add(&h, snap_seq(1, 1)), 1);
    assert_int_equal(skp__snapshot_hold_count(&h), 0);
    assert_int_equal(h.bytes, 0);
    skp__snapshot_queue_cleanup(&q);
}

/* Flushing into a full queue drops there (counted by the queue), never blocks. */
static void test_hold_flush_into_full_queue(void **state)
{
    (void)state;
    struct skp__snapshot *ents[8];
    struct skp__snapshot_hold h;
    skp__snapshot_hold_init(&h, ents, 8, 1 << 20);
    for (int i = 0; i < 5; i++)
        assert_int_equal(skp__snapshot_hold_add(&h, snap_seq(i, i)), 0);
    struct skp__snapshot_queue q;
    assert_int_equal(skp__snapshot_queue_init(&q, 3, 1 << 20), SKP_OK);
    assert_int_equal(skp__snapshot_hold_flush(&h, &q), 5);
    assert_int_equal(atomic_load(&q.dropped), 2);
    int32_t seqs[8];
    int64_t times[8];
    assert_int_equal(pop_all(&q, seqs, times, 8), 3);
    assert_int_equal(seqs[0], 0);
    assert_int_equal(seqs[2], 2);
    skp__snapshot_queue_cleanup(&q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_snapshot_root_first_and_innermost_kept),
        cmocka_unit_test(test_snapshot_queue_bounds),
        cmocka_unit_test(test_hold_flush_in_order),
        cmocka_unit_test(test_hold_full_keeps_earliest_and_latest),
        cmocka_unit_test(test_hold_byte_budget),
        cmocka_unit_test(test_hold_flush_into_full_queue),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
