/* collector_tracing.c - TraceSegmentReportService (spec §5.4). Every segment's entry span
 * feeds the endpoint statistics (read from the wire bytes by segment_scan, no full decode);
 * the segment itself is decoded and stored only when the keep policy says so (segment_keep.h:
 * by default only profiled segments, held for a grace period when their snapshots have not
 * come yet). collect is a client stream (raw mode, so decoded segments can be kept past the
 * callback and written in batches); collectInSync is the unary alternative. The answer follows
 * the commit of the stored ones; held ones are in memory only (they are stored once profiled).
 *
 * The endpoint list of a task-free service is all of the statistics; the 1-s timer rolls
 * finished minutes up into the store and decides held segments whose grace ended. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/grow.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/sat.h"
#include <event2/event.h>

#include "language-agent/Tracing.pb-c.h"
#include "server/collector/collector.h"
#include "server/stats/endpoint_stats.h"
#include "server/stats/segment_keep.h"
#include "server/formats/segment_scan.h"

#define PATHS(method)                                                                              \
    "/skywalking.v3.TraceSegmentReportService/" method, "/TraceSegmentReportService/" method

struct seg_call {
    Skywalking__V3__SegmentObject *segs[COLLECTOR_SEGMENT_BATCH];
    size_t n;
    size_t wire_bytes; /* encoded size of the buffered segments */
};

static void seg_release(struct seg_call *s)
{
    for (size_t i = 0; i < s->n; i++)
        skywalking__v3__segment_object__free_unpacked(s->segs[i], &collector_pb_alloc);
    s->n = 0;
    s->wire_bytes = 0;
}

/* Plain rows of a batch of decoded segments, borrowing the protobuf objects' strings. */
struct seg_rows {
    struct store_segment *segs;
    struct store_span *spans;
    struct store_span_ref *refs;
    struct store_kv *kvs;
    struct store_span_log *logs;
};

static void seg_rows_cleanup(struct seg_rows *r)
{
    SKPX_FREE_ALL(r->segs, r->spans, r->refs, r->kvs, r->logs);
}

static size_t kv_rows(Skywalking__V3__KeyStringValuePair *const *kv, size_t n, struct store_kv *out)
{
    for (size_t i = 0; i < n; i++) {
        out[i].key = kv[i]->key;
        out[i].value = kv[i]->value;
    }
    return n;
}

static void span_row(const Skywalking__V3__SpanObject *sp, struct store_span *o, struct seg_rows *r,
                     size_t *at_ref, size_t *at_kv, size_t *at_log)
{
    o->span_id = sp->spanid;
    o->parent_span_id = sp->parentspanid;
    o->start_ms = sp->starttime;
    o->end_ms = sp->endtime;
    o->operation = sp->operationname;
    o->peer = sp->peer;
    o->type = sp->spantype <= SKYWALKING__V3__SPAN_TYPE__Local ? (enum store_span_type)sp->spantype
                                                               : STORE_SPAN_TYPE_UNKNOWN;
    o->layer = sp->spanlayer <= SKYWALKING__V3__SPAN_LAYER__FAAS
                   ? (enum store_span_layer)sp->spanlayer
                   : STORE_LAYER_UNKNOWN;
    o->component_id = sp->componentid;
    o->is_error = sp->iserror;
    o->refs = r->refs + *at_ref;
    o->n_refs = sp->n_refs;
    for (size_t i = 0; i < sp->n_refs; i++) {
        struct store_span_ref *rf = &r->refs[(*at_ref)++];
        rf->trace_id = sp->refs[i]->traceid;
        rf->parent_segment_id = sp->refs[i]->parenttracesegmentid;
        rf->parent_span_id = sp->refs[i]->parentspanid;
        rf->cross_thread = sp->refs[i]->reftype == SKYWALKING__V3__REF_TYPE__CrossThread;
    }
    o->tags = r->kvs + *at_kv;
    o->n_tags = kv_rows(sp->tags, sp->n_tags, r->kvs + *at_kv);
    *at_kv += o->n_tags;
    o->logs = r->logs + *at_log;
    o->n_logs = sp->n_logs;
    for (size_t i = 0; i < sp->n_logs; i++) {
        struct store_span_log *lo = &r->logs[(*at_log)++];
        lo->time_ms = sp->logs[i]->time;
        lo->data = r->kvs + *at_kv;
        lo->n_data = kv_rows(sp->logs[i]->data, sp->logs[i]->n_data, r->kvs + *at_kv);
        *at_kv += lo->n_data;
    }
}

