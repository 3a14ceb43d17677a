/* Unit tests for src/cli/cli_pid.c: `--pid 4294976680` (2^32 + P) read process P before issue 25;
 * values outside pid_t, signs, spaces and junk are refused, every valid pid is read as is. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cli/cli_pid.h"

static void valid_pids(void **state)
{
    (void)state;
    long v = 0;
    assert_true(cli_parse_pid("1", &v));
    assert_int_equal(v, 1);
    assert_true(cli_parse_pid("4194304", &v));
    assert_int_equal(v, 4194304);
    assert_true(cli_parse_pid("2147483647", &v));
    assert_int_equal(v, 2147483647);
    assert_true(cli_parse_pid("0012", &v));
    assert_int_equal(v, 12);
}

static void values_outside_pid_t_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "4294976680", /* 2^32 + 9384: used to read process 9384 */
        "2147483648", "4294967296", "99999999999999999999999", "0", "-1", "+5", " 5", "5 ", "5x",
        "",           "0x10",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        long v = -7;
        assert_false(cli_parse_pid(bad[i], &v));
        assert_int_equal(v, -7);
    }
    assert_false(cli_parse_pid(NULL, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(valid_pids),
        cmocka_unit_test(values_outside_pid_t_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
