/* Unit tests for src/common/grow.c: doubling from the first capacity, no-op when large enough,
 * overflow and allocation failure leave the array intact. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "common/grow.h"

struct item {
    uint64_t a, b;
};

static void grow_doubles_and_keeps_contents(void **state)
{
    (void)state;
    struct item *v = NULL;
    size_t cap = 0;
    assert_int_equal(skpx_grow(&v, &cap, 1, sizeof(*v), 4), SKP_OK);
    assert_int_equal(cap, 4);
    for (size_t i = 0; i < 100; i++) {
        assert_int_equal(skpx_grow(&v, &cap, i + 1, sizeof(*v), 4), SKP_OK);
        v[i].a = i;
        v[i].b = ~i;
    }
    assert_int_equal(cap, 128);
    for (size_t i = 0; i < 100; i++) {
        assert_int_equal(v[i].a, i);
        assert_int_equal(v[i].b, ~i);
    }
    struct item *same = v;
    assert_int_equal(skpx_grow(&v, &cap, 50, sizeof(*v), 4), SKP_OK); /* enough already */
    assert_ptr_equal(v, same);
    assert_int_equal(skpx_grow(&v, &cap, 1000, sizeof(*v), 4), SKP_OK); /* several doublings */
    assert_int_equal(cap, 1024);
    assert_int_equal(v[99].a, 99);
    skpx_free(v);
}

static void grow_failure_leaves_array_valid(void **state)
{
    (void)state;
    char **v = NULL;
    size_t cap = 0;
    assert_int_equal(skpx_grow(&v, &cap, 3, sizeof(*v), 0), SKP_OK);
    assert_int_equal(cap, 16); /* default first capacity */
    v[0] = "kept";
    skpx_alloc_fail_after(0);
    assert_int_equal(skpx_grow(&v, &cap, 17, sizeof(*v), 0), SKP_ENOMEM);
    skpx_alloc_fail_after(-1);
    assert_int_equal(cap, 16);
    assert_string_equal(v[0], "kept");
    assert_int_equal(skpx_grow(&v, &cap, SIZE_MAX / 4, sizeof(*v), 0), SKP_ENOMEM);
    assert_int_equal(skpx_grow(&v, &cap, SIZE_MAX, 1, 0), SKP_ENOMEM);
    assert_int_equal(cap, 16);
    skpx_free(v);
}

/* skpx_grow_capped: doubles from the first capacity (or the current one), cut to the ceiling;
 * a need past the ceiling is refused with the array unchanged. */
static void grow_capped_stops_at_the_ceiling(void **state)
{
    (void)state;
    uint8_t *b = NULL;
    size_t cap = 0;
    assert_int_equal(skpx_grow_capped(&b, &cap, 10, 1, 256, 1000), SKP_OK);
    assert_int_equal(cap, 256);
    memset(b, 7, cap);
    assert_int_equal(skpx_grow_capped(&b, &cap, 200, 1, 256, 1000), SKP_OK);
    assert_int_equal(cap, 256); /* holds it already */
    assert_int_equal(skpx_grow_capped(&b, &cap, 300, 1, 256, 1000), SKP_OK);
    assert_int_equal(cap, 512);
    assert_int_equal(b[255], 7);
    assert_int_equal(skpx_grow_capped(&b, &cap, 513, 1, 256, 1000), SKP_OK);
    assert_int_equal(cap, 1000); /* 1024 cut to the ceiling */
    assert_int_equal(skpx_grow_capped(&b, &cap, 1001, 1, 256, 1000), SKP_ETOOBIG);
    assert_int_equal(cap, 1000);
    assert_int_equal(b[0], 7);
    skpx_free(b);
    uint64_t *w = NULL;
    size_t wcap = 0;
    assert_int_equal(skpx_grow_capped(&w, &wcap, 3, sizeof(*w), 0, 5), SKP_OK);
    assert_int_equal(wcap, 5); /* the default first capacity (16) cut to the ceiling */
    skpx_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(grow_doubles_and_keeps_contents),
        cmocka_unit_test(grow_failure_leaves_array_valid),
        cmocka_unit_test(grow_capped_stops_at_the_ceiling),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
