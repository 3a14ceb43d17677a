/* bench_native_agent.c - overhead of native profiling through the FULL agent path (tracer, slots,
 * sampler thread, snapshot building and queueing, native source): N CPU-bound requests run
 * concurrently, alternately as requests a local profile task matches (sampled every 10 ms) and
 * as requests it does not match, in interleaved phases of one run. A task samples at most 9
 * requests (SkyWalking's maxSamplingCount < 10), so every pair of phases runs with a fresh agent
 * and task; the agent and its task are active in both phases of a pair, only the endpoint name
 * differs. The backend address is a closed port: snapshots are built and queued, not sent.
 * Usage: bench_native_agent [--pairs N] [--phase-ms MS] [--threads N] */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_native_common.h"
#include "skyprof/skyprof.h"
#include "skyprof/skyprof_native.h"

#define MAX_WORKERS 8
#define DUMP_PERIOD_MS 10

static struct {
    int n_workers;
    const char *endpoint;   /* of the phase running now */
    _Atomic int phase_id;   /* bumped to start a phase; workers run one request per phase */
    _Atomic int phase_stop;
    _Atomic int quit;
    _Atomic uint64_t work[MAX_WORKERS];
    _Atomic int in_request;
} w;

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static void *worker_main(void *arg)
{
    int id = (int)(intptr_t)arg;
    int seen = 0;
    while (!atomic_load(&w.quit)) {
        int p = atomic_load(&w.phase_id);
        if (p == seen) {
            sleep_ms(1);
            continue;
        }
        seen = p;
        skyprof_span *span = skyprof_entry_begin(w.endpoint, NULL);
        atomic_fetch_add(&w.in_request, 1);
        (void)bnc_handle_request(id, 20, &w.phase_stop, &w.work[id]);
        skyprof_entry_end(span);
        atomic_fetch_sub(&w.in_request, 1);
    }
    return NULL;
}

static pthread_t g_th[MAX_WORKERS];

static int64_t workers_cpu_ns(void)
{
    return bnc_threads_cpu_ns(g_th, w.n_workers);
}

static uint64_t total_work(void)
{
    return bnc_total_work(w.work, w.n_workers);
}

/* Runs one phase: every worker runs one request named `endpoint` for phase_ms. Returns work
 * units per wall ms; *per_cpu_ms gets work units per ms of the workers' own CPU time (the signal
 * handler runs on them and is charged to them; other load on the machine does not change it). */
static double run_phase(const char *endpoint, int phase_ms, double *per_cpu_ms)
{
    w.endpoint = endpoint;
    atomic_store(&w.phase_stop, 0);
    atomic_fetch_add(&w.phase_id, 1);
    while (atomic_load(&w.in_request) < w.n_workers)
        sleep_ms(1);
    uint64_t w0 = total_work();
    int64_t c0 = workers_cpu_ns();
    int64_t t0 = mono_ns();
    sleep_ms(phase_ms);
    uint64_t w1 = total_work();
    int64_t c1 = workers_cpu_ns();
    double ms = (double)(mono_ns() - t0) / 1e6;
    *per_cpu_ms = (double)(w1 - w0) / ((double)(c1 - c0) / 1e6);
    atomic_store(&w.phase_stop, 1);
    while (atomic_load(&w.in_request) > 0)
        sleep_ms(1);
    return (double)(w1 - w0) / ms;
}

