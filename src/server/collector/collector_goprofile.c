/* collector_goprofile.c - ProfileTask.goProfileReport (spec §1.1): a Go agent's trace profiling
 * sends one pprof file in chunks (GoProfileData: taskId, payload, isLast) whose samples carry
 * the labels segment_id (and trace_id, span_id). We reassemble the file (bounded by
 * --pprof-max-bytes and the upload budget), then decode it and turn each labelled sample into
 * thread snapshots of trace task `taskId` for its segment, so the existing segment views and
 * analyses show it: frames "function (file:line)" root first, one snapshot per sample whose
 * weight is the sample's count (at most GOPROFILE_MAX_WEIGHT: the analyses count it that many
 * times and give it that many periods, analyzer.c), sequences 0.. per segment in file order,
 * times from the profile's start, each row `weight` periods after the previous one of its
 * segment. Samples without a segment_id are counted and skipped.
 *
 * Hostile input (issue 25): the task id must name a stored trace task (else NOT_FOUND); the
 * decode and the building of the rows run on a worker thread of their own (a bounded queue,
 * GOPROFILE_QUEUE_MAX files; more get RESOURCE_EXHAUSTED), under the decoder's limits
 * (decompressed size checked while inflating, memory of the tables, samples); one file yields
 * at most GOPROFILE_MAX_ROWS rows and GOPROFILE_MAX_FRAME_BYTES of frame strings, else it is
 * refused whole before anything is stored; the rows' memory is charged to the upload budget;
 * segments are found through a hash index. The rows are written back on the loop,
 * GOPROFILE_BATCH per loop turn (one transaction each, a step of collector_turns.h's queue, after
 * the jobs queued before), and the Commands answer comes after the
 * last committed (a durable ack, as collectSnapshot). Refusals are counted in
 * skyprof_goprofile_refused_total.
 *
 * Without collector_goprofile_start (tests, fuzz drivers) the same steps run inline on the
 * calling thread. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/grow.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "common/map.h"
#include "common/sat.h"
#include "profile/Profile.pb-c.h"
#include "server/analysis/pprof_analyze.h"
#include "server/collector/collector.h"
#include "server/collector/collector_proc.h"
#include "server/collector/collector_turns.h"
#include "server/formats/pprof_decode.h"
#include "server/job_queue.h"

/* Snapshots written per transaction and loop turn: 1000 rows of 1000 new segments took ~100 ms
 * of the loop on a loaded 2-core machine (bench/hostile). */
#define GOPROFILE_BATCH 250

struct goprof_call;

/* One file: its bytes (charged to c->upload_bytes), then the rows the worker built. */
struct goprof_job {
    struct job_queue_item qi; /* its link in the worker's queue (server/job_queue.h) */
    struct turn_job turn;     /* its rows written a batch per loop turn (collector_turns.h) */
    struct collector *c;
    struct goprof_call *g; /* NULL once the call closed */
    char *task_id;
    uint8_t *buf;
    size_t len, cap; /* cap charged to c->upload_bytes while buf lives */
    /* Worker results. */
    int status; /* SKPX_GRPC_OK or the refusal */
    char message[200];
    struct store_snapshot *snaps;
    size_t n_snaps, n_stored;
    char **frames;    /* all rows' frames, root first per row */
    char *arena;      /* frame strings and segment ids */
    size_t row_bytes; /* charged to c->upload_bytes once back on the loop */
    uint64_t skipped, n_segs, stored, dup;
};

struct goprof_call {
    struct skpx_grpc_call *call; /* NULL once closed */
    struct collector *c;
    struct goprof_job *cur; /* the file being received */
    size_t n_jobs;          /* files handed over and not done */
    size_t refs;            /* n_jobs + handlers running; freed at 0 once closed */
    bool ended;             /* the client half-closed */
    bool finished;          /* the call was answered */
};

struct goprof_worker {
    struct job_queue *q;
    size_t n_queued; /* queued + running + returned + storing (loop only) */
};

