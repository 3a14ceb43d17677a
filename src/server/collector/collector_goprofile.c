/* collector_goprofile.c - ProfileTask.goProfileReport (spec §1.1): a Go agent's trace profiling
 * sends one pprof file in chunks (GoProfileData: taskId, payload, isLast) whose samples carry
 * the labels segment_id (and trace_id, span_id). We reassemble the file (bounded by
 * --pprof-max-bytes), decode it, and turn each labelled sample into thread snapshots of trace
 * task `taskId` for its segment, so the existing segment views and analyses show it: frames
 * "function (file:line)" root first, one snapshot per sample count (at most
 * GOPROFILE_MAX_REPEAT), sequences 0.. per segment in file order, times from the profile's start
 * one period apart. Samples without a segment_id are counted and skipped. The Commands answer
 * comes after the snapshots committed (a durable ack, as collectSnapshot). Loop thread only. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "profile/Profile.pb-c.h"
#include "server/collector/collector.h"
#include "server/analysis/pprof_analyze.h"
#include "server/formats/pprof_decode.h"

/* Snapshots one sample may stand for (its count value); more are capped. */
#define GOPROFILE_MAX_REPEAT 100
/* Snapshots written per transaction. */
#define GOPROFILE_BATCH 1000
/* Distinct segments one file may carry. */
#define GOPROFILE_MAX_SEGMENTS 65536

struct goprof_call {
    char *task_id;
    uint8_t *buf;
    size_t len, cap;
    int status; /* first failure, SKPX_GRPC_OK otherwise */
    char message[200];
};

static uint64_t max_bytes(const struct collector *c)
{
    return c->pprof_max_bytes ? c->pprof_max_bytes : 30u * 1024 * 1024;
}

static void goprof_free(struct collector *c, struct goprof_call *g)
{
    if (!g)
        return;
    c->upload_bytes -= g->cap;
    skpx_free(g->buf);
    skpx_free(g->task_id);
    skpx_free(g);
}

struct seg_seq {
    char *segment; /* borrowed from the profile's strings */
    int32_t next_seq;
};

/* Stores the n snapshots of `batch`, whose frames are still offsets into `arena` (n_frames of
 * them in `frames`, snapshot k's first at frame_off[k]): made pointers now that the arena stopped
 * moving for this batch. Adds the stored ones to *stored and the metrics. Returns SKPX_GRPC_OK,
 * or the status with the reason in msg. */
static int store_batch(struct collector *c, struct store_snapshot *batch, size_t n, char **frames,
                       size_t n_frames, char *arena, const size_t *frame_off, uint64_t *stored,
                       char *msg, size_t msg_cap)
{
    for (size_t k = 0; k < n_frames; k++)
        frames[k] = arena + (uintptr_t)frames[k];
    for (size_t k = 0; k < n; k++)
        batch[k].frames = frames + frame_off[k];
    size_t dup = 0;
    skp_err err = store_insert_snapshots(c->store, batch, n, &dup);
    if (err) {
        snprintf(msg, msg_cap, "skyprofd: snapshots not stored: %s", skp_strerror(err));
        return err == SKP_ENOMEM ? SKPX_GRPC_RESOURCE_EXHAUSTED : SKPX_GRPC_UNAVAILABLE;
    }
    *stored += n - dup;
    c->metrics->snapshots_stored += n - dup;
    c->metrics->snapshots_duplicate += dup;
    return SKPX_GRPC_OK;
}

