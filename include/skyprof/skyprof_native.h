/* skyprof_native.h - the native (C/C++) stack source of libskyprof.
 *
 * The source samples a request's thread by sending it a real-time signal (default SIGRTMIN+8,
 * SKYPROF_NATIVE_SIGNAL to choose another) whose handler walks the stack with libunwind; frames
 * are symbolized later, off the hot path, with libdw into "function (file.c:line)".
 * See docs/native.md for how to profile a C/C++ service, the signal choice and the limits.
 *
 *     struct skyprof_config cfg;
 *     skyprof_config_init_defaults(&cfg);
 *     (void)skyprof_config_from_env(&cfg);
 *     skyprof_agent *agent = NULL;
 *     skp_err err = skyprof_agent_start(&cfg, skyprof_native_stack_source(), &agent);
 *     ...  per request:  skyprof_span *s = skyprof_entry_begin("/orders", sw8_or_NULL);
 *                        handle(); skyprof_entry_end(s);
 */
#ifndef SKYPROF_SKYPROF_NATIVE_H
#define SKYPROF_SKYPROF_NATIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "skyprof/skyprof.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The native stack source (static storage, never NULL; pass it to skyprof_agent_start or
 * skyprof_agent_set_stack_source). Its signal handler is installed when the first request thread
 * is attached (i.e. when a task is active and a request takes a slot), not before, and removed
 * by the source's destroy (agent stop). Frames are addresses (return address - 1 for callers);
 * its symbolize callback uses libdw. Thread-safe. */
SKYPROF_API const struct skyprof_stack_source *skyprof_native_stack_source(void);

/* The native PROCESS source (whole-process cpu, wall and thread dumps for PprofTask): lists the
 * threads of /proc/self/task (agent threads excluded), captures each with the same signal as the
 * stack source. Static storage; NULL when the library was built without it. */
SKYPROF_API const struct skyprof_proc_source *skyprof_native_proc_source(void);

struct skyprof_native_stats {
    /* capture (sampler side) */
    uint64_t captures_requested;
    uint64_t captures_ok;
    uint64_t lost_timeout;     /* thread did not run the handler in time (blocked signal...) */
    uint64_t lost_thread_gone; /* thread exited */
    uint64_t lost_busy;        /* an earlier timed-out handler still held the buffer */
    uint64_t lost_other;       /* signal could not be queued */
    uint64_t loader_fallbacks; /* thread interrupted inside ld.so: frame-pointer walk used */
    uint64_t stale_signals;    /* our signals delivered after their capture was abandoned */
    uint64_t chained_signals;  /* host signals forwarded to the host's handler */
    uint64_t handler_ns_total; /* time spent walking stacks inside the handler */
    uint64_t handler_ns_max;
    int signo;              /* signal in use (0 = not installed) */
    bool chained;           /* the host had a handler on it: we forward its signals */
    bool parked;            /* stopped but kept installed (a signal may still be pending) */
    uint64_t prefetched;    /* signals sent ahead to other profiled threads of the round */
    uint64_t prefetch_used; /* captures served by such a prefetched signal */
    uint64_t attach_refused_blocked; /* requests not profiled: their thread blocks the signal */
    /* symbolization (channel thread) */
    uint64_t symbolize_lookups;
    uint64_t symbolize_hits;      /* served from the per-address cache */
    uint64_t symbolize_refreshes; /* module list re-read after dlopen/dlclose */
    uint64_t symbolize_unknown;
    uint32_t symbolize_cache_entries;
    double symbolize_hit_rate; /* hits / lookups, 0 when no lookup */
};

/* Counters since the process loaded the library (the source is a process-wide singleton).
 * Thread-safe. */
SKYPROF_API void skyprof_native_get_stats(struct skyprof_native_stats *out);

#ifdef __cplusplus
}
#endif
#endif