static uint64_t max_bytes(const struct collector *c)
{
    return c->pprof_max_bytes ? c->pprof_max_bytes : 30u * 1024 * 1024;
}

static void job_free(struct goprof_job *j)
{
    if (!j)
        return;
    j->c->upload_bytes -= j->cap + j->row_bytes;
    SKPX_FREE_ALL(j->buf, j->task_id, j->snaps, j->frames, j->arena, j);
}

static void refused(struct collector *c)
{
    c->metrics->goprofile_refused++;
}

/* ---------------------------------------------------------------- rows (worker thread) */

struct seg_state {
    size_t seg_off; /* the segment id in the arena */
    int32_t next_seq;
    int64_t next_time;
};

struct row_builder {
    struct goprof_job *j;
    size_t cap_snaps, n_frames, cap_frames, arena_len, arena_cap;
    size_t *frame_off; /* per row: its first frame in j->frames */
    size_t *seg_off;   /* per row: its segment id in the arena */
};

/* Copies s into the arena (frames hold offsets until the end: the arena may move). */
static skp_err arena_add(struct row_builder *b, const char *s, size_t *off)
{
    size_t n = strlen(s) + 1;
    if (b->arena_len + n > GOPROFILE_MAX_FRAME_BYTES)
        return SKP_ETOOBIG;
    if (b->arena_len + n > b->arena_cap) {
        size_t nc = b->arena_cap ? b->arena_cap * 2 : 65536;
        while (nc < b->arena_len + n)
            nc *= 2;
        char *na = skpx_realloc(b->j->arena, nc);
        if (!na)
            return SKP_ENOMEM;
        b->j->arena = na;
        b->arena_cap = nc;
    }
    memcpy(b->j->arena + b->arena_len, s, n);
    *off = b->arena_len;
    b->arena_len += n;
    return SKP_OK;
}

/* Appends the frames of sample s, root first; *first and *n give their range. */
static skp_err add_frames(struct row_builder *b, const struct pprof_profile *p,
                          const struct pprof_sample *s, size_t *first, size_t *n)
{
    *first = b->n_frames;
    for (uint32_t k = s->n_locs; k-- > 0;) {
        const struct pprof_location *l = &p->locations[p->sample_locs[s->loc_off + k]];
        uint32_t nl = l->n_lines ? l->n_lines : 1;
        for (uint32_t li = 0; li < nl; li++) {
            char sig[PPROF_FRAME_MAX];
            const struct pprof_line *ln =
                l->n_lines ? &p->lines[l->line_off + l->n_lines - 1 - li] : NULL;
            pprof_frame_signature(p, l, ln, false, sig);
            if (skpx_grow(&b->j->frames, &b->cap_frames, b->n_frames + 1, sizeof(*b->j->frames),
                          4096))
                return SKP_ENOMEM;
            size_t off;
            skp_err err = arena_add(b, sig, &off);
            if (err)
                return err;
            b->j->frames[b->n_frames++] = (char *)(uintptr_t)off;
        }
    }
    *n = b->n_frames - *first;
    return SKP_OK;
}

static skp_err add_row(struct row_builder *b, const struct seg_state *ss, size_t first,
                       size_t n_frames, int32_t seq, int64_t time_ms, uint32_t weight)
{
    struct goprof_job *j = b->j;
    if (j->n_snaps == GOPROFILE_MAX_ROWS)
        return SKP_ETOOBIG;
    if (j->n_snaps == b->cap_snaps) {
        size_t nc = b->cap_snaps ? b->cap_snaps * 2 : 1024;
        struct store_snapshot *ns = skpx_realloc(j->snaps, nc * sizeof(*ns));
        if (ns)
            j->snaps = ns;
        size_t *nf = skpx_realloc(b->frame_off, nc * sizeof(*nf));
        if (nf)
            b->frame_off = nf;
        size_t *nsg = skpx_realloc(b->seg_off, nc * sizeof(*nsg));
        if (nsg)
            b->seg_off = nsg;
        if (!ns || !nf || !nsg)
            return SKP_ENOMEM;
        b->cap_snaps = nc;
    }
    struct store_snapshot *sn = &j->snaps[j->n_snaps];
    memset(sn, 0, sizeof(*sn));
    sn->task_id = j->task_id;
    sn->sequence = seq;
    sn->time_ms = time_ms;
    sn->n_frames = n_frames;
    sn->weight = weight;
    b->frame_off[j->n_snaps] = first;
    b->seg_off[j->n_snaps] = ss->seg_off;
    j->n_snaps++;
    return SKP_OK;
}

