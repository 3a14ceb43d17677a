/* bench_native.c - figures of the native stack source, printed side by side with their targets:
 *   1. capture of a ~30-frame stack of another thread: time inside the handler (median <= 2 us)
 *      and the full round trip (signal -> handler -> sampler wakes);
 *   2. symbolization: cold (libdw) vs cached lookups, hit rate;
 *   3. overhead: 5 CPU-bound threads, sampled every 10 ms through the source (as the agent's
 *      sampler does) vs not sampled, in interleaved phases of one run: throughput ratio (target
 *      >= 99 %) and achieved dump rate (target >= 95 % of requested).
 * This drives the stack source directly (not the agent core); bench_native_agent measures the
 * full agent path. Usage: bench_native [--phases N] [--phase-ms MS] [--threads N] */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/native/stack_native_capture.h"
#include "bench_native_common.h"
#include "agent/native/symbolize.h"
#include "common/clock.h"
#include "skyprof/skyprof_native.h"

#if defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noinline, noipa))
#endif

#define CAPTURES 5000
#define DEPTH_30 26 /* recursion levels giving ~30 frames with leaf, thread start and clone */
#define MAX_WORKERS 16
#define DUMP_PERIOD_MS 10
#define FRAMES_CAP 500

static _Atomic int g_stop;
static _Atomic int g_ready;

NOINLINE static uint64_t spin_leaf(void)
{
    volatile uint64_t x = 1;
    atomic_store(&g_ready, 1);
    while (!atomic_load_explicit(&g_stop, memory_order_relaxed))
        x = x * 6364136223846793005ULL + 1;
    return x;
}

NOINLINE static uint64_t recurse(int depth)
{
    if (depth == 0)
        return spin_leaf();
    uint64_t r = recurse(depth - 1);
    __asm__ volatile("" ::: "memory");
    return r + 1;
}

static void *deep_main(void *arg)
{
    void **handle = arg;
    const struct skyprof_stack_source *src = skyprof_native_stack_source();
    *handle = src->thread_attach(src->ud);
    recurse(DEPTH_30);
    return NULL;
}

static int64_t cpu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a;
    int64_t y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int64_t pct(int64_t *v, size_t n, double p)
{
    size_t i = (size_t)(p * (double)(n - 1));
    return v[i];
}

static struct skyprof_frame g_frames[FRAMES_CAP];

static void bench_capture_and_symbolize(void)
{
    const struct skyprof_stack_source *src = skyprof_native_stack_source();
    static int64_t in_handler[CAPTURES];
    static int64_t round_trip[CAPTURES];
    void *handle = NULL;
    pthread_t th;
    atomic_store(&g_stop, 0);
    atomic_store(&g_ready, 0);
    pthread_create(&th, NULL, deep_main, &handle);
    while (!atomic_load(&g_ready))
        skpx_sleep_ns(100000);

    struct skyprof_native_stats st0;
    struct skyprof_native_stats st1;
    skyprof_native_get_stats(&st0);
    uint32_t depth = 0;
    size_t ok = 0;
    int64_t caller_cpu = 0;
    for (size_t i = 0; i < CAPTURES; i++) {
        struct skyprof_capture c = {.frames = g_frames, .cap = FRAMES_CAP};
        uint64_t before_ns = 0;
        skyprof_native_get_stats(&st1);
        before_ns = st1.handler_ns_total;
        int64_t cpu0 = cpu_now_ns();
        int64_t t0 = skpx_mono_ns();
        int r = src->capture(src->ud, handle, 0, &c);
        int64_t t1 = skpx_mono_ns();
        caller_cpu += cpu_now_ns() - cpu0;
        if (r != 0)
            continue;
        skyprof_native_get_stats(&st1);
        in_handler[ok] = (int64_t)(st1.handler_ns_total - before_ns);
        round_trip[ok] = t1 - t0;
        depth = c.n;
        ok++;
    }
    qsort(in_handler, ok, sizeof(int64_t), cmp_i64);
    qsort(round_trip, ok, sizeof(int64_t), cmp_i64);
    printf("1. capture of another thread's stack (%u frames), %zu/%d captures ok\n", depth, ok,
           CAPTURES);
    printf("   %-34s median %6.2f us  p90 %6.2f us  p99 %6.2f us   target median <= 2 us\n",
           "walk inside the handler:", pct(in_handler, ok, 0.5) / 1e3,
           pct(in_handler, ok, 0.9) / 1e3, pct(in_handler, ok, 0.99) / 1e3);
    printf("   %-34s median %6.2f us  p90 %6.2f us  p99 %6.2f us\n",
           "round trip (signal..sampler wakes):", pct(round_trip, ok, 0.5) / 1e3,
           pct(round_trip, ok, 0.9) / 1e3, pct(round_trip, ok, 0.99) / 1e3);
    printf("   %-34s mean   %6.2f us\n", "sampler CPU per capture:",
           ok ? (double)caller_cpu / 1e3 / (double)ok : 0.0);

    /* 2. symbolization of those frames */
    struct skp__symbolizer *sym = NULL;
    if (skp__symbolizer_new(0, &sym) != SKP_OK) {
        printf("2. symbolizer unavailable\n");
    } else {
        char buf[SKP_SYMBOLIZE_TEXT_MAX];
        int64_t t0 = skpx_mono_ns();
        for (uint32_t i = 0; i < depth; i++)
            (void)skp__symbolize(sym, g_frames[i].addr, buf, sizeof(buf));
        int64_t cold = skpx_mono_ns() - t0;
        const int rounds = 2000;
        t0 = skpx_mono_ns();
        for (int r = 0; r < rounds; r++)
            for (uint32_t i = 0; i < depth; i++)
                (void)skp__symbolize(sym, g_frames[i].addr, buf, sizeof(buf));
        int64_t warm = skpx_mono_ns() - t0;
        struct skp__symbolizer_stats ss;
        skp__symbolizer_get_stats(sym, &ss);
        printf("2. symbolization (libdw, %u distinct addresses, then %d rounds)\n", depth, rounds);
        printf("   cold (first lookup, loads debug info): %8.1f us per address\n",
               (double)cold / depth / 1e3);
        printf("   cached:                                %8.3f us per address\n",
               (double)warm / ((double)rounds * depth) / 1e3);
        printf("   hit rate %.4f (%llu hits / %llu lookups), %u entries\n",
               ss.lookups ? (double)ss.hits / (double)ss.lookups : 0.0,
               (unsigned long long)ss.hits, (unsigned long long)ss.lookups, ss.entries);
        skp__symbolizer_free(sym);
    }
    atomic_store(&g_stop, 1);
    pthread_join(th, NULL);
    src->thread_release(src->ud, handle);
}

