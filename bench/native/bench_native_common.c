/* bench_native_common.c - workload and counters shared by the native benchmarks. */
#include "bench_native_common.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noinline, noipa))
#endif

NOINLINE uint64_t bnc_work_unit(uint64_t x)
{
    for (int i = 0; i < 20000; i++)
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x;
}

NOINLINE uint64_t bnc_handle_request(int id, int depth, _Atomic int *stop, _Atomic uint64_t *work)
{
    if (depth > 0) {
        uint64_t r = bnc_handle_request(id, depth - 1, stop, work);
        __asm__ volatile("" ::: "memory");
        return r;
    }
    uint64_t x = (uint64_t)id;
    while (!atomic_load_explicit(stop, memory_order_relaxed)) {
        x = bnc_work_unit(x);
        atomic_fetch_add_explicit(work, 1, memory_order_relaxed);
    }
    return x;
}

int64_t bnc_thread_cpu_ns(pthread_t th)
{
    clockid_t cid;
    struct timespec ts;
    if (pthread_getcpuclockid(th, &cid) != 0 || clock_gettime(cid, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t bnc_threads_cpu_ns(const pthread_t *th, int n)
{
    int64_t t = 0;
    for (int i = 0; i < n; i++)
        t += bnc_thread_cpu_ns(th[i]);
    return t;
}

uint64_t bnc_total_work(_Atomic uint64_t *work, int n)
{
    uint64_t t = 0;
    for (int i = 0; i < n; i++)
        t += atomic_load(&work[i]);
    return t;
}

void bnc_parse_args(int argc, char **argv, const char *count_flag, int *count, int *phase_ms,
                    int *threads)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], count_flag) == 0)
            *count = (int)strtol(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--phase-ms") == 0)
            *phase_ms = (int)strtol(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--threads") == 0)
            *threads = (int)strtol(argv[i + 1], NULL, 10);
    }
}
