/* grpc_client.c - gRPC client over HTTP/2 cleartext: one nghttp2 client session on one plain
 * non-blocking TCP socket, driven by poll() from the calling thread. No threads, no signals.
 *
 * Design: a call is a single stream; the API is blocking, so at most one call is in flight and
 * its state lives inside the client (`struct call`). nghttp2 callbacks look the call up by
 * stream id, so callbacks about an abandoned stream (timed out, reset) are ignored. Outgoing
 * bytes flow: message source -> packed with its 5-byte prefix straight into the DATA frame
 * nghttp2 asks for (only a message straddling two frames, or the unary request, goes through
 * `stage`) -> `out` (filled from nghttp2_session_mem_send up to OUT_HIGH_BYTES) -> one
 * send(MSG_NOSIGNAL) per fill. The message source is therefore only pulled while `out` has room
 * and the peer's flow-control window is open, which bounds memory whatever the producer does
 * (request messages are also limited to max_msg; timeout_ms <= 0 means
 * DEFAULT_CALL_TIMEOUT_MS, never "no deadline"; a grpc-status of DEADLINE_EXCEEDED from the
 * server is reported as SKP_ETIMEDOUT with res->status 4). Responses are reassembled by the
 * grpc_frame reader (max_msg limit) and unpacked with protobuf-c's default allocator, as the
 * header's contract (protobuf_c_message_free_unpacked(*resp, NULL)) requires.
 *
 * Connection policy: opened lazily by the first call; a connection that fails before serving
 * any call (connect error, peer closing at once, silent peer) schedules a capped exponential
 * backoff with jitter, during which calls fail at once with SKP_EUNAVAILABLE; any call that
 * receives a grpc-status (even non-OK) proves the server alive and resets the backoff. Losing a
 * connection that did serve calls allows an immediate reconnect. Before each call an idle
 * connection is checked without blocking, so a server-side idle close or GOAWAY leads to a
 * fresh connection instead of a failed call.
 *
 * Fork: the pid that opened the connection is remembered; a forked child's first use closes
 * its copy of the fd and frees its copy of the session (nghttp2_session_del only frees memory;
 * nothing is written to the shared socket) and connects anew. */
#include "wire/grpc_client.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/grow.h"
#include "common/log.h"
#include "common/pct.h"

/* Receive window (per stream and for the connection): the 64 KiB HTTP/2 default throttles
 * streaming on any link with latency; 16 MiB matches what gRPC implementations use with BDP. */
#define CLIENT_WINDOW_BYTES (16 * 1024 * 1024)
/* Stop asking nghttp2 for frames once this many bytes wait in `out`: it is the coalescing unit
 * of send() (so streaming sends are >= 64 KiB each) and the bound on buffered output. */
#define OUT_HIGH_BYTES (256 * 1024)
/* Hard cap of `out`: OUT_HIGH_BYTES plus the largest chunk nghttp2_session_mem_send returns
 * (a DATA frame of at most 16 KiB + 9, or a HEADERS block well under this). */
#define OUT_CAP_BYTES (1024 * 1024)
#define OUT_INIT_BYTES (16 * 1024)
/* Initial size of the staging buffer for packed request messages: one default DATA frame
 * (16 KiB) plus room for a typical message. It grows to one frame + the largest message. */
#define STAGE_INIT_BYTES (32 * 1024)
/* recv() buffer (responses are small: Commands), and how many reads one wakeup may do before
 * producing output again. */
#define IN_BUF_BYTES (16 * 1024)
#define READS_PER_WAKEUP 8
#define DEFAULT_CONNECT_TIMEOUT_MS 3000
#define DEFAULT_BACKOFF_MIN_MS 500
#define DEFAULT_BACKOFF_MAX_MS 30000
/* A call given timeout_ms <= 0 still gets a deadline: an agent must never block forever. */
#define DEFAULT_CALL_TIMEOUT_MS 30000
/* Longest accepted target / metadata value (copied into every request's headers). */
#define MAX_TARGET_LEN 512
#define MAX_METADATA_LEN 4096

/* State of the one call in flight. Reset at the start of every call. */
struct call {
    bool is_active; /* callbacks for stream_id belong to this call */
    int32_t stream_id;
    bool is_done; /* remote END_STREAM, stream closed, or a local error */
    bool is_remote_closed;
    bool is_stream_closed;
    bool is_reset; /* closed by RST_STREAM before END_STREAM */
    uint32_t reset_code;
    skp_err err; /* first local error, SKP_OK if none */
    char err_msg[160];
    /* request source */
    skpx_grpc_next_cb next;
    skpx_grpc_next_resp_cb next_resp; /* gated calls (skpx_grpc_client_stream_gated) */
    void *next_ud;
    bool is_src_eof;
    bool is_waiting; /* gated source asked to wait for a response: data deferred */
    /* response */
    const ProtobufCMessageDescriptor *resp_desc;
    ProtobufCMessage *resp; /* owned until handed to the caller */
    unsigned n_resp_msgs;
    struct skpx_grpc_reader reader;
    bool got_headers;
    int http_status;
    bool is_content_type_ok;
    bool has_grpc_status;
    int grpc_status;
    char grpc_message[256];
};

struct skpx_grpc_client {
    /* configuration (owned copies) */
    char *host;
    char *port;
    char *authority;
    char *authentication; /* NULL = none */
    char *user_agent;
    int connect_timeout_ms;
    int backoff_min_ms;
    int backoff_max_ms;
    size_t max_msg;
    void (*wait_hook)(bool entering); /* NULL = none */
    nghttp2_mem mem;

    /* connection */
    int fd;          /* -1 when disconnected */
    pid_t owner_pid; /* process that opened fd */
    nghttp2_session *sess;
    bool is_broken;   /* I/O or protocol failure: unusable, close before the next call */
    bool got_frame;   /* the peer sent at least one frame (it speaks HTTP/2) */
    bool served_call; /* at least one call on this connection got a grpc-status */
    bool got_goaway;
    int32_t goaway_last_stream_id;
    char conn_err[128];

    /* backoff */
    unsigned fail_streak;
    int64_t next_attempt_ms; /* monotonic; 0 = connect at once */
    uint64_t rng;

