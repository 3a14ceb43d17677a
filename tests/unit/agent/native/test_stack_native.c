/* Unit tests of the native stack source: signal capture of another thread (call chain in order,
 * repeated captures, exiting threads, a host handler on the same signal, errno, truncation),
 * the frame-pointer fallback, and the libdw symbolizer (file:line, cache, dlopen refresh). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/native/stack_native_capture.h"
#include "agent/native/stack_native_walk.h"
#include "agent/native/symbolize.h"
#include "common/clock.h"
#include "skyprof/skyprof_native.h"

/* noipa: no clones (".isra.0" names) or interprocedural shortcuts, so names match exactly. */
#if defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noinline, noipa))
#endif
#define WAIT_DEADLINE_NS (10LL * 1000 * 1000 * 1000)

static _Atomic int g_stop;
static _Atomic int g_in_leaf;
static _Atomic int g_errno_bad;
static _Atomic int g_check_errno;
static int g_b_call_line;

/* ---- the call chain sampled by the tests ---------------------------------------------------- */
NOINLINE static int leaf_spin(int x)
{
    volatile int v = x;
    if (atomic_load(&g_check_errno))
        errno = 4242;
    atomic_store(&g_in_leaf, 1);
    while (!atomic_load(&g_stop)) {
        v = v + 1;
        if (atomic_load_explicit(&g_check_errno, memory_order_relaxed) && errno != 4242)
            atomic_fetch_add(&g_errno_bad, 1);
    }
    return v;
}

NOINLINE static int level_c(int x)
{
    int r = leaf_spin(x + 1);
    __asm__ volatile("" ::: "memory");
    return r + 1;
}

NOINLINE static int level_b(int x)
{
    /* The call site whose line is checked: __LINE__ and the call share one line. */
    int r = (g_b_call_line = __LINE__, level_c(x + 1));
    __asm__ volatile("" ::: "memory");
    return r + 1;
}

NOINLINE static int level_a(int x)
{
    int r = level_b(x + 1);
    __asm__ volatile("" ::: "memory");
    return r + 1;
}

NOINLINE static int recurse(int depth)
{
    if (depth == 0)
        return leaf_spin(0);
    int r = recurse(depth - 1);
    __asm__ volatile("" ::: "memory");
    return r + 1;
}

struct target_thread {
    pthread_t th;
    void *handle;
    int depth; /* < 0: level_a chain, else recursion depth */
    _Atomic int attached;
};

static void *target_main(void *p)
{
    struct target_thread *t = p;
    const struct skyprof_stack_source *src = skyprof_native_stack_source();
    t->handle = src->thread_attach(src->ud);
    atomic_store(&t->attached, 1);
    if (t->depth < 0)
        level_a(1);
    else
        recurse(t->depth);
    return NULL;
}

static void wait_flag(_Atomic int *flag)
{
    int64_t deadline = skpx_mono_ns() + WAIT_DEADLINE_NS;
    while (!atomic_load(flag)) {
        assert_true(skpx_mono_ns() < deadline);
        skpx_sleep_ns(100000);
    }
}

static void start_target(struct target_thread *t, int depth)
{
    memset(t, 0, sizeof(*t));
    t->depth = depth;
    atomic_store(&g_stop, 0);
    atomic_store(&g_in_leaf, 0);
    assert_int_equal(pthread_create(&t->th, NULL, target_main, t), 0);
    wait_flag(&t->attached);
    assert_non_null(t->handle);
    wait_flag(&g_in_leaf);
}

static void stop_target(struct target_thread *t)
{
    const struct skyprof_stack_source *src = skyprof_native_stack_source();
    atomic_store(&g_stop, 1);
    pthread_join(t->th, NULL);
    src->thread_release(src->ud, t->handle);
}

/* Index of the first frame whose signature starts with "<fn> (", or -1. */
static int find_fn(char sigs[][SKP_SYMBOLIZE_TEXT_MAX], int n, const char *fn, int from)
{
    size_t len = strlen(fn);
    for (int i = from; i < n; i++) {
        if (strncmp(sigs[i], fn, len) == 0 && sigs[i][len] == ' ')
            return i;
    }
    return -1;
}

#define MAX_TEST_FRAMES 2048
static struct skyprof_frame g_frames[MAX_TEST_FRAMES];
static char g_sigs[MAX_TEST_FRAMES][SKP_SYMBOLIZE_TEXT_MAX];

static int capture_and_symbolize(void *handle, uint32_t cap, bool *truncated)
{
    const struct skyprof_stack_source *src = skyprof_native_stack_source();
    struct skyprof_capture c = {.frames = g_frames, .cap = cap};
    int r = src->capture(src->ud, handle, 0, &c);
    if (r < 0)
        return r;
    for (uint32_t i = 0; i < c.n; i++) {
        assert_int_equal(g_frames[i].kind, SKYPROF_FRAME_ADDR);
        if (src->symbolize(src->ud, g_frames[i].addr, g_sigs[i], sizeof(g_sigs[i])) < 0)
            snprintf(g_sigs[i], sizeof(g_sigs[i]), "?");
    }
    if (truncated)
        *truncated = c.truncated;
    return (int)c.n;
}

