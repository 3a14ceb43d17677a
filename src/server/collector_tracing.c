/* collector_tracing.c - TraceSegmentReportService: segments are stored so the UI can show the
 * spans of profiled requests (spec §5.4). collect is a client stream (decoded here, in raw
 * mode, so the decoded segments can be kept past the callback and written in batches);
 * collectInSync is the unary alternative. As for snapshots, the answer follows the commit. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "language-agent/Tracing.pb-c.h"
#include "server/collector.h"

#define PATHS(method)                                                                              \
    "/skywalking.v3.TraceSegmentReportService/" method, "/TraceSegmentReportService/" method

struct seg_call {
    Skywalking__V3__SegmentObject *segs[COLLECTOR_SEGMENT_BATCH];
    size_t n;
    size_t wire_bytes;         /* encoded size of the buffered segments */
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
    skpx_free(r->segs);
    skpx_free(r->spans);
    skpx_free(r->refs);
    skpx_free(r->kvs);
    skpx_free(r->logs);
}

static size_t kv_rows(Skywalking__V3__KeyStringValuePair *const *kv, size_t n,
                      struct store_kv *out)
{
    for (size_t i = 0; i < n; i++) {
        out[i].key = kv[i]->key;
        out[i].value = kv[i]->value;
    }
    return n;
}

static void span_row(const Skywalking__V3__SpanObject *sp, struct store_span *o,
                     struct seg_rows *r, size_t *at_ref, size_t *at_kv, size_t *at_log)
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

static int seg_on_message(struct skpx_grpc_call *call, void *ud, const ProtobufCMessage *msg,
                          const uint8_t *raw, size_t raw_len)
{
    (void)msg;
    struct collector *c = ud;
    struct seg_call *s = skpx_grpc_call_get_data(call);
    if (!s) {
        s = skpx_calloc(1, sizeof(*s));
        if (!s)
            return SKPX_GRPC_RESOURCE_EXHAUSTED;
        skpx_grpc_call_set_data(call, s);
    }
    Skywalking__V3__SegmentObject *seg =
        skywalking__v3__segment_object__unpack(&collector_pb_alloc, raw_len, raw);
    if (!seg)
        return SKPX_GRPC_INVALID_ARGUMENT;
    c->metrics->segments_received++;
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
    struct seg_call *s = skpx_grpc_call_get_data(call);
    if (s) {
        seg_release(s);
        skpx_grpc_call_set_data(call, NULL);
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
    int st = seg_write(c, col->segments, col->n_segments);
    if (st != SKPX_GRPC_OK) {
        u->status = st;
        snprintf(u->message, sizeof(u->message), "skyprofd: segments not stored");
    }
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
    struct skpx_grpc_method u = {
        .client_streaming = false,
        .request_desc = &skywalking__v3__segment_collection__descriptor,
        .on_start = collector_on_start,
        .on_message = sync_on_message,
        .on_end = collector_unary_on_end,
        .on_close = collector_unary_on_close,
        .ud = c,
    };
    return collector_add(srv, PATHS("collectInSync"), u);
}
