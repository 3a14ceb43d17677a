/* Unit tests for src/server/analysis/pprof_analyze.c on profiles written by our pprof encoder and read by
 * our decoder: values weigh the tree (not sample counts), and weights that would pass INT64_MAX
 * (a hostile upload: each value may be INT64_MAX) stop there instead of wrapping - the fuzz
 * target found the signed overflow of the total. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "server/analysis/analyzer.h"
#include "server/analysis/pprof_analyze.h"
#include "server/formats/pprof_decode.h"
#include "wire/pprof_encode.h"

#define FRAME(f) ((struct skpx_pprof_frame){f, sizeof(f) - 1, "app.py", 6, 1})

/* Encodes samples of stacks main>a, main>b and main>a again (a label keeps it a sample of its
 * own, so the analysis adds it to the stack it has already seen), with the values given. */
static struct pprof_profile *profile_of(const int64_t values[3])
{
    const struct skpx_pprof_type type = {"cpu", "nanoseconds"};
    struct skpx_pprof *b = NULL;
    assert_int_equal(skpx_pprof_new(&type, 1, 1 << 20, &b), SKP_OK);
    const struct skpx_pprof_frame main_a[] = {FRAME("a"), FRAME("main")};
    const struct skpx_pprof_frame main_b[] = {FRAME("b"), FRAME("main")};
    const struct skpx_pprof_label l1 = {"thread", "t1", 0, NULL};
    const struct skpx_pprof_label l2 = {"thread", "t2", 0, NULL};
    assert_int_equal(skpx_pprof_add(b, main_a, 2, &values[0], &l1, 1), SKP_OK);
    assert_int_equal(skpx_pprof_add(b, main_b, 2, &values[1], &l1, 1), SKP_OK);
    assert_int_equal(skpx_pprof_add(b, main_a, 2, &values[2], &l2, 1), SKP_OK);
    uint8_t *bytes = NULL;
    size_t len = 0;
    assert_int_equal(skpx_pprof_encode(b, false, &bytes, &len), SKP_OK);
    skpx_pprof_free(b);
    struct pprof_profile *p = NULL;
    char why[PPROF_ERR_MAX];
    assert_int_equal(pprof_decode(bytes, len, 1 << 20, &p, why), SKP_OK);
    skpx_free(bytes);
    return p;
}

static struct analysis *analyse(const struct pprof_profile *p, int64_t *total)
{
    struct pprof_analyze *an = NULL;
    assert_int_equal(pprof_analyze_new("cpu", true, &an), SKP_OK);
    assert_int_equal(pprof_analyze_add(an, p), SKP_OK);
    uint64_t n_samples = 0;
    size_t n_skipped = 0;
    pprof_analyze_totals(an, total, &n_samples, &n_skipped);
    assert_int_equal(n_samples, 3);
    struct analysis *a = NULL;
    assert_int_equal(pprof_analyze_finish(an, &a), SKP_OK);
    pprof_analyze_free(an);
    assert_int_equal(a->n_trees, 1);
    return a;
}

static const struct analysis_node *child_named(const struct analysis_tree *t, uint32_t parent,
                                               const char *func)
{
    for (uint32_t c = t->nodes[parent].first_child; c != UINT32_MAX; c = t->nodes[c].next_sibling)
        if (strstr(t->nodes[c].code_signature, func))
            return &t->nodes[c];
    fail_msg("no child %s", func);
    return NULL;
}

static void weighs_by_value(void **state)
{
    (void)state;
    const int64_t values[3] = {30, 10, 5};
    struct pprof_profile *p = profile_of(values);
    int64_t total = 0;
    struct analysis *a = analyse(p, &total);
    const struct analysis_tree *t = &a->trees[0];
    assert_int_equal(total, 45);
    assert_int_equal(t->nodes[0].count, 45); /* main */
    assert_int_equal(child_named(t, 0, "a")->count, 35);
    assert_int_equal(child_named(t, 0, "b")->count, 10);
    analysis_free(a);
    pprof_free(p);
}

static void huge_values_saturate(void **state)
{
    (void)state;
    const int64_t values[3] = {INT64_MAX, INT64_MAX - 1, INT64_MAX};
    struct pprof_profile *p = profile_of(values);
    int64_t total = 0;
    struct analysis *a = analyse(p, &total);
    const struct analysis_tree *t = &a->trees[0];
    assert_int_equal(total, INT64_MAX);
    for (size_t i = 0; i < t->n_nodes; i++) {
        assert_true(t->nodes[i].count <= (uint64_t)INT64_MAX);
        assert_true(t->nodes[i].duration >= 0);
        assert_true(t->nodes[i].duration_child_excluded >= 0);
    }
    assert_int_equal(t->nodes[0].count, INT64_MAX);
    assert_int_equal(child_named(t, 0, "a")->count, INT64_MAX);
    assert_int_equal(child_named(t, 0, "b")->count, INT64_MAX - 1);
    analysis_free(a);
    pprof_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(weighs_by_value),
        cmocka_unit_test(huge_values_saturate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
