/* Unit tests of config.c: defaults, flags (both spellings), SKYPROF_* variables, precedence
 * (flags over environment over defaults) and refusal of bad values with a clear message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/log.h"
#include "server/config.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])))

static void test_defaults(void **state)
{
    (void)state;
    char *argv[] = {"skyprofd"};
    char err[CONFIG_ERR_MAX];
    struct config c;
    assert_int_equal(config_parse(&c, ARGC(argv), argv, NULL, err), SKP_OK);
    assert_string_equal(c.grpc_addr, "127.0.0.1:11800");
    assert_string_equal(c.http_addr, "127.0.0.1:12800");
    assert_string_equal(c.db_path, "./skyprof-data/skyprof.db");
    assert_null(c.auth_token);
    assert_null(c.api_token);
    assert_null(c.web_root);
    assert_int_equal(c.retention_days, 3);
    assert_int_equal(c.log_level, SKPX_LOG_INFO);
    assert_int_equal(c.max_analyze_snapshots, 0);
    assert_false(c.show_help);
    config_cleanup(&c);
}

static void test_flags(void **state)
{
    (void)state;
    char *argv[] = {"skyprofd",
                    "--grpc-addr",
                    "0.0.0.0:0",
                    "--http-addr=127.0.0.1:9",
                    "--db",
                    "/tmp/x/y.db",
                    "--auth-token",
                    "sekret",
                    "--api-token=api",
                    "--retention-days",
                    "0",
                    "--log-level",
                    "debug",
                    "--web-root=/srv/ui",
                    "--max-analyze-snapshots",
                    "12000",
                    "--help",
                    "-V"};
    char err[CONFIG_ERR_MAX];
    struct config c;
    assert_int_equal(config_parse(&c, ARGC(argv), argv, NULL, err), SKP_OK);
    assert_string_equal(c.grpc_addr, "0.0.0.0:0");
    assert_string_equal(c.http_addr, "127.0.0.1:9");
    assert_string_equal(c.db_path, "/tmp/x/y.db");
    assert_string_equal(c.auth_token, "sekret");
    assert_string_equal(c.api_token, "api");
    assert_int_equal(c.retention_days, 0);
    assert_int_equal(c.log_level, SKPX_LOG_DEBUG);
    assert_string_equal(c.web_root, "/srv/ui");
    assert_int_equal(c.max_analyze_snapshots, 12000);
    assert_true(c.show_help);
    assert_true(c.show_version);
    config_cleanup(&c);
}

static void test_env_and_precedence(void **state)
{
    (void)state;
    char *env[] = {"PATH=/bin",
                   "SKYPROF_GRPC_ADDR=127.0.0.1:1",
                   "SKYPROF_HTTP_ADDR=127.0.0.1:2",
                   "SKYPROF_DB=/env.db",
                   "SKYPROF_AUTH_TOKEN=envtok",
                   "SKYPROF_API_TOKEN=envapi",
                   "SKYPROF_RETENTION_DAYS=7",
                   "SKYPROF_LOG_LEVEL=warn",
                   "SKYPROF_WEB_ROOT=/env/ui",
                   "SKYPROF_DBX=ignored",
                   NULL};
    char err[CONFIG_ERR_MAX];
    struct config c;
    char *argv0[] = {"skyprofd"};
    assert_int_equal(config_parse(&c, 1, argv0, env, err), SKP_OK);
    assert_string_equal(c.grpc_addr, "127.0.0.1:1");
    assert_string_equal(c.http_addr, "127.0.0.1:2");
    assert_string_equal(c.db_path, "/env.db");
    assert_string_equal(c.auth_token, "envtok");
    assert_string_equal(c.api_token, "envapi");
    assert_int_equal(c.retention_days, 7);
    assert_int_equal(c.log_level, SKPX_LOG_WARN);
    assert_string_equal(c.web_root, "/env/ui");
    config_cleanup(&c);

    /* Flags win over the environment; an empty token flag switches the env token off. */
    char *argv[] = {"skyprofd", "--db", "/flag.db", "--retention-days=1", "--auth-token="};
    assert_int_equal(config_parse(&c, ARGC(argv), argv, env, err), SKP_OK);
    assert_string_equal(c.db_path, "/flag.db");
    assert_int_equal(c.retention_days, 1);
    assert_null(c.auth_token);
    assert_string_equal(c.grpc_addr, "127.0.0.1:1"); /* untouched by flags: env value */
    config_cleanup(&c);
}

struct bad {
    const char *a1;
    const char *a2;
    const char *env;
    const char *expect; /* substring of the error */
};

static const struct bad bads[] = {
    {"--bogus", NULL, NULL, "unknown option '--bogus'"},
    {"--db", NULL, NULL, "--db needs a value"},
    {"--db=", NULL, NULL, "--db: empty path"},
    {"--retention-days", "-1", NULL, "--retention-days: '-1'"},
    {"--retention-days", "3x", NULL, "--retention-days: '3x'"},
    {"--retention-days", "36501", NULL, "--retention-days"},
    {"--retention-days", "", NULL, "--retention-days"},
    {"--log-level", "loud", NULL, "unknown log level 'loud'"},
    {"--grpc-addr", "localhost", NULL, "--grpc-addr: invalid address"},
    {"--grpc-addr", "127.0.0.1:65536", NULL, "--grpc-addr: invalid address"},
    {"--http-addr", "127.0.0.1:", NULL, "--http-addr: invalid address"},
    {"--http-addr", "::1:80", NULL, "--http-addr: invalid address"},
    {"--max-analyze-snapshots", "-5", NULL, "--max-analyze-snapshots"},
    {"--max-analyze-snapshots", "99999999999999999999", NULL, "--max-analyze-snapshots"},
    {NULL, NULL, "SKYPROF_RETENTION_DAYS=abc", "SKYPROF_RETENTION_DAYS: 'abc'"},
    {NULL, NULL, "SKYPROF_LOG_LEVEL=verbose", "SKYPROF_LOG_LEVEL"},
    {NULL, NULL, "SKYPROF_GRPC_ADDR=nope", "SKYPROF_GRPC_ADDR: invalid address"},
};

static void test_bad_values(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
        char *argv[3] = {"skyprofd", (char *)bads[i].a1, (char *)bads[i].a2};
        int argc = bads[i].a2 ? 3 : bads[i].a1 ? 2 : 1;
        char *env[2] = {(char *)bads[i].env, NULL};
        char err[CONFIG_ERR_MAX];
        struct config c;
        print_message("case %zu: %s\n", i, bads[i].expect);
        assert_int_equal(config_parse(&c, argc, argv, env, err), SKP_EINVAL);
        assert_non_null(strstr(err, bads[i].expect));
        assert_null(c.db_path); /* cleaned up on failure */
    }
}

static void test_addr_valid(void **state)
{
    (void)state;
    assert_true(config_addr_valid("127.0.0.1:0"));
    assert_true(config_addr_valid("0.0.0.0:65535"));
    assert_true(config_addr_valid("localhost:80"));
    assert_true(config_addr_valid("[::1]:80"));
    assert_true(config_addr_valid(":80"));
    assert_false(config_addr_valid("127.0.0.1"));
    assert_false(config_addr_valid("127.0.0.1:x"));
    assert_false(config_addr_valid("127.0.0.1:-1"));
    assert_false(config_addr_valid(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),           cmocka_unit_test(test_flags),
        cmocka_unit_test(test_env_and_precedence), cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_addr_valid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
