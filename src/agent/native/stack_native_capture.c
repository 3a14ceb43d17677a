/* stack_native_capture.c - signal-driven capture of other threads' native stacks.
 *
 * Design. One process-wide engine with SKP_NATIVE_MAX_TARGETS slots. A capture on a slot is a
 * small protocol on the slot's 32-bit futex word, `state` = seq << 2 | phase:
 *   request:  state = seq|REQUESTED, rt_tgsigqueueinfo(pid, tid, signo, cookie(slot, seq))
 *   handler:  cookie matches and CAS(seq|REQUESTED -> seq|RUNNING) succeeds: walk into the slot's
 *             static buffer, state = seq|DONE, futex wake
 *   collect:  wait for seq|DONE, copy out, state = seq|IDLE. At the deadline CAS(seq|REQUESTED ->
 *             seq|IDLE) abandons the request; a late handler then fails its CAS and drops the
 *             signal ("stale"). If the handler is already RUNNING the sample is lost and the slot
 *             stays owned by that run until it reaches DONE (new requests report "busy").
 * The handler touches only static storage: the per-thread handle of the stack source may be
 * freed on another thread while a late signal is still pending, so no pointer to it is ever
 * given to the handler. The signal carries a cookie (SI_QUEUE + magic in sival) so our signals
 * are told apart from the host's without TLS or gettid, even when they arrive late.
 *
 * Threading: `mu` serializes install, uninstall, slot acquire/release and request; collect runs
 * without it (one collector per slot). The handler never locks. Lock order: only `mu`. After fork
 * the child re-initialises `mu` and forgets requests (their threads do not exist in the child). */
#include "agent/native/stack_native_capture.h"

#define UNW_LOCAL_ONLY
#include <errno.h>
#include <libunwind.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "agent/native/stack_native_walk.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/err.h"
#include "common/log.h"
#include "skyprof/skyprof.h"

#define PHASE_IDLE 0u
#define PHASE_REQUESTED 1u
#define PHASE_RUNNING 2u
#define PHASE_DONE 3u
#define PHASE_MASK 3u
#define SEQ_BITS 24
#define SEQ_MAX ((1u << SEQ_BITS) - 1u)
/* High half of sival: "SKPF". The low half carries slot << SEQ_BITS | seq. */
#define SKP_NATIVE_MAGIC 0x534B5046u
/* Frames skipped when the interrupted pc is not found among the first SKP_NATIVE_SKIP_MAX:
 * the handler's own frame and the kernel's signal trampoline (__restore_rt). */
#define SKP_NATIVE_FALLBACK_SKIP 2
#define SKP_NATIVE_BUF_FRAMES (SKP_NATIVE_MAX_FRAMES + SKP_NATIVE_SKIP_MAX)

_Static_assert(SKP_NATIVE_MAX_TARGETS <= 256, "slot index must fit in 8 bits of the cookie");

struct capture_counters {
    _Atomic uint64_t requested, captured, lost_timeout, lost_gone, lost_busy, lost_send;
    _Atomic uint64_t fp_walks, stale, chained, swallowed, handler_ns_total, handler_ns_max;
};

struct slot {
    _Atomic uint32_t state; /* futex word, see the file comment */
    uint32_t seq;           /* last sequence number used (under mu) */
    bool in_use;            /* under mu */
    /* Request parameters: written before state=REQUESTED (release), read by the handler after
     * its CAS (acquire). */
    uintptr_t req_stack_lo, req_stack_hi;
    uint32_t req_want;
    pid_t req_tid;
    /* Result: written by the handler before state=DONE (release). */
    uint32_t res_n;
    uintptr_t res_pc;
    bool res_fp;
    int64_t res_ns;
};

static struct engine {
    pthread_mutex_t mu;
    bool installed;
    bool parked;
    int signo;
    int mode;
    struct sigaction prev; /* written before our handler is installed; read by the handler */

