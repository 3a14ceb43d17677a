/* Unit tests for src/common/log.c: levels and the sink. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
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
    strncpy(g_last, line, sizeof(g_last) - 1);
}

static void log_respects_level_and_sink(void **state)
{
    (void)state;
    g_lines = 0;
    SKPX_ERROR("dropped %d", 1); /* no sink: off by default */
    assert_int_equal(g_lines, 0);
    skpx_log_set_sink(capture, NULL, SKPX_LOG_INFO);
    SKPX_INFO("hello %s", "world");
    SKPX_DEBUG("not delivered");
    assert_int_equal(g_lines, 1);
    assert_string_equal(g_last, "hello world");
    skpx_log_set_sink(NULL, NULL, SKPX_LOG_DEBUG);
    SKPX_ERROR("off again");
    assert_int_equal(g_lines, 1);
    assert_int_equal(skpx_log_level_parse("WARN"), SKPX_LOG_WARN);
    assert_int_equal(skpx_log_level_parse("verbose"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(log_respects_level_and_sink),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