static void assert_chain_in_order(int n)
{
    int leaf = find_fn(g_sigs, n, "leaf_spin", 0);
    int c = find_fn(g_sigs, n, "level_c", 0);
    int b = find_fn(g_sigs, n, "level_b", 0);
    int a = find_fn(g_sigs, n, "level_a", 0);
    if (!(leaf == 0 && c > leaf && b > c && a > b)) {
        for (int i = 0; i < n; i++)
            fprintf(stderr, "  #%d %s\n", i, g_sigs[i]);
    }
    assert_int_equal(leaf, 0); /* innermost first: the frame executing now */
    assert_true(c > leaf);
    assert_true(b > c);
    assert_true(a > b);
}

static int skyprof_native_signal_for_test(void)
{
    return skp__native_capture_signo();
}

/* ---- tests ------------------------------------------------------------------------------- */
static void chain_captured_in_order_with_lines(void **state)
{
    (void)state;
    struct target_thread t;
    start_target(&t, -1);
    int n = capture_and_symbolize(t.handle, 64, NULL);
    assert_true(n > 4);
    assert_chain_in_order(n);
    /* Caller frames are symbolized at return address - 1: the line of the call. */
    char want[64];
    snprintf(want, sizeof(want), "level_b (test_stack_native.c:%d)", g_b_call_line);
    int b = find_fn(g_sigs, n, "level_b", 0);
    assert_string_equal(g_sigs[b], want);
    stop_target(&t);
    skyprof_native_stack_source()->destroy(NULL);
}

static void capture_200_times_without_failure(void **state)
{
    (void)state;
    struct target_thread t;
    struct skyprof_native_stats before;
    struct skyprof_native_stats after;
    start_target(&t, -1);
    skyprof_native_get_stats(&before);
    for (int i = 0; i < 200; i++) {
        int n = capture_and_symbolize(t.handle, 64, NULL);
        assert_true(n > 4);
        assert_chain_in_order(n);
    }
    skyprof_native_get_stats(&after);
    assert_int_equal(after.captures_ok - before.captures_ok, 200);
    assert_int_equal(after.lost_timeout - before.lost_timeout, 0);
    assert_true(after.handler_ns_max > 0);
    /* Every frame after the first capture comes from the cache. */
    assert_true(after.symbolize_hit_rate > 0.9);
    stop_target(&t);
    skyprof_native_get_stats(&after);
    skyprof_native_stack_source()->destroy(NULL);
}

struct short_thread {
    void *handle;
    _Atomic int attached;
    int spin_us;
};

static void *short_main(void *p)
{
    struct short_thread *s = p;
    const struct skyprof_stack_source *src = skyprof_native_stack_source();
    s->handle = src->thread_attach(src->ud);
    atomic_store(&s->attached, 1);
    int64_t end = skpx_mono_ns() + (int64_t)s->spin_us * 1000;
    while (skpx_mono_ns() < end) {
    }
    return NULL;
}

static void thread_exiting_while_sampled_is_lost_not_crash(void **state)
{
    (void)state;
    const struct skyprof_stack_source *src = skyprof_native_stack_source();
    struct skyprof_native_stats before;
    struct skyprof_native_stats after;
    skyprof_native_get_stats(&before);
    /* An exiting thread blocks signals and then vanishes: such a request can only time out. */
    skp__native_capture_set_timeout_ns(200LL * 1000 * 1000);
    int n_gone = 0;
    for (int i = 0; i < 20; i++) {
        struct short_thread s = {.spin_us = 200 * (i % 5)};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, short_main, &s), 0);
        wait_flag(&s.attached);
        assert_non_null(s.handle);
        /* Sample until the thread is gone: every capture either succeeds or reports a loss. */
        int64_t deadline = skpx_mono_ns() + WAIT_DEADLINE_NS;
        int r = 0;
        while (r != -1) {
            struct skyprof_capture c = {.frames = g_frames, .cap = 64};
            r = src->capture(src->ud, s.handle, 0, &c);
            assert_true(r == 0 || r == -1 || r == -2);
            assert_true(skpx_mono_ns() < deadline);
        }
        n_gone++;
        pthread_join(th, NULL);
        src->thread_release(src->ud, s.handle);
    }
    skp__native_capture_set_timeout_ns(10LL * 1000 * 1000 * 1000);
    skyprof_native_get_stats(&after);
    assert_int_equal(after.lost_thread_gone - before.lost_thread_gone, (uint64_t)n_gone);
    src->destroy(NULL);
    /* Nothing can be pending any more: the handler was really removed. */
    skyprof_native_get_stats(&after);
    assert_int_equal(after.signo, 0);
    assert_false(after.parked);
}

static _Atomic int g_host_calls;
static _Atomic int g_host_value;

static void host_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    atomic_fetch_add(&g_host_calls, 1);
    if (si && si->si_code == SI_QUEUE)
        atomic_store(&g_host_value, si->si_value.sival_int);
}

