/* test_proc_task.c - process-profiling tasks (src/server/tasks/proc_task.c, store_sqlite_proc.c):
 * OAP's validation order and texts plus ours, creation with all-live instances, the overlap rule
 * per event, next-task selection (cursor, instance list, expired window), logs -> per-instance
 * progress, files (transactional with their log), retention through store_purge_before, and the
 * PprofTaskQuery command's args. Real SQLite in a temporary directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/log.h"
#include "server/tasks/proc_task.h"
#include "server/store/store_proc.h"
#include "../store/store_test_util.h"

#define T0 INT64_C(1796208570000)

static const char *const k_ab[] = {"inst-a", "inst-b"};

static struct proc_request req(const char *service, const char *const *events, size_t n_events,
                               int64_t duration, int64_t dump)
{
    struct proc_request r = {.service = service,
                             .events = events,
                             .n_events = n_events,
                             .duration = duration,
                             .dump_period = dump,
                             .instances = k_ab,
                             .n_instances = 2};
    return r;
}

static void validation_order(void **state)
{
    (void)state;
    static const char *const cpu[] = {"cpu"}, *const block[] = {"block"},
                             *const two[] = {"cpu", "heap"}, *const bad[] = {"itimer"},
                             *const heap[] = {"heap"};
    struct {
        struct proc_request r;
        const char *reason;
    } cases[] = {
        {req(NULL, NULL, 0, 0, 0), "service cannot be null"},
        {req("s", NULL, 0, 0, 0), "events cannot be empty"},
        {req("s", cpu, 1, 0, 0), "duration cannot be negative"},
        {req("s", cpu, 1, 16, 0), "duration cannot be greater than 15 minutes"},
        {req("s", block, 1, 1, 0), "dumpPeriod cannot be negative"},
        {req("s", two, 2, 1, 0), "a pprof task takes exactly one event"},
        {req("s", bad, 1, 1, 0), NULL}, /* "unknown event (...)" */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct proc_error e = {0};
        assert_false(proc_task_validate_pprof(&cases[i].r, &e));
        if (cases[i].reason)
            assert_string_equal(e.reason, cases[i].reason);
        else
            assert_non_null(strstr(e.reason, "unknown event"));
    }
    struct proc_error e = {0};
    struct proc_request ok = req("s", heap, 1, 0, 0); /* a dump needs no duration */
    assert_true(proc_task_validate_pprof(&ok, &e));
    ok.sampling_hz = 1001;
    assert_false(proc_task_validate_pprof(&ok, &e));
    assert_string_equal(e.field, "samplingRate");
    assert_true(proc_pprof_event_timed("mutex") && !proc_pprof_event_timed("goroutine"));
}

