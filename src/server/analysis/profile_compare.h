/* profile_compare.h - two analyses (struct analysis, analyzer.h: a trace segment's or task's
 * dumps, a pprof profile's values, a JFR recording's weights) merged into one tree carrying both
 * weights per node, for the diff flame graph and `skyprof compare`. Nodes are matched by their
 * path of code signatures from the root; a node present on one side only gets weight 0 on the
 * other. Shares are a node's weight over its side's total (the sum of the side's root weights),
 * so profiles of different lengths or units compare; raw weights are kept too.
 *
 * The list of largest changes is per code signature: its inclusive weight on each side counts a
 * recursive frame once per stack (a frame under an equal ancestor adds nothing), its self weight
 * every time; ordered by |change of inclusive share|, then |change of self share|, then name.
 *
 * By function (optional): signatures are first reduced to their function, as the UI's "group by
 * function" does ("file.py.f: 12" -> "file.py.f", "f (file.c:12)" -> "f (file.c)"), so the lines
 * of one function meet in one node; the reduced names are owned by the result.
 *
 * A JFR lambda's hidden-class id ("Outer$$Lambda$88+0x7fb0.1", a new one in every recording) is
 * cut before matching, so the same lambda meets itself across recordings; the node then carries
 * the cut name ("Outer$$Lambda"), owned by the result too.
 *
 * Bounded: the merged tree has at most the two inputs' node counts together. Pure, reentrant
 * (the HTTP worker runs it); the result borrows the inputs' signatures. */
#ifndef SKP_SERVER_PROFILE_COMPARE_H
#define SKP_SERVER_PROFILE_COMPARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/analysis/analyzer.h"
#include "skyprof/skp_err.h"

/* Side indexes of the arrays below. */
#define COMPARE_BASE 0
#define COMPARE_TARGET 1

/* One node of the merged tree. Nodes are stored so a parent precedes its children. */
struct compare_node {
    const char *sig;   /* borrowed from the input analyses */
    uint32_t parent;   /* index of the parent, UINT32_MAX for a root */
    uint32_t depth;    /* 0 for a root */
    int64_t weight[2]; /* inclusive, per side (count of the analysis node) */
    int64_t self[2];   /* weight minus the children's weights, per side (>= 0) */
};

/* One code signature's totals over the whole tree. */
struct compare_change {
    const char *sig;   /* borrowed from the input analyses */
    int64_t weight[2]; /* inclusive (recursion counted once per stack) */
    int64_t self[2];
    double share[2]; /* weight / side total, 0..1 (0 when the total is 0) */
    double self_share[2];
    double delta;      /* share[TARGET] - share[BASE] */
    double self_delta; /* self_share[TARGET] - self_share[BASE] */
};

struct compare_result {
    struct compare_node *nodes;
    size_t n_nodes;
    int64_t total[2];               /* sum of each side's root weights */
    struct compare_change *changes; /* every distinct signature, largest change first */
    size_t n_changes;
    void *_names; /* private: the names made by the merge; compare_free frees */
};

/* Merges `base` and `target` (borrowed; they must outlive *out, which points at their
 * signatures), by line or, with by_function, by function. Either may have no tree (then its side
 * is all zero). Caller frees *out with compare_free. Errors: SKP_EINVAL (NULL input, or a node
 * whose parent does not come before it), SKP_ETOOBIG (more than UINT32_MAX - 1 merged nodes),
 * SKP_ENOMEM. */
SKP_MUST_CHECK skp_err compare_analyses(const struct analysis *base, const struct analysis *target,
                                        bool by_function, struct compare_result **out);

/* The function a signature names (analysis_function_len, analyzer.h: the one rule). Pure. */
size_t compare_function_len(const char *sig, bool *close_paren);

/* Share of a node on one side: weight / total (0 when the total is 0). Pure. */
double compare_share(const struct compare_result *r, const struct compare_node *n, int side);

/* NULL ok. */
void compare_free(struct compare_result *r);

#endif