    _Atomic int64_t timeout_ns; /* default collect deadline; 0 = SKP_NATIVE_DEFAULT_TIMEOUT_NS */
    _Atomic bool force_fp;
    _Atomic bool clobber_errno; /* test hook: the handler scribbles on errno */
    _Atomic uintptr_t loader_lo, loader_hi;
    const int *_Atomic loader_lock; /* lock word of the loader lock, NULL = unknown */

    struct slot slots[SKP_NATIVE_MAX_TARGETS];

    /* Requests given up on whose signal may still arrive: cookie low half (0 = empty) and tid. */
    _Atomic uint32_t abandoned_id[SKP_NATIVE_ABANDONED_MAX];
    pid_t abandoned_tid[SKP_NATIVE_ABANDONED_MAX];
    _Atomic bool abandoned_overflow;

    struct capture_counters c;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};

static uintptr_t g_buf[SKP_NATIVE_MAX_TARGETS][SKP_NATIVE_BUF_FRAMES];
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

static void counter_add(_Atomic uint64_t *c, uint64_t v)
{
    atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

static int64_t handler_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO; async-signal-safe */
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void futex_wake_all(_Atomic uint32_t *w)
{
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

static void futex_wait(_Atomic uint32_t *w, uint32_t expected, int64_t timeout_ns)
{
    struct timespec ts = {.tv_sec = timeout_ns / 1000000000, .tv_nsec = timeout_ns % 1000000000};
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, expected, &ts, NULL, 0);
}

static uint32_t cookie_id(int slot, uint32_t seq)
{
    return (uint32_t)slot << SEQ_BITS | seq;
}

/* Forwards a signal that is not ours to whatever the host had installed. A host SIG_DFL on a
 * real-time signal would terminate the process; nobody can rely on that while we are installed,
 * and re-raising with the default action would need a process-wide disposition change, so such
 * signals are dropped and counted. */
static void chain_previous(int sig, siginfo_t *si, void *uc)
{
    const struct sigaction *p = &g.prev;

    if (p->sa_flags & SA_SIGINFO) {
        if (p->sa_sigaction) {
            counter_add(&g.c.chained, 1);
            p->sa_sigaction(sig, si, uc);
            return;
        }
    } else if (p->sa_handler != SIG_DFL && p->sa_handler != SIG_IGN && p->sa_handler) {
        counter_add(&g.c.chained, 1);
        p->sa_handler(sig);
        return;
    }
    counter_add(&g.c.swallowed, 1);
}

static void forget_abandoned(uint32_t id)
{
    for (size_t i = 0; i < SKP_NATIVE_ABANDONED_MAX; i++) {
        uint32_t want = id;
        if (atomic_compare_exchange_strong(&g.abandoned_id[i], &want, 0))
            return;
    }
}

/* The interrupted instruction and frame pointer, from the signal context. On an architecture
 * not listed both are 0: libunwind still walks, the handler frames are cut by count, and the
 * loader check and frame-pointer fallback are off. */
static uintptr_t interrupted_pc(const ucontext_t *uc)
{
#if defined(__x86_64__)
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    return (uintptr_t)uc->uc_mcontext.pc;
#else
    (void)uc;
    return 0;
#endif
}

static uintptr_t interrupted_fp(const ucontext_t *uc)
{
#if defined(__x86_64__)
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RBP];
#elif defined(__aarch64__)
    return (uintptr_t)uc->uc_mcontext.regs[29];
#else
    (void)uc;
    return 0;
#endif
}

