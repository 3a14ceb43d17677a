/* bench_pprof - decodes and analyses a pprof profile as skyprofd's pprof analysis does
 * (pprof_decode + pprof_analyze for one sample type, by line), and prints wall time per phase,
 * peak RSS, and the profile's size figures. Target (issue 10): a 30 MiB pprof in <= 1 s.
 * Without a file it builds a synthetic CPU-style profile (20,000 functions, 80,000 locations,
 * 100,000 distinct call paths 8-48 frames deep drawn with a skew, two sample types, a thread
 * label per sample) and grows it until its gzip size reaches --mib (--save F keeps it in F).
 * Usage: bench_pprof [--mib N] [--repeat N] [--save F] [FILE] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <zlib.h>

#include "common/alloc.h"
#include "server/analysis/analyzer.h"
#include "server/analysis/pprof_analyze.h"
#include "server/formats/pprof_decode.h"

#define N_FUNCS 20000
#define N_THREADS 64
#define N_STACKS 100000

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU time of this process: the figure that does not depend on the other processes of a
 * loaded machine (wall time is printed beside it). */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long peak_rss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* ---- a tiny protobuf writer ---- */
struct wbuf {
    uint8_t *p;
    size_t len, cap;
};

static void put(struct wbuf *b, const void *d, size_t n)
{
    if (b->len + n > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 1 << 16;
        while (nc < b->len + n)
            nc *= 2;
        b->p = realloc(b->p, nc);
        if (!b->p) {
            perror("realloc");
            exit(1);
        }
        b->cap = nc;
    }
    memcpy(b->p + b->len, d, n);
    b->len += n;
}

