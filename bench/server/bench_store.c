/* bench_store.c - storage and analysis benchmarks for skyprofd's store (SQLite) and analyzer.
 *
 *   bench_store [dir|url] [n_snapshots]  (defaults: $TMPDIR or /tmp, 1000000)
 *
 * With a postgresql:// URL (an empty database) the same workload runs on the PostgreSQL
 * backend; bytes on disk are then the database's size (pg_database_size, store stats).
 *
 * Workload: 500 distinct frames (Java/Python-like signatures), 200 distinct 20-frame stacks
 * sharing framework prefixes; one task, ~1000 segments of 1000 dumps each (10 ms apart), 5
 * segments sampled concurrently and interleaved as an agent's reporter sends them, batches of
 * 500 snapshots (one transaction each, as the collector does per stream). Each dump keeps the
 * previous stack of its segment with probability 0.7 (a request stays in the same code for a
 * while). Prints ingest throughput, commit latency, bytes per snapshot on disk (next to a naive
 * OAP-like row with the serialized stack per snapshot), and analysis times next to targets. */
#include <inttypes.h>
#include <stdbool.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "server/analysis/analyzer.h"
#include "server/store/store.h"

#define N_FRAMES 500
#define N_STACKS 200
#define DEPTH 20
#define BATCH 500
#define SEG_LEN 1000
#define CONCURRENT 5
#define BIG_SEGMENT 12000
#define NAIVE_ROWS 100000

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(uint32_t n)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng % n);
}

static char g_frame_text[N_FRAMES][96];
static char *g_stacks[N_STACKS][DEPTH];

static void build_workload(void)
{
    static const char *const pkgs[] = {"org.springframework.web.servlet", "com.acme.orders",
                                       "com.acme.orders.repo", "java.util.concurrent",
                                       "org.hibernate.internal", "app/handlers.py",
                                       "app/models.py", "site-packages/sqlalchemy/orm.py"};
    for (int i = 0; i < N_FRAMES; i++)
        snprintf(g_frame_text[i], sizeof(g_frame_text[i]), "%s.Class%d.method%d(File%d.java:%d)",
                 pkgs[i % 8], i / 8, i % 13, i / 4, 10 + i * 7 % 400);
    /* stacks: 6-frame framework prefix chosen from 4 variants, then 14 frames walking the
     * frame pool so neighbouring stacks share prefixes */
    for (int s = 0; s < N_STACKS; s++) {
        int variant = s % 4;
        for (int d = 0; d < 6; d++)
            g_stacks[s][d] = g_frame_text[variant * 6 + d];
        uint32_t f = 24 + rnd(N_FRAMES - 24);
        for (int d = 6; d < DEPTH; d++) {
            g_stacks[s][d] = g_frame_text[f];
            f = 24 + (f + 1 + rnd(40)) % (N_FRAMES - 24);
        }
    }
}

static double median(double *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return v[n / 2];
}

static uint64_t file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

static void remove_db(const char *path)
{
    char p[1100];
    const char *suffix[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof(p), "%s%s", path, suffix[i]);
        unlink(p);
    }
}

static void die(const char *what, skp_err err)
{
    fprintf(stderr, "bench_store: %s: %s\n", what, skp_strerror(err));
    exit(1);
}

