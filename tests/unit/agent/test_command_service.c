/* test_command_service.c - the serial-number LRU and the command service (duplicate, unknown and
 * malformed commands) dispatching to the task service. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/command_dispatch.h"
#include "agent/command_service.h"
#include "agent/task_service.h"
#include "common/alloc.h"
#include "fakes.h"

/* --- serial LRU ------------------------------------------------------------------------------ */
static void test_serial_lru_evicts_oldest(void **state)
{
    (void)state;
    struct skp__serial_lru l;
    skp__serial_lru_init(&l);
    char s[32];
    for (int i = 0; i < SKP_SERIAL_LRU; i++) {
        snprintf(s, sizeof(s), "s%d", i);
        skp__serial_lru_add(&l, s);
    }
    assert_true(skp__serial_lru_contains(&l, "s0"));
    assert_true(skp__serial_lru_contains(&l, "s63"));
    skp__serial_lru_add(&l, "s64"); /* evicts s0 */
    assert_false(skp__serial_lru_contains(&l, "s0"));
    assert_true(skp__serial_lru_contains(&l, "s1"));
    assert_true(skp__serial_lru_contains(&l, "s64"));
    skp__serial_lru_add(&l, "s65"); /* evicts s1 */
    assert_false(skp__serial_lru_contains(&l, "s1"));
    assert_true(skp__serial_lru_contains(&l, "s2"));
}

/* --- commands -------------------------------------------------------------------------------- */
struct cmd_env {
    struct skp__task_service ts;
    struct skp__command_dispatch d;
    struct skp__command_service cs;
};

static void cmd_env_init(struct cmd_env *e)
{
    skp__task_service_init(&e->ts, 10);
    skp__command_dispatch_init(&e->d);
    assert_int_equal(skp__command_dispatch_register(&e->d, SKP_PROFILE_TASK_COMMAND,
                                                    skp__profile_command_exec, &e->ts),
                     SKP_OK);
    skp__command_service_init(&e->cs, &e->d);
}

static void receive(struct cmd_env *e, Skywalking__V3__Command *c)
{
    Skywalking__V3__Commands cmds = SKYWALKING__V3__COMMANDS__INIT;
    cmds.n_commands = 1;
    cmds.commands = &c;
    skp__command_service_receive(&e->cs, &cmds);
}

static void test_command_dedup_unknown_malformed(void **state)
{
    (void)state;
    struct cmd_env e;
    cmd_env_init(&e);
    Skywalking__V3__Command *c =
        make_task_command("sn-1", "t1", "/ep", "5", "0", "10", "5", "100000", "5000");
    receive(&e, c);
    assert_int_equal(e.ts.n_tasks, 1);
    assert_int_equal(e.ts.last_command_time, 5000);
    receive(&e, c); /* same serial: skipped */
    assert_int_equal(e.cs.n_duplicate, 1);
    assert_int_equal(e.ts.n_tasks, 1);
    free_command(c);

    /* unknown command name: ignored, service continues */
    Skywalking__V3__Command *u =
        make_task_command("sn-2", NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    free(u->command);
    u->command = strdup("EBPFProfilingTaskQuery");
    receive(&e, u);
    assert_int_equal(e.cs.n_ignored, 1);
    free_command(u);

    /* malformed (non-numeric Duration / missing DumpPeriod): rejected, cursor still moves */
    Skywalking__V3__Command *m1 =
        make_task_command("sn-3", "t2", "/ep", "five", "0", "10", "5", "900000", "6000");
    receive(&e, m1);
    assert_int_equal(e.ts.n_tasks, 1);
    assert_int_equal(e.ts.last_command_time, 6000);
    assert_non_null(strstr(e.ts.last_reject_reason, "Duration"));
    Skywalking__V3__Command *m2 =
        make_task_command("sn-4", "t3", "/ep", "5", "0", NULL, "5", "900000", "7000");
    receive(&e, m2);
    assert_int_equal(e.ts.last_command_time, 7000);
    /* missing serial number: ignored */
    Skywalking__V3__Command *m3 =
        make_task_command(NULL, "t4", "/ep", "5", "0", "10", "5", "2000000", "8000");
    receive(&e, m3);
    assert_int_equal(e.ts.n_tasks, 1);
    /* and a good command after all that still works */
    Skywalking__V3__Command *ok =
        make_task_command("sn-5", "t5", "/ep", "1", "0", "10", "1", "5000000", "9000");
    receive(&e, ok);
    assert_int_equal(e.ts.n_tasks, 2);
    assert_int_equal(e.ts.last_command_time, 9000);
    assert_int_equal(e.cs.n_executed, 2);
    free_command(m1);
    free_command(m2);
    free_command(m3);
    free_command(ok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_serial_lru_evicts_oldest),
        cmocka_unit_test(test_command_dedup_unknown_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