/* Writes the snapshots of one decoded file. Returns a gRPC status. */
static int store_profile(struct collector *c, const char *task_id, const struct pprof_profile *p,
                         char *msg, size_t msg_cap)
{
    int count_idx = pprof_sample_type_index(p, "samples");
    if (count_idx < 0)
        count_idx = 0;
    int64_t t0 = p->time_nanos > 0 ? p->time_nanos / 1000000 : collector_now(c);
    int64_t step =
        p->period > 0 && p->period_type.unit && !strcmp(p->period_type.unit, "nanoseconds")
            ? p->period / 1000000
            : 10;
    if (step <= 0)
        step = 1;
    struct store_snapshot *batch = skpx_calloc(GOPROFILE_BATCH, sizeof(*batch));
    struct seg_seq *segs = skpx_calloc(64, sizeof(*segs));
    size_t n_segs = 0, cap_segs = 64, n = 0;
    char **frames = NULL, *arena = NULL;
    size_t n_frames = 0, cap_frames = 0, arena_len = 0, arena_cap = 0;
    uint64_t skipped = 0, stored = 0;
    int st = SKPX_GRPC_OK;
    /* Frame strings of a batch live in `arena` (offsets in `frames` until the flush, since the
     * arena may move); each snapshot's frames are a range of `frames`. */
    size_t *snap_frame_off = skpx_calloc(GOPROFILE_BATCH, sizeof(*snap_frame_off));
    if (!batch || !segs || !snap_frame_off) {
        st = SKPX_GRPC_RESOURCE_EXHAUSTED;
        goto out;
    }
    for (size_t si = 0; si < p->n_samples && st == SKPX_GRPC_OK; si++) {
        const struct pprof_sample *s = &p->samples[si];
        const char *seg = NULL;
        for (uint32_t k = 0; k < s->n_labels; k++) {
            const struct pprof_label *l = &p->labels[s->label_off + k];
            if (!strcmp(l->key, "segment_id") && l->str[0])
                seg = l->str;
        }
        if (!seg) {
            skipped++;
            continue;
        }
        struct seg_seq *ss = NULL;
        for (size_t k = 0; k < n_segs && !ss; k++)
            if (!strcmp(segs[k].segment, seg))
                ss = &segs[k];
        if (!ss) {
            if (n_segs == GOPROFILE_MAX_SEGMENTS) {
                skipped++;
                continue;
            }
            if (n_segs == cap_segs) {
                struct seg_seq *ns = skpx_realloc(segs, cap_segs * 2 * sizeof(*ns));
                if (!ns) {
                    st = SKPX_GRPC_RESOURCE_EXHAUSTED;
                    break;
                }
                segs = ns;
                cap_segs *= 2;
            }
            ss = &segs[n_segs++];
            ss->segment = (char *)seg;
            ss->next_seq = 0;
        }
        int64_t repeat =
            p->n_sample_types ? p->values[si * p->n_sample_types + (size_t)count_idx] : 1;
        if (repeat <= 0)
            repeat = 1;
        if (repeat > GOPROFILE_MAX_REPEAT)
            repeat = GOPROFILE_MAX_REPEAT;
        for (int64_t r = 0; r < repeat && st == SKPX_GRPC_OK; r++) {
            size_t first = n_frames;
            for (uint32_t k = s->n_locs; k-- > 0 && st == SKPX_GRPC_OK;) {
                const struct pprof_location *l = &p->locations[p->sample_locs[s->loc_off + k]];
                uint32_t nl = l->n_lines ? l->n_lines : 1;
                for (uint32_t li = 0; li < nl; li++) {
                    char sig[PPROF_FRAME_MAX];
                    const struct pprof_line *ln =
                        l->n_lines ? &p->lines[l->line_off + l->n_lines - 1 - li] : NULL;
                    pprof_frame_signature(p, l, ln, false, sig);
                    size_t sl = strlen(sig) + 1;
                    if (n_frames == cap_frames) {
                        size_t nc = cap_frames ? cap_frames * 2 : 4096;
                        char **nf = skpx_realloc(frames, nc * sizeof(*nf));
                        if (!nf) {
                            st = SKPX_GRPC_RESOURCE_EXHAUSTED;
                            break;
                        }
                        frames = nf;
                        cap_frames = nc;
                    }
                    if (arena_len + sl > arena_cap) {
                        size_t nc = arena_cap ? arena_cap * 2 : 65536;
                        while (nc < arena_len + sl)
                            nc *= 2;
                        char *na = skpx_realloc(arena, nc);
                        if (!na) {
                            st = SKPX_GRPC_RESOURCE_EXHAUSTED;
                            break;
                        }
                        arena = na;
                        arena_cap = nc;
                    }
                    memcpy(arena + arena_len, sig, sl);
                    frames[n_frames++] = (char *)(uintptr_t)arena_len;
                    arena_len += sl;
                }
            }
            if (st != SKPX_GRPC_OK)
                break;
            struct store_snapshot *sn = &batch[n];
            sn->task_id = task_id;
            sn->segment_id = ss->segment;
            sn->sequence = ss->next_seq;
            sn->time_ms = t0 + (int64_t)ss->next_seq * step;
            sn->received_ms = collector_now(c);
            ss->next_seq++;
            sn->n_frames = n_frames - first;
            snap_frame_off[n] = first;
            n++;
            if (n == GOPROFILE_BATCH || (si + 1 == p->n_samples && r + 1 == repeat)) {
                st = store_batch(c, batch, n, frames, n_frames, arena, snap_frame_off, &stored, msg,
                                 msg_cap);
                if (st != SKPX_GRPC_OK)
                    break;
                n = 0;
                n_frames = 0;
                arena_len = 0;
            }
        }
    }
    /* A batch cut short by skipped trailing samples. */
    if (st == SKPX_GRPC_OK && n > 0)
        st = store_batch(c, batch, n, frames, n_frames, arena, snap_frame_off, &stored, msg,
                         msg_cap);
    SKPX_INFO("goProfileReport task %s: %" PRIu64 " snapshot(s) of %zu segment(s) stored, %" PRIu64
              " sample(s) without segment_id skipped",
              task_id, stored, n_segs, skipped);
out:
    skpx_free(snap_frame_off);
    skpx_free(batch);
    skpx_free(segs);
    skpx_free(frames);
    skpx_free(arena);
    return st;
}