/* The rows of one decoded file into j (see the file comment). SKP_ETOOBIG past the budgets. */
static skp_err build_rows(struct goprof_job *j, const struct pprof_profile *p, int64_t now_ms)
{
    int count_idx = pprof_sample_type_index(p, "samples");
    if (count_idx < 0)
        count_idx = 0;
    int64_t t0 = p->time_nanos > 0 ? p->time_nanos / 1000000 : now_ms;
    int64_t step =
        p->period > 0 && p->period_type.unit && !strcmp(p->period_type.unit, "nanoseconds")
            ? p->period / 1000000
            : 10;
    if (step <= 0)
        step = 1;
    struct row_builder b = {.j = j};
    struct skpx_strmap index = {0}; /* segment id -> segs[] */
    struct seg_state *segs = NULL;
    size_t n_segs = 0, cap_segs = 0;
    skp_err err = SKP_OK;
    for (size_t si = 0; si < p->n_samples && !err; si++) {
        const struct pprof_sample *s = &p->samples[si];
        const char *seg = NULL;
        for (uint32_t k = 0; k < s->n_labels; k++) {
            const struct pprof_label *l = &p->labels[s->label_off + k];
            if (!strcmp(l->key, "segment_id") && l->str[0])
                seg = l->str;
        }
        if (!seg) {
            j->skipped++;
            continue;
        }
        uint32_t at;
        if (!skpx_strmap_get(&index, seg, &at)) {
            if (n_segs == GOPROFILE_MAX_SEGMENTS) {
                j->skipped++;
                continue;
            }
            if (n_segs == cap_segs) {
                size_t nc = cap_segs ? cap_segs * 2 : 64;
                struct seg_state *ns = skpx_realloc(segs, nc * sizeof(*ns));
                if (!ns) {
                    err = SKP_ENOMEM;
                    break;
                }
                segs = ns;
                cap_segs = nc;
            }
            at = (uint32_t)n_segs;
            segs[at] = (struct seg_state){.next_time = t0};
            err = arena_add(&b, seg, &segs[at].seg_off);
            if (!err)
                err = skpx_strmap_put(&index, seg, at);
            if (err)
                break;
            n_segs++;
        }
        struct seg_state *ss = &segs[at];
        int64_t w = p->n_sample_types ? p->values[si * p->n_sample_types + (size_t)count_idx] : 1;
        if (w <= 0)
            w = 1;
        if (w > GOPROFILE_MAX_WEIGHT)
            w = GOPROFILE_MAX_WEIGHT;
        size_t first = 0, nf = 0;
        err = add_frames(&b, p, s, &first, &nf);
        /* One row of weight w: w samples one period apart, the next row w periods later. */
        if (!err)
            err = add_row(&b, ss, first, nf, ss->next_seq, ss->next_time, (uint32_t)w);
        ss->next_seq++;
        ss->next_time =
            skpx_sat_add_i64(ss->next_time, step > INT64_MAX / w ? INT64_MAX : step * w);
    }
    if (!err) {
        /* The arena stopped moving: offsets become pointers. */
        for (size_t k = 0; k < b.n_frames; k++)
            j->frames[k] = j->arena + (uintptr_t)j->frames[k];
        for (size_t r = 0; r < j->n_snaps; r++) {
            j->snaps[r].frames = j->frames + b.frame_off[r];
            j->snaps[r].segment_id = j->arena + b.seg_off[r];
        }
        j->n_segs = n_segs;
        j->row_bytes =
            b.cap_snaps * sizeof(*j->snaps) + b.cap_frames * sizeof(char *) + b.arena_cap;
    }
    skpx_strmap_cleanup(&index);
    SKPX_FREE_ALL(segs, b.frame_off, b.seg_off);
    return err;
}

