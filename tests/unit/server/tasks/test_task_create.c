/* task_create against a real SQLite store in a temporary folder: stored fields, defaults
 * (start = now, endpoint trimmed), unknown services allowed, and OAP's one-task-per-service
 * overlap rule in both directions, per service not per endpoint. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "server/tasks/task_service.h"

#define MIN 60000
#define NOW INT64_C(1700000000000)

struct fx {
    char dir[64];
    char path[128];
    struct store *st;
};

static int setup(void **state)
{
    struct fx *f = skpx_calloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/skp-task-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->path, sizeof(f->path), "%s/t.db", f->dir);
    if (store_open(f->path, NULL, &f->st))
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    store_close(f->st);
    char p[160];
    snprintf(p, sizeof(p), "%s-wal", f->path);
    unlink(p);
    snprintf(p, sizeof(p), "%s-shm", f->path);
    unlink(p);
    unlink(f->path);
    rmdir(f->dir);
    skpx_free(f);
    return 0;
}

static skp_err create(struct store *st, const char *svc, const char *ep, int64_t start, int dur,
                      int64_t now, struct task_error *e, char **id)
{
    struct task_request r = {
        .service = svc,
        .endpoint = ep,
        .start_time = start,
        .duration_min = dur,
        .min_duration_threshold = 5,
        .dump_period = 10,
        .max_sampling_count = 5,
    };
    return task_create(st, &r, now, e, id);
}

static void test_create_and_fields(void **state)
{
    struct fx *f = *state;
    struct task_error e = {0};
    char *id = NULL;
    assert_int_equal(create(f->st, "never-seen-service", "  /orders  ", 0, 2, NOW, &e, &id),
                     SKP_OK);
    char want[TASK_ID_MAX];
    assert_true(task_make_id(NOW, "never-seen-service", want, sizeof(want)));
    assert_string_equal(id, want);
    struct store_task t = {0};
    assert_int_equal(store_get_task(f->st, id, &t), SKP_OK);
    assert_string_equal(t.service, "never-seen-service");
    assert_string_equal(t.endpoint, "/orders"); /* trimmed */
    assert_int_equal(t.start_time, NOW);        /* default start = now */
    assert_int_equal(t.create_time, NOW);
    assert_int_equal(t.duration_min, 2);
    assert_int_equal(t.min_duration_threshold, 5);
    assert_int_equal(t.dump_period, 10);
    assert_int_equal(t.max_sampling_count, 5);
    store_task_cleanup(&t);
    skpx_free(id);

    /* Validation failures never reach the store. */
    assert_int_equal(create(f->st, "svc2", "", 0, 2, NOW, &e, &id), SKP_EINVAL);
    assert_null(id);
    assert_string_equal(e.reason, "endpoint name cannot be empty");
}

static void test_overlap_rule(void **state)
{
    struct fx *f = *state;
    struct task_error e = {0};
    char *id = NULL;
    /* Task A: [NOW, NOW+5min]. */
    assert_int_equal(create(f->st, "svc", "/a", NOW, 5, NOW, &e, &id), SKP_OK);
    skpx_free(id);
    /* Same service, other endpoint, inside A's window: refused (per service). */
    assert_int_equal(create(f->st, "svc", "/b", NOW + 2 * MIN, 1, NOW + 1, &e, &id), SKP_EEXIST);
    assert_string_equal(e.reason, "current service already has monitor task execute at this time");
    assert_string_equal(e.field, "startTime");
    /* Starting exactly when A ends: OAP's >= makes it a conflict. */
    assert_int_equal(create(f->st, "svc", "/b", NOW + 5 * MIN, 1, NOW + 2, &e, &id), SKP_EEXIST);
    /* Ending inside A (starting before it): refused too. */
    assert_int_equal(create(f->st, "svc", "/b", NOW - 2 * MIN, 3, NOW + 3, &e, &id), SKP_EEXIST);
    /* Another service is independent. */
    assert_int_equal(create(f->st, "other", "/a", NOW, 5, NOW + 4, &e, &id), SKP_OK);
    skpx_free(id);
    /* One ms after A's end: accepted. */
    assert_int_equal(create(f->st, "svc", "/b", NOW + 5 * MIN + 1, 1, NOW + 5, &e, &id), SKP_OK);
    skpx_free(id);
    /* Well before A and ending before it starts: accepted. */
    assert_int_equal(create(f->st, "svc", "/c", NOW - 10 * MIN, 2, NOW + 6, &e, &id), SKP_OK);
    skpx_free(id);
}

/* Two tasks of one service created in the same millisecond (non-overlapping windows) used to
 * get the same OAP-style id: the second insert failed and the API answered 500. */
static void test_same_millisecond_ids_differ(void **state)
{
    struct fx *f = *state;
    struct task_error e = {0};
    char *a = NULL, *b = NULL;
    assert_int_equal(create(f->st, "svc", "/a", NOW + 20 * MIN, 1, NOW, &e, &a), SKP_OK);
    assert_int_equal(create(f->st, "svc", "/b", NOW + 40 * MIN, 1, NOW, &e, &b), SKP_OK);
    assert_string_not_equal(a, b);
    struct store_task t = {0};
    assert_int_equal(store_get_task(f->st, b, &t), SKP_OK);
    assert_int_equal(t.create_time, NOW + 1); /* the next free millisecond */
    assert_string_equal(t.endpoint, "/b");
    store_task_cleanup(&t);
    skpx_free(a);
    skpx_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_and_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_overlap_rule, setup, teardown),
        cmocka_unit_test_setup_teardown(test_same_millisecond_ids_differ, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