static void host_handler_chained_and_restored(void **state)
{
    (void)state;
    int sig = SIGRTMIN + 3;
    struct sigaction host;
    struct sigaction orig;
    struct sigaction now;
    memset(&host, 0, sizeof(host));
    host.sa_sigaction = host_handler;
    host.sa_flags = SA_SIGINFO;
    sigemptyset(&host.sa_mask);
    assert_int_equal(sigaction(sig, &host, &orig), 0);
    atomic_store(&g_host_calls, 0);

    assert_int_equal(skp__native_capture_install(sig), SKP_OK);
    struct skp__native_capture_stats st;
    skp__native_capture_get_stats(&st);
    assert_int_equal(st.signo, sig);
    assert_int_equal(st.mode, SKP_NATIVE_SIG_CHAINED);

    /* Our captures work while the host's handler is chained. */
    struct target_thread t;
    memset(&t, 0, sizeof(t));
    t.depth = -1;
    atomic_store(&g_stop, 0);
    atomic_store(&g_in_leaf, 0);
    assert_int_equal(pthread_create(&t.th, NULL, target_main, &t), 0);
    wait_flag(&t.attached);
    wait_flag(&g_in_leaf);
    uintptr_t pcs[64];
    struct skp__native_sample s = {.pcs = pcs, .cap = 64};
    struct skp__native_target *target = t.handle; /* the handle starts with the target */
    int slot = -1;
    assert_int_equal(skp__native_slot_acquire(&slot), SKP_OK);
    for (int i = 0; i < 20; i++)
        assert_int_equal(skp__native_capture(slot, target, &s, 0), SKP_OK);
    skp__native_slot_release(slot);
    assert_int_equal(atomic_load(&g_host_calls), 0); /* ours never reach the host */

    /* The host's own signals still reach the host's handler: thread-directed... */
    assert_int_equal(pthread_kill(pthread_self(), sig), 0);
    assert_int_equal(atomic_load(&g_host_calls), 1);
    /* ...and queued with a value. */
    union sigval v = {.sival_int = 77};
    assert_int_equal(pthread_sigqueue(pthread_self(), sig, v), 0);
    assert_int_equal(atomic_load(&g_host_calls), 2);
    assert_int_equal(atomic_load(&g_host_value), 77);

    atomic_store(&g_stop, 1);
    pthread_join(t.th, NULL);
    skyprof_native_stack_source()->thread_release(NULL, t.handle);

    skp__native_capture_uninstall();
    assert_int_equal(sigaction(sig, NULL, &now), 0);
    assert_true(now.sa_flags & SA_SIGINFO);
    assert_ptr_equal((void *)now.sa_sigaction, (void *)host_handler);
    assert_int_equal(sigaction(sig, &orig, NULL), 0);
    skyprof_native_stack_source()->destroy(NULL);
}

static void default_signal_taken_by_host_picks_another(void **state)
{
    (void)state;
    int sig = SIGRTMIN + SKP_NATIVE_SIGNAL_OFFSET;
    struct sigaction host;
    struct sigaction orig;
    struct sigaction now;
    memset(&host, 0, sizeof(host));
    host.sa_sigaction = host_handler;
    host.sa_flags = SA_SIGINFO;
    sigemptyset(&host.sa_mask);
    assert_int_equal(sigaction(sig, &host, &orig), 0);

    assert_int_equal(skp__native_capture_install(0), SKP_OK);
    struct skp__native_capture_stats st;
    skp__native_capture_get_stats(&st);
    assert_int_not_equal(st.signo, sig);
    assert_true(st.signo > sig && st.signo <= SIGRTMAX);
    assert_int_equal(st.mode, SKP_NATIVE_SIG_FREE);
    assert_int_equal(sigaction(sig, NULL, &now), 0);
    assert_ptr_equal((void *)now.sa_sigaction, (void *)host_handler);
    int ours = st.signo;
    skp__native_capture_uninstall();
    assert_int_equal(sigaction(ours, NULL, &now), 0);
    assert_false(now.sa_flags & SA_SIGINFO);
    assert_true(now.sa_handler == SIG_DFL);
    assert_int_equal(sigaction(sig, &orig, NULL), 0);
}

static void forbidden_signals_refused(void **state)
{
    (void)state;
    const int bad[] = {SIGSEGV, SIGBUS, SIGILL, SIGABRT, SIGKILL, SIGSTOP, -1, 0x1000};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(skp__native_capture_install(bad[i]), SKP_EINVAL);
}

/* The first capture of a sampler iteration signals the other threads captured in the previous
 * iteration; their captures in the same iteration use those requests. A thread skipped for an
 * iteration gets a fresh request in the next one. */
