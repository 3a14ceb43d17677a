/* Fuzz target of the collectors' message handling: the input picks a gRPC method of skyprofd
 * and carries the protobuf messages of one call; the target frames them as a well-behaved
 * agent would (nghttp2 client, HEADERS with the method's path, DATA with length-prefixed
 * messages, END_STREAM unless asked not to) and sends them to the real server, so mutations
 * land in the protobuf decoders and the handlers rather than in the HTTP/2 framing.
 *   byte 0      method (index into kMethods, modulo)
 *   byte 1      bit 0: leave the stream open (no END_STREAM: the call is reset by the close)
 *               bit 1: send an "authentication" header (the server has none configured)
 *   then        messages: u16 big-endian length + bytes, the last one may be cut short
 * With SKP_FUZZ_DUMP=<folder> set, each conversation's HTTP/2 bytes are also written there
 * after the preface (how the grpc_h2 target's seeds are made). */
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "wire/grpc_frame.h"

static const char *const kMethods[] = {
    "/skywalking.v3.TraceSegmentReportService/collect",
    "/skywalking.v3.TraceSegmentReportService/collectInSync",
    "/skywalking.v3.ManagementService/reportInstanceProperties",
    "/skywalking.v3.ManagementService/keepAlive",
    "/skywalking.v3.ProfileTask/getProfileTaskCommands",
    "/skywalking.v3.ProfileTask/reportTaskFinish",
    "/skywalking.v3.ProfileTask/collectSnapshot",
    "/skywalking.v3.ProfileTask/goProfileReport",
    "/skywalking.v10.PprofTask/getPprofTaskCommands",
    "/skywalking.v10.PprofTask/collect",
    "/skywalking.v10.AsyncProfilerTask/getAsyncProfilerTaskCommands",
    "/skywalking.v10.AsyncProfilerTask/collect",
    "/skywalking.v3.LogReportService/collect",
    "/skywalking.v3.ConfigurationDiscoveryService/fetchConfigurations",
    "/ProfileTask/collectSnapshot",
    "/skywalking.v3.NoSuchService/nothing",
};
#define N_METHODS (sizeof(kMethods) / sizeof(kMethods[0]))

struct out {
    uint8_t *p;
    size_t n, cap;
};

static void out_add(struct out *o, const uint8_t *d, size_t n)
{
    if (n == 0)
        return;
    if (o->n + n > o->cap) {
        size_t c = o->cap ? o->cap : 4096;
        while (c < o->n + n)
            c *= 2;
        o->p = realloc(o->p, c);
        FUZZ_CHECK(o->p);
        o->cap = c;
    }
    memcpy(o->p + o->n, d, n);
    o->n += n;
}

struct body {
    const uint8_t *grpc; /* the length-prefixed messages */
    size_t len, off;
    bool end_stream;
};

static ssize_t on_send(nghttp2_session *s, const uint8_t *d, size_t n, int flags, void *ud)
{
    (void)s;
    (void)flags;
    out_add(ud, d, n);
    return (ssize_t)n;
}

static ssize_t body_read(nghttp2_session *s, int32_t sid, uint8_t *buf, size_t cap, uint32_t *flags,
                         nghttp2_data_source *src, void *ud)
{
    (void)s;
    (void)sid;
    (void)ud;
    struct body *b = src->ptr;
    size_t n = b->len - b->off < cap ? b->len - b->off : cap;
    if (n)
        memcpy(buf, b->grpc + b->off, n);
    b->off += n;
    if (b->off == b->len) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        if (!b->end_stream)
            *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    }
    return (ssize_t)n;
}

#define NV(n, v)                                                                                   \
    {                                                                                              \
        (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE             \
    }

static void dump(const uint8_t *p, size_t n)
{
    const char *dir = getenv("SKP_FUZZ_DUMP");
    if (!dir)
        return;
    static unsigned k;
    char path[512];
    snprintf(path, sizeof(path), "%s/conv-%04u", dir, k++);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(p, 1, n, f);
        fclose(f);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 || size > (256u << 10))
        return 0;
    fuzz_server_start();
    const char *path = kMethods[data[0] % N_METHODS];
    struct out grpc = {0}, wire = {0};
    for (size_t i = 2; i < size;) {
        size_t n = size - i >= 2 ? (size_t)data[i] << 8 | data[i + 1] : 0;
        i += size - i >= 2 ? 2 : size - i;
        if (n > size - i)
            n = size - i;
        uint8_t pre[SKPX_GRPC_PREFIX_LEN];
        skpx_grpc_prefix_write(pre, (uint32_t)n);
        out_add(&grpc, pre, sizeof(pre));
        out_add(&grpc, data + i, n);
        i += n;
    }
    nghttp2_session_callbacks *cb;
    FUZZ_CHECK(nghttp2_session_callbacks_new(&cb) == 0);
    nghttp2_session_callbacks_set_send_callback(cb, on_send);
    nghttp2_session *s;
    FUZZ_CHECK(nghttp2_session_client_new(&s, cb, &wire) == 0);
    nghttp2_session_callbacks_del(cb);
    FUZZ_CHECK(nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, NULL, 0) == 0);
    nghttp2_nv hdrs[] = {
        NV(":method", "POST"),
        NV(":scheme", "http"),
        NV(":path", path),
        NV(":authority", "127.0.0.1"),
        NV("content-type", "application/grpc"),
        NV("te", "trailers"),
        NV("authentication", "token-x"),
    };
    size_t n_hdrs = sizeof(hdrs) / sizeof(hdrs[0]) - ((data[1] & 2) ? 0 : 1);
    struct body b = {.grpc = grpc.p, .len = grpc.n, .end_stream = !(data[1] & 1)};
    nghttp2_data_provider dp = {.source.ptr = &b, .read_callback = body_read};
    FUZZ_CHECK(nghttp2_submit_request(s, NULL, hdrs, n_hdrs, &dp, NULL) > 0);
    FUZZ_CHECK(nghttp2_session_send(s) == 0);
    nghttp2_session_del(s);
    /* The client's preface is written by the harness. */
    static const size_t preface_len = 24;
    FUZZ_CHECK(wire.n >= preface_len);
    dump(wire.p + preface_len, wire.n - preface_len);
    fuzz_server_grpc_exchange(wire.p + preface_len, wire.n - preface_len);
    free(grpc.p);
    free(wire.p);
    return 0;
}
