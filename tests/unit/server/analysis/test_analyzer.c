/* Unit tests for src/server/analysis/analyzer.c over a real SQLite store: the spec's worked example
 * (§5.6) with per-interval durations, per-segment sequences, de-duplication of overlapping
 * windows, sequence windows, missing and late dumps, empty stacks, several roots, the snapshot
 * cap and its tip, JSON shape; line-changing loops and alternating functions whose truth is known
 * by construction (and OAP's run estimate, still selectable for bench/accuracy, getting them
 * wrong); function granularity; recursion. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/sat.h"
#include "server/analysis/analyzer.h"
#include "harness/skp_alloc_faults.h"
#include "../store/store_test_util.h"

struct expect_node {
    uint32_t id;
    uint32_t parent;
    const char *sig;
    uint64_t count;
    int64_t duration;
    int64_t self;
};

static void check_tree(const struct analysis_tree *t, const struct expect_node *e, size_t n)
{
    assert_int_equal(t->n_nodes, n);
    for (size_t i = 0; i < n; i++) {
        const struct analysis_node *nd = &t->nodes[i];
        assert_int_equal(nd->id, e[i].id);
        assert_int_equal(nd->parent_id, e[i].parent);
        assert_string_equal(nd->code_signature, e[i].sig);
        assert_int_equal(nd->count, e[i].count);
        assert_int_equal(nd->duration, e[i].duration);
        assert_int_equal(nd->duration_child_excluded, e[i].self);
    }
}

/* The spec's table: one segment, dumps every 10 ms. */
static void add_worked_example(struct store *st, const char *task, const char *seg)
{
    assert_int_equal(tu_add(st, task, seg, 0, 1000, "A,B,C"), SKP_OK);
    assert_int_equal(tu_add(st, task, seg, 1, 1010, "A,B,C"), SKP_OK);
    assert_int_equal(tu_add(st, task, seg, 2, 1020, "A,B,D"), SKP_OK);
    assert_int_equal(tu_add(st, task, seg, 3, 1030, "A,B"), SKP_OK);
    assert_int_equal(tu_add(st, task, seg, 4, 1040, "A,B,C"), SKP_OK);
}

/* Every dump stands for 10 ms (the last one for the typical period, 10 ms). OAP's runs gave
 * A 40, B 40 (self 30), C 10, D 0. */
static const struct expect_node k_worked[] = {
    {1, 0, "A", 5, 50, 0},
    {2, 1, "B", 5, 50, 10},
    {3, 2, "C", 3, 30, 30},
    {4, 2, "D", 1, 10, 10},
};

static void worked_example_exact(void **state)
{
    struct fixture *f = *state;
    add_worked_example(f->st, "t1", "s1");
    struct analyze_query q = {"s1", 1000, 1040};
    struct analysis *a = NULL;
    assert_int_equal(analyze_segments(f->st, &q, 1, NULL, &a), SKP_OK);
    assert_null(a->tip);
    assert_int_equal(a->n_trees, 1);
    assert_int_equal(a->n_snapshots, 5);
    check_tree(&a->trees[0], k_worked, 4);
    /* tree links: A → B → {C, D} */
    const struct analysis_node *n = a->trees[0].nodes;
    assert_int_equal(n[0].first_child, 1);
    assert_int_equal(n[0].next_sibling, UINT32_MAX);
    assert_int_equal(n[1].first_child, 2);
    assert_int_equal(n[2].next_sibling, 3);
    assert_int_equal(n[3].next_sibling, UINT32_MAX);
    assert_int_equal(n[3].first_child, UINT32_MAX);
    analysis_free(a);

    /* whole segment and whole task give the same tree */
    assert_int_equal(analyze_segment_all(f->st, "s1", NULL, &a), SKP_OK);
    check_tree(&a->trees[0], k_worked, 4);
    analysis_free(a);
    assert_int_equal(analyze_task(f->st, "t1", NULL, &a), SKP_OK);
    check_tree(&a->trees[0], k_worked, 4);
    analysis_free(a);
}

static void segments_keep_their_own_sequences(void **state)
{
    struct fixture *f = *state;
    /* two segments with the same sequence numbers: OAP would collapse them to 3 */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(tu_add(f->st, "t", "s1", i, 1000 + 10 * i, "A,B"), SKP_OK);
        assert_int_equal(tu_add(f->st, "t", "s2", i, 1005 + 10 * i, "A,C"), SKP_OK);
    }
    struct analysis *a = NULL;
    assert_int_equal(analyze_task(f->st, "t", NULL, &a), SKP_OK);
    const struct expect_node e[] = {
        {1, 0, "A", 6, 60, 0},
        {2, 1, "B", 3, 30, 30},
        {3, 1, "C", 3, 30, 30},
    };
    assert_int_equal(a->n_trees, 1);
    check_tree(&a->trees[0], e, 3);
    analysis_free(a);

    /* both windows in one request */
    struct analyze_query q[] = {{"s1", 0, 5000}, {"s2", 0, 5000}};
    assert_int_equal(analyze_segments(f->st, q, 2, NULL, &a), SKP_OK);
    check_tree(&a->trees[0], e, 3);
    analysis_free(a);
}