    /* buffers (kept across calls and connections) */
    uint8_t *out;
    size_t out_off; /* bytes of out already sent */
    size_t out_len; /* bytes of out filled */
    size_t out_cap;
    uint8_t *stage;
    size_t stage_off;
    size_t stage_len;
    size_t stage_cap;
    uint8_t *in;

    struct call call;
    struct skpx_grpc_client_stats stats;
};

/* ---- small helpers ---------------------------------------------------------------------- */

static void *mem_malloc(size_t size, void *ud)
{
    (void)ud;
    return skpx_malloc(size);
}

static void mem_free(void *ptr, void *ud)
{
    (void)ud;
    skpx_free(ptr);
}

static void *mem_calloc(size_t nmemb, size_t size, void *ud)
{
    (void)ud;
    return skpx_calloc(nmemb, size);
}

static void *mem_realloc(void *ptr, size_t size, void *ud)
{
    (void)ud;
    return skpx_realloc(ptr, size);
}

static bool is_header_value_ok(const char *s)
{
    size_t n = strlen(s);
    if (n > MAX_METADATA_LEN)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x20 || ch == 0x7f)
            return false;
    }
    return true;
}

static bool name_is(const uint8_t *name, size_t len, const char *lit)
{
    size_t n = strlen(lit);
    return len == n && memcmp(name, lit, n) == 0;
}

/* Splits "host:port" / "[v6]:port" into owned host and port strings. */
static skp_err parse_target(const char *target, char **host, char **port)
{
    *host = NULL;
    *port = NULL;
    if (!target)
        return SKP_EINVAL;
    size_t len = strlen(target);
    if (len == 0 || len > MAX_TARGET_LEN)
        return SKP_EINVAL;
    const char *h = target;
    size_t hlen;
    const char *colon;
    if (target[0] == '[') {
        const char *rb = strchr(target, ']');
        if (!rb || rb[1] != ':')
            return SKP_EINVAL;
        h = target + 1;
        hlen = (size_t)(rb - h);
        colon = rb + 1;
    } else {
        colon = strrchr(target, ':');
        if (!colon)
            return SKP_EINVAL;
        hlen = (size_t)(colon - target);
        if (memchr(target, ':', hlen))
            return SKP_EINVAL; /* an IPv6 literal must be bracketed */
    }
    if (hlen == 0)
        return SKP_EINVAL;
    for (size_t i = 0; i < hlen; i++) {
        unsigned char ch = (unsigned char)h[i];
        if (ch <= 0x20 || ch >= 0x7f || ch == '/' || ch == '@')
            return SKP_EINVAL;
    }
    const char *p = colon + 1;
    size_t plen = strlen(p);
    if (plen == 0 || plen > 5)
        return SKP_EINVAL;
    unsigned long v = 0;
    for (size_t i = 0; i < plen; i++) {
        if (p[i] < '0' || p[i] > '9')
            return SKP_EINVAL;
        v = v * 10 + (unsigned long)(p[i] - '0');
    }
    if (v == 0 || v > 65535)
        return SKP_EINVAL;
    *host = skpx_strndup(h, hlen);
    *port = skpx_strndup(p, plen);
    if (!*host || !*port) {
        skpx_free(*host);
        skpx_free(*port);
        *host = NULL;
        *port = NULL;
        return SKP_ENOMEM;
    }
    return SKP_OK;
}

/* Records the first local error of the call and ends it. */
static void call_fail(struct call *k, skp_err err, const char *msg)
{
    if (!k->err) {
        k->err = err;
        snprintf(k->err_msg, sizeof(k->err_msg), "%s", msg);
    }
    k->is_done = true;
}

/* Marks the connection unusable; the running call (if any) fails with `why` unless done. */
static void conn_break(struct skpx_grpc_client *c, const char *why)
{
    if (!c->is_broken) {
        c->is_broken = true;
        snprintf(c->conn_err, sizeof(c->conn_err), "%s", why);
    }
}

static bool is_our_stream(const struct skpx_grpc_client *c, int32_t stream_id)
{
    return c->call.is_active && c->call.stream_id == stream_id;
}

static uint64_t rng_next(struct skpx_grpc_client *c)
{
    /* xorshift64: jitter only, no quality needed. */
    uint64_t x = c->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c->rng = x;
    return x;
}

/* A connection failed before proving the server alive: wait before the next attempt.
 * Delay = min(min * 2^(streak-1), max), minus up to 20% jitter so agents restarted together
 * do not reconnect in lockstep. */
static void backoff_schedule(struct skpx_grpc_client *c)
{
    if (c->fail_streak < 31)
        c->fail_streak++;
    int64_t delay = c->backoff_min_ms;
    for (unsigned i = 1; i < c->fail_streak && delay < c->backoff_max_ms; i++)
        delay *= 2;
    if (delay > c->backoff_max_ms)
        delay = c->backoff_max_ms;
    int64_t jitter = delay / 5;
    if (jitter > 0)
        delay -= (int64_t)(rng_next(c) % (uint64_t)(jitter + 1));
    c->next_attempt_ms = skpx_mono_ms() + delay;
}

static void backoff_clear(struct skpx_grpc_client *c)
{
    c->fail_streak = 0;
    c->next_attempt_ms = 0;
}

/* ---- output ----------------------------------------------------------------------------- */

static size_t out_pending(const struct skpx_grpc_client *c)
{
    return c->out_len - c->out_off;
}

static skp_err out_append(struct skpx_grpc_client *c, const uint8_t *p, size_t n)
{
    if (c->out_off > 0 && c->out_len + n > c->out_cap) {
        memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
        c->out_len -= c->out_off;
        c->out_off = 0;
    }
    skp_err err =
        skpx_grow_capped(&c->out, &c->out_cap, c->out_len + n, 1, OUT_INIT_BYTES, OUT_CAP_BYTES);
    if (err)
        return err;
    memcpy(c->out + c->out_len, p, n);
    c->out_len += n;
    return SKP_OK;
}

/* Moves frames from nghttp2 into `out` until it holds OUT_HIGH_BYTES or nghttp2 has nothing
 * it may send now (flow control, or no pending frames). Returns the number of bytes added. */
