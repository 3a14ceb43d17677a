/* Unit tests for src/server/analysis/profile_compare.c on hand-built analyses: nodes matched by path,
 * shares normalised by each side's total (sides of different lengths), nodes present on one side
 * only, self weights, recursion counted once per stack in the change list, its order, bad input
 * and allocation failures. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "harness/skp_alloc_faults.h"
#include "server/analysis/profile_compare.h"

#define NONE UINT32_MAX
#define EPS 1e-9

/* The seed's shape: fast run, 56 dumps (do_POST 56: method3 6 > method2 4 > method1 2). */
static struct analysis_node g_fast[] = {
    {1, 0, "do_POST", 0, 0, 56, NONE, NONE},
    {2, 1, "method3", 0, 0, 6, NONE, NONE},
    {3, 2, "method2", 0, 0, 4, NONE, NONE},
    {4, 3, "method1", 0, 0, 2, NONE, NONE},
};
/* Slow run, 74 dumps: method3 sleeps 200 ms (24 = 20 self + 4), plus a frame the fast run
 * never had (gc under do_POST), and a second root (a thread the fast side lacks). */
// clang-format off
static struct analysis_node g_slow_t1[] = {
    {1, 0, "do_POST", 0, 0, 72, NONE, NONE},
    {2, 1, "method3", 0, 0, 24, NONE, NONE},
    {3, 1, "gc", 0, 0, 2, NONE, NONE},
    {4, 2, "method2", 0, 0, 4, NONE, NONE},
    {5, 4, "method1", 0, 0, 2, NONE, NONE},
};
// clang-format on
static struct analysis_node g_slow_t2[] = {
    {1, 0, "idle", 0, 0, 2, NONE, NONE},
};
static struct analysis_tree g_fast_trees[] = {{g_fast, 4}};
static struct analysis_tree g_slow_trees[] = {{g_slow_t1, 5}, {g_slow_t2, 1}};
static struct analysis g_a_fast = {.trees = g_fast_trees, .n_trees = 1};
static struct analysis g_a_slow = {.trees = g_slow_trees, .n_trees = 2};

static const struct compare_node *find(const struct compare_result *r, const char *path)
{
    /* path: "a/b/c" from a root */
    uint32_t parent = NONE;
    const struct compare_node *hit = NULL;
    for (const char *p = path; *p;) {
        size_t len = strcspn(p, "/");
        hit = NULL;
        for (size_t i = 0; i < r->n_nodes; i++) {
            const struct compare_node *n = &r->nodes[i];
            if (n->parent == parent && strlen(n->sig) == len && memcmp(n->sig, p, len) == 0) {
                hit = n;
                parent = (uint32_t)i;
                break;
            }
        }
        if (!hit)
            return NULL;
        p += len + (p[len] == '/');
    }
    return hit;
}

static const struct compare_change *change(const struct compare_result *r, const char *sig)
{
    for (size_t i = 0; i < r->n_changes; i++)
        if (strcmp(r->changes[i].sig, sig) == 0)
            return &r->changes[i];
    return NULL;
}

static void merged_tree_keeps_both_weights(void **state)
{
    (void)state;
    struct compare_result *r = NULL;
    assert_int_equal(compare_analyses(&g_a_fast, &g_a_slow, false, &r), SKP_OK);
    assert_int_equal(r->total[COMPARE_BASE], 56);
    assert_int_equal(r->total[COMPARE_TARGET], 74);
    /* do_POST, method3, method2, method1, gc, idle: equal paths met in one node */
    assert_int_equal(r->n_nodes, 6);
    const struct compare_node *m3 = find(r, "do_POST/method3");
    assert_non_null(m3);
    assert_int_equal(m3->weight[COMPARE_BASE], 6);
    assert_int_equal(m3->weight[COMPARE_TARGET], 24);
    assert_int_equal(m3->self[COMPARE_BASE], 2);
    assert_int_equal(m3->self[COMPARE_TARGET], 20);
    assert_int_equal(m3->depth, 1);
    const struct compare_node *post = find(r, "do_POST");
    assert_int_equal(post->self[COMPARE_BASE], 50);
    assert_int_equal(post->self[COMPARE_TARGET], 46);
    /* parents come before their children */
    for (size_t i = 0; i < r->n_nodes; i++)
        assert_true(r->nodes[i].parent == NONE || r->nodes[i].parent < i);
    compare_free(r);
}