static void varint(struct wbuf *b, uint64_t v)
{
    uint8_t t[10];
    size_t n = 0;
    do {
        t[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            t[n] |= 0x80;
        n++;
    } while (v);
    put(b, t, n);
}

static void f_varint(struct wbuf *b, uint32_t field, uint64_t v)
{
    varint(b, (uint64_t)field << 3);
    varint(b, v);
}

static void f_bytes(struct wbuf *b, uint32_t field, const void *d, size_t n)
{
    varint(b, ((uint64_t)field << 3) | 2);
    varint(b, n);
    put(b, d, n);
}

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Streams `raw` through deflate into `out`; returns compressed bytes so far. */
static size_t gz_feed(z_stream *z, struct wbuf *out, const uint8_t *d, size_t n, int flush)
{
    uint8_t tmp[1 << 16];
    z->next_in = (Bytef *)d;
    z->avail_in = (uInt)n;
    do {
        z->next_out = tmp;
        z->avail_out = sizeof(tmp);
        deflate(z, flush);
        put(out, tmp, sizeof(tmp) - z->avail_out);
    } while (z->avail_out == 0 || (flush == Z_FINISH && z->avail_in));
    return out->len;
}

static void build_synthetic(size_t target, struct wbuf *gz, size_t *raw_len, size_t *n_samples)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    struct wbuf m = {0}, sub = {0}, packed = {0};
    size_t raw = 0;
    /* strings: "", types, units, thread names, function names, files */
    const char *fixed[] = {"", "samples", "count", "cpu", "nanoseconds", "thread"};
    for (size_t i = 0; i < 6; i++)
        f_bytes(&m, 6, fixed[i], strlen(fixed[i]));
    char s[128];
    for (int i = 0; i < N_THREADS; i++) {
        int k = snprintf(s, sizeof(s), "worker-%d", i);
        f_bytes(&m, 6, s, (size_t)k);
    }
    size_t fn_base = 6 + N_THREADS;
    for (int i = 0; i < N_FUNCS; i++) {
        int k = snprintf(s, sizeof(s), "github.com/acme/service/pkg%d.(*Handler%d).Method%d", i % 97,
                         i % 13, i);
        f_bytes(&m, 6, s, (size_t)k);
    }
    for (int i = 0; i < 200; i++) {
        int k = snprintf(s, sizeof(s), "/src/acme/service/pkg%d/file%d.go", i % 97, i);
        f_bytes(&m, 6, s, (size_t)k);
    }
    size_t file_base = fn_base + N_FUNCS;
    /* sample types, period */
    sub.len = 0; f_varint(&sub, 1, 1); f_varint(&sub, 2, 2); f_bytes(&m, 1, sub.p, sub.len);
    sub.len = 0; f_varint(&sub, 1, 3); f_varint(&sub, 2, 4); f_bytes(&m, 1, sub.p, sub.len);
    sub.len = 0; f_varint(&sub, 1, 3); f_varint(&sub, 2, 4); f_bytes(&m, 11, sub.p, sub.len);
    f_varint(&m, 12, 10000000);
    /* functions 1..N and one location per (function, line variant): ids = f*4 + v + 1 */
    for (int i = 0; i < N_FUNCS; i++) {
        sub.len = 0;
        f_varint(&sub, 1, (uint64_t)i + 1);
        f_varint(&sub, 2, fn_base + (size_t)i);
        f_varint(&sub, 4, file_base + (size_t)(i % 200));
        f_varint(&sub, 5, 10 + (uint64_t)(i % 400));
        f_bytes(&m, 5, sub.p, sub.len);
        for (int v = 0; v < 4; v++) {
            struct wbuf line = {0};
            f_varint(&line, 1, (uint64_t)i + 1);
            f_varint(&line, 2, 20 + (uint64_t)(i % 400) + (uint64_t)v * 7);
            sub.len = 0;
            f_varint(&sub, 1, (uint64_t)i * 4 + (uint64_t)v + 1);
            f_varint(&sub, 3, 0x400000 + (uint64_t)i * 64 + (uint64_t)v);
            f_bytes(&sub, 4, line.p, line.len);
            free(line.p);
            f_bytes(&m, 4, sub.p, sub.len);
        }
    }
    raw += m.len;
    gz_feed(&z, gz, m.p, m.len, Z_NO_FLUSH);
    /* N_STACKS distinct call paths (walks down a call graph of fan-out 8, 8-48 frames), then
     * samples drawing a path with a skew (half of them from the first 1/16 of the paths), a
     * count, a cpu value and a thread label, as a Go profile with labels looks. */
    uint32_t(*stacks)[48] = malloc(sizeof(*stacks) * N_STACKS);
    uint8_t *depths = malloc(N_STACKS);
    if (!stacks || !depths) {
        perror("malloc");
        exit(1);
    }
    for (int k = 0; k < N_STACKS; k++) {
        int depth = 8 + (int)(rnd() % 41);
        uint32_t f = (uint32_t)(rnd() % 16);
        for (int d = 0; d < depth; d++) {
            stacks[k][d] = f * 4 + (uint32_t)(rnd() % 4) + 1;
            f = (uint32_t)((f * 8 + 1 + rnd() % 8) % N_FUNCS);
        }
        depths[k] = (uint8_t)depth;
    }
    size_t n = 0;
    while (gz->len < target) {
        m.len = 0;
        for (int k = 0; k < 1000; k++) {
            uint64_t r = rnd();
            int si = (int)((r & 1) ? (r >> 1) % (N_STACKS / 16) : (r >> 1) % N_STACKS);
            packed.len = 0;
            for (int d = depths[si]; d-- > 0;)
                varint(&packed, stacks[si][d]); /* leaf first */
            sub.len = 0;
            f_bytes(&sub, 1, packed.p, packed.len);
            uint64_t cnt = 1 + rnd() % 3;
            packed.len = 0;
            varint(&packed, cnt);
            varint(&packed, cnt * 10000000);
            f_bytes(&sub, 2, packed.p, packed.len);
            struct wbuf lb = {0};
            f_varint(&lb, 1, 5);
            f_varint(&lb, 2, 6 + rnd() % N_THREADS);
            f_bytes(&sub, 3, lb.p, lb.len);
            free(lb.p);
            f_bytes(&m, 2, sub.p, sub.len);
            n++;
        }
        raw += m.len;
        gz_feed(&z, gz, m.p, m.len, Z_NO_FLUSH);
    }
    free(stacks);
    free(depths);
    gz_feed(&z, gz, NULL, 0, Z_FINISH);
    deflateEnd(&z);
    free(m.p);
    free(sub.p);
    free(packed.p);
    *raw_len = raw;
    *n_samples = n;
}