/* Turns decoded SegmentObjects into the store's rows (spec §5.4 field by field).
 * Errors: SKP_ENOMEM. */
static skp_err seg_rows_build(Skywalking__V3__SegmentObject *const *segs, size_t n,
                              struct seg_rows *r)
{
    size_t n_spans = 0, n_refs = 0, n_kv = 0, n_logs = 0;
    memset(r, 0, sizeof(*r));
    for (size_t g = 0; g < n; g++) {
        n_spans += segs[g]->n_spans;
        for (size_t i = 0; i < segs[g]->n_spans; i++) {
            const Skywalking__V3__SpanObject *sp = segs[g]->spans[i];
            n_refs += sp->n_refs;
            n_kv += sp->n_tags;
            n_logs += sp->n_logs;
            for (size_t j = 0; j < sp->n_logs; j++)
                n_kv += sp->logs[j]->n_data;
        }
    }
    r->segs = skpx_calloc(n ? n : 1, sizeof(*r->segs));
    r->spans = skpx_calloc(n_spans ? n_spans : 1, sizeof(*r->spans));
    r->refs = skpx_calloc(n_refs ? n_refs : 1, sizeof(*r->refs));
    r->kvs = skpx_calloc(n_kv ? n_kv : 1, sizeof(*r->kvs));
    r->logs = skpx_calloc(n_logs ? n_logs : 1, sizeof(*r->logs));
    if (!r->segs || !r->spans || !r->refs || !r->kvs || !r->logs) {
        seg_rows_cleanup(r);
        memset(r, 0, sizeof(*r));
        return SKP_ENOMEM;
    }
    size_t at_span = 0, at_ref = 0, at_kv = 0, at_log = 0;
    for (size_t g = 0; g < n; g++) {
        const Skywalking__V3__SegmentObject *so = segs[g];
        struct store_segment *o = &r->segs[g];
        o->segment_id = so->tracesegmentid;
        o->trace_id = so->traceid;
        o->service = so->service;
        o->instance = so->serviceinstance;
        o->spans = r->spans + at_span;
        o->n_spans = so->n_spans;
        for (size_t i = 0; i < so->n_spans; i++)
            span_row(so->spans[i], &r->spans[at_span++], r, &at_ref, &at_kv, &at_log);
    }
    return SKP_OK;
}

static int seg_write(struct collector *c, Skywalking__V3__SegmentObject *const *segs, size_t n)
{
    if (n == 0)
        return SKPX_GRPC_OK;
    struct seg_rows rows;
    skp_err err = seg_rows_build(segs, n, &rows);
    if (!err) {
        err = store_insert_segments(c->store, rows.segs, n, collector_now(c));
        seg_rows_cleanup(&rows);
    }
    if (err) {
        c->metrics->segment_errors++;
        static struct skpx_log_limit lim;
        skpx_log_limited(&lim, SKPX_LOG_ERROR, "%zu trace segment(s) not stored: %s", n,
                         skp_strerror(err));
        return err == SKP_ENOMEM ? SKPX_GRPC_RESOURCE_EXHAUSTED : SKPX_GRPC_UNAVAILABLE;
    }
    c->metrics->segments_stored += n;
    return SKPX_GRPC_OK;
}

/* ---- the split: statistics for every segment, storage for the kept ones ---- */

/* Profile tasks whose window (plus the grace) covers now, refreshed once a second. */
struct task_ref {
    char *service;
    char *endpoint;
};

struct collector_segs {
    struct event *timer;
    struct task_ref *tasks;
    size_t n_tasks, cap_tasks;
    int64_t tasks_at_ms; /* last refresh; 0 = never */
    int64_t now_ms;      /* for the refresh callback */
    uint64_t writer;     /* this run's id in endpoint_minutes */
};

#define SEGS_TASK_REFRESH_MS 1000
/* Longest name copied out of a segment for the statistics (longer ones are truncated). */
#define SEGS_NAME_MAX 512

static void tasks_clear(struct collector_segs *g)
{
    for (size_t i = 0; i < g->n_tasks; i++) {
        skpx_free(g->tasks[i].service);
        skpx_free(g->tasks[i].endpoint);
    }
    g->n_tasks = 0;
}

