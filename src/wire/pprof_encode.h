/* pprof_encode.h - builds a pprof profile (the public perftools.profiles profile.proto that
 * `go tool pprof` reads) from stack samples, and encodes it, gzip-compressed or raw.
 *
 * A builder interns strings, functions (name + file), locations (function + line) and samples
 * (location ids + labels): adding the same stack with the same labels twice sums the values, so
 * memory grows with the number of DISTINCT stacks, never with the sampling time. Every table
 * counts against one byte budget fixed at creation; an add that would exceed it fails with
 * SKP_EFULL and changes nothing (the caller drops and counts that sample).
 * Ids are dense and 1-based (what SkyWalking's OAP parser expects). No mappings are written
 * (frames are already symbolized). Used by the agents (process profiling), the server's eBPF
 * profiles and the server's pprof export of an analysis (server/export_pprof.c). A builder is
 * used by one thread at a time; no global state. */
#ifndef SKP_WIRE_PPROF_ENCODE_H
#define SKP_WIRE_PPROF_ENCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "skyprof/skp_err.h"

/* Sample types per profile at most (pprof itself has no limit; ours never needs more). */
#define SKPX_PPROF_MAX_TYPES 4
/* Frames per sample at most (deeper stacks keep their innermost frames), unless the builder was
 * given a higher cap with skpx_pprof_set_max_frames. */
#define SKPX_PPROF_MAX_FRAMES 1024
/* Highest cap skpx_pprof_set_max_frames accepts (the server stores stacks of 4096 frames). */
#define SKPX_PPROF_MAX_FRAMES_LIMIT 4096
/* Labels per sample at most. */
#define SKPX_PPROF_MAX_LABELS 8

struct skpx_pprof;

/* A sample type or the period type, e.g. {"cpu", "nanoseconds"}. Borrowed; copied by new. */
struct skpx_pprof_type {
    const char *type;
    const char *unit;
};

/* One frame: function name, file name, line (0 = unknown). Bytes are borrowed (not necessarily
 * NUL-terminated) and copied by add. An empty file is allowed. */
struct skpx_pprof_frame {
    const char *func;
    size_t func_len;
    const char *file;
    size_t file_len;
    int64_t line;
};

/* A label: string label when str != NULL, else numeric (num, with num_unit or NULL). Key and
 * strings borrowed (NUL-terminated), copied by add. */
struct skpx_pprof_label {
    const char *key;
    const char *str;
    int64_t num;
    const char *num_unit;
};

/* Creates a builder for n_types sample types (1..SKPX_PPROF_MAX_TYPES), every value of a sample
 * given in that order. `max_bytes` bounds the builder's memory (tables and text; at least 4 KiB).
 * Errors: SKP_EINVAL, SKP_ENOMEM. *out is NULL on failure. Caller frees with skpx_pprof_free. */
SKP_MUST_CHECK skp_err skpx_pprof_new(const struct skpx_pprof_type *types, size_t n_types,
                                      size_t max_bytes, struct skpx_pprof **out);
/* Frees the builder. NULL ok. */
void skpx_pprof_free(struct skpx_pprof *p);

/* Period type and period (e.g. {"cpu","nanoseconds"}, 10000000), profile start time (ns since
 * the epoch) and duration (ns). Strings copied. Errors: SKP_EFULL (budget), SKP_EINVAL. */
SKP_MUST_CHECK skp_err skpx_pprof_set_period(struct skpx_pprof *p, const struct skpx_pprof_type *t,
                                             int64_t period);
void skpx_pprof_set_time(struct skpx_pprof *p, int64_t time_nanos, int64_t duration_nanos);
/* Names the sample type `go tool pprof` shows first (profile.proto's default_sample_type): `type`
 * is the type name of one of the sample types given to new (e.g. "samples"). Without it pprof
 * picks the last sample type. Errors: SKP_EINVAL (NULL, or not one of the builder's types). */
SKP_MUST_CHECK skp_err skpx_pprof_set_default_type(struct skpx_pprof *p, const char *type);
/* Lets later adds keep up to `max_frames` frames per sample (SKPX_PPROF_MAX_FRAMES ..
 * SKPX_PPROF_MAX_FRAMES_LIMIT) instead of SKPX_PPROF_MAX_FRAMES; for the server, whose stored
 * stacks hold up to 4096 frames. The builder then keeps one sample-key scratch of
 * 8 x (max_frames + 34) bytes, counted against its budget. skpx_pprof_each and skpx_pprof_sample
 * still give at most SKPX_PPROF_MAX_FRAMES frames of a sample (its innermost); the encoded
 * profile has them all. Errors: SKP_EINVAL (out of range, or lower than an earlier cap),
 * SKP_EFULL (budget), SKP_ENOMEM. */
