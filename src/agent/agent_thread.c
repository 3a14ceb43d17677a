/* agent_thread.c - agent thread creation with signals blocked, monotonic condition waits, and
 * the fork gate (agent threads reach a wait before fork() proceeds). */
#include "agent/agent_thread.h"

#include <signal.h>
#include <stdatomic.h>
#include <time.h>

#include "common/alloc.h"

/* --- fork gate (see agent_thread.h) ---------------------------------------------------------- */
static atomic_int g_busy;         /* agent threads working (not in a wait) */
static atomic_bool g_gate_closed; /* a fork is in progress in this process */
static atomic_uint_fast64_t g_forks_clean;
static atomic_uint_fast64_t g_forks_timed_out;
static __thread bool t_agent;   /* the calling thread was started by skp__thread_start */
static __thread bool t_waiting; /* inside a wait (not counted as busy) */

struct trampoline {
    void *(*fn)(void *);
    void *arg;
};

static void pause_ns(long ns)
{
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

static void *thread_main(void *p)
{
    struct trampoline tr = *(struct trampoline *)p;
    skpx_free(p);
    t_agent = true;
    t_waiting = false;
    void *ret = tr.fn(tr.arg);
    t_agent = false;
    atomic_fetch_sub(&g_busy, 1); /* counted since skp__thread_start */
    return ret;
}

void skp__fork_idle_hook(bool entering)
{
    if (!t_agent || t_waiting == entering)
        return;
    if (entering) {
        t_waiting = true;
        atomic_fetch_sub(&g_busy, 1);
        return;
    }
    for (;;) {
        /* busy first, then check: the prepare handler closes the gate, then reads g_busy */
        atomic_fetch_add(&g_busy, 1);
        if (!atomic_load(&g_gate_closed))
            break;
        atomic_fetch_sub(&g_busy, 1);
        while (atomic_load(&g_gate_closed))
            pause_ns(50 * 1000);
    }
    t_waiting = false;
}

void skp__fork_gate_prepare(void)
{
    atomic_store(&g_gate_closed, true);
    /* A fork from an agent thread itself (a log sink that forks): do not wait for ourselves. */
    int self = t_agent && !t_waiting ? 1 : 0;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        if (atomic_load(&g_busy) <= self) {
            atomic_fetch_add(&g_forks_clean, 1);
            return;
        }
        struct timespec t1;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        int64_t ms = (int64_t)(t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
        if (ms >= SKP_FORK_GATE_WAIT_MS) {
            atomic_fetch_add(&g_forks_timed_out, 1);
            return;
        }
        pause_ns(20 * 1000);
    }
}

void skp__fork_gate_parent(void)
{
    atomic_store(&g_gate_closed, false);
}

void skp__fork_gate_child(void)
{
    /* Only the forking thread exists; if it is an agent thread it keeps its own count. */
    atomic_store(&g_busy, t_agent && !t_waiting ? 1 : 0);
    atomic_store(&g_gate_closed, false);
}

void skp__fork_gate_stats(uint64_t *n_clean, uint64_t *n_timed_out)
{
    *n_clean = atomic_load(&g_forks_clean);
    *n_timed_out = atomic_load(&g_forks_timed_out);
}

/* --- threads and waits ------------------------------------------------------------------- */
skp_err skp__thread_start(pthread_t *t, const char *name, void *(*fn)(void *), void *arg)
{
    struct trampoline *tr = skpx_malloc(sizeof(*tr));
    if (!tr)
        return SKP_ENOMEM;
    tr->fn = fn;
    tr->arg = arg;
    sigset_t all;
    sigset_t old;
    sigfillset(&all);
    /* Busy from before its creation: the runtime's thread setup may allocate too. */
    atomic_fetch_add(&g_busy, 1);
    /* The new thread inherits this mask; restore ours right after. */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(t, NULL, thread_main, tr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        atomic_fetch_sub(&g_busy, 1);
        skpx_free(tr);
        return SKP_EIO;
    }
    pthread_setname_np(*t, name);
    return SKP_OK;
}

skp_err skp__cond_init_mono(pthread_cond_t *cv)
{
    pthread_condattr_t a;
    if (pthread_condattr_init(&a) != 0)
        return SKP_EIO;
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
    return rc ? SKP_EIO : SKP_OK;
}

void skp__cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ns)
{
    struct timespec ts;
    if (deadline_ns < 0)
        deadline_ns = 0;
    ts.tv_sec = (time_t)(deadline_ns / 1000000000);
    ts.tv_nsec = (long)(deadline_ns % 1000000000);
    skp__fork_idle_hook(true);
    pthread_cond_timedwait(cv, mu, &ts);
    skp__fork_idle_hook(false);
}