static void round_prefetches_the_other_threads(void **state)
{
    (void)state;
    enum { N = 3 };
    struct target_thread t[N];
    struct skyprof_native_stats a;
    struct skyprof_native_stats b;
    for (int i = 0; i < N; i++)
        start_target(&t[i], -1);
    atomic_store(&g_stop, 0);        /* start_target resets it; all three spin */
    for (int it = 0; it < 2; it++) { /* first iteration: nobody is hot yet */
        for (int i = 0; i < N; i++)
            assert_chain_in_order(capture_and_symbolize(t[i].handle, 64, NULL));
        skpx_sleep_ns(10 * 1000 * 1000);
    }
    skyprof_native_get_stats(&a);
    for (int i = 0; i < N; i++)
        assert_chain_in_order(capture_and_symbolize(t[i].handle, 64, NULL));
    skyprof_native_get_stats(&b);
    assert_int_equal(b.prefetched - a.prefetched, N - 1);
    assert_int_equal(b.prefetch_used - a.prefetch_used, N - 1);
    /* An iteration that captures only t[0]: the others' prefetched requests are left over... */
    skpx_sleep_ns(10 * 1000 * 1000);
    assert_chain_in_order(capture_and_symbolize(t[0].handle, 64, NULL));
    skpx_sleep_ns(10 * 1000 * 1000);
    /* ...and are not used by the next iteration, which starts a new round and asks again. */
    skyprof_native_get_stats(&a);
    for (int i = 0; i < N; i++)
        assert_chain_in_order(capture_and_symbolize(t[i].handle, 64, NULL));
    skyprof_native_get_stats(&b);
    assert_int_equal(b.prefetched - a.prefetched, N - 1);
    assert_int_equal(b.prefetch_used - a.prefetch_used, N - 1);
    /* (A left-over request still queued is reused rather than signalled twice: a signal pending
     * since then means the thread has not run user code since, so its stack is still current.) */
    atomic_store(&g_stop, 1);
    for (int i = 0; i < N; i++) {
        pthread_join(t[i].th, NULL);
        skyprof_native_stack_source()->thread_release(NULL, t[i].handle);
    }
    skyprof_native_stack_source()->destroy(NULL);
}

/* A signal we gave up on stays pending on a thread that blocks it. Stopping must not restore
 * SIG_DFL under it (a real-time signal's default action kills the process): the handler stays
 * ("parked") and drops the late signal when it finally arrives; a later stop restores. */
struct late_thread {
    void *handle;
    _Atomic int blocked;
    _Atomic int unblock;
};

static void *late_main(void *arg)
{
    struct late_thread *l = arg;
    const struct skyprof_stack_source *src = skyprof_native_stack_source();
    l->handle = src->thread_attach(src->ud);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, skyprof_native_signal_for_test());
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    atomic_store(&l->blocked, 1);
    wait_flag(&l->unblock);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL); /* the pending signal is delivered here */
    while (!atomic_load(&g_stop))
        skpx_sleep_ns(1000000);
    return NULL;
}

static void late_signal_after_stop_is_dropped_not_fatal(void **state)
{
    (void)state;
    const struct skyprof_stack_source *src = skyprof_native_stack_source();
    struct late_thread l = {0};
    struct skyprof_native_stats st;
    pthread_t th;
    atomic_store(&g_stop, 0);
    assert_int_equal(pthread_create(&th, NULL, late_main, &l), 0);
    wait_flag(&l.blocked);
    assert_non_null(l.handle);
    int signo = skyprof_native_signal_for_test();
    skp__native_capture_set_timeout_ns(100LL * 1000 * 1000);
    struct skyprof_capture c = {.frames = g_frames, .cap = 64};
    assert_int_equal(src->capture(src->ud, l.handle, 0, &c), -2); /* lost: signal blocked */
    skp__native_capture_set_timeout_ns(10LL * 1000 * 1000 * 1000);
    src->thread_release(src->ud, l.handle);
    src->destroy(NULL); /* waits 200 ms, then parks */
    skyprof_native_get_stats(&st);
    assert_true(st.parked);
    assert_int_equal(st.signo, signo);
    uint64_t stale_before = st.stale_signals;
    atomic_store(&l.unblock, 1);
    int64_t deadline = skpx_mono_ns() + WAIT_DEADLINE_NS;
    do {
        assert_true(skpx_mono_ns() < deadline);
        skpx_sleep_ns(1000000);
        skyprof_native_get_stats(&st);
    } while (st.stale_signals == stale_before);
    /* Nothing pending any more: a stop now restores the default disposition. */
    skp__native_capture_uninstall();
    skyprof_native_get_stats(&st);
    assert_false(st.parked);
    assert_int_equal(st.signo, 0);
    struct sigaction now;
    assert_int_equal(sigaction(signo, NULL, &now), 0);
    assert_true(!(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_DFL);
    atomic_store(&g_stop, 1);
    pthread_join(th, NULL);
}

/* The process source (whole-process tasks) visits every thread with a short deadline. One late
 * answer - on a loaded machine the thread was not scheduled in time - loses that sample only;
 * only a thread that times out three times in a row is left alone for the rest of the task. */
struct proc_late_thread {
    _Atomic int tid;
    _Atomic int blocked;
    _Atomic int unblock;
    _Atomic int unblocked;
};

static void *proc_late_main(void *arg)
{
    struct proc_late_thread *l = arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, skyprof_native_signal_for_test());
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    atomic_store(&l->tid, (int)gettid());
    atomic_store(&l->blocked, 1);
    wait_flag(&l->unblock);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL); /* the abandoned request's signal: dropped */
    atomic_store(&l->unblocked, 1);
    while (!atomic_load(&g_stop))
        skpx_sleep_ns(1000000);
    return NULL;
}

static void *proc_blocked_main(void *arg)
{
    struct proc_late_thread *l = arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, skyprof_native_signal_for_test());
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    atomic_store(&l->tid, (int)gettid());
    atomic_store(&l->blocked, 1);
    while (!atomic_load(&g_stop))
        skpx_sleep_ns(1000000);
    return NULL;
}