static void shares_are_normalised_by_each_total(void **state)
{
    (void)state;
    struct compare_result *r = NULL;
    assert_int_equal(compare_analyses(&g_a_fast, &g_a_slow, false, &r), SKP_OK);
    const struct compare_node *m3 = find(r, "do_POST/method3");
    assert_true(fabs(compare_share(r, m3, COMPARE_BASE) - 6.0 / 56) < EPS);
    assert_true(fabs(compare_share(r, m3, COMPARE_TARGET) - 24.0 / 74) < EPS);
    /* method2 took the same 4 dumps on both sides, but its share fell: 4/56 -> 4/74 */
    const struct compare_change *m2 = change(r, "method2");
    assert_true(m2->delta < 0);
    assert_true(fabs(m2->delta - (4.0 / 74 - 4.0 / 56)) < EPS);
    /* The same profile scaled 10x compares equal: every delta is 0. */
    struct analysis_node big[4];
    memcpy(big, g_fast, sizeof(big));
    for (int i = 0; i < 4; i++)
        big[i].count *= 10;
    struct analysis_tree bt = {big, 4};
    struct analysis ab = {.trees = &bt, .n_trees = 1};
    struct compare_result *r2 = NULL;
    assert_int_equal(compare_analyses(&g_a_fast, &ab, false, &r2), SKP_OK);
    assert_int_equal(r2->total[COMPARE_TARGET], 560);
    for (size_t i = 0; i < r2->n_changes; i++) {
        assert_true(fabs(r2->changes[i].delta) < EPS);
        assert_true(fabs(r2->changes[i].self_delta) < EPS);
    }
    compare_free(r2);
    compare_free(r);
}

/* Counts past INT64_MAX (pprof values are weights, each up to INT64_MAX; issue 25 #5 answered
 * base.total = -2 and every share 0): totals and weights stop at INT64_MAX, shares stay true. */
static void overflowing_counts_saturate(void **state)
{
    (void)state;
    struct analysis_node huge[] = {
        {1, 0, "a", 0, 0, UINT64_MAX, NONE, NONE},
        {2, 1, "b", 0, 0, UINT64_MAX, NONE, NONE},
    };
    struct analysis_node huge2[] = {
        {1, 0, "a", 0, 0, (uint64_t)INT64_MAX, NONE, NONE},
    };
    struct analysis_tree ht[] = {{huge, 2}, {huge2, 1}};
    struct analysis ah = {.trees = ht, .n_trees = 2};
    struct compare_result *r = NULL;
    assert_int_equal(compare_analyses(&ah, &g_a_fast, false, &r), SKP_OK);
    assert_int_equal(r->total[COMPARE_BASE], INT64_MAX);
    const struct compare_node *a = find(r, "a");
    assert_int_equal(a->weight[COMPARE_BASE], INT64_MAX);
    assert_true(fabs(compare_share(r, a, COMPARE_BASE) - 1.0) < EPS);
    const struct compare_change *b = change(r, "b");
    assert_true(fabs(b->share[COMPARE_BASE] - 1.0) < EPS);
    assert_true(b->self[COMPARE_BASE] >= 0);
    compare_free(r);
}

static void one_side_nodes_are_kept(void **state)
{
    (void)state;
    struct compare_result *r = NULL;
    assert_int_equal(compare_analyses(&g_a_fast, &g_a_slow, false, &r), SKP_OK);
    const struct compare_node *gc = find(r, "do_POST/gc");
    assert_non_null(gc);
    assert_int_equal(gc->weight[COMPARE_BASE], 0);
    assert_int_equal(gc->weight[COMPARE_TARGET], 2);
    const struct compare_node *idle = find(r, "idle");
    assert_non_null(idle);
    assert_int_equal(idle->parent, NONE);
    assert_int_equal(idle->weight[COMPARE_BASE], 0);
    assert_true(fabs(compare_share(r, idle, COMPARE_TARGET) - 2.0 / 74) < EPS);
    /* The other way round, the slow side's nodes are base-only. */
    struct compare_result *rev = NULL;
    assert_int_equal(compare_analyses(&g_a_slow, &g_a_fast, false, &rev), SKP_OK);
    gc = find(rev, "do_POST/gc");
    assert_int_equal(gc->weight[COMPARE_BASE], 2);
    assert_int_equal(gc->weight[COMPARE_TARGET], 0);
    compare_free(rev);
    /* An empty side: every share on it is 0 and the other side's nodes are all there. */
    struct analysis empty = {0};
    struct compare_result *e = NULL;
    assert_int_equal(compare_analyses(&empty, &g_a_fast, false, &e), SKP_OK);
    assert_int_equal(e->n_nodes, 4);
    assert_int_equal(e->total[COMPARE_BASE], 0);
    assert_true(fabs(change(e, "do_POST")->delta - 1.0) < EPS);
    compare_free(e);
    compare_free(r);
}