static void create_poll_progress(void **state)
{
    struct fixture *f = *state;
    static const char *const cpu[] = {"cpu"}, *const heap[] = {"heap"};
    struct proc_request r = req("svc", cpu, 1, 2, 0);
    struct proc_error e = {0};
    char *id = NULL, *id2 = NULL;
    assert_int_equal(proc_task_create(f->st, PROC_KIND_PPROF, &r, T0, &e, &id), SKP_OK);
    /* Same event while the window is open: OAP's overlap text; another event is fine. */
    char *dup = NULL;
    assert_int_equal(proc_task_create(f->st, PROC_KIND_PPROF, &r, T0 + 60000, &e, &dup),
                     SKP_EEXIST);
    assert_string_equal(e.reason,
                        "current service already has monitor pprof task execute at this time");
    assert_null(dup);
    struct proc_request r2 = req("svc", heap, 1, 0, 0);
    assert_int_equal(proc_task_create(f->st, PROC_KIND_PPROF, &r2, T0, &e, &id2), SKP_OK);
    assert_string_not_equal(id, id2); /* same millisecond: the next free create time */

    struct proc_task t = {0};
    assert_int_equal(store_proc_next_task(f->st, PROC_KIND_PPROF, "svc", "inst-a", -1, T0, 0, &t),
                     SKP_OK);
    assert_string_equal(t.id, id);
    assert_int_equal(t.n_instances, 2);
    int64_t ct = t.create_time;
    struct proc_command pc;
    proc_command_pprof(&pc, &t);
    assert_string_equal(pc.cmd.command, "PprofTaskQuery");
    assert_int_equal(pc.cmd.n_args, 6);
    assert_string_equal(pc.kv[2].key, "Events");
    assert_string_equal(pc.kv[2].value, "cpu");
    assert_string_equal(pc.kv[3].value, "2");
    store_proc_task_cleanup(&t);
    /* The cursor moves past it to the heap task; unknown instances and ended windows get none. */
    assert_int_equal(store_proc_next_task(f->st, PROC_KIND_PPROF, "svc", "inst-a", ct, T0, 0, &t),
                     SKP_OK);
    assert_string_equal(t.id, id2);
    store_proc_task_cleanup(&t);
    assert_int_equal(store_proc_next_task(f->st, PROC_KIND_PPROF, "svc", "inst-z", -1, T0, 0, &t),
                     SKP_ENOTFOUND);
    assert_int_equal(
        store_proc_next_task(f->st, PROC_KIND_PPROF, "svc", "inst-a", -1, T0 + 3 * 60000, 0, &t),
        SKP_ENOTFOUND);

    /* Logs -> progress; a file and its EXECUTION_FINISHED log are one transaction. */
    assert_int_equal(store_proc_add_log(f->st, id, "inst-a", PROC_LOG_NOTIFIED, T0 + 1, NULL),
                     SKP_OK);
    assert_int_equal(store_proc_add_log(f->st, id, "inst-b", PROC_LOG_NOTIFIED, T0 + 2, NULL),
                     SKP_OK);
    assert_int_equal(
        store_proc_add_log(f->st, id, "inst-b", PROC_LOG_TASK_ERROR, T0 + 3, "no perf"), SKP_OK);
    static const uint8_t bytes[] = {1, 2, 3, 4, 5};
    int64_t fid = 0;
    assert_int_equal(store_proc_insert_file(f->st, id, "inst-a", T0 + 4, bytes, sizeof(bytes),
                                            PROC_LOG_FINISHED, &fid),
                     SKP_OK);
    assert_int_equal(store_proc_get_task(f->st, id, &t), SKP_OK);
    struct proc_log *logs = NULL;
    size_t n_logs = 0, n = 0;
    assert_int_equal(store_proc_list_logs(f->st, id, &logs, &n_logs), SKP_OK);
    assert_int_equal(n_logs, 4);
    struct proc_progress prog[8];
    proc_task_progress(&t, logs, n_logs, prog, 8, &n);
    assert_int_equal(n, 2);
    assert_string_equal(prog[0].instance, "inst-a");
    assert_int_equal(prog[0].uploaded_ms, T0 + 4);
    assert_int_equal(prog[1].failed_ms, T0 + 3);
    assert_string_equal(prog[1].failed_reason, "no perf");
    store_proc_logs_free(logs, n_logs);
    uint8_t *data = NULL;
    size_t len = 0;
    char *inst = NULL;
    assert_int_equal(store_proc_get_file(f->st, id, fid, &data, &len, &inst), SKP_OK);
    assert_int_equal(len, sizeof(bytes));
    assert_memory_equal(data, bytes, len);
    assert_string_equal(inst, "inst-a");
    skpx_free(data);
    skpx_free(inst);
    assert_int_equal(store_proc_get_file(f->st, id2, fid, &data, &len, NULL), SKP_ENOTFOUND);
    store_proc_task_cleanup(&t);

    /* Retention removes the tasks with their instances, logs and files. */
    uint64_t purged = 0;
    assert_int_equal(store_purge_before(f->st, T0 + 1000, &purged), SKP_OK);
    assert_int_equal(store_proc_get_task(f->st, id, &t), SKP_ENOTFOUND);
    struct proc_file *files = NULL;
    assert_int_equal(store_proc_list_files(f->st, id, &files, &n), SKP_OK);
    assert_int_equal(n, 0);
    store_proc_files_free(files, n);
    skpx_free(id);
    skpx_free(id2);
}

static void all_live_instances(void **state)
{
    struct fixture *f = *state;
    static const char *const cpu[] = {"cpu"};
    struct proc_request r = req("svc-live", cpu, 1, 1, 0);
    r.n_instances = 0;
    struct proc_error e = {0};
    char *id = NULL;
    assert_int_equal(proc_task_create(f->st, PROC_KIND_PPROF, &r, T0, &e, &id), SKP_EINVAL);
    assert_string_equal(e.reason, "serviceInstanceIds cannot be empty");
    assert_int_equal(store_touch_instance(f->st, "svc-live", "old", T0 - 10 * 60000), SKP_OK);
    assert_int_equal(store_touch_instance(f->st, "svc-live", "new", T0 - 1000), SKP_OK);
    assert_int_equal(proc_task_create(f->st, PROC_KIND_PPROF, &r, T0, &e, &id), SKP_OK);
    struct proc_task t = {0};
    assert_int_equal(store_proc_get_task(f->st, id, &t), SKP_OK);
    assert_true(t.all_live);
    assert_int_equal(t.n_instances, 1);
    assert_string_equal(t.instances[0], "new");
    store_proc_task_cleanup(&t);
    skpx_free(id);
}

int main(void)
{
    /* Store errors explain themselves on stderr (ctest shows it on failure). */
    skpx_log_set_sink(skpx_log_sink_fd, (void *)(intptr_t)2, SKPX_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(validation_order),
        cmocka_unit_test_setup_teardown(create_poll_progress, setup, teardown),
        cmocka_unit_test_setup_teardown(all_live_instances, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
