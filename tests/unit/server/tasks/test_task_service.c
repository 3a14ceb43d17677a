/* Unit tests of task_service.c's pure parts: OAP's validation table (every rule, its text and
 * field, the order, the boundaries), the overlap rule, task ids, status, and the
 * ProfileTaskQuery command (nine args as decimal strings, a new serial every time). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "server/tasks/task_service.h"

static struct task_request good(void)
{
    struct task_request r = {
        .service = "svc",
        .endpoint = "/orders",
        .start_time = 0,
        .duration_min = 5,
        .min_duration_threshold = 0,
        .dump_period = 10,
        .max_sampling_count = 5,
    };
    return r;
}

struct vcase {
    const char *name;
    void (*mutate)(struct task_request *r);
    const char *reason; /* NULL = valid */
    const char *field;
};

static void m_none(struct task_request *r)
{
    (void)r;
}
static void m_service_null(struct task_request *r)
{
    r->service = NULL;
}
static void m_service_empty(struct task_request *r)
{
    r->service = "";
}
static void m_endpoint_null(struct task_request *r)
{
    r->endpoint = NULL;
}
static void m_endpoint_empty(struct task_request *r)
{
    r->endpoint = "";
}
static void m_endpoint_blank(struct task_request *r)
{
    r->endpoint = "  \t ";
}
static void m_dur0(struct task_request *r)
{
    r->duration_min = 0;
}
static void m_dur1(struct task_request *r)
{
    r->duration_min = 1;
}
static void m_dur15(struct task_request *r)
{
    r->duration_min = 15;
}
static void m_dur16(struct task_request *r)
{
    r->duration_min = 16;
}
static void m_thr_neg(struct task_request *r)
{
    r->min_duration_threshold = -1;
}
static void m_thr0(struct task_request *r)
{
    r->min_duration_threshold = 0;
}
static void m_cnt0(struct task_request *r)
{
    r->max_sampling_count = 0;
}
static void m_cnt1(struct task_request *r)
{
    r->max_sampling_count = 1;
}
static void m_cnt9(struct task_request *r)
{
    r->max_sampling_count = 9;
}
static void m_cnt10(struct task_request *r)
{
    r->max_sampling_count = 10;
}
static void m_dump9(struct task_request *r)
{
    r->dump_period = 9;
}
static void m_dump10(struct task_request *r)
{
    r->dump_period = 10;
}
/* Order: several violations at once report OAP's first one. */
static void m_all_bad(struct task_request *r)
{
    r->service = NULL;
    r->endpoint = "";
    r->duration_min = 0;
}
static void m_endpoint_and_dur(struct task_request *r)
{
    r->endpoint = "";
    r->duration_min = 99;
}
static void m_dur_and_thr(struct task_request *r)
{
    r->duration_min = 0;
    r->min_duration_threshold = -5;
}
static void m_thr_and_cnt(struct task_request *r)
{
    r->min_duration_threshold = -5;
    r->max_sampling_count = 0;
}
static void m_cnt0_and_dur16(struct task_request *r)
{
    r->max_sampling_count = 0;
    r->duration_min = 16;
}
static void m_dur16_and_dump(struct task_request *r)
{
    r->duration_min = 16;
    r->dump_period = 1;
}
static void m_dump_and_cnt10(struct task_request *r)
{
    r->dump_period = 1;
    r->max_sampling_count = 10;
}
static void m_thr_huge(struct task_request *r)
{
    r->min_duration_threshold = (int64_t)INT32_MAX + 1;
}
static void m_start_huge(struct task_request *r)
{
    r->start_time = TASK_START_MAX_MS + 1;
}
static void m_endpoint_long(struct task_request *r)
{
    static char buf[TASK_ENDPOINT_MAX + 2];
    memset(buf, 'e', sizeof(buf) - 1);
    r->endpoint = buf;
}

