/* Unit tests for src/common/env.h: a bounded integer from the environment, 0 when unset, empty,
 * malformed or out of range. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "common/env.h"

#define NAME "SKYPROF_TEST_ENV_INT"

static long long with(const char *value, long long lo, long long hi)
{
    if (value)
        assert_int_equal(setenv(NAME, value, 1), 0);
    else
        assert_int_equal(unsetenv(NAME), 0);
    return skpx_env_int(NAME, lo, hi);
}

static void env_int_cases(void **state)
{
    (void)state;
    assert_int_equal(with(NULL, 1, 100), 0);
    assert_int_equal(with("", 1, 100), 0);
    assert_int_equal(with("42", 1, 100), 42);
    assert_int_equal(with("1", 1, 100), 1);
    assert_int_equal(with("100", 1, 100), 100);
    assert_int_equal(with("101", 1, 100), 0);
    assert_int_equal(with("0", 1, 100), 0);
    assert_int_equal(with("-5", 1, 100), 0);
    assert_int_equal(with("12ms", 1, 100), 0);
    assert_int_equal(with("0x10", 1, 100), 0);
    assert_int_equal(with("99999999999999999999", 1, 100), 0); /* overflows long long */
    assert_int_equal(with("900000", 1, 899999), 0);
    assert_int_equal(with("5000", 1, 899999), 5000);
    unsetenv(NAME);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(env_int_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
