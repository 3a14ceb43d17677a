/* bench_jfr - parses and analyses a JFR file the way skyprofd's analysis does
 * (jfr_analyze_file, one event kind), and prints wall time, peak RSS against the file size
 * and the heaviest frames. Target (issue 13): a 30 MiB recording in <= 1 s with peak memory
 * <= 3x the file size. With "mem" the file is read into memory first and parsed from there,
 * as skyprofd does with a stored upload (the buffer counts in the peak).
 * Usage: bench_jfr FILE [kind] [repeat] [mem] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "common/alloc.h"
#include "server/analysis/jfr_tree.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long rss_kib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, field, n) == 0)
            v = strtol(line + n, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_jfr FILE [kind] [repeat]\n");
        return 2;
    }
    struct jfr_analyze_opts o = {.kind = JFR_KIND_EXECUTION};
    if (argc > 2 && jfr_kind_parse(argv[2], &o.kind)) {
        fprintf(stderr, "unknown kind %s\n", argv[2]);
        return 2;
    }
    int repeat = argc > 3 ? atoi(argv[3]) : 3;
    bool mem = argc > 4 && strcmp(argv[4], "mem") == 0;
    struct stat st;
    if (stat(argv[1], &st) != 0) {
        perror(argv[1]);
        return 1;
    }
    long rss0 = rss_kib("VmRSS:");
    uint8_t *buf = NULL;
    size_t len = 0;
    if (mem) {
        FILE *f = fopen(argv[1], "rb");
        buf = f ? skpx_malloc((size_t)st.st_size + 1) : NULL;
        len = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
        if (f)
            fclose(f);
        if (!buf || len != (size_t)st.st_size) {
            fprintf(stderr, "cannot read %s\n", argv[1]);
            return 1;
        }
    }
    double best = 1e9;
    for (int r = 0; r < repeat; r++) {
        struct analysis *a = NULL;
        struct jfr_summary sum;
        struct jfr_error err;
        double t0 = now_s();
        skp_err e = mem ? jfr_analyze_mem(buf, len, &o, &a, &sum, &err)
                        : jfr_analyze_file(argv[1], &o, &a, &sum, &err);
        double t = now_s() - t0;
        if (e) {
            fprintf(stderr, "error %d: %s\n", (int)e, err.msg);
            return 1;
        }
        if (t < best)
            best = t;
        if (r == repeat - 1) {
            printf("file: %s, %.1f MiB, %u chunks\n", argv[1], (double)st.st_size / 1048576.0,
                   sum.n_chunks);
            for (int k = 0; k < JFR_KIND_COUNT; k++)
                printf("  %-9s events %10llu  weight %llu\n", jfr_kind_name((enum jfr_kind)k),
                       (unsigned long long)sum.n_events[k], (unsigned long long)sum.weight[k]);
            size_t nodes = 0;
            for (size_t i = 0; i < a->n_trees; i++)
                nodes += a->trees[i].n_nodes;
            printf("  %s tree: %zu trees, %zu nodes, %zu threads\n", jfr_kind_name(o.kind),
                   a->n_trees, nodes, sum.n_threads);
            for (size_t i = 0; i < a->n_trees && i < 3; i++)
                printf("    root %s  %llu %s\n", a->trees[i].nodes[0].code_signature,
                       (unsigned long long)a->trees[i].nodes[0].count, sum.unit);
        }
        jfr_summary_cleanup(&sum);
        analysis_free(a);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double peak_mib = (double)ru.ru_maxrss / 1024.0;
    double file_mib = (double)st.st_size / 1048576.0;
    skpx_free(buf);
    printf("parse+analyse (%s): best of %d %.3f s (target <= 1 s)\n",
           mem ? "from memory" : "file, chunk by chunk", repeat, best);
    printf("peak RSS %.1f MiB (process start %.1f MiB) = %.2fx file size (target <= 3x)\n",
           peak_mib, (double)rss0 / 1024.0, peak_mib / file_mib);
    return 0;
}
