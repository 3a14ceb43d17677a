/* Unit tests for the SQLite store (src/server/store/): snapshots (duplicates, order, stack
 * de-duplication), segments, the profiled-segment listing and segment info, tasks and logs,
 * services and instances, retention, migrations, read-only and full-disk failures, allocation
 * faults. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include "server/analysis/analyzer.h"
#include "server/http/http_int.h"
#include "server/store/sqlite/store_int.h"
#include "server/formats/utf8.h"
#include "harness/skp_alloc_faults.h"
#include "store_test_util.h"

static int64_t scalar(struct store *st, const char *sql)
{
    sqlite3_stmt *s = NULL;
    assert_int_equal(sqlite3_prepare_v2(store__db(st), sql, -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
}

/* The listings as the HTTP API serialises them (http_*_push): the rows and their JSON are
 * checked together. */
static skp_err jl_services(struct store *st, json_t **out)
{
    *out = json_array();
    return store_list_services(st, http_service_push, *out);
}

static skp_err jl_instances(struct store *st, const char *svc, json_t **out)
{
    *out = json_array();
    return store_list_instances(st, svc, http_instance_push, *out);
}

static skp_err jl_tasks(struct store *st, const char *svc, const char *ep, json_t **out)
{
    *out = json_array();
    return store_list_tasks(st, svc, ep, http_task_push, *out);
}

static skp_err jl_task_logs(struct store *st, const char *task, json_t **out)
{
    *out = json_array();
    return store_list_task_logs(st, task, http_task_log_push, *out);
}

static skp_err jl_segments(struct store *st, const char *task, json_t **out)
{
    *out = json_array();
    return store_list_profiled_segments(st, task, http_segment_push, *out);
}

static void assert_integrity(struct store *st)
{
    sqlite3_stmt *s = NULL;
    assert_int_equal(sqlite3_prepare_v2(store__db(st), "PRAGMA integrity_check", -1, &s, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(s, 0), "ok");
    sqlite3_finalize(s);
}

struct seen {
    int n;
    int32_t seq[64];
    int64_t time[64];
    uint32_t stack[64];
    uint32_t segment[64];
    uint32_t weight[64];
};

static void seen_cb(void *ud, const struct store_sample *s)
{
    struct seen *v = ud;
    if (v->n < 64) {
        v->weight[v->n] = s->weight;
        v->seq[v->n] = s->sequence;
        v->time[v->n] = s->time_ms;
        v->stack[v->n] = s->stack;
        v->segment[v->n] = s->segment;
    }
    v->n++;
}

/* ---- snapshots ---- */

static void insert_duplicates_and_order(void **state)
{
    struct fixture *f = *state;
    char *fr[] = {"main", "handle", "work"};
    struct store_snapshot v[] = {
        {"t1", "s1", 1030, 3, fr, 3, 0, 0},
        {"t1", "s1", 1010, 1, fr, 3, 0, 0},
        {"t1", "s1", 1020, 2, fr, 2, 0, 0},
        {"t1", "s1", 1000, 0, fr, 1, 0, 0},
    };
    size_t dup = 99;
    assert_int_equal(store_insert_snapshots(f->st, v, 4, &dup), SKP_OK);
    assert_int_equal(dup, 0);
    /* a resent batch overlapping the stored one: only the new one is stored */
    struct store_snapshot again[] = {v[0], v[1], {"t1", "s1", 1040, 4, fr, 3, 0, 0}};
    assert_int_equal(store_insert_snapshots(f->st, again, 3, &dup), SKP_OK);
    assert_int_equal(dup, 2);
    struct store_stats stats;
    assert_int_equal(store_get_stats(f->st, &stats), SKP_OK);
    assert_int_equal(stats.snapshots, 5);
    assert_true(stats.commits >= 2);
    assert_true(stats.file_bytes > 0);

    struct seen s = {0};
    assert_int_equal(store_scan_segment(f->st, "s1", 0, 100, seen_cb, &s), SKP_OK);
    assert_int_equal(s.n, 5);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(s.seq[i], i);
        assert_int_equal(s.time[i], 1000 + 10 * i);
    }
    /* stack contents round-trip, root first */
    const uint32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(store_get_stack(f->st, s.stack[3], &ids, &n), SKP_OK);
    assert_int_equal(n, 3);
    const char *sig = NULL;
    assert_int_equal(store_get_frame(f->st, ids[0], &sig), SKP_OK);
    assert_string_equal(sig, "main");
    assert_int_equal(store_get_frame(f->st, ids[2], &sig), SKP_OK);
    assert_string_equal(sig, "work");
    assert_int_equal(store_get_frame(f->st, 999999, &sig), SKP_ENOTFOUND);
    assert_int_equal(store_get_stack(f->st, 999999, &ids, &n), SKP_ENOTFOUND);

    /* range scan and the sequence window */
    s.n = 0;
    assert_int_equal(store_scan_segment(f->st, "s1", 1, 2, seen_cb, &s), SKP_OK);
    assert_int_equal(s.n, 2);
    int32_t lo, hi;
    assert_int_equal(store_segment_seq_window(f->st, "s1", 1005, 1031, &lo, &hi), SKP_OK);
    assert_int_equal(lo, 1);
    assert_int_equal(hi, 3);
    assert_int_equal(store_segment_seq_window(f->st, "s1", 5000, 6000, &lo, &hi), SKP_ENOTFOUND);
    assert_int_equal(store_segment_seq_window(f->st, "zz", 0, 6000, &lo, &hi), SKP_ENOTFOUND);
    s.n = 0;
    assert_int_equal(store_scan_segment(f->st, "zz", 0, 100, seen_cb, &s), SKP_OK);
    assert_int_equal(s.n, 0);
}

static void scan_task_orders_by_segment_and_sequence(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(tu_add(f->st, "t", "b", 1, 20, "x"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "a", 1, 11, "x"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "b", 0, 10, "x"), SKP_OK);
    assert_int_equal(tu_add(f->st, "other", "c", 0, 10, "x"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "a", 0, 1, "x"), SKP_OK);
    struct seen s = {0};
    assert_int_equal(store_scan_task(f->st, "t", seen_cb, &s), SKP_OK);
    assert_int_equal(s.n, 4);
    assert_true(s.segment[0] == s.segment[1] && s.segment[2] == s.segment[3]);
    assert_true(s.segment[0] < s.segment[2]);
    assert_int_equal(s.seq[0], 0);
    assert_int_equal(s.seq[1], 1);
    assert_int_equal(s.seq[2], 0);
    assert_int_equal(s.seq[3], 1);
    s.n = 0;
    assert_int_equal(store_scan_task(f->st, "unknown", seen_cb, &s), SKP_OK);
    assert_int_equal(s.n, 0);
}