/* Decodes j's file and builds its rows; frees the file's bytes (still charged until the job is
 * back on the loop). Sets j->status and j->message. Any thread. */
static void job_run(struct goprof_job *j, int64_t now_ms)
{
    struct pprof_profile *p = NULL;
    char why[PPROF_ERR_MAX];
    struct pprof_limits lim = {.max_decoded = GOPROFILE_MAX_DECODED,
                               .max_memory = GOPROFILE_MAX_DECODE_MEMORY,
                               .max_samples = GOPROFILE_MAX_ROWS};
    skp_err err = pprof_decode_limited(j->buf, j->len, &lim, &p, why);
    skpx_free(j->buf);
    j->buf = NULL;
    if (err) {
        snprintf(j->message, sizeof(j->message), "skyprofd: %s", why);
        j->status = err == SKP_EINVAL ? SKPX_GRPC_INVALID_ARGUMENT : SKPX_GRPC_RESOURCE_EXHAUSTED;
        return;
    }
    err = build_rows(j, p, now_ms);
    pprof_free(p);
    if (err == SKP_ETOOBIG) {
        snprintf(j->message, sizeof(j->message),
                 "skyprofd: goProfileReport file over %u rows or %u bytes of frames",
                 (unsigned)GOPROFILE_MAX_ROWS, (unsigned)GOPROFILE_MAX_FRAME_BYTES);
        j->status = SKPX_GRPC_RESOURCE_EXHAUSTED;
    } else if (err) {
        snprintf(j->message, sizeof(j->message), "skyprofd: out of memory");
        j->status = SKPX_GRPC_RESOURCE_EXHAUSTED;
    }
    if (err) {
        SKPX_FREE_ALL(j->snaps, j->frames, j->arena);
        j->snaps = NULL;
        j->frames = NULL;
        j->arena = NULL;
        j->n_snaps = 0;
        j->row_bytes = 0;
    }
}

/* ---------------------------------------------------------------- calls (loop thread) */

static void call_unref(struct goprof_call *g)
{
    if (--g->refs == 0 && !g->call) {
        job_free(g->cur);
        skpx_free(g);
    }
}

/* Answers the call with a failure once (on_close may run from within). */
static void call_fail(struct goprof_call *g, int status, const char *msg)
{
    if (g->finished || !g->call)
        return;
    g->finished = true;
    skpx_grpc_call_finish(g->call, NULL, status, msg);
}

static void call_maybe_done(struct goprof_call *g)
{
    if (g->finished || !g->call || !g->ended || g->n_jobs)
        return;
    g->finished = true;
    skpx_grpc_call_finish(g->call, collector_empty_commands(), SKPX_GRPC_OK, NULL);
}