/* ---- 3. overhead ---------------------------------------------------------------------------- */
static struct {
    int n_workers;
    _Atomic int stop;
    _Atomic int sampling;              /* 1 during "profiled" phases */
    _Atomic uint64_t work[MAX_WORKERS];
    void *handles[MAX_WORKERS];
    _Atomic int attached;
    _Atomic uint64_t iterations;       /* sampler iterations while sampling */
    _Atomic uint64_t captures_ok;
    _Atomic uint64_t captures_failed;
    int64_t capture_cpu_ns;     /* sampler thread CPU spent in capture (sampler only) */
} w;

static int64_t self_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *worker_main(void *arg)
{
    int id = (int)(intptr_t)arg;
    const struct skyprof_stack_source *src = skyprof_native_stack_source();
    w.handles[id] = src->thread_attach(src->ud);
    atomic_fetch_add(&w.attached, 1);
    bnc_handle_request(id, 20, &w.stop, &w.work[id]);
    return NULL;
}

static void *sampler_main(void *arg)
{
    (void)arg;
    const struct skyprof_stack_source *src = skyprof_native_stack_source();
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    while (!atomic_load(&w.stop)) {
        if (atomic_load(&w.sampling)) {
            atomic_fetch_add(&w.iterations, 1);
            for (int i = 0; i < w.n_workers; i++) {
                struct skyprof_capture c = {.frames = g_frames, .cap = FRAMES_CAP};
                int64_t c0 = self_cpu_ns();
                int r = src->capture(src->ud, w.handles[i], 0, &c);
                int64_t c1 = self_cpu_ns();
                w.capture_cpu_ns += c1 - c0;
                if (r == 0) {
                    /* Symbolization is not charged here: the agent does it on its channel
                     * thread, cached per address (part 2 measures it). */
                    atomic_fetch_add(&w.captures_ok, 1);
                } else {
                    atomic_fetch_add(&w.captures_failed, 1);
                }
            }
        }
        /* Like the agent: next deadline = previous + period, or a full period if already late. */
        int64_t ns = next.tv_nsec + DUMP_PERIOD_MS * 1000000L;
        next.tv_sec += ns / 1000000000;
        next.tv_nsec = ns % 1000000000;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > next.tv_sec || (now.tv_sec == next.tv_sec && now.tv_nsec > next.tv_nsec)) {
            next = now;
            ns = next.tv_nsec + DUMP_PERIOD_MS * 1000000L;
            next.tv_sec += ns / 1000000000;
            next.tv_nsec = ns % 1000000000;
        }
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR) {
        }
    }
    return NULL;
}

static pthread_t g_worker_th[MAX_WORKERS];
static pthread_t g_sampler_th;

static int64_t workers_cpu_ns(void)
{
    return bnc_threads_cpu_ns(g_worker_th, w.n_workers);
}

static uint64_t total_work(void)
{
    return bnc_total_work(w.work, w.n_workers);
}

