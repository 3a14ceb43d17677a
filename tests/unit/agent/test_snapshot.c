/* test_snapshot.c - snapshot building (root first, innermost frames kept on truncation) and the
 * bounded snapshot queue (count and byte budgets). */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_snapshot_root_first_and_innermost_kept),
        cmocka_unit_test(test_snapshot_queue_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
