/* bench_attach - cost of reading another process's Python stacks (src/attach), per sample:
 *   bench_attach PID N     samples PID N times back to back (after 200 warm-up samples) and
 *                          prints one JSON line: frames and threads per sample, median / p99 /
 *                          mean microseconds per sample, syscalls and bytes per sample, torn
 *                          samples. Used by bench/attach/bench_attach.py. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "attach/pyreader.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: bench_attach PID N\n");
        return 2;
    }
    pid_t pid = (pid_t)atoi(argv[1]);
    long n = atol(argv[2]);
    if (n < 1)
        n = 1;
    char why[ATTACH_WHY_MAX];
    struct attach_target *t = NULL;
    if (attach_target_open(pid, &t, why, sizeof(why)) != SKP_OK) {
        fprintf(stderr, "bench_attach: %s\n", why);
        return 1;
    }
    struct attach_sample *s = malloc(sizeof(*s));
    uint64_t *ns = malloc((size_t)n * sizeof(uint64_t));
    if (!s || !ns)
        return 1;
    for (int i = 0; i < 200; i++)
        if (attach_target_sample(t, s, 0) != SKP_OK)
            return 1;
    struct attach_stats before;
    attach_target_stats(t, &before);
    uint64_t frames = 0;
    uint64_t threads = 0;
    uint64_t torn = 0;
    for (long i = 0; i < n; i++) {
        uint64_t t0 = now_ns();
        if (attach_target_sample(t, s, 0) != SKP_OK)
            return 1;
        ns[i] = now_ns() - t0;
        frames += s->n_frames;
        threads += s->n_threads;
        torn += s->n_torn;
    }
    struct attach_stats after;
    attach_target_stats(t, &after);
    uint64_t sum = 0;
    for (long i = 0; i < n; i++)
        sum += ns[i];
    qsort(ns, (size_t)n, sizeof(uint64_t), cmp_u64);
    printf("{\"samples\": %ld, \"frames_per_sample\": %.1f, \"threads_per_sample\": %.2f, "
           "\"median_us\": %.2f, \"p99_us\": %.2f, \"mean_us\": %.2f, "
           "\"syscalls_per_sample\": %.2f, \"bytes_per_sample\": %.0f, \"torn\": %llu, "
           "\"python\": \"%s\"}\n",
           n, (double)frames / (double)n, (double)threads / (double)n, ns[n / 2] / 1000.0,
           ns[(size_t)((double)n * 0.99)] / 1000.0, (double)sum / (double)n / 1000.0,
           (double)(after.syscalls - before.syscalls) / (double)n,
           (double)(after.bytes - before.bytes) / (double)n, (unsigned long long)torn,
           attach_target_version(t));
    free(ns);
    free(s);
    attach_target_close(t);
    return 0;
}
