/* Unit tests for store_target_shown (src/server/store/store.c), the form of --db that log lines
 * show: a PostgreSQL password given in any URL form stays out of it (issue 25 #6: `?password=`
 * was logged in clear at every start and in connect errors). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "server/store/store.h"

static void shown_is(const char *url, const char *want)
{
    char out[256];
    store_target_shown(url, out, sizeof(out));
    if (strcmp(out, want) != 0)
        fail_msg("%s -> %s, want %s", url, out, want);
}

static void passwords_masked_in_every_form(void **state)
{
    (void)state;
    shown_is("postgresql://u:s3cret@db/x", "postgresql://u:***@db/x");
    shown_is("postgresql://u@db/x?password=s3cret", "postgresql://u@db/x?password=***");
    shown_is("postgres://db/x?sslmode=require&password=s3cret&application_name=a",
             "postgres://db/x?sslmode=require&password=***&application_name=a");
    shown_is("postgresql://db/x?sslpassword=keypw&sslkey=/k.pem",
             "postgresql://db/x?sslpassword=***&sslkey=/k.pem");
    shown_is("postgresql://db/x?PASSWORD=a&pass%77ord=b&%70assword=c",
             "postgresql://db/x?PASSWORD=***&pass%77ord=***&%70assword=***");
    shown_is("postgresql://u:pw@db/x?password=other", "postgresql://u:***@db/x?password=***");
    shown_is("postgresql://db/x?password=", "postgresql://db/x?password=***");
    /* passfile names a file: its path is shown, its content is never read by us. */
    shown_is("postgresql://db/x?passfile=/etc/pgpass", "postgresql://db/x?passfile=/etc/pgpass");
    shown_is("/var/lib/skyprof/db?password=x", "/var/lib/skyprof/db?password=x"); /* a file */
}

static void small_buffer_never_leaks(void **state)
{
    (void)state;
    const char *url = "postgresql://db/x?password=abcdefghijklmnop";
    for (size_t cap = 1; cap < 48; cap++) {
        char out[64];
        memset(out, 'Z', sizeof(out));
        store_target_shown(url, out, cap);
        assert_true(strlen(out) < cap);
        assert_null(strstr(out, "abc"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(passwords_masked_in_every_form),
        cmocka_unit_test(small_buffer_never_leaks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