static void walk_interrupted(struct slot *sl, uintptr_t *buf, const ucontext_t *uc)
{
    int64_t t0 = handler_now_ns();
    uintptr_t pc = interrupted_pc(uc);
    uintptr_t fp = interrupted_fp(uc);
    uintptr_t lo = atomic_load_explicit(&g.loader_lo, memory_order_relaxed);
    uintptr_t hi = atomic_load_explicit(&g.loader_hi, memory_order_relaxed);
    const int *lock = atomic_load_explicit(&g.loader_lock, memory_order_relaxed);
    bool use_fp =
        pc && (atomic_load_explicit(&g.force_fp, memory_order_relaxed) || (pc >= lo && pc < hi) ||
               (lock && __atomic_load_n(lock, __ATOMIC_ACQUIRE)));
    size_t n = 0;

    /* libunwind looks up unwind tables through dl_iterate_phdr, which takes the loader's
     * recursive lock. If this thread was interrupted while acquiring, holding or releasing it
     * (dlopen, dlclose, another dl_iterate_phdr user such as a C++ exception), taking it again
     * from the handler deadlocks the thread on itself (reproduced: interrupted inside
     * pthread_mutex_lock called by _dl_close_worker), or reads a list half-way through an update.
     * So: lock word non-zero (whoever holds it), or pc inside ld.so -> the bounded frame-pointer
     * walk, which touches no loader state. */
    if (!use_fp) {
        int r = unw_backtrace((void **)buf, (int)sl->req_want);
        n = r > 0 ? (size_t)r : 0;
        if (n == 0)
            use_fp = true;
    }
    if (use_fp && pc)
        n = skp__native_fp_walk(pc, fp, sl->req_stack_lo, sl->req_stack_hi, buf, sl->req_want);
    sl->res_n = (uint32_t)n;
    sl->res_pc = pc;
    sl->res_fp = use_fp;
    sl->res_ns = handler_now_ns() - t0;
}

static void on_signal(int sig, siginfo_t *si, void *ucv)
{
    int saved_errno = errno;
    uintptr_t cookie = si ? (uintptr_t)si->si_value.sival_ptr : 0;

    if (si && si->si_code == SI_QUEUE && (uint32_t)(cookie >> 32) == SKP_NATIVE_MAGIC) {
        uint32_t id = (uint32_t)cookie;
        uint32_t idx = id >> SEQ_BITS;
        uint32_t seq = id & SEQ_MAX;
        if (idx < SKP_NATIVE_MAX_TARGETS) {
            struct slot *sl = &g.slots[idx];
            uint32_t want = seq << 2 | PHASE_REQUESTED;
            if (atomic_compare_exchange_strong_explicit(&sl->state, &want, seq << 2 | PHASE_RUNNING,
                                                        memory_order_acquire,
                                                        memory_order_relaxed)) {
                walk_interrupted(sl, g_buf[idx], (const ucontext_t *)ucv);
                if (atomic_load_explicit(&g.clobber_errno, memory_order_relaxed))
                    errno = EDOM;
                atomic_store_explicit(&sl->state, seq << 2 | PHASE_DONE, memory_order_release);
                futex_wake_all(&sl->state);
            } else {
                counter_add(&g.c.stale, 1);
                forget_abandoned(id);
            }
        }
    } else {
        chain_previous(sig, si, ucv);
    }
    errno = saved_errno;
}

static void atfork_child(void)
{
    /* Only the forking thread exists in the child: whatever the sampler held is gone. The
     * disposition is inherited, so `installed` stays true; requests of the parent are void. */
    pthread_mutex_init(&g.mu, NULL);
    for (size_t i = 0; i < SKP_NATIVE_MAX_TARGETS; i++) {
        atomic_store(&g.slots[i].state, 0);
        g.slots[i].in_use = false;
    }
    for (size_t i = 0; i < SKP_NATIVE_ABANDONED_MAX; i++)
        atomic_store(&g.abandoned_id[i], 0);
    atomic_store(&g.abandoned_overflow, false);
}

static void register_atfork(void)
{
    pthread_atfork(NULL, NULL, atfork_child);
}

static bool signo_forbidden(int signo)
{
    return signo <= 0 || signo >= NSIG || signo == SIGSEGV || signo == SIGBUS || signo == SIGILL ||
           signo == SIGABRT || signo == SIGFPE || signo == SIGKILL || signo == SIGSTOP ||
           signo == SIGTRAP || signo == SIGSYS;
}