static bool proc_lists(const struct skyprof_proc_source *ps, int tid)
{
    struct skyprof_proc_thread th[256];
    int n = ps->list_threads(ps->ud, th, 256);
    for (int i = 0; i < n; i++)
        if (th[i].tid == tid)
            return true;
    return false;
}

static void proc_source_mutes_only_after_repeated_timeouts(void **state)
{
    (void)state;
    const struct skyprof_proc_source *ps = skyprof_native_proc_source();
    /* install the engine (an attach from an ordinary thread) */
    void *h0 = skyprof_native_stack_source()->thread_attach(NULL);
    assert_non_null(h0);
    skyprof_native_stack_source()->thread_release(NULL, h0);
    struct proc_late_thread late = {0};
    struct proc_late_thread blocked = {0};
    pthread_t t1;
    pthread_t t2;
    atomic_store(&g_stop, 0);
    assert_int_equal(pthread_create(&t1, NULL, proc_late_main, &late), 0);
    assert_int_equal(pthread_create(&t2, NULL, proc_blocked_main, &blocked), 0);
    wait_flag(&late.blocked);
    wait_flag(&blocked.blocked);
    struct skyprof_capture c = {.frames = g_frames, .cap = 64};

    /* one late answer: lost, then sampled again once the thread answers */
    assert_int_equal(ps->capture(ps->ud, NULL, atomic_load(&late.tid), &c), SKYPROF_CAPTURE_LOST);
    atomic_store(&late.unblock, 1);
    wait_flag(&late.unblocked);
    assert_true(proc_lists(ps, atomic_load(&late.tid)));
    assert_int_equal(ps->capture(ps->ud, NULL, atomic_load(&late.tid), &c), 0);
    assert_true(c.n > 0);

    /* a thread that never answers: signalled three times, then left out */
    int tid = atomic_load(&blocked.tid);
    for (int i = 0; i < 3; i++) {
        assert_true(proc_lists(ps, tid));
        assert_int_equal(ps->capture(ps->ud, NULL, tid, &c), SKYPROF_CAPTURE_LOST);
    }
    assert_false(proc_lists(ps, tid));
    assert_int_equal(ps->capture(ps->ud, NULL, tid, &c), -1);
    /* a new task starts with a clean slate */
    ps->end(ps->ud);
    assert_true(proc_lists(ps, tid));

    atomic_store(&g_stop, 1);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL); /* exits with its signals still pending: nothing is delivered */
    skyprof_native_stack_source()->destroy(NULL);
}

static void *blocking_attach_main(void *arg)
{
    void **out = arg;
    const struct skyprof_stack_source *src = skyprof_native_stack_source();
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    *out = src->thread_attach(src->ud);
    return NULL;
}

static void thread_blocking_the_signal_is_refused(void **state)
{
    (void)state;
    const struct skyprof_stack_source *src = skyprof_native_stack_source();
    struct skyprof_native_stats before;
    struct skyprof_native_stats after;
    void *handle = (void *)1;
    pthread_t th;
    /* install first (an attach from an ordinary thread) */
    void *h0 = src->thread_attach(src->ud);
    assert_non_null(h0);
    src->thread_release(src->ud, h0);
    skyprof_native_get_stats(&before);
    assert_int_equal(pthread_create(&th, NULL, blocking_attach_main, &handle), 0);
    pthread_join(th, NULL);
    assert_null(handle);
    skyprof_native_get_stats(&after);
    assert_int_equal(after.attach_refused_blocked - before.attach_refused_blocked, 1);
    src->destroy(NULL);
}

static void errno_preserved_across_handler(void **state)
{
    (void)state;
    struct target_thread t;
    atomic_store(&g_errno_bad, 0);
    atomic_store(&g_check_errno, 1);
    skp__native_capture_clobber_errno(true);
    start_target(&t, -1);
    for (int i = 0; i < 100; i++) {
        struct skyprof_capture c = {.frames = g_frames, .cap = 64};
        assert_int_equal(skyprof_native_stack_source()->capture(NULL, t.handle, 0, &c), 0);
    }
    stop_target(&t);
    skp__native_capture_clobber_errno(false);
    atomic_store(&g_check_errno, 0);
    assert_int_equal(atomic_load(&g_errno_bad), 0);
    skyprof_native_stack_source()->destroy(NULL);
}

static void deep_recursion_keeps_innermost(void **state)
{
    (void)state;
    struct target_thread t;
    bool truncated = false;
    start_target(&t, 1000);
    int n = capture_and_symbolize(t.handle, 50, &truncated);
    assert_int_equal(n, 50);
    assert_true(truncated);
    assert_int_equal(find_fn(g_sigs, n, "leaf_spin", 0), 0);
    for (int i = 1; i < n; i++)
        assert_int_equal(find_fn(g_sigs, n, "recurse", i), i);
    /* With room for all of it, the root (the thread's start function) is there too. */
    n = capture_and_symbolize(t.handle, MAX_TEST_FRAMES, &truncated);
    assert_false(truncated);
    assert_true(n > 1000);
    assert_true(find_fn(g_sigs, n, "target_main", 1000) > 1000);
    stop_target(&t);
    skyprof_native_stack_source()->destroy(NULL);
}