/* Decodes and stores the file gathered so far, then empties the buffer. */
static int finish_file(struct collector *c, struct goprof_call *g)
{
    if (!g->task_id || g->len == 0)
        return SKPX_GRPC_OK;
    struct pprof_profile *p = NULL;
    char why[PPROF_ERR_MAX];
    skp_err err = pprof_decode(g->buf, g->len, 0, &p, why);
    g->len = 0;
    if (err) {
        static struct skpx_log_limit lim;
        skpx_log_limited(&lim, SKPX_LOG_WARN, "goProfileReport task %s: %s", g->task_id, why);
        snprintf(g->message, sizeof(g->message), "skyprofd: %s", why);
        return err == SKP_ENOMEM ? SKPX_GRPC_RESOURCE_EXHAUSTED : SKPX_GRPC_INVALID_ARGUMENT;
    }
    int st = store_profile(c, g->task_id, p, g->message, sizeof(g->message));
    pprof_free(p);
    return st;
}

int collector_goprofile_on_message(struct skpx_grpc_call *call, void *ud,
                                   const ProtobufCMessage *msg, const uint8_t *raw, size_t raw_len)
{
    (void)raw;
    (void)raw_len;
    struct collector *c = ud;
    const Skywalking__V3__GoProfileData *d = (const void *)msg;
    struct goprof_call *g = skpx_grpc_call_get_data(call);
    if (!g) {
        g = skpx_calloc(1, sizeof(*g));
        if (!g)
            return SKPX_GRPC_RESOURCE_EXHAUSTED;
        skpx_grpc_call_set_data(call, g);
    }
    const char *tid = d->taskid ? d->taskid : "";
    if (!g->task_id || strcmp(g->task_id, tid) != 0) {
        /* A new task id starts a new file (the previous one had no isLast). */
        int st = finish_file(c, g);
        if (st != SKPX_GRPC_OK) {
            skpx_grpc_call_finish(call, NULL, st, g->message[0] ? g->message : NULL);
            return SKPX_GRPC_OK;
        }
        skpx_free(g->task_id);
        g->task_id = skpx_strdup(tid);
        if (!g->task_id)
            return SKPX_GRPC_RESOURCE_EXHAUSTED;
    }
    size_t n = d->payload.len;
    if (n) {
        if ((uint64_t)g->len + n > max_bytes(c))
            return SKPX_GRPC_RESOURCE_EXHAUSTED;
        if (g->len + n > g->cap) {
            size_t nc = g->cap ? g->cap * 2 : 1u << 20;
            while (nc < g->len + n)
                nc *= 2;
            if (c->upload_bytes - g->cap + nc > (256u << 20))
                return SKPX_GRPC_RESOURCE_EXHAUSTED;
            uint8_t *nb = skpx_realloc(g->buf, nc);
            if (!nb)
                return SKPX_GRPC_RESOURCE_EXHAUSTED;
            c->upload_bytes += nc - g->cap;
            g->buf = nb;
            g->cap = nc;
        }
        memcpy(g->buf + g->len, d->payload.data, n);
        g->len += n;
    }
    if (d->islast) {
        int st = finish_file(c, g);
        if (st != SKPX_GRPC_OK)
            skpx_grpc_call_finish(call, NULL, st, g->message[0] ? g->message : NULL);
    }
    return SKPX_GRPC_OK;
}

void collector_goprofile_on_end(struct skpx_grpc_call *call, void *ud)
{
    struct collector *c = ud;
    struct goprof_call *g = skpx_grpc_call_get_data(call);
    int st = g ? finish_file(c, g) : SKPX_GRPC_OK;
    if (st != SKPX_GRPC_OK) {
        skpx_grpc_call_finish(call, NULL, st, g->message[0] ? g->message : NULL);
        return;
    }
    skpx_grpc_call_finish(call, collector_empty_commands(), SKPX_GRPC_OK, NULL);
}

void collector_goprofile_on_close(struct skpx_grpc_call *call, void *ud, int status)
{
    (void)status;
    struct goprof_call *g = skpx_grpc_call_get_data(call);
    skpx_grpc_call_set_data(call, NULL);
    goprof_free(ud, g);
}
