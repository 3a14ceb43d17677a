/* http_timeline.c - GET /api/v1/profile/segments/{segmentId}/timeline: a segment's snapshots in
 * time order, each with its time, sequence, depth and leaf frame (an index into "frames"), for
 * the UI's request timeline (docs/compare.md). At most TIMELINE_MAX_SNAPSHOTS are listed
 * ("truncated" says when more exist). Runs as a worker job. */
#include <string.h>

#include "common/alloc.h"
#include "common/map.h"
#include "server/http_int.h"
#include "server/utf8.h"

#define TIMELINE_MAX_SNAPSHOTS 200000u

struct tl_job {
    struct http_job base;
    char *segment_id;
};

struct tl_scan {
    struct store *st;
    json_t *snaps;
    json_t *frames;
    struct skpx_u64map leaf_index; /* frame id -> index in frames */
    uint64_t n;
    bool truncated;
    skp_err err;
};

static void tl_destroy(struct http_job *j)
{
    struct tl_job *t = (struct tl_job *)j;
    skpx_free(t->segment_id);
    skpx_free(t);
}

static void on_sample(void *ud, const struct store_sample *s)
{
    struct tl_scan *sc = ud;
    if (sc->err)
        return;
    if (sc->n >= TIMELINE_MAX_SNAPSHOTS) {
        sc->truncated = true;
        return;
    }
    const uint32_t *fr = NULL;
    size_t n = 0;
    skp_err err = store_get_stack(sc->st, s->stack, &fr, &n);
    json_int_t leaf = -1;
    if (!err && n > 0) {
        uint64_t idx;
        if (!skpx_u64map_get(&sc->leaf_index, fr[n - 1], &idx)) {
            const char *sig = NULL;
            err = store_get_frame(sc->st, fr[n - 1], &sig);
            idx = json_array_size(sc->frames);
            if (!err)
                err = http_push_json(sc->frames, skp_json_str(sig));
            if (!err)
                err = skpx_u64map_put(&sc->leaf_index, fr[n - 1], idx);
        }
        leaf = (json_int_t)idx;
    }
    if (!err)
        err = http_push_json(sc->snaps, json_pack("{s:I,s:i,s:I,s:I}", "time",
                                                   (json_int_t)s->time_ms, "sequence",
                                                   (int)s->sequence, "depth", (json_int_t)n,
                                                   "leaf", leaf));
    sc->err = err;
    sc->n++;
}

static void tl_run(struct http_job *j, struct store *st)
{
    struct tl_job *t = (struct tl_job *)j;
    struct tl_scan sc = {.st = st, .snaps = json_array(), .frames = json_array()};
    bool has = false;
    skp_err err = sc.snaps && sc.frames ? SKP_OK : SKP_ENOMEM;
    if (!err)
        err = store_segment_has_snapshots(st, t->segment_id, &has);
    if (!err && !has)
        err = SKP_ENOTFOUND;
    if (!err)
        err = store_scan_segment(st, t->segment_id, INT32_MIN, INT32_MAX, on_sample, &sc);
    if (!err)
        err = sc.err;
    skpx_u64map_cleanup(&sc.leaf_index);
    if (err) {
        json_decref(sc.snaps);
        json_decref(sc.frames);
        http_job_set_store_error(j, err, "segment");
        return;
    }
    http_job_set_json(j, 200, json_pack("{s:o,s:o,s:o,s:b}", "segmentId",
                                        skp_json_str(t->segment_id), "frames", sc.frames,
                                        "snapshots", sc.snaps, "truncated", sc.truncated));
}

void http_timeline_segment(struct http_ctx *cx, const char *segment_id)
{
    struct tl_job *t = skpx_calloc(1, sizeof(*t));
    if (!t || !(t->segment_id = skpx_strdup(segment_id))) {
        skpx_free(t);
        http_reply_error(cx, 500, "out of memory");
        return;
    }
    t->base.run = tl_run;
    t->base.destroy = tl_destroy;
    http_job_dispatch(cx, &t->base);
}
