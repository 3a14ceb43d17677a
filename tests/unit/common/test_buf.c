/* Unit tests for src/common/buf.c: appends, the maximum, sticky errors, take/reset/cleanup. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "common/buf.h"

static void buf_appends_and_takes_text(void **state)
{
    (void)state;
    struct skpx_buf b;
    skpx_buf_init(&b, 1 << 20);
    skpx_buf_puts(&b, "abc");
    skpx_buf_putc(&b, '-');
    skpx_buf_printf(&b, "%d/%s", 42, "x");
    skpx_buf_put(&b, "", 0);
    assert_int_equal(b.err, SKP_OK);
    assert_int_equal(b.len, 8);
    assert_string_equal((char *)b.data, "abc-42/x");
    uint8_t *out;
    size_t n;
    assert_int_equal(skpx_buf_take(&b, &out, &n), SKP_OK);
    assert_int_equal(n, 8);
    assert_string_equal((char *)out, "abc-42/x");
    skpx_free(out);
    /* emptied, still usable */
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    skpx_buf_puts(&b, "again");
    assert_string_equal((char *)b.data, "again");
    skpx_buf_cleanup(&b);
}

static void buf_grows_past_first_capacity_with_long_printf(void **state)
{
    (void)state;
    struct skpx_buf b;
    skpx_buf_init(&b, 1 << 20);
    char big[5000];
    memset(big, 'q', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    skpx_buf_puts(&b, "<");
    skpx_buf_printf(&b, "%s>", big);
    assert_int_equal(b.err, SKP_OK);
    assert_int_equal(b.len, 5001);
    assert_int_equal(b.data[0], '<');
    assert_int_equal(b.data[5000], '>');
    assert_int_equal(b.data[5001], '\0');
    skpx_buf_reset(&b);
    assert_int_equal(b.len, 0);
    assert_string_equal((char *)b.data, "");
    skpx_buf_cleanup(&b);
}

static void buf_refuses_past_max_and_error_is_sticky(void **state)
{
    (void)state;
    struct skpx_buf b;
    skpx_buf_init(&b, 10);
    skpx_buf_puts(&b, "0123456789"); /* exactly max */
    assert_int_equal(b.err, SKP_OK);
    skpx_buf_putc(&b, 'x');
    assert_int_equal(b.err, SKP_ETOOBIG);
    assert_int_equal(b.len, 10);
    skpx_buf_reset(&b);
    skpx_buf_puts(&b, "a"); /* sticky: still refused */
    assert_int_equal(b.len, 0);
    uint8_t *out = (uint8_t *)"sentinel";
    size_t n = 99;
    assert_int_equal(skpx_buf_take(&b, &out, &n), SKP_ETOOBIG);
    assert_null(out);
    assert_int_equal(n, 0);
    /* printf past max */
    skpx_buf_init(&b, 4);
    skpx_buf_printf(&b, "%s", "abc");
    assert_int_equal(b.err, SKP_OK);
    skpx_buf_printf(&b, "%s", "de");
    assert_int_equal(b.err, SKP_ETOOBIG);
    assert_string_equal((char *)b.data, "abc");
    skpx_buf_cleanup(&b);
    skpx_buf_cleanup(NULL);
}

static void buf_empty_take_and_oom(void **state)
{
    (void)state;
    struct skpx_buf b;
    skpx_buf_init(&b, 100);
    uint8_t *out;
    size_t n;
    assert_int_equal(skpx_buf_take(&b, &out, &n), SKP_OK);
    assert_non_null(out);
    assert_int_equal(n, 0);
    assert_string_equal((char *)out, "");
    skpx_free(out);
    int64_t before = skpx_alloc_live_bytes();
    skpx_alloc_fail_after(0);
    skpx_buf_puts(&b, "abc");
    skpx_alloc_fail_after(-1);
    assert_int_equal(b.err, SKP_ENOMEM);
    skpx_buf_cleanup(&b);
    assert_int_equal(b.err, SKP_OK);
    assert_int_equal(skpx_alloc_live_bytes(), before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(buf_appends_and_takes_text),
        cmocka_unit_test(buf_grows_past_first_capacity_with_long_printf),
        cmocka_unit_test(buf_refuses_past_max_and_error_is_sticky),
        cmocka_unit_test(buf_empty_take_and_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
