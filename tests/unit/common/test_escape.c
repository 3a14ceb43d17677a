/* Unit tests for control-character escaping (escape.c) and the logger's use of it (issue 15,
 * finding 9: a newline or ANSI codes in a task id or service name forged lines in the log). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/escape.h"
#include "common/log.h"

static const char *esc(const char *s, size_t n)
{
    static char out[256];
    skpx_escape_ctl(s, n, out, sizeof(out));
    return out;
}
#define ESC(lit) esc(lit, sizeof(lit) - 1)

static void escapes_controls_keeps_text(void **state)
{
    (void)state;
    assert_string_equal(ESC("plain text /a/b.py:12"), "plain text /a/b.py:12");
    assert_string_equal(ESC("a\nb\rc\td"), "a\\nb\\rc\\td");
    assert_string_equal(ESC("\x1b[31mred\x1b[0m"), "\\x1b[31mred\\x1b[0m");
    assert_string_equal(ESC("del\x7f"
                            "bell\x07"),
                        "del\\x7fbell\\x07");
    assert_string_equal(ESC("nul\0after"), "nul\\x00after");
    /* valid UTF-8 passes; C1 controls (CSI = U+009B) and broken bytes do not */
    assert_string_equal(ESC("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
                        "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    assert_string_equal(ESC("\xc2\x9b"
                            "2J"),
                        "\\u009b2J");
    assert_string_equal(ESC("\x9b"
                            "2J"),
                        "\\x9b2J");
    assert_string_equal(ESC("\xe2\x82"), "\\xe2\\x82");          /* truncated character */
    assert_string_equal(ESC("\xc0\xaf"), "\\xc0\\xaf");          /* overlong '/' */
    assert_string_equal(ESC("\xed\xa0\x80"), "\\xed\\xa0\\x80"); /* surrogate */
    assert_false(skpx_escape_needed("ok \xc3\xa9", 5));
    assert_true(skpx_escape_needed("a\nb", 3));
    assert_true(skpx_escape_needed("\xc2\x85", 2));
    assert_true(skpx_escape_needed("\xff", 1));
}

static void truncates_whole_escapes_only(void **state)
{
    (void)state;
    char out[6];
    /* "ab" fits, "\x1b" (4 bytes) does not fit in the 3 left with the NUL: stop before it */
    assert_int_equal(skpx_escape_ctl("ab\x1b"
                                     "cd",
                                     5, out, sizeof(out)),
                     2);
    assert_string_equal(out, "ab");
    assert_int_equal(skpx_escape_ctl("\xc3\xa9\xc3\xa9\xc3\xa9", 6, out, sizeof(out)), 4);
    assert_int_equal(skpx_escape_ctl("x", 1, out, 1), 0);
    assert_string_equal(out, "");
    /* the worst case expansion is bounded */
    char big[64 * SKPX_ESCAPE_MAX_EXPANSION + 1];
    char in[64];
    memset(in, 0x01, sizeof(in));
    assert_int_equal(skpx_escape_ctl(in, sizeof(in), big, sizeof(big)), sizeof(big) - 1);
}

static int g_lines;
static char g_last[SKPX_LOG_LINE_MAX];
static void capture(void *ud, enum skpx_log_level level, const char *line)
{
    (void)ud;
    (void)level;
    g_lines++;
    snprintf(g_last, sizeof(g_last), "%s", line);
}

static void logger_escapes_interpolated_fields(void **state)
{
    (void)state;
    skpx_log_set_sink(capture, NULL, SKPX_LOG_INFO);
    g_lines = 0;
    const char *forged = "t1\n2026-01-01T00:00:00.000Z ERROR admin logged in\x1b[2K";
    skpx_log(SKPX_LOG_INFO, "task %s created: service=%s", forged, "svc\r\n");
    assert_int_equal(g_lines, 1);
    assert_null(strchr(g_last, '\n'));
    assert_null(strchr(g_last, '\r'));
    assert_null(strchr(g_last, '\x1b'));
    assert_string_equal(g_last, "task t1\\n2026-01-01T00:00:00.000Z ERROR admin logged in"
                                "\\x1b[2K created: service=svc\\r\\n");
    /* rate-limited lines go through the same path */
    struct skpx_log_limit lim = {0};
    assert_true(skpx_log_limited(&lim, SKPX_LOG_ERROR, "bad %s", "a\nb"));
    assert_string_equal(g_last, "bad a\\nb");
    /* a line of nothing but control bytes stays within the line limit */
    char ctl[SKPX_LOG_LINE_MAX];
    memset(ctl, '\x1b', sizeof(ctl) - 1);
    ctl[sizeof(ctl) - 1] = 0;
    skpx_log(SKPX_LOG_INFO, "%s", ctl);
    assert_true(strlen(g_last) < SKPX_LOG_LINE_MAX);
    assert_null(strchr(g_last, '\x1b'));
    skpx_log_set_sink(NULL, NULL, SKPX_LOG_ERROR);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(escapes_controls_keeps_text),
        cmocka_unit_test(truncates_whole_escapes_only),
        cmocka_unit_test(logger_escapes_interpolated_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
