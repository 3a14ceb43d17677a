/* symbolize.h - address -> "function (file:line)" for the native stack source, with libdw
 * (dwfl) over this process's own mappings, and a bounded per-address cache.
 *
 * Runs off the hot path (the agent's channel thread). Loading debug information is slow the
 * first time a module is seen (milliseconds to seconds for big binaries); later lookups of the
 * same address are served from the cache. Modules loaded after the symbolizer was created
 * (dlopen) are picked up at the next cache miss after the loader's load counter moved; an unload
 * clears the cache (its addresses may be reused).
 * Thread-safe: one internal mutex (lock order: only it). */
#ifndef SKP_AGENT_SYMBOLIZE_H
#define SKP_AGENT_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>

#include "skyprof/skp_err.h"

/* Default number of cached addresses. A profiled request path touches a few hundred distinct
 * return addresses; 8192 covers many endpoints at ~100 bytes per entry (< 1 MiB). */
#define SKP_SYMBOLIZE_DEFAULT_CACHE 8192
#define SKP_SYMBOLIZE_MAX_CACHE (1u << 20)
/* Longest code signature kept (longer C++ names are truncated). */
#define SKP_SYMBOLIZE_TEXT_MAX 512

struct skp__symbolizer;

struct skp__symbolizer_stats {
    uint64_t lookups;
    uint64_t hits;      /* answered from the cache (including cached "unknown") */
    uint64_t misses;    /* resolved through libdw */
    uint64_t refreshes; /* module list re-read (dlopen/dlclose seen) */
    uint64_t resets;    /* cache cleared (full, or a module was unloaded) */
    uint64_t unknown;   /* lookups that produced no name */
    uint32_t entries;   /* addresses cached now */
    uint32_t cap;
};

/* Creates a symbolizer for the calling process and reports its current modules (reads
 * /proc/self/maps; debug info is loaded lazily per module). cache_cap 0 = default; rounded up to
 * a power of two, at most SKP_SYMBOLIZE_MAX_CACHE. On success *out owns it (free with
 * skp__symbolizer_free). Errors: SKP_ENOMEM, SKP_EIO (libdw could not read the process maps). */
SKP_MUST_CHECK skp_err skp__symbolizer_new(uint32_t cache_cap, struct skp__symbolizer **out);

/* Frees everything. NULL ok. */
void skp__symbolizer_free(struct skp__symbolizer *s);

/* Writes the code signature of `addr` into buf (NUL-terminated, truncated to cap):
 *   "function (file.c:line)"   with line information,
 *   "function (libfoo.so)"     with a symbol but no line information,
 *   "libfoo.so+0x1234"         inside a module without a symbol for it.
 * `addr` is used as is: pass return address - 1 for caller frames so the line is the call site.
 * Returns the length written (< cap), or -1 when the address is in no module (buf set to "").
 * Thread-safe; not async-signal-safe (may allocate, read files). */
int skp__symbolize(struct skp__symbolizer *s, uintptr_t addr, char *buf, size_t cap);

void skp__symbolizer_get_stats(struct skp__symbolizer *s, struct skp__symbolizer_stats *out);

#endif
