/* export.h - renders an analysis into the exchange formats users load elsewhere:
 * pprof (profile.proto, gzip-compressed; samples weighted by the dump period; labels trace id,
 * segment id, endpoint), collapsed stacks (Brendan Gregg's "a;b;c count" lines), speedscope
 * JSON (file format schema), and a self-contained HTML flame graph (no network at view time).
 * Pure functions of their inputs; single-threaded. */
#ifndef SKP_SERVER_EXPORT_H
#define SKP_SERVER_EXPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/analysis/analyzer.h"
#include "skyprof/skp_err.h"

enum export_format {
    EXPORT_PPROF = 0,
    EXPORT_COLLAPSED = 1,
    EXPORT_SPEEDSCOPE = 2,
    EXPORT_HTML = 3,
    EXPORT_JSON = 4, /* the analysis JSON the API returns */
};

/* Context written into the export (all borrowed; any may be NULL). */
struct export_meta {
    const char *title; /* e.g. "task 1733... /orders" */
    const char *task_id;
    const char *segment_id;
    const char *trace_id;
    const char *endpoint;
    int dump_period_ms; /* sample weight for pprof (0 = 10) */
    int64_t time_ms;    /* profile start time */
    /* Value mode (process profiles): node counts are values of this pprof sample type (e.g.
     * "cpu"/"nanoseconds", "alloc_space"/"bytes"), not snapshot counts; pprof then carries
     * this one sample type and speedscope weighs by the value. NULL = snapshot counts. */
    const char *value_type;
    const char *value_unit;
    /* Readable frame names (common/frame_sig.h) in collapsed stacks ("do_POST (seed_app.py:44)")
     * and speedscope (name "do_POST", file and line in their fields) instead of the full
     * signatures. The HTML flame graph always labels frames readably (the full signature is in
     * its tooltip) and pprof always splits name, file and line. The HTTP routes set it unless
     * asked for `names=full`. */
    bool readable_names;
};

/* One analysis of a multi-part pprof export and the labels its samples carry (borrowed). */
struct export_part {
    const struct analysis *a;
    const char *segment_id;
    const char *trace_id;
};

/* Parses "pprof|collapsed|speedscope|html|json". Errors: SKP_EINVAL. */
SKP_MUST_CHECK skp_err export_format_parse(const char *s, enum export_format *out);
/* MIME type and a file extension for a format (static strings). */
const char *export_content_type(enum export_format f);
const char *export_file_ext(enum export_format f);

/* Renders `a` into a new buffer; *out (caller frees with skpx_free) holds *out_len bytes.
 * Errors: SKP_ENOMEM, SKP_EIO (compression failure). */
SKP_MUST_CHECK skp_err export_render(const struct analysis *a, enum export_format f,
                                     const struct export_meta *meta, uint8_t **out,
                                     size_t *out_len);

/* A pprof of several analyses (e.g. a task's segments): the samples of parts[i] carry the
 * labels segment_id and trace_id of that part (when set) besides meta's endpoint and task_id;
 * the rest as export_render with EXPORT_PPROF (meta's segment_id/trace_id are not used). Borrows
 * everything. Errors: SKP_EINVAL (no part, a malformed tree), SKP_ENOMEM, SKP_EIO. */
SKP_MUST_CHECK skp_err export_render_pprof_labelled(const struct export_part *parts, size_t n_parts,
                                                    const struct export_meta *meta, uint8_t **out,
                                                    size_t *out_len);

#endif
