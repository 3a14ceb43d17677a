/* export_int.h - shared by the export_*.c files only: a depth-first walk over an analysis with
 * each node's self count, and the per-format renderers
 * that export.c dispatches to. Single-threaded, no global state. */
#ifndef SKP_SERVER_EXPORT_INT_H
#define SKP_SERVER_EXPORT_INT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/buf.h"
#include "common/map.h"
#include "server/export/export.h"

/* Largest export we render: an analysis capped at a few hundred thousand nodes renders to far
 * less; anything larger is a bug or an abuse and fails with SKP_ETOOBIG instead of exhausting
 * the daemon's memory. */
#define EXPORT_MAX_OUTPUT_BYTES ((size_t)256 * 1024 * 1024)
/* Deepest stack an export walks (the agents cap stacks at 500 frames, CPython at 256; a
 * deeper tree is truncated, never recursed into). */
#define EXPORT_MAX_DEPTH 4096
/* Sample weight used when the caller does not know the task's dump period. */
#define EXPORT_DEFAULT_DUMP_PERIOD_MS 10

/* Number of snapshots in which `n` was the innermost frame: count minus the children's counts
 * (children hold disjoint subsets of the parent's snapshots), never negative. */
uint64_t export_node_self_count(const struct analysis_tree *t, const struct analysis_node *n);

/* Called for every node (pre-order) with the path root..node (path[depth] == node). */
typedef skp_err (*export_visit_cb)(void *ud, const struct analysis_tree *t,
                                   const struct analysis_node *const *path, size_t depth);
/* Walks every tree depth-first without recursion; stops at the first non-OK return.
 * Nodes deeper than EXPORT_MAX_DEPTH are skipped. Errors: whatever the callback returns,
 * SKP_EINVAL for a malformed tree (index out of range or a cycle). */
SKP_MUST_CHECK skp_err export_walk(const struct analysis *a, export_visit_cb cb, void *ud);

/* Interned strings: ids are 0-based in first-seen order and order[id] gives the string back.
 * The table copies each string (the map's rule), so order[] stays valid until cleanup. */
struct export_intern {
    struct skpx_strmap map; /* string (owned copy) → id */
    const char **order;     /* owned array; entries point into map's keys */
    size_t order_cap;
    size_t n;
};
/* Sets *id to the id of `s` (NULL is ""), adding it if new. Errors: SKP_ENOMEM. */
SKP_MUST_CHECK skp_err export_intern_get(struct export_intern *in, const char *s, uint32_t *id);
/* Frees the table and its copies of the strings. */
void export_intern_cleanup(struct export_intern *in);

/* A JSON string for `s` (NULL is ""). Bytes that are not valid UTF-8 (signatures come from
 * agents unchecked) are replaced by '?', so one odd frame cannot fail an export.
 * Returns NULL only when out of memory. */
json_t *export_json_string(const char *s);

/* Sample weight in milliseconds (meta->dump_period_ms, or the default). */
int export_period_ms(const struct export_meta *meta);

/* Renderers; same contract as export_render for one format. */
SKP_MUST_CHECK skp_err export_render_pprof(const struct analysis *a, const struct export_meta *m,
                                           struct skpx_buf *b);
/* The pprof of several analyses in one profile, each part's samples labelled with its own
 * trace_id/segment_id (export_render_pprof is the one-part case with meta's). */
SKP_MUST_CHECK skp_err export_render_pprof_parts(const struct export_part *parts, size_t n_parts,
                                                 const struct export_meta *m, struct skpx_buf *b);
SKP_MUST_CHECK skp_err export_render_collapsed(const struct analysis *a,
                                               const struct export_meta *m, struct skpx_buf *b);
SKP_MUST_CHECK skp_err export_render_speedscope(const struct analysis *a,
                                                const struct export_meta *m, struct skpx_buf *b);
SKP_MUST_CHECK skp_err export_render_html(const struct analysis *a, const struct export_meta *m,
                                          struct skpx_buf *b);

/* Writes `sig` as one collapsed-stack frame: ';' (the frame separator) -> ',', blanks
 * (space, TAB, CR, LF, VT, FF) -> ' '; a blank run before a trailing number is dropped after a
 * ':' ("slow_b: 8" -> "slow_b:8") and becomes one '_' otherwise ("worker 7" -> "worker_7"),
 * trailing blanks are dropped, an empty frame is "?". So no frame ends in blank + digits, which
 * flamegraph.pl and other tools would read as a count. */
void export_put_collapsed_frame(struct skpx_buf *b, const char *sig);

#endif
