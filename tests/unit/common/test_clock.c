/* Unit tests for src/common/clock.c: the monotonic and wall clocks, sleeping. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/clock.h"

static void clocks_advance(void **state)
{
    (void)state;
    int64_t a = skpx_mono_ns();
    skpx_sleep_ns(2000000);
    assert_true(skpx_mono_ns() - a >= 2000000);
    assert_true(skpx_now_ms() > 1700000000000LL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(clocks_advance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