/* Stores up to GOPROFILE_BATCH of j's rows in one transaction. Returns true when j is done. */
static bool store_step(struct goprof_job *j)
{
    struct collector *c = j->c;
    if (j->status != SKPX_GRPC_OK || !j->g || !j->g->call)
        return true; /* failed, or nobody waits for the ack: stop writing */
    size_t n = j->n_snaps - j->n_stored;
    if (n > GOPROFILE_BATCH)
        n = GOPROFILE_BATCH;
    if (n) {
        int64_t now = collector_now(c);
        for (size_t k = 0; k < n; k++)
            j->snaps[j->n_stored + k].received_ms = now;
        size_t dup = 0;
        skp_err err = store_insert_snapshots(c->store, j->snaps + j->n_stored, n, &dup);
        if (err) {
            snprintf(j->message, sizeof(j->message), "skyprofd: snapshots not stored: %s",
                     skp_strerror(err));
            j->status = err == SKP_ENOMEM ? SKPX_GRPC_RESOURCE_EXHAUSTED : SKPX_GRPC_UNAVAILABLE;
            return true;
        }
        c->metrics->snapshots_stored += n - dup;
        c->metrics->snapshots_duplicate += dup;
        c->metrics->snapshot_batches++;
        j->stored += n - dup;
        j->n_stored += n;
    }
    if (j->n_stored < j->n_snaps)
        return false;
    SKPX_INFO("goProfileReport task %s: %" PRIu64 " snapshot(s) of %" PRIu64
              " segment(s) stored, %" PRIu64 " sample(s) without segment_id skipped",
              j->task_id, j->stored, j->n_segs, j->skipped);
    return true;
}

/* j came back from the worker (or ran inline): charge its rows to the upload budget. */
static void job_returned(struct goprof_job *j)
{
    struct collector *c = j->c;
    if (j->status == SKPX_GRPC_RESOURCE_EXHAUSTED)
        refused(c);
    if (j->status != SKPX_GRPC_OK)
        return;
    if (c->upload_bytes + j->row_bytes > COLLECTOR_UPLOAD_BUDGET_BYTES) {
        snprintf(j->message, sizeof(j->message), "skyprofd: upload budget exhausted");
        j->status = SKPX_GRPC_RESOURCE_EXHAUSTED;
        j->row_bytes = 0;
        refused(c);
        return;
    }
    c->upload_bytes += j->row_bytes;
}

/* j is over: answers or fails its call, frees j. */
static void job_done(struct goprof_job *j)
{
    struct goprof_call *g = j->g;
    int status = j->status;
    char msg[sizeof(j->message)];
    memcpy(msg, j->message, sizeof(msg));
    if (status != SKPX_GRPC_OK && status != SKPX_GRPC_RESOURCE_EXHAUSTED) {
        static struct skpx_log_limit lim;
        skpx_log_limited(&lim, SKPX_LOG_WARN, "goProfileReport task %s: %s", j->task_id, msg);
    }
    j->g = NULL;
    job_free(j);
    if (!g)
        return;
    g->n_jobs--; /* the job's reference is dropped last */
    if (status != SKPX_GRPC_OK)
        call_fail(g, status, msg[0] ? msg : NULL);
    else
        call_maybe_done(g);
    call_unref(g);
}

/* ---------------------------------------------------------------- worker */

/* Worker thread: decodes the file and builds its rows. */
static void worker_run(struct job_queue_item *it, void *ud)
{
    (void)ud;
    struct goprof_job *j = SKP_CONTAINER_OF(it, struct goprof_job, qi);
    job_run(j, collector_now(j->c));
}

/* Loop: j is failed by the worker's stop (unless it failed already). */
static void fail_shutting_down(struct goprof_job *j)
{
    if (j->status == SKPX_GRPC_OK) {
        j->status = SKPX_GRPC_UNAVAILABLE;
        snprintf(j->message, sizeof(j->message), "skyprofd: shutting down");
    }
}

/* Loop: one batch of a job the worker returned, as a step of the collector's per-turn queue,
 * so ingestion and the HTTP API run between batches. A step after collector_goprofile_stop
 * (the queue is drained after it) fails the job as that stop did its own lists. */
static bool turn_step(struct turn_job *t)
{
    struct goprof_job *j = SKP_CONTAINER_OF(t, struct goprof_job, turn);
    struct goprof_worker *w = j->c->goprof;
    if (!w)
        fail_shutting_down(j);
    if (!store_step(j))
        return false;
    if (w)
        w->n_queued--;
    job_done(j);
    return true;
}

