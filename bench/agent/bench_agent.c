/* bench_agent.c - what the agent core costs its host when no profile task runs, and the request
 * path cost in each state. Usage: bench_agent [backend host:port] (default: an unreachable port,
 * i.e. the backend-down case; pass a running skyprofd to measure with reporting).
 * Prints one table: scenario, threads, CPU ns per entry_begin+entry_end pair (thread CPU time,
 * robust to other load on the machine), with 1 and with 4 request threads at once. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "common/alloc.h"
#include "skyprof/skyprof.h"

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* CPU time of the calling thread: the machine is shared (other builds run), so wall time would
 * mostly measure the scheduler; thread CPU time measures what a request pays. */
static int64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kb = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

static int threads(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

struct run {
    const char *endpoint;
    long iters;
    double ns;
};

static void *pairs(void *arg)
{
    struct run *r = arg;
    int64_t t0 = cpu_ns();
    for (long i = 0; i < r->iters; i++) {
        skyprof_span *s = skyprof_entry_begin(r->endpoint, NULL);
        skyprof_entry_end(s);
    }
    r->ns = (double)(cpu_ns() - t0) / (double)r->iters;
    return NULL;
}

static double measure(const char *endpoint, long iters, int n_threads)
{
    pthread_t t[8];
    struct run r[8];
    for (int i = 0; i < n_threads; i++) {
        r[i].endpoint = endpoint;
        r[i].iters = iters;
        pthread_create(&t[i], NULL, pairs, &r[i]);
    }
    for (int i = 0; i < n_threads; i++)
        pthread_join(t[i], NULL);
    /* thread CPU ns per pair; with n threads, the mean over the threads (shared cache lines and
     * allocator contention show up here) */
    double sum = 0;
    for (int i = 0; i < n_threads; i++)
        sum += r[i].ns;
    return sum / n_threads;
}

static skyprof_agent *start(const char *backend, bool segments, int seg_buf)
{
    struct skyprof_config cfg;
    skyprof_config_init_defaults(&cfg);
    snprintf(cfg.service, sizeof(cfg.service), "bench-agent");
    snprintf(cfg.backend, sizeof(cfg.backend), "%s", backend);
    cfg.report_segments = segments;
    cfg.segment_buffer_size = seg_buf;
    skyprof_agent *a = NULL;
    if (skyprof_agent_start(&cfg, NULL, &a) != SKP_OK) {
        fprintf(stderr, "bench_agent: start failed\n");
        exit(1);
    }
    return a;
}

static void row(const char *what, int thr, double ns1, double ns4)
{
    printf("%-58s %7d %10.1f %10.1f\n", what, thr, ns1, ns4);
}

int main(int argc, char **argv)
{
    const char *backend = argc > 1 ? argv[1] : "127.0.0.1:1";
    const long N = 1000000;
    /* reference: a clock read, the floor of any timed span */
    int64_t t0 = cpu_ns();
    volatile int64_t sink = 0;
    for (long i = 0; i < N; i++)
        sink += now_ns();
    double clock_ns = (double)(cpu_ns() - t0) / N;

    printf("bench_agent (backend %s)\n", backend);
    printf("%-58s %7s %10s %10s\n", "scenario", "threads", "cpu ns 1t", "cpu ns 4t");
    row("clock_gettime(CLOCK_MONOTONIC) alone (reference)", threads(), clock_ns, 0);
    row("no agent started (NULL fast path)", threads(), measure("/ep", N, 1), measure("/ep", N, 4));

    int thr0 = threads();
    long rss0 = rss_kb();
    int64_t live0 = skpx_alloc_live_bytes();
    skyprof_agent *a = start(backend, false, 1000);
    usleep(300000);
    int thr1 = threads();
    long rss1 = rss_kb();
    int64_t live1 = skpx_alloc_live_bytes();
    row("agent, no task, segment reporting off", thr1, measure("/ep", N, 1), measure("/ep", N, 4));
    long rss2 = rss_kb();
    int64_t live2 = skpx_alloc_live_bytes();
    skyprof_agent_stop(a, 0);

    /* segments on: queue large enough that every push succeeds (the realistic steady state
     * when the channel keeps up); backend down means they are not drained in this run */
    a = start(backend, true, 1000000);
    usleep(100000);
    row("agent, no task, segments queued (malloc + lock-free push)", threads(),
        measure("/ep", N / 4, 1), measure("/ep", N / 16, 4));
    skyprof_agent_stop(a, 0);
    a = start(backend, true, 1000);
    usleep(100000);
    row("agent, no task, segment queue full (drop + count)", threads(), measure("/ep", N, 1),
        measure("/ep", N, 4));

    struct skyprof_task_spec other = {"bench-other", "/other", 1, 0, 10, 9, 0};
    if (skyprof_agent_add_task(a, &other) != SKP_OK)
        fprintf(stderr, "bench_agent: add_task failed\n");
    usleep(50000);
    row("task active for another endpoint", threads(), measure("/ep", N, 1), measure("/ep", N, 4));
    skyprof_agent_stop(a, 0);

    a = start(backend, true, 1000);
    struct skyprof_task_spec match = {"bench-match", "/ep", 1, 1000000, 10, 9, 0};
    if (skyprof_agent_add_task(a, &match) != SKP_OK)
        fprintf(stderr, "bench_agent: add_task failed\n");
    usleep(50000);
    row("task active, endpoint matches (slot claim/release, attach)", threads(),
        measure("/ep", N / 4, 1), measure("/ep", N / 4, 4));
    struct skyprof_stats st;
    skyprof_agent_get_stats(a, &st);
    skyprof_agent_stop(a, 0);

    printf("\nno active task: agent threads %d (process %d -> %d)\n", thr1 - thr0, thr0, thr1);
    printf("no active task: RSS %ld kB -> %ld kB after start (+%ld kB), %ld kB after %ld "
           "requests (+%ld kB)\n", rss0, rss1, rss1 - rss0, rss2, 2 * N, rss2 - rss0);
    printf("no active task: agent heap (skpx live bytes) +%lld B after start, +%lld B after "
           "requests\n", (long long)(live1 - live0), (long long)(live2 - live0));
    printf("matching task: slots taken %llu (threshold 1000 s: no capture)\n",
           (unsigned long long)st.slots_taken);
    (void)sink;
    return 0;
}