/* "40", "SIGPROF", "PROF", "SIGRTMIN+5", "RTMIN+5". Returns 0 when unset or unparsable. */
static int signo_from_env(void)
{
    const char *v = getenv("SKYPROF_NATIVE_SIGNAL");
    char *end = NULL;

    if (!v || !*v)
        return 0;
    if (strncasecmp(v, "SIG", 3) == 0)
        v += 3;
    if (strcasecmp(v, "PROF") == 0)
        return SIGPROF;
    if (strncasecmp(v, "RTMIN", 5) == 0) {
        long off = 0;
        if (v[5] == '+') {
            off = strtol(v + 6, &end, 10);
            if (!end || *end || off < 0)
                return 0;
        } else if (v[5]) {
            return 0;
        }
        return SIGRTMIN + off <= SIGRTMAX ? (int)(SIGRTMIN + off) : 0;
    }
    long n = strtol(v, &end, 10);
    if (!end || *end || n <= 0 || n >= NSIG)
        return 0;
    return (int)n;
}

/* SKYPROF_NATIVE_TIMEOUT_MS: 1..60000, else 0 (default). */
static int64_t timeout_from_env(void)
{
    return (int64_t)skpx_env_int("SKYPROF_NATIVE_TIMEOUT_MS", 1, 60000) * 1000000;
}

static bool disposition_free(const struct sigaction *sa)
{
    return !(sa->sa_flags & SA_SIGINFO) && sa->sa_handler == SIG_DFL;
}

skp_err skp__native_capture_install(int signo)
{
    skp_err err = SKP_OK;
    bool explicit_choice = true;
    struct sigaction old;
    struct sigaction ours;

    pthread_once(&g_atfork_once, register_atfork);
    pthread_mutex_lock(&g.mu);
    int64_t env_timeout = timeout_from_env();
    if (env_timeout)
        atomic_store(&g.timeout_ns, env_timeout);
    if (signo == 0)
        signo = signo_from_env();
    if (signo == 0) {
        explicit_choice = false;
        signo = SIGRTMIN + SKP_NATIVE_SIGNAL_OFFSET;
    }
    if (g.installed) {
        /* Already ours (possibly parked from an earlier stop): reuse it. */
        if (explicit_choice && signo != g.signo)
            err = SKP_EINVAL;
        else
            g.parked = false;
        goto out;
    }
    if (signo_forbidden(signo)) {
        err = SKP_EINVAL;
        goto out;
    }
    if (sigaction(signo, NULL, &old) != 0) {
        err = skpx_err_from_errno(errno);
        goto out;
    }
    if (!disposition_free(&old) && !explicit_choice) {
        /* The host uses our default signal: look for a real-time signal nobody handles. */
        for (int s = signo + 1; s <= SIGRTMAX; s++) {
            struct sigaction probe;
            if (sigaction(s, NULL, &probe) == 0 && disposition_free(&probe)) {
                signo = s;
                old = probe;
                break;
            }
        }
    }
    g.prev = old;
    g.mode = disposition_free(&old) ? SKP_NATIVE_SIG_FREE : SKP_NATIVE_SIG_CHAINED;

    struct skp__addr_range loader;
    skp__native_loader_text(&loader);
    atomic_store(&g.loader_lo, loader.lo);
    atomic_store(&g.loader_hi, loader.hi);
    const int *lock = NULL;
    skp__native_loader_lock(&lock);
    atomic_store(&g.loader_lock, lock);
    if (!lock)
        SKPX_WARN("native: loader lock not found; samples taken inside dlopen/dlclose may block");

    memset(&ours, 0, sizeof(ours));
    ours.sa_sigaction = on_signal;
    /* SA_RESTART: interrupted read/write/accept resume (sleeps and poll still see EINTR, as
     * with any signal). SA_ONSTACK: honour a host's alternate signal stack. */
    ours.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&ours.sa_mask);
    if (sigaction(signo, &ours, NULL) != 0) {
        err = skpx_err_from_errno(errno);
        goto out;
    }
    g.signo = signo;
    g.installed = true;
    g.parked = false;
    SKPX_DEBUG("native: handler installed on signal %d (%s)", signo,
               g.mode == SKP_NATIVE_SIG_CHAINED ? "chained to host handler" : "free");
