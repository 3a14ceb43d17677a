/* pprof_decode.h - a bounded decoder for pprof profiles (the public profile.proto of
 * github.com/google/pprof): gzip-compressed or raw, any id layout (dense 1-based or sparse),
 * every sample type, the string table, mappings, locations with inlined lines, functions and
 * sample labels. Hand-written protobuf field reader: no generated code, unknown fields skipped,
 * every length checked against the buffer, every index checked against its table; a corrupt
 * file gives SKP_EINVAL and a one-line reason, never a crash or an unbounded allocation
 * (the decompressed size is capped while inflating, and the memory the decoded tables will take
 * is computed from the counts of a first pass and refused above a budget before any table is
 * allocated: a gzip bomb or a file of millions of empty samples costs a bounded amount).
 *
 * The decoded profile owns one block holding NUL-terminated copies of the strings; all
 * `const char *` fields point into it. Reentrant (its only shared state is an atomic count of
 * refusals): the analysis runs it on the HTTP worker thread, goProfileReport on its own. */
#ifndef SKP_SERVER_PPROF_DECODE_H
#define SKP_SERVER_PPROF_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "skyprof/skp_err.h"

/* Default cap on the decompressed size, checked while inflating (a typical Go profile inflates
 * 3-10x and is far below it); callers may pass a smaller one. */
#define PPROF_DEFAULT_MAX_DECODED ((size_t)64 * 1024 * 1024)
/* Default cap on the memory one decode may hold at once: the inflated bytes plus every decoded
 * table and the string block (pprof_decode_memory). Tables of small entries can take 30x their
 * encoded size, so this, not the decompressed size, is what bounds a hostile file. */
#define PPROF_DEFAULT_MAX_MEMORY ((size_t)192 * 1024 * 1024)
/* Room for a decode error message. */
#define PPROF_ERR_MAX 160
/* A location index meaning "none". */
#define PPROF_NONE UINT32_MAX

struct pprof_value_type {
    const char *type; /* e.g. "cpu", "alloc_space", "samples" */
    const char *unit; /* e.g. "nanoseconds", "bytes", "count" */
};

struct pprof_function {
    uint64_t id;
    const char *name;
    const char *system_name;
    const char *filename;
    int64_t start_line;
};

struct pprof_mapping {
    uint64_t id;
    uint64_t memory_start, memory_limit, file_offset;
    const char *filename;
    const char *build_id;
};

/* One line of a location: lines[0] of a location is the innermost (inlined) frame, the last
 * one its outermost caller. */
struct pprof_line {
    uint32_t function; /* index into functions, PPROF_NONE if the id was 0 */
    int64_t line;
};

struct pprof_location {
    uint64_t id;
    uint32_t mapping; /* index into mappings, PPROF_NONE if none */
    uint64_t address;
    uint32_t line_off; /* first entry in lines */
    uint32_t n_lines;
};

struct pprof_label {
    const char *key;
    const char *str; /* "" for numeric labels */
    int64_t num;
    const char *num_unit;
};

struct pprof_sample {
    uint32_t loc_off; /* first entry in sample_locs (leaf first) */
    uint32_t n_locs;
    uint32_t label_off; /* first entry in labels */
    uint32_t n_labels;
    /* values: values[i * n_sample_types .. + n_sample_types) */
};

struct pprof_profile {
    struct pprof_value_type *sample_types;
    size_t n_sample_types;
    struct pprof_sample *samples;
    size_t n_samples;
    int64_t *values;       /* n_samples x n_sample_types */
    uint32_t *sample_locs; /* location indices */
    size_t n_sample_locs;
    struct pprof_label *labels;
    size_t n_labels;
    struct pprof_location *locations;
    size_t n_locations;
    struct pprof_line *lines;
    size_t n_lines;
    struct pprof_function *functions;
    size_t n_functions;
    struct pprof_mapping *mappings;
    size_t n_mappings;
    size_t n_strings;
    struct pprof_value_type period_type;
    int64_t period;
    int64_t time_nanos;
    int64_t duration_nanos;
    int default_sample_type; /* index into sample_types, -1 if unset */
    size_t mem_bytes;        /* memory the decoded profile holds (tables + strings) */
    char *_strings;          /* private: the string block */
    char **_string_table;    /* private: string index -> string */
};

/* Decodes `data` (borrowed; gzip if it starts with 1f 8b, raw otherwise) into *out (caller
 * frees with pprof_free). max_decoded caps the inflated size (0 = PPROF_DEFAULT_MAX_DECODED).
 * `errbuf` (PPROF_ERR_MAX bytes, may be NULL) gets the reason of a failure.
 * Errors: SKP_EINVAL (corrupt or not a profile), SKP_ETOOBIG (over max_decoded), SKP_ENOMEM.
 * Thread-safe. */
SKP_MUST_CHECK skp_err pprof_decode(const uint8_t *data, size_t len, size_t max_decoded,
                                    struct pprof_profile **out, char *errbuf);
/* Limits of one decode; a 0 field takes its default (PPROF_DEFAULT_*). */
struct pprof_limits {
    size_t max_decoded; /* decompressed bytes */
    size_t max_memory;  /* inflated bytes + decoded tables + strings held at once */
    size_t max_samples; /* samples (0 = no cap besides max_memory) */
};
/* pprof_decode with every limit given. Over a limit: SKP_ETOOBIG with the limit in errbuf,
 * counted in pprof_decode_refusals(). */
SKP_MUST_CHECK skp_err pprof_decode_limited(const uint8_t *data, size_t len,
                                            const struct pprof_limits *lim,
                                            struct pprof_profile **out, char *errbuf);
/* Decodes refused for a limit since the process started (any thread; for /metrics). */
uint64_t pprof_decode_refusals(void);
/* NULL ok. */
void pprof_free(struct pprof_profile *p);

/* Index of the sample type named `type` (e.g. "cpu", "alloc_space"), -1 if absent. */
int pprof_sample_type_index(const struct pprof_profile *p, const char *type);

#endif
