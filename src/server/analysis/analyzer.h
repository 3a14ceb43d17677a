/* analyzer.h - turns stored snapshots into stack trees: SkyWalking's ProfileAnalyzer tree (spec
 * §5.6: one trie per root frame, BFS ids, OAP's tip and snapshot cap) with its defects fixed:
 * sequences are per segment (de-duplication is by (segment, sequence)), the snapshot cap is
 * configurable (0 = none; default none), and durations are estimated per dump interval rather
 * than from runs of consecutive dumps (docs/accuracy.md): every dump stands for the time to the
 * next dump of its segment (capped where a dump is missing, split where a late dump shows
 * another stack), every frame of its stack gets that interval and the leaf gets it as self
 * time. Frames are lines (the stored signatures) or, with
 * by_function, functions (the signature without its line, analysis_function_len).
 *
 * The result is a plain tree (struct analysis) that the HTTP API serialises to
 * {tip, trees:[{elements:[{id,parentId,codeSignature,duration,durationChildExcluded,count}]}]}
 * and that the exporters (pprof, collapsed, speedscope, HTML) walk. Single-threaded. */
#ifndef SKP_SERVER_ANALYZER_H
#define SKP_SERVER_ANALYZER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/store/store.h"
#include "skyprof/skp_err.h"

struct analyze_query {
    const char *segment_id;
    int64_t start_ms; /* inclusive */
    int64_t end_ms;   /* inclusive */
};

/* How durations are estimated. */
enum analyze_estimator {
    ANALYZE_EST_INTERVALS = 0, /* the product's: each dump's interval goes to its whole stack */
    ANALYZE_EST_OAP_RUNS = 1,  /* OAP's runs of consecutive dumps (spec §5.6 step 9), kept for
                                * bench/accuracy's old-vs-new comparison only */
};

/* Zero-initialised = no cap, lines, intervals. */
struct analyze_opts {
    uint64_t max_snapshots; /* 0 = unlimited */
    bool by_function;       /* frames are functions: lines of a function merged before the
                             * tree is built, durations computed on that tree */
    enum analyze_estimator estimator;
};

/* One node; trees are stored flat in BFS order, ids 1..n per tree, root parent_id 0. */
struct analysis_node {
    uint32_t id;
    uint32_t parent_id;
    const char *code_signature;      /* borrowed from the store's frame cache / analysis arena */
    int64_t duration;                /* ms */
    int64_t duration_child_excluded; /* ms */
    uint64_t count;
    uint32_t first_child;  /* index into nodes of the first child, UINT32_MAX if none */
    uint32_t next_sibling; /* index of the next sibling, UINT32_MAX if none */
};

struct analysis_tree {
    struct analysis_node *nodes; /* nodes[0] is the root */
    size_t n_nodes;
};

struct analysis {
    char *tip; /* NULL when there is nothing to say */
    struct analysis_tree *trees;
    size_t n_trees;
    uint64_t n_snapshots; /* snapshots used */
    void *_arena;         /* private: code signatures owned by an analyzer result (NULL in
                           * hand-built analyses); freed by analysis_free */
};

/* Analyses one or more segment time windows (the UI's Include/Exclude Children ranges).
 * Caller frees *out with analysis_free. Errors: SKP_EIO, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err analyze_segments(struct store *st, const struct analyze_query *q, size_t n,
                                        const struct analyze_opts *opts, struct analysis **out);
/* Analyses every snapshot of a task (all its segments). */
SKP_MUST_CHECK skp_err analyze_task(struct store *st, const char *task_id,
                                    const struct analyze_opts *opts, struct analysis **out);
/* Analyses a segment's whole life (all its snapshots). */
SKP_MUST_CHECK skp_err analyze_segment_all(struct store *st, const char *segment_id,
                                           const struct analyze_opts *opts, struct analysis **out);
/* The function a code signature names: its length in `sig` and whether ")" follows it (the
 * native form "f (file.c:12)" -> the first 9 bytes + ")"; "file.py.f: 12" -> "file.py.f"). The
 * one rule of function granularity for trace analyses and compare; the web UI's frames.js
 * functionOf is its twin. Pure. */
size_t analysis_function_len(const char *sig, bool *close_paren);
/* Frees tip, every trees[i].nodes, trees, _arena and a itself (all skpx-allocated, so a
 * hand-built analysis can be freed too). NULL ok. */
void analysis_free(struct analysis *a);
/* {tip, trees:[{elements:[...]}]} as the API returns it (tip null when absent; id and
 * parentId are JSON integers). Returns a new reference, NULL on allocation failure. */
json_t *analysis_to_json(const struct analysis *a);

#endif
