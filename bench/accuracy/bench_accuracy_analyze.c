/* bench_accuracy_analyze.c - the old and the new trace analysis of the same stored dumps, for
 * bench_accuracy.py. Usage: bench_accuracy_analyze DB SEGMENT_ID...
 * Opens the SQLite store DB and prints, per segment, one JSON line
 *   {"segment": ID, "old_lines": A, "new_lines": A, "old_functions": A, "new_functions": A}
 * where each A is the API's analysis ({tip, trees}) of the segment over its spans' window (the
 * web UI's default, GET .../analyze?window=span; the whole life when its spans are unknown),
 * with OAP's run estimate (old, ANALYZE_EST_OAP_RUNS) and the per-interval one (new), at line
 * and at function granularity. Exit 1 on any error.
 *
 * bench_accuracy_analyze --speed DIR [SEGMENTS]: what the new estimate costs. Writes a synthetic
 * task into DIR/bench_accuracy.db (SEGMENTS segments of 1000 dumps, default 1000, plus one
 * segment of 12,000; 20-frame stacks from 200, a new stack on 30 % of the dumps) and times
 * analyze_task and analyze_segments with each estimator, alternating, 5 rounds: median CPU
 * time of the process per call (CLOCK_PROCESS_CPUTIME_ID, which load from other processes does
 * not inflate the way it inflates wall time). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/analysis/analyzer.h"
#include "server/store/store.h"

static skp_err analyze_one(struct store *st, const char *seg, const struct analyze_opts *o,
                           json_t **out)
{
    struct store_segment_info info = {0};
    skp_err err = store_get_segment_info(st, seg, &info);
    struct analyze_query q = {.segment_id = seg, .start_ms = info.start_ms, .end_ms = info.end_ms};
    bool window = !err && info.has_window;
    store_segment_info_cleanup(&info);
    if (err && err != SKP_ENOTFOUND)
        return err;
    struct analysis *a = NULL;
    err = window ? analyze_segments(st, &q, 1, o, &a) : analyze_segment_all(st, seg, o, &a);
    if (err)
        return err;
    *out = analysis_to_json(a);
    analysis_free(a);
    return *out ? SKP_OK : SKP_ENOMEM;
}

/* ---- --speed ---- */
#define SP_DEPTH 20
#define SP_STACKS 200
#define SP_SEG_LEN 1000
#define SP_BIG 12000

static double cpu_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static skp_err speed_fill(struct store *st, long n_segments)
{
    static char names[SP_STACKS][SP_DEPTH][48];
    static char *stacks[SP_STACKS][SP_DEPTH];
    static struct store_snapshot b[1000];
    srand(7);
    for (int k = 0; k < SP_STACKS; k++)
        for (int d = 0; d < SP_DEPTH; d++) {
            snprintf(names[k][d], sizeof(names[k][d]), "/srv/app/mod%d.py.f%d: %d", d,
                     d < 10 ? d : rand() % 30, rand() % 200);
            stacks[k][d] = names[k][d];
        }
    for (long g = 0; g <= n_segments; g++) {
        char seg[64];
        int len = g == n_segments ? SP_BIG : SP_SEG_LEN;
        snprintf(seg, sizeof(seg), g == n_segments ? "big-segment" : "seg-%ld", g);
        int cur = rand() % SP_STACKS;
        for (int q = 0; q < len;) {
            size_t nb = 0;
            for (; nb < 1000 && q < len; nb++, q++) {
                if (rand() % 10 >= 7)
                    cur = rand() % SP_STACKS;
                b[nb] = (struct store_snapshot){.task_id = g == n_segments ? "big-task" : "task",
                                                .segment_id = seg,
                                                .time_ms = 1700000000000LL + g * 100000LL +
                                                           q * 10LL + rand() % 3,
                                                .sequence = q,
                                                .frames = stacks[cur],
                                                .n_frames = SP_DEPTH};
            }
            skp_err err = store_insert_snapshots(st, b, nb, NULL);
            if (err)
                return err;
        }
    }
    return SKP_OK;
}