int main(int argc, char **argv)
{
    double mib = 30;
    int repeat = 3;
    const char *file = NULL, *save = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--save") && i + 1 < argc)
            save = argv[++i];
        else if (!strcmp(argv[i], "--mib") && i + 1 < argc)
            mib = atof(argv[++i]);
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else
            file = argv[i];
    }
    struct wbuf in = {0};
    size_t raw_len = 0, n_gen = 0;
    if (file) {
        FILE *f = fopen(file, "rb");
        if (!f) {
            perror(file);
            return 1;
        }
        uint8_t tmp[1 << 16];
        size_t k;
        while ((k = fread(tmp, 1, sizeof(tmp), f)) > 0)
            put(&in, tmp, k);
        fclose(f);
    } else {
        double t0 = now_s();
        build_synthetic((size_t)(mib * 1024 * 1024), &in, &raw_len, &n_gen);
        printf("synthetic profile: %.1f MiB gzip, %.1f MiB raw, %zu samples, %d functions "
               "(built in %.2f s)\n",
               (double)in.len / 1048576.0, (double)raw_len / 1048576.0, n_gen, N_FUNCS,
               now_s() - t0);
        FILE *f = save ? fopen(save, "wb") : NULL;
        if (save && (!f || fwrite(in.p, 1, in.len, f) != in.len || fclose(f) != 0)) {
            perror(save);
            return 1;
        }
    }
    long rss_before = peak_rss_kib();
    double best = 1e9;
    for (int r = 0; r < repeat; r++) {
        double t0 = now_s(), c0 = cpu_s();
        struct pprof_profile *p = NULL;
        char why[PPROF_ERR_MAX];
        if (pprof_decode(in.p, in.len, 0, &p, why) != SKP_OK) {
            fprintf(stderr, "decode failed: %s\n", why);
            return 1;
        }
        double c1 = cpu_s();
        struct pprof_analyze *an = NULL;
        struct analysis *a = NULL;
        if (pprof_analyze_new(NULL, false, &an) != SKP_OK || pprof_analyze_add(an, p) != SKP_OK ||
            pprof_analyze_finish(an, &a) != SKP_OK) {
            fprintf(stderr, "analysis failed\n");
            return 1;
        }
        double t2 = now_s(), c2 = cpu_s();
        size_t nodes = 0;
        for (size_t t = 0; t < a->n_trees; t++)
            nodes += a->trees[t].n_nodes;
        int64_t total = 0;
        uint64_t ns = 0;
        size_t skipped = 0;
        pprof_analyze_totals(an, &total, &ns, &skipped);
        printf("run %d: CPU decode %.3f s + analyse %.3f s = %.3f s (wall %.3f s)  (%zu samples, "
               "%zu locations, %zu trees, %zu nodes, type %s/%s, total %lld)\n",
               r + 1, c1 - c0, c2 - c1, c2 - c0, t2 - t0, p->n_samples, p->n_locations, a->n_trees, nodes,
               pprof_analyze_type(an), pprof_analyze_unit(an), (long long)total);
        if (c2 - c0 < best)
            best = c2 - c0;
        analysis_free(a);
        pprof_analyze_free(an);
        pprof_free(p);
    }
    long rss = peak_rss_kib();
    printf("\npprof %.1f MiB: best decode+analyse %.3f s CPU (target <= 1 s: %s); peak RSS %.1f MiB "
           "(%.1f MiB before the runs: the input)\n",
           (double)in.len / 1048576.0, best, best <= 1.0 ? "met" : "NOT met", rss / 1024.0,
           rss_before / 1024.0);
    free(in.p);
    return 0;
}