static void stacks_are_deduplicated(void **state)
{
    struct fixture *f = *state;
    static const char *const k_stacks[] = {
        "main,a,b", "main,a,c", "main,a", "main,d,b", "", "other,a,b", "main,a,b,a,b",
    };
    const size_t K = sizeof(k_stacks) / sizeof(k_stacks[0]);
    for (int i = 0; i < 100; i++) {
        char seg[16];
        snprintf(seg, sizeof(seg), "s%d", i % 3);
        assert_int_equal(tu_add(f->st, "t", seg, i, 1000 + i, k_stacks[(i * 5) % K]), SKP_OK);
    }
    struct store_stats stats;
    assert_int_equal(store_get_stats(f->st, &stats), SKP_OK);
    assert_int_equal(stats.snapshots, 100);
    assert_int_equal(stats.stacks, K);
    assert_int_equal(stats.frames, 6); /* main a b c d other */
    assert_int_equal(stats.segments, 3);

    /* with cold caches the same stacks are found in the database, not inserted again */
    store_close(f->st);
    f->st = tu_open(f->db.path);
    for (int i = 0; i < 20; i++)
        assert_int_equal(tu_add(f->st, "t", "s9", i, 5000 + i, k_stacks[i % K]), SKP_OK);
    assert_int_equal(store_get_stats(f->st, &stats), SKP_OK);
    assert_int_equal(stats.snapshots, 120);
    assert_int_equal(stats.stacks, K);
    assert_int_equal(stats.frames, 6);
}

/* ---- segments ---- */

static void profiled_segment_listing(void **state)
{
    struct fixture *f = *state;
    struct store_task t = {.id = "task1",
                           .service = "svc",
                           .endpoint = "/orders",
                           .start_time = 1000,
                           .duration_min = 5,
                           .min_duration_threshold = 0,
                           .dump_period = 10,
                           .max_sampling_count = 5,
                           .create_time = 900};
    assert_int_equal(store_insert_task(f->st, &t), SKP_OK);
    /* s1: profiled, SegmentObject arrives; s2: profiled, no SegmentObject; s3: no seq 0;
     * s4: seq 0 but for another task */
    assert_int_equal(tu_add(f->st, "task1", "s1", 0, 2010, "m,a"), SKP_OK);
    assert_int_equal(tu_add(f->st, "task1", "s1", 1, 2020, "m,a"), SKP_OK);
    assert_int_equal(tu_add(f->st, "task1", "s2", 0, 1500, "m,b"), SKP_OK);
    assert_int_equal(tu_add(f->st, "task1", "s2", 1, 1530, "m,b"), SKP_OK);
    assert_int_equal(tu_add(f->st, "task1", "s3", 1, 1600, "m,b"), SKP_OK);
    assert_int_equal(tu_add(f->st, "task0", "s4", 0, 1600, "m,b"), SKP_OK);

    struct store_kv tags[] = {{"http.method", "GET"}};
    struct store_span_ref refs[] = {
        {.trace_id = "trace-1", .parent_segment_id = "parent-seg", .parent_span_id = 3}};
    struct store_span entry = {0};
    entry.span_id = 0;
    entry.parent_span_id = -1;
    entry.start_ms = 2000;
    entry.end_ms = 2100;
    entry.operation = "/orders";
    entry.type = STORE_SPAN_ENTRY;
    entry.layer = STORE_LAYER_HTTP;
    entry.component_id = 49;
    entry.n_tags = 1;
    entry.tags = tags;
    entry.n_refs = 1;
    entry.refs = refs;
    struct store_span exit_span = {0};
    exit_span.span_id = 1;
    exit_span.parent_span_id = 0;
    exit_span.start_ms = 2010;
    exit_span.end_ms = 2150;
    exit_span.operation = "SELECT";
    exit_span.peer = "db:5432";
    exit_span.type = STORE_SPAN_EXIT;
    exit_span.layer = STORE_LAYER_DATABASE;
    exit_span.is_error = 1;
    struct store_span spans[] = {exit_span, entry};
    struct store_segment seg = {0};
    seg.trace_id = "trace-1";
    seg.segment_id = "s1";
    seg.service = "svc";
    seg.instance = "inst-1";
    seg.n_spans = 2;
    seg.spans = spans;
    struct store_segment *segs = &seg;
    assert_int_equal(store_insert_segments(f->st, segs, 1, 3000), SKP_OK);
    /* a resent segment is ignored */
    seg.trace_id = "changed";
    assert_int_equal(store_insert_segments(f->st, segs, 1, 3001), SKP_OK);

    json_t *list = NULL;
    assert_int_equal(jl_segments(f->st, "task1", &list), SKP_OK);
    assert_int_equal(json_array_size(list), 2);
    /* ordered by start: s2 (1500) then s1 (2000) */
    json_t *a = json_array_get(list, 0);
    assert_string_equal(json_string_value(json_object_get(a, "segmentId")), "s2");
    assert_int_equal(json_integer_value(json_object_get(a, "start")), 1500);
    assert_int_equal(json_integer_value(json_object_get(a, "duration")), 30);
    assert_string_equal(json_string_value(json_object_get(a, "service")), "svc");
    assert_int_equal(json_array_size(json_object_get(a, "spans")), 0);

    json_t *b = json_array_get(list, 1);
    assert_string_equal(json_string_value(json_object_get(b, "segmentId")), "s1");
    assert_string_equal(json_string_value(json_object_get(b, "traceId")), "trace-1");
    assert_string_equal(json_string_value(json_object_get(b, "instanceName")), "inst-1");
    assert_int_equal(json_integer_value(json_object_get(b, "start")), 2000);
    assert_int_equal(json_integer_value(json_object_get(b, "duration")), 150);
    json_t *names = json_object_get(b, "endpointNames");
    assert_int_equal(json_array_size(names), 1);
    assert_string_equal(json_string_value(json_array_get(names, 0)), "/orders");
    json_t *sp = json_object_get(b, "spans");
    assert_int_equal(json_array_size(sp), 2);
    json_t *e = json_array_get(sp, 1);
    assert_int_equal(json_integer_value(json_object_get(e, "spanId")), 0);
    assert_int_equal(json_integer_value(json_object_get(e, "parentSpanId")), -1);
    assert_string_equal(json_string_value(json_object_get(e, "segmentId")), "s1");
    assert_string_equal(json_string_value(json_object_get(e, "type")), "Entry");
    assert_string_equal(json_string_value(json_object_get(e, "layer")), "Http");
    assert_string_equal(json_string_value(json_object_get(e, "component")), "49");
    assert_string_equal(json_string_value(json_object_get(e, "serviceCode")), "svc");
    assert_string_equal(json_string_value(json_object_get(e, "serviceInstanceName")), "inst-1");
    assert_true(json_is_true(json_object_get(e, "profiled")));
    json_t *r = json_array_get(json_object_get(e, "refs"), 0);
    assert_string_equal(json_string_value(json_object_get(r, "type")), "CROSS_PROCESS");
    assert_string_equal(json_string_value(json_object_get(r, "parentSegmentId")), "parent-seg");
    assert_int_equal(json_integer_value(json_object_get(r, "parentSpanId")), 3);
    json_t *tg = json_array_get(json_object_get(e, "tags"), 0);
    assert_string_equal(json_string_value(json_object_get(tg, "key")), "http.method");
    assert_string_equal(json_string_value(json_object_get(tg, "value")), "GET");
    json_t *x = json_array_get(sp, 0);
    assert_true(json_is_true(json_object_get(x, "isError")));
    assert_string_equal(json_string_value(json_object_get(x, "peer")), "db:5432");
    json_decref(list);

    assert_int_equal(jl_segments(f->st, "nothing", &list), SKP_OK);
    assert_int_equal(json_array_size(list), 0);
    json_decref(list);

    /* the SegmentObject may also arrive before the snapshots */
    struct store_segment early = {0};
    early.trace_id = "trace-2";
    early.segment_id = "s5";
    early.service = "svc";
    early.n_spans = 1;
    struct store_span *one = &entry;
    early.spans = one;
    struct store_segment *segs2 = &early;
    assert_int_equal(store_insert_segments(f->st, segs2, 1, 4000), SKP_OK);
    assert_int_equal(tu_add(f->st, "task1", "s5", 0, 2050, "m"), SKP_OK);
    assert_int_equal(jl_segments(f->st, "task1", &list), SKP_OK);
    assert_int_equal(json_array_size(list), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(list, 2), "traceId")),
                        "trace-2");
    json_decref(list);
}

