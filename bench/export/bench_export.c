/* bench_export.c - rendering speed and output size of each export format (export.h) on
 * synthetic analyses of 1k, 10k and 100k nodes (random trees up to 60 deep, 2000 distinct
 * Python-style code signatures), printed side by side with the API's JSON (the baseline every
 * request pays). Best of 5 runs. Never run by ctest; use a Release build. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "server/export/export.h"

#define BENCH_SIGS 2000
#define BENCH_MAX_DEPTH 60
#define BENCH_RUNS 5

static char g_sigs[BENCH_SIGS][64];

/* A random tree in BFS-compatible order (parents before children). */
static struct analysis *make_analysis(size_t n, unsigned seed)
{
    struct analysis *a = skpx_xcalloc(1, sizeof(*a));
    a->trees = skpx_xcalloc(1, sizeof(*a->trees));
    a->n_trees = 1;
    struct analysis_node *nodes = skpx_xcalloc(n, sizeof(*nodes));
    int *depth = skpx_xcalloc(n, sizeof(*depth));
    uint32_t *last_child = skpx_xcalloc(n, sizeof(*last_child));
    srand(seed);
    for (size_t i = 0; i < n; i++) {
        nodes[i].id = (uint32_t)i + 1;
        nodes[i].first_child = nodes[i].next_sibling = UINT32_MAX;
        last_child[i] = UINT32_MAX;
        nodes[i].code_signature = g_sigs[(size_t)rand() % BENCH_SIGS];
        if (i == 0)
            continue;
        size_t p;
        do
            p = (size_t)rand() % i;
        while (depth[p] >= BENCH_MAX_DEPTH);
        depth[i] = depth[p] + 1;
        nodes[i].parent_id = (uint32_t)p + 1;
        if (last_child[p] == UINT32_MAX)
            nodes[p].first_child = (uint32_t)i;
        else
            nodes[last_child[p]].next_sibling = (uint32_t)i;
        last_child[p] = (uint32_t)i;
    }
    /* Counts bottom-up: self 0..3 snapshots per node, duration 10 ms per count. */
    for (size_t i = n; i-- > 0;) {
        nodes[i].count += (uint64_t)(rand() % 4);
        if (nodes[i].count == 0 && nodes[i].first_child == UINT32_MAX)
            nodes[i].count = 1;
        nodes[i].duration = (int64_t)nodes[i].count * 10;
        if (i > 0)
            nodes[nodes[i].parent_id - 1].count += nodes[i].count;
    }
    a->n_snapshots = nodes[0].count;
    a->trees[0].nodes = nodes;
    a->trees[0].n_nodes = n;
    skpx_free(depth);
    skpx_free(last_child);
    return a;
}

static void free_analysis(struct analysis *a)
{
    skpx_free(a->trees[0].nodes);
    skpx_free(a->trees);
    skpx_free(a);
}

int main(void)
{
    static const size_t sizes[] = {1000, 10000, 100000};
    static const struct {
        enum export_format f;
        const char *name;
    } formats[] = {{EXPORT_JSON, "json (API)"}, {EXPORT_COLLAPSED, "collapsed"},
                   {EXPORT_PPROF, "pprof"}, {EXPORT_SPEEDSCOPE, "speedscope"},
                   {EXPORT_HTML, "html"}};
    for (int i = 0; i < BENCH_SIGS; i++)
        snprintf(g_sigs[i], sizeof(g_sigs[i]), "/srv/app/module_%d.py.function_%d: %d", i % 97, i,
                 10 + i % 400);
    struct export_meta meta = {.title = "bench", .task_id = "t", .segment_id = "s",
                               .trace_id = "tr", .endpoint = "/bench", .dump_period_ms = 10};
    printf("%-8s %-12s %12s %14s %12s %10s\n", "nodes", "format", "best ms", "output bytes",
           "bytes/node", "x json");
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
        struct analysis *a = make_analysis(sizes[si], 42);
        double json_ms = 0;
        for (size_t fi = 0; fi < sizeof(formats) / sizeof(formats[0]); fi++) {
            double best = 1e30;
            size_t len = 0;
            for (int r = 0; r < BENCH_RUNS; r++) {
                uint8_t *out = NULL;
                int64_t t0 = skpx_mono_ns();
                skp_err err = export_render(a, formats[fi].f, &meta, &out, &len);
                double ms = (double)(skpx_mono_ns() - t0) / 1e6;
                if (err) {
                    fprintf(stderr, "render failed: %s\n", skp_strerror(err));
                    return 1;
                }
                skpx_free(out);
                if (ms < best)
                    best = ms;
            }
            if (formats[fi].f == EXPORT_JSON)
                json_ms = best;
            printf("%-8zu %-12s %12.2f %14zu %12.1f %10.2f\n", sizes[si], formats[fi].name, best,
                   len, (double)len / (double)sizes[si], json_ms > 0 ? best / json_ms : 0);
        }
        free_analysis(a);
    }
    return 0;
}
