/* bench_cont.c - what continuous profiling's HTTP checks cost a request (issue 11: <= 1 us per
 * request on the request path). Usage: bench_cont [iterations] (default 2,000,000).
 * An agent is started towards an unreachable backend with segment reporting off (so the pair
 * measures the tracer and the check, not the reporting queue). Each row: thread CPU ns per
 * request (entry_begin + http.status_code tag + entry_end), with 1 and 4 request threads, in
 * three states: no policy (the counters off: one relaxed load), a policy with HTTP items (the
 * counters on: hash, probe, three relaxed atomic adds), and the counter update alone.
 * Thread CPU time, not wall time: the machine is shared, this measures what a request pays. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/cont_http.h"
#include "skyprof/skyprof.h"

static const char *const k_endpoints[8] = {"/checkout", "/cart", "/login", "/search",
                                           "/api/orders", "/api/users", "/health", "/slow"};

static int64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct run {
    long iters;
    int mode; /* 0 request pairs, 1 the counter update alone */
    double ns;
};

static void *loop(void *arg)
{
    struct run *r = arg;
    int64_t t0 = cpu_ns();
    for (long i = 0; i < r->iters; i++) {
        const char *ep = k_endpoints[i & 7];
        if (r->mode == 1) {
            skp__cont_http_record(ep, strlen(ep), 12, (i & 63) == 0);
            continue;
        }
        skyprof_span *s = skyprof_entry_begin(ep, NULL);
        skyprof_span_add_tag(s, "http.status_code", (i & 63) == 0 ? "503" : "200");
        skyprof_entry_end(s);
    }
    r->ns = (double)(cpu_ns() - t0) / (double)r->iters;
    return NULL;
}

static double measure(long iters, int mode, int n_threads)
{
    pthread_t t[4];
    struct run r[4];
    for (int i = 0; i < n_threads; i++) {
        r[i] = (struct run){.iters = iters, .mode = mode};
        pthread_create(&t[i], NULL, loop, &r[i]);
    }
    double sum = 0;
    for (int i = 0; i < n_threads; i++) {
        pthread_join(t[i], NULL);
        sum += r[i].ns;
    }
    return sum / n_threads;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 2000000;
    if (n <= 0)
        n = 2000000;
    struct skyprof_config cfg;
    skyprof_config_init_defaults(&cfg);
    snprintf(cfg.service, sizeof(cfg.service), "bench-cont");
    snprintf(cfg.backend, sizeof(cfg.backend), "127.0.0.1:1");
    cfg.report_segments = false;
    skyprof_agent *a = NULL;
    if (skyprof_agent_start(&cfg, NULL, &a) != SKP_OK) {
        fprintf(stderr, "bench_cont: agent start failed\n");
        return 1;
    }
    (void)measure(n / 10, 0, 1); /* warm-up: thread segment buffers, caches */
    printf("%-52s %10s %10s\n", "request path (thread CPU ns per request)", "1 thread",
           "4 threads");
    skp__cont_http_enable(false);
    double off1 = measure(n, 0, 1), off4 = measure(n, 0, 4);
    printf("%-52s %10.1f %10.1f\n", "no policy (counters off)", off1, off4);
    skp__cont_http_enable(true);
    double on1 = measure(n, 0, 1), on4 = measure(n, 0, 4);
    printf("%-52s %10.1f %10.1f\n", "policy with HTTP items (counters on)", on1, on4);
    printf("%-52s %10.1f %10.1f\n", "  difference: the check's cost per request", on1 - off1,
           on4 - off4);
    double rec1 = measure(n, 1, 1), rec4 = measure(n, 1, 4);
    printf("%-52s %10.1f %10.1f\n", "counter update alone (skp__cont_http_record)", rec1, rec4);
    skp__cont_http_enable(false);
    skyprof_agent_stop(a, 0);
    return 0;
}