static size_t produce(struct skpx_grpc_client *c)
{
    size_t added = 0;
    while (!c->is_broken && out_pending(c) < OUT_HIGH_BYTES) {
        const uint8_t *p = NULL;
        ssize_t n = nghttp2_session_mem_send(c->sess, &p);
        if (n < 0) {
            char why[96];
            snprintf(why, sizeof(why), "HTTP/2 send error: %s", nghttp2_strerror((int)n));
            conn_break(c, why);
            return added;
        }
        if (n == 0)
            return added;
        skp_err err = out_append(c, p, (size_t)n);
        if (err) {
            conn_break(c, err == SKP_ENOMEM ? "out of memory buffering output"
                                            : "output frame larger than the buffer cap");
            return added;
        }
        added += (size_t)n;
    }
    return added;
}

/* One non-blocking send() of everything pending. Returns true if it made progress. */
static bool flush_some(struct skpx_grpc_client *c)
{
    while (!c->is_broken && out_pending(c) > 0) {
        ssize_t n = send(c->fd, c->out + c->out_off, out_pending(c), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            c->stats.bytes_sent += (uint64_t)n;
            c->out_off += (size_t)n;
            if (c->out_off == c->out_len) {
                c->out_off = 0;
                c->out_len = 0;
            }
            return true;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return false;
        char why[96];
        snprintf(why, sizeof(why), "send failed: %s", n < 0 ? strerror(errno) : "no progress");
        conn_break(c, why);
        return false;
    }
    return false;
}

/* ---- input ------------------------------------------------------------------------------ */

/* Reads what is available (bounded) and feeds nghttp2. EOF/errors break the connection. */
static void read_some(struct skpx_grpc_client *c)
{
    for (int i = 0; i < READS_PER_WAKEUP && !c->is_broken; i++) {
        ssize_t n = recv(c->fd, c->in, IN_BUF_BYTES, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n < 0) {
            char why[96];
            snprintf(why, sizeof(why), "connection lost: %s", strerror(errno));
            conn_break(c, why);
            return;
        }
        if (n == 0) {
            conn_break(c, "connection closed by the server");
            return;
        }
        ssize_t rv = nghttp2_session_mem_recv(c->sess, c->in, (size_t)n);
        if (rv < 0) {
            char why[96];
            snprintf(why, sizeof(why), "HTTP/2 protocol error: %s", nghttp2_strerror((int)rv));
            conn_break(c, why);
            return;
        }
        if (n < IN_BUF_BYTES)
            return; /* drained: save the EAGAIN round trip */
    }
}

/* ---- nghttp2 callbacks ------------------------------------------------------------------ */

static skp_err stage_reserve(struct skpx_grpc_client *c, size_t extra)
{
    if (c->stage_off > 0) {
        memmove(c->stage, c->stage + c->stage_off, c->stage_len - c->stage_off);
        c->stage_len -= c->stage_off;
        c->stage_off = 0;
    }
    return skpx_grow(&c->stage, &c->stage_cap, c->stage_len + extra, 1, STAGE_INIT_BYTES);
}

/* Packs `m` (whose packed size is `n`) behind its prefix at the end of the staging buffer. */
static skp_err stage_packed(struct skpx_grpc_client *c, const ProtobufCMessage *m, size_t n)
{
    if (c->stage_len + SKPX_GRPC_PREFIX_LEN + n > c->stage_cap) {
        skp_err err = stage_reserve(c, SKPX_GRPC_PREFIX_LEN + n); /* compacts, then grows */
        if (err)
            return err;
    }
    uint8_t *dst = c->stage + c->stage_len;
    skpx_grpc_prefix_write(dst, (uint32_t)n);
    if (protobuf_c_message_pack(m, dst + SKPX_GRPC_PREFIX_LEN) != n)
        return SKP_EINVAL;
    c->stage_len += SKPX_GRPC_PREFIX_LEN + n;
    return SKP_OK;
}

static skp_err message_size(const struct skpx_grpc_client *c, const ProtobufCMessage *m, size_t *n)
{
    *n = protobuf_c_message_get_packed_size(m);
    if (*n > c->max_msg || *n > UINT32_MAX)
        return SKP_ETOOBIG;
    return SKP_OK;
}

/* Packs `m` into the staging buffer (used for the unary request). */
static skp_err stage_message(struct skpx_grpc_client *c, const ProtobufCMessage *m)
{
    size_t n = 0;
    skp_err err = message_size(c, m, &n);
    if (err)
        return err;
    return stage_packed(c, m, n);
}

static void stage_take(struct skpx_grpc_client *c, uint8_t *dst, size_t n)
{
    memcpy(dst, c->stage + c->stage_off, n);
    c->stage_off += n;
    if (c->stage_off == c->stage_len) {
        c->stage_off = 0;
        c->stage_len = 0;
    }
}

static const char *pack_error_text(skp_err err)
{
    return err == SKP_ETOOBIG  ? "request message larger than max_msg"
           : err == SKP_ENOMEM ? "out of memory packing a request message"
                               : "request message failed to pack";
}

/* nghttp2 asks for the payload of one DATA frame (at most `length` bytes). Hot path for
 * streaming: messages are packed straight into the frame behind their 5-byte prefix; only a
 * message that does not fit in the rest of the frame goes through the staging buffer, and its
 * remainder opens the next frame. nghttp2 only asks while the peer's window is open, and
 * produce() only runs while `out` has room, so the source is pulled only as fast as the
 * connection drains. */
static ssize_t on_data_read(nghttp2_session *s, int32_t stream_id, uint8_t *buf, size_t length,
                            uint32_t *data_flags, nghttp2_data_source *source, void *ud)
{
    (void)s;
    (void)source;
    struct skpx_grpc_client *c = ud;
    struct call *k = &c->call;
    if (!is_our_stream(c, stream_id) || k->is_done)
        return NGHTTP2_ERR_DEFERRED; /* abandoned: its RST_STREAM is queued or about to be */
    size_t n = 0;
    size_t have = c->stage_len - c->stage_off;
    if (have > 0) {
        n = have < length ? have : length;
        stage_take(c, buf, n);
    }
    while (n < length && c->stage_len == 0 && !k->is_src_eof && (k->next || k->next_resp)) {
        const ProtobufCMessage *m = NULL;
        int rc = k->next ? k->next(k->next_ud, &m) : k->next_resp(k->next_ud, k->resp, &m);
        if (rc == 0) {
            k->is_src_eof = true;
            break;
        }
        if (rc == 2 && k->next_resp) {
            /* resumed by on_response_msg (or the call ends) */
            k->is_waiting = true;
            if (n == 0)
                return NGHTTP2_ERR_DEFERRED;
            break;
        }
        if (rc != 1 || !m) {
            call_fail(k, SKP_EINVAL, "call aborted by the message source");
            return NGHTTP2_ERR_DEFERRED;
        }
        size_t sz = 0;
        skp_err err = message_size(c, m, &sz);
        if (!err && SKPX_GRPC_PREFIX_LEN + sz <= length - n) {
            skpx_grpc_prefix_write(buf + n, (uint32_t)sz);
            if (protobuf_c_message_pack(m, buf + n + SKPX_GRPC_PREFIX_LEN) != sz)
                err = SKP_EINVAL;
            else
                n += SKPX_GRPC_PREFIX_LEN + sz;
        } else if (!err) {
            err = stage_packed(c, m, sz);
            if (!err)
                stage_take(c, buf + n, length - n); /* the message is larger than what is left */
            if (!err)
                n = length;
        }
        if (err) {
            call_fail(k, err, pack_error_text(err));
            return NGHTTP2_ERR_DEFERRED;
        }
    }
    if (c->stage_len == c->stage_off && k->is_src_eof)
        *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static skp_err on_response_msg(void *ud, const uint8_t *msg, size_t len)
{
    struct skpx_grpc_client *c = ud;
    struct call *k = &c->call;
    k->n_resp_msgs++;
    if (k->next_resp && k->resp) { /* gated calls keep the latest response */
        protobuf_c_message_free_unpacked(k->resp, NULL);
        k->resp = NULL;
    } else if (k->n_resp_msgs > 1) {
        snprintf(k->err_msg, sizeof(k->err_msg), "more than one response message");
        return SKP_EPROTO;
    }
    if (!k->resp_desc)
        return SKP_OK;
    k->resp = protobuf_c_message_unpack(k->resp_desc, NULL, len, msg);
    if (!k->resp) {
        snprintf(k->err_msg, sizeof(k->err_msg), "response does not decode as %s",
                 k->resp_desc->name);
        return SKP_EPROTO;
    }
    if (k->is_waiting) {
        k->is_waiting = false;
        if (nghttp2_session_resume_data(c->sess, k->stream_id) != 0) {
            snprintf(k->err_msg, sizeof(k->err_msg), "cannot resume the request stream");
            return SKP_EPROTO;
        }
    }
    return SKP_OK;
}

static int on_data_chunk(nghttp2_session *s, uint8_t flags, int32_t stream_id, const uint8_t *data,
                         size_t len, void *ud)
{
    (void)s;
    (void)flags;
    struct skpx_grpc_client *c = ud;
    struct call *k = &c->call;
    if (!is_our_stream(c, stream_id) || k->err)
        return 0;
    k->err_msg[0] = '\0';
    skp_err err = skpx_grpc_reader_feed(&k->reader, data, len, on_response_msg, c);
    if (err) {
        char msg[sizeof(k->err_msg)];
        if (k->err_msg[0])
            snprintf(msg, sizeof(msg), "%s", k->err_msg);
        else if (err == SKP_ETOOBIG)
            snprintf(msg, sizeof(msg), "response message larger than max_msg (%zu)", c->max_msg);
        else if (err == SKP_ENOTSUP)
            snprintf(msg, sizeof(msg), "compressed response message (not supported)");
        else
            snprintf(msg, sizeof(msg), "bad response framing: %s", skp_strerror(err));
        call_fail(k, err, msg);
    }
    return 0;
}

static bool content_type_is_grpc(const uint8_t *v, size_t len)
{
    static const char ct[] = "application/grpc";
    size_t n = sizeof(ct) - 1;
    if (len < n || memcmp(v, ct, n) != 0)
        return false;
    return len == n || v[n] == '+' || v[n] == ';';
}

static int on_header(nghttp2_session *s, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
    (void)s;
    (void)flags;
    struct skpx_grpc_client *c = ud;
    struct call *k = &c->call;
    if (frame->hd.type != NGHTTP2_HEADERS || !is_our_stream(c, frame->hd.stream_id))
        return 0;
    if (frame->headers.cat == NGHTTP2_HCAT_RESPONSE) {
        if (name_is(name, namelen, ":status")) {
            int st = 0;
            for (size_t i = 0; i < valuelen && i < 3; i++)
                st = st * 10 + (value[i] >= '0' && value[i] <= '9' ? value[i] - '0' : 0);
            if (st >= 100 && st < 200)
                return 0; /* interim response; the real one follows */
            k->http_status = st;
            k->got_headers = true;
            return 0;
        }
        if (name_is(name, namelen, "content-type")) {
            k->is_content_type_ok = content_type_is_grpc(value, valuelen);
            return 0;
        }
    }
    /* grpc-status/grpc-message arrive in trailers, or in the response headers of a
     * Trailers-Only response. */
    if (name_is(name, namelen, "grpc-status")) {
        int st = 0;
        bool ok = valuelen > 0 && valuelen <= 3;
        for (size_t i = 0; ok && i < valuelen; i++) {
            if (value[i] < '0' || value[i] > '9')
                ok = false;
            else
                st = st * 10 + (value[i] - '0');
        }
        if (!ok) {
            call_fail(k, SKP_EPROTO, "malformed grpc-status");
            return 0;
        }
        k->has_grpc_status = true;
        k->grpc_status = st;
    } else if (name_is(name, namelen, "grpc-message")) {
        skpx_pct_decode((const char *)value, valuelen, k->grpc_message, sizeof(k->grpc_message),
                        NULL);
    }
    return 0;
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *frame, void *ud)
{
    (void)s;
    struct skpx_grpc_client *c = ud;
    struct call *k = &c->call;
    c->got_frame = true;
    switch (frame->hd.type) {
    case NGHTTP2_HEADERS:
    case NGHTTP2_DATA:
        if (is_our_stream(c, frame->hd.stream_id) && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
            k->is_remote_closed = true;
            k->is_done = true;
        }
        break;
    case NGHTTP2_GOAWAY:
        c->got_goaway = true;
        c->goaway_last_stream_id = frame->goaway.last_stream_id;
        if (k->is_active && !k->is_done && k->stream_id > frame->goaway.last_stream_id)
            call_fail(k, SKP_EUNAVAILABLE, "server is going away (GOAWAY); call not processed");
        break;
    default:
        break;
    }
    return 0;
}

static int on_stream_close(nghttp2_session *s, int32_t stream_id, uint32_t error_code, void *ud)
{
    (void)s;
    struct skpx_grpc_client *c = ud;
    struct call *k = &c->call;
    if (!is_our_stream(c, stream_id))
        return 0;
    k->is_stream_closed = true;
    if (error_code != NGHTTP2_NO_ERROR && !k->is_remote_closed) {
        k->is_reset = true;
        k->reset_code = error_code;
    }
    k->is_done = true;
    return 0;
}

/* ---- connection ------------------------------------------------------------------------- */

static void conn_free(struct skpx_grpc_client *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    /* nghttp2_session_del only frees memory (it neither sends nor calls on_stream_close). */
    nghttp2_session_del(c->sess);
    c->sess = NULL;
    c->out_off = 0;
    c->out_len = 0;
    c->stage_off = 0;
    c->stage_len = 0;
    c->is_broken = false;
    c->got_frame = false;
    c->served_call = false;
    c->got_goaway = false;
    c->conn_err[0] = '\0';
    c->call.is_active = false;
}

/* Closes the connection; in the owning process a GOAWAY is attempted without blocking. */
static void conn_close(struct skpx_grpc_client *c)
{
    if (c->fd < 0)
        return;
    if (c->owner_pid == getpid() && !c->is_broken && c->sess) {
        if (nghttp2_session_terminate_session(c->sess, NGHTTP2_NO_ERROR) == 0) {
            produce(c);
            flush_some(c);
        }
    }
    conn_free(c);
}

/* In a forked child: drop the inherited connection without touching the socket's peer. */
static void check_fork(struct skpx_grpc_client *c)
{
    if (c->fd < 0 || c->owner_pid == getpid())
        return;
    conn_free(c);
    /* The child has its own connection to make; the parent's backoff does not apply. */
    backoff_clear(c);
}

/* poll() with the client's wait hook around waits that may block. */
static int poll_hooked(const struct skpx_grpc_client *c, struct pollfd *pfd, int timeout_ms)
{
    if (timeout_ms == 0 || !c->wait_hook)
        return poll(pfd, 1, timeout_ms);
    c->wait_hook(true);
    int rc = poll(pfd, 1, timeout_ms);
    int saved = errno;
    c->wait_hook(false);
    errno = saved;
    return rc;
}

/* Waits for a non-blocking connect() to finish. */
static int connect_wait(const struct skpx_grpc_client *c, int fd, int64_t deadline_ms)
{
    for (;;) {
        int64_t left = deadline_ms - skpx_mono_ms();
        if (left <= 0)
            return ETIMEDOUT;
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int rc = poll_hooked(c, &pfd, (int)(left > 1000000 ? 1000000 : left));
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc < 0)
            return errno;
        if (rc == 0)
            continue;
        int so = 0;
        socklen_t sl = sizeof(so);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &sl) < 0)
            return errno;
        return so;
    }
}

