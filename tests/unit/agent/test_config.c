/* test_config.c - configuration defaults and SW_AGENT_* / SKYPROF_* environment. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/config.h"
#include "agent/transport.h"
#include "common/alloc.h"
#include "fakes.h"

/* --- config ---------------------------------------------------------------------------------- */
static void test_config_defaults_env(void **state)
{
    (void)state;
    struct skyprof_config c;
    skyprof_config_init_defaults(&c);
    assert_string_equal(c.backend, "127.0.0.1:11800");
    assert_int_equal(c.poll_interval_ms, 20000);
    assert_int_equal(c.heartbeat_period_ms, 30000);
    assert_int_equal(c.max_parallel, 5);
    assert_int_equal(c.max_stack_depth, 500);
    assert_int_equal(c.snapshot_buffer_size, 4500);
    assert_int_equal(c.max_profiling_ms, 600000);
    assert_true(c.profile_active);
    assert_string_equal(c.instance, "");
    assert_int_equal(skyprof_config_validate(&c), SKP_OK);

    setenv("SW_AGENT_NAME", "orders", 1);
    setenv("SW_AGENT_INSTANCE_NAME", "i-1", 1);
    setenv("SW_AGENT_COLLECTOR_BACKEND_SERVICES", "oap:11800,oap2:11800", 1);
    setenv("SW_AGENT_AUTHENTICATION", "tok", 1);
    setenv("SW_AGENT_PROFILE_ACTIVE", "False", 1);
    setenv("SW_AGENT_PROFILE_MAX_PARALLEL", "3", 1);
    setenv("SW_AGENT_PROFILE_DUMP_MAX_STACK_DEPTH", "64", 1);
    setenv("SW_AGENT_PROFILE_SNAPSHOT_TRANSPORT_BUFFER_SIZE", "100", 1);
    setenv("SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL", "5", 1);
    setenv("SW_AGENT_COLLECTOR_HEARTBEAT_PERIOD", "7", 1);
    setenv("SKYPROF_MAX_PROFILING_MS", "1234", 1);
    setenv("SKYPROF_LOG_LEVEL", "debug", 1);
    assert_int_equal(skyprof_config_from_env(&c), SKP_OK);
    assert_string_equal(c.service, "orders");
    assert_string_equal(c.instance, "i-1");
    assert_string_equal(c.backend, "oap:11800,oap2:11800"); /* the whole list: fail-over */
    assert_string_equal(c.authentication, "tok");
    assert_false(c.profile_active);
    assert_int_equal(c.max_parallel, 3);
    assert_int_equal(c.max_stack_depth, 64);
    assert_int_equal(c.snapshot_buffer_size, 100);
    assert_int_equal(c.poll_interval_ms, 5000);
    assert_int_equal(c.heartbeat_period_ms, 7000);
    assert_int_equal(c.max_profiling_ms, 1234);
    assert_int_equal(c.log_level, SKYPROF_LOG_DEBUG);
    /* malformed values: error, field untouched, others still applied */
    setenv("SW_AGENT_PROFILE_MAX_PARALLEL", "lots", 1);
    setenv("SW_AGENT_NAME", "billing", 1);
    assert_int_equal(skyprof_config_from_env(&c), SKP_EINVAL);
    assert_int_equal(c.max_parallel, 3);
    assert_string_equal(c.service, "billing");
    const char *vars[] = {"SW_AGENT_NAME",
                          "SW_AGENT_INSTANCE_NAME",
                          "SW_AGENT_COLLECTOR_BACKEND_SERVICES",
                          "SW_AGENT_AUTHENTICATION",
                          "SW_AGENT_PROFILE_ACTIVE",
                          "SW_AGENT_PROFILE_MAX_PARALLEL",
                          "SW_AGENT_PROFILE_DUMP_MAX_STACK_DEPTH",
                          "SW_AGENT_PROFILE_SNAPSHOT_TRANSPORT_BUFFER_SIZE",
                          "SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL",
                          "SW_AGENT_COLLECTOR_HEARTBEAT_PERIOD",
                          "SKYPROF_MAX_PROFILING_MS",
                          "SKYPROF_LOG_LEVEL"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        unsetenv(vars[i]);
    /* validation */
    c.max_parallel = 0;
    assert_int_equal(skyprof_config_validate(&c), SKP_EINVAL);
    c.max_parallel = SKYPROF_MAX_PARALLEL_CAP + 1;
    assert_int_equal(skyprof_config_validate(&c), SKP_EINVAL);
    c.max_parallel = 5;
    snprintf(c.backend, sizeof(c.backend), "nohostport");
    assert_int_equal(skyprof_config_validate(&c), SKP_EINVAL);
    char inst[256];
    skp__config_gen_instance(inst, sizeof(inst));
    assert_non_null(strchr(inst, '@'));
    assert_int_equal(strchr(inst, '@') - inst, 32);
}

/* The collector list: what the transport fails over across (transport_grpc.c). */
static void test_config_collector_list(void **state)
{
    (void)state;
    char t[SKP_TRANSPORT_MAX_TARGETS][256];
    assert_int_equal(skp__transport_split_targets("a:1", t, SKP_TRANSPORT_MAX_TARGETS), 1);
    assert_string_equal(t[0], "a:1");
    assert_int_equal(skp__transport_split_targets(" a:1 , [::1]:2,c.example:11800", t,
                                                  SKP_TRANSPORT_MAX_TARGETS),
                     3);
    assert_string_equal(t[0], "a:1");
    assert_string_equal(t[1], "[::1]:2");
    assert_string_equal(t[2], "c.example:11800");
    static const char *const bad[] = {"",      ",",         "a:1,",
                                      ",a:1",  "a:1,,b:2",  "a",
                                      "a:1,b", "a:1, ,b:2", "1:1,2:2,3:3,4:4,5:5,6:6,7:7,8:8,9:9"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(skp__transport_split_targets(bad[i], t, SKP_TRANSPORT_MAX_TARGETS), -1);
    assert_int_equal(skp__transport_split_targets("1:1,2:2,3:3,4:4,5:5,6:6,7:7,8:8", t,
                                                  SKP_TRANSPORT_MAX_TARGETS),
                     8);

    struct skyprof_config c;
    skyprof_config_init_defaults(&c);
    setenv("SW_AGENT_COLLECTOR_BACKEND_SERVICES", "c1:11800, c2:11800", 1);
    assert_int_equal(skyprof_config_from_env(&c), SKP_OK);
    assert_string_equal(c.backend, "c1:11800, c2:11800");
    assert_int_equal(skyprof_config_validate(&c), SKP_OK);
    setenv("SW_AGENT_COLLECTOR_BACKEND_SERVICES", "c1:11800,c2", 1); /* refused, kept */
    assert_int_equal(skyprof_config_from_env(&c), SKP_EINVAL);
    assert_string_equal(c.backend, "c1:11800, c2:11800");
    unsetenv("SW_AGENT_COLLECTOR_BACKEND_SERVICES");
    snprintf(c.backend, sizeof(c.backend), "c1:11800,");
    assert_int_equal(skyprof_config_validate(&c), SKP_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_defaults_env),
        cmocka_unit_test(test_config_collector_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