static skp_err task_seen(void *ud, const struct store_task *t)
{
    struct collector *c = ud;
    struct collector_segs *g = c->segs;
    int64_t grace = segment_keep_policy(c->keep)->grace_ms;
    if (t->start_time - grace > g->now_ms ||
        t->start_time + (int64_t)t->duration_min * 60000 + grace < g->now_ms)
        return SKP_OK;
    if (skpx_grow(&g->tasks, &g->cap_tasks, g->n_tasks + 1, sizeof(*g->tasks), 8))
        return SKP_ENOMEM;
    struct task_ref *r = &g->tasks[g->n_tasks];
    r->service = skpx_strdup(t->service);
    r->endpoint = skpx_strdup(t->endpoint);
    if (!r->service || !r->endpoint) {
        skpx_free(r->service);
        skpx_free(r->endpoint);
        return SKP_ENOMEM;
    }
    g->n_tasks++;
    return SKP_OK;
}

static void tasks_refresh(struct collector *c, int64_t now_ms)
{
    struct collector_segs *g = c->segs;
    if (g->tasks_at_ms && now_ms - g->tasks_at_ms < SEGS_TASK_REFRESH_MS &&
        now_ms >= g->tasks_at_ms)
        return;
    tasks_clear(g);
    g->now_ms = now_ms;
    g->tasks_at_ms = now_ms;
    if (store_list_tasks(c->store, NULL, NULL, task_seen, c) != SKP_OK) {
        /* the store logged it; without the list, candidates are found by snapshots only */
    }
}

static bool slice_eq(const struct segment_slice *a, const char *b)
{
    return a->len == strlen(b) && memcmp(a->ptr, b, a->len) == 0;
}

static bool under_task(struct collector *c, const struct segment_scan *sc, int64_t now_ms)
{
    tasks_refresh(c, now_ms);
    const struct collector_segs *g = c->segs;
    for (size_t i = 0; i < g->n_tasks; i++)
        if (slice_eq(&sc->service, g->tasks[i].service) &&
            slice_eq(&sc->endpoint, g->tasks[i].endpoint))
            return true;
    return false;
}

static void slice_copy(char *dst, const struct segment_slice *s)
{
    size_t n = s->len < SEGS_NAME_MAX ? s->len : SEGS_NAME_MAX;
    memcpy(dst, s->ptr, n);
    dst[n] = '\0';
}

/* Statistics from the entry span, then the keep decision. True: decode and store it now. A
 * segment the scanner cannot read is left to the full decoder (which rejects it). */
/* The span limit, checked on the wire bytes before anything is decoded: a segment of millions
 * of empty 2-byte spans would otherwise cost the event loop a decode of each. Counts and logs
 * (rate-limited) a refusal. */
static bool too_many_spans(struct collector *c, size_t n_spans)
{
    if (!c->max_segment_spans || n_spans <= c->max_segment_spans)
        return false;
    c->metrics->segments_refused++;
    static struct skpx_log_limit lim;
    skpx_log_limited(&lim, SKPX_LOG_WARN,
                     "trace segment with %zu spans refused (--max-segment-spans %" PRIu64 ")",
                     n_spans, c->max_segment_spans);
    return true;
}

/* Decoding a segment counts what it allocates: a segment within the span limit can still carry
 * millions of empty tags or logs, each a struct of its own once decoded. Blocks are ordinary
 * skpx allocations, so the decoded segment is freed with collector_pb_alloc as usual. */
struct bounded_alloc {
    size_t used;
    size_t limit;
    bool over;
};

static void *bounded_alloc_fn(void *ud, size_t n)
{
    struct bounded_alloc *b = ud;
    if (b->limit && (n > b->limit || b->used > b->limit - n)) {
        b->over = true;
        return NULL;
    }
    b->used += n;
    return skpx_malloc(n);
}

static void bounded_free_fn(void *ud, void *p)
{
    (void)ud;
    skpx_free(p);
}

/* Decodes one segment within --max-decoded-bytes; *too_big tells a refusal from bad bytes. */
static Skywalking__V3__SegmentObject *segment_decode(struct collector *c, const uint8_t *raw,
                                                     size_t len, bool *too_big)
{
    struct bounded_alloc b = {.limit = (size_t)c->max_decoded_bytes};
    ProtobufCAllocator a = {bounded_alloc_fn, bounded_free_fn, &b};
    Skywalking__V3__SegmentObject *seg = skywalking__v3__segment_object__unpack(&a, len, raw);
    *too_big = !seg && b.over;
    if (*too_big) {
        c->metrics->segments_refused++;
        static struct skpx_log_limit lim;
        skpx_log_limited(&lim, SKPX_LOG_WARN,
                         "trace segment of %zu bytes refused: it decodes past --max-decoded-bytes "
                         "(%" PRIu64 ")",
                         len, c->max_decoded_bytes);
    }
    return seg;
}