static skp_err session_open(struct skpx_grpc_client *c)
{
    nghttp2_session_callbacks *cbs = NULL;
    skp_err err = SKP_OK;
    /* The callbacks table is allocated by nghttp2 with plain malloc (no allocator hook);
     * it lives only for the duration of this function. */
    if (nghttp2_session_callbacks_new(&cbs) != 0)
        return SKP_ENOMEM;
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    int rv = nghttp2_session_client_new3(&c->sess, cbs, c, NULL, &c->mem);
    nghttp2_session_callbacks_del(cbs);
    if (rv != 0) {
        c->sess = NULL;
        return SKP_ENOMEM;
    }
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, CLIENT_WINDOW_BYTES},
    };
    rv = nghttp2_submit_settings(c->sess, NGHTTP2_FLAG_NONE, iv, SKP_ARRAY_LEN(iv));
    if (rv == 0)
        rv = nghttp2_session_set_local_window_size(c->sess, NGHTTP2_FLAG_NONE, 0,
                                                   CLIENT_WINDOW_BYTES);
    if (rv != 0)
        err = rv == NGHTTP2_ERR_NOMEM ? SKP_ENOMEM : SKP_EPROTO;
    return err;
}

/* Opens the TCP connection and the HTTP/2 session. Name resolution uses getaddrinfo(), which
 * may block beyond the connect timeout on a slow resolver; it runs only at connect time, on
 * the caller's (agent channel) thread, so only that thread waits. Numeric targets never hit
 * the resolver. */