static const struct vcase cases[] = {
    {"valid", m_none, NULL, NULL},
    {"service null", m_service_null, "service cannot be null", "service"},
    {"service empty", m_service_empty, "service cannot be null", "service"},
    {"endpoint null", m_endpoint_null, "endpoint name cannot be empty", "endpointName"},
    {"endpoint empty", m_endpoint_empty, "endpoint name cannot be empty", "endpointName"},
    {"endpoint blank", m_endpoint_blank, "endpoint name cannot be empty", "endpointName"},
    {"duration 0", m_dur0, "monitor duration must greater than 1 minutes", "duration"},
    {"duration 1", m_dur1, NULL, NULL},
    {"duration 15", m_dur15, NULL, NULL},
    {"duration 16", m_dur16,
     "The duration of the monitoring task cannot be greater than 15 minutes", "duration"},
    {"threshold -1", m_thr_neg, "min duration threshold must greater than or equals zero",
     "minDurationThreshold"},
    {"threshold 0", m_thr0, NULL, NULL},
    {"count 0", m_cnt0, "max sampling count must greater than zero", "maxSamplingCount"},
    {"count 1", m_cnt1, NULL, NULL},
    {"count 9", m_cnt9, NULL, NULL},
    {"count 10", m_cnt10, "max sampling count must less than 10", "maxSamplingCount"},
    {"dump 9", m_dump9, "dump period must be greater than or equals 10 milliseconds", "dumpPeriod"},
    {"dump 10", m_dump10, NULL, NULL},
    {"order: service first", m_all_bad, "service cannot be null", "service"},
    {"order: endpoint before duration", m_endpoint_and_dur, "endpoint name cannot be empty",
     "endpointName"},
    {"order: duration<1 before threshold", m_dur_and_thr,
     "monitor duration must greater than 1 minutes", "duration"},
    {"order: threshold before count", m_thr_and_cnt,
     "min duration threshold must greater than or equals zero", "minDurationThreshold"},
    {"order: count<=0 before duration>15", m_cnt0_and_dur16,
     "max sampling count must greater than zero", "maxSamplingCount"},
    {"order: duration>15 before dump", m_dur16_and_dump,
     "The duration of the monitoring task cannot be greater than 15 minutes", "duration"},
    {"order: dump before count>=10", m_dump_and_cnt10,
     "dump period must be greater than or equals 10 milliseconds", "dumpPeriod"},
    {"threshold beyond int32", m_thr_huge, "value out of range", "minDurationThreshold"},
    {"start beyond year 9999", m_start_huge, "value out of range", "startTime"},
    {"endpoint too long", m_endpoint_long, "endpoint name cannot be longer than 512 bytes",
     "endpointName"},
};

static void test_validation_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct task_request r = good();
        cases[i].mutate(&r);
        struct task_error e = {0};
        bool ok = task_validate(&r, &e);
        print_message("case: %s\n", cases[i].name);
        if (!cases[i].reason) {
            assert_true(ok);
            continue;
        }
        assert_false(ok);
        assert_string_equal(e.reason, cases[i].reason);
        assert_string_equal(e.field, cases[i].field);
    }
}

static void test_overlap(void **state)
{
    (void)state;
    struct store_task t = {.start_time = 1000000, .duration_min = 5};
    int64_t end = 1000000 + 5 * 60000;
    assert_true(task_overlaps(&t, 1000000));  /* same start */
    assert_true(task_overlaps(&t, end - 1));  /* inside */
    assert_true(task_overlaps(&t, end));      /* OAP's >=: touching counts as overlap */
    assert_false(task_overlaps(&t, end + 1)); /* right after */
    assert_true(task_overlaps(&t, 0));        /* a new task before an existing one */
}

static void test_make_id(void **state)
{
    (void)state;
    char id[TASK_ID_MAX];
    assert_true(task_make_id(1611226821644, "stage-account", id, sizeof(id)));
    assert_string_equal(id, "1611226821644_c3RhZ2UtYWNjb3VudA==.1"); /* spec §3.1 example */
    assert_true(task_make_id(1, "ab", id, sizeof(id)));
    assert_string_equal(id, "1_YWI=.1");
    assert_true(task_make_id(1, "abc", id, sizeof(id)));
    assert_string_equal(id, "1_YWJj.1");
    assert_false(task_make_id(1, "abc", id, 8));
}