/* store_get_segment_info: what a segment export labels and weighs its samples with. */
static void segment_info_for_exports(void **state)
{
    struct fixture *f = *state;
    struct store_task t = {.id = "tk",
                           .service = "svc",
                           .endpoint = "/task-ep",
                           .start_time = 1000,
                           .duration_min = 5,
                           .min_duration_threshold = 0,
                           .dump_period = 37,
                           .max_sampling_count = 5,
                           .create_time = 900};
    assert_int_equal(store_insert_task(f->st, &t), SKP_OK);
    /* with: snapshots of tk and a SegmentObject; bare: snapshots of tk only; orphan: snapshots
     * of a task with no row; object: a SegmentObject only */
    assert_int_equal(tu_add(f->st, "tk", "with", 0, 2000, "m,a"), SKP_OK);
    assert_int_equal(tu_add(f->st, "tk", "bare", 0, 2000, "m,a"), SKP_OK);
    assert_int_equal(tu_add(f->st, "gone", "orphan", 0, 2000, "m,a"), SKP_OK);
    struct store_span entry = {0};
    entry.parent_span_id = -1;
    entry.start_ms = 2000;
    entry.end_ms = 2100;
    entry.operation = "/seg-ep";
    entry.type = STORE_SPAN_ENTRY;
    struct store_span *spans = &entry;
    struct store_segment with = {0};
    with.trace_id = "trace-w";
    with.segment_id = "with";
    with.service = "svc";
    with.n_spans = 1;
    with.spans = spans;
    struct store_segment object = with;
    object.trace_id = "trace-o";
    object.segment_id = "object";
    struct store_segment segs[] = {with, object};
    assert_int_equal(store_insert_segments(f->st, segs, 2, 3000), SKP_OK);

    struct store_segment_info i;
    assert_int_equal(store_get_segment_info(f->st, "with", &i), SKP_OK);
    assert_string_equal(i.trace_id, "trace-w");
    assert_string_equal(i.endpoint, "/seg-ep");
    assert_int_equal(i.dump_period, 37);
    store_segment_info_cleanup(&i);

    assert_int_equal(store_get_segment_info(f->st, "bare", &i), SKP_OK);
    assert_null(i.trace_id);
    assert_string_equal(i.endpoint, "/task-ep");
    assert_int_equal(i.dump_period, 37);
    store_segment_info_cleanup(&i);

    assert_int_equal(store_get_segment_info(f->st, "orphan", &i), SKP_OK);
    assert_null(i.trace_id);
    assert_null(i.endpoint);
    assert_int_equal(i.dump_period, 0);
    store_segment_info_cleanup(&i);

    assert_int_equal(store_get_segment_info(f->st, "object", &i), SKP_OK);
    assert_string_equal(i.trace_id, "trace-o");
    assert_string_equal(i.endpoint, "/seg-ep");
    assert_int_equal(i.dump_period, 0);
    store_segment_info_cleanup(&i);

    assert_int_equal(store_get_segment_info(f->st, "nope", &i), SKP_ENOTFOUND);
    assert_null(i.trace_id);
    assert_null(i.endpoint);
    assert_int_equal(store_get_segment_info(f->st, NULL, &i), SKP_EINVAL);
}

/* ---- tasks ---- */

static void add_task(struct store *st, const char *id, const char *svc, int64_t start, int dur_min,
                     int64_t create)
{
    struct store_task t = {.id = (char *)id,
                           .service = (char *)svc,
                           .endpoint = "/e",
                           .start_time = start,
                           .duration_min = dur_min,
                           .min_duration_threshold = 5,
                           .dump_period = 10,
                           .max_sampling_count = 3,
                           .create_time = create};
    assert_int_equal(store_insert_task(st, &t), SKP_OK);
}

static void tasks_for_agent_filtering(void **state)
{
    struct fixture *f = *state;
    const int64_t min = 60000;
    int64_t now = 100 * min;
    add_task(f->st, "old-running", "svc", now - 2 * min, 5, now - 2 * min); /* ends now+3m */
    add_task(f->st, "ended", "svc", now - 20 * min, 5, now - 20 * min);
    add_task(f->st, "future", "svc", now + 10 * min, 5, now - 1 * min);
    add_task(f->st, "other-svc", "other", now, 5, now);
    struct store_task *v = NULL;
    size_t n = 0;
    /* late-joining agent (cursor -1): gets the running and the scheduled task, not the ended */
    assert_int_equal(store_tasks_for_agent(f->st, "svc", -1, now, &v, &n), SKP_OK);
    assert_int_equal(n, 2);
    assert_string_equal(v[0].id, "old-running");
    assert_string_equal(v[1].id, "future");
    assert_int_equal(v[0].duration_min, 5);
    assert_int_equal(v[0].min_duration_threshold, 5);
    assert_int_equal(v[0].max_sampling_count, 3);
    for (size_t i = 0; i < n; i++)
        store_task_cleanup(&v[i]);
    skpx_free(v);
    /* cursor past the first */
    assert_int_equal(store_tasks_for_agent(f->st, "svc", now - 2 * min, now, &v, &n), SKP_OK);
    assert_int_equal(n, 1);
    assert_string_equal(v[0].id, "future");
    store_task_cleanup(&v[0]);
    skpx_free(v);
    assert_int_equal(store_tasks_for_agent(f->st, "nobody", -1, now, &v, &n), SKP_OK);
    assert_int_equal(n, 0);
    skpx_free(v);

    /* duplicate id */
    struct store_task dup = {.id = "ended", .service = "svc", .endpoint = "/e"};
    assert_int_equal(store_insert_task(f->st, &dup), SKP_EEXIST);
}

