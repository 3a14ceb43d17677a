/* Unit tests for src/common/pct.c: decoding, malformed escapes, NUL bytes, truncation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/pct.h"

static void pct_decodes_escapes(void **state)
{
    (void)state;
    char out[64];
    bool bad = true;
    assert_int_equal(skpx_pct_decode("a%20b%2Fc%e2%82%AC", 18, out, sizeof(out), &bad), 8);
    assert_false(bad);
    assert_string_equal(out, "a b/c\xe2\x82\xac");
    assert_int_equal(skpx_pct_decode("", 0, out, sizeof(out), &bad), 0);
    assert_string_equal(out, "");
    assert_false(bad);
}

static void pct_flags_malformed_and_keeps_them_literally(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        const char *out;
    } cases[] = {
        {"100%", "100%"}, {"%4", "%4"}, {"%zz1", "%zz1"}, {"a%g0", "a%g0"}, {"%%41", "%A"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[32];
        bool bad = false;
        size_t n = skpx_pct_decode(cases[i].in, strlen(cases[i].in), out, sizeof(out), &bad);
        assert_true(bad);
        assert_int_equal(n, strlen(cases[i].out));
        assert_string_equal(out, cases[i].out);
    }
    char out[8];
    bool bad = false;
    assert_int_equal(skpx_pct_decode("a%00b", 5, out, sizeof(out), &bad), 3);
    assert_true(bad); /* a NUL byte cannot be exact text */
}

static void pct_truncates_and_measures(void **state)
{
    (void)state;
    char small[4];
    assert_int_equal(skpx_pct_decode("abcdef", 6, small, sizeof(small), NULL), 6);
    assert_string_equal(small, "abc");
    assert_int_equal(skpx_pct_decode("%41%42", 6, NULL, 0, NULL), 2);
    /* the input need not be NUL-terminated */
    const char raw[3] = {'%', '4', '1'};
    assert_int_equal(skpx_pct_decode(raw, 3, small, sizeof(small), NULL), 1);
    assert_string_equal(small, "A");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pct_decodes_escapes),
        cmocka_unit_test(pct_flags_malformed_and_keeps_them_literally),
        cmocka_unit_test(pct_truncates_and_measures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
