/* bench_continuous.c - what skyprofd's continuous-profiling evaluator costs (issue 11 target:
 * 1,000 endpoint policies against 20,000 segments/s take <= 10 % of one core). 1,000 services
 * each with a policy of two ENDPOINT_* items (AVG and P99 on one named endpoint, 10 s window,
 * like docs/continuous-profiling.md's example), fed simulated seconds of 20,000 requests (by
 * default) spread over the 1,000 services, each service's requests split between its policy's
 * endpoint and 4 endpoints no item names, with one evaluation (tick) per simulated second.
 * Measures this thread's CPU time for cont_eval_record + cont_eval_tick only, and prints ns per
 * request, the tick's cost, and the share of one core at the given rate.
 * Usage: bench_continuous [requests_per_s] [seconds] [policies] */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "server/continuous/continuous_eval.h"

static int64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t on_fire(void *ud, const struct cont_fire *f)
{
    (void)f;
    (*(long *)ud)++;
    return 0;
}

int main(int argc, char **argv)
{
    long rate = argc > 1 ? atol(argv[1]) : 20000;
    long seconds = argc > 2 ? atol(argv[2]) : 30;
    long n_pol = argc > 3 ? atol(argv[3]) : 1000;
    if (rate <= 0 || seconds <= 0 || n_pol <= 0 || n_pol > 100000) {
        fprintf(stderr, "usage: bench_continuous [requests_per_s] [seconds] [policies]\n");
        return 2;
    }
    struct cont_eval *e;
    if (cont_eval_new(NULL, &e) != SKP_OK)
        return 1;
    char (*svc)[32] = calloc((size_t)n_pol, sizeof(*svc));
    static char eps[5][32] = {"/checkout", "/items/{id}", "/cart", "/health", "/search"};
    for (long i = 0; i < n_pol; i++) {
        snprintf(svc[i], sizeof(svc[i]), "shop-svc-%ld", i);
        char js[512];
        snprintf(js, sizeof(js),
                 "{\"targets\":[{\"targetType\":\"TRACE\",\"checkItems\":["
                 "{\"type\":\"ENDPOINT_AVG_RESPONSE_TIME\",\"threshold\":\"200\",\"period\":10,"
                 "\"count\":3,\"uriList\":[\"/checkout\"]},"
                 "{\"type\":\"ENDPOINT_P99_RESPONSE_TIME\",\"threshold\":\"800\",\"period\":10,"
                 "\"count\":4,\"uriList\":[\"/checkout\"]}]}]}");
        json_t *in = json_loads(js, 0, NULL);
        struct cont_policy p;
        char reason[256];
        if (!in || cont_policy_from_input(svc[i], in, &p, reason, sizeof(reason)) != SKP_OK ||
            cont_eval_set_policy(e, &p) != SKP_OK) {
            fprintf(stderr, "policy refused: %s\n", reason);
            return 1;
        }
        json_decref(in);
    }
    long fired = 0;
    uint64_t rnd = 88172645463325252u;
    int64_t t0 = 1796000000000;
    int64_t rec_ns = 0, tick_ns = 0;
    long tracked = 0;
    for (long s = 0; s < seconds; s++) {
        int64_t c0 = cpu_ns();
        for (long r = 0; r < rate; r++) {
            rnd ^= rnd << 13;
            rnd ^= rnd >> 7;
            rnd ^= rnd << 17;
            long si = (long)(rnd % (uint64_t)n_pol);
            int ei = (int)((rnd >> 20) % 5);
            int64_t lat = 20 + (int64_t)((rnd >> 30) % 150);
            tracked += ei == 0;
            int64_t now = t0 + s * 1000 + r * 1000 / rate;
            cont_eval_record(e, svc[si], "inst-1", eps[ei], now - 400, lat, false, now);
        }
        int64_t c1 = cpu_ns();
        cont_eval_tick(e, t0 + (s + 1) * 1000, on_fire, &fired);
        int64_t c2 = cpu_ns();
        rec_ns += c1 - c0;
        tick_ns += c2 - c1;
    }
    struct cont_eval_counters c;
    cont_eval_counters(e, &c);
    double per_req = (double)rec_ns / ((double)rate * seconds);
    double per_tick = (double)tick_ns / seconds;
    double share = ((double)rec_ns + tick_ns) / (seconds * 1e9) * 100.0;
    printf("policies %ld (2 ENDPOINT items each), %ld requests/s for %ld s, %ld to a tracked "
           "endpoint, %zu series, %ld triggers\n",
           n_pol, rate, seconds, tracked, c.series, fired);
    printf("record: %.0f ns per request; tick (all policies): %.3f ms per second\n", per_req,
           per_tick / 1e6);
    printf("evaluator CPU: %.2f %% of one core at %ld requests/s (target <= 10 %%)\n", share,
           rate);
    cont_eval_free(e);
    free(svc);
    return 0;
}