static void latest_task_before_and_get(void **state)
{
    struct fixture *f = *state;
    add_task(f->st, "a", "svc", 1000, 1, 1);
    add_task(f->st, "b", "svc", 5000, 1, 2);
    add_task(f->st, "c", "other", 4000, 1, 3);
    struct store_task t;
    assert_int_equal(store_latest_task_before(f->st, "svc", 4999, &t), SKP_OK);
    assert_string_equal(t.id, "a");
    store_task_cleanup(&t);
    assert_int_equal(store_latest_task_before(f->st, "svc", 5000, &t), SKP_OK);
    assert_string_equal(t.id, "b");
    store_task_cleanup(&t);
    assert_int_equal(store_latest_task_before(f->st, "svc", 999, &t), SKP_ENOTFOUND);
    assert_int_equal(store_get_task(f->st, "c", &t), SKP_OK);
    assert_string_equal(t.service, "other");
    assert_int_equal(t.start_time, 4000);
    store_task_cleanup(&t);
    assert_int_equal(store_get_task(f->st, "zz", &t), SKP_ENOTFOUND);

    json_t *l = NULL;
    assert_int_equal(jl_tasks(f->st, NULL, NULL, &l), SKP_OK);
    assert_int_equal(json_array_size(l), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(l, 0), "id")), "b");
    assert_string_equal(json_string_value(json_object_get(json_array_get(l, 2), "id")), "a");
    json_t *b = json_array_get(l, 0);
    assert_string_equal(json_string_value(json_object_get(b, "endpointName")), "/e");
    assert_int_equal(json_integer_value(json_object_get(b, "duration")), 1);
    assert_int_equal(json_integer_value(json_object_get(b, "dumpPeriod")), 10);
    assert_int_equal(json_integer_value(json_object_get(b, "createTime")), 2);
    json_decref(l);
    assert_int_equal(jl_tasks(f->st, "other", NULL, &l), SKP_OK);
    assert_int_equal(json_array_size(l), 1);
    json_decref(l);
    assert_int_equal(jl_tasks(f->st, "svc", "/nope", &l), SKP_OK);
    assert_int_equal(json_array_size(l), 0);
    json_decref(l);
}

static void task_logs(void **state)
{
    struct fixture *f = *state;
    add_task(f->st, "t", "svc", 1000, 1, 1);
    assert_int_equal(store_add_task_log(f->st, "t", "svc", "i1", STORE_TASK_NOTIFIED, 1100),
                     SKP_OK);
    assert_int_equal(store_add_task_log(f->st, "t", "svc", "i2", STORE_TASK_NOTIFIED, 1050),
                     SKP_OK);
    assert_int_equal(
        store_add_task_log(f->st, "t", "svc", "i1", STORE_TASK_EXECUTION_FINISHED, 61000), SKP_OK);
    /* the same event twice is stored once */
    assert_int_equal(store_add_task_log(f->st, "t", "svc", "i1", STORE_TASK_NOTIFIED, 1100),
                     SKP_OK);
    assert_int_equal(store_add_task_log(f->st, "t", "svc", "i1", (enum store_task_op)7, 1),
                     SKP_EINVAL);
    json_t *l = NULL;
    assert_int_equal(jl_task_logs(f->st, "t", &l), SKP_OK);
    assert_int_equal(json_array_size(l), 3);
    json_t *a = json_array_get(l, 0);
    assert_string_equal(json_string_value(json_object_get(a, "instanceName")), "i2");
    assert_string_equal(json_string_value(json_object_get(a, "operationType")), "NOTIFIED");
    assert_string_equal(json_string_value(json_object_get(a, "taskId")), "t");
    assert_int_equal(json_integer_value(json_object_get(a, "operationTime")), 1050);
    assert_non_null(json_string_value(json_object_get(a, "id")));
    json_t *c = json_array_get(l, 2);
    assert_string_equal(json_string_value(json_object_get(c, "operationType")),
                        "EXECUTION_FINISHED");
    json_decref(l);
}

/* ---- services and instances ---- */

static void instances_upsert_and_properties(void **state)
{
    struct fixture *f = *state;
    struct store_kv p1[] = {{"language", "python"}, {"os", "linux"}};
    assert_int_equal(store_upsert_instance(f->st, "svc", "i1", "GENERAL", p1, 2, 100), SKP_OK);
    struct store_kv p2[] = {{"language", "python"}, {"hostname", "h1"}};
    assert_int_equal(store_upsert_instance(f->st, "svc", "i1", NULL, p2, 2, 200), SKP_OK);
    assert_int_equal(store_touch_instance(f->st, "svc", "i2", 300), SKP_OK);
    assert_int_equal(store_touch_instance(f->st, "bsvc", "j", 50), SKP_OK);

    json_t *l = NULL;
    assert_int_equal(jl_instances(f->st, "svc", &l), SKP_OK);
    assert_int_equal(json_array_size(l), 2);
    json_t *i1 = json_array_get(l, 0);
    assert_string_equal(json_string_value(json_object_get(i1, "name")), "i1");
    assert_string_equal(json_string_value(json_object_get(i1, "language")), "python");
    assert_int_equal(json_integer_value(json_object_get(i1, "lastHeartbeat")), 200);
    json_t *props = json_object_get(i1, "properties");
    assert_int_equal(json_object_size(props), 2); /* replaced, not merged */
    assert_string_equal(json_string_value(json_object_get(props, "hostname")), "h1");
    assert_null(json_object_get(props, "os"));
    json_t *i2 = json_array_get(l, 1);
    assert_true(json_is_null(json_object_get(i2, "language")));
    json_decref(l);

    /* a touch keeps the properties and moves last-seen forward only */
    assert_int_equal(store_touch_instance(f->st, "svc", "i1", 150), SKP_OK);
    assert_int_equal(store_touch_instance(f->st, "svc", "i1", 400), SKP_OK);
    assert_int_equal(jl_instances(f->st, "svc", &l), SKP_OK);
    i1 = json_array_get(l, 0);
    assert_int_equal(json_integer_value(json_object_get(i1, "lastHeartbeat")), 400);
    assert_int_equal(json_object_size(json_object_get(i1, "properties")), 2);
    json_decref(l);

    assert_int_equal(jl_services(f->st, &l), SKP_OK);
    assert_int_equal(json_array_size(l), 2);
    json_t *s0 = json_array_get(l, 0);
    assert_string_equal(json_string_value(json_object_get(s0, "name")), "bsvc");
    json_t *s1 = json_array_get(l, 1);
    assert_string_equal(json_string_value(json_object_get(s1, "name")), "svc");
    assert_string_equal(json_string_value(json_object_get(s1, "layer")), "GENERAL");
    assert_int_equal(json_integer_value(json_object_get(s1, "instances")), 2);
    assert_int_equal(json_integer_value(json_object_get(s1, "lastSeen")), 400);
    json_decref(l);

    assert_int_equal(jl_instances(f->st, "nope", &l), SKP_ENOTFOUND);
    assert_int_equal(json_array_size(l), 0); /* the callback never ran */
    json_decref(l);
}

/* ---- retention ---- */

