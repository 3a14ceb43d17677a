/* stack_native_capture.h - captures the native stack of ANOTHER thread of this process by
 * sending it a real-time signal (rt_tgsigqueueinfo, i.e. tgkill carrying a cookie) whose handler
 * walks its own stack with libunwind's unw_backtrace into a static per-slot buffer and wakes
 * the caller through a futex. Requests are split in two (request = send, collect = wait) so that
 * a sampler can signal all its targets at once and pay one scheduling delay per round instead of
 * one per thread. Process-wide singleton (signal dispositions are process-wide).
 *
 * Threading: install/uninstall/slot/request calls serialize on one internal mutex (never taken
 * by the handler); collect waits without it. The handler touches only static memory, C11 atomics
 * and async-signal-safe calls
 * (clock_gettime, futex); it never allocates, locks, or reads TLS. Design notes, signal choice
 * and the dlopen hazard: docs/native.md. */
#ifndef SKP_AGENT_STACK_NATIVE_CAPTURE_H
#define SKP_AGENT_STACK_NATIVE_CAPTURE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "skyprof/skp_err.h"

/* Frames one capture buffer holds (the public SKYPROF_MAX_STACK_DEPTH_CAP) plus room for the
 * handler and signal-trampoline frames that are skipped. */
#define SKP_NATIVE_MAX_FRAMES 4096
#define SKP_NATIVE_SKIP_MAX 8
/* Threads that can have a capture in flight at once (below the public SKYPROF_MAX_PARALLEL_CAP:
 * a request past it is not attached, so not sampled). Each
 * has a static buffer of SKP_NATIVE_MAX_FRAMES+SKIP entries (32 KiB of BSS, only the pages a
 * stack actually reaches become resident). */
#define SKP_NATIVE_MAX_TARGETS 32
/* Default real-time signal: SIGRTMIN + this. glibc reserves the two below SIGRTMIN; common
 * libraries (old LinuxThreads users, some JVM and Go runtimes, timer libraries) use the first few,
 * so we start a little higher. Overridable with SKYPROF_NATIVE_SIGNAL. */
#define SKP_NATIVE_SIGNAL_OFFSET 8
/* How long the sampler waits for the target thread's handler before giving up (sample lost).
 * A sleeping or running thread answers in ~10-60 us; a preempted thread only when the scheduler
 * runs it again: on a 2-core machine with a load of 8, waits beyond 50 ms were seen. A timeout
 * is reported as SKYPROF_CAPTURE_LOST, which makes the core skip that one dump (the request stays
 * sampled); the deadline stays generous so that a loaded machine loses few dumps, and a thread
 * that blocks the signal is refused at attach. SKYPROF_NATIVE_TIMEOUT_MS overrides it. */
#define SKP_NATIVE_DEFAULT_TIMEOUT_NS (200 * 1000 * 1000)
/* Signals sent but given up on that may still be delivered later: tracked so that uninstall can
 * wait for them (or keep the handler) instead of letting them hit SIG_DFL (which kills). */
#define SKP_NATIVE_ABANDONED_MAX 16
/* How long uninstall waits for abandoned signals to be delivered or their threads to exit. */
#define SKP_NATIVE_UNINSTALL_WAIT_NS (200 * 1000 * 1000)

/* What the sampler needs to know about a target thread; filled ON that thread by
 * skp__native_target_self (pthread_getattr_np is not valid for a thread that may be exiting). */
struct skp__native_target {
    pid_t tid;
    uintptr_t stack_lo; /* [stack_lo, stack_hi): bounds for the frame-pointer fallback */
    uintptr_t stack_hi;
};

struct skp__native_sample {
    uintptr_t *pcs; /* caller-owned, `cap` entries; filled innermost first: pcs[0] is the
                       interrupted instruction, the others are return addresses */
    uint32_t cap;
    uint32_t n;         /* out */
    bool truncated;     /* out: the stack had (or may have had) more than cap frames */
    bool used_fp_walk;  /* out: the loader was interrupted; frame-pointer walk used */
    int64_t handler_ns; /* out: time spent walking inside the handler */
};

enum skp__native_signal_mode {
    SKP_NATIVE_SIG_FREE = 0,    /* the signal had no handler: ours alone */
    SKP_NATIVE_SIG_CHAINED = 1, /* a host handler was there: non-ours signals are forwarded */
};

enum skp__native_req_state {
    SKP_NATIVE_REQ_NONE = 0,    /* no such request on the slot (never sent, collected, abandoned) */
    SKP_NATIVE_REQ_PENDING = 1, /* signal sent, handler not finished */
    SKP_NATIVE_REQ_DONE = 2,    /* result ready to collect */
};

struct skp__native_capture_stats {
    uint64_t requested; /* captures attempted */
    uint64_t captured;  /* captures that returned frames */
    /* the thread did not answer in time (blocked signal, descheduled) */
    uint64_t lost_timeout;
    uint64_t lost_gone;        /* the thread no longer exists (ESRCH) */
    uint64_t lost_busy;        /* a previous, abandoned handler run still owned the buffer */
    uint64_t lost_send;        /* signal could not be sent for another reason */
    uint64_t fp_walks;         /* loader interrupted: frame-pointer walk instead of libunwind */
    uint64_t stale;            /* our signals delivered after their capture was given up */
    uint64_t chained;          /* foreign signals forwarded to the host's handler */
    uint64_t swallowed;        /* foreign signals with no host handler to forward to */
    uint64_t handler_ns_total; /* time spent walking in the handler, summed */
    uint64_t handler_ns_max;
    int signo;   /* installed signal, 0 when not installed */
    int mode;    /* enum skp__native_signal_mode */
    bool parked; /* uninstall kept the handler (signals possibly still pending) */
    int slots_in_use;
};

