/* Unit tests for src/common/uri_regex.c: RE2-syntax endpoint patterns matched as rover matches
 * them (anywhere in the name), the translations, and every refusal with its reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/uri_regex.h"

static bool matches(const char *rx, const char *name)
{
    regex_t re;
    char err[160];
    skp_err e = skpx_uri_regex_compile(&re, rx, err, sizeof(err));
    if (e != SKP_OK)
        fail_msg("%s refused: %s", rx, err);
    bool m = regexec(&re, name, 0, NULL, 0) == 0;
    regfree(&re);
    return m;
}

static void matches_anywhere_like_rover(void **state)
{
    (void)state;
    assert_true(matches("/api/", "/v1/api/users"));
    assert_true(matches("^/api/", "/api/users"));
    assert_false(matches("^/api/", "/v1/api/users"));
    assert_true(matches("^/api/[a-z]+$", "/api/users"));
    assert_false(matches("^/api/[a-z]+$", "/api/users/7"));
    assert_true(matches("GET:/a|POST:/b", "POST:/b"));
}

static void translates_re2_syntax(void **state)
{
    (void)state;
    /* shorthands, outside and inside classes */
    assert_true(matches("^/users/\\d+$", "/users/42"));
    assert_false(matches("^/users/\\d+$", "/users/4x"));
    assert_true(matches("^/\\w+/\\D$", "/abc_1/x"));
    assert_true(matches("^a\\sb\\Sc$", "a bxc"));
    assert_true(matches("^[\\d.]+$", "1.2.3"));
    assert_false(matches("^[\\d.]+$", "1,2"));
    assert_true(matches("^[[:alpha:]_]+$", "a_b"));
    /* groups, named groups, lazy quantifiers, repetitions */
    assert_true(matches("^(?:/v\\d)?/orders/(?P<id>\\d{1,4})$", "/v2/orders/123"));
    assert_true(matches("^/(?<name>[a-z]+)/x$", "/abc/x"));
    assert_true(matches("^/a.*?b$", "/a--b"));
    assert_true(matches("^x{2,}?$", "xxx"));
    /* flags and quoting */
    assert_true(matches("(?i)^/API/", "/api/x"));
    assert_false(matches("^/API/", "/api/x"));
    assert_true(matches("(?is)^/a.b$", "/A\nB"));
    assert_true(matches("^\\Q/a.b*\\E$", "/a.b*"));
    assert_false(matches("^\\Q/a.b*\\E$", "/axb"));
    /* escaped punctuation, including what POSIX does not escape */
    assert_true(matches("^\\/a\\-b\\.c$", "/a-b.c"));
    assert_true(matches("^a\\}b$", "a}b"));
    assert_true(matches("^a{b}$", "a{b}")); /* not a repetition: literal, as in RE2 */
    assert_true(matches("^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
                        "0123abcd-0000-ffff-0123456789ab"));
    /* classes with ], ^, [ and - as members */
    assert_true(matches("^[\\]x]+$", "]x]"));
    assert_true(matches("^[\\^]$", "^"));
    assert_false(matches("^[\\^]$", "a"));
    assert_true(matches("^[\\^\\-]+$", "-^"));
    assert_true(matches("^[a\\[]+$", "[a"));
    assert_true(matches("^[^/]+$", "abc"));
    assert_false(matches("^[^/]+$", "a/c"));
}

static void refuses_with_a_reason(void **state)
{
    (void)state;
    static const struct {
        const char *rx;
        const char *why;
    } cases[] = {
        {"/a(?=b)", "lookaround groups are not supported"},
        {"/a(?!b)", "lookaround groups are not supported"},
        {"(?<=a)b", "lookaround groups are not supported"},
        {"(?>a)", "atomic groups are not supported"},
        {"(a)\\1", "back-references (\\1) are not supported"},
        {"\\bword", "boundary \\b is not supported"},
        {"a*+", "possessive quantifiers are not supported"},
        /* stacked quantifiers: glibc would nest them (the fuzz target's timeout, a?????...) */
        {"a???", "bad repetition operator ?"},
        {"a**", "bad repetition operator *"},
        {"a{2}{3}", "bad repetition operator {3}"},
        {"*a", "missing argument to repetition operator *"},
        {"(+a)", "missing argument to repetition operator +"},
        {"a|?b", "missing argument to repetition operator ?"},
        {"^*", "missing argument to repetition operator *"},
        {"[a-z&&[^e]]", "class intersection (&&) is not supported"},
        {"[a[b]]", "nested or intersected character classes are not supported"},
        {"\\p{L}", "unsupported escape \\p"},
        {"a(?i)b", "inline flags are supported only as (?flags) at the start of the pattern"},
        {"(?x)a b", "the comments flag (?x) is not supported"},
        {"(", "unclosed group"},
        {"a)", "unbalanced parenthesis"},
        {"[abc", "unterminated character class"},
        {"[z-a]", "illegal character range z-a"},
        {"a{1001}", "repeat count above 1000"},
        {"((a{1000}){1000}){2}", "pattern too large once repetitions are expanded"},
        {"x\\", "pattern ends in \\"},
        {"[[:nope:]]", "unknown class [:nope:]"},
        {"(?P<1x>a)", "malformed group name"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        regex_t re;
        char err[160];
        skp_err e = skpx_uri_regex_compile(&re, cases[i].rx, err, sizeof(err));
        if (e != SKP_EINVAL || strcmp(err, cases[i].why) != 0)
            fail_msg("%s: %d '%s', want '%s'", cases[i].rx, e, err, cases[i].why);
    }
}

static void bounds_length_and_output(void **state)
{
    (void)state;
    char rx[SKP_URI_REGEX_MAX + 2];
    memset(rx, 'a', sizeof(rx) - 1);
    rx[sizeof(rx) - 1] = '\0';
    char out[SKP_URI_REGEX_OUT_MAX];
    char err[160];
    int icase;
    assert_int_equal(skpx_uri_regex_translate(rx, out, sizeof(out), &icase, err, sizeof(err)),
                     SKP_EINVAL);
    assert_string_equal(err, "longer than 512 bytes");
    /* the widest expansion of the longest pattern fits the documented room */
    for (size_t i = 0; i + 1 < SKP_URI_REGEX_MAX; i += 2) {
        rx[i] = '\\';
        rx[i + 1] = 'W';
    }
    rx[SKP_URI_REGEX_MAX] = '\0';
    assert_int_equal(skpx_uri_regex_translate(rx, out, sizeof(out), &icase, err, sizeof(err)),
                     SKP_OK);
    assert_int_equal(strlen(out), (SKP_URI_REGEX_MAX / 2) * strlen("[^A-Za-z0-9_]"));
    /* a room too small is said, never overrun */
    char small[8];
    assert_int_equal(
        skpx_uri_regex_translate("\\d\\d\\d", small, sizeof(small), &icase, err, sizeof(err)),
        SKP_ETOOBIG);
    assert_string_equal(small, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(matches_anywhere_like_rover),
        cmocka_unit_test(translates_re2_syntax),
        cmocka_unit_test(refuses_with_a_reason),
        cmocka_unit_test(bounds_length_and_output),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