/* `sc` is the segment's scan, NULL when its wire bytes did not scan (the decode then decides). */
static bool segment_wanted(struct collector *c, const struct segment_scan *scan, const uint8_t *raw,
                           size_t raw_len)
{
    if (!c->keep && !c->stats)
        return true;
    if (!scan)
        return true;
    struct segment_scan sc = *scan;
    int64_t now = collector_now(c);
    static char svc[SEGS_NAME_MAX + 1], inst[SEGS_NAME_MAX + 1], ep[SEGS_NAME_MAX + 1];
    if (c->stats && sc.has_entry) {
        slice_copy(svc, &sc.service);
        slice_copy(inst, &sc.instance);
        slice_copy(ep, &sc.endpoint);
        if (endpoint_stats_record(c->stats, svc, inst, ep, sc.entry_end_ms,
                                  skpx_sat_sub_i64(sc.entry_end_ms, sc.entry_start_ms),
                                  sc.entry_is_error, now) != SKP_OK) {
            /* counted by endpoint_stats */
        }
        collector_continuous_record(c, svc, inst, ep, sc.entry_end_ms,
                                    skpx_sat_sub_i64(sc.entry_end_ms, sc.entry_start_ms),
                                    sc.entry_is_error);
    }
    if (!c->keep || sc.segment_id.len == 0)
        return true; /* no id: the store skips it, the decode still validates it */
    bool task = under_task(c, &sc, now);
    bool has_snapshots = false;
    if (task) {
        char id[SEGS_NAME_MAX + 1];
        slice_copy(id, &sc.segment_id);
        if (store_segment_has_snapshots(c->store, id, &has_snapshots) != SKP_OK)
            has_snapshots = false;
    }
    enum keep_decision d = segment_keep_decide(c->keep, sc.segment_id.ptr, sc.segment_id.len, task,
                                               has_snapshots, raw, raw_len, now);
    if (d == KEEP_DROP)
        c->metrics->segments_dropped++;
    return d == KEEP_STORE;
}

/* Stores one held segment (decoded from its copy) in its own batch. */
static bool store_held(struct collector *c, const uint8_t *raw, size_t len)
{
    Skywalking__V3__SegmentObject *seg =
        skywalking__v3__segment_object__unpack(&collector_pb_alloc, len, raw);
    if (!seg)
        return false;
    int st = seg_write(c, &seg, 1);
    skywalking__v3__segment_object__free_unpacked(seg, &collector_pb_alloc);
    return st == SKPX_GRPC_OK;
}

static bool on_held(void *ud, const char *segment_id, const uint8_t *raw, size_t len, bool ready)
{
    struct collector *c = ud;
    bool profiled = ready;
    if (!profiled && store_segment_has_snapshots(c->store, segment_id, &profiled) != SKP_OK)
        profiled = true; /* cannot tell: store rather than lose it */
    if (!profiled) {
        c->metrics->segments_dropped++;
        return false;
    }
    return store_held(c, raw, len);
}

void collector_segments_profiled(struct collector *c, const struct store_snapshot *v, size_t n)
{
    if (!c->keep)
        return;
    int64_t now = collector_now(c);
    const char *prev = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!v[i].segment_id || (prev && strcmp(prev, v[i].segment_id) == 0))
            continue;
        prev = v[i].segment_id;
        segment_keep_mark_profiled(c->keep, v[i].segment_id, now);
    }
    if (segment_keep_has_ready(c->keep))
        segment_keep_drain(c->keep, now, false, on_held, c);
}