static void fp_walk_follows_chain_within_bounds(void **state)
{
    (void)state;
    uintptr_t stack[64] = {0};
    uintptr_t pcs[16];
    stack[4] = (uintptr_t)&stack[10];
    stack[5] = 0x401000;
    stack[10] = (uintptr_t)&stack[20];
    stack[11] = 0x402000;
    stack[20] = 0; /* end of chain: next <= fp */
    stack[21] = 0x403000;
    uintptr_t lo = (uintptr_t)stack;
    uintptr_t hi = (uintptr_t)(stack + 64);
    size_t n = skp__native_fp_walk(0x400000, (uintptr_t)&stack[4], lo, hi, pcs, 16);
    assert_int_equal(n, 4);
    assert_int_equal(pcs[0], 0x400000);
    assert_int_equal(pcs[1], 0x401000);
    assert_int_equal(pcs[2], 0x402000);
    assert_int_equal(pcs[3], 0x403000);
    /* cap respected */
    assert_int_equal(skp__native_fp_walk(0x400000, (uintptr_t)&stack[4], lo, hi, pcs, 2), 2);
    assert_int_equal(skp__native_fp_walk(0x400000, (uintptr_t)&stack[4], lo, hi, pcs, 0), 0);
    /* frame pointer outside the stack: only the pc */
    assert_int_equal(skp__native_fp_walk(0x400000, hi + 64, lo, hi, pcs, 16), 1);
    /* misaligned frame pointer */
    assert_int_equal(skp__native_fp_walk(0x400000, (uintptr_t)&stack[4] + 1, lo, hi, pcs, 16), 1);
    /* a cycle stops */
    stack[10] = (uintptr_t)&stack[4];
    assert_int_equal(skp__native_fp_walk(0x400000, (uintptr_t)&stack[4], lo, hi, pcs, 16), 3);
    /* a record straddling the top of the stack is not read */
    assert_int_equal(skp__native_fp_walk(0x400000, hi - sizeof(uintptr_t), lo, hi, pcs, 16), 1);
}

static void skip_count_finds_interrupted_pc(void **state)
{
    (void)state;
    const uintptr_t pcs[] = {0x10, 0x20, 0x30, 0x40};
    assert_int_equal(skp__native_skip_count(pcs, 4, 0x30, 8, 2), 2);
    assert_int_equal(skp__native_skip_count(pcs, 4, 0x10, 8, 2), 0);
    assert_int_equal(skp__native_skip_count(pcs, 4, 0x99, 8, 2), 2);
    assert_int_equal(skp__native_skip_count(pcs, 1, 0x99, 8, 2), 1);
    assert_int_equal(skp__native_skip_count(pcs, 4, 0x40, 2, 1), 1);
}

static void loader_interrupt_uses_frame_pointer_walk(void **state)
{
    (void)state;
    struct target_thread t;
    struct skp__addr_range real;
    skp__native_loader_text(&real);
    assert_true(real.lo != 0 && real.hi > real.lo);
    /* dlopen lives in libc, but the loader's work is done by code inside ld.so's text. */
    start_target(&t, -1);
    /* Pretend the spinning function is loader code: the handler must not call libunwind. */
    uintptr_t leaf = (uintptr_t)&leaf_spin;
    skp__native_capture_set_loader_range(leaf, leaf + 4096);
    struct skyprof_native_stats before;
    struct skyprof_native_stats after;
    skyprof_native_get_stats(&before);
    int n = capture_and_symbolize(t.handle, 64, NULL);
    skyprof_native_get_stats(&after);
    assert_int_equal(after.loader_fallbacks - before.loader_fallbacks, 1);
    /* With frame pointers (the build uses -fno-omit-frame-pointer) the walk still finds the
     * callers above the interrupted function. */
    int b = find_fn(g_sigs, n, "level_b", 0);
    int a = find_fn(g_sigs, n, "level_a", 0);
    assert_int_equal(find_fn(g_sigs, n, "leaf_spin", 0), 0);
    assert_true(b > 0 && a > b);
    skp__native_capture_set_loader_range(real.lo, real.hi);
    skp__native_capture_force_fp(true);
    n = capture_and_symbolize(t.handle, 64, NULL);
    skp__native_capture_force_fp(false);
    assert_true(find_fn(g_sigs, n, "level_a", 0) > 0);
    stop_target(&t);
    skyprof_native_stack_source()->destroy(NULL);
}

static int lock_word_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)info;
    (void)size;
    const int *lock = *(const int **)arg;
    return __atomic_load_n(lock, __ATOMIC_ACQUIRE) != 0 ? 1 : 2;
}

static void loader_lock_word_found(void **state)
{
    (void)state;
    const int *lock = NULL;
    skp__native_loader_lock(&lock);
#if defined(__GLIBC__)
    assert_non_null(lock);
    assert_int_equal(__atomic_load_n(lock, __ATOMIC_ACQUIRE), 0);
    /* held while dl_iterate_phdr runs its callback */
    assert_int_equal(dl_iterate_phdr(lock_word_cb, &lock), 1);
    assert_int_equal(__atomic_load_n(lock, __ATOMIC_ACQUIRE), 0);
#else
    (void)lock;
    skip();
#endif
}