static skp_err conn_open(struct skpx_grpc_client *c, int64_t call_deadline_ms, char *why,
                         size_t why_cap)
{
    int64_t deadline = skpx_mono_ms() + c->connect_timeout_ms;
    if (deadline > call_deadline_ms)
        deadline = call_deadline_ms;
    struct addrinfo hints;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo(c->host, c->port, &hints, &ai);
    if (gai != 0) {
        snprintf(why, why_cap, "cannot resolve %s: %s", c->host, gai_strerror(gai));
        return SKP_EUNAVAILABLE;
    }
    int fd = -1;
    int last = 0;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
        if (fd < 0) {
            last = errno;
            continue;
        }
        int rc;
        do {
            rc = connect(fd, a->ai_addr, a->ai_addrlen);
        } while (rc < 0 && errno == EINTR);
        last = rc == 0 ? 0 : errno;
        if (rc < 0 && errno == EINPROGRESS)
            last = connect_wait(c, fd, deadline);
        if (last != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0) {
        snprintf(why, why_cap, "cannot connect to %s:%s: %s", c->host, c->port,
                 last == ETIMEDOUT ? "connect timed out" : strerror(last ? last : ECONNREFUSED));
        return SKP_EUNAVAILABLE;
    }
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

    if (!c->in) {
        c->in = skpx_malloc(IN_BUF_BYTES);
        if (!c->in) {
            close(fd);
            snprintf(why, why_cap, "out of memory");
            return SKP_ENOMEM;
        }
    }
    c->fd = fd;
    c->owner_pid = getpid();
    c->is_broken = false;
    c->got_frame = false;
    c->served_call = false;
    c->got_goaway = false;
    c->conn_err[0] = '\0';
    skp_err err = session_open(c);
    if (err) {
        conn_free(c);
        snprintf(why, why_cap, "cannot start the HTTP/2 session: %s", skp_strerror(err));
        return err;
    }
    return SKP_OK;
}

