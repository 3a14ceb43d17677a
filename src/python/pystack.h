/* pystack.h - captures the Python stack of any thread of this process, formatted the way
 * SkyWalking's Python agent writes code signatures: "<co_filename>.<co_name>: <line>".
 *
 * Two modes, chosen once at skp__pyreader_new:
 *  - direct (a compat/ layout matches the running CPython and process_vm_readv works): reads
 *    the target thread's frames WITHOUT the GIL, every dereference through safe_read, every
 *    pointer/type/size validated, bounded walk. Never calls the Python C API; safe to run on an
 *    agent thread while the target runs, ends or frees its frames (a failed read ends the walk).
 *  - portable: takes the GIL (PyGILState_Ensure) and walks PyFrame_GetBack with
 *    PyFrame_GetCode/PyFrame_GetLineNumber. Slower, never wrong. Refuses (returns an error)
 *    while the interpreter is finalizing.
 * A reader is used by one thread at a time (the sampler owns one; dump_stack uses another,
 * serialized by the GIL). */
#ifndef SKP_PYTHON_PYSTACK_H
#define SKP_PYTHON_PYSTACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "skyprof/skp_err.h"
#include "skyprof/skyprof.h"

/* Frames walked per capture at most (beyond the caller's cap, to skip incomplete frames). */
#define SKP_PY_MAX_WALK (SKYPROF_MAX_STACK_DEPTH_CAP + 16)
/* Code objects whose headers are kept from one sample to the next (speculative re-read). */
#define SKP_PY_HINT_CODES 96
/* Largest slice of the thread's frame data stack copied in one read. */
#define SKP_PY_WINDOW_MAX (64 * 1024)
/* Room above the data stack top copied too, for frames pushed between our reads. */
#define SKP_PY_WINDOW_SLACK 1024
/* Distinct code objects resolved per capture at most (frames of others are skipped). */
#define SKP_PY_MAX_CODES 512

/* One target thread: created on that thread (GIL held), then read from anywhere. */
struct skp__pytarget {
    uintptr_t tstate;         /* the thread's PyThreadState */
    uintptr_t interp;         /* its interpreter (validation) */
    unsigned long thread_id;  /* PyThread_get_thread_ident() of the thread (validation) */
    unsigned long native_tid; /* its kernel tid (validation: pthread ids are reused quickly) */
    /* speculation state, written by the capturing thread only */
    uintptr_t hint_cframe;
    uintptr_t hint_win_lo;
    size_t hint_win_len;
    size_t n_hint_codes;
    uintptr_t hint_codes[SKP_PY_HINT_CODES];
};

struct skp__pyreader;

struct skp__pyreader_stats {
    uint64_t captures;
    uint64_t failures;
    uint64_t frames;
    uint64_t code_hits;
    uint64_t code_misses;
    uint64_t watched_hits;    /* code objects proven current by a watch (no read) */
    uint64_t syscalls;        /* process-wide safe_read syscalls so far */
    uint64_t bounce_syscalls; /* how many of them used the bounce buffer (safe_read.h) */
    bool direct;              /* direct mode in use */
    const char *layout;       /* "3.11" or "portable" */
};

/* Creates a reader (GIL held: the mode is chosen from the running interpreter). `force_portable`
 * selects the portable mode even when a layout exists (tests, benchmarks). Errors: SKP_ENOMEM. */
SKP_MUST_CHECK skp_err skp__pyreader_new(bool force_portable, struct skp__pyreader **out);
/* Frees the reader. NULL ok. No GIL needed. */
void skp__pyreader_free(struct skp__pyreader *r);

/* Fills *t for the calling thread. GIL held. Errors: SKP_ESTATE (no thread state). */
SKP_MUST_CHECK skp_err skp__pytarget_init_current(struct skp__pytarget *t);
/* Fills *t for the thread whose threading ident is `ident`. GIL held. Errors: SKP_ENOTFOUND. */
SKP_MUST_CHECK skp_err skp__pytarget_init_ident(struct skp__pytarget *t, unsigned long ident);

/* Captures the target's stack into out (core contract of skyprof.h: frames innermost first,
 * at most out->cap, truncated set when deeper; text written into out->scratch). Returns 0, or
 * < 0 when the thread cannot be read (gone, reused thread state, finalizing). In direct mode: no
 * GIL needed, never calls the C API. In portable mode: must be called WITHOUT the GIL by a thread
 * that may take it, or with the GIL held if `gil_held`. Hot path in direct mode. */
int skp__pyreader_capture(struct skp__pyreader *r, struct skp__pytarget *t, bool gil_held,
                          struct skyprof_capture *out);

/* The leaf frame text that marks a suspended request's await chain. */
#define SKP_PY_WAITING_MARK "(waiting)"

/* Captures the request whose asyncio task runs the coroutine at `coro` (an address; 0 = a
 * thread request: same as skp__pyreader_capture), on the thread of `t`:
 *  - coroutine running: t's stack from the coroutine's frame up (the event loop under it cut);
 *  - suspended: its await chain (the coroutine's frame, the one it awaits, ... down to the
 *    innermost suspended one), innermost first, under a SKP_PY_WAITING_MARK leaf;
 *  - suspended while `worker` (non-NULL) runs work it handed to a thread pool: the worker
 *    thread's stack on top of the await chain, no mark.
 * Every read is a safe read validated as in the thread walk (a freed coroutine yields -1). In
 * portable mode the thread's stack is captured instead. Returns 0 or < 0. */
int skp__pyreader_capture_task(struct skp__pyreader *r, struct skp__pytarget *t, uintptr_t coro,
                               struct skp__pytarget *worker, struct skyprof_capture *out);

/* The sampler is about to make `n_captures` captures with this reader, among them those of the
 * asyncio tasks of `coros` (n of them): reads, in one batched safe read, the await chains they
 * had at their last capture (as each capture_task would read its own), for those captures to use.
 * The batch serves only the next n_captures captures (count them with skp__pyreader_capture_done)
 * and is dropped by the next prepare. Sampler thread; no-op in portable mode. */
void skp__pyreader_prepare_tasks(struct skp__pyreader *r, const uintptr_t *coros, size_t n,
                                 size_t n_captures);
/* Counts one capture made after a prepare (whatever it captured). */
void skp__pyreader_capture_done(struct skp__pyreader *r);

void skp__pyreader_get_stats(const struct skp__pyreader *r, struct skp__pyreader_stats *out);

/* Switches a new reader (before its first capture) to qualified frames for pprof files:
 * "<co_qualname> (<co_filename>:<line>)", which the process-profile encoder splits into function,
 * file and line (skp__proc_split_frame). Trace profiling keeps SkyWalking's "<file>.<co_name>:
 * <line>" (the default). */
void skp__pyreader_set_qualified(struct skp__pyreader *r);

/* True when the reader works without the GIL. */
bool skp__pyreader_is_direct(const struct skp__pyreader *r);

#endif