static void bench_overhead(int phases, int phase_ms)
{
    pthread_t *workers = g_worker_th;
    pthread_t sampler;
    for (int i = 0; i < w.n_workers; i++)
        pthread_create(&workers[i], NULL, worker_main, (void *)(intptr_t)i);
    while (atomic_load(&w.attached) < w.n_workers)
        skpx_sleep_ns(1000000);
    pthread_create(&sampler, NULL, sampler_main, NULL);
    g_sampler_th = sampler;
    skpx_sleep_ns(200 * 1000000LL); /* warm-up */

    double work_on = 0;
    double work_off = 0;
    double ms_on = 0;
    double ms_off = 0;
    double cpu_on = 0;  /* worker CPU ms: the handler runs on the worker and is charged to it */
    double cpu_off = 0;
    double sampler_cpu_on = 0;
    printf("3. overhead: %d CPU-bound threads, dump period %d ms, %d interleaved phase pairs of "
           "%d ms\n",
           w.n_workers, DUMP_PERIOD_MS, phases, phase_ms);
    for (int p = 0; p < 2 * phases; p++) {
        /* Alternate the order within each pair so drift of the machine load cancels out. */
        int on = (p % 2) ^ ((p / 2) % 2);
        atomic_store(&w.sampling, on);
        uint64_t w0 = total_work();
        int64_t c0 = workers_cpu_ns();
        int64_t s0 = bnc_thread_cpu_ns(sampler);
        int64_t t0 = skpx_mono_ns();
        skpx_sleep_ns((int64_t)phase_ms * 1000000);
        uint64_t w1 = total_work();
        int64_t c1 = workers_cpu_ns();
        int64_t s1 = bnc_thread_cpu_ns(sampler);
        double ms = (double)(skpx_mono_ns() - t0) / 1e6;
        if (on) {
            work_on += (double)(w1 - w0);
            ms_on += ms;
            cpu_on += (double)(c1 - c0) / 1e6;
            sampler_cpu_on += (double)(s1 - s0) / 1e6;
        } else {
            work_off += (double)(w1 - w0);
            ms_off += ms;
            cpu_off += (double)(c1 - c0) / 1e6;
        }
    }
    atomic_store(&w.sampling, 0);
    atomic_store(&w.stop, 1);
    pthread_join(sampler, NULL);
    for (int i = 0; i < w.n_workers; i++) {
        pthread_join(workers[i], NULL);
        skyprof_native_stack_source()->thread_release(NULL, w.handles[i]);
    }
    double rate_on = work_on / ms_on;
    double rate_off = work_off / ms_off;
    double expected_iter = ms_on / DUMP_PERIOD_MS;
    uint64_t iters = atomic_load(&w.iterations);
    uint64_t ok = atomic_load(&w.captures_ok);
    double eff_on = work_on / cpu_on;
    double eff_off = work_off / cpu_off;
    printf("   work per worker-CPU-ms sampled %.2f, not sampled %.2f: ratio %.2f %%   target >= 99 %%\n"
           "     (the handler and signal delivery run on the workers and are charged to them;\n"
           "      this ratio does not depend on how much CPU other processes leave us)\n",
           eff_on, eff_off, 100.0 * eff_on / eff_off);
    printf("   sampler thread CPU while sampling: %.2f %% of one core\n",
           100.0 * sampler_cpu_on / ms_on);
    printf("   overall, counting the sampler's CPU against the workers': %.2f %%\n",
           100.0 * (work_on / (cpu_on + sampler_cpu_on)) / eff_off);
    printf("   wall-clock throughput sampled %.1f units/ms, not sampled %.1f units/ms: ratio "
           "%.2f %% (affected by other load on the machine)\n",
           rate_on, rate_off, 100.0 * rate_on / rate_off);
    printf("   sampler iterations %llu of %.0f requested (%.1f %%); captures ok %llu of %llu "
           "(%.1f %% of requested dumps)   target >= 95 %%\n",
           (unsigned long long)iters, expected_iter, 100.0 * (double)iters / expected_iter,
           (unsigned long long)ok, (unsigned long long)(iters * (uint64_t)w.n_workers),
           100.0 * (double)ok / (expected_iter * w.n_workers));
    printf("   sampler CPU per capture %.1f us\n",
           ok ? (double)w.capture_cpu_ns / 1e3 / (double)ok : 0.0);
    printf("   captures failed (lost): %llu\n",
           (unsigned long long)atomic_load(&w.captures_failed));
}

int main(int argc, char **argv)
{
    int phases = 5;
    int phase_ms = 1000;
    w.n_workers = 5;
    bnc_parse_args(argc, argv, "--phases", &phases, &phase_ms, &w.n_workers);
    if (w.n_workers < 1 || w.n_workers > MAX_WORKERS || phases < 1 || phase_ms < 10) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    bench_capture_and_symbolize();
    bench_overhead(phases, phase_ms);
    struct skyprof_native_stats st;
    skyprof_native_get_stats(&st);
    printf("native source stats: signal %d, captures %llu ok / %llu, lost timeout %llu, "
           "prefetched %llu (used %llu), handler max %.1f us, symbolize hit rate %.4f\n",
           st.signo, (unsigned long long)st.captures_ok,
           (unsigned long long)st.captures_requested, (unsigned long long)st.lost_timeout,
           (unsigned long long)st.prefetched, (unsigned long long)st.prefetch_used,
           st.handler_ns_max / 1e3, st.symbolize_hit_rate);
    skyprof_native_stack_source()->destroy(NULL);
    return 0;
}
