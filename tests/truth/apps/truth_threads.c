/* truth_threads.c - native thread-per-job workload for tests/truth/test_truth_process.py, with
 * libskyprof's agent (native stack source, SW_AGENT_* environment; service "truth-c").
 *   truth_threads --ms N --spawners K --stats FILE
 * K spawner threads each start a job thread, join it, and start the next: a job lives only for
 * burn_cpu(N), which spins until the job thread's own CPU clock advanced by N ms, so the CPU the
 * jobs spend in burn_cpu is known by construction. Every 10 ms the totals are written to FILE as
 * "<burn ns> <jobs>\n" (fixed width, one pwrite). Prints "truth_threads: ready" once the agent and the
 * spawners run; runs until SIGTERM. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "skyprof/skyprof.h"
#include "skyprof/skyprof_native.h"

#define SPAWNERS_MAX 8

static _Atomic uint64_t g_burn_ns;
static _Atomic uint64_t g_jobs;
static int g_ms = 10;

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Kept as a real frame with its own name (no inlining, no clones). */
__attribute__((noinline, noipa)) static uint64_t burn_cpu(int ms)
{
    uint64_t t0 = thread_cpu_ns();
    uint64_t end = t0 + (uint64_t)ms * 1000000u;
    volatile uint64_t x = 1;
    while (thread_cpu_ns() < end)
        for (int i = 0; i < 2000; i++)
            x = x * 6364136223846793005u + 1442695040888963407u;
    return thread_cpu_ns() - t0;
}

static void *job_main(void *arg)
{
    (void)arg;
    atomic_fetch_add(&g_burn_ns, burn_cpu(g_ms));
    atomic_fetch_add(&g_jobs, 1);
    return NULL;
}

static void *spawner_main(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_t t;
        if (pthread_create(&t, NULL, job_main, NULL) != 0) {
            struct timespec d = {0, 1000000};
            nanosleep(&d, NULL);
            continue;
        }
        pthread_join(t, NULL);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int spawners = 2;
    const char *stats = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--ms") == 0)
            g_ms = (int)strtol(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--spawners") == 0)
            spawners = (int)strtol(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--stats") == 0)
            stats = argv[i + 1];
    }
    if (!stats || g_ms <= 0 || spawners < 1 || spawners > SPAWNERS_MAX) {
        fprintf(stderr, "usage: truth_threads --ms N --spawners 1..%d --stats FILE\n",
                SPAWNERS_MAX);
        return 2;
    }
    int fd = open(stats, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        perror(stats);
        return 1;
    }
    struct skyprof_config cfg;
    skyprof_config_init_defaults(&cfg);
    snprintf(cfg.service, sizeof(cfg.service), "%s", "truth-c");
    if (skyprof_config_from_env(&cfg) != SKP_OK)
        fprintf(stderr, "truth_threads: malformed SW_AGENT_* variables ignored\n");
    skyprof_agent *agent = NULL;
    skp_err err = skyprof_agent_start(&cfg, skyprof_native_stack_source(), &agent);
    if (err) {
        fprintf(stderr, "truth_threads: agent not started: %s\n", skp_strerror(err));
        return 1;
    }
    for (int i = 0; i < spawners; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, spawner_main, NULL) != 0) {
            perror("pthread_create");
            return 1;
        }
        pthread_detach(t);
    }
    printf("truth_threads: ready\n");
    fflush(stdout);
    for (;;) { /* SIGTERM's default action ends the process */
        char line[64];
        /* fixed width: each pwrite replaces the whole line at once */
        int n = snprintf(line, sizeof(line), "%020llu %020llu\n",
                         (unsigned long long)atomic_load(&g_burn_ns),
                         (unsigned long long)atomic_load(&g_jobs));
        if (pwrite(fd, line, (size_t)n, 0) != n)
            return 1;
        struct timespec d = {0, 10 * 1000000};
        nanosleep(&d, NULL);
    }
}
