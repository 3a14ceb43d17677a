/* http_timeline.c - GET /api/v1/profile/segments/{segmentId}/timeline: a segment's snapshots in
 * time order, each with its time, sequence, depth, leaf frame (an index into "frames") and stack
 * (an index into "stacks", each a list of frame indexes, root first), for the UI's request
 * timeline (docs/compare.md). Frames and stacks are listed once however many dumps share them.
 * At most TIMELINE_MAX_SNAPSHOTS are listed ("truncated" says when more exist). Runs as a worker
 * job. */
#include <string.h>

#include "common/alloc.h"
#include "common/map.h"
#include "server/http/http_int.h"
#include "server/formats/utf8.h"

#define TIMELINE_MAX_SNAPSHOTS 200000u

struct tl_scan {
    struct store *st;
    json_t *snaps;
    json_t *frames;
    json_t *stacks;
    struct skpx_u64map frame_index; /* frame id -> index in frames */
    struct skpx_u64map stack_index; /* stack id -> index in stacks */
    uint64_t n;
    bool truncated;
    skp_err err;
};

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
    uint64_t st_idx = 0, idx = 0;
    json_int_t leaf = -1;
    if (!err && !skpx_u64map_get(&sc->stack_index, s->stack, &st_idx)) {
        json_t *list = json_array();
        err = list ? SKP_OK : SKP_ENOMEM;
        for (size_t i = 0; i < n && !err; i++) {
            if (!skpx_u64map_get(&sc->frame_index, fr[i], &idx)) {
                const char *sig = NULL;
                err = store_get_frame(sc->st, fr[i], &sig);
                idx = json_array_size(sc->frames);
                if (!err)
                    err = http_push_json(sc->frames, skp_json_str(sig));
                if (!err)
                    err = skpx_u64map_put(&sc->frame_index, fr[i], idx);
            }
            if (!err)
                err = http_push_json(list, json_integer((json_int_t)idx));
        }
        st_idx = json_array_size(sc->stacks);
        if (!err)
            err = http_push_json(sc->stacks, list);
        else
            json_decref(list);
        if (!err)
            err = skpx_u64map_put(&sc->stack_index, s->stack, st_idx);
    }
    if (!err && n > 0) {
        /* the stack is listed: its leaf is the last frame index of its entry */
        json_t *list = json_array_get(sc->stacks, st_idx);
        leaf = json_integer_value(json_array_get(list, json_array_size(list) - 1));
    }
    if (!err)
        err = http_push_json(sc->snaps,
                             json_pack("{s:I,s:i,s:I,s:I,s:I}", "time", (json_int_t)s->time_ms,
                                       "sequence", (int)s->sequence, "depth", (json_int_t)n, "leaf",
                                       leaf, "stack", (json_int_t)st_idx));
    sc->err = err;
    sc->n++;
}

static void tl_run(struct http_job *j, struct store *st)
{
    struct tl_scan sc = {
        .st = st, .snaps = json_array(), .frames = json_array(), .stacks = json_array()};
    bool has = false;
    skp_err err = sc.snaps && sc.frames && sc.stacks ? SKP_OK : SKP_ENOMEM;
    if (!err)
        err = store_segment_has_snapshots(st, j->id, &has);
    if (!err && !has)
        err = SKP_ENOTFOUND;
    if (!err)
        err = store_scan_segment(st, j->id, INT32_MIN, INT32_MAX, on_sample, &sc);
    if (!err)
        err = sc.err;
    skpx_u64map_cleanup(&sc.frame_index);
    skpx_u64map_cleanup(&sc.stack_index);
    if (err) {
        json_decref(sc.snaps);
        json_decref(sc.frames);
        json_decref(sc.stacks);
        http_job_set_store_error(j, err, "segment");
        return;
    }
    http_job_set_json(j, 200,
                      json_pack("{s:o,s:o,s:o,s:o,s:b}", "segmentId", skp_json_str(j->id), "frames",
                                sc.frames, "stacks", sc.stacks, "snapshots", sc.snaps, "truncated",
                                sc.truncated));
}

void http_timeline_segment(struct http_ctx *cx, const char *segment_id)
{
    struct http_job *j = http_job_new(cx, sizeof(*j), tl_run, http_job_free);
    if (j && http_job_strdup(cx, j, &j->id, segment_id))
        http_job_dispatch(cx, j);
}
