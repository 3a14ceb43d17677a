/* stack_native.c - the native stack source (include/skyprof/skyprof_native.h): glue between the
 * agent core's stack-source contract and the signal capture engine (stack_native_capture.c) and
 * the libdw symbolizer (symbolize.c).
 *
 * Rounds. The core captures its slots one after the other. A thread that is preempted only runs
 * its signal handler when the scheduler gives it a CPU again, so on a busy machine capturing five
 * threads one by one costs five scheduling delays per dump period. Instead, the first capture of
 * a period signals every thread that was captured in the previous period ("hot") at once, and
 * the following captures of that period collect results that are already there or on their way.
 * A preempted thread's stack does not change until it runs, so a late handler still records the
 * stack of the moment the signal was sent. Iterations are recognised as passes over the threads
 * (the core captures its slots in a fixed order): only threads not yet captured in the current
 * pass are prefetched, and a prefetched request is used only in the pass that sent it.
 *
 * Threading: thread_attach runs on request threads, capture on the sampler thread, symbolize on
 * the channel thread, release on either, destroy on the thread stopping the agent. `mu` guards
 * the registry of handles, the pass bookkeeping and the lazily created symbolizer and capture
 * buffer; it is never held while waiting for a handler. Lock order: mu, then the engine's lock. */
#include "skyprof/skyprof_native.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "agent/native/stack_native_capture.h"
#include "agent/native/symbolize.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"

/* Return values of capture: -1 thread gone, SKYPROF_CAPTURE_LOST (-2) sample lost (timeout /
 * busy: the core skips that dump and keeps sampling), -3 other failure. */
#define NATIVE_CAPTURE_GONE (-1)
#define NATIVE_CAPTURE_LOST SKYPROF_CAPTURE_LOST
#define NATIVE_CAPTURE_FAILED (-3)

struct native_thread {
    struct skp__native_target target;
    int slot;          /* engine slot, owned by this handle */
    unsigned fork_gen; /* g_src.fork_gen at attach: a parent's handle owns no slot in a child */
    /* Round bookkeeping, under g_src.mu (the sampler side). */
    uint32_t seq;      /* outstanding engine request, 0 = none */
    int64_t req_ns;    /* when it was sent */
    uint64_t req_pass; /* g_src.pass it was sent in */
    uint64_t pass;     /* last pass in which h was captured */
    bool hot;          /* captured last period: prefetch it */
};

