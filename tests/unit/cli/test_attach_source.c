/* Unit tests of src/cli/attach_source.c: the /proc/PID/stat parsing `skyprof attach`'s process
 * source uses for a remote thread's state and the process's CPU time and thread count. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <string.h>

#include <cmocka.h>

#include "cli/attach_source.h"

/* state, utime+stime, num_threads; a comm with blanks and ')' in it; malformed lines refused */
static void attach_stat_lines(void **state)
{
    (void)state;
    static const char line[] =
        "4242 (we ird) (x) R 1 4242 4242 0 -1 4194560 100 0 0 0 250 17 0 0 20 0 7 0 1000 "
        "20000000 3000 18446744073709551615 1 1 0 0 0 0 0 16781312 2 0 0 0 17 1 0 0 0 0 0\n";
    char st = '?';
    uint64_t ticks = 0;
    int nt = 0;
    assert_true(attach_stat_state(line, sizeof(line) - 1, &st));
    assert_int_equal(st, 'R');
    assert_true(attach_stat_usage(line, sizeof(line) - 1, &ticks, &nt));
    assert_int_equal(ticks, 267);
    assert_int_equal(nt, 7);
    static const char *const bad[] = {"", "4242 (x", "4242 (x) ", "4242 (x) S 1 2",
                                      "4242 (x) S 1 2 3 4 5 6 7 8 9 10 z 3"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_false(attach_stat_usage(bad[i], strlen(bad[i]), &ticks, &nt));
    assert_false(attach_stat_state("4242 (x)", 8, &st));
    assert_false(attach_stat_state("4242 (x) 9", 10, &st));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(attach_stat_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