out:
    pthread_mutex_unlock(&g.mu);
    return err;
}

/* Clears abandoned entries whose thread no longer exists (its pending signals died with it).
 * Returns how many remain. Caller holds mu. */
static int prune_abandoned(void)
{
    int pending = 0;
    pid_t pid = getpid();

    for (size_t i = 0; i < SKP_NATIVE_ABANDONED_MAX; i++) {
        uint32_t id = atomic_load(&g.abandoned_id[i]);
        if (!id)
            continue;
        if (syscall(SYS_tgkill, pid, g.abandoned_tid[i], 0) != 0 && errno == ESRCH) {
            atomic_compare_exchange_strong(&g.abandoned_id[i], &id, 0);
            continue;
        }
        pending++;
    }
    return pending;
}

static bool any_slot_running(void)
{
    for (size_t i = 0; i < SKP_NATIVE_MAX_TARGETS; i++) {
        if ((atomic_load(&g.slots[i].state) & PHASE_MASK) == PHASE_RUNNING)
            return true;
    }
    return false;
}

void skp__native_capture_uninstall(void)
{
    pthread_mutex_lock(&g.mu);
    if (!g.installed) {
        pthread_mutex_unlock(&g.mu);
        return;
    }
    int64_t deadline = skpx_mono_ns() + SKP_NATIVE_UNINSTALL_WAIT_NS;
    bool busy = true;
    for (;;) {
        int pending = prune_abandoned();
        busy = pending > 0 || any_slot_running() || atomic_load(&g.abandoned_overflow);
        if (!busy || skpx_mono_ns() >= deadline)
            break;
        skpx_sleep_ns(1000000);
    }
    if (busy) {
        g.parked = true;
        SKPX_WARN("native: signal %d kept installed (pass-through): a sampling signal may still be "
                  "pending on a live thread",
                  g.signo);
    } else {
        /* Restore only what we replaced: if the host installed its own handler since, keep it. */
        struct sigaction cur;
        if (sigaction(g.signo, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
            cur.sa_sigaction == on_signal)
            sigaction(g.signo, &g.prev, NULL);
        g.installed = false;
        g.parked = false;
        g.signo = 0;
    }
    pthread_mutex_unlock(&g.mu);
}

skp_err skp__native_target_self(struct skp__native_target *t)
{
    pthread_attr_t attr;
    void *addr = NULL;
    size_t size = 0;
    void *warm[4];

    t->tid = gettid();
    t->stack_lo = t->stack_hi = 0;
    if (pthread_getattr_np(pthread_self(), &attr) != 0)
        return SKP_EIO;
    int r = pthread_attr_getstack(&attr, &addr, &size);
    pthread_attr_destroy(&attr);
    if (r != 0)
        return SKP_EIO;
    t->stack_lo = (uintptr_t)addr;
    t->stack_hi = (uintptr_t)addr + size;
    /* First use of libunwind on this thread creates its TLS trace cache; do it here, not in the
     * handler. */
    (void)unw_backtrace(warm, (int)SKP_ARRAY_LEN(warm));
    return SKP_OK;
}

static void record_abandoned(uint32_t id, pid_t tid)
{
    for (size_t i = 0; i < SKP_NATIVE_ABANDONED_MAX; i++) {
        /* Writers hold mu; the handler only clears entries. */
        if (atomic_load(&g.abandoned_id[i]) == 0) {
            g.abandoned_tid[i] = tid;
            atomic_store(&g.abandoned_id[i], id);
            return;
        }
    }
    atomic_store(&g.abandoned_overflow, true);
}

/* Abandons a REQUESTED request (CAS to IDLE). Returns false if the handler already runs or
 * finished. */
static bool abandon(int idx, uint32_t seq)
{
    struct slot *sl = &g.slots[idx];
    uint32_t expect = seq << 2 | PHASE_REQUESTED;
    if (!atomic_compare_exchange_strong(&sl->state, &expect, seq << 2 | PHASE_IDLE))
        return false;
    record_abandoned(cookie_id(idx, seq), sl->req_tid);
    return true;
}

skp_err skp__native_slot_acquire(int *slot)
{
    *slot = -1;
    pthread_mutex_lock(&g.mu);
    for (int i = 0; i < SKP_NATIVE_MAX_TARGETS; i++) {
        struct slot *sl = &g.slots[i];
        if (!sl->in_use && (atomic_load(&sl->state) & PHASE_MASK) != PHASE_RUNNING) {
            sl->in_use = true;
            *slot = i;
            break;
        }
    }
    pthread_mutex_unlock(&g.mu);
    return *slot >= 0 ? SKP_OK : SKP_EFULL;
}

void skp__native_slot_release(int slot)
{
    if (slot < 0 || slot >= SKP_NATIVE_MAX_TARGETS)
        return;
    pthread_mutex_lock(&g.mu);
    struct slot *sl = &g.slots[slot];
    uint32_t cur = atomic_load(&sl->state);
    if ((cur & PHASE_MASK) == PHASE_REQUESTED)
        (void)abandon(slot, cur >> 2);
    sl->in_use = false;
    pthread_mutex_unlock(&g.mu);
}

int skp__native_request_state(int slot, uint32_t seq)
{
    if (slot < 0 || slot >= SKP_NATIVE_MAX_TARGETS)
        return SKP_NATIVE_REQ_NONE;
    uint32_t cur = atomic_load_explicit(&g.slots[slot].state, memory_order_acquire);
    if (cur >> 2 != seq)
        return SKP_NATIVE_REQ_NONE;
    switch (cur & PHASE_MASK) {
    case PHASE_REQUESTED:
    case PHASE_RUNNING:
        return SKP_NATIVE_REQ_PENDING;
    case PHASE_DONE:
        return SKP_NATIVE_REQ_DONE;
    default:
        return SKP_NATIVE_REQ_NONE;
    }
}

skp_err skp__native_request(int slot, const struct skp__native_target *t, uint32_t cap,
                            uint32_t *seq_out)
{
    skp_err err = SKP_OK;

    *seq_out = 0;
    if (slot < 0 || slot >= SKP_NATIVE_MAX_TARGETS || cap == 0 || t->tid <= 0)
        return SKP_EINVAL;
    pthread_mutex_lock(&g.mu);
    struct slot *sl = &g.slots[slot];
    if (!g.installed || g.parked) {
        err = SKP_ESTATE;
        goto out;
    }
    uint32_t cur = atomic_load(&sl->state);
    switch (cur & PHASE_MASK) {
    case PHASE_RUNNING:
        if (sl->req_tid == t->tid) {
            *seq_out = cur >> 2; /* its handler is walking right now */
            goto out;
        }
        counter_add(&g.c.lost_busy, 1);
        err = SKP_EFULL;
        goto out;
    case PHASE_REQUESTED:
        if (sl->req_tid == t->tid) {
            *seq_out = cur >> 2; /* the signal is still queued: do not queue a second one */
            goto out;
        }
        (void)abandon(slot, cur >> 2);
        break;
    default:
        break;
    }
    counter_add(&g.c.requested, 1);
    sl->seq = sl->seq >= SEQ_MAX ? 1 : sl->seq + 1;
    uint32_t seq = sl->seq;
    uint32_t want = cap + SKP_NATIVE_SKIP_MAX;
    sl->req_want = want < SKP_NATIVE_BUF_FRAMES ? want : SKP_NATIVE_BUF_FRAMES;
    sl->req_stack_lo = t->stack_lo;
    sl->req_stack_hi = t->stack_hi;
    sl->req_tid = t->tid;
    atomic_store_explicit(&sl->state, seq << 2 | PHASE_REQUESTED, memory_order_release);

    siginfo_t si;
    memset(&si, 0, sizeof(si));
    si.si_signo = g.signo;
    si.si_code = SI_QUEUE;
    si.si_pid = getpid();
    si.si_uid = getuid();
    si.si_value.sival_ptr = (void *)((uintptr_t)SKP_NATIVE_MAGIC << 32 | cookie_id(slot, seq));
    if (syscall(SYS_rt_tgsigqueueinfo, si.si_pid, t->tid, g.signo, &si) != 0) {
        int e = errno;
        atomic_store(&sl->state, seq << 2 | PHASE_IDLE);
        if (e == ESRCH) {
            counter_add(&g.c.lost_gone, 1);
            err = SKP_ENOTFOUND;
        } else {
            counter_add(&g.c.lost_send, 1);
            err = SKP_EIO;
        }
        goto out;
    }
    *seq_out = seq;
out:
    pthread_mutex_unlock(&g.mu);
    return err;
}

static void max_update(_Atomic uint64_t *m, uint64_t v)
{
    uint64_t cur = atomic_load_explicit(m, memory_order_relaxed);
    while (v > cur && !atomic_compare_exchange_weak(m, &cur, v)) {
    }
}

skp_err skp__native_collect(int slot, uint32_t seq, struct skp__native_sample *s,
                            int64_t timeout_ns)
{
    s->n = 0;
    s->truncated = false;
    s->used_fp_walk = false;
    s->handler_ns = 0;
    if (slot < 0 || slot >= SKP_NATIVE_MAX_TARGETS || s->cap == 0 || !s->pcs || seq == 0)
        return SKP_EINVAL;
    if (timeout_ns <= 0)
        timeout_ns = atomic_load_explicit(&g.timeout_ns, memory_order_relaxed);
    if (timeout_ns <= 0)
        timeout_ns = SKP_NATIVE_DEFAULT_TIMEOUT_NS;
    struct slot *sl = &g.slots[slot];
    int64_t deadline = skpx_mono_ns() + timeout_ns;
    for (;;) {
        uint32_t cur = atomic_load_explicit(&sl->state, memory_order_acquire);
        if (cur == (seq << 2 | PHASE_DONE))
            break;
        if (cur >> 2 != seq || (cur & PHASE_MASK) == PHASE_IDLE)
            return SKP_ENOTFOUND;
        int64_t left = deadline - skpx_mono_ns();
        if (left <= 0) {
            pthread_mutex_lock(&g.mu);
            bool abandoned = abandon(slot, seq);
            pthread_mutex_unlock(&g.mu);
            if (!abandoned && atomic_load(&sl->state) == (seq << 2 | PHASE_DONE))
                break; /* finished just now */
            /* Else RUNNING: the handler owns the buffer until it reaches DONE. */
            counter_add(&g.c.lost_timeout, 1);
            return SKP_ETIMEDOUT;
        }
        futex_wait(&sl->state, cur, left);
    }

    const uintptr_t *buf = g_buf[slot];
    size_t n = sl->res_n;
    size_t skip = sl->res_fp ? 0
                             : skp__native_skip_count(buf, n, sl->res_pc, SKP_NATIVE_SKIP_MAX,
                                                      SKP_NATIVE_FALLBACK_SKIP);
    size_t avail = n - skip;
    size_t keep = avail < s->cap ? avail : s->cap;
    memcpy(s->pcs, buf + skip, keep * sizeof(uintptr_t));
    s->n = (uint32_t)keep;
    s->truncated = avail > s->cap || n >= sl->req_want;
    s->used_fp_walk = sl->res_fp;
    s->handler_ns = sl->res_ns;
    counter_add(&g.c.captured, 1);
    counter_add(&g.c.handler_ns_total, (uint64_t)sl->res_ns);
    max_update(&g.c.handler_ns_max, (uint64_t)sl->res_ns);
    if (sl->res_fp)
        counter_add(&g.c.fp_walks, 1);
    /* Collected: the slot is free for the next request. */
    uint32_t done = seq << 2 | PHASE_DONE;
    atomic_compare_exchange_strong(&sl->state, &done, seq << 2 | PHASE_IDLE);
    return keep ? SKP_OK : SKP_EIO;
}

skp_err skp__native_capture(int slot, const struct skp__native_target *t,
                            struct skp__native_sample *s, int64_t timeout_ns)
{
    uint32_t seq = 0;
    s->n = 0;
    if (s->cap == 0 || !s->pcs)
        return SKP_EINVAL;
    skp_err err = skp__native_request(slot, t, s->cap, &seq);
    if (err)
        return err;
    return skp__native_collect(slot, seq, s, timeout_ns);
}

void skp__native_capture_get_stats(struct skp__native_capture_stats *out)
{
    memset(out, 0, sizeof(*out));
    out->requested = atomic_load(&g.c.requested);
    out->captured = atomic_load(&g.c.captured);
    out->lost_timeout = atomic_load(&g.c.lost_timeout);
    out->lost_gone = atomic_load(&g.c.lost_gone);
    out->lost_busy = atomic_load(&g.c.lost_busy);
    out->lost_send = atomic_load(&g.c.lost_send);
    out->fp_walks = atomic_load(&g.c.fp_walks);
    out->stale = atomic_load(&g.c.stale);
    out->chained = atomic_load(&g.c.chained);
    out->swallowed = atomic_load(&g.c.swallowed);
    out->handler_ns_total = atomic_load(&g.c.handler_ns_total);
    out->handler_ns_max = atomic_load(&g.c.handler_ns_max);
    pthread_mutex_lock(&g.mu);
    out->signo = g.installed ? g.signo : 0;
    out->mode = g.mode;
    out->parked = g.parked;
    for (size_t i = 0; i < SKP_NATIVE_MAX_TARGETS; i++)
        out->slots_in_use += g.slots[i].in_use;
    pthread_mutex_unlock(&g.mu);
}

int skp__native_capture_signo(void)
{
    pthread_mutex_lock(&g.mu);
    int signo = g.installed ? g.signo : 0;
    pthread_mutex_unlock(&g.mu);
    return signo;
}

void skp__native_capture_force_fp(bool on)
{
    atomic_store(&g.force_fp, on);
}

bool skp__native_capture_has_loader_lock(void)
{
    return atomic_load(&g.loader_lock) != NULL;
}

void skp__native_capture_set_loader_range(uintptr_t lo, uintptr_t hi)
{
    atomic_store(&g.loader_lo, lo);
    atomic_store(&g.loader_hi, hi);
}

void skp__native_capture_clobber_errno(bool on)
{
    atomic_store(&g.clobber_errno, on);
}

void skp__native_capture_set_timeout_ns(int64_t timeout_ns)
{
    atomic_store(&g.timeout_ns, timeout_ns > 0 ? timeout_ns : 0);
}

void skp__native_sample_to_capture(const struct skp__native_sample *s, struct skyprof_capture *out)
{
    for (uint32_t i = 0; i < s->n; i++) {
        out->frames[i].addr = i == 0 ? s->pcs[i] : s->pcs[i] - 1;
        out->frames[i].str = NULL;
        out->frames[i].len = 0;
        out->frames[i].kind = SKYPROF_FRAME_ADDR;
    }
    out->n = s->n;
    out->truncated = s->truncated;
}
