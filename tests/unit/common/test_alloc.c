/* Unit tests for src/common/alloc.c: live-byte accounting and failure injection. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/alloc.h"

static void alloc_counts_live_bytes(void **state)
{
    (void)state;
    int64_t before = skpx_alloc_live_bytes();
    char *p = skpx_malloc(100);
    assert_non_null(p);
    assert_int_equal(skpx_alloc_live_bytes() - before, 100);
    p = skpx_realloc(p, 300);
    assert_non_null(p);
    assert_int_equal(skpx_alloc_live_bytes() - before, 300);
    char *s = skpx_strndup("abcdef", 3);
    assert_string_equal(s, "abc");
    skpx_free(s);
    skpx_free(p);
    skpx_free(NULL);
    assert_int_equal(skpx_alloc_live_bytes(), before);
}

static void alloc_fail_after_injects_failure(void **state)
{
    (void)state;
    skpx_alloc_fail_after(1);
    void *a = skpx_malloc(8);
    void *b = skpx_malloc(8);
    skpx_alloc_fail_after(-1);
    void *c = skpx_malloc(8);
    assert_non_null(a);
    assert_null(b);
    assert_non_null(c);
    assert_null(skpx_calloc(SIZE_MAX / 2, 4)); /* overflow refused */
    skpx_free(a);
    skpx_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(alloc_counts_live_bytes),
        cmocka_unit_test(alloc_fail_after_injects_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
