/* pprof_analyze.h - the analysis of decoded pprof profiles: one stack tree for one sample type
 * (cpu, alloc_space, contentions, ...), weighted by the samples' values (not by their number,
 * as SkyWalking's OAP does), merged across any number of profiles (the instances a user picks).
 * Frames are "function (file:line)" (or "function (file)" when merging by function); inlined
 * lines of one location become separate frames, caller first; a location without symbols is
 * named by its mapping and address. The result is a struct analysis (analyzer.h) whose node
 * `count` is the inclusive value, so the exporters (export.h) render it unchanged.
 *
 * Bounded: at most PPROF_ANALYZE_MAX_NODES nodes. Pure and reentrant (the HTTP worker runs it). */
#ifndef SKP_SERVER_PPROF_ANALYZE_H
#define SKP_SERVER_PPROF_ANALYZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/analysis/analyzer.h"
#include "server/formats/pprof_decode.h"

/* Tree nodes one analysis may build (each ~40 bytes while building). */
#define PPROF_ANALYZE_MAX_NODES (4u * 1024 * 1024)
/* Sample types remembered for the "sampleTypes" answer. */
#define PPROF_ANALYZE_MAX_TYPES 16

struct pprof_analyze;

/* `sample_type` (borrowed until _new returns; copied) names the type to weigh by; NULL = the
 * first profile's default type (else its last type, pprof's convention). by_function merges the
 * lines of one function into one frame. Errors: SKP_ENOMEM. */
SKP_MUST_CHECK skp_err pprof_analyze_new(const char *sample_type, bool by_function,
                                         struct pprof_analyze **out);
/* Adds every sample of `p` (borrowed during the call). A profile without the chosen sample
 * type adds nothing and is counted in n_skipped. Errors: SKP_ETOOBIG (node cap), SKP_ENOMEM. */
SKP_MUST_CHECK skp_err pprof_analyze_add(struct pprof_analyze *a, const struct pprof_profile *p);
/* The sample type in use and its unit ("" until a profile fixed it); borrowed from `a`. */
const char *pprof_analyze_type(const struct pprof_analyze *a);
const char *pprof_analyze_unit(const struct pprof_analyze *a);
/* Sample types seen across the profiles added ("type/unit" strings, borrowed from `a`). */
size_t pprof_analyze_types(const struct pprof_analyze *a, const char *const **out);
/* Sum of the chosen values, samples used, profiles skipped. */
void pprof_analyze_totals(const struct pprof_analyze *a, int64_t *total, uint64_t *n_samples,
                          size_t *n_skipped);
/* Builds the trees (one per distinct root frame, nodes in BFS order as analyzer.h describes;
 * count = inclusive value, duration = inclusive value, duration_child_excluded = self value).
 * *out is freed with analysis_free and owns copies of every string. Errors: SKP_ENOMEM. */
SKP_MUST_CHECK skp_err pprof_analyze_finish(struct pprof_analyze *a, struct analysis **out);
/* NULL ok. */
void pprof_analyze_free(struct pprof_analyze *a);

/* Longest frame signature pprof_frame_signature writes (with the NUL). */
#define PPROF_FRAME_MAX 1024
/* Writes the signature of one frame of location `l` of `p`: line `ln` (NULL for a location
 * without lines: then "<mapping file>+0x<offset>" or "0x<address>") as "function (file:line)",
 * or "function (file)" when by_function. Pure. */
void pprof_frame_signature(const struct pprof_profile *p, const struct pprof_location *l,
                           const struct pprof_line *ln, bool by_function,
                           char out[PPROF_FRAME_MAX]);

#endif