/* Naive OAP-like layout for comparison: text ids and the serialized stack in every row. */
static double naive_bytes_per_row(const char *dir)
{
    char path[1100];
    snprintf(path, sizeof(path), "%s/bench_naive.db", dir);
    remove_db(path);
    sqlite3 *db = NULL;
    if (sqlite3_open(path, &db) != SQLITE_OK)
        return 0;
    sqlite3_exec(db,
                 "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                 "CREATE TABLE snap(id TEXT PRIMARY KEY, task_id TEXT, segment_id TEXT, "
                 "sequence INTEGER, dump_time INTEGER, stack_binary BLOB);"
                 "CREATE INDEX snap_ts ON snap(task_id, segment_id);"
                 "CREATE INDEX snap_ss ON snap(segment_id, sequence);"
                 "CREATE INDEX snap_st ON snap(segment_id, dump_time);",
                 NULL, NULL, NULL);
    sqlite3_stmt *s = NULL;
    sqlite3_prepare_v2(db, "INSERT INTO snap VALUES(?,?,?,?,?,?)", -1, &s, NULL);
    char blob[DEPTH * 100];
    for (int i = 0; i < NAIVE_ROWS; i++) {
        if (i % BATCH == 0)
            sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
        char seg[64], id[128];
        snprintf(seg, sizeof(seg), "a1b2c3d4e5f60718293a4b5c6d7e8f90.%d.%d", 42, i / SEG_LEN);
        snprintf(id, sizeof(id), "1733130000000_c3Zj.1_%s_%d", seg, i % SEG_LEN);
        size_t len = 0;
        const int st = (int)rnd(N_STACKS);
        for (int d = 0; d < DEPTH; d++) {
            /* protobuf: field 1, length-delimited string */
            size_t fl = strlen(g_stacks[st][d]);
            blob[len++] = 0x0a;
            blob[len++] = (char)fl;
            memcpy(blob + len, g_stacks[st][d], fl);
            len += fl;
        }
        sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, "1733130000000_c3Zj.1", -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 3, seg, -1, SQLITE_STATIC);
        sqlite3_bind_int(s, 4, i % SEG_LEN);
        sqlite3_bind_int64(s, 5, 1733130000000LL + i * 10LL);
        sqlite3_bind_blob(s, 6, blob, (int)len, SQLITE_STATIC);
        sqlite3_step(s);
        sqlite3_reset(s);
        if (i % BATCH == BATCH - 1)
            sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    }
    sqlite3_finalize(s);
    sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
    sqlite3_close(db);
    double b = (double)file_size(path) / NAIVE_ROWS;
    remove_db(path);
    return b;
}

static skp_err count_segment(void *ud, const struct store_profiled_segment *seg)
{
    size_t *n = ud;
    (void)seg;
    (*n)++;
    return SKP_OK;
}