/* Installs the handler on `signo` (0 = SKYPROF_NATIVE_SIGNAL from the environment if set, else
 * SIGRTMIN+SKP_NATIVE_SIGNAL_OFFSET, else the first real-time signal with no handler). The
 * previous disposition is read first; a host handler on an explicitly chosen signal is chained
 * (it keeps receiving every signal that is not ours), on the default signal another free one is
 * picked. Refuses SIGSEGV, SIGBUS, SIGILL, SIGABRT, SIGFPE, SIGTRAP, SIGSYS, SIGKILL, SIGSTOP.
 * Idempotent (a second call with the same or 0 signo is a no-op). Computes the loader text range.
 * Errors: SKP_EINVAL (forbidden/invalid signo, or a different signo while installed), SKP_EIO.
 * Thread-safe; not async-signal-safe. */
SKP_MUST_CHECK skp_err skp__native_capture_install(int signo);

/* Restores the previous disposition. If signals we gave up on may still be pending on live
 * threads, waits up to SKP_NATIVE_UNINSTALL_WAIT_NS for them, and if some remain keeps the
 * handler installed in pass-through mode ("parked": it forwards foreign signals and drops ours)
 * rather than expose the process to a late signal with SIG_DFL. No-op when not installed.
 * Thread-safe. */
void skp__native_capture_uninstall(void);

/* Fills *t for the calling thread (tid, stack bounds) and warms libunwind's per-thread state
 * (its trace cache lives in TLS and is created on first use: that first touch must not happen in
 * the handler). Errors: SKP_EIO (pthread_getattr_np failed). Not async-signal-safe. */
SKP_MUST_CHECK skp_err skp__native_target_self(struct skp__native_target *t);

/* Reserves a capture slot (buffer + request word) for one target thread, so that several
 * threads can be signalled at once and collected one by one. Errors: SKP_EFULL (all
 * SKP_NATIVE_MAX_TARGETS in use). Thread-safe. */
SKP_MUST_CHECK skp_err skp__native_slot_acquire(int *slot);
/* Returns a slot; a request still pending on it is abandoned (a late signal is dropped). The
 * caller must not collect on it concurrently. Thread-safe. */
void skp__native_slot_release(int slot);

/* Sends the capture signal for `slot` to thread t->tid and returns without waiting; the result is
 * fetched with skp__native_collect(slot, *seq). `cap` bounds the frames kept. If a request of this
 * slot is still pending, no second signal is sent: *seq is that request's.
 * Errors: SKP_ESTATE (not installed), SKP_EINVAL, SKP_ENOTFOUND (thread gone), SKP_EFULL (a
 * handler abandoned earlier still runs on this slot's buffer), SKP_EIO. Thread-safe
 * (serialized). */
SKP_MUST_CHECK skp_err skp__native_request(int slot, const struct skp__native_target *t,
                                           uint32_t cap, uint32_t *seq);

/* State of request `seq` on `slot` (enum skp__native_req_state). Lock-free. */
int skp__native_request_state(int slot, uint32_t seq);

/* Waits at most timeout_ns (<= 0 = default) for request `seq` and copies its frames into *s
 * (at most s->cap). On timeout the request is abandoned. Only one thread may collect a slot.
 * Errors: SKP_ETIMEDOUT (sample lost), SKP_ENOTFOUND (no such request: already collected or
 * abandoned), SKP_EIO (empty stack), SKP_EINVAL. */
SKP_MUST_CHECK skp_err skp__native_collect(int slot, uint32_t seq, struct skp__native_sample *s,
                                           int64_t timeout_ns);

/* request + collect. Errors: those of both. */
SKP_MUST_CHECK skp_err skp__native_capture(int slot, const struct skp__native_target *t,
                                           struct skp__native_sample *s, int64_t timeout_ns);

void skp__native_capture_get_stats(struct skp__native_capture_stats *out);

/* The installed signal, 0 when not installed. Thread-safe. */
int skp__native_capture_signo(void);

/* Sets the deadline collect uses when given timeout_ns <= 0 (<= 0 here = the default
 * SKP_NATIVE_DEFAULT_TIMEOUT_NS). install also takes it from SKYPROF_NATIVE_TIMEOUT_MS. */
void skp__native_capture_set_timeout_ns(int64_t timeout_ns);

/* Installs the native stack source's handler if not yet (stack_native.c; the source's destroy
 * removes it). Used by the native process source. Thread-safe. */
bool skp__native_source_ensure_installed(void);

/* Test hook: when set, the handler always uses the frame-pointer walk. */
void skp__native_capture_force_fp(bool on);
/* True when install found the loader's lock word (see skp__native_loader_lock). */
bool skp__native_capture_has_loader_lock(void);
/* Test hook: overrides the loader text range checked against the interrupted pc. */
void skp__native_capture_set_loader_range(uintptr_t lo, uintptr_t hi);
/* Test hook: when set, the handler overwrites errno before returning (proves it is restored). */
void skp__native_capture_clobber_errno(bool on);

struct skyprof_capture;
/* Copies a captured sample's s->n pcs into out->frames (which holds at least s->cap) as
 * address frames, innermost first: pcs[0] as is, the return addresses minus one so that they
 * fall inside their call instruction and its line is reported. Sets out->n and truncated.
 * Allocates nothing; both borrowed. */
void skp__native_sample_to_capture(const struct skp__native_sample *s, struct skyprof_capture *out);

#endif
