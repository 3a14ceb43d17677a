/* collector_tracing.c - TraceSegmentReportService: segments are stored so the UI can show the
 * spans of profiled requests (spec §5.4). collect is a client stream (decoded here, in raw
 * mode, so the decoded segments can be kept past the callback and written in batches);
 * collectInSync is the unary alternative. As for snapshots, the answer follows the commit. */
#include <inttypes.h>
#include <stdio.h>

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

static int seg_write(struct collector *c, Skywalking__V3__SegmentObject *const *segs, size_t n)
{
    if (n == 0)
        return SKPX_GRPC_OK;
    skp_err err = store_insert_segments(c->store, segs, n, collector_now(c));
    if (err) {
        c->metrics->segment_errors++;
        static struct collector_ratelimit rl;
        uint64_t skipped = 0;
        if (collector_log_allow(&rl, skpx_mono_ms(), &skipped))
            SKPX_ERROR("%zu trace segment(s) not stored: %s (%" PRIu64
                       " more failed batches since the last report)",
                       n, skp_strerror(err), skipped);
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
