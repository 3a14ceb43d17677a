/* stack_native_walk.h - pure, async-signal-safe helpers of the native stack source: the bounded
 * frame-pointer walk used when libunwind must not run (thread interrupted inside the dynamic
 * loader), the loader text range, and the post-processing of a raw capture (skipping the
 * handler frames). No state, no allocation, no locks: every function here may run in a signal
 * handler unless its comment says otherwise. */
#ifndef SKP_AGENT_STACK_NATIVE_WALK_H
#define SKP_AGENT_STACK_NATIVE_WALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A half-open address range [lo, hi); lo == hi == 0 means "none". */
struct skp__addr_range {
    uintptr_t lo;
    uintptr_t hi;
};

static inline bool skp__addr_range_has(const struct skp__addr_range *r, uintptr_t a)
{
    return a >= r->lo && a < r->hi;
}

/* Walks the frame-pointer chain of an interrupted thread: pcs[0] = pc (the interrupted
 * instruction), then the return address saved in each frame, starting at `fp` (the interrupted
 * RBP). Every frame record read must lie inside the thread's stack [stack_lo, stack_hi), be
 * 8-byte aligned, and the chain must grow strictly upward; the walk stops at the first violation,
 * a zero return address, or `cap` entries. Returns the number of entries written (0 when cap is
 * 0). Without frame pointers (glibc, -fomit-frame-pointer code) the chain ends early: that is
 * the documented limit of this fallback. Async-signal-safe, no allocation; reads only memory
 * inside the given stack range. */
size_t skp__native_fp_walk(uintptr_t pc, uintptr_t fp, uintptr_t stack_lo, uintptr_t stack_hi,
                           uintptr_t *pcs, size_t cap);

/* Finds the executable text of the dynamic loader (ld.so, located through getauxval(AT_BASE))
 * and stores it in *out ({0,0} for a static binary or when it cannot be found). Not
 * async-signal-safe (dl_iterate_phdr takes the loader lock): call it at install time. */
void skp__native_loader_text(struct skp__addr_range *out);

/* Finds the lock word of the dynamic loader's lock that dl_iterate_phdr takes (glibc: the
 * recursive mutex `_dl_load_write_lock` inside ld.so's `_rtld_global`): the handler must not call
 * libunwind (which calls dl_iterate_phdr) while that word is non-zero, because the interrupted
 * thread may itself be acquiring, holding or releasing it (a recursive mutex is not re-entrant
 * half-way through its own lock/unlock). Found by observation, not by layout: inside a
 * dl_iterate_phdr callback it is the one recursive mutex in `_rtld_global` owned by the calling
 * thread. *out = NULL when not found (not glibc, symbol hidden, ambiguous). Not
 * async-signal-safe: call it at install time. */
void skp__native_loader_lock(const int **out);

/* Index of the interrupted frame in a libunwind capture taken inside the signal handler:
 * the first of the leading `max_skip` entries equal to `interrupted_pc`; when none matches
 * (unexpected unwinder behaviour), `fallback_skip` clamped to n. Pure. */
size_t skp__native_skip_count(const uintptr_t *pcs, size_t n, uintptr_t interrupted_pc,
                              size_t max_skip, size_t fallback_skip);

#endif