static skp_err put_minutes(void *ud, const struct es_minute_row *rows, size_t n)
{
    struct collector *c = ud;
    struct store_endpoint_minute *v = skpx_calloc(n ? n : 1, sizeof(*v));
    uint8_t **blobs = skpx_calloc(n ? n : 1, sizeof(*blobs));
    skp_err err = v && blobs ? SKP_OK : SKP_ENOMEM;
    for (size_t i = 0; i < n && !err; i++) {
        blobs[i] = skpx_malloc(es_hist_encoded_max(rows[i].hist) + 1);
        if (!blobs[i]) {
            err = SKP_ENOMEM;
            break;
        }
        v[i] = (struct store_endpoint_minute){.writer = c->segs->writer,
                                              .service = rows[i].service,
                                              .instance = rows[i].instance,
                                              .endpoint = rows[i].endpoint,
                                              .minute_ms = rows[i].minute_ms,
                                              .count = rows[i].count,
                                              .errors = rows[i].errors,
                                              .hist = blobs[i],
                                              .hist_len = es_hist_encode(rows[i].hist, blobs[i])};
    }
    if (!err)
        err = store_put_endpoint_minutes(c->store, v, n);
    for (size_t i = 0; blobs && i < n; i++)
        skpx_free(blobs[i]);
    skpx_free(blobs);
    skpx_free(v);
    return err;
}

/* A minute is rolled up once it ended this long ago (segments arrive a few seconds late; a
 * later one rolls it up again). */
#define SEGS_ROLLUP_GRACE_MS 10000

void collector_segments_tick(struct collector *c)
{
    int64_t now = collector_now(c);
    if (c->keep)
        segment_keep_drain(c->keep, now, true, on_held, c);
    /* shared database: every changed minute, the current one too (grace -1 min), each tick,
     * as this collector's partials for the others to merge (one multi-row statement) */
    int64_t grace = c->shared_stats ? -60000 : SEGS_ROLLUP_GRACE_MS;
    if (c->stats && endpoint_stats_flush(c->stats, now, grace, put_minutes, c) != SKP_OK) {
        /* logged by the store; the minutes stay dirty and are offered again next tick */
    }
}

static void on_tick(evutil_socket_t fd, short what, void *ud)
{
    (void)fd;
    (void)what;
    collector_segments_tick(ud);
}

skp_err collector_segments_start(struct collector *c, struct event_base *base,
                                 const struct keep_policy *p)
{
    skp_err err = SKP_ENOMEM;
    c->segs = skpx_calloc(1, sizeof(*c->segs));
    if (!c->segs)
        goto fail;
    /* start time and pid: distinct for every run and every daemon sharing a database */
    c->segs->writer = (uint64_t)skpx_now_ms() << 20 ^ (uint64_t)getpid();
    const struct endpoint_stats_opts eo = {.max_endpoints_per_service =
                                               c->max_endpoints_per_service};
    err = endpoint_stats_new(&eo, &c->stats);
    if (!err)
        err = segment_keep_new(p, &c->keep);
    if (err)
        goto fail;
    if (base) {
        c->segs->timer = event_new(base, -1, EV_PERSIST, on_tick, c);
        struct timeval tv = {.tv_sec = 1};
        if (!c->segs->timer || event_add(c->segs->timer, &tv) != 0) {
            err = SKP_ENOMEM;
            goto fail;
        }
    }
    return SKP_OK;
fail:
    collector_segments_stop(c);
    return err;
}

void collector_segments_stop(struct collector *c)
{
    if (!c || !c->segs)
        return;
    if (c->segs->timer)
        event_free(c->segs->timer);
    if (c->keep)
        segment_keep_drain(c->keep, INT64_MAX / 2, true, on_held, c);
    if (c->stats && endpoint_stats_flush(c->stats, INT64_MAX / 2, 0, put_minutes, c) != SKP_OK) {
        /* logged by the store */
    }
    tasks_clear(c->segs);
    skpx_free(c->segs->tasks);
    skpx_free(c->segs);
    c->segs = NULL;
    endpoint_stats_free(c->stats);
    c->stats = NULL;
    segment_keep_free(c->keep);
    c->keep = NULL;
}

