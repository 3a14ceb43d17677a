/* Unit tests for the logger's rate limiting (skpx_log_limited / skpx_log_limit_allow). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/log.h"

static int g_lines;
static char g_last[SKPX_LOG_LINE_MAX];

static void capture(void *ud, enum skpx_log_level level, const char *line)
{
    (void)ud;
    (void)level;
    g_lines++;
    snprintf(g_last, sizeof(g_last), "%s", line);
}

static void limit_allows_one_per_interval_and_counts(void **state)
{
    (void)state;
    struct skpx_log_limit lim = {0};
    uint64_t held = 99;
    assert_true(skpx_log_limit_allow(&lim, 5000, &held));
    assert_int_equal(held, 0);
    assert_false(skpx_log_limit_allow(&lim, 5001, &held));
    assert_false(skpx_log_limit_allow(&lim, 5000 + SKPX_LOG_LIMIT_INTERVAL_MS - 1, &held));
    assert_true(skpx_log_limit_allow(&lim, 5000 + SKPX_LOG_LIMIT_INTERVAL_MS, &held));
    assert_int_equal(held, 2);
    assert_true(skpx_log_limit_allow(&lim, 9000, NULL));
    /* a monotonic clock reading 0 still arms the limiter */
    struct skpx_log_limit z = {0};
    assert_true(skpx_log_limit_allow(&z, 0, NULL));
    assert_false(skpx_log_limit_allow(&z, 1, NULL));
}

static void limited_log_writes_first_and_reports_held_lines(void **state)
{
    (void)state;
    skpx_log_set_sink(capture, NULL, SKPX_LOG_INFO);
    struct skpx_log_limit lim = {0};
    g_lines = 0;
    assert_true(skpx_log_limited(&lim, SKPX_LOG_ERROR, "store failed: %s", "disk"));
    for (int i = 0; i < 50; i++)
        assert_false(skpx_log_limited(&lim, SKPX_LOG_ERROR, "store failed: %s", "disk"));
    assert_int_equal(g_lines, 1);
    assert_string_equal(g_last, "store failed: disk");
    lim.last_ms -= SKPX_LOG_LIMIT_INTERVAL_MS; /* as if the interval had passed */
    assert_true(skpx_log_limited(&lim, SKPX_LOG_ERROR, "store failed: %s", "disk"));
    assert_int_equal(g_lines, 2);
    assert_string_equal(g_last, "store failed: disk (50 more since the last report)");
    /* a disabled level consumes the slot but writes nothing */
    struct skpx_log_limit dbg = {0};
    assert_true(skpx_log_limited(&dbg, SKPX_LOG_DEBUG, "quiet"));
    assert_int_equal(g_lines, 2);
    skpx_log_set_sink(NULL, NULL, SKPX_LOG_ERROR);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(limit_allows_one_per_interval_and_counts),
        cmocka_unit_test(limited_log_writes_first_and_reports_held_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