static void purge_removes_old_data_and_orphans(void **state)
{
    struct fixture *f = *state;
    const int64_t min = 60000;
    add_task(f->st, "old", "svc", 0, 1, 0);
    add_task(f->st, "new", "svc", 100 * min, 5, 100 * min);
    assert_int_equal(store_add_task_log(f->st, "old", "svc", "i", STORE_TASK_NOTIFIED, 10), SKP_OK);
    assert_int_equal(tu_add(f->st, "old", "s-old", 0, 1000, "main,old_only"), SKP_OK);
    assert_int_equal(tu_add(f->st, "old", "s-old", 1, 1010, "main,shared"), SKP_OK);
    assert_int_equal(tu_add(f->st, "new", "s-new", 0, 100 * min, "main,shared"), SKP_OK);
    assert_int_equal(tu_add(f->st, "new", "s-new", 1, 100 * min + 10, "main,new_only"), SKP_OK);
    uint64_t n = 0;
    assert_int_equal(store_purge_before(f->st, 50 * min, &n), SKP_OK);
    assert_true(n > 0);
    struct store_stats stats;
    assert_int_equal(store_get_stats(f->st, &stats), SKP_OK);
    assert_int_equal(stats.snapshots, 2);
    assert_int_equal(stats.stacks, 2);
    assert_int_equal(stats.frames, 3); /* main shared new_only */
    assert_int_equal(stats.segments, 1);
    assert_int_equal(stats.tasks, 1);
    struct store_task t;
    assert_int_equal(store_get_task(f->st, "old", &t), SKP_ENOTFOUND);
    json_t *l = NULL;
    assert_int_equal(jl_task_logs(f->st, "old", &l), SKP_OK);
    assert_int_equal(json_array_size(l), 0);
    json_decref(l);
    struct seen s = {0};
    assert_int_equal(store_scan_segment(f->st, "s-old", 0, 10, seen_cb, &s), SKP_OK);
    assert_int_equal(s.n, 0);
    assert_int_equal(store_scan_task(f->st, "new", seen_cb, &s), SKP_OK);
    assert_int_equal(s.n, 2);

    /* re-inserting a purged stack after the purge works (caches were dropped) */
    assert_int_equal(tu_add(f->st, "new", "s-new", 2, 100 * min + 20, "main,old_only"), SKP_OK);
    assert_int_equal(store_get_stats(f->st, &stats), SKP_OK);
    assert_int_equal(stats.snapshots, 3);
    assert_int_equal(stats.frames, 4);
    s.n = 0;
    assert_int_equal(store_scan_segment(f->st, "s-new", 2, 2, seen_cb, &s), SKP_OK);
    const uint32_t *ids;
    size_t cnt;
    assert_int_equal(store_get_stack(f->st, s.stack[0], &ids, &cnt), SKP_OK);
    assert_int_equal(cnt, 2);
    const char *sig;
    assert_int_equal(store_get_frame(f->st, ids[1], &sig), SKP_OK);
    assert_string_equal(sig, "old_only");
    assert_integrity(f->st);
}

/* ---- schema ---- */

static void migrations_upgrade_and_reopen(void **state)
{
    struct fixture *f = *state;
    store_close(f->st);
    tu_db_cleanup(&f->db);
    tu_db_init(&f->db);
    struct store_opts old = {.schema_version_max = 1};
    assert_int_equal(store_open(f->db.path, &old, &f->st), SKP_OK);
    assert_int_equal(scalar(f->st, "PRAGMA user_version"), 1);
    assert_int_equal(scalar(f->st, "SELECT count(*) FROM sqlite_master WHERE name = "
                                   "'segids_by_first'"),
                     0);
    add_task(f->st, "t", "svc", 1000, 1, 1);
    assert_int_equal(tu_add(f->st, "t", "s1", 0, 1000, "a,b"), SKP_OK);
    store_close(f->st);

    f->st = tu_open(f->db.path);
    assert_true(store_schema_version() >= 2);
    assert_int_equal(scalar(f->st, "PRAGMA user_version"), store_schema_version());
    assert_int_equal(scalar(f->st, "SELECT count(*) FROM schema_migrations"),
                     store_schema_version());
    assert_int_equal(scalar(f->st, "SELECT count(*) FROM sqlite_master WHERE name = "
                                   "'segids_by_first'"),
                     1);
    struct store_task t;
    assert_int_equal(store_get_task(f->st, "t", &t), SKP_OK);
    store_task_cleanup(&t);
    struct seen s = {0};
    assert_int_equal(store_scan_task(f->st, "t", seen_cb, &s), SKP_OK);
    assert_int_equal(s.n, 1);
    store_close(f->st);

    /* reopening at the current version changes nothing */
    f->st = tu_open(f->db.path);
    assert_int_equal(scalar(f->st, "SELECT count(*) FROM schema_migrations"),
                     store_schema_version());
    assert_int_equal(scalar(f->st, "SELECT count(*) FROM snapshots"), 1);

    /* a database from a newer build is refused */
    assert_int_equal(sqlite3_exec(store__db(f->st), "PRAGMA user_version = 999", NULL, NULL, NULL),
                     SQLITE_OK);
    store_close(f->st);
    f->st = NULL;
    struct store *st = (struct store *)1;
    assert_int_equal(store_open(f->db.path, NULL, &st), SKP_EIO);
    assert_null(st);
}

/* A database written before snapshots had a weight (schema v9) opens, migrates, and reads its
 * rows as weight 1; new rows keep theirs (issue 25). */
static void weight_migration_reads_one(void **state)
{
    struct fixture *f = *state;
    store_close(f->st);
    tu_db_cleanup(&f->db);
    tu_db_init(&f->db);
    struct store_opts v9 = {.schema_version_max = STORE_SCHEMA_WEIGHT - 1};
    assert_int_equal(store_open(f->db.path, &v9, &f->st), SKP_OK);
    add_task(f->st, "t", "svc", 1000, 1, 1);
    assert_int_equal(tu_add(f->st, "t", "s1", 0, 1000, "a,b"), SKP_OK);
    struct seen s = {0};
    assert_int_equal(store_scan_task(f->st, "t", seen_cb, &s), SKP_OK);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.weight[0], 1);
    store_close(f->st);

    f->st = tu_open(f->db.path);
    assert_true(store_schema_version() >= STORE_SCHEMA_WEIGHT);
    char *fr[] = {"a", "c"};
    struct store_snapshot w = {.task_id = "t",
                               .segment_id = "s1",
                               .time_ms = 1010,
                               .sequence = 1,
                               .frames = fr,
                               .n_frames = 2,
                               .weight = 42};
    assert_int_equal(store_insert_snapshots(f->st, &w, 1, NULL), SKP_OK);
    memset(&s, 0, sizeof(s));
    assert_int_equal(store_scan_segment(f->st, "s1", 0, 9, seen_cb, &s), SKP_OK);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.weight[0], 1);
    assert_int_equal(s.weight[1], 42);
}

/* ---- keyset pages of the profiled-segment listing (schema v8, issue 15) ---- */

