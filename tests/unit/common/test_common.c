/* Unit tests for src/common: allocation accounting and failure injection, log levels, errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <string.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"

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

static void errors_have_names(void **state)
{
    (void)state;
    assert_string_equal(skp_strerror(SKP_OK), "ok");
    assert_string_equal(skp_strerror((skp_err)999), "unknown error");
    assert_int_equal(skpx_err_from_errno(ECONNREFUSED), SKP_EUNAVAILABLE);
    int64_t a = skpx_mono_ns();
    skpx_sleep_ns(2000000);
    assert_true(skpx_mono_ns() - a >= 2000000);
    assert_true(skpx_now_ms() > 1700000000000LL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(alloc_counts_live_bytes),
        cmocka_unit_test(alloc_fail_after_injects_failure),
        cmocka_unit_test(log_respects_level_and_sink),
        cmocka_unit_test(errors_have_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
