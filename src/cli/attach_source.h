/* attach_source.h - a libskyprof PROCESS source (struct skyprof_proc_source, public API) whose
 * threads are those of ANOTHER process, read from outside with src/attach: what lets
 * `skyprof attach` serve PprofTask cpu / wall / goroutine tasks, and the continuous-profiling
 * process checks, for a CPython process that has no agent inside it.
 *
 * Threading: the agent calls list_threads, capture, thread_cpu and end on its skp-proc thread
 * (never concurrently), process_usage on its channel thread (it reads /proc only and touches no
 * state of the others). The source owns the attach target it was given. */
#ifndef SKP_CLI_ATTACH_SOURCE_H
#define SKP_CLI_ATTACH_SOURCE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "skyprof/skyprof.h"

struct attach_target;

/* Counters of one source (read them after the agent stopped, or accept torn values). */
struct attach_source_stats {
    uint64_t samples; /* reads of the whole process (attach_target_sample) */
    uint64_t reused;  /* captures served from the read of the same round */
    uint64_t lost;    /* captures answered SKYPROF_CAPTURE_LOST (torn, no stack) */
};

/* Fills *out with a process source reading `t` (takes ownership of t: destroy closes it).
 * `native_frames` unused for now (false). Errors: SKP_ENOMEM (t is then closed). */
SKP_MUST_CHECK skp_err attach_source_init(struct attach_target *t, struct skyprof_proc_source *out);

/* Counters of the source made by attach_source_init (its `ud`). */
void attach_source_get_stats(void *ud, struct attach_source_stats *out);

/* Pure helpers (unit-tested): parse one /proc/PID/stat line (len bytes, borrowed). Each returns
 * false when the line is malformed. */
bool attach_stat_state(const char *stat, size_t len, char *state);
/* utime + stime (fields 14, 15, clock ticks) and num_threads (field 20). */
bool attach_stat_usage(const char *stat, size_t len, uint64_t *ticks, int *n_threads);

#endif