static void segment_pages_keyset(void **state)
{
    struct fixture *f = *state;
    /* Data written by schema v7 (no segment_listing yet): the migration indexes it. */
    store_close(f->st);
    tu_db_cleanup(&f->db);
    tu_db_init(&f->db);
    struct store_opts v7 = {.schema_version_max = 7};
    assert_int_equal(store_open(f->db.path, &v7, &f->st), SKP_OK);
    add_task(f->st, "t", "svc", 1000, 10, 1);
    add_task(f->st, "other", "svc2", 1000, 10, 2);
    struct store_span sp = {.span_id = 0,
                            .parent_span_id = -1,
                            .start_ms = 1100,
                            .end_ms = 1300,
                            .operation = "/e",
                            .type = STORE_SPAN_ENTRY};
    struct store_segment obj = {"s-obj", "tr", "svc", "i", &sp, 1};
    assert_int_equal(tu_add(f->st, "t", "s-obj", 0, 1200, "m"), SKP_OK);
    assert_int_equal(store_insert_segments(f->st, &obj, 1, 5000), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s-b", 0, 1100, "m"), SKP_OK); /* ties s-obj's start */
    assert_int_equal(tu_add(f->st, "t", "s-a", 0, 1050, "m"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s-late", 1, 1000, "m"), SKP_OK); /* no sequence 0 */
    assert_int_equal(tu_add(f->st, "other", "s-x", 0, 900, "m"), SKP_OK);
    store_close(f->st);
    f->st = tu_open(f->db.path);
    assert_int_equal(scalar(f->st, "SELECT count(*) FROM segment_listing"), 4);

    /* Data written since: snapshots first or the SegmentObject first. */
    assert_int_equal(tu_add(f->st, "t", "s-c", 0, 1400, "m"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s-c", 0, 1400, "m"), SKP_OK); /* resent: ignored */
    struct store_span sp2 = sp;
    sp2.start_ms = 1000;
    struct store_segment early = {"s-early", "tr2", "svc", "i", &sp2, 1};
    assert_int_equal(store_insert_segments(f->st, &early, 1, 5000), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s-early", 0, 1500, "m"), SKP_OK); /* object's start */
    assert_int_equal(tu_add(f->st, "t", "s-d", 0, 1600, "m"), SKP_OK);
    struct store_span sp3 = sp;
    sp3.start_ms = 1001;
    struct store_segment d = {"s-d", "tr3", "svc", "i", &sp3, 1}; /* moves s-d to 1001 */
    assert_int_equal(store_insert_segments(f->st, &d, 1, 5000), SKP_OK);

    static const char *const want[] = {"s-early", "s-d", "s-a", "s-b", "s-obj", "s-c"};
    static const int64_t want_start[] = {1000, 1001, 1050, 1100, 1100, 1400};
    struct page_seen all;
    assert_int_equal(store_list_profiled_segments_page(f->st, "t", NULL, 0, page_cb,
                                                       memset(&all, 0, sizeof(all)), NULL),
                     SKP_OK);
    assert_int_equal(all.n, 6);
    for (size_t limit = 1; limit <= 7; limit++) {
        int pages = walk_pages(f->st, "t", limit, &all);
        assert_int_equal(pages, (int)((6 + limit - 1) / limit));
        assert_int_equal(all.n, 6);
        for (size_t i = 0; i < 6; i++) {
            assert_string_equal(all.id[i], want[i]);
            assert_int_equal(all.start[i], want_start[i]);
        }
    }
    assert_true(all.has_object[0] && all.has_object[1] && !all.has_object[2]);
    /* A cursor between rows, and one past the end. */
    struct store_segment_key key = {1100, "s-b"};
    struct page_seen pg = {0};
    bool more = true;
    assert_int_equal(store_list_profiled_segments_page(f->st, "t", &key, 10, page_cb, &pg, &more),
                     SKP_OK);
    assert_int_equal(pg.n, 2);
    assert_string_equal(pg.id[0], "s-obj");
    assert_false(more);
    key = (struct store_segment_key){5000, "z"};
    memset(&pg, 0, sizeof(pg));
    assert_int_equal(store_list_profiled_segments_page(f->st, "t", &key, 10, page_cb, &pg, &more),
                     SKP_OK);
    assert_int_equal(pg.n, 0);
    key.segment_id = NULL;
    assert_int_equal(store_list_profiled_segments_page(f->st, "t", &key, 10, page_cb, &pg, &more),
                     SKP_EINVAL);
    memset(&pg, 0, sizeof(pg));
    assert_int_equal(walk_pages(f->st, "other", 3, &pg), 1);
    assert_int_equal(pg.n, 1);

    /* A page is one seek of the index: no sort, no scan of the task's other rows. */
    sqlite3_stmt *s = NULL;
    assert_int_equal(
        sqlite3_prepare_v2(store__db(f->st),
                           "EXPLAIN QUERY PLAN SELECT l.segment_id FROM task_keys tk "
                           "JOIN segment_listing l ON l.task = tk.id LEFT JOIN segments g ON "
                           "g.seg = l.seg WHERE tk.task_id = 't' AND (l.start_ms, l.segment_id) > "
                           "(1, 'a') ORDER BY l.start_ms, l.segment_id LIMIT 3",
                           -1, &s, NULL),
        SQLITE_OK);
    bool seek = false;
    while (sqlite3_step(s) == SQLITE_ROW) {
        const char *plan = (const char *)sqlite3_column_text(s, 3);
        assert_null(strstr(plan, "TEMP B-TREE"));
        if (strstr(plan, "SEARCH l USING PRIMARY KEY (task=? AND"))
            seek = true;
    }
    sqlite3_finalize(s);
    assert_true(seek);

    /* Retention: a purged SegmentObject falls back to its first dump's time; purged snapshots
     * leave the listing. */
    assert_int_equal(scalar(f->st, "DELETE FROM segments WHERE seg = (SELECT id FROM segids "
                                   "WHERE segment_id = 's-d') RETURNING 1"),
                     1);
    assert_int_equal(walk_pages(f->st, "t", 2, &all), 3);
    assert_string_equal(all.id[0], "s-early");
    assert_string_equal(all.id[4], "s-c");
    assert_string_equal(all.id[5], "s-d");
    assert_int_equal(all.start[5], 1600);
    uint64_t n_del = 0;
    assert_int_equal(store_purge_before(f->st, INT64_MAX, &n_del), SKP_OK);
    assert_int_equal(scalar(f->st, "SELECT count(*) FROM segment_listing"), 0);
    assert_integrity(f->st);
}

static void wal_mode_is_on(void **state)
{
    struct fixture *f = *state;
    sqlite3_stmt *s = NULL;
    assert_int_equal(sqlite3_prepare_v2(store__db(f->st), "PRAGMA journal_mode", -1, &s, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(s, 0), "wal");
    sqlite3_finalize(s);
    assert_int_equal(scalar(f->st, "PRAGMA synchronous"), 1); /* NORMAL */
}

/* ---- failures ---- */

static void read_only_fails_cleanly(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(tu_add(f->st, "t", "s1", 0, 1000, "a,b"), SKP_OK);
    store_close(f->st);
    struct store_opts ro = {.read_only = true};
    assert_int_equal(store_open(f->db.path, &ro, &f->st), SKP_OK);
    char *fr[] = {"a", "new_frame"};
    struct store_snapshot v[] = {{"t", "s1", 1010, 1, fr, 2, 0, 0},
                                 {"t", "s2", 1010, 0, fr, 2, 0, 0}};
    size_t dup = 7;
    assert_int_equal(store_insert_snapshots(f->st, v, 2, &dup), SKP_EIO);
    assert_int_equal(dup, 0);
    struct store_segment seg = {0};
    seg.segment_id = "s1";
    struct store_segment *segs = &seg;
    assert_int_equal(store_insert_segments(f->st, segs, 1, 0), SKP_EIO);
    assert_int_equal(store_touch_instance(f->st, "svc", "i", 1), SKP_EIO);
    uint64_t n;
    assert_int_equal(store_purge_before(f->st, INT64_MAX, &n), SKP_EIO);
    /* reads work */
    struct seen s = {0};
    assert_int_equal(store_scan_task(f->st, "t", seen_cb, &s), SKP_OK);
    assert_int_equal(s.n, 1);
    store_close(f->st);
    /* nothing was written */
    f->st = tu_open(f->db.path);
    assert_int_equal(scalar(f->st, "SELECT count(*) FROM snapshots"), 1);
    assert_int_equal(scalar(f->st, "SELECT count(*) FROM frames"), 2);
    assert_int_equal(scalar(f->st, "SELECT count(*) FROM segids"), 1);

    /* read-only open of a missing file fails */
    char missing[400];
    snprintf(missing, sizeof(missing), "%s/none.db", f->db.dir);
    struct store *st = NULL;
    assert_int_equal(store_open(missing, &ro, &st), SKP_EIO);
    assert_null(st);
}

static void full_disk_rolls_back_whole_batch(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(tu_add(f->st, "t", "s1", 0, 1000, "a,b"), SKP_OK);
    int64_t pages = scalar(f->st, "PRAGMA page_count");
    char sql[64];
    snprintf(sql, sizeof(sql), "PRAGMA max_page_count = %lld", (long long)pages + 2);
    assert_int_equal(sqlite3_exec(store__db(f->st), sql, NULL, NULL, NULL), SQLITE_OK);

    /* a batch with many long distinct frames cannot fit in 2 more pages */
    enum { N = 200 };
    static char names[N][300];
    char *frames[N][2];
    struct store_snapshot v[N];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "frame_%d_%0250d", i, i);
        frames[i][0] = "a";
        frames[i][1] = names[i];
        v[i] = (struct store_snapshot){"t", "s2", 2000 + i, i, frames[i], 2, 0, 0};
    }
    size_t dup = 0;
    assert_int_equal(store_insert_snapshots(f->st, v, N, &dup), SKP_EIO);
    assert_int_equal(scalar(f->st, "SELECT count(*) FROM snapshots"), 1);
    assert_int_equal(scalar(f->st, "SELECT count(*) FROM frames"), 2);
    assert_int_equal(scalar(f->st, "SELECT count(*) FROM stacks"), 1);
    assert_int_equal(scalar(f->st, "SELECT count(*) FROM segids"), 1);
    assert_integrity(f->st);

    /* space comes back: the same batch now goes through, with no stale cached ids */
    assert_int_equal(
        sqlite3_exec(store__db(f->st), "PRAGMA max_page_count = 1073741823", NULL, NULL, NULL),
        SQLITE_OK);
    assert_int_equal(store_insert_snapshots(f->st, v, N, &dup), SKP_OK);
    assert_int_equal(scalar(f->st, "SELECT count(*) FROM snapshots"), N + 1);
    struct seen s = {0};
    assert_int_equal(store_scan_segment(f->st, "s2", 5, 5, seen_cb, &s), SKP_OK);
    assert_int_equal(s.n, 1);
    const uint32_t *ids;
    size_t cnt;
    assert_int_equal(store_get_stack(f->st, s.stack[0], &ids, &cnt), SKP_OK);
    assert_int_equal(cnt, 2);
    const char *sig;
    assert_int_equal(store_get_frame(f->st, ids[1], &sig), SKP_OK);
    assert_string_equal(sig, names[5]);
    assert_integrity(f->st);
}

/* alloc_fault_loop_over_insert_batch, one run: a fresh database, one batch insert with the k-th
 * allocation failing, then all or nothing stored and the reopened database whole. */
enum { INSERT_RUN_N = 24 };
struct insert_run {
    struct fixture *f;
    struct store_snapshot v[INSERT_RUN_N];
};

static void insert_setup(void *ctx, long k)
{
    (void)k;
    struct insert_run *r = ctx;
    tu_db_cleanup(&r->f->db);
    tu_db_init(&r->f->db);
    r->f->st = tu_open(r->f->db.path);
}

static skp_err insert_body(void *ctx, long k)
{
    (void)k;
    struct insert_run *r = ctx;
    size_t dup = 0;
    return store_insert_snapshots(r->f->st, r->v, INSERT_RUN_N, &dup);
}

static void insert_check(void *ctx, long k, skp_err err)
{
    (void)k;
    struct insert_run *r = ctx;
    struct store *st = r->f->st;
    size_t dup = 0;
    int64_t rows = scalar(st, "SELECT count(*) FROM snapshots");
    if (err == SKP_OK) {
        assert_int_equal(rows, INSERT_RUN_N);
    } else {
        assert_int_equal(rows, 0); /* all or nothing */
        assert_int_equal(store_insert_snapshots(st, r->v, INSERT_RUN_N, &dup), SKP_OK);
        assert_int_equal(scalar(st, "SELECT count(*) FROM snapshots"), INSERT_RUN_N);
    }
    assert_int_equal(scalar(st, "SELECT count(*) FROM stacks"), 14);
    assert_integrity(st);
    store_close(st);
    /* and the reopened database is whole */
    st = tu_open(r->f->db.path);
    assert_int_equal(scalar(st, "SELECT count(*) FROM snapshots"), INSERT_RUN_N);
    store_close(st);
    r->f->st = NULL;
}

static void alloc_fault_loop_over_insert_batch(void **state)
{
    struct fixture *f = *state;
    char names[INSERT_RUN_N][32];
    char *frames[INSERT_RUN_N][3];
    struct insert_run run = {.f = f};
    for (int i = 0; i < INSERT_RUN_N; i++) {
        snprintf(names[i], sizeof(names[i]), "fn_%d", i % 7);
        frames[i][0] = "root";
        frames[i][1] = names[i];
        frames[i][2] = i % 2 ? "leaf_a" : "leaf_b";
        run.v[i] = (struct store_snapshot){
            "task", i < INSERT_RUN_N / 2 ? "sa" : "sb", 1000 + i, i, frames[i], 3, 0, 0};
    }
    store_close(f->st);
    f->st = NULL;
    struct skp_alloc_fault_loop loop = {.body = insert_body,
                                        .setup = insert_setup,
                                        .check = insert_check,
                                        .ctx = &run,
                                        .max_runs = 4000};
    struct skp_alloc_fault_runs runs = skp_test_alloc_fault_loop(&loop);
    assert_true(runs.n_nomem > 0);
    assert_true(runs.n_ok > 0);
    f->st = tu_open(f->db.path);
}

/* ---- text hygiene ---- */

static void utf8_validation_table(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        bool valid;
    } cases[] = {
        {"plain", true},
        {"caf\xc3\xa9", true},
        {"\xe2\x82\xac", true},
        {"\xf0\x9f\x98\x80", true},
        {"\xc3", false},
        {"\xc0\xaf", false},
        {"\xed\xa0\x80", false},
        {"\xf4\x90\x80\x80", false},
        {"\xff", false},
        {"a\x80"
         "b",
         false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        assert_int_equal(skp_utf8_valid(cases[i].s, strlen(cases[i].s)), cases[i].valid);
    char *fixed = skp_utf8_sanitize("a\x80"
                                    "b\xc3");
    assert_string_equal(fixed, "a\xef\xbf\xbd"
                               "b\xef\xbf\xbd");
    skpx_free(fixed);
}

static void invalid_utf8_never_breaks_json(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(tu_add(f->st, "t", "s\xff", 0, 1000, "main,bad\xc3name"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s\xff", 1, 1010, "main,bad\xc3name"), SKP_OK);
    struct analysis *a = NULL;
    assert_int_equal(analyze_task(f->st, "t", NULL, &a), SKP_OK);
    assert_string_equal(a->trees[0].nodes[1].code_signature, "bad\xef\xbf\xbdname");
    json_t *j = analysis_to_json(a);
    assert_non_null(j);
    json_decref(j);
    analysis_free(a);

    struct store_span sp = {0};
    sp.operation = "/x\xfe";
    sp.start_ms = 990;
    sp.end_ms = 1100;
    struct store_span *spans = &sp;
    struct store_segment seg = {0};
    seg.segment_id = "s\xff";
    seg.trace_id = "tr\xff";
    seg.service = "svc\xff";
    seg.n_spans = 1;
    seg.spans = spans;
    struct store_segment *segs = &seg;
    assert_int_equal(store_insert_segments(f->st, segs, 1, 2000), SKP_OK);
    json_t *l = NULL;
    assert_int_equal(jl_segments(f->st, "t", &l), SKP_OK);
    assert_int_equal(json_array_size(l), 1);
    json_decref(l);
    assert_int_equal(store_touch_instance(f->st, "svc\xff", "i\xfe", 1), SKP_OK);
    struct store_kv props[] = {{"k\xff", "v\xff"}};
    assert_int_equal(store_upsert_instance(f->st, "svc\xff", "i\xfe", NULL, props, 1, 2), SKP_OK);
    assert_int_equal(jl_services(f->st, &l), SKP_OK);
    json_decref(l);
    assert_int_equal(jl_instances(f->st, "svc\xff", &l), SKP_OK);
    assert_int_equal(json_array_size(l), 1);
    json_decref(l);
    assert_int_equal(store_add_task_log(f->st, "t", "svc", "i\xfe", STORE_TASK_NOTIFIED, 5),
                     SKP_OK);
    assert_int_equal(jl_task_logs(f->st, "t", &l), SKP_OK);
    assert_int_equal(json_array_size(l), 1);
    json_decref(l);
}

static void unusable_files_are_refused(void **state)
{
    struct fixture *f = *state;
    char p[400];
    snprintf(p, sizeof(p), "%s/garbage.db", f->db.dir);
    FILE *fp = fopen(p, "wb");
    assert_non_null(fp);
    for (int i = 0; i < 4096; i++)
        fputc((i * 7919) & 0xff, fp);
    fclose(fp);
    struct store *st = (struct store *)1;
    assert_int_equal(store_open(p, NULL, &st), SKP_EIO);
    assert_null(st);
    unlink(p);
    snprintf(p, sizeof(p), "%s/no/such/dir/x.db", f->db.dir);
    assert_int_equal(store_open(p, NULL, &st), SKP_EIO);
    assert_null(st);
    assert_int_equal(store_open(NULL, NULL, &st), SKP_EINVAL);
}

static void nested_scan_cb(void *ud, const struct store_sample *s)
{
    struct store *st = ud;
    struct seen inner = {0};
    (void)s;
    assert_int_equal(store_scan_segment(st, "s1", 0, 10, seen_cb, &inner), SKP_ESTATE);
    assert_int_equal(store_scan_task(st, "t", seen_cb, &inner), SKP_ESTATE);
    const uint32_t *ids;
    size_t n;
    assert_int_equal(store_get_stack(st, s->stack, &ids, &n), SKP_OK);
}

static void nested_scans_refused(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(tu_add(f->st, "t", "s1", 0, 1000, "a,b"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s1", 1, 1010, "a,c"), SKP_OK);
    assert_int_equal(store_scan_task(f->st, "t", nested_scan_cb, f->st), SKP_OK);
    struct seen s = {0};
    assert_int_equal(store_scan_task(f->st, "t", seen_cb, &s), SKP_OK);
    assert_int_equal(s.n, 2);
}

static void committed_batch_survives_a_crash(void **state)
{
    struct fixture *f = *state;
    store_close(f->st);
    f->st = NULL;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct store *st = NULL;
        if (store_open(f->db.path, NULL, &st) != SKP_OK)
            _exit(2);
        for (int i = 0; i < 50; i++)
            if (tu_add(st, "t", "s1", i, 1000 + i, "a,b,c") != SKP_OK)
                _exit(3);
        /* acknowledged: die without closing (no checkpoint, WAL left behind) */
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    f->st = tu_open(f->db.path);
    assert_int_equal(scalar(f->st, "SELECT count(*) FROM snapshots"), 50);
    assert_integrity(f->st);
}

static void reader_connection_sees_committed_data(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(tu_add(f->st, "t", "s1", 0, 1000, "a,b"), SKP_OK);
    struct store_opts ro = {.read_only = true};
    struct store *reader = NULL;
    assert_int_equal(store_open(f->db.path, &ro, &reader), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s1", 1, 1010, "a,c"), SKP_OK);
    struct seen s = {0};
    assert_int_equal(store_scan_task(reader, "t", seen_cb, &s), SKP_OK);
    assert_int_equal(s.n, 2);
    const uint32_t *ids;
    size_t n;
    assert_int_equal(store_get_stack(reader, s.stack[1], &ids, &n), SKP_OK);
    const char *sig;
    assert_int_equal(store_get_frame(reader, ids[1], &sig), SKP_OK);
    assert_string_equal(sig, "c");
    store_close(reader);
    /* the writer is unaffected by the reader's close */
    assert_int_equal(tu_add(f->st, "t", "s1", 2, 1020, "a"), SKP_OK);
    assert_int_equal(scalar(f->st, "SELECT count(*) FROM snapshots"), 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(insert_duplicates_and_order, setup, teardown),
        cmocka_unit_test_setup_teardown(scan_task_orders_by_segment_and_sequence, setup, teardown),
        cmocka_unit_test_setup_teardown(stacks_are_deduplicated, setup, teardown),
        cmocka_unit_test_setup_teardown(profiled_segment_listing, setup, teardown),
        cmocka_unit_test_setup_teardown(segment_info_for_exports, setup, teardown),
        cmocka_unit_test_setup_teardown(tasks_for_agent_filtering, setup, teardown),
        cmocka_unit_test_setup_teardown(latest_task_before_and_get, setup, teardown),
        cmocka_unit_test_setup_teardown(task_logs, setup, teardown),
        cmocka_unit_test_setup_teardown(instances_upsert_and_properties, setup, teardown),
        cmocka_unit_test_setup_teardown(purge_removes_old_data_and_orphans, setup, teardown),
        cmocka_unit_test_setup_teardown(migrations_upgrade_and_reopen, setup, teardown),
        cmocka_unit_test_setup_teardown(weight_migration_reads_one, setup, teardown),
        cmocka_unit_test_setup_teardown(wal_mode_is_on, setup, teardown),
        cmocka_unit_test_setup_teardown(read_only_fails_cleanly, setup, teardown),
        cmocka_unit_test_setup_teardown(full_disk_rolls_back_whole_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(alloc_fault_loop_over_insert_batch, setup, teardown),
        cmocka_unit_test(utf8_validation_table),
        cmocka_unit_test_setup_teardown(committed_batch_survives_a_crash, setup, teardown),
        cmocka_unit_test_setup_teardown(reader_connection_sees_committed_data, setup, teardown),
        cmocka_unit_test_setup_teardown(nested_scans_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(unusable_files_are_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(invalid_utf8_never_breaks_json, setup, teardown),
        cmocka_unit_test_setup_teardown(segment_pages_keyset, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
