/* jfr_tree.h - JFR samples → the stack trees every consumer of struct analysis understands
 * (HTTP analysis JSON, pprof/collapsed/speedscope/HTML exports): one tree per root frame,
 * node count = inclusive weight (samples, bytes or nanoseconds by kind), allocation trees end
 * in the allocated class. Also a summary of the recording (events and weight per kind, the
 * threads of the chosen kind) for the UI's event-kind switch and thread filter.
 * Single-threaded; all memory is per call. */
#ifndef SKP_SERVER_JFR_TREE_H
#define SKP_SERVER_JFR_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "server/analysis/analyzer.h"
#include "server/formats/jfr.h"
#include "skyprof/skp_err.h"

#define JFR_SUMMARY_MAX_THREADS 1000u /* the busiest threads; the rest are counted only */

struct jfr_thread_stat {
    char *name; /* owned by the summary */
    uint64_t n_events;
    uint64_t weight;
};

struct jfr_summary {
    uint32_t n_chunks;
    uint64_t n_events[JFR_KIND_COUNT];
    uint64_t weight[JFR_KIND_COUNT];
    const char *unit;         /* of the chosen kind: "samples", "bytes", "nanoseconds" */
    const char *alloc_source; /* ALLOC only: "tlab" or "sample" (which events made the tree) */
    struct jfr_thread_stat *threads; /* of the chosen kind, heaviest first */
    size_t n_threads;
    uint64_t n_threads_dropped;
};

struct jfr_analyze_opts {
    enum jfr_kind kind;
    const char *thread; /* only samples of this thread (borrowed); NULL = all */
    bool without_lines; /* frames without ":line" (lines are on by default) */
    /* Only samples whose start time (ms since the epoch) lies in [from_ms, to_ms] when
     * has_range (a sample without a time is then left out); the summary still describes the
     * whole recording. */
    bool has_range;
    int64_t from_ms, to_ms;
    size_t max_chunk_bytes; /* 0 = JFR_DEFAULT_MAX_CHUNK_BYTES */
};

/* Parses a recording in memory (borrowed) and builds the tree of opts->kind.
 * *out (caller frees with analysis_free) has one tree per root frame, heaviest first; summary
 * (may be NULL; caller releases it with jfr_summary_cleanup) describes the whole recording.
 * Errors: those of jfr_parser_parse_mem (err says why), SKP_ENOMEM. */
SKP_MUST_CHECK skp_err jfr_analyze_mem(const uint8_t *buf, size_t len,
                                       const struct jfr_analyze_opts *opts, struct analysis **out,
                                       struct jfr_summary *summary, struct jfr_error *err);
/* Same, reading the file at `path` chunk by chunk. Errors as above plus SKP_EIO / SKP_ENOTFOUND
 * when it cannot be opened. */
SKP_MUST_CHECK skp_err jfr_analyze_file(const char *path, const struct jfr_analyze_opts *opts,
                                        struct analysis **out, struct jfr_summary *summary,
                                        struct jfr_error *err);
/* Incremental form, for several recordings merged into one tree (one parser, so equal frames
 * of different files meet in one node): new → add_* per recording → finish → free.
 * jfr_tree_new: *summary (borrowed until free; caller cleans it up with jfr_summary_cleanup)
 * is filled as recordings are added. Errors: SKP_EINVAL (bad kind), SKP_ENOMEM.
 * add_*: errors as jfr_parser_parse_*; after an error the tree keeps the samples read before
 * it, and more recordings may still be added. finish: *out freed with analysis_free; call it
 * once. */
struct jfr_tree;
SKP_MUST_CHECK skp_err jfr_tree_new(const struct jfr_analyze_opts *opts,
                                    struct jfr_summary *summary, struct jfr_tree **out);
SKP_MUST_CHECK skp_err jfr_tree_add_mem(struct jfr_tree *t, const uint8_t *buf, size_t len,
                                        struct jfr_error *err);
SKP_MUST_CHECK skp_err jfr_tree_add_file(struct jfr_tree *t, FILE *f, struct jfr_error *err);
SKP_MUST_CHECK skp_err jfr_tree_finish(struct jfr_tree *t, struct analysis **out);
void jfr_tree_free(struct jfr_tree *t);

/* Frees the thread list; NULL ok. */
void jfr_summary_cleanup(struct jfr_summary *s);
/* "samples", "bytes" or "nanoseconds" (static). */
const char *jfr_kind_unit(enum jfr_kind k);

#endif
