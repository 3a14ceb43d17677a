/* jfr_timeline.h - JFR samples of one event kind laid out per thread over time, for the Process
 * profiles page's thread timeline: the recording's time span cut into buckets, and for each
 * thread and bucket the leaf function seen most often there (frames without lines) with the
 * bucket's sample count. Bounded: the JFR_TIMELINE_MAX_THREADS busiest threads (the rest are
 * counted), at most JFR_TIMELINE_MAX_BUCKETS buckets, JFR_TIMELINE_MAX_SAMPLES samples kept
 * (later ones are counted as dropped). Single-threaded; all memory is per timeline. */
#ifndef SKP_SERVER_JFR_TIMELINE_H
#define SKP_SERVER_JFR_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

#include "server/formats/jfr.h"
#include "skyprof/skp_err.h"

#define JFR_TIMELINE_MAX_THREADS 64u
#define JFR_TIMELINE_MAX_BUCKETS 2000u
#define JFR_TIMELINE_DEFAULT_BUCKETS 200u
/* 4 Mi samples x 24 bytes = 96 MiB at most: a 20 ms sampler on 100 threads for an hour is
 * 18 Mi samples, far beyond what one page shows; the first 4 Mi are kept. */
#define JFR_TIMELINE_MAX_SAMPLES (4u << 20)

/* One thread's bucket: the leaf function (index into frames) with the most samples there. */
struct jfr_timeline_cell {
    uint32_t bucket;
    uint32_t frame;
    uint64_t leaf_weight; /* the weight of the samples with that leaf */
    uint64_t weight;      /* every sample of the thread in the bucket */
};

struct jfr_timeline_thread {
    const char *name; /* "(unknown thread)" when the events name none */
    uint64_t weight;
    struct jfr_timeline_cell *cells; /* in bucket order, only buckets with samples */
    size_t n_cells;
};

/* The result (everything owned by the timeline, valid until jfr_timeline_free). */
struct jfr_timeline_view {
    int64_t from_ms, to_ms; /* first and last sample time (0, 0 when there is none) */
    int64_t bucket_ms;
    uint32_t n_buckets;
    struct jfr_timeline_thread *threads; /* heaviest first */
    size_t n_threads;
    uint64_t n_threads_omitted;
    const char **frames;
    size_t n_frames;
    uint64_t n_samples; /* samples of the kind with a time */
    uint64_t n_untimed; /* samples of the kind without a time (not shown) */
    uint64_t n_dropped; /* samples past JFR_TIMELINE_MAX_SAMPLES */
};

struct jfr_timeline;

/* A timeline of `kind` samples. Caller frees *out with jfr_timeline_free.
 * Errors: SKP_EINVAL (bad kind), SKP_ENOMEM. */
SKP_MUST_CHECK skp_err jfr_timeline_new(enum jfr_kind kind, struct jfr_timeline **out);
/* Adds one recording (borrowed). Errors as jfr_parser_parse_mem; after an error the samples
 * read before it stay and more recordings may be added. */
SKP_MUST_CHECK skp_err jfr_timeline_add_mem(struct jfr_timeline *t, const uint8_t *buf, size_t len,
                                            struct jfr_error *err);
/* Lays the samples out in n_buckets buckets (clamped to 1..JFR_TIMELINE_MAX_BUCKETS; fewer
 * when the span is shorter than that many ms). *out is owned by t. Call once.
 * Errors: SKP_ENOMEM. */
SKP_MUST_CHECK skp_err jfr_timeline_finish(struct jfr_timeline *t, uint32_t n_buckets,
                                           const struct jfr_timeline_view **out);
/* NULL ok. */
void jfr_timeline_free(struct jfr_timeline *t);

#endif
