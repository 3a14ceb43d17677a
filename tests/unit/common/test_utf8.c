/* Unit tests for src/common/utf8.h: the 1- to 4-byte forms at each boundary, and code points read
 * from 1-, 2- and 4-byte-per-character data. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/utf8.h"

static void put_bytes(uint32_t cp, const char *want, size_t want_len)
{
    char out[4] = {0};
    assert_int_equal(skpx_utf8_put(cp, out), want_len);
    assert_memory_equal(out, want, want_len);
}

static void utf8_put_boundaries(void **state)
{
    (void)state;
    put_bytes(0x00, "\x00", 1);
    put_bytes('A', "A", 1);
    put_bytes(0x7F, "\x7F", 1);
    put_bytes(0x80, "\xC2\x80", 2);
    put_bytes(0xE9, "\xC3\xA9", 2);
    put_bytes(0x7FF, "\xDF\xBF", 2);
    put_bytes(0x800, "\xE0\xA0\x80", 3);
    put_bytes(0x65E5, "\xE6\x97\xA5", 3);
    put_bytes(0xFFFD, "\xEF\xBF\xBD", 3);
    put_bytes(0xFFFF, "\xEF\xBF\xBF", 3);
    put_bytes(0x10000, "\xF0\x90\x80\x80", 4);
    put_bytes(0x1F600, "\xF0\x9F\x98\x80", 4);
    put_bytes(0x10FFFF, "\xF4\x8F\xBF\xBF", 4);
}

static void ucs_at_each_kind(void **state)
{
    (void)state;
    const uint8_t one[] = {'a', 0xE9, 0xFF};
    assert_int_equal(skpx_ucs_at(one, 1, 0), 'a');
    assert_int_equal(skpx_ucs_at(one, 1, 1), 0xE9);
    assert_int_equal(skpx_ucs_at(one, 1, 2), 0xFF);
    uint16_t two[] = {'b', 0x65E5, 0xFFFF};
    uint8_t two_raw[sizeof(two)];
    memcpy(two_raw, two, sizeof(two));
    assert_int_equal(skpx_ucs_at(two_raw, 2, 0), 'b');
    assert_int_equal(skpx_ucs_at(two_raw, 2, 1), 0x65E5);
    assert_int_equal(skpx_ucs_at(two_raw, 2, 2), 0xFFFF);
    uint32_t four[] = {'c', 0x1F600, 0x10FFFF};
    uint8_t four_raw[sizeof(four)];
    memcpy(four_raw, four, sizeof(four));
    assert_int_equal(skpx_ucs_at(four_raw, 4, 0), 'c');
    assert_int_equal(skpx_ucs_at(four_raw, 4, 1), 0x1F600);
    assert_int_equal(skpx_ucs_at(four_raw, 4, 2), 0x10FFFF);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(utf8_put_boundaries),
        cmocka_unit_test(ucs_at_each_kind),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