static void test_status(void **state)
{
    (void)state;
    assert_string_equal(task_status(1000, 1, 999), "pending");
    assert_string_equal(task_status(1000, 1, 1000), "running");
    assert_string_equal(task_status(1000, 1, 60999), "running");
    assert_string_equal(task_status(1000, 1, 61000), "finished");
}

static const char *arg(const Skywalking__V3__Command *c, const char *key)
{
    for (size_t i = 0; i < c->n_args; i++)
        if (strcmp(c->args[i]->key, key) == 0)
            return c->args[i]->value;
    return NULL;
}

static bool is_uuid(const char *s)
{
    if (strlen(s) != 36)
        return false;
    for (int i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-')
                return false;
        } else if (!strchr("0123456789abcdef", s[i])) {
            return false;
        }
    }
    return s[14] == '4';
}

static void test_command(void **state)
{
    (void)state;
    struct store_task t = {
        .id = (char *)"1611226821644_c3RhZ2UtYWNjb3VudA==.1",
        .service = (char *)"stage-account",
        .endpoint = (char *)"/orders/{id}",
        .start_time = 1611226821000,
        .duration_min = 15,
        .min_duration_threshold = 0,
        .dump_period = 10,
        .max_sampling_count = 9,
        .create_time = 1611226821644,
    };
    struct task_command a, b;
    task_command_build(&a, &t);
    task_command_build(&b, &t);
    assert_string_equal(a.cmd.command, "ProfileTaskQuery");
    assert_int_equal(a.cmd.n_args, 9);
    assert_string_equal(a.cmd.args[0]->key, "SerialNumber"); /* first, as OAP */
    assert_string_equal(arg(&a.cmd, "TaskId"), t.id);
    assert_string_equal(arg(&a.cmd, "EndpointName"), "/orders/{id}");
    assert_string_equal(arg(&a.cmd, "Duration"), "15");
    assert_string_equal(arg(&a.cmd, "MinDurationThreshold"), "0");
    assert_string_equal(arg(&a.cmd, "DumpPeriod"), "10");
    assert_string_equal(arg(&a.cmd, "MaxSamplingCount"), "9");
    assert_string_equal(arg(&a.cmd, "StartTime"), "1611226821000");
    assert_string_equal(arg(&a.cmd, "CreateTime"), "1611226821644");
    assert_true(is_uuid(arg(&a.cmd, "SerialNumber")));
    assert_true(is_uuid(arg(&b.cmd, "SerialNumber")));
    assert_string_not_equal(arg(&a.cmd, "SerialNumber"), arg(&b.cmd, "SerialNumber"));
    /* The command packs as a valid Commands message and round-trips. */
    Skywalking__V3__Command *cp[1] = {&a.cmd};
    Skywalking__V3__Commands cmds = SKYWALKING__V3__COMMANDS__INIT;
    cmds.n_commands = 1;
    cmds.commands = cp;
    uint8_t buf[2048];
    size_t n = skywalking__v3__commands__pack(&cmds, buf);
    Skywalking__V3__Commands *back = skywalking__v3__commands__unpack(NULL, n, buf);
    assert_non_null(back);
    assert_int_equal(back->n_commands, 1);
    assert_int_equal(back->commands[0]->n_args, 9);
    assert_string_equal(arg(back->commands[0], "DumpPeriod"), "10");
    skywalking__v3__commands__free_unpacked(back, NULL);
}

static void test_uuid_unique(void **state)
{
    (void)state;
    char prev[37] = "";
    for (int i = 0; i < 1000; i++) {
        char u[37];
        task_uuid(u);
        assert_true(is_uuid(u));
        assert_string_not_equal(u, prev);
        memcpy(prev, u, sizeof(u));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validation_table), cmocka_unit_test(test_overlap),
        cmocka_unit_test(test_make_id),          cmocka_unit_test(test_status),
        cmocka_unit_test(test_command),          cmocka_unit_test(test_uuid_unique),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