/* Checks an idle connection without blocking: flushes pending frames and reads whatever the
 * server sent since the last call (SETTINGS, PING, GOAWAY, EOF of an idle close). */
static void conn_poll_idle(struct skpx_grpc_client *c)
{
    produce(c);
    flush_some(c);
    struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
    int rc;
    do {
        rc = poll(&pfd, 1, 0);
    } while (rc < 0 && errno == EINTR);
    if (rc > 0)
        read_some(c);
}

/* Makes sure a usable connection exists. */
static skp_err conn_ensure(struct skpx_grpc_client *c, int64_t deadline_ms, char *why,
                           size_t why_cap)
{
    check_fork(c);
    if (c->fd >= 0) {
        if (!c->is_broken)
            conn_poll_idle(c);
        bool is_usable = !c->is_broken && !c->got_goaway && nghttp2_session_want_read(c->sess);
        if (is_usable)
            return SKP_OK;
        bool had_served = c->served_call;
        conn_close(c);
        if (!had_served)
            backoff_schedule(c);
    }
    int64_t now = skpx_mono_ms();
    if (c->next_attempt_ms > now) {
        snprintf(why, why_cap, "backing off after a connection failure; next attempt in %lld ms",
                 (long long)(c->next_attempt_ms - now));
        return SKP_EUNAVAILABLE;
    }
    skp_err err = conn_open(c, deadline_ms, why, why_cap);
    if (err) {
        c->stats.connect_failures++;
        backoff_schedule(c);
        return err == SKP_ENOMEM ? SKP_ENOMEM : SKP_EUNAVAILABLE;
    }
    c->stats.connects++;
    return SKP_OK;
}

/* ---- calls ------------------------------------------------------------------------------ */

/* Drives the connection until the call is done, the connection breaks or the deadline passes.
 * Returns SKP_OK (call done), SKP_EUNAVAILABLE (connection broke) or SKP_ETIMEDOUT. */
static skp_err drive(struct skpx_grpc_client *c, int64_t deadline_ms)
{
    struct call *k = &c->call;
    for (;;) {
        if (k->is_done)
            return SKP_OK;
        bool progressed = produce(c) > 0;
        if (out_pending(c) > 0 && flush_some(c))
            progressed = true;
        if (k->is_done)
            return SKP_OK;
        if (c->is_broken)
            return SKP_EUNAVAILABLE;
        /* Loop again without waiting only if this round moved bytes (produced or sent): a
         * session that "wants to write" but yields nothing must not spin. */
        bool can_write_more =
            progressed && out_pending(c) == 0 && nghttp2_session_want_write(c->sess);
        if (!can_write_more && out_pending(c) == 0 && !nghttp2_session_want_read(c->sess)) {
            conn_break(c, "HTTP/2 session ended by the server");
            return SKP_EUNAVAILABLE;
        }
        int64_t left = deadline_ms - skpx_mono_ms();
        if (left <= 0)
            return SKP_ETIMEDOUT;
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        if (out_pending(c) > 0)
            pfd.events |= POLLOUT;
        int rc = poll_hooked(c, &pfd, can_write_more ? 0 : (int)(left > 1000000 ? 1000000 : left));
        if (rc < 0 && errno != EINTR) {
            char why[96];
            snprintf(why, sizeof(why), "poll failed: %s", strerror(errno));
            conn_break(c, why);
            return SKP_EUNAVAILABLE;
        }
        if (rc > 0 && (pfd.revents & (POLLIN | POLLHUP | POLLERR)))
            read_some(c);
    }
}

static void result_set(struct skpx_grpc_result *res, int status, const char *msg)
{
    if (!res)
        return;
    res->status = status;
    snprintf(res->message, sizeof(res->message), "%s", msg ? msg : "");
}

/* Classifies a finished call (the stream ended or failed locally). */
static skp_err call_outcome(struct skpx_grpc_client *c, char *msg, size_t cap)
{
    struct call *k = &c->call;
    if (k->err) {
        snprintf(msg, cap, "%s", k->err_msg);
        return k->err;
    }
    if (k->got_headers && k->http_status != 200) {
        snprintf(msg, cap, "HTTP status %d from the server", k->http_status);
        /* gRPC maps 502/503/504 to UNAVAILABLE: a proxy in front of a missing backend. */
        if (k->http_status == 502 || k->http_status == 503 || k->http_status == 504)
            return SKP_EUNAVAILABLE;
        return SKP_EPROTO;
    }
    if (k->has_grpc_status) {
        if (k->grpc_status == SKPX_GRPC_DEADLINE_EXCEEDED) {
            /* The server enforces the grpc-timeout we sent and usually notices the deadline
             * at the same moment we do: the caller sees one outcome, SKP_ETIMEDOUT (res->status
             * tells who detected it: 4 from the server, -1 locally). */
            snprintf(msg, cap, "deadline exceeded (server): %.200s", k->grpc_message);
            return SKP_ETIMEDOUT;
        }
        if (k->grpc_status != SKPX_GRPC_OK) {
            snprintf(msg, cap, "%s", k->grpc_message);
            return SKP_EGRPC;
        }
        if (!k->is_content_type_ok) {
            snprintf(msg, cap, "response content-type is not application/grpc");
            return SKP_EPROTO;
        }
        if (!skpx_grpc_reader_idle(&k->reader)) {
            snprintf(msg, cap, "response ended inside a message");
            return SKP_EPROTO;
        }
        if (k->n_resp_msgs == 0) {
            snprintf(msg, cap, "OK status without a response message");
            return SKP_EPROTO;
        }
        snprintf(msg, cap, "%s", k->grpc_message);
        return SKP_OK;
    }
    if (k->is_reset) {
        snprintf(msg, cap, "stream reset by the server (%s)",
                 nghttp2_http2_strerror(k->reset_code));
        return k->reset_code == NGHTTP2_REFUSED_STREAM ? SKP_EUNAVAILABLE : SKP_EPROTO;
    }
    snprintf(msg, cap, "response ended without grpc-status");
    return SKP_EPROTO;
}

