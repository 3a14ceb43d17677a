/* Unit tests for src/server/http/http_guard.c: which Host headers are served (DNS rebinding), which
 * Origins may mutate (CSRF), the Content-Type rule, and --allowed-origins parsing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "server/http/http_guard.h"

static struct http_guard g;

static void hosts(void **state)
{
    (void)state;
    char why[256];
    assert_int_equal(http_guard_init(&g, "0.0.0.0:12800", NULL, why, sizeof(why)), SKP_OK);
    assert_true(http_guard_host_ok(&g, NULL));
    assert_true(http_guard_host_ok(&g, "127.0.0.1:12800"));
    assert_true(http_guard_host_ok(&g, "10.1.2.3"));
    assert_true(http_guard_host_ok(&g, "[::1]:12800"));
    assert_true(http_guard_host_ok(&g, "localhost:12800"));
    assert_true(http_guard_host_ok(&g, "devbox"));
    assert_true(http_guard_host_ok(&g, "ui.LOCALHOST:1"));
    assert_false(http_guard_host_ok(&g, "evil.example:12800"));
    assert_false(http_guard_host_ok(&g, "127.0.0.1.evil.example"));
    assert_false(http_guard_host_ok(&g, ""));
    assert_false(http_guard_host_ok(&g, "[::1"));
    assert_false(http_guard_host_ok(&g, "a b"));
    /* the name --http-addr was given is served */
    assert_int_equal(http_guard_init(&g, "prof.corp.example:80", NULL, why, sizeof(why)), SKP_OK);
    assert_true(http_guard_host_ok(&g, "prof.corp.example"));
    assert_true(http_guard_host_ok(&g, "PROF.corp.example:80"));
    assert_false(http_guard_host_ok(&g, "corp.example"));
}

static void allowed_origins(void **state)
{
    (void)state;
    char why[256];
    assert_int_equal(http_guard_init(&g, "127.0.0.1:0",
                                     " http://skyprof.example.com:8080 ,https://ops.example.org/",
                                     why, sizeof(why)),
                     SKP_OK);
    assert_int_equal(g.n_origins, 2);
    assert_true(http_guard_host_ok(&g, "skyprof.example.com:8080"));
    assert_true(http_guard_host_ok(&g, "ops.example.org"));
    assert_false(http_guard_host_ok(&g, "example.org"));
    assert_true(http_guard_origin_ok(&g, "https://ops.example.org", "127.0.0.1:1"));
    assert_true(http_guard_origin_ok(&g, "http://skyprof.example.com:8080", "x"));
    assert_false(http_guard_origin_ok(&g, "http://skyprof.example.com", "x"));
    const char *bad[] = {"evil.example", "ftp://x", "http://", "http://a/b", "http://a b"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why[0] = 0;
        assert_int_equal(http_guard_init(&g, NULL, bad[i], why, sizeof(why)), SKP_EINVAL);
        assert_non_null(strstr(why, "--allowed-origins"));
    }
    assert_int_equal(http_guard_init(&g, NULL, "", why, sizeof(why)), SKP_OK);
    assert_int_equal(http_guard_init(&g, NULL, " , ,", why, sizeof(why)), SKP_OK);
    assert_int_equal(g.n_origins, 0);
}

static void origins_and_content_types(void **state)
{
    (void)state;
    char why[256];
    assert_int_equal(http_guard_init(&g, "127.0.0.1:12800", NULL, why, sizeof(why)), SKP_OK);
    assert_true(http_guard_origin_ok(&g, NULL, "127.0.0.1:12800"));
    assert_true(http_guard_origin_ok(&g, "http://127.0.0.1:12800", "127.0.0.1:12800"));
    assert_false(http_guard_origin_ok(&g, "http://evil.example", "127.0.0.1:12800"));
    assert_false(http_guard_origin_ok(&g, "null", "127.0.0.1:12800"));
    assert_false(http_guard_origin_ok(&g, "http://127.0.0.1:12801", "127.0.0.1:12800"));
    assert_false(http_guard_origin_ok(&g, "http://127.0.0.1:12800", NULL));
    assert_true(http_guard_is_json("application/json"));
    assert_true(http_guard_is_json("Application/JSON; charset=utf-8"));
    assert_true(http_guard_is_json(" application/json ;charset=utf-8"));
    assert_false(http_guard_is_json(NULL));
    assert_false(http_guard_is_json("text/plain"));
    assert_false(http_guard_is_json("application/jsonx"));
    assert_false(http_guard_is_json("application/x-www-form-urlencoded"));
    assert_false(http_guard_is_json("multipart/form-data; boundary=x"));
}

/* Issue 25 #11: PUT and DELETE skipped the checks POST had. One verdict for every method. */
static void one_guard_for_every_mutation(void **state)
{
    (void)state;
    char why[256];
    const char *h = "127.0.0.1:12800";
    assert_int_equal(http_guard_init(&g, h, NULL, why, sizeof(why)), SKP_OK);
    /* A JSON body from the same origin or from no browser: allowed. */
    assert_int_equal(http_guard_mutation(&g, "application/json", 10, NULL, h), 0);
    assert_int_equal(http_guard_mutation(&g, "application/json", 10,
                                         "http://"
                                         "127.0.0.1:12800",
                                         h),
                     0);
    /* A body that is not JSON (a form, text/plain), or none declared: 415. */
    assert_int_equal(http_guard_mutation(&g, "text/plain", 10, NULL, h), 415);
    assert_int_equal(http_guard_mutation(&g, NULL, 10, NULL, h), 415);
    assert_int_equal(http_guard_mutation(&g, "application/x-www-form-urlencoded", 0, NULL, h), 415);
    /* No body and no Content-Type (a DELETE): only the Origin decides. */
    assert_int_equal(http_guard_mutation(&g, NULL, 0, NULL, h), 0);
    assert_int_equal(http_guard_mutation(&g, NULL, 0, "http://evil.example", h), 403);
    assert_int_equal(http_guard_mutation(&g, "application/json", 2, "http://evil.example", h), 403);
    assert_int_equal(http_guard_mutation(&g, NULL, 0, "null", h), 403);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hosts),
        cmocka_unit_test(allowed_origins),
        cmocka_unit_test(origins_and_content_types),
        cmocka_unit_test(one_guard_for_every_mutation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