/* Loop: j came back from the worker; its rows are written by the per-turn queue. */
static void worker_done(struct job_queue_item *it, void *ud)
{
    (void)ud;
    struct goprof_job *j = SKP_CONTAINER_OF(it, struct goprof_job, qi);
    job_returned(j);
    j->turn.step = turn_step;
    collector_turns_push(j->c, &j->turn);
}

/* Loop, from collector_goprofile_stop: j was not run, or ran and did not come back. */
static void worker_drop(struct job_queue_item *it, void *ud)
{
    (void)ud;
    struct goprof_job *j = SKP_CONTAINER_OF(it, struct goprof_job, qi);
    fail_shutting_down(j);
    job_done(j);
}

skp_err collector_goprofile_start(struct collector *c, struct event_base *base)
{
    struct goprof_worker *w = skpx_calloc(1, sizeof(*w));
    if (!w)
        return SKP_ENOMEM;
    struct job_queue_ops ops = {.name = "goProfileReport worker",
                                .run = worker_run,
                                .done = worker_done,
                                .drop = worker_drop,
                                .ud = c};
    skp_err err = job_queue_start(base, &ops, &w->q);
    c->goprof = w;
    if (err)
        collector_goprofile_stop(c);
    return err;
}

void collector_goprofile_stop(struct collector *c)
{
    struct goprof_worker *w = c->goprof;
    if (!w)
        return;
    c->goprof = NULL; /* the jobs dropped below, and later turn steps, see the worker gone */
    job_queue_stop(w->q);
    skpx_free(w);
}

/* Hands j (a complete file) over: to the worker, or inline without one. Keeps a reference of
 * g for j. */
static void submit(struct goprof_call *g, struct goprof_job *j)
{
    struct collector *c = g->c;
    if (j->len == 0) {
        job_free(j);
        return;
    }
    j->g = g;
    g->n_jobs++;
    g->refs++;
    struct goprof_worker *w = c->goprof;
    if (!w) {
        job_run(j, collector_now(c));
        job_returned(j);
        while (!store_step(j)) {
        }
        job_done(j);
        return;
    }
    if (w->n_queued >= GOPROFILE_QUEUE_MAX) {
        snprintf(j->message, sizeof(j->message), "skyprofd: %u pprof files queued, retry later",
                 (unsigned)GOPROFILE_QUEUE_MAX);
        j->status = SKPX_GRPC_RESOURCE_EXHAUSTED;
        refused(c);
        job_done(j);
        return;
    }
    w->n_queued++;
    if (job_queue_submit(w->q, &j->qi) != SKP_OK) { /* stopping: as the stop's own jobs */
        w->n_queued--;
        worker_drop(&j->qi, c);
    }
}

/* A new file of task `tid`: the task must be a stored trace task. Returns SKPX_GRPC_OK or the
 * status with the reason in msg. */
static int new_file(struct goprof_call *g, const char *tid, char *msg, size_t msg_cap)
{
    struct collector *c = g->c;
    struct store_task t;
    memset(&t, 0, sizeof(t));
    skp_err err = store_get_task(c->store, tid, &t);
    store_task_cleanup(&t);
    if (err == SKP_ENOTFOUND) {
        refused(c);
        snprintf(msg, msg_cap, "skyprofd: no trace profiling task %.120s", tid);
        return SKPX_GRPC_NOT_FOUND;
    }
    if (err) {
        snprintf(msg, msg_cap, "skyprofd: task lookup failed: %s", skp_strerror(err));
        return SKPX_GRPC_UNAVAILABLE;
    }
    struct goprof_job *j = skpx_calloc(1, sizeof(*j));
    if (!j || !(j->task_id = skpx_strdup(tid))) {
        skpx_free(j);
        return SKPX_GRPC_RESOURCE_EXHAUSTED;
    }
    j->c = c;
    g->cur = j;
    return SKPX_GRPC_OK;
}