int main(int argc, char **argv)
{
    int pairs = 4;
    int phase_ms = 1500;
    w.n_workers = 5;
    bnc_parse_args(argc, argv, "--pairs", &pairs, &phase_ms, &w.n_workers);
    if (w.n_workers < 1 || w.n_workers > MAX_WORKERS || pairs < 1 || phase_ms < 100) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    pthread_t *th = g_th;
    for (int i = 0; i < w.n_workers; i++)
        pthread_create(&th[i], NULL, worker_main, (void *)(intptr_t)i);

    double on_sum = 0;
    double off_sum = 0;
    double on_cpu_sum = 0;
    double off_cpu_sum = 0;
    double rate_sum = 0;
    uint64_t snaps = 0;
    uint64_t fails = 0;
    double expected_snaps = 0;
    printf("full agent path: %d CPU-bound concurrent requests, dump period %d ms, %d phase pairs "
           "of %d ms (order alternates)\n",
           w.n_workers, DUMP_PERIOD_MS, pairs, phase_ms);
    for (int p = 0; p < pairs; p++) {
        struct skyprof_config cfg;
        skyprof_config_init_defaults(&cfg);
        snprintf(cfg.service, sizeof(cfg.service), "bench-native");
        snprintf(cfg.backend, sizeof(cfg.backend), "127.0.0.1:1");
        skyprof_agent *agent = NULL;
        if (skyprof_agent_start(&cfg, skyprof_native_stack_source(), &agent) != SKP_OK) {
            fprintf(stderr, "agent start failed\n");
            return 1;
        }
        struct skyprof_task_spec task = {.endpoint = "/bench", .duration_min = 1,
                                         .min_duration_threshold_ms = 0,
                                         .dump_period_ms = DUMP_PERIOD_MS,
                                         .max_sampling_count = 9};
        if (skyprof_agent_add_task(agent, &task) != SKP_OK) {
            fprintf(stderr, "task rejected\n");
            return 1;
        }
        for (int i = 0; i < 2000 && !skyprof_agent_task_active(agent); i++)
            sleep_ms(1);
        double on;
        double off;
        double on_cpu;
        double off_cpu;
        if (p % 2 == 0) {
            off = run_phase("/other", phase_ms, &off_cpu);
            on = run_phase("/bench", phase_ms, &on_cpu);
        } else {
            on = run_phase("/bench", phase_ms, &on_cpu);
            off = run_phase("/other", phase_ms, &off_cpu);
        }
        on_cpu_sum += on_cpu;
        off_cpu_sum += off_cpu;
        struct skyprof_stats st;
        skyprof_agent_get_stats(agent, &st);
        printf("   pair %d: per worker-CPU-ms %.2f vs %.2f (%.2f %%); wall %.1f vs %.1f units/ms "
               "(%.2f %%); dump rate %.1f Hz; snapshots %llu; capture failures %llu\n",
               p, on_cpu, off_cpu, 100.0 * on_cpu / off_cpu, on, off, 100.0 * on / off,
               st.achieved_dump_rate_hz,
               (unsigned long long)st.snapshots_captured, (unsigned long long)st.capture_failures);
        on_sum += on;
        off_sum += off;
        rate_sum += st.achieved_dump_rate_hz;
        snaps += st.snapshots_captured;
        fails += st.capture_failures;
        expected_snaps += (double)phase_ms / DUMP_PERIOD_MS * w.n_workers;
        skyprof_agent_stop(agent, 0);
    }
    atomic_store(&w.quit, 1);
    for (int i = 0; i < w.n_workers; i++)
        pthread_join(th[i], NULL);
    printf("   work per worker-CPU-ms, sampled/not sampled: %.2f %%   target >= 99 %%\n",
           100.0 * on_cpu_sum / off_cpu_sum);
    printf("   wall-clock throughput sampled/not sampled: %.2f %% (affected by other load on the "
           "machine)\n",
           100.0 * on_sum / off_sum);
    printf("   achieved dump rate: %.1f Hz of %d Hz requested (%.1f %%); snapshots %llu of %.0f "
           "(%.1f %%)   target >= 95 %%\n",
           rate_sum / pairs, 1000 / DUMP_PERIOD_MS, 100.0 * (rate_sum / pairs) / (1000.0 / DUMP_PERIOD_MS),
           (unsigned long long)snaps, expected_snaps, 100.0 * (double)snaps / expected_snaps);
    printf("   capture failures: %llu\n", (unsigned long long)fails);
    struct skyprof_native_stats ns;
    skyprof_native_get_stats(&ns);
    printf("   native source: signal %d, captures %llu ok, lost timeout %llu, prefetched %llu "
           "(used %llu), handler mean %.2f us max %.1f us\n",
           ns.signo, (unsigned long long)ns.captures_ok, (unsigned long long)ns.lost_timeout,
           (unsigned long long)ns.prefetched, (unsigned long long)ns.prefetch_used,
           ns.captures_ok ? ns.handler_ns_total / 1e3 / (double)ns.captures_ok : 0.0,
           ns.handler_ns_max / 1e3);
    return 0;
}