static void runs_never_join_across_segments(void **state)
{
    struct fixture *f = *state;
    /* s1 has seq 0,1; s2 has seq 2,3 far later: joining them would give the 4 s between */
    assert_int_equal(tu_add(f->st, "t", "s1", 0, 1000, "A"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s1", 1, 1010, "A"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s2", 2, 5000, "A"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s2", 3, 5010, "A"), SKP_OK);
    struct analysis *a = NULL;
    assert_int_equal(analyze_task(f->st, "t", NULL, &a), SKP_OK);
    const struct expect_node e[] = {{1, 0, "A", 4, 40, 40}};
    check_tree(&a->trees[0], e, 1);
    analysis_free(a);
}

static void overlapping_windows_counted_once(void **state)
{
    struct fixture *f = *state;
    add_worked_example(f->st, "t1", "s1");
    struct analyze_query q[] = {{"s1", 1000, 1020}, {"s1", 1010, 1040}, {"s1", 1000, 1040}};
    struct analysis *a = NULL;
    assert_int_equal(analyze_segments(f->st, q, 3, NULL, &a), SKP_OK);
    assert_int_equal(a->n_snapshots, 5);
    check_tree(&a->trees[0], k_worked, 4);
    analysis_free(a);
}

static void window_by_time_then_fetch_by_sequence(void **state)
{
    struct fixture *f = *state;
    /* seq 2 was dumped at a time outside the window but lies between in-window sequences */
    assert_int_equal(tu_add(f->st, "t", "s1", 0, 1000, "A,X"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s1", 1, 1010, "A,B"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s1", 2, 9000, "A,B"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s1", 3, 1030, "A,B"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s1", 4, 1040, "A,Y"), SKP_OK);
    int32_t lo = -1, hi = -1;
    assert_int_equal(store_segment_seq_window(f->st, "s1", 1005, 1035, &lo, &hi), SKP_OK);
    assert_int_equal(lo, 1);
    assert_int_equal(hi, 3);
    struct analyze_query q = {"s1", 1005, 1035};
    struct analysis *a = NULL;
    assert_int_equal(analyze_segments(f->st, &q, 1, NULL, &a), SKP_OK);
    /* seq 1..3 all used (count 3). The only forward step, 1010 -> 9000, is the typical period
     * of this (absurd) clock; the step back gets that period too: 3 x 7990 */
    const struct expect_node e[] = {{1, 0, "A", 3, 23970, 0}, {2, 1, "B", 3, 23970, 23970}};
    check_tree(&a->trees[0], e, 2);
    analysis_free(a);
}

static void missing_dump_is_capped(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(tu_add(f->st, "t", "s1", 0, 0, "A,B"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s1", 1, 10, "A,B"), SKP_OK);
    /* seq 2 lost in transit */
    assert_int_equal(tu_add(f->st, "t", "s1", 3, 30, "A,B"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s1", 4, 40, "A"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s1", 5, 50, "A,B"), SKP_OK);
    struct analysis *a = NULL;
    assert_int_equal(analyze_segment_all(f->st, "s1", NULL, &a), SKP_OK);
    /* typical period 10; seq 1 stands for 10 ms, not the 20 up to seq 3 (the lost dump's stack
     * is unknown): A 5 x 10, B 4 x 10 (seq 0, 1, 3, 5), A's self = seq 4 */
    const struct expect_node e[] = {{1, 0, "A", 5, 50, 10}, {2, 1, "B", 4, 40, 40}};
    check_tree(&a->trees[0], e, 2);
    analysis_free(a);
    /* OAP's runs: A 0-1 (10), 3-5 (20) = 30; B 0-1 (10), 3 (0), 5 (0) = 10 */
    struct analyze_opts old = {.estimator = ANALYZE_EST_OAP_RUNS};
    assert_int_equal(analyze_segment_all(f->st, "s1", &old, &a), SKP_OK);
    const struct expect_node e_old[] = {{1, 0, "A", 5, 30, 20}, {2, 1, "B", 4, 10, 10}};
    check_tree(&a->trees[0], e_old, 2);
    analysis_free(a);
}

static void empty_stacks_dropped(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(tu_add(f->st, "t", "s1", 0, 0, "A,B"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s1", 1, 10, ""), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s1", 2, 20, "A,B"), SKP_OK);
    struct analysis *a = NULL;
    assert_int_equal(analyze_segment_all(f->st, "s1", NULL, &a), SKP_OK);
    assert_int_equal(a->n_snapshots, 2);
    /* the empty dump at seq 1 is dropped, but still ends seq 0's interval: 10 + 10 */
    const struct expect_node e[] = {{1, 0, "A", 2, 20, 0}, {2, 1, "B", 2, 20, 20}};
    check_tree(&a->trees[0], e, 2);
    analysis_free(a);
}

static void several_roots_several_trees(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(tu_add(f->st, "t", "s1", 0, 0, "X,Y"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s1", 1, 10, "A,B"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s1", 2, 20, "A,B"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s1", 3, 30, "A,C"), SKP_OK);
    struct analysis *a = NULL;
    assert_int_equal(analyze_segment_all(f->st, "s1", NULL, &a), SKP_OK);
    assert_int_equal(a->n_trees, 2);
    /* sorted by total count: A (3) before X (1); ids restart at 1 in each tree */
    const struct expect_node ea[] = {
        {1, 0, "A", 3, 30, 0}, {2, 1, "B", 2, 20, 20}, {3, 1, "C", 1, 10, 10}};
    const struct expect_node ex[] = {{1, 0, "X", 1, 10, 0}, {2, 1, "Y", 1, 10, 10}};
    check_tree(&a->trees[0], ea, 3);
    check_tree(&a->trees[1], ex, 2);
    analysis_free(a);
}

static void bfs_ids_and_first_seen_children(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(tu_add(f->st, "t", "s1", 0, 0, "A,B,D"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s1", 1, 10, "A,C,B"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s1", 2, 20, "A,B,E"), SKP_OK);
    struct analysis *a = NULL;
    assert_int_equal(analyze_segment_all(f->st, "s1", NULL, &a), SKP_OK);
    /* BFS: A1; B2 C3 (first seen order); D4 E5 under B; B6 under C (same signature, other
     * parent = other node) */
    const struct expect_node e[] = {
        {1, 0, "A", 3, 30, 0},  {2, 1, "B", 2, 20, 0},  {3, 1, "C", 1, 10, 0},
        {4, 2, "D", 1, 10, 10}, {5, 2, "E", 1, 10, 10}, {6, 3, "B", 1, 10, 10},
    };
    check_tree(&a->trees[0], e, 6);
    analysis_free(a);
}

static void cap_sets_oap_tip(void **state)
{
    struct fixture *f = *state;
    for (int i = 0; i < 10; i++)
        assert_int_equal(tu_add(f->st, "t", "s1", i, 1000 + 10 * i, "A,B"), SKP_OK);
    struct analyze_opts o = {.max_snapshots = 4};
    struct analyze_query q = {"s1", 0, 5000};
    struct analysis *a = NULL;
    assert_int_equal(analyze_segments(f->st, &q, 1, &o, &a), SKP_OK);
    assert_string_equal(a->tip, "Out of snapshot analyze limit, 10 snapshots found, but analysis "
                                "first 4 snapshots only.");
    assert_int_equal(a->n_snapshots, 4);
    const struct expect_node e[] = {{1, 0, "A", 4, 40, 0}, {2, 1, "B", 4, 40, 40}};
    check_tree(&a->trees[0], e, 2);
    analysis_free(a);

    /* the budget spans queries: the second window gets what the first left */
    struct analyze_query q2[] = {{"s1", 1000, 1020}, {"s1", 1050, 1090}};
    assert_int_equal(analyze_segments(f->st, q2, 2, &o, &a), SKP_OK);
    assert_string_equal(a->tip, "Out of snapshot analyze limit, 8 snapshots found, but analysis "
                                "first 4 snapshots only.");
    assert_int_equal(a->n_snapshots, 4); /* seq 0,1,2 + seq 5 */
    analysis_free(a);

    assert_int_equal(analyze_task(f->st, "t", &o, &a), SKP_OK);
    assert_non_null(a->tip);
    assert_int_equal(a->n_snapshots, 4);
    analysis_free(a);

    /* unlimited (default): no tip */
    assert_int_equal(analyze_segments(f->st, &q, 1, NULL, &a), SKP_OK);
    assert_null(a->tip);
    assert_int_equal(a->n_snapshots, 10);
    analysis_free(a);
}

static void data_not_found(void **state)
{
    struct fixture *f = *state;
    add_worked_example(f->st, "t1", "s1");
    struct analyze_query q[] = {{"nope", 0, 5000}, {"s1", 5000, 6000}};
    struct analysis *a = NULL;
    assert_int_equal(analyze_segments(f->st, q, 2, NULL, &a), SKP_OK);
    assert_string_equal(a->tip, "Data not found");
    assert_int_equal(a->n_trees, 0);
    json_t *j = analysis_to_json(a);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "tip")), "Data not found");
    assert_int_equal(json_array_size(json_object_get(j, "trees")), 0);
    json_decref(j);
    analysis_free(a);

    assert_int_equal(analyze_task(f->st, "no-such-task", NULL, &a), SKP_OK);
    assert_string_equal(a->tip, "Data not found");
    analysis_free(a);
    assert_int_equal(analyze_segment_all(f->st, "nope", NULL, &a), SKP_OK);
    assert_string_equal(a->tip, "Data not found");
    analysis_free(a);
}

static void json_shape(void **state)
{
    struct fixture *f = *state;
    add_worked_example(f->st, "t1", "s1");
    struct analysis *a = NULL;
    assert_int_equal(analyze_segment_all(f->st, "s1", NULL, &a), SKP_OK);
    json_t *j = analysis_to_json(a);
    analysis_free(a);
    assert_non_null(j);
    assert_true(json_is_null(json_object_get(j, "tip")));
    json_t *trees = json_object_get(j, "trees");
    assert_int_equal(json_array_size(trees), 1);
    json_t *el = json_object_get(json_array_get(trees, 0), "elements");
    assert_int_equal(json_array_size(el), 4);
    json_t *b = json_array_get(el, 1);
    assert_true(json_is_integer(json_object_get(b, "id")));
    assert_int_equal(json_integer_value(json_object_get(b, "id")), 2);
    assert_int_equal(json_integer_value(json_object_get(b, "parentId")), 1);
    assert_string_equal(json_string_value(json_object_get(b, "codeSignature")), "B");
    assert_int_equal(json_integer_value(json_object_get(b, "duration")), 50);
    assert_int_equal(json_integer_value(json_object_get(b, "durationChildExcluded")), 10);
    assert_int_equal(json_integer_value(json_object_get(b, "count")), 5);
    json_decref(j);
}

static void signatures_outlive_the_store(void **state)
{
    struct fixture *f = *state;
    add_worked_example(f->st, "t1", "s1");
    struct analysis *a = NULL;
    assert_int_equal(analyze_segment_all(f->st, "s1", NULL, &a), SKP_OK);
    store_close(f->st);
    f->st = tu_open(f->db.path);
    assert_string_equal(a->trees[0].nodes[3].code_signature, "D");
    analysis_free(a);
}

/* alloc_faults_never_crash, one run: a fresh store each run, so the store's caches are cold
 * too; the analysis of the k-th failing allocation is checked, then both are closed. */
struct analyze_run {
    struct fixture *f;
    struct analysis *a;
};

static void analyze_setup(void *ctx, long k)
{
    (void)k;
    struct analyze_run *r = ctx;
    r->f->st = tu_open(r->f->db.path);
    r->a = NULL;
}

static skp_err analyze_body(void *ctx, long k)
{
    struct analyze_run *r = ctx;
    struct analyze_opts o = {.by_function = (k & 1) != 0}; /* both paths; same tree here */
    return analyze_task(r->f->st, "t1", &o, &r->a);
}

static void analyze_check(void *ctx, long k, skp_err err)
{
    (void)k;
    struct analyze_run *r = ctx;
    struct analysis *a = r->a;
    if (err == SKP_OK) {
        assert_non_null(a);
        assert_int_equal(a->n_snapshots, 10);
        assert_int_equal(a->n_trees, 1);
        assert_int_equal(a->trees[0].nodes[0].count, 10);
        assert_int_equal(a->trees[0].nodes[0].duration, 100);
        assert_string_equal(a->trees[0].nodes[3].code_signature, "D");
    } else {
        assert_null(a);
    }
    analysis_free(a);
    store_close(r->f->st);
    r->f->st = NULL;
}

static void alloc_faults_never_crash(void **state)
{
    struct fixture *f = *state;
    add_worked_example(f->st, "t1", "s1");
    add_worked_example(f->st, "t1", "s2");
    store_close(f->st);
    struct analyze_run run = {.f = f};
    struct skp_alloc_fault_loop loop = {.body = analyze_body,
                                        .setup = analyze_setup,
                                        .check = analyze_check,
                                        .ctx = &run,
                                        .max_runs = 4000};
    struct skp_alloc_fault_runs runs = skp_test_alloc_fault_loop(&loop);
    assert_true(runs.n_ok > 0 && runs.n_nomem > 0);
    f->st = tu_open(f->db.path);
}

static void streamed_scans_cap_and_dedupe(void **state)
{
    struct fixture *f = *state;
    /* the same segment's dumps resent under a second task id: one segment, counted once */
    for (int i = 0; i < 6; i++) {
        assert_int_equal(tu_add(f->st, "t1", "s1", i, 1000 + 10 * i, "A,B"), SKP_OK);
        assert_int_equal(tu_add(f->st, "t2", "s1", i, 1000 + 10 * i, "A,B"), SKP_OK);
    }
    struct analysis *a = NULL;
    assert_int_equal(analyze_segment_all(f->st, "s1", NULL, &a), SKP_OK);
    assert_int_equal(a->n_snapshots, 6);
    const struct expect_node e[] = {{1, 0, "A", 6, 60, 0}, {2, 1, "B", 6, 60, 60}};
    check_tree(&a->trees[0], e, 2);
    analysis_free(a);
    struct analyze_opts o = {.max_snapshots = 5};
    assert_int_equal(analyze_segment_all(f->st, "s1", &o, &a), SKP_OK);
    assert_string_equal(a->tip, "Out of snapshot analyze limit, 6 snapshots found, but analysis "
                                "first 5 snapshots only.");
    assert_int_equal(a->n_snapshots, 5);
    assert_int_equal(a->trees[0].nodes[0].duration, 50);
    analysis_free(a);
    o.max_snapshots = 6;
    assert_int_equal(analyze_task(f->st, "t2", &o, &a), SKP_OK);
    assert_null(a->tip);
    assert_int_equal(a->n_snapshots, 6);
    analysis_free(a);
}

/* Issue 15, finding 12: agent clocks at the ends of int64. Consecutive dumps at INT64_MIN and
 * INT64_MAX made `time - last_time` overflow (UBSan aborted; release said duration -1); steps,
 * periods and durations saturate at INT64_MAX, and self = duration - children saturates too. */
static void extreme_times_saturate(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(tu_add(f->st, "t1", "s1", 0, INT64_MIN, "A,B"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t1", "s1", 1, INT64_MAX, "A,B"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t1", "s1", 2, INT64_MIN, "A,B"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t1", "s1", 3, INT64_MAX, "A"), SKP_OK);
    struct analysis *a = NULL;
    assert_int_equal(analyze_task(f->st, "t1", NULL, &a), SKP_OK);
    assert_int_equal(a->n_trees, 1);
    const struct analysis_node *n = a->trees[0].nodes;
    assert_int_equal(a->trees[0].n_nodes, 2);
    /* steps MAX - MIN -> MAX, MIN - MAX -> MIN (the clock went back: the typical period, MAX),
     * MAX - MIN -> MAX: every interval is MAX, every sum saturates; A's self = MAX - MAX. */
    assert_int_equal(n[0].duration, INT64_MAX);
    assert_int_equal(n[0].duration_child_excluded, 0);
    assert_int_equal(n[1].duration, INT64_MAX);
    assert_int_equal(n[1].duration_child_excluded, INT64_MAX);
    assert_int_equal(n[1].count, 3);
    analysis_free(a);

    struct analyze_query q = {"s1", INT64_MIN, INT64_MAX};
    assert_int_equal(analyze_segments(f->st, &q, 1, NULL, &a), SKP_OK);
    assert_int_equal(a->n_snapshots, 4);
    analysis_free(a);

    /* two dumps, MIN then MAX: the duration is INT64_MAX, not -1 */
    assert_int_equal(tu_add(f->st, "t2", "s2", 0, INT64_MIN, "X"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t2", "s2", 1, INT64_MAX, "X"), SKP_OK);
    assert_int_equal(analyze_task(f->st, "t2", NULL, &a), SKP_OK);
    assert_int_equal(a->trees[0].nodes[0].duration, INT64_MAX);
    assert_int_equal(a->trees[0].nodes[0].duration_child_excluded, INT64_MAX);
    analysis_free(a);
}

/* The node of `sig` under `parent_id` (0 = a root) in tree t; fails the test when missing. */
static const struct analysis_node *find_node(const struct analysis_tree *t, uint32_t parent_id,
                                             const char *sig)
{
    for (size_t i = 0; i < t->n_nodes; i++)
        if (t->nodes[i].parent_id == parent_id && strcmp(t->nodes[i].code_signature, sig) == 0)
            return &t->nodes[i];
    fail_msg("no node %s under %u", sig, parent_id);
    return NULL;
}

/* A handler calls work(), which runs a loop whose line changes on every dump for 300 ms
 * (30 dumps, 10 ms apart) and then sleeps 200 ms. Truth: work 500, the loop 300, the sleep 200,
 * work's own line nothing. OAP's runs lose the loop's time to work's line. */
static void add_loop_workload(struct store *st, const char *seg)
{
    static const char *const loop[] = {
        "app.py.handler: 5,app.py.work: 12,app.py.cpu_loop: 20",
        "app.py.handler: 5,app.py.work: 12,app.py.cpu_loop: 21",
        "app.py.handler: 5,app.py.work: 12,app.py.cpu_loop: 22",
    };
    int seq = 0;
    for (int i = 0; i < 30; i++, seq++)
        assert_int_equal(tu_add(st, "t", seg, seq, 1000 + 10 * seq, loop[i % 3]), SKP_OK);
    for (int i = 0; i < 20; i++, seq++)
        assert_int_equal(tu_add(st, "t", seg, seq, 1000 + 10 * seq,
                                "app.py.handler: 5,app.py.work: 13,app.py.sleeper: 30"),
                         SKP_OK);
}

static void line_changing_loop_truth(void **state)
{
    struct fixture *f = *state;
    add_loop_workload(f->st, "s1");
    struct analysis *a = NULL;
    assert_int_equal(analyze_segment_all(f->st, "s1", NULL, &a), SKP_OK);
    const struct analysis_tree *t = &a->trees[0];
    const struct analysis_node *h = find_node(t, 0, "app.py.handler: 5");
    const struct analysis_node *w12 = find_node(t, h->id, "app.py.work: 12");
    const struct analysis_node *w13 = find_node(t, h->id, "app.py.work: 13");
    assert_int_equal(h->duration, 500);
    assert_int_equal(w12->duration, 300);
    assert_int_equal(w12->duration_child_excluded, 0);
    assert_int_equal(w13->duration, 200);
    assert_int_equal(w13->duration_child_excluded, 0);
    for (int line = 20; line <= 22; line++) {
        char sig[64];
        snprintf(sig, sizeof(sig), "app.py.cpu_loop: %d", line);
        const struct analysis_node *l = find_node(t, w12->id, sig);
        assert_int_equal(l->count, 10);
        assert_int_equal(l->duration, 100);
        assert_int_equal(l->duration_child_excluded, 100);
    }
    assert_int_equal(find_node(t, w13->id, "app.py.sleeper: 30")->duration, 200);
    analysis_free(a);

    /* OAP's runs: each loop line is an isolated dump (0 ms), work's line keeps 290 ms as self */
    struct analyze_opts old = {.estimator = ANALYZE_EST_OAP_RUNS};
    assert_int_equal(analyze_segment_all(f->st, "s1", &old, &a), SKP_OK);
    t = &a->trees[0];
    h = find_node(t, 0, "app.py.handler: 5");
    w12 = find_node(t, h->id, "app.py.work: 12");
    assert_int_equal(w12->duration, 290);
    assert_int_equal(w12->duration_child_excluded, 290);
    assert_int_equal(find_node(t, w12->id, "app.py.cpu_loop: 20")->duration, 0);
    analysis_free(a);
}

/* By function: the loop's lines are one node, work's two lines another; durations computed on
 * that tree (not sums of the line nodes' numbers). Native signatures keep their file. */
static void function_granularity(void **state)
{
    struct fixture *f = *state;
    add_loop_workload(f->st, "s1");
    for (int i = 0; i < 4; i++)
        assert_int_equal(tu_add(f->st, "t", "s2", i, 5000 + 10 * i,
                                i % 2 ? "main (demo.c:40),spin (demo.c:12)"
                                      : "main (demo.c:41),spin (demo.c:13)"),
                         SKP_OK);
    struct analyze_opts o = {.by_function = true};
    struct analysis *a = NULL;
    assert_int_equal(analyze_segment_all(f->st, "s1", &o, &a), SKP_OK);
    const struct expect_node e[] = {
        {1, 0, "app.py.handler", 50, 500, 0},
        {2, 1, "app.py.work", 50, 500, 0},
        {3, 2, "app.py.cpu_loop", 30, 300, 300},
        {4, 2, "app.py.sleeper", 20, 200, 200},
    };
    assert_int_equal(a->n_trees, 1);
    check_tree(&a->trees[0], e, 4);
    analysis_free(a);

    /* OAP's runs on the function tree: the loop is one run now (290), the sleep too (190) */
    o.estimator = ANALYZE_EST_OAP_RUNS;
    assert_int_equal(analyze_segment_all(f->st, "s1", &o, &a), SKP_OK);
    assert_int_equal(a->trees[0].nodes[2].duration, 290);
    analysis_free(a);

    o.estimator = ANALYZE_EST_INTERVALS;
    assert_int_equal(analyze_segment_all(f->st, "s2", &o, &a), SKP_OK);
    const struct expect_node en[] = {
        {1, 0, "main (demo.c)", 4, 40, 0},
        {2, 1, "spin (demo.c)", 4, 40, 40},
    };
    check_tree(&a->trees[0], en, 2);
    analysis_free(a);
}

/* f() alternates g() and h(), each 1 ms at a time, dumped every 10 ms at a phase that makes
 * the dumps alternate irregularly: g on 6 of 10 dumps, in runs that OAP's estimate splits. */
static void alternating_functions_truth(void **state)
{
    struct fixture *f = *state;
    static const char pattern[] = "gghgghghgh"; /* g 6, h 4 per 10 dumps */
    for (int i = 0; i < 40; i++)
        assert_int_equal(tu_add(f->st, "t", "s1", i, 2000 + 10 * i,
                                pattern[i % 10] == 'g' ? "m.py.do_GET: 3,m.py.f: 8,m.py.g: 14"
                                                       : "m.py.do_GET: 3,m.py.f: 9,m.py.h: 18"),
                         SKP_OK);
    struct analyze_opts o = {.by_function = true};
    struct analysis *a = NULL;
    assert_int_equal(analyze_segment_all(f->st, "s1", &o, &a), SKP_OK);
    const struct expect_node e[] = {
        {1, 0, "m.py.do_GET", 40, 400, 0},
        {2, 1, "m.py.f", 40, 400, 0},
        {3, 2, "m.py.g", 24, 240, 240},
        {4, 2, "m.py.h", 16, 160, 160},
    };
    check_tree(&a->trees[0], e, 4);
    analysis_free(a);
    /* OAP's runs undercount both and hand the rest to do_GET's and f's own lines */
    o.estimator = ANALYZE_EST_OAP_RUNS;
    assert_int_equal(analyze_segment_all(f->st, "s1", &o, &a), SKP_OK);
    assert_true(a->trees[0].nodes[2].duration < 200);
    assert_true(a->trees[0].nodes[3].duration < 100);
    assert_true(a->trees[0].nodes[1].duration_child_excluded > 100);
    analysis_free(a);
}

/* A dump that comes far later than the segment's period (the sampler was starved): with the
 * same stack on both sides the step is the stack's; with different stacks each side gets
 * half of it. */
static void late_dump_split_or_bridged(void **state)
{
    struct fixture *f = *state;
    int64_t t[] = {0, 10, 20, 30, 250, 260, 270};
    for (int i = 0; i < 7; i++)
        assert_int_equal(tu_add(f->st, "t", "s1", i, t[i], i == 3 ? "A,B" : "A"), SKP_OK);
    struct analysis *a = NULL;
    assert_int_equal(analyze_segment_all(f->st, "s1", NULL, &a), SKP_OK);
    /* B's dump (seq 3) is followed 220 ms later by A: 110 each; the root keeps all 280 ms */
    const struct expect_node e[] = {{1, 0, "A", 7, 280, 170}, {2, 1, "B", 1, 110, 110}};
    check_tree(&a->trees[0], e, 2);
    analysis_free(a);
    /* the same stack on both sides of a late dump: the whole step (B 10 + 200 + 10) */
    int64_t t3[] = {0, 10, 20, 220, 230};
    for (int i = 0; i < 5; i++)
        assert_int_equal(tu_add(f->st, "t", "s3", i, t3[i], i >= 2 ? "A,B" : "A"), SKP_OK);
    assert_int_equal(analyze_segment_all(f->st, "s3", NULL, &a), SKP_OK);
    const struct expect_node e3[] = {{1, 0, "A", 5, 240, 20}, {2, 1, "B", 3, 220, 220}};
    check_tree(&a->trees[0], e3, 2);
    analysis_free(a);
    /* a missing dump in such a gap (a sequence number skipped): capped, whatever the stacks */
    assert_int_equal(tu_add(f->st, "t", "s4", 0, 0, "A,B"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s4", 1, 10, "A,B"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s4", 3, 200, "A,B"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s4", 4, 210, "A,B"), SKP_OK);
    assert_int_equal(analyze_segment_all(f->st, "s4", NULL, &a), SKP_OK);
    const struct expect_node e4[] = {{1, 0, "A", 4, 40, 0}, {2, 1, "B", 4, 40, 40}};
    check_tree(&a->trees[0], e4, 2);
    analysis_free(a);
    /* a step up to twice the period is taken whole (the sampler's jitter) */
    assert_int_equal(tu_add(f->st, "t", "s2", 0, 0, "A"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s2", 1, 10, "A"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s2", 2, 20, "A,B"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s2", 3, 40, "A"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s2", 4, 50, "A"), SKP_OK);
    assert_int_equal(analyze_segment_all(f->st, "s2", NULL, &a), SKP_OK);
    const struct expect_node e2[] = {{1, 0, "A", 5, 60, 40}, {2, 1, "B", 1, 20, 20}};
    check_tree(&a->trees[0], e2, 2);
    analysis_free(a);
}

/* A segment with a single dump has no period of its own: it stands for its task's dump period
 * (20 ms here), in every analysis route. */
static void single_dump_gets_task_period(void **state)
{
    struct fixture *f = *state;
    struct store_task t = {.id = "tp",
                           .service = "svc",
                           .endpoint = "/e",
                           .start_time = 1000,
                           .duration_min = 5,
                           .dump_period = 20,
                           .max_sampling_count = 5,
                           .create_time = 900};
    assert_int_equal(store_insert_task(f->st, &t), SKP_OK);
    assert_int_equal(tu_add(f->st, "tp", "s1", 0, 1500, "A,B"), SKP_OK);
    struct analysis *a = NULL;
    const struct expect_node e[] = {{1, 0, "A", 1, 20, 0}, {2, 1, "B", 1, 20, 20}};
    assert_int_equal(analyze_segment_all(f->st, "s1", NULL, &a), SKP_OK);
    check_tree(&a->trees[0], e, 2);
    analysis_free(a);
    assert_int_equal(analyze_task(f->st, "tp", NULL, &a), SKP_OK);
    check_tree(&a->trees[0], e, 2);
    analysis_free(a);
    struct analyze_query q = {"s1", 0, 5000};
    assert_int_equal(analyze_segments(f->st, &q, 1, NULL, &a), SKP_OK);
    check_tree(&a->trees[0], e, 2);
    analysis_free(a);
    /* without a known task: 0 (nothing to go by) */
    assert_int_equal(tu_add(f->st, "unknown", "s9", 0, 1500, "X"), SKP_OK);
    assert_int_equal(analyze_segment_all(f->st, "s9", NULL, &a), SKP_OK);
    assert_int_equal(a->trees[0].nodes[0].duration, 0);
    assert_int_equal(a->trees[0].nodes[0].count, 1);
    analysis_free(a);
}

/* A recursive function: each level is its own node (a node is on a stack's path once), so
 * every level gets each dump's interval once; by function the levels stay apart too. */
static void recursion_counted_once_per_node(void **state)
{
    struct fixture *f = *state;
    for (int i = 0; i < 5; i++)
        assert_int_equal(
            tu_add(f->st, "t", "s1", i, 10 * i,
                   i < 3 ? "r.py.fib: 3,r.py.fib: 5,r.py.fib: 5" : "r.py.fib: 3,r.py.fib: 6"),
            SKP_OK);
    struct analyze_opts o = {.by_function = true};
    struct analysis *a = NULL;
    assert_int_equal(analyze_segment_all(f->st, "s1", &o, &a), SKP_OK);
    const struct expect_node e[] = {
        {1, 0, "r.py.fib", 5, 50, 0},
        {2, 1, "r.py.fib", 5, 50, 20},
        {3, 2, "r.py.fib", 3, 30, 30},
    };
    check_tree(&a->trees[0], e, 3);
    analysis_free(a);
}

static void saturating_helpers(void **state)
{
    (void)state;
    assert_int_equal(skpx_sat_sub_i64(INT64_MAX, INT64_MIN), INT64_MAX);
    assert_int_equal(skpx_sat_sub_i64(INT64_MIN, INT64_MAX), INT64_MIN);
    assert_int_equal(skpx_sat_sub_i64(INT64_MIN, 1), INT64_MIN);
    assert_int_equal(skpx_sat_sub_i64(5, 7), -2);
    assert_int_equal(skpx_sat_add_i64(INT64_MAX, 1), INT64_MAX);
    assert_int_equal(skpx_sat_add_i64(INT64_MIN, -1), INT64_MIN);
    assert_int_equal(skpx_sat_add_i64(INT64_MAX, INT64_MIN), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(worked_example_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(segments_keep_their_own_sequences, setup, teardown),
        cmocka_unit_test_setup_teardown(runs_never_join_across_segments, setup, teardown),
        cmocka_unit_test_setup_teardown(overlapping_windows_counted_once, setup, teardown),
        cmocka_unit_test_setup_teardown(window_by_time_then_fetch_by_sequence, setup, teardown),
        cmocka_unit_test_setup_teardown(missing_dump_is_capped, setup, teardown),
        cmocka_unit_test_setup_teardown(empty_stacks_dropped, setup, teardown),
        cmocka_unit_test_setup_teardown(several_roots_several_trees, setup, teardown),
        cmocka_unit_test_setup_teardown(bfs_ids_and_first_seen_children, setup, teardown),
        cmocka_unit_test_setup_teardown(cap_sets_oap_tip, setup, teardown),
        cmocka_unit_test_setup_teardown(data_not_found, setup, teardown),
        cmocka_unit_test_setup_teardown(json_shape, setup, teardown),
        cmocka_unit_test_setup_teardown(signatures_outlive_the_store, setup, teardown),
        cmocka_unit_test_setup_teardown(alloc_faults_never_crash, setup, teardown),
        cmocka_unit_test_setup_teardown(streamed_scans_cap_and_dedupe, setup, teardown),
        cmocka_unit_test_setup_teardown(extreme_times_saturate, setup, teardown),
        cmocka_unit_test_setup_teardown(line_changing_loop_truth, setup, teardown),
        cmocka_unit_test_setup_teardown(function_granularity, setup, teardown),
        cmocka_unit_test_setup_teardown(alternating_functions_truth, setup, teardown),
        cmocka_unit_test_setup_teardown(late_dump_split_or_bridged, setup, teardown),
        cmocka_unit_test_setup_teardown(single_dump_gets_task_period, setup, teardown),
        cmocka_unit_test_setup_teardown(recursion_counted_once_per_node, setup, teardown),
        cmocka_unit_test(saturating_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