/* Appends a payload to the current file. */
static int append(struct goprof_call *g, const uint8_t *data, size_t n, char *msg, size_t cap)
{
    struct collector *c = g->c;
    struct goprof_job *j = g->cur;
    if ((uint64_t)j->len + n > max_bytes(c)) {
        refused(c);
        snprintf(msg, cap, "skyprofd: pprof file larger than %" PRIu64 " bytes", max_bytes(c));
        return SKPX_GRPC_RESOURCE_EXHAUSTED;
    }
    if (j->len + n > j->cap) {
        size_t nc = j->cap ? j->cap * 2 : 1u << 16;
        while (nc < j->len + n)
            nc *= 2;
        if (c->upload_bytes - j->cap + nc > COLLECTOR_UPLOAD_BUDGET_BYTES) {
            refused(c);
            snprintf(msg, cap, "skyprofd: upload budget exhausted");
            return SKPX_GRPC_RESOURCE_EXHAUSTED;
        }
        uint8_t *nb = skpx_realloc(j->buf, nc);
        if (!nb)
            return SKPX_GRPC_RESOURCE_EXHAUSTED;
        c->upload_bytes += nc - j->cap;
        j->buf = nb;
        j->cap = nc;
    }
    memcpy(j->buf + j->len, data, n);
    j->len += n;
    return SKPX_GRPC_OK;
}

static int on_message(struct goprof_call *g, const Skywalking__V3__GoProfileData *d, char *msg,
                      size_t msg_cap)
{
    const char *tid = d->taskid ? d->taskid : "";
    if (!g->cur || strcmp(g->cur->task_id, tid) != 0) {
        /* A new task id starts a new file (the previous one had no isLast). */
        if (g->cur) {
            struct goprof_job *prev = g->cur;
            g->cur = NULL;
            submit(g, prev);
            if (g->finished)
                return SKPX_GRPC_OK;
        }
        int st = new_file(g, tid, msg, msg_cap);
        if (st != SKPX_GRPC_OK)
            return st;
    }
    if (d->payload.len) {
        int st = append(g, d->payload.data, d->payload.len, msg, msg_cap);
        if (st != SKPX_GRPC_OK)
            return st;
    }
    if (d->islast) {
        struct goprof_job *j = g->cur;
        g->cur = NULL;
        submit(g, j);
    }
    return SKPX_GRPC_OK;
}

int collector_goprofile_on_message(struct skpx_grpc_call *call, void *ud,
                                   const ProtobufCMessage *msg, const uint8_t *raw, size_t raw_len)
{
    (void)raw;
    (void)raw_len;
    bool fresh;
    struct goprof_call *g = collector_call_state(call, sizeof(*g), &fresh);
    if (!g)
        return SKPX_GRPC_RESOURCE_EXHAUSTED;
    if (fresh) {
        g->call = call;
        g->c = ud;
    }
    if (g->finished)
        return SKPX_GRPC_OK; /* answered already: the rest is ignored */
    char why[200] = "";
    g->refs++;
    int st = on_message(g, (const void *)msg, why, sizeof(why));
    if (st != SKPX_GRPC_OK)
        call_fail(g, st, why[0] ? why : NULL);
    call_unref(g);
    return SKPX_GRPC_OK;
}

void collector_goprofile_on_end(struct skpx_grpc_call *call, void *ud)
{
    struct goprof_call *g = skpx_grpc_call_get_data(call);
    if (!g) {
        skpx_grpc_call_finish(call, collector_empty_commands(), SKPX_GRPC_OK, NULL);
        return;
    }
    (void)ud;
    g->refs++;
    g->ended = true;
    if (g->cur && !g->finished) {
        struct goprof_job *j = g->cur;
        g->cur = NULL;
        submit(g, j);
    }
    call_maybe_done(g);
    call_unref(g);
}

void collector_goprofile_on_close(struct skpx_grpc_call *call, void *ud, int status)
{
    (void)ud;
    (void)status;
    struct goprof_call *g = collector_call_take(call);
    if (!g)
        return;
    g->call = NULL;
    job_free(g->cur);
    g->cur = NULL;
    if (g->refs == 0)
        skpx_free(g);
}