/* Between calls an agent's client sits idle for seconds: give back the buffers a stream grew
 * (up to ~300 KiB) rather than keep them resident. */
static void buffers_trim(struct skpx_grpc_client *c)
{
    if (out_pending(c) == 0 && c->out_cap > OUT_INIT_BYTES) {
        skpx_free(c->out);
        c->out = NULL;
        c->out_cap = 0;
        c->out_off = 0;
        c->out_len = 0;
    }
    if (c->stage_len == c->stage_off && c->stage_cap > STAGE_INIT_BYTES) {
        skpx_free(c->stage);
        c->stage = NULL;
        c->stage_cap = 0;
        c->stage_off = 0;
        c->stage_len = 0;
    }
}

/* do_call's steps. Each writes a message for the result into msg (cap bytes) on failure. */

/* Step 1: resets the call slot for a new call and packs the request (if any) for sending. */
static skp_err call_prepare(struct skpx_grpc_client *c, const ProtobufCMessage *req,
                            skpx_grpc_next_cb next, skpx_grpc_next_resp_cb next_resp, void *next_ud,
                            const ProtobufCMessageDescriptor *resp_desc, char *msg, size_t cap)
{
    struct call *k = &c->call;
    memset(k, 0, sizeof(*k));
    skpx_grpc_reader_init(&k->reader, c->max_msg);
    k->resp_desc = resp_desc;
    k->next = next;
    k->next_resp = next_resp;
    k->next_ud = next_ud;
    c->stage_off = 0;
    c->stage_len = 0;
    if (!req)
        return SKP_OK;
    skp_err err = stage_message(c, req);
    if (err) {
        snprintf(msg, cap, "%s",
                 err == SKP_ETOOBIG ? "request message larger than max_msg"
                                    : "cannot pack the request message");
        return err;
    }
    k->is_src_eof = true;
    return SKP_OK;
}

/* Step 2: submits the request headers (with the time left as grpc-timeout) and opens the
 * stream. */
static skp_err call_submit(struct skpx_grpc_client *c, const char *path, int64_t deadline,
                           char *msg, size_t cap)
{
    char tmo[16];
    int64_t left = deadline - skpx_mono_ms();
    skpx_grpc_timeout_format(left > 0 ? left : 1, tmo, sizeof(tmo));
#define NV(n, v)                                                                                   \
    {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NO_COPY_NAME}
    nghttp2_nv nva[] = {
        NV(":method", "POST"),
        NV(":scheme", "http"),
        NV(":path", path),
        NV(":authority", c->authority),
        NV("content-type", "application/grpc"),
        NV("te", "trailers"),
        NV("user-agent", c->user_agent),
        NV("grpc-timeout", tmo),
        NV("grpc-accept-encoding", "identity"),
        NV("authentication", c->authentication ? c->authentication : ""),
    };
#undef NV
    size_t nnv = SKP_ARRAY_LEN(nva) - (c->authentication ? 0 : 1);
    nghttp2_data_provider prd;
    prd.source.ptr = c;
    prd.read_callback = on_data_read;
    int32_t sid = nghttp2_submit_request(c->sess, NULL, nva, nnv, &prd, NULL);
    if (sid < 0) {
        snprintf(msg, cap, "cannot start the call: %s", nghttp2_strerror(sid));
        if (sid == NGHTTP2_ERR_NOMEM)
            return SKP_ENOMEM; /* nothing was queued; the connection stays usable */
        /* Stream ids exhausted (after 2^30 calls): this connection is done. */
        conn_break(c, "cannot open a new stream on this connection");
        return SKP_EUNAVAILABLE;
    }
    c->call.stream_id = sid;
    c->call.is_active = true;
    return SKP_OK;
}

/* Step 3: drives the connection until the call ended or the deadline, takes its outcome
 * (*status = grpc-status when the server sent one), and cancels a stream left open. */
static skp_err call_run(struct skpx_grpc_client *c, int64_t deadline, int timeout_ms, int *status,
                        char *msg, size_t cap)
{
    struct call *k = &c->call;
    skp_err err = drive(c, deadline);
    if (err == SKP_ETIMEDOUT) {
        snprintf(msg, cap, "deadline of %d ms expired", timeout_ms);
    } else if (err == SKP_EUNAVAILABLE) {
        snprintf(msg, cap, "%s", c->conn_err[0] ? c->conn_err : "connection lost");
    } else {
        err = call_outcome(c, msg, cap);
        if (k->has_grpc_status) {
            *status = k->grpc_status;
            c->served_call = true;
            backoff_clear(c);
        }
    }
    /* A stream that is still open (timeout, local error, early server status while we were
     * still sending) is cancelled; the RST_STREAM goes out now if the socket takes it. */
    if (!c->is_broken && !k->is_stream_closed) {
        if (nghttp2_submit_rst_stream(c->sess, NGHTTP2_FLAG_NONE, k->stream_id, NGHTTP2_CANCEL) ==
            0) {
            produce(c);
            flush_some(c);
        }
    }
    if (err == SKP_ETIMEDOUT && !c->got_frame) {
        /* The peer never sent a single HTTP/2 frame: not a gRPC server, or a dead one. */
        conn_close(c);
        backoff_schedule(c);
    }
    return err;
}

/* Step 4: releases the call slot; on success moves the response to *resp (or frees it). Closes
 * a broken or draining connection. */
static void call_finish(struct skpx_grpc_client *c, skp_err err, ProtobufCMessage **resp)
{
    struct call *k = &c->call;
    k->is_active = false;
    if (c->fd >= 0 && (c->is_broken || c->got_goaway)) {
        bool had_served = c->served_call;
        conn_close(c);
        if (!had_served)
            backoff_schedule(c);
    }
    skpx_grpc_reader_cleanup(&k->reader);
    buffers_trim(c);
    if (err == SKP_OK && resp)
        *resp = k->resp;
    else if (k->resp)
        protobuf_c_message_free_unpacked(k->resp, NULL);
    k->resp = NULL;
    k->next = NULL;
    k->next_resp = NULL;
    k->next_ud = NULL;
}

