/* test_ring.c - the bounded pointer ring: a full ring drops and counts, many laps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/ring.h"
#include "common/alloc.h"
#include "fakes.h"

/* --- ring ------------------------------------------------------------------------------------ */
static void test_ring_full_drops_and_counts(void **state)
{
    (void)state;
    struct skp__ring r;
    assert_int_equal(skp__ring_init(&r, 3), SKP_OK);
    int v[5];
    assert_true(skp__ring_push(&r, &v[0]));
    assert_true(skp__ring_push(&r, &v[1]));
    assert_true(skp__ring_push(&r, &v[2]));
    assert_false(skp__ring_push(&r, &v[3])); /* limit 3 although the capacity is 4 */
    assert_int_equal(atomic_load(&r.dropped), 1);
    assert_int_equal(skp__ring_size(&r), 3);
    assert_ptr_equal(skp__ring_pop(&r), &v[0]);
    assert_true(skp__ring_push(&r, &v[4]));
    assert_ptr_equal(skp__ring_pop(&r), &v[1]);
    assert_ptr_equal(skp__ring_pop(&r), &v[2]);
    assert_ptr_equal(skp__ring_pop(&r), &v[4]);
    assert_null(skp__ring_pop(&r));
    /* many laps */
    for (int i = 0; i < 1000; i++) {
        assert_true(skp__ring_push(&r, &v[i % 5]));
        assert_ptr_equal(skp__ring_pop(&r), &v[i % 5]);
    }
    skp__ring_cleanup(&r);
    assert_int_equal(skp__ring_init(&r, 0), SKP_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_full_drops_and_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
