/* Unit tests for src/common/err.c: error names and errno mapping. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>

#include <cmocka.h>

#include "common/err.h"

static void errors_have_names(void **state)
{
    (void)state;
    assert_string_equal(skp_strerror(SKP_OK), "ok");
    assert_string_equal(skp_strerror((skp_err)999), "unknown error");
    assert_int_equal(skpx_err_from_errno(ECONNREFUSED), SKP_EUNAVAILABLE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(errors_have_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