static skp_err do_call(struct skpx_grpc_client *c, const char *path, const ProtobufCMessage *req,
                       skpx_grpc_next_cb next, skpx_grpc_next_resp_cb next_resp, void *next_ud,
                       const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
                       int timeout_ms, struct skpx_grpc_result *res)
{
    char msg[sizeof(((struct skpx_grpc_result *)0)->message)];
    int status = -1;

    msg[0] = '\0';
    if (resp)
        *resp = NULL;
    result_set(res, -1, "");
    /* Each public entry point passes one request source: req, next or next_resp (the gated
     * stream also needs resp_desc); one check here serves them all. */
    bool bad = !c || (!req && !next && !next_resp) || (next_resp && !resp_desc);
    if (bad || !path || path[0] != '/' || !is_header_value_ok(path) || (resp_desc && !resp)) {
        if (c)
            c->stats.calls_failed++;
        result_set(res, -1, "invalid call arguments");
        return SKP_EINVAL;
    }
    if (timeout_ms <= 0)
        timeout_ms = DEFAULT_CALL_TIMEOUT_MS;
    int64_t deadline = skpx_mono_ms() + timeout_ms;

    skp_err err = conn_ensure(c, deadline, msg, sizeof(msg));
    if (!err) {
        err = call_prepare(c, req, next, next_resp, next_ud, resp_desc, msg, sizeof(msg));
        if (!err)
            err = call_submit(c, path, deadline, msg, sizeof(msg));
        if (!err)
            err = call_run(c, deadline, timeout_ms, &status, msg, sizeof(msg));
        call_finish(c, err, resp);
    }
    if (err)
        c->stats.calls_failed++;
    else
        c->stats.calls_ok++;
    result_set(res, status, msg);
    return err;
}

/* ---- public API ------------------------------------------------------------------------- */

skp_err skpx_grpc_client_new(const struct skpx_grpc_client_opts *opts,
                             struct skpx_grpc_client **out)
{
    skp_err err = SKP_OK;
    *out = NULL;
    if (!opts)
        return SKP_EINVAL;
    if (opts->authentication && !is_header_value_ok(opts->authentication))
        return SKP_EINVAL;
    if (opts->user_agent && (!opts->user_agent[0] || !is_header_value_ok(opts->user_agent)))
        return SKP_EINVAL;
    if (opts->connect_timeout_ms < 0 || opts->backoff_min_ms < 0 || opts->backoff_max_ms < 0)
        return SKP_EINVAL;
    struct skpx_grpc_client *c = skpx_calloc(1, sizeof(*c));
    if (!c)
        return SKP_ENOMEM;
    c->fd = -1;
    err = parse_target(opts->target, &c->host, &c->port);
    if (err)
        goto fail;
    c->authority = skpx_strdup(opts->target);
    c->user_agent = skpx_strdup(opts->user_agent ? opts->user_agent : "skyprof/" SKP_VERSION);
    if (!c->authority || !c->user_agent) {
        err = SKP_ENOMEM;
        goto fail;
    }
    if (opts->authentication && opts->authentication[0]) {
        c->authentication = skpx_strdup(opts->authentication);
        if (!c->authentication) {
            err = SKP_ENOMEM;
            goto fail;
        }
    }
    c->connect_timeout_ms =
        opts->connect_timeout_ms ? opts->connect_timeout_ms : DEFAULT_CONNECT_TIMEOUT_MS;
    c->backoff_min_ms = opts->backoff_min_ms ? opts->backoff_min_ms : DEFAULT_BACKOFF_MIN_MS;
    c->backoff_max_ms = opts->backoff_max_ms ? opts->backoff_max_ms : DEFAULT_BACKOFF_MAX_MS;
    if (c->backoff_max_ms < c->backoff_min_ms)
        c->backoff_max_ms = c->backoff_min_ms;
    c->max_msg = opts->max_msg ? opts->max_msg : SKPX_GRPC_DEFAULT_MAX_MSG;
    c->wait_hook = opts->wait_hook;
    c->mem.mem_user_data = NULL;
    c->mem.malloc = mem_malloc;
    c->mem.free = mem_free;
    c->mem.calloc = mem_calloc;
    c->mem.realloc = mem_realloc;
    c->rng = (uint64_t)skpx_mono_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)c;
    if (!c->rng)
        c->rng = 0x9e3779b97f4a7c15ull;
    *out = c;
    return SKP_OK;
fail:
    skpx_grpc_client_free(c);
    return err;
}

void skpx_grpc_client_free(struct skpx_grpc_client *c)
{
    if (!c)
        return;
    check_fork(c);
    conn_close(c);
    SKPX_FREE_ALL(c->host, c->port, c->authority, c->authentication, c->user_agent, c->out,
                  c->stage, c->in, c);
}

skp_err skpx_grpc_client_unary(struct skpx_grpc_client *c, const char *path,
                               const ProtobufCMessage *req,
                               const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
                               int timeout_ms, struct skpx_grpc_result *res)
{
    return do_call(c, path, req, NULL, NULL, NULL, resp_desc, resp, timeout_ms, res);
}

skp_err skpx_grpc_client_stream(struct skpx_grpc_client *c, const char *path,
                                skpx_grpc_next_cb next, void *next_ud,
                                const ProtobufCMessageDescriptor *resp_desc,
                                ProtobufCMessage **resp, int timeout_ms,
                                struct skpx_grpc_result *res)
{
    return do_call(c, path, NULL, next, NULL, next_ud, resp_desc, resp, timeout_ms, res);
}

skp_err skpx_grpc_client_stream_gated(struct skpx_grpc_client *c, const char *path,
                                      skpx_grpc_next_resp_cb next, void *next_ud,
                                      const ProtobufCMessageDescriptor *resp_desc,
                                      ProtobufCMessage **resp, int timeout_ms,
                                      struct skpx_grpc_result *res)
{
    return do_call(c, path, NULL, NULL, next, next_ud, resp_desc, resp, timeout_ms, res);
}

void skpx_grpc_client_disconnect(struct skpx_grpc_client *c)
{
    if (!c)
        return;
    check_fork(c);
    conn_close(c);
}

void skpx_grpc_client_reset_backoff(struct skpx_grpc_client *c)
{
    if (c)
        backoff_clear(c);
}

void skpx_grpc_client_get_stats(const struct skpx_grpc_client *c,
                                struct skpx_grpc_client_stats *out)
{
    if (!out)
        return;
    if (!c) {
        memset(out, 0, sizeof(*out));
        return;
    }
    *out = c->stats;
}
