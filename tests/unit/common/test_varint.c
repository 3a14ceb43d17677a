/* Unit tests for src/common/varint.h: round trips, the 10-byte edge (the 10th byte gives bit 63
 * only), overlong and truncated input, the cursor after a failure, length prefixes that must
 * fit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/varint.h"

static void varint_round_trips(void **state)
{
    (void)state;
    static const uint64_t vals[] = {0,          1,          0x7f,      0x80,
                                    300,        0x3fff,     0x4000,    UINT32_MAX,
                                    1ull << 56, 1ull << 63, INT64_MAX, UINT64_MAX};
    static const size_t lens[] = {1, 1, 1, 2, 2, 2, 3, 5, 9, 10, 9, 10};
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
        uint8_t b[SKPX_VARINT_MAX + 1];
        size_t n = skpx_varint_put(b, vals[i]);
        assert_int_equal(n, lens[i]);
        b[n] = 0xaa; /* a following byte is not read */
        size_t at = 0;
        uint64_t v = 0;
        assert_true(skpx_varint_get(b, n + 1, &at, &v));
        assert_int_equal(at, n);
        assert_true(v == vals[i]);
    }
}

static void varint_tenth_byte_gives_bit_63_only(void **state)
{
    (void)state;
    /* UINT64_MAX as written: nine 0xff and a 10th byte of 0x01 */
    uint8_t b[SKPX_VARINT_MAX];
    memset(b, 0xff, 9);
    b[9] = 0x01;
    size_t at = 0;
    uint64_t v = 0;
    assert_true(skpx_varint_get(b, sizeof(b), &at, &v));
    assert_int_equal(at, 10);
    assert_true(v == UINT64_MAX);
    /* higher bits in the 10th byte are dropped, as protobuf-c and Go's pprof reader drop them */
    b[9] = 0x7f;
    at = 0;
    assert_true(skpx_varint_get(b, sizeof(b), &at, &v));
    assert_int_equal(at, 10);
    assert_true(v == UINT64_MAX);
    b[9] = 0x7e;
    at = 0;
    assert_true(skpx_varint_get(b, sizeof(b), &at, &v));
    assert_true(v == UINT64_MAX >> 1);
    /* overlong zero: ten bytes are fine */
    static const uint8_t zero10[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00};
    at = 0;
    assert_true(skpx_varint_get(zero10, sizeof(zero10), &at, &v));
    assert_int_equal(at, 10);
    assert_true(v == 0);
}

static void varint_refuses_eleven_bytes_and_truncation(void **state)
{
    (void)state;
    uint8_t b[12];
    memset(b, 0x80, sizeof(b));
    b[10] = 0x00; /* the 11th byte would end it */
    size_t at = 0;
    uint64_t v;
    assert_false(skpx_varint_get(b, sizeof(b), &at, &v));
    assert_int_equal(at, 10); /* stopped after the 10th byte */
    /* truncated: every byte has the continuation bit */
    static const uint8_t cut[] = {0x96, 0x81};
    at = 0;
    assert_false(skpx_varint_get(cut, sizeof(cut), &at, &v));
    assert_int_equal(at, 2);
    at = 0;
    assert_false(skpx_varint_get(cut, 0, &at, &v));
    assert_int_equal(at, 0);
    /* reading from an offset */
    static const uint8_t two[] = {0x05, 0x96, 0x01};
    at = 1;
    assert_true(skpx_varint_get(two, sizeof(two), &at, &v));
    assert_int_equal(at, 3);
    assert_true(v == 150);
}

static void varint_read_moves_the_pointer(void **state)
{
    (void)state;
    static const uint8_t b[] = {0xac, 0x02, 0x80};
    const uint8_t *p = b;
    uint64_t v = 0;
    assert_true(skpx_varint_read(&p, b + sizeof(b), &v));
    assert_ptr_equal(p, b + 2);
    assert_true(v == 300);
    assert_false(skpx_varint_read(&p, b + sizeof(b), &v)); /* truncated */
    assert_ptr_equal(p, b + 3);
    assert_false(skpx_varint_read(&p, b + sizeof(b), &v)); /* at the end */
    assert_ptr_equal(p, b + 3);
}

static void varint_len_must_fit(void **state)
{
    (void)state;
    static const uint8_t b[] = {0x03, 'a', 'b', 'c', 0x04, 'x'};
    const uint8_t *p = b;
    uint64_t n = 0;
    assert_true(skpx_varint_read_len(&p, b + 4, &n));
    assert_ptr_equal(p, b + 1);
    assert_true(n == 3);
    p = b;
    assert_false(skpx_varint_read_len(&p, b + 3, &n)); /* 3 announced, 2 there */
    assert_ptr_equal(p, b + 1);
    p = b + 4;
    assert_false(skpx_varint_read_len(&p, b + sizeof(b), &n));
    assert_ptr_equal(p, b + 5);
    static const uint8_t huge[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    p = huge;
    assert_false(skpx_varint_read_len(&p, huge + sizeof(huge), &n));
    static const uint8_t empty[] = {0x00};
    p = empty;
    assert_true(skpx_varint_read_len(&p, empty + sizeof(empty), &n));
    assert_true(n == 0 && p == empty + 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(varint_round_trips),
        cmocka_unit_test(varint_tenth_byte_gives_bit_63_only),
        cmocka_unit_test(varint_refuses_eleven_bytes_and_truncation),
        cmocka_unit_test(varint_read_moves_the_pointer),
        cmocka_unit_test(varint_len_must_fit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
