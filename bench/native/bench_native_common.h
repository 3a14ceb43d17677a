/* bench_native_common.h - the CPU-bound workload and the CPU/work counters shared by bench_native
 * (stack source driven directly) and bench_native_agent (full agent path), so both measure the
 * very same request. Only libc and pthreads: each benchmark links it with its own libraries. */
#ifndef SKP_BENCH_NATIVE_COMMON_H
#define SKP_BENCH_NATIVE_COMMON_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* One unit of CPU-bound work (20000 LCG steps) on x; returns the new value. Never inlined. */
uint64_t bnc_work_unit(uint64_t x);

/* A request `depth` frames deep (never inlined, so a sampler sees depth + 1 frames of it) that
 * runs work units seeded with `id` until *stop becomes non-zero, adding 1 to *work per unit. */
uint64_t bnc_handle_request(int id, int depth, _Atomic int *stop, _Atomic uint64_t *work);

/* CPU time of thread `th` in ns, 0 when it cannot be read. */
int64_t bnc_thread_cpu_ns(pthread_t th);

/* Sum of bnc_thread_cpu_ns over th[0..n). */
int64_t bnc_threads_cpu_ns(const pthread_t *th, int n);

/* Sum of work[0..n) (atomic loads). */
uint64_t bnc_total_work(_Atomic uint64_t *work, int n);

/* Parses "--<count_flag> N --phase-ms MS --threads N" pairs from argv into the given ints (left
 * as they are when absent); unknown flags are skipped with their value. */
void bnc_parse_args(int argc, char **argv, const char *count_flag, int *count, int *phase_ms,
                    int *threads);

#endif