static struct native_source {
    pthread_mutex_t mu;
    _Atomic bool installed;
    struct native_thread *by_slot[SKP_NATIVE_MAX_TARGETS]; /* attached handles */
    struct skp__symbolizer *sym;                           /* created on first symbolize */
    uintptr_t *pcs; /* SKP_NATIVE_MAX_FRAMES entries, created on first capture */
    struct skp__symbolizer_stats sym_last; /* kept across destroy for skyprof_native_get_stats */
    uint64_t pass;                         /* sampler iterations seen: see start_round */
    uint64_t prefetched;                   /* requests sent ahead for other threads */
    uint64_t prefetch_used;
    _Atomic uint64_t refused_blocked; /* attaches refused: the thread blocks our signal */
    unsigned fork_gen;                /* bumped in a fork()ed child */
} g_src = {.mu = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t g_src_atfork_once = PTHREAD_ONCE_INIT;

static void src_atfork_child(void)
{
    /* The sampler may have held mu at fork time. The parent's handles stay with the inherited
     * agent, which the child frees: their release must not touch the child's slots. */
    pthread_mutex_init(&g_src.mu, NULL);
    memset(g_src.by_slot, 0, sizeof(g_src.by_slot));
    g_src.fork_gen++;
}

static void src_register_atfork(void)
{
    pthread_atfork(NULL, NULL, src_atfork_child);
}

/* Identity of the calling thread, computed once per thread (pthread_getattr_np allocates and,
 * for the main thread, reads /proc). Touched only by thread_attach, never in a signal handler. */
static __thread struct {
    bool ready;
    struct skp__native_target target;
} t_self;

static bool ensure_installed(void)
{
    if (atomic_load_explicit(&g_src.installed, memory_order_acquire))
        return true;
    pthread_once(&g_src_atfork_once, src_register_atfork);
    pthread_mutex_lock(&g_src.mu);
    skp_err err = SKP_OK;
    if (!atomic_load(&g_src.installed)) {
        err = skp__native_capture_install(0);
        if (err == SKP_OK)
            atomic_store_explicit(&g_src.installed, true, memory_order_release);
    }
    pthread_mutex_unlock(&g_src.mu);
    if (err)
        SKPX_WARN("native: cannot install the sampling signal handler: %s", skp_strerror(err));
    return err == SKP_OK;
}

bool skp__native_source_ensure_installed(void)
{
    return ensure_installed();
}

static void *native_thread_attach(void *ud)
{
    (void)ud;
    if (!ensure_installed())
        return NULL;
    /* A thread that blocks the sampling signal would never answer: every capture would wait for
     * the full deadline and then be lost. Refuse it now (the request is not profiled). */
    sigset_t mask;
    int signo = skp__native_capture_signo();
    if (pthread_sigmask(SIG_BLOCK, NULL, &mask) != 0 || signo <= 0 || sigismember(&mask, signo)) {
        atomic_fetch_add(&g_src.refused_blocked, 1);
        return NULL;
    }
    /* After fork the cached identity is the parent's thread: gettid tells. */
    if (!t_self.ready || t_self.target.tid != gettid()) {
        if (skp__native_target_self(&t_self.target) != SKP_OK)
            return NULL;
        t_self.ready = true;
    }
    struct native_thread *h = skpx_calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    h->target = t_self.target;
    if (skp__native_slot_acquire(&h->slot) != SKP_OK) {
        skpx_free(h);
        return NULL;
    }
    pthread_mutex_lock(&g_src.mu);
    h->fork_gen = g_src.fork_gen;
    g_src.by_slot[h->slot] = h;
    pthread_mutex_unlock(&g_src.mu);
    return h;
}

static void native_thread_release(void *ud, void *thread_handle)
{
    struct native_thread *h = thread_handle;
    (void)ud;
    if (!h)
        return;
    pthread_mutex_lock(&g_src.mu);
    bool mine = h->fork_gen == g_src.fork_gen;
    if (mine && g_src.by_slot[h->slot] == h)
        g_src.by_slot[h->slot] = NULL;
    pthread_mutex_unlock(&g_src.mu);
    if (mine)
        skp__native_slot_release(h->slot); /* abandons a prefetched request still queued */
    skpx_free(h);
}

/* Passes. The core captures its slots in the same order every iteration, so a capture of a
 * thread already captured in the current pass starts a new pass (a new sampler iteration). */

/* True when h's outstanding request was sent during the current pass. A request left over from
 * a pass that skipped h is not used. */
static bool prefetch_usable(const struct native_thread *h)
{
    return h->seq && h->req_pass == g_src.pass;
}

/* Sends h's request (or keeps a usable one); when h had to be asked itself, also signals the
 * other hot threads not yet captured in this pass. Caller holds mu. Returns h's engine error. */
static skp_err start_round(struct native_thread *h, uint32_t cap, int64_t now)
{
    skp_err err = SKP_OK;
    if (prefetch_usable(h)) {
        g_src.prefetch_used++;
        return SKP_OK;
    }
    err = skp__native_request(h->slot, &h->target, cap, &h->seq);
    if (err) {
        h->seq = 0;
        return err;
    }
    h->req_ns = now;
    h->req_pass = g_src.pass;
    for (int i = 0; i < SKP_NATIVE_MAX_TARGETS; i++) {
        struct native_thread *o = g_src.by_slot[i];
        if (!o || o == h || !o->hot || o->pass == g_src.pass || prefetch_usable(o))
            continue;
        if (skp__native_request(o->slot, &o->target, cap, &o->seq) == SKP_OK) {
            o->req_ns = now;
            o->req_pass = g_src.pass;
            g_src.prefetched++;
        } else {
            o->seq = 0;
            o->hot = false;
        }
    }
    return SKP_OK;
}

static int native_capture(void *ud, void *thread_handle, int tid, struct skyprof_capture *out)
{
    struct native_thread *h = thread_handle;
    struct skp__native_sample s;

    (void)ud;
    out->n = 0;
    out->truncated = false;
    if (!h || out->cap == 0)
        return NATIVE_CAPTURE_FAILED;
    if (tid > 0 && tid != h->target.tid)
        h->target.tid = tid;
    uint32_t cap = out->cap < SKP_NATIVE_MAX_FRAMES ? out->cap : SKP_NATIVE_MAX_FRAMES;

    pthread_mutex_lock(&g_src.mu);
    if (h->pass == g_src.pass)
        g_src.pass++; /* h was already captured in this pass: a new sampler iteration */
    h->pass = g_src.pass;
    if (!g_src.pcs)
        g_src.pcs = skpx_malloc(SKP_NATIVE_MAX_FRAMES * sizeof(uintptr_t));
    int64_t now = skpx_mono_ns();
    skp_err err = g_src.pcs ? start_round(h, cap, now) : SKP_ENOMEM;
    uint32_t seq = h->seq;
    pthread_mutex_unlock(&g_src.mu);

    if (err == SKP_OK) {
        /* pcs is used only by the sampler (capture never runs concurrently with itself). */
        s.pcs = g_src.pcs;
        s.cap = cap;
        err = skp__native_collect(h->slot, seq, &s, 0);
        if (err == SKP_ENOTFOUND) {
            /* The prefetched request vanished (abandoned); ask again once. */
            pthread_mutex_lock(&g_src.mu);
            h->seq = 0;
            err = start_round(h, cap, skpx_mono_ns());
            seq = h->seq;
            pthread_mutex_unlock(&g_src.mu);
            if (err == SKP_OK)
                err = skp__native_collect(h->slot, seq, &s, 0);
        }
    }
    pthread_mutex_lock(&g_src.mu);
    h->seq = 0;
    h->hot = err == SKP_OK;
    pthread_mutex_unlock(&g_src.mu);

    switch (err) {
    case SKP_OK:
        break;
    case SKP_ENOTFOUND:
        return NATIVE_CAPTURE_GONE;
    case SKP_ETIMEDOUT:
    case SKP_EFULL:
        return NATIVE_CAPTURE_LOST;
    default:
        return NATIVE_CAPTURE_FAILED;
    }
    skp__native_sample_to_capture(&s, out);
    return 0;
}

static int native_symbolize(void *ud, uint64_t addr, char *buf, size_t cap)
{
    (void)ud;
    pthread_mutex_lock(&g_src.mu);
    if (!g_src.sym) {
        skp_err err = skp__symbolizer_new(0, &g_src.sym);
        if (err) {
            pthread_mutex_unlock(&g_src.mu);
            return -1;
        }
    }
    struct skp__symbolizer *sym = g_src.sym;
    pthread_mutex_unlock(&g_src.mu);
    /* The symbolizer has its own lock; the (slow, first-time) libdw work must not hold mu,
     * which request threads take in thread_attach. The symbolizer is only freed by destroy,
     * after the agent stopped calling symbolize. */
    return skp__symbolize(sym, (uintptr_t)addr, buf, cap);
}

static void native_destroy(void *ud)
{
    (void)ud;
    pthread_mutex_lock(&g_src.mu);
    if (atomic_load(&g_src.installed)) {
        skp__native_capture_uninstall();
        atomic_store(&g_src.installed, false);
    }
    if (g_src.sym) {
        struct skp__symbolizer_stats st;
        skp__symbolizer_get_stats(g_src.sym, &st);
        g_src.sym_last.lookups += st.lookups;
        g_src.sym_last.hits += st.hits;
        g_src.sym_last.refreshes += st.refreshes;
        g_src.sym_last.unknown += st.unknown;
        skp__symbolizer_free(g_src.sym);
        g_src.sym = NULL;
    }
    skpx_free(g_src.pcs);
    g_src.pcs = NULL;
    pthread_mutex_unlock(&g_src.mu);
}

static const struct skyprof_stack_source g_native_source = {
    .name = "native",
    .ud = NULL,
    .thread_attach = native_thread_attach,
    .capture = native_capture,
    .thread_release = native_thread_release,
    .symbolize = native_symbolize,
    .destroy = native_destroy,
};

SKYPROF_API const struct skyprof_stack_source *skyprof_native_stack_source(void)
{
    return &g_native_source;
}

SKYPROF_API void skyprof_native_get_stats(struct skyprof_native_stats *out)
{
    struct skp__native_capture_stats c;

    memset(out, 0, sizeof(*out));
    skp__native_capture_get_stats(&c);
    out->captures_requested = c.requested;
    out->captures_ok = c.captured;
    out->lost_timeout = c.lost_timeout;
    out->lost_thread_gone = c.lost_gone;
    out->lost_busy = c.lost_busy;
    out->lost_other = c.lost_send;
    out->loader_fallbacks = c.fp_walks;
    out->stale_signals = c.stale;
    out->chained_signals = c.chained;
    out->handler_ns_total = c.handler_ns_total;
    out->handler_ns_max = c.handler_ns_max;
    out->signo = c.signo;
    out->chained = c.mode == SKP_NATIVE_SIG_CHAINED;
    out->parked = c.parked;

    pthread_mutex_lock(&g_src.mu);
    struct skp__symbolizer_stats st = g_src.sym_last;
    out->prefetched = g_src.prefetched;
    out->attach_refused_blocked = atomic_load(&g_src.refused_blocked);
    out->prefetch_used = g_src.prefetch_used;
    if (g_src.sym) {
        struct skp__symbolizer_stats cur;
        skp__symbolizer_get_stats(g_src.sym, &cur);
        st.lookups += cur.lookups;
        st.hits += cur.hits;
        st.refreshes += cur.refreshes;
        st.unknown += cur.unknown;
        st.entries = cur.entries;
    } else {
        st.entries = 0;
    }
    pthread_mutex_unlock(&g_src.mu);
    out->symbolize_lookups = st.lookups;
    out->symbolize_hits = st.hits;
    out->symbolize_refreshes = st.refreshes;
    out->symbolize_unknown = st.unknown;
    out->symbolize_cache_entries = st.entries;
    out->symbolize_hit_rate = st.lookups ? (double)st.hits / (double)st.lookups : 0.0;
}
