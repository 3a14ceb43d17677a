/* native.h - native (C/C++) stacks of another process, for --native: every thread is stopped
 * with ptrace (src/attach/stopper.h), unwound from its registers with libdw's CFI unwinder
 * (dwfl_linux_proc_attach + dwfl_getthread_frames: .eh_frame / .debug_frame of every module, so
 * frame-pointer-less code unwinds), symbolized with the modules' symbol tables, and merged with
 * the thread's Python frames read in the same stop: each native _PyEval_EvalFrameDefault frame
 * is replaced by the Python frames that evaluation runs (py-spy's rule), and the other frames of
 * the interpreter's own image (call machinery) are left out, so a C extension's frames sit under
 * the Python frame that called it.
 * Why ptrace and libdw: an exact unwind needs the thread's registers and stack at one instant,
 * i.e. the thread stopped; libdw is already the agent's symbolizer and unwinds remote threads
 * through ptrace without extra dependencies (libunwind-ptrace would be a second unwinder).
 * Single-threaded, and the same thread must stop, unwind and resume (ptrace ties tracees to it). */
#ifndef SKP_ATTACH_NATIVE_H
#define SKP_ATTACH_NATIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "attach/pyreader.h"
#include "skyprof/skp_err.h"

/* Deepest native stack unwound per thread. */
#define ATTACH_NATIVE_MAX_DEPTH 512
/* Symbol cache entries (direct-mapped by address). */
#define ATTACH_NATIVE_SYM_CACHE 8192
/* Longest symbol / module name kept. */
#define ATTACH_NATIVE_SYM_MAX 160
#define ATTACH_NATIVE_MODULE_MAX 64
/* Text of one merged sample's native names. */
#define ATTACH_NATIVE_TEXT_BYTES ((size_t)4 << 20)

struct attach_native;

struct attach_native_stats {
    uint64_t samples;       /* stops taken */
    uint64_t threads;       /* threads unwound */
    uint64_t frames;        /* native frames unwound */
    uint64_t unwind_errors; /* threads whose unwind stopped early (kept what came) */
    uint64_t stop_wait_ns;  /* total time from the interrupt until every thread stopped */
    uint64_t stop_ns;       /* total time every thread was held stopped (reads, unwind) */
};

/* Sets up native unwinding of `pid` (its modules from /proc/PID/maps). `py` (borrowed, may be
 * NULL for a process without CPython) is the Python reader to merge with; its image is the
 * interpreter image whose frames are hidden. On failure *out is NULL and `why` says why.
 * Errors: SKP_ENOTFOUND (no such process), SKP_EIO (libdw cannot attach), SKP_ENOMEM. */
SKP_MUST_CHECK skp_err attach_native_open(pid_t pid, struct attach_target *py,
                                          struct attach_native **out, char *why, size_t why_cap);
void attach_native_close(struct attach_native *n);

/* Stops every thread, reads the Python stacks (when a reader was given) and every thread's
 * native stack, resumes the threads, and writes the merged stacks into *s (innermost first;
 * native frames have native = true, name = symbol or "0x<hex>", file = module file name,
 * line = -1). Every thread of the process is listed, Python or not. Strings are valid until the
 * next call. Errors: SKP_ENOTFOUND (the process exited), SKP_EIO (it cannot be stopped: EPERM),
 * SKP_ENOMEM. The target's threads are never left stopped. */
SKP_MUST_CHECK skp_err attach_native_sample(struct attach_native *n, struct attach_sample *s);

void attach_native_get_stats(const struct attach_native *n, struct attach_native_stats *out);

/* True when `sym` names CPython's frame evaluator (_PyEval_EvalFrameDefault, also its compiler-
 * split ".cold" part). Pure. */
bool attach_native_is_eval(const char *sym);

/* Merges one thread's stacks (pure; unit-tested): native[0..n_native) innermost first with
 * is_eval[i] and is_interp[i] (a frame of the interpreter's image), py[0..n_py) innermost first
 * with their `entry` flags, into out[0..cap) (innermost first). Each eval frame takes the Python
 * frames up to and including the next entry frame; interpreter frames are dropped; Python frames
 * left over (an unwind cut short) are appended. Native frames are copied from native_frames[].
 * Returns the number written; *truncated when cap was reached. */
size_t attach_native_merge(const struct attach_frame *native_frames, const bool *is_eval,
                           const bool *is_interp, size_t n_native, const struct attach_frame *py,
                           size_t n_py, struct attach_frame *out, size_t cap, bool *truncated);

#endif