int main(int argc, char **argv)
{
    const char *tmp = getenv("TMPDIR");
    const char *dir = argc > 1 ? argv[1] : (tmp && *tmp ? tmp : "/tmp");
    long total = argc > 2 ? strtol(argv[2], NULL, 10) : 1000000;
    if (total < SEG_LEN)
        total = SEG_LEN;
    char path[1100];
    bool on_file = store_target_is_file(dir);
    if (on_file) {
        snprintf(path, sizeof(path), "%s/bench_store.db", dir);
        remove_db(path);
    } else {
        snprintf(path, sizeof(path), "%s", dir);
    }
    build_workload();

    struct store *st = NULL;
    skp_err err = store_open(path, NULL, &st);
    if (err)
        die("open", err);

    /* ---- ingest ---- */
    const char *task = "1733130000000_c3Zj.1";
    long n_segments = total / SEG_LEN;
    struct store_snapshot *batch = skpx_xcalloc(BATCH, sizeof(*batch));
    char (*seg_names)[64] = skpx_xcalloc((size_t)n_segments, 64);
    int *cur_stack = skpx_xcalloc((size_t)n_segments, sizeof(int));
    for (long g = 0; g < n_segments; g++) {
        snprintf(seg_names[g], 64, "a1b2c3d4e5f60718293a4b5c6d7e8f90.%d.%ld", 42, g);
        cur_stack[g] = (int)rnd(N_STACKS);
    }
    const int64_t t0_ms = 1733130000000LL;
    size_t nb = 0;
    long inserted = 0;
    int64_t ingest_ns = 0;
    /* groups of CONCURRENT segments sampled at the same time, dumps interleaved */
    for (long g0 = 0; g0 < n_segments; g0 += CONCURRENT) {
        long gn = g0 + CONCURRENT <= n_segments ? CONCURRENT : n_segments - g0;
        for (int seq = 0; seq < SEG_LEN; seq++) {
            for (long k = 0; k < gn; k++) {
                long g = g0 + k;
                if (rnd(10) >= 7)
                    cur_stack[g] = (int)rnd(N_STACKS);
                batch[nb++] = (struct store_snapshot){
                    .task_id = task,
                    .segment_id = seg_names[g],
                    .time_ms = t0_ms + g0 * 10 * SEG_LEN + seq * 10LL + k,
                    .sequence = seq,
                    .frames = g_stacks[cur_stack[g]],
                    .n_frames = DEPTH,
                };
                if (nb == BATCH) {
                    int64_t t = skpx_mono_ns();
                    err = store_insert_snapshots(st, batch, nb, NULL);
                    ingest_ns += skpx_mono_ns() - t;
                    if (err)
                        die("insert", err);
                    inserted += (long)nb;
                    nb = 0;
                }
            }
        }
    }
    if (nb) {
        int64_t t = skpx_mono_ns();
        err = store_insert_snapshots(st, batch, nb, NULL);
        ingest_ns += skpx_mono_ns() - t;
        if (err)
            die("insert", err);
        inserted += (long)nb;
    }
    struct store_stats stats;
    err = store_get_stats(st, &stats);
    if (err)
        die("stats", err);
    double ingest_s = (double)ingest_ns / 1e9;
    printf("ingest: %ld snapshots (%ld segments x %d, batches of %d, 20-frame stacks from %d "
           "distinct over %d frames)\n",
           inserted, n_segments, SEG_LEN, BATCH, N_STACKS, N_FRAMES);
    printf("  throughput            %10.0f snapshots/s  (%.2f s)\n", inserted / ingest_s,
           ingest_s);
    printf("  commit latency (mean) %10.3f ms per %d-snapshot batch (%" PRIu64 " commits)\n",
           (double)stats.commit_ns_total / 1e6 / (double)stats.commits, BATCH, stats.commits);
    printf("  rows                  snapshots=%" PRIu64 " stacks=%" PRIu64 " frames=%" PRIu64
           " segments=%" PRIu64 "\n",
           stats.snapshots, stats.stacks, stats.frames, stats.segments);

    /* ---- bytes on disk (after a checkpoint: close and reopen) ---- */
    store_close(st);
    uint64_t bytes = on_file ? file_size(path) : 0;
    err = store_open(path, NULL, &st);
    if (err)
        die("reopen", err);
    if (!on_file) {
        err = store_get_stats(st, &stats);
        if (err)
            die("stats", err);
        bytes = stats.file_bytes; /* the whole database, indexes included */
    }
    double naive = on_file ? naive_bytes_per_row(dir) : 0;
    printf("disk: %.1f MB for %ld snapshots\n", (double)bytes / 1e6, inserted);
    printf("  bytes per snapshot    %10.1f  (target <= 40; naive OAP-like row with the "
           "serialized stack: %.1f)\n",
           (double)bytes / (double)inserted, naive);

    /* ---- analysis: one segment of 12,000 dumps ---- */
    nb = 0;
    int cur = 0;
    for (int seq = 0; seq < BIG_SEGMENT; seq++) {
        if (rnd(10) >= 7)
            cur = (int)rnd(N_STACKS);
        batch[nb++] = (struct store_snapshot){.task_id = "big-task",
                                              .segment_id = "big-segment",
                                              .time_ms = t0_ms + seq * 10LL,
                                              .sequence = seq,
                                              .frames = g_stacks[cur],
                                              .n_frames = DEPTH};
        if (nb == BATCH || seq == BIG_SEGMENT - 1) {
            err = store_insert_snapshots(st, batch, nb, NULL);
            if (err)
                die("insert big segment", err);
            nb = 0;
        }
    }
    double runs[7];
    struct analysis *a = NULL;
    size_t nodes = 0;
    /* first run after reopen includes cold caches; report it separately */
    for (int r = 0; r < 7; r++) {
        struct analyze_query q = {"big-segment", t0_ms, t0_ms + BIG_SEGMENT * 10LL};
        int64_t t = skpx_mono_ns();
        err = analyze_segments(st, &q, 1, NULL, &a);
        runs[r] = (double)(skpx_mono_ns() - t) / 1e6;
        if (err)
            die("analyze segment", err);
        nodes = 0;
        for (size_t i = 0; i < a->n_trees; i++)
            nodes += a->trees[i].n_nodes;
        if (r == 0)
            printf("analysis: one segment, %" PRIu64 " snapshots -> %zu trees, %zu nodes\n",
                   a->n_snapshots, a->n_trees, nodes);
        analysis_free(a);
    }
    double cold = runs[0];
    printf("  analyze_segments      %10.2f ms median of 6 (first run %.2f ms; target <= 20 ms)\n",
           median(runs + 1, 6), cold);
    json_t *j = NULL;
    err = analyze_segments(st, &(struct analyze_query){"big-segment", t0_ms, t0_ms + 1000000},
                           1, NULL, &a);
    if (err)
        die("analyze", err);
    int64_t tj = skpx_mono_ns();
    j = analysis_to_json(a);
    size_t json_len = j ? json_dumpb(j, NULL, 0, JSON_COMPACT) : 0;
    printf("  to JSON               %10.2f ms (%zu bytes)\n",
           (double)(skpx_mono_ns() - tj) / 1e6, json_len);
    json_decref(j);
    analysis_free(a);

    /* ---- analysis: the whole task ---- */
    for (int r = 0; r < 3; r++) {
        int64_t t = skpx_mono_ns();
        err = analyze_task(st, task, NULL, &a);
        runs[r] = (double)(skpx_mono_ns() - t) / 1e6;
        if (err)
            die("analyze task", err);
        if (r == 0) {
            nodes = 0;
            for (size_t i = 0; i < a->n_trees; i++)
                nodes += a->trees[i].n_nodes;
            printf("analysis: one task, %" PRIu64 " snapshots over %ld segments -> %zu trees, "
                   "%zu nodes\n",
                   a->n_snapshots, n_segments, a->n_trees, nodes);
        }
        analysis_free(a);
    }
    printf("  analyze_task          %10.1f ms median of 3 (target <= 2000 ms)\n",
           median(runs, 3));

    /* ---- profiled-segment listing, segment ingest, retention ---- */
    size_t listed = 0;
    int64_t tl = skpx_mono_ns();
    err = store_list_profiled_segments(st, task, count_segment, &listed);
    if (err)
        die("list", err);
    printf("listing: %zu profiled segments without SegmentObject  %8.1f ms (rows, no JSON)\n",
           listed, (double)(skpx_mono_ns() - tl) / 1e6);
    enum { SPANS = 5 };
    struct store_span span_store[SPANS];
    for (int i = 0; i < SPANS; i++) {
        span_store[i] = (struct store_span){0};
        span_store[i].span_id = i;
        span_store[i].parent_span_id = i - 1;
        span_store[i].operation = i == 0 ? "/orders/{id}" : "SELECT orders";
        span_store[i].type = i == 0 ? STORE_SPAN_ENTRY : STORE_SPAN_EXIT;
        span_store[i].start_ms = t0_ms;
        span_store[i].end_ms = t0_ms + 10000 - i;
    }
    struct store_segment *segobjs = skpx_xcalloc((size_t)n_segments, sizeof(*segobjs));
    for (long g = 0; g < n_segments; g++) {
        segobjs[g].trace_id = "a1b2c3d4e5f60718293a4b5c6d7e8f90.42.1";
        segobjs[g].segment_id = seg_names[g];
        segobjs[g].service = "orders";
        segobjs[g].instance = "orders-1@host";
        segobjs[g].n_spans = SPANS;
        segobjs[g].spans = span_store;
    }
    int64_t ts = skpx_mono_ns();
    for (long g = 0; g < n_segments; g += 100) {
        long cnt = g + 100 <= n_segments ? 100 : n_segments - g;
        err = store_insert_segments(st, segobjs + g, (size_t)cnt, t0_ms);
        if (err)
            die("insert segments", err);
    }
    double seg_s = (double)(skpx_mono_ns() - ts) / 1e9;
    printf("segments: %ld SegmentObjects (%d spans) in batches of 100  %8.0f segments/s\n",
           n_segments, SPANS, n_segments / seg_s);
    tl = skpx_mono_ns();
    listed = 0;
    err = store_list_profiled_segments(st, task, count_segment, &listed);
    if (err)
        die("list", err);
    printf("listing: %zu profiled segments with spans              %8.1f ms (rows, no JSON)\n",
           listed, (double)(skpx_mono_ns() - tl) / 1e6);
    uint64_t purged = 0;
    int64_t tp = skpx_mono_ns();
    err = store_purge_before(st, t0_ms + (n_segments / 2) * 10LL * SEG_LEN, &purged);
    if (err)
        die("purge", err);
    printf("retention: purge of half the segments: %" PRIu64 " rows in %.1f ms\n", purged,
           (double)(skpx_mono_ns() - tp) / 1e6);
    skpx_free(segobjs);

    store_close(st);
    if (on_file)
        remove_db(path);
    skpx_free(batch);
    skpx_free(seg_names);
    skpx_free(cur_stack);
    return 0;
}