/* The dlopen hazard, exercised: a thread loads and unloads a library in a loop while it is
 * sampled as fast as possible. Samples that interrupt the loader take the frame-pointer walk;
 * none may crash or hang the thread. */
struct dlopen_loop {
    void *handle;
    _Atomic int attached;
    _Atomic int done;
    int rounds;
    int failures;
};

static void *dlopen_loop_main(void *arg)
{
    struct dlopen_loop *d = arg;
    const struct skyprof_stack_source *src = skyprof_native_stack_source();
    d->handle = src->thread_attach(src->ud);
    atomic_store(&d->attached, 1);
    for (int i = 0; i < d->rounds; i++) {
        void *lib = dlopen(SKP_TESTLIB_PATH, RTLD_NOW | RTLD_LOCAL);
        if (!lib || !dlsym(lib, "skp_testlib_func"))
            d->failures++;
        if (lib)
            dlclose(lib);
    }
    atomic_store(&d->done, 1);
    return NULL;
}

static void sampling_a_thread_inside_dlopen(void **state)
{
    (void)state;
    const struct skyprof_stack_source *src = skyprof_native_stack_source();
    struct dlopen_loop d = {.rounds = 3000};
    /* Before the fix (libunwind called while this thread was inside pthread_mutex_lock of the
     * loader lock) this hung under ASan within a few hundred rounds. */
    struct skyprof_native_stats before;
    struct skyprof_native_stats after;
    pthread_t th;
    skyprof_native_get_stats(&before);
    assert_int_equal(pthread_create(&th, NULL, dlopen_loop_main, &d), 0);
    wait_flag(&d.attached);
    assert_non_null(d.handle);
    int64_t deadline = skpx_mono_ns() + 60LL * 1000 * 1000 * 1000;
    int captures = 0;
    while (!atomic_load(&d.done)) {
        struct skyprof_capture c = {.frames = g_frames, .cap = 64};
        int r = src->capture(src->ud, d.handle, 0, &c);
        assert_true(r == 0 || atomic_load(&d.done)); /* only the end of the thread may fail */
        captures += r == 0;
        assert_true(skpx_mono_ns() < deadline);
    }
    pthread_join(th, NULL);
    src->thread_release(src->ud, d.handle);
    skyprof_native_get_stats(&after);
    assert_true(skp__native_capture_has_loader_lock());
    assert_int_equal(d.failures, 0);
    assert_true(captures > 100);
    fprintf(stderr,
            "  %d captures during %d dlopen/dlclose rounds, %llu inside the loader "
            "(frame-pointer walk)\n",
            captures, d.rounds,
            (unsigned long long)(after.loader_fallbacks - before.loader_fallbacks));
    src->destroy(NULL);
}

static void symbolizer_caches_and_formats(void **state)
{
    (void)state;
    struct skp__symbolizer *s = NULL;
    struct skp__symbolizer_stats st;
    char buf[SKP_SYMBOLIZE_TEXT_MAX];
    assert_int_equal(skp__symbolizer_new(0, &s), SKP_OK);
    uintptr_t a = (uintptr_t)&level_a;
    assert_true(skp__symbolize(s, a, buf, sizeof(buf)) > 0);
    assert_true(strncmp(buf, "level_a (test_stack_native.c:", 29) == 0);
    char again[SKP_SYMBOLIZE_TEXT_MAX];
    assert_true(skp__symbolize(s, a, again, sizeof(again)) > 0);
    assert_string_equal(buf, again);
    skp__symbolizer_get_stats(s, &st);
    assert_int_equal(st.lookups, 2);
    assert_int_equal(st.hits, 1);
    assert_int_equal(st.misses, 1);
    assert_int_equal(st.entries, 1);
    /* truncation to a small buffer */
    char small[8];
    assert_int_equal(skp__symbolize(s, a, small, sizeof(small)), 7);
    assert_string_equal(small, "level_a");
    /* an address in no module */
    assert_int_equal(skp__symbolize(s, 0x10, buf, sizeof(buf)), -1);
    assert_string_equal(buf, "");
    skp__symbolizer_free(s);

    /* A tiny cache is cleared when full rather than growing. */
    assert_int_equal(skp__symbolizer_new(16, &s), SKP_OK);
    for (uintptr_t i = 0; i < 64; i++)
        (void)skp__symbolize(s, a + i, buf, sizeof(buf));
    skp__symbolizer_get_stats(s, &st);
    assert_true(st.entries <= 12);
    assert_true(st.resets >= 1);
    skp__symbolizer_free(s);
}

/* A C function may carry a C++ mangled name: `foo(int)`. */
NOINLINE int _Z13skp_demangledi(int x);
NOINLINE int _Z13skp_demangledi(int x)
{
    return x + 1;
}

