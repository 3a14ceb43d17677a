/* ebpf_analyze.h - the stacks eBPF agents uploaded (store_ebpf.h) as stack trees: the analysis
 * behind the HTTP API's /api/v1/ebpf/tasks/{id}/analyze and GraphQL's
 * analysisEBPFProfilingResult (one implementation, two front doors).
 *
 * The stored stacks (summed per process, kind and symbols by the store) of one or more
 * (task, process) scans are put into a pprof builder (wire/pprof_encode.h), encoded and analysed
 * by the process-profile code (pprof_decode + pprof_analyze), so these profiles get the same
 * trees, totals and exports as pprof files. Sample types: ON_CPU "samples/count" (dumpCount);
 * OFF_CPU "switches/count" (switchCount) and "off_cpu/nanoseconds" (duration). A symbol is one
 * frame; the root of a tree is the outermost frame.
 *
 * Threads: the caller's (the HTTP worker's job, a GraphQL resolver); no state outside `b`. */
#ifndef SKP_SERVER_EBPF_ANALYZE_H
#define SKP_SERVER_EBPF_ANALYZE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "server/analysis/analyzer.h"
#include "server/store/store.h"
#include "skyprof/skp_err.h"

/* Memory budget of the profile built from the scanned stacks (stacks past it are dropped and
 * the result says it is partial). */
#define EBPF_PROFILE_BYTES_MAX (256u << 20)

struct ebpf_build;

/* What ebpf_build_finish made; the caller frees it with ebpf_result_cleanup. */
struct ebpf_result {
    struct analysis *analysis;
    bool on_cpu;               /* ON_CPU stacks were analysed (else OFF_CPU) */
    const char *sample_type;   /* "samples", "switches" or "off_cpu" */
    const char *unit;          /* "count" or "nanoseconds" */
    int64_t total;             /* sum of the sample type's values */
    uint64_t n_stacks;         /* distinct stacks added */
    bool partial;              /* the budget was reached: some stacks were left out */
    int64_t first_ms, last_ms; /* earliest and latest upload time of the stacks */
    json_t *processes;         /* {processId: {onCpuStacks, offCpuStacks}}; owned */
};

/* Errors: SKP_ENOMEM. */
SKP_MUST_CHECK skp_err ebpf_build_new(struct ebpf_build **out);
/* Adds the stacks of task `task_id` (of `process_id` unless NULL) uploaded at times within
 * [from_ms, to_ms] (store_ebpf_scan_task). Errors: the store's, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err ebpf_build_scan(struct ebpf_build *b, struct store *st, const char *task_id,
                                       const char *process_id, int64_t from_ms, int64_t to_ms);
/* Whether any stack was added. */
bool ebpf_build_empty(const struct ebpf_build *b);
/* Analyses the added stacks into *out. A profile has one target: should both ON_CPU and OFF_CPU
 * stacks be present, ON_CPU is analysed. OFF_CPU stacks are weighted by their duration when
 * `off_cpu_by_duration`, else by their switch count. Errors: SKP_ENOTFOUND (no stack added),
 * SKP_ETOOBIG (more than PPROF_ANALYZE_MAX_NODES tree nodes), SKP_ENOMEM. */
SKP_MUST_CHECK skp_err ebpf_build_finish(struct ebpf_build *b, bool off_cpu_by_duration,
                                         struct ebpf_result *out);
void ebpf_build_free(struct ebpf_build *b);
void ebpf_result_cleanup(struct ebpf_result *r);

#endif
