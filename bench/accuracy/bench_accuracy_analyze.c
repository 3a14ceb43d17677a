/* bench_accuracy_analyze.c - the old and the new trace analysis of the same stored dumps, for
 * bench_accuracy.py. Usage: bench_accuracy_analyze DB SEGMENT_ID...
 * Opens the SQLite store DB read-only and prints, per segment, one JSON line
 *   {"segment": ID, "old_lines": A, "new_lines": A, "old_functions": A, "new_functions": A}
 * where each A is the API's analysis ({tip, trees}) of the segment over its spans' window (the
 * web UI's default, GET .../analyze?window=span; the whole life when its spans are unknown),
 * with OAP's run estimate (old, ANALYZE_EST_OAP_RUNS) and the per-interval one (new), at line
 * and at function granularity. Exit 1 on any error. */
#include <jansson.h>
#include <stdio.h>

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

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s DB SEGMENT_ID...\n", argv[0]);
        return 2;
    }
    struct store_opts so = {.read_only = true};
    struct store *st = NULL;
    if (store_open(argv[1], &so, &st)) {
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