SKP_MUST_CHECK skp_err skpx_pprof_set_max_frames(struct skpx_pprof *p, size_t max_frames);
/* Adds a comment line to the profile (shown by `go tool pprof -comments`). Copied.
 * Errors: SKP_EFULL, SKP_EINVAL. */
SKP_MUST_CHECK skp_err skpx_pprof_add_comment(struct skpx_pprof *p, const char *text);

/* Adds one sample: frames LEAF FIRST (frames[0] = where the thread was), `values` has one entry
 * per sample type. A sample with the same frames and labels as an earlier one is merged (values
 * summed). More than SKPX_PPROF_MAX_FRAMES frames (or the builder's own cap, see
 * skpx_pprof_set_max_frames): the innermost are kept. n_frames 0 is allowed
 * (an empty stack). Errors: SKP_EINVAL (NULL arguments, > SKPX_PPROF_MAX_LABELS labels),
 * SKP_EFULL (the budget would be exceeded; nothing added), SKP_ENOMEM. Hot path of the agents'
 * process sampler thread: no syscall, allocation only when a table grows. */
SKP_MUST_CHECK skp_err skpx_pprof_add(struct skpx_pprof *p, const struct skpx_pprof_frame *frames,
                                      size_t n_frames, const int64_t *values,
                                      const struct skpx_pprof_label *labels, size_t n_labels);

/* For callers whose samples share frames (the server's export of a tree, where every node's
 * frame is a prefix of its descendants' stacks): resolves one frame to its location id once
 * (interning its function, file and line as skpx_pprof_add does; ids are 1-based and stable for
 * the builder's life), so samples can then be added by id with skpx_pprof_add_ids. Errors:
 * SKP_EINVAL (NULL), SKP_EFULL (budget), SKP_ENOMEM. */
SKP_MUST_CHECK skp_err skpx_pprof_location(struct skpx_pprof *p, const struct skpx_pprof_frame *f,
                                           uint64_t *id);
/* skpx_pprof_add with the stack given as location ids of this builder (leaf first), merged with
 * samples added either way. Errors: those of skpx_pprof_add, and SKP_EINVAL for an id this
 * builder never gave. */
SKP_MUST_CHECK skp_err skpx_pprof_add_ids(struct skpx_pprof *p, const uint64_t *ids, size_t n_ids,
                                          const int64_t *values,
                                          const struct skpx_pprof_label *labels, size_t n_labels);

/* Encodes the profile; gzip-compressed when `gzip`. *out (skpx_malloc'd, caller frees with
 * skpx_free) holds *out_len bytes. The builder is unchanged and may take more samples.
 * Errors: SKP_ENOMEM, SKP_EIO (compression failed). *out NULL on failure. */
SKP_MUST_CHECK skp_err skpx_pprof_encode(const struct skpx_pprof *p, bool gzip, uint8_t **out,
                                         size_t *out_len);

/* One merged sample as skpx_pprof_each gives it: frames leaf first (func/file point into the
 * builder: valid until it changes or is freed; not NUL-terminated, use the lengths), values in
 * sample-type order. Return non-zero to stop. */
typedef int (*skpx_pprof_sample_cb)(void *ud, const struct skpx_pprof_frame *frames,
                                    size_t n_frames, const int64_t *values);
/* Calls cb for every distinct sample in insertion order, with `scratch` (room for
 * SKPX_PPROF_MAX_FRAMES frames, caller-owned) holding the frames. Labels are not given (samples
 * that differ only by labels come once each). Returns cb's non-zero value or 0. */
int skpx_pprof_each(const struct skpx_pprof *p, struct skpx_pprof_frame *scratch,
                    skpx_pprof_sample_cb cb, void *ud);
/* The same for distinct sample `i` (0 .. skpx_pprof_n_samples - 1) alone: fills scratch and
 * *n_frames, points *values at its values (borrowed). Returns false when i is out of range. */
bool skpx_pprof_sample(const struct skpx_pprof *p, size_t i, struct skpx_pprof_frame *scratch,
                       size_t *n_frames, const int64_t **values);

/* Distinct samples, memory in use (bytes counted against the budget). */
size_t skpx_pprof_n_samples(const struct skpx_pprof *p);
size_t skpx_pprof_bytes(const struct skpx_pprof *p);

#endif