static int speed(const char *dir, long n_segments)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/bench_accuracy.db", dir);
    remove(path);
    struct store *st = NULL;
    if (store_open(path, NULL, &st) || speed_fill(st, n_segments)) {
        fprintf(stderr, "cannot write %s\n", path);
        store_close(st);
        return 1;
    }
    enum { ROUNDS = 5 };
    double t[2][2][ROUNDS]; /* [task|segment][old|new][round] */
    struct analyze_query q = {"big-segment", 0, INT64_MAX / 4};
    for (int r = 0; r < ROUNDS; r++)
        for (int e = 0; e < 2; e++) {
            struct analyze_opts o = {.estimator = e ? ANALYZE_EST_INTERVALS : ANALYZE_EST_OAP_RUNS};
            struct analysis *a = NULL;
            double t0 = cpu_ms();
            skp_err err = analyze_task(st, "task", &o, &a);
            double t1 = cpu_ms();
            analysis_free(a);
            a = NULL;
            if (!err)
                err = analyze_segments(st, &q, 1, &o, &a);
            double t2 = cpu_ms();
            analysis_free(a);
            if (err) {
                fprintf(stderr, "analysis failed: %s\n", skp_strerror(err));
                store_close(st);
                return 1;
            }
            t[0][e][r] = t1 - t0;
            t[1][e][r] = t2 - t1;
        }
    store_close(st);
    remove(path);
    printf("analysis CPU time, median of %d alternating rounds (old = OAP runs, new = intervals)\n",
           ROUNDS);
    static const char *const what[2] = {"analyze_task", "analyze_segments"};
    for (int w = 0; w < 2; w++) {
        qsort(t[w][0], ROUNDS, sizeof(double), cmp_double);
        qsort(t[w][1], ROUNDS, sizeof(double), cmp_double);
        printf("  %-16s %-26s old %8.2f ms   new %8.2f ms\n", what[w],
               w ? "1 segment x 12,000 dumps" : "all segments x 1000 dumps", t[w][0][ROUNDS / 2],
               t[w][1][ROUNDS / 2]);
    }
    printf("  (%ld segments of %d dumps; 20-frame stacks)\n", n_segments, SP_SEG_LEN);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "--speed") == 0)
        return speed(argv[2], argc > 3 ? atol(argv[3]) : 1000);
    if (argc < 3) {
        fprintf(stderr, "usage: %s DB SEGMENT_ID... | --speed DIR [SEGMENTS]\n", argv[0]);
        return 2;
    }
    struct store *st = NULL; /* read-write: a store of an older schema is migrated first */
    if (store_open(argv[1], NULL, &st)) {
        fprintf(stderr, "cannot open %s\n", argv[1]);
        return 1;
    }
    static const char *const names[] = {"old_lines", "new_lines", "old_functions", "new_functions"};
    int rc = 0;
    for (int i = 2; i < argc && !rc; i++) {
        json_t *line = json_pack("{s:s}", "segment", argv[i]);
        for (int k = 0; k < 4 && line && !rc; k++) {
            struct analyze_opts o = {.by_function = k >= 2,
                                     .estimator =
                                         k % 2 == 0 ? ANALYZE_EST_OAP_RUNS : ANALYZE_EST_INTERVALS};
            json_t *a = NULL;
            skp_err err = analyze_one(st, argv[i], &o, &a);
            if (err || json_object_set_new(line, names[k], a) != 0) {
                fprintf(stderr, "%s: analysis failed: %s\n", argv[i], skp_strerror(err));
                rc = 1;
            }
        }
        if (!line || rc) {
            rc = 1;
        } else {
            json_dumpf(line, stdout, JSON_COMPACT);
            fputc('\n', stdout);
        }
        json_decref(line);
    }
    store_close(st);
    return rc;
}
