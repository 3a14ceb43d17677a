/* bench_continuous_cluster.c - what the continuous-profiling evaluator costs across 3 collectors
 * on one PostgreSQL database (issue 27): 1,000 services with bench_continuous's policy, 20,000
 * requests/s (by default) spread round-robin over 3 collectors (three cont_eval in merged mode,
 * each with its own store connection and cont_cluster), one tick per simulated second each:
 * store its shares, take or renew the lease, read every collector's shares, judge (holder) or
 * roll. Side by side in the same run: one evaluator alone receiving all the requests (SQLite
 * path, memory only). Prints per collector the wall time of a tick (the store statements
 * included: the loop is busy that long) and this thread's CPU, and the rows written and read.
 * Usage: bench_continuous_cluster POSTGRES_URL [requests_per_s] [seconds] [policies] */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "server/continuous/continuous_cluster.h"
#include "server/continuous/continuous_eval.h"

#define N_COLL 3

static int64_t clk_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t on_fire(void *ud, const struct cont_fire *f)
{
    (void)f;
    (*(long *)ud)++;
    return 0;
}

static int add_policies(struct cont_eval *e, char (*svc)[32], long n_pol)
{
    for (long i = 0; i < n_pol; i++) {
        const char *js = "{\"targets\":[{\"targetType\":\"TRACE\",\"checkItems\":["
                         "{\"type\":\"ENDPOINT_AVG_RESPONSE_TIME\",\"threshold\":\"200\","
                         "\"period\":10,\"count\":3,\"uriList\":[\"/checkout\"]},"
                         "{\"type\":\"ENDPOINT_P99_RESPONSE_TIME\",\"threshold\":\"800\","
                         "\"period\":10,\"count\":4,\"uriList\":[\"/checkout\"]}]}]}";
        json_t *in = json_loads(js, 0, NULL);
        struct cont_policy p;
        char reason[256] = "";
        if (!in || cont_policy_from_input(svc[i], in, &p, reason, sizeof(reason)) != SKP_OK ||
            cont_eval_set_policy(e, &p) != SKP_OK) {
            fprintf(stderr, "policy refused: %s\n", reason);
            return -1;
        }
        json_decref(in);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *url = argc > 1 ? argv[1] : NULL;
    long rate = argc > 2 ? atol(argv[2]) : 20000;
    long seconds = argc > 3 ? atol(argv[3]) : 30;
    long n_pol = argc > 4 ? atol(argv[4]) : 1000;
    if (!url || rate <= 0 || seconds <= 0 || n_pol <= 0 || n_pol > 100000) {
        fprintf(stderr, "usage: bench_continuous_cluster POSTGRES_URL [requests_per_s] "
                        "[seconds] [policies]\n");
        return 2;
    }
    char(*svc)[32] = calloc((size_t)n_pol, sizeof(*svc));
    for (long i = 0; i < n_pol; i++)
        snprintf(svc[i], sizeof(svc[i]), "shop-svc-%ld", i);
    static char eps[5][32] = {"/checkout", "/items/{id}", "/cart", "/health", "/search"};
    int64_t t0 = (int64_t)time(NULL) * 1000;

    struct cont_eval *alone, *e[N_COLL];
    struct store *st[N_COLL];
    struct cont_cluster *cc[N_COLL];
    struct cont_eval_opts mo = {.merged = true, .merge_delay_ms = 1000};
    if (cont_eval_new(NULL, &alone) != SKP_OK || add_policies(alone, svc, n_pol))
        return 1;
    for (int k = 0; k < N_COLL; k++) {
        if (store_open(url, NULL, &st[k]) != SKP_OK) {
            fprintf(stderr, "cannot open %s\n", url);
            return 1;
        }
        if (cont_eval_new(&mo, &e[k]) != SKP_OK || add_policies(e[k], svc, n_pol) ||
            cont_cluster_new(st[k], 1000, t0, &cc[k]) != SKP_OK)
            return 1;
    }
    long fired_alone = 0, fired = 0;
    uint64_t rnd = 88172645463325252u;
    int64_t alone_ns = 0, rec_ns[N_COLL] = {0}, tick_wall[N_COLL] = {0}, tick_cpu[N_COLL] = {0};
    int64_t tick_max[N_COLL] = {0};
    for (long s = 0; s < seconds; s++) {
        for (long r = 0; r < rate; r++) {
            rnd ^= rnd << 13;
            rnd ^= rnd >> 7;
            rnd ^= rnd << 17;
            long si = (long)(rnd % (uint64_t)n_pol);
            int ei = (int)((rnd >> 20) % 5);
            int64_t lat = 20 + (int64_t)((rnd >> 30) % 150);
            int64_t now = t0 + s * 1000 + r * 1000 / rate;
            int64_t c0 = clk_ns(CLOCK_THREAD_CPUTIME_ID);
            cont_eval_record(alone, svc[si], "inst-1", eps[ei], now - 400, lat, false, now);
            int64_t c1 = clk_ns(CLOCK_THREAD_CPUTIME_ID);
            int k = (int)(r % N_COLL);
            cont_eval_record(e[k], svc[si], "inst-1", eps[ei], now - 400, lat, false, now);
            alone_ns += c1 - c0;
            rec_ns[k] += clk_ns(CLOCK_THREAD_CPUTIME_ID) - c1;
        }
        int64_t now = t0 + (s + 1) * 1000;
        int64_t c0 = clk_ns(CLOCK_THREAD_CPUTIME_ID);
        cont_eval_tick(alone, now, on_fire, &fired_alone);
        alone_ns += clk_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
        for (int k = 0; k < N_COLL; k++) {
            int64_t w0 = clk_ns(CLOCK_MONOTONIC), u0 = clk_ns(CLOCK_THREAD_CPUTIME_ID);
            bool judge = false;
            cont_cluster_tick(cc[k], e[k], now, &judge);
            if (judge)
                cont_eval_tick(e[k], now, on_fire, &fired);
            else
                cont_eval_roll(e[k], now);
            int64_t w = clk_ns(CLOCK_MONOTONIC) - w0;
            tick_wall[k] += w;
            tick_max[k] = w > tick_max[k] ? w : tick_max[k];
            tick_cpu[k] += clk_ns(CLOCK_THREAD_CPUTIME_ID) - u0;
        }
    }
    printf("%ld services (2 ENDPOINT items each), %ld requests/s for %ld simulated s\n", n_pol,
           rate, seconds);
    printf("alone (one evaluator, all requests, memory only): %.2f %% of one core, %ld triggers\n",
           alone_ns / (seconds * 1e9) * 100.0, fired_alone);
    for (int k = 0; k < N_COLL; k++) {
        struct cont_cluster_counters c;
        cont_cluster_counters(cc[k], &c);
        printf("collector %d%s: record %.2f %% of a core; tick wall %.1f ms mean, %.1f ms max "
               "(its CPU %.1f ms); shares written %.0f/s, read %.0f/s; %" PRIu64 " errors\n",
               k + 1, c.held ? " (lease)" : "", rec_ns[k] / (seconds * 1e9) * 100.0,
               tick_wall[k] / 1e6 / seconds, tick_max[k] / 1e6, tick_cpu[k] / 1e6 / seconds,
               (double)c.shares_written / seconds, (double)c.shares_read / seconds, c.errors);
    }
    printf("cluster triggers: %ld\n", fired);
    for (int k = 0; k < N_COLL; k++) {
        cont_cluster_free(cc[k]);
        cont_eval_free(e[k]);
        store_close(st[k]);
    }
    cont_eval_free(alone);
    free(svc);
    return 0;
}