static void largest_change_first(void **state)
{
    (void)state;
    struct compare_result *r = NULL;
    assert_int_equal(compare_analyses(&g_a_fast, &g_a_slow, false, &r), SKP_OK);
    assert_int_equal(r->n_changes, 6);
    assert_string_equal(r->changes[0].sig, "method3");
    assert_true(r->changes[0].delta > 0.2);
    for (size_t i = 1; i < r->n_changes; i++)
        assert_true(fabs(r->changes[i - 1].delta) >= fabs(r->changes[i].delta));
    compare_free(r);
}

static void recursion_counts_once_per_stack(void **state)
{
    (void)state;
    /* f > f > f (10 dumps at the top, 4 of them in the inner f, 1 in the innermost) */
    struct analysis_node rec[] = {
        {1, 0, "f", 0, 0, 10, NONE, NONE},
        {2, 1, "f", 0, 0, 4, NONE, NONE},
        {3, 2, "f", 0, 0, 1, NONE, NONE},
    };
    struct analysis_tree t = {rec, 3};
    struct analysis a = {.trees = &t, .n_trees = 1};
    struct compare_result *r = NULL;
    assert_int_equal(compare_analyses(&a, &a, false, &r), SKP_OK);
    const struct compare_change *f = change(r, "f");
    assert_int_equal(f->weight[COMPARE_BASE], 10);
    assert_int_equal(f->self[COMPARE_BASE], 10); /* 6 + 3 + 1 */
    assert_true(fabs(f->share[COMPARE_BASE] - 1.0) < EPS);
    compare_free(r);
}

static void bad_trees_are_refused(void **state)
{
    (void)state;
    struct analysis_node orphan[] = {
        {1, 0, "a", 0, 0, 1, NONE, NONE},
        {2, 3, "b", 0, 0, 1, NONE, NONE}, /* parent after the child */
        {3, 1, "c", 0, 0, 1, NONE, NONE},
    };
    struct analysis_tree t = {orphan, 3};
    struct analysis a = {.trees = &t, .n_trees = 1};
    struct compare_result *r = (void *)1;
    assert_int_equal(compare_analyses(&a, &g_a_fast, false, &r), SKP_EINVAL);
    assert_null(r);
    struct analysis_node bad_id[] = {{7, 0, "a", 0, 0, 1, NONE, NONE}};
    struct analysis_tree t2 = {bad_id, 1};
    struct analysis a2 = {.trees = &t2, .n_trees = 1};
    assert_int_equal(compare_analyses(&g_a_fast, &a2, false, &r), SKP_EINVAL);
    assert_int_equal(compare_analyses(NULL, &g_a_fast, false, &r), SKP_EINVAL);
    assert_int_equal(compare_analyses(&g_a_fast, &g_a_fast, false, NULL), SKP_EINVAL);
}

static void by_function_merges_lines(void **state)
{
    (void)state;
    bool paren;
    assert_int_equal(compare_function_len("/srv/app.py.do_POST: 44", &paren), 19);
    assert_false(paren);
    assert_int_equal(compare_function_len("com.acme.Shop.run:42", &paren), 17);
    assert_int_equal(compare_function_len("method3 (demo.c:122)", &paren), 15);
    assert_true(paren);
    assert_int_equal(compare_function_len("runtime.main", &paren), 12);
    assert_int_equal(compare_function_len("f (libc.so.6)", &paren), 13);
    assert_false(paren);
    assert_int_equal(compare_function_len("12", &paren), 2);
    /* base: h:1 > f:10 (4) and h:1 > f:11 (2); target: h:2 > f:12 (9) */
    struct analysis_node b[] = {
        {1, 0, "h (a.c:1)", 0, 0, 10, NONE, NONE},
        {2, 1, "f (a.c:10)", 0, 0, 4, NONE, NONE},
        {3, 1, "f (a.c:11)", 0, 0, 2, NONE, NONE},
    };
    struct analysis_node t[] = {
        {1, 0, "h (a.c:2)", 0, 0, 10, NONE, NONE},
        {2, 1, "f (a.c:12)", 0, 0, 9, NONE, NONE},
    };
    struct analysis_tree bt = {b, 3}, tt = {t, 2};
    struct analysis ab = {.trees = &bt, .n_trees = 1}, at = {.trees = &tt, .n_trees = 1};
    struct compare_result *r = NULL;
    assert_int_equal(compare_analyses(&ab, &at, true, &r), SKP_OK);
    assert_int_equal(r->n_nodes, 2);
    const struct compare_node *f = find(r, "h (a.c)/f (a.c)");
    assert_non_null(f);
    assert_int_equal(f->weight[COMPARE_BASE], 6);
    assert_int_equal(f->weight[COMPARE_TARGET], 9);
    assert_string_equal(r->changes[0].sig, "f (a.c)");
    assert_true(fabs(r->changes[0].delta - 0.3) < EPS);
    compare_free(r);
    /* by line, the same input keeps every line apart */
    assert_int_equal(compare_analyses(&ab, &at, false, &r), SKP_OK);
    assert_int_equal(r->n_nodes, 5);
    compare_free(r);
}