static void symbolizer_demangles_cpp_names_when_runtime_loaded(void **state)
{
    (void)state;
    struct skp__symbolizer *s = NULL;
    char buf[SKP_SYMBOLIZE_TEXT_MAX];
    assert_int_equal(skp__symbolizer_new(0, &s), SKP_OK);
    /* Without a C++ runtime in the process the raw name is kept. */
    if (!dlsym(RTLD_DEFAULT, "__cxa_demangle")) {
        assert_true(skp__symbolize(s, (uintptr_t)&_Z13skp_demangledi, buf, sizeof(buf)) > 0);
        assert_true(strncmp(buf, "_Z13skp_demangledi (", 20) == 0);
    }
    void *cxx = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_GLOBAL);
    if (!cxx) {
        skp__symbolizer_free(s);
        skip();
    }
    /* A different address (the cache keeps the first answer per address). */
    assert_true(skp__symbolize(s, (uintptr_t)&_Z13skp_demangledi + 1, buf, sizeof(buf)) > 0);
    assert_true(strncmp(buf, "skp_demangled(int) (test_stack_native.c:", 40) == 0);
    skp__symbolizer_free(s);
    dlclose(cxx);
}

static void symbolizer_sees_modules_loaded_later(void **state)
{
    (void)state;
    struct skp__symbolizer *s = NULL;
    struct skp__symbolizer_stats st;
    char buf[SKP_SYMBOLIZE_TEXT_MAX];
    assert_int_equal(skp__symbolizer_new(0, &s), SKP_OK);
    void *lib = dlopen(SKP_TESTLIB_PATH, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(lib);
    void *fn = dlsym(lib, "skp_testlib_func");
    assert_non_null(fn);
    int r = skp__symbolize(s, (uintptr_t)fn, buf, sizeof(buf));
    if (r <= 0 || strncmp(buf, "skp_testlib_func (testlib.c:", 28) != 0)
        fprintf(stderr, "symbolized %p as %d \"%s\"\n", fn, r, buf);
    assert_true(r > 0);
    assert_true(strncmp(buf, "skp_testlib_func (testlib.c:", 28) == 0);
    skp__symbolizer_get_stats(s, &st);
    assert_true(st.refreshes >= 1);
    assert_int_equal(dlclose(lib), 0);
    skp__symbolizer_free(s);
}

/* A child forked while a thread is attached (and the sampler's state is whatever it was) can
 * free the parent's handle without touching its own slots, and sample its own threads. */
static void fork_child_samples_again(void **state)
{
    (void)state;
    struct target_thread t;
    start_target(&t, -1);
    int n = capture_and_symbolize(t.handle, 64, NULL);
    assert_true(n > 4);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        const struct skyprof_stack_source *src = skyprof_native_stack_source();
        void *inherited = t.handle; /* its thread does not exist in the child */
        struct target_thread c;
        start_target(&c, -1);                 /* takes a slot in the child */
        src->thread_release(NULL, inherited); /* must not free the child's slot */
        int ok = 1;
        for (int i = 0; i < 20 && ok; i++) {
            int k = capture_and_symbolize(c.handle, 64, NULL);
            ok = k > 4 && find_fn(g_sigs, k, "level_a", 0) > 0;
        }
        struct skp__native_capture_stats st;
        skp__native_capture_get_stats(&st);
        ok = ok && st.slots_in_use == 1;
        atomic_store(&g_stop, 1);
        pthread_join(c.th, NULL);
        src->thread_release(NULL, c.handle);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    /* the parent is unaffected */
    n = capture_and_symbolize(t.handle, 64, NULL);
    assert_chain_in_order(n);
    stop_target(&t);
    skyprof_native_stack_source()->destroy(NULL);
}

int main(void)
{
    unsetenv("SKYPROF_NATIVE_SIGNAL");
    /* These tests check correctness, not latency: a machine loaded by parallel builds may leave a
     * spinning target unscheduled for tens of milliseconds. */
    skp__native_capture_set_timeout_ns(10LL * 1000 * 1000 * 1000);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(forbidden_signals_refused),
        cmocka_unit_test(host_handler_chained_and_restored),
        cmocka_unit_test(default_signal_taken_by_host_picks_another),
        cmocka_unit_test(chain_captured_in_order_with_lines),
        cmocka_unit_test(capture_200_times_without_failure),
        cmocka_unit_test(thread_exiting_while_sampled_is_lost_not_crash),
        cmocka_unit_test(errno_preserved_across_handler),
        cmocka_unit_test(thread_blocking_the_signal_is_refused),
        cmocka_unit_test(round_prefetches_the_other_threads),
        cmocka_unit_test(late_signal_after_stop_is_dropped_not_fatal),
        cmocka_unit_test(proc_source_mutes_only_after_repeated_timeouts),
        cmocka_unit_test(deep_recursion_keeps_innermost),
        cmocka_unit_test(fp_walk_follows_chain_within_bounds),
        cmocka_unit_test(skip_count_finds_interrupted_pc),
        cmocka_unit_test(loader_interrupt_uses_frame_pointer_walk),
        cmocka_unit_test(loader_lock_word_found),
        cmocka_unit_test(sampling_a_thread_inside_dlopen),
        cmocka_unit_test(symbolizer_caches_and_formats),
        cmocka_unit_test(symbolizer_sees_modules_loaded_later),
        cmocka_unit_test(symbolizer_demangles_cpp_names_when_runtime_loaded),
        cmocka_unit_test(fork_child_samples_again),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