static int seg_on_message(struct skpx_grpc_call *call, void *ud, const ProtobufCMessage *msg,
                          const uint8_t *raw, size_t raw_len)
{
    (void)msg;
    struct collector *c = ud;
    struct seg_call *s = collector_call_state(call, sizeof(*s), NULL);
    if (!s)
        return SKPX_GRPC_RESOURCE_EXHAUSTED;
    c->metrics->segments_received++;
    struct segment_scan sc;
    bool scanned = segment_scan(raw, raw_len, &sc) == SKP_OK;
    if (scanned && too_many_spans(c, sc.n_spans))
        return SKPX_GRPC_RESOURCE_EXHAUSTED;
    if (!segment_wanted(c, scanned ? &sc : NULL, raw, raw_len))
        return SKPX_GRPC_OK;
    bool too_big = false;
    Skywalking__V3__SegmentObject *seg = segment_decode(c, raw, raw_len, &too_big);
    if (!seg)
        return too_big ? SKPX_GRPC_RESOURCE_EXHAUSTED : SKPX_GRPC_INVALID_ARGUMENT;
    s->segs[s->n++] = seg;
    s->wire_bytes += raw_len;
    if (s->n == COLLECTOR_SEGMENT_BATCH || s->wire_bytes >= COLLECTOR_SEGMENT_BATCH_BYTES) {
        int st = seg_write(c, s->segs, s->n);
        seg_release(s);
        return st;
    }
    return SKPX_GRPC_OK;
}

static void seg_on_end(struct skpx_grpc_call *call, void *ud)
{
    struct collector *c = ud;
    struct seg_call *s = skpx_grpc_call_get_data(call);
    int st = SKPX_GRPC_OK;
    if (s) {
        st = seg_write(c, s->segs, s->n);
        seg_release(s);
    }
    if (st != SKPX_GRPC_OK)
        skpx_grpc_call_finish(call, NULL, st, "skyprofd: segments not stored");
    else
        skpx_grpc_call_finish(call, collector_empty_commands(), SKPX_GRPC_OK, NULL);
}

static void seg_on_close(struct skpx_grpc_call *call, void *ud, int status)
{
    (void)ud;
    (void)status;
    struct seg_call *s = collector_call_take(call);
    if (s) {
        seg_release(s);
        skpx_free(s);
    }
}

static int sync_on_message(struct skpx_grpc_call *call, void *ud, const ProtobufCMessage *msg,
                           const uint8_t *raw, size_t raw_len)
{
    (void)raw;
    (void)raw_len;
    struct collector *c = ud;
    const Skywalking__V3__SegmentCollection *col = (const void *)msg;
    struct collector_unary *u = collector_unary_attach(call);
    if (!u)
        return SKPX_GRPC_RESOURCE_EXHAUSTED;
    c->metrics->segments_received += col->n_segments;
    /* collectInSync arrives decoded (its message size is the bound); the span limit still
     * refuses the call, so both methods accept the same segments. */
    for (size_t i = 0; i < col->n_segments; i++)
        if (too_many_spans(c, col->segments[i]->n_spans))
            return SKPX_GRPC_RESOURCE_EXHAUSTED;
    Skywalking__V3__SegmentObject **keep =
        skpx_calloc(col->n_segments ? col->n_segments : 1, sizeof(*keep));
    if (!keep)
        return SKPX_GRPC_RESOURCE_EXHAUSTED;
    size_t n_keep = 0;
    for (size_t i = 0; i < col->n_segments; i++) {
        const ProtobufCMessage *m = &col->segments[i]->base;
        size_t len = protobuf_c_message_get_packed_size(m);
        uint8_t *buf = skpx_malloc(len ? len : 1);
        if (!buf) {
            keep[n_keep++] = col->segments[i]; /* cannot scan it: store it */
            continue;
        }
        protobuf_c_message_pack(m, buf);
        struct segment_scan sc;
        bool scanned = segment_scan(buf, len, &sc) == SKP_OK;
        if (segment_wanted(c, scanned ? &sc : NULL, buf, len))
            keep[n_keep++] = col->segments[i];
        skpx_free(buf);
    }
    int st = seg_write(c, keep, n_keep);
    skpx_free(keep);
    if (st != SKPX_GRPC_OK)
        return collector_unary_fail(u, st, "skyprofd: segments not stored");
    return SKPX_GRPC_OK;
}

skp_err collector_tracing_register(struct collector *c, struct skpx_grpc_server *srv)
{
    struct skpx_grpc_method m = {
        .client_streaming = true,
        .request_desc = NULL,
        .on_start = collector_on_start,
        .on_message = seg_on_message,
        .on_end = seg_on_end,
        .on_close = seg_on_close,
        .ud = c,
    };
    skp_err err = collector_add(srv, PATHS("collect"), m);
    if (err)
        return err;
    return collector_add(srv, PATHS("collectInSync"),
                         collector_unary_method(&skywalking__v3__segment_collection__descriptor,
                                                sync_on_message, c));
}