/* A JFR lambda's hidden class gets a new id in each recording: the same lambda still meets
 * itself (by line and by function), under the name without the id; other frames are untouched. */
static void jfr_lambdas_match_across_recordings(void **state)
{
    (void)state;
    struct analysis_node b[] = {
        {1, 0, "com.acme.Shop.main:10", 0, 0, 10, NONE, NONE},
        {2, 1, "com.acme.Shop$$Lambda$88+0x00007fb024007a08.846947180.run:3", 0, 0, 6, NONE, NONE},
    };
    struct analysis_node t[] = {
        {1, 0, "com.acme.Shop.main:10", 0, 0, 10, NONE, NONE},
        {2, 1, "com.acme.Shop$$Lambda$91+0x00007f0011c0ffee.12.run:3", 0, 0, 2, NONE, NONE},
    };
    struct analysis_tree bt = {b, 2}, tt = {t, 2};
    struct analysis ab = {.trees = &bt, .n_trees = 1}, at = {.trees = &tt, .n_trees = 1};
    for (int by_function = 0; by_function < 2; by_function++) {
        struct compare_result *r = NULL;
        assert_int_equal(compare_analyses(&ab, &at, by_function, &r), SKP_OK);
        assert_int_equal(r->n_nodes, 2);
        const struct compare_node *l =
            find(r, by_function ? "com.acme.Shop.main/com.acme.Shop$$Lambda.run"
                                : "com.acme.Shop.main:10/com.acme.Shop$$Lambda.run:3");
        assert_non_null(l);
        assert_int_equal(l->weight[COMPARE_BASE], 6);
        assert_int_equal(l->weight[COMPARE_TARGET], 2);
        compare_free(r);
    }
    /* "$$Lambda$" with no id after it is a plain name: kept as it is */
    struct analysis_node plain[] = {{1, 0, "x.Y$$Lambda$.run:1", 0, 0, 1, NONE, NONE}};
    struct analysis_tree pt = {plain, 1};
    struct analysis ap = {.trees = &pt, .n_trees = 1};
    struct compare_result *r = NULL;
    assert_int_equal(compare_analyses(&ap, &ap, false, &r), SKP_OK);
    assert_non_null(find(r, "x.Y$$Lambda$.run:1"));
    compare_free(r);
}

static skp_err compare_body(void *ctx, long k)
{
    (void)ctx;
    (void)k;
    struct compare_result *r = NULL;
    skp_err err = compare_analyses(&g_a_fast, &g_a_slow, ctx != NULL, &r);
    if (err)
        assert_null(r);
    compare_free(r);
    return err;
}

static void allocation_failures(void **state)
{
    (void)state;
    struct skp_alloc_fault_runs runs = skp_test_alloc_faults(compare_body, NULL, 2000);
    assert_true(runs.n_ok > 0 && runs.n_nomem > 0);
    static int by_function = 1;
    runs = skp_test_alloc_faults(compare_body, &by_function, 2000);
    assert_true(runs.n_ok > 0 && runs.n_nomem > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(merged_tree_keeps_both_weights),
        cmocka_unit_test(shares_are_normalised_by_each_total),
        cmocka_unit_test(overflowing_counts_saturate),
        cmocka_unit_test(one_side_nodes_are_kept),
        cmocka_unit_test(largest_change_first),
        cmocka_unit_test(recursion_counts_once_per_stack),
        cmocka_unit_test(bad_trees_are_refused),
        cmocka_unit_test(by_function_merges_lines),
        cmocka_unit_test(jfr_lambdas_match_across_recordings),
        cmocka_unit_test(allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
