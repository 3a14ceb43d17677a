/* grpc_server.c - gRPC over h2c (prior knowledge) on nghttp2, driven by the caller's libevent loop.
 * Single-threaded: every function here and every callback runs on the loop thread.
 *
 * Design: one `struct conn` per TCP connection (a socket with read/write events, an output evbuffer
 * and an nghttp2 server session) and one `struct skpx_grpc_call` per request stream. Calls are kept
 * on a per-connection list because nghttp2_session_del() does not report the streams it drops:
 * tearing a connection down walks that list so on_close runs exactly once per call. Nothing is
 * written to the socket from inside nghttp2 callbacks: while the session is being fed (`in_io`) a
 * finish only queues frames, and the read handler flushes afterwards; a finish from outside (a
 * timer, a storage commit) flushes at once. Responses are sent when a call finishes, so a non-OK
 * status leaves as Trailers-Only and an OK one as HEADERS + DATA + trailers; a handler that answers
 * before the end (skpx_grpc_call_send, bidirectional methods such as pprof `collect`) opens the
 * response early and the data provider defers while its queue is empty, then ends with trailers at
 * finish. Connections are freed only from top-level event callbacks (read/event handlers, a
 * deferred close event, the grace timer) or by skpx_grpc_server_free(), never from inside a nghttp2
 * or user callback. */
#include "wire/grpc_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <nghttp2/nghttp2.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/grow.h"
#include "common/clock.h"
#include "common/log.h"
#include "wire/peer_count.h"

/* Default flow-control window (stream and connection). Agents stream many small snapshots;
 * 16 MiB keeps a fast sender from stalling on WINDOW_UPDATE round trips on loopback and LAN. */
#define GRPC_SERVER_DEFAULT_WINDOW (16u * 1024 * 1024)
/* Default SETTINGS_MAX_CONCURRENT_STREAMS: far above what one agent uses (a few at a time),
 * small enough to bound per-connection memory. */
#define GRPC_SERVER_DEFAULT_MAX_STREAMS 1000u
/* Default connection cap; each connection costs a session and buffers (tens of KiB). */
#define GRPC_SERVER_DEFAULT_MAX_CONNS 1024u
/* Request metadata kept per call. gRPC's default metadata limit is 8 KiB; twice that leaves
 * room for long auth tokens. Larger requests are refused with RESOURCE_EXHAUSTED. */
#define GRPC_SERVER_MAX_HEADER_BYTES (16u * 1024)
/* Default time a client has to send the HTTP/2 preface and a first frame, so a half-open or
 * silent connection cannot pin a connection slot forever. */
#define GRPC_SERVER_DEFAULT_HANDSHAKE_MS 10000
/* nghttp2 output is pulled into the socket buffer until this much is pending; the rest is
 * produced from the write callback once the socket drains (bounds memory per connection). */
#define GRPC_SERVER_OUTBUF_HIGH (1u * 1024 * 1024)
/* One server-wide read buffer (the loop is single-threaded): each read of a streaming
 * connection takes up to this much, and nghttp2 consumes it before the next read. */
#define GRPC_SERVER_READ_BUF (256u * 1024)
/* The loop's turn (see turn_spent): the gRPC connections together take at most this long of
 * one turn of the event loop, so the HTTP listener (/healthz, the API) and timers get theirs.
 * Work is checked against it after each GRPC_SERVER_FEED_SLICE bytes handed to nghttp2: a
 * slice of the smallest streams (about 1,000 HEADERS frames) takes 10-20 ms; smaller slices
 * cost ordinary streaming a tenth of its CPU in clock reads and flushes. */
#define GRPC_SERVER_TURN_NS (10 * 1000 * 1000)
#define GRPC_SERVER_FEED_SLICE (16u * 1024)
/* iovecs per sendmsg() when output spans several evbuffer chains. */
#define GRPC_SERVER_WRITE_IOVECS 16
/* Reads per wakeup and connection before yielding to other connections. */
#define GRPC_SERVER_READS_PER_WAKEUP 4
/* grpc-message text is truncated to this many input bytes before percent-encoding. */
#define GRPC_SERVER_MAX_STATUS_MSG 512
/* After a fatal error, how long the final GOAWAY may take to leave before we just close. */
#define GRPC_SERVER_CLOSE_WRITE_TIMEOUT_MS 2000
/* Decode arena: the first block fits a few KB of decoded message (a ThreadSnapshot needs ~3 KB)
 * and grows, after overflows, up to this bound; larger messages use one-off blocks. */
#define GRPC_SERVER_ARENA_INIT (64u * 1024)
#define GRPC_SERVER_ARENA_MAX (4u * 1024 * 1024)
/* Per-connection bound on buffers assembling messages split across DATA frames. Data is
 * consumed (and the flow-control window reopened) as it arrives, so without this bound one
 * connection could make the server hold max_concurrent_streams x max_msg bytes. */
#define GRPC_SERVER_MAX_CONN_PARTIAL (64u * 1024 * 1024)
#define GRPC_SERVER_MAX_LISTENERS 8
#define GRPC_SERVER_LISTEN_BACKLOG 512
/* Bytes an early-answering call may have queued and not yet sent (skpx_grpc_call_send): the
 * answers such methods send are a few bytes each, so this only stops a runaway handler. */
#define GRPC_SERVER_MAX_PENDING_SEND (4u * 1024 * 1024)
/* Default per-peer connection cap: far above one host's agents (a process keeps one channel),
 * far below the fd limit, so one address cannot take every slot. */
#define GRPC_SERVER_DEFAULT_PER_PEER 256u
/* Default idle limits. Agents make a call at least every 30 s (heartbeats, command polls), and
 * SkyWalking's streaming reporters end their streams within seconds of going quiet. */
#define GRPC_SERVER_DEFAULT_IDLE_MS 120000
#define GRPC_SERVER_DEFAULT_STREAM_IDLE_MS 120000
/* Default memory budget for everything calls buffer (see struct skpx_grpc_server_opts). */
#define GRPC_SERVER_DEFAULT_BUDGET (256u * 1024 * 1024)
/* Default decode limit of one message: a 4 MiB message of ordinary content decodes into a few
 * times its size; millions of empty sub-messages would decode into gigabytes. */
#define GRPC_SERVER_DEFAULT_MAX_DECODED (64u * 1024 * 1024)
/* New calls are refused once the accounted bytes pass budget - budget / this (see
 * over_new_budget). */
#define GRPC_SERVER_NEW_HEADROOM_DIV 16u
/* Reads are sized so that the streams one read can open fit in the room left below the
 * new-call limit (read_slice): the cheapest new stream is a HEADERS frame of about this many
 * bytes (a 9-byte frame header and indexed header fields)... */
#define GRPC_SERVER_MIN_STREAM_INPUT 12u
/* ...and costs at most this much accounted memory (the call, nghttp2's stream state, the copied
 * headers, its refusal queued for sending). */
#define GRPC_SERVER_STREAM_COST_MAX (2u * GRPC_SERVER_CALL_COST)
/* The smallest read: at or over the new-call limit, one read opens at most about
 * GRPC_SERVER_MIN_SLICE / GRPC_SERVER_MIN_STREAM_INPUT streams, all refused. */
#define GRPC_SERVER_MIN_SLICE 256u
/* What an open call costs besides its buffers, charged to the budget: the call struct and
 * nghttp2's stream state (an estimate on the high side). */
#define GRPC_SERVER_CALL_COST 4096u
/* accept() failed for lack of fds: retry after this long if no connection closed before. */
#define GRPC_SERVER_ACCEPT_RETRY_MS 250

struct conn;

struct decode_arena {
    uint8_t *base; /* owned; retained across messages, allocated on first use */
    size_t cap;
    size_t used;
    struct arena_extra *extra; /* owned; overflow blocks of the current message */
    size_t extra_bytes;
    size_t total; /* bytes handed out for the current message */
    size_t limit; /* max_decoded_bytes */
    bool over;    /* the current message went past `limit` */
};

struct skpx_grpc_call {
    struct conn *conn;
    struct skpx_grpc_call *prev, *next; /* conn->calls list */
    int32_t stream_id;
    const struct skpx_grpc_method *method; /* NULL until routed */
    char *hdrs;                            /* owned; "name\0value\0" pairs */
    size_t hdrs_len;
    size_t hdrs_cap;
    const char *path; /* into hdrs once headers are complete */
    bool hdrs_too_big;
    bool headers_done;
    bool user_visible;  /* on_start ran (or would have): on_close is owed */
    bool remote_closed; /* client half-closed */
    bool finished;      /* skpx_grpc_call_finish (or an internal error) answered */
    bool response_sent; /* the frame carrying END_STREAM left */
    bool closed;        /* on_close ran */
    int status;         /* final status once finished */
    uint64_t n_msgs;
    struct skpx_grpc_reader reader;
    uint8_t *resp; /* owned; queued response messages (prefix + packed each) */
    size_t resp_len;
    size_t resp_off; /* next byte the data provider hands to nghttp2 */
    size_t resp_cap;
    bool headers_sent;    /* response HEADERS submitted (by finish or by an early send) */
    bool deferred;        /* the data provider returned DEFERRED: resume on new data */
    char *status_msg;     /* owned; percent-encoded grpc-message or NULL */
    void *data;           /* user slot */
    int64_t last_rx_ms;   /* monotonic: last HEADERS/DATA of this stream */
    size_t charged;       /* bytes counted against the server's memory budget */
    size_t handler_bytes; /* per-call buffers the handler charged (skpx_grpc_call_charge) */
};

struct conn {
    struct skpx_grpc_server *srv;
    struct conn *prev, *next;
    evutil_socket_t fd;     /* owned, non-blocking (evconnlistener makes it so) */
    struct evbuffer *out;   /* owned; frames waiting for the socket */
    struct event *write_ev; /* armed while the socket is full */
    nghttp2_session *session;
    struct event *close_ev;
    struct event *read_ev; /* EV_READ | EV_PERSIST on the socket, no timeout */
    /* One-shot handshake timer. Not a timeout on read_ev: libevent re-arms a persistent event's
     * timeout at every wakeup even after event_add(ev, NULL), which closed idle connections. */
    struct event *handshake_ev;
    struct skpx_grpc_call *calls;
    char peer[INET6_ADDRSTRLEN + 8];
    bool in_io;       /* inside nghttp2_session_mem_recv/mem_send: do not flush or free */
    bool dying;       /* being torn down: finish requests are ignored */
    bool got_frame;   /* a valid frame arrived: the handshake is over */
    bool proto_error; /* counted once at teardown */
    bool close_queued;
    size_t partial_bytes;   /* assembly buffers of this connection's calls (sum of buf_cap) */
    bool close_after_write; /* fatal error: close once the output (GOAWAY) has drained */
    bool read_paused;       /* read_ev removed over the budget until the output drains */
    bool turn_deferred;     /* read_ev removed until the next turn (turn_cb) */
    /* Bytes read but not yet given to nghttp2 when the turn ended (owned, counted in the
     * budget): they go first when the connection's turn comes again. */
    uint8_t *pend;
    size_t pend_len;
    uint64_t bytes_in;
    uint64_t peer_key;  /* skpx_peer_key of the peer; a slot in srv->peers is held */
    size_t h2_bytes;    /* what nghttp2 holds for this session (h2_mem), in the budget */
    int64_t last_rx_ms; /* monotonic: last bytes received */
};

struct skpx_grpc_server {
    struct event_base *base;
    struct skpx_grpc_server_opts opts;
    /* Owned array of owned copies: each method is allocated on its own because calls keep
     * pointers to it, so registering more methods while serving is safe. */
    struct skpx_grpc_method **methods;
    size_t n_methods;
    struct evconnlistener *listeners[GRPC_SERVER_MAX_LISTENERS];
    size_t n_listeners;
    struct conn *conns;
    nghttp2_session_callbacks *cbs;
    nghttp2_option *h2opt;
    struct skpx_grpc_server_stats stats;
    struct decode_arena arena;
    uint8_t *rbuf;                   /* owned; GRPC_SERVER_READ_BUF bytes */
    ProtobufCAllocator pb_allocator; /* allocates from `arena` */
    bool shutting_down;
    bool done_fired;
    struct event *grace_ev;
    struct event *done_ev;
    void (*done_cb)(void *ud);
    void *done_ud;
    struct skpx_peer_count peers;
    struct event *sweep_ev;  /* idle timeouts (persistent) */
    struct event *resume_ev; /* accept retry after running out of fds */
    bool accept_paused;
    struct event *turn_ev;  /* 0 s timer: the deferred connections read again */
    struct timeval turn_tv; /* the loop's cached time of the current turn (its identity) */
    int64_t turn_start_ns;  /* the first gRPC work of that turn */
};

static void conn_flush(struct conn *c);
static void conn_free(struct conn *c);
static void server_done_cb(evutil_socket_t fd, short what, void *arg);
static void accept_resume(struct skpx_grpc_server *srv);

/* ---------------------------------------------------------------- decode arena
 * Request messages are decoded into a server-wide bump arena that is reset after each
 * on_message returns (the message is borrowed only for the callback, and the loop decodes one
 * message at a time). A ThreadSnapshot decodes into ~25 small blocks; individual mallocs and
 * frees for them cost about a third of the server's CPU at 300k msg/s. */

struct arena_extra {
    struct arena_extra *next;
    max_align_t data[];
};

static size_t arena_round(size_t n)
{
    return (n + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
}

static void *arena_alloc(void *ud, size_t n)
{
    struct decode_arena *a = ud;
    n = arena_round(n ? n : 1);
    if (a->limit && (n > a->limit || a->total > a->limit - n)) {
        a->over = true;
        return NULL;
    }
    a->total += n;
    if (!a->base) {
        a->base = skpx_malloc(a->cap);
        if (!a->base)
            a->cap = 0;
    }
    if (n <= a->cap - a->used) {
        void *p = a->base + a->used;
        a->used += n;
        return p;
    }
    /* Overflow: a block of its own, freed at the next reset. */
    if (n > SIZE_MAX - sizeof(struct arena_extra))
        return NULL;
    struct arena_extra *e = skpx_malloc(sizeof(*e) + n);
    if (!e)
        return NULL;
    e->next = a->extra;
    a->extra = e;
    a->extra_bytes += n;
    return e->data;
}

static void arena_free(void *ud, void *p)
{
    (void)ud;
    (void)p; /* everything goes at the next reset */
}

static void arena_reset(struct decode_arena *a)
{
    while (a->extra) {
        struct arena_extra *e = a->extra;
        a->extra = e->next;
        skpx_free(e);
    }
    /* Grow the retained block when messages keep overflowing it, up to a fixed bound. */
    if (a->extra_bytes && a->cap < GRPC_SERVER_ARENA_MAX) {
        size_t want = a->cap + a->extra_bytes;
        a->cap = want < GRPC_SERVER_ARENA_MAX ? want : GRPC_SERVER_ARENA_MAX;
        skpx_free(a->base);
        a->base = NULL;
    }
    a->extra_bytes = 0;
    a->used = 0;
    a->total = 0;
    a->over = false;
}

static void arena_cleanup(struct decode_arena *a)
{
    arena_reset(a);
    skpx_free(a->base);
    a->base = NULL;
}

/* ---------------------------------------------------------------- calls */

/* ---------------------------------------------------------------- nghttp2's memory
 * Each session allocates through h2_mem (mem_user_data = its conn), so the streams, header
 * tables and frame queues nghttp2 keeps count in the server's budget like the calls' own
 * buffers: each block carries its size in a header of H2_MEM_HDR bytes (also a fair estimate of
 * malloc's own overhead per block, which is counted with it). */
#define H2_MEM_HDR 16u
_Static_assert(H2_MEM_HDR >= sizeof(size_t) && H2_MEM_HDR % _Alignof(max_align_t) == 0,
               "the header keeps nghttp2's blocks aligned");

static void h2_count(struct conn *c, size_t add, size_t sub)
{
    struct skpx_grpc_server_stats *st = &c->srv->stats;
    c->h2_bytes = c->h2_bytes + add - sub;
    st->nghttp2_bytes = st->nghttp2_bytes + add - sub;
    st->buffered_bytes = st->buffered_bytes + add - sub;
    if (st->buffered_bytes > st->buffered_peak)
        st->buffered_peak = st->buffered_bytes;
}

static void *h2_malloc(size_t size, void *ud)
{
    if (size > SIZE_MAX - H2_MEM_HDR)
        return NULL;
    uint8_t *p = skpx_malloc(size + H2_MEM_HDR);
    if (!p)
        return NULL;
    memcpy(p, &size, sizeof(size));
    h2_count(ud, size + H2_MEM_HDR, 0);
    return p + H2_MEM_HDR;
}

static void h2_free(void *ptr, void *ud)
{
    if (!ptr)
        return;
    uint8_t *p = (uint8_t *)ptr - H2_MEM_HDR;
    size_t size;
    memcpy(&size, p, sizeof(size));
    h2_count(ud, 0, size + H2_MEM_HDR);
    skpx_free(p);
}

static void *h2_calloc(size_t n, size_t size, void *ud)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = h2_malloc(n * size, ud);
    if (p)
        memset(p, 0, n * size);
    return p;
}

static void *h2_realloc(void *ptr, size_t size, void *ud)
{
    if (!ptr)
        return h2_malloc(size, ud);
    if (size > SIZE_MAX - H2_MEM_HDR)
        return NULL;
    uint8_t *p = (uint8_t *)ptr - H2_MEM_HDR;
    size_t old;
    memcpy(&old, p, sizeof(old));
    uint8_t *np = skpx_realloc(p, size + H2_MEM_HDR);
    if (!np)
        return NULL;
    memcpy(np, &size, sizeof(size));
    h2_count(ud, size, old);
    return np + H2_MEM_HDR;
}

/* Re-counts what `call` holds against the server's memory budget. */
static void call_recharge(struct skpx_grpc_call *call, bool freeing)
{
    struct skpx_grpc_server *srv = call->conn->srv;
    size_t now = freeing ? 0
                         : GRPC_SERVER_CALL_COST + call->hdrs_cap + call->reader.buf_cap +
                               call->resp_cap + call->handler_bytes;
    srv->stats.buffered_bytes -= call->charged;
    srv->stats.buffered_bytes += now;
    call->charged = now;
    if (srv->stats.buffered_bytes > srv->stats.buffered_peak)
        srv->stats.buffered_peak = srv->stats.buffered_bytes;
}

static bool over_budget(const struct skpx_grpc_server *srv)
{
    return srv->stats.buffered_bytes > srv->opts.memory_budget;
}

/* New calls and connections stop a little before the budget (GRPC_SERVER_NEW_HEADROOM_DIV):
 * a refused stream still costs nghttp2's stream state until its answer leaves, and the calls
 * already open may still grow, so the accounted bytes stay within the budget. */
static bool over_new_budget(const struct skpx_grpc_server *srv)
{
    size_t b = srv->opts.memory_budget;
    return srv->stats.buffered_bytes > b - b / GRPC_SERVER_NEW_HEADROOM_DIV;
}

/* How many bytes the next read may take from a socket (see GRPC_SERVER_MIN_STREAM_INPUT): the
 * whole read buffer far from the budget, less as the accounted bytes approach the new-call
 * limit, so that one read of tiny HEADERS frames cannot open more streams than the budget
 * holds (a 256 KiB read could open 20,000). */
static size_t read_slice(const struct skpx_grpc_server *srv)
{
    size_t b = srv->opts.memory_budget;
    size_t limit = b - b / GRPC_SERVER_NEW_HEADROOM_DIV;
    size_t room = srv->stats.buffered_bytes < limit ? limit - srv->stats.buffered_bytes : 0;
    size_t n = room / GRPC_SERVER_STREAM_COST_MAX * GRPC_SERVER_MIN_STREAM_INPUT;
    if (n < GRPC_SERVER_MIN_SLICE)
        return GRPC_SERVER_MIN_SLICE;
    return n < GRPC_SERVER_READ_BUF ? n : GRPC_SERVER_READ_BUF;
}

bool skpx_grpc_call_charge(struct skpx_grpc_call *call, int64_t delta)
{
    if (delta < 0 && (uint64_t)-delta > call->handler_bytes)
        call->handler_bytes = 0;
    else
        call->handler_bytes = (size_t)((int64_t)call->handler_bytes + delta);
    if (call->charged) /* 0 only once call_free released it: nothing to re-count */
        call_recharge(call, false);
    return !over_budget(call->conn->srv);
}

static struct skpx_grpc_call *call_new(struct conn *c, int32_t stream_id)
{
    struct skpx_grpc_call *call = skpx_calloc(1, sizeof(*call));
    if (!call)
        return NULL;
    call->conn = c;
    call->stream_id = stream_id;
    skpx_grpc_reader_init(&call->reader, c->srv->opts.max_msg);
    call->next = c->calls;
    if (c->calls)
        c->calls->prev = call;
    c->calls = call;
    call->last_rx_ms = skpx_mono_ms();
    call_recharge(call, false);
    return call;
}

static void call_free(struct skpx_grpc_call *call)
{
    struct conn *c = call->conn;
    if (call->prev)
        call->prev->next = call->next;
    else
        c->calls = call->next;
    if (call->next)
        call->next->prev = call->prev;
    c->partial_bytes -= call->reader.buf_cap;
    call_recharge(call, true);
    skpx_grpc_reader_cleanup(&call->reader);
    SKPX_FREE_ALL(call->hdrs, call->resp, call->status_msg, call);
}

/* Runs on_close once (if owed) and counts a failure for non-OK ends. */
static void call_report_close(struct skpx_grpc_call *call, int status)
{
    struct skpx_grpc_server *srv = call->conn->srv;
    if (call->closed)
        return;
    call->closed = true;
    if (status != SKPX_GRPC_OK && call->headers_done)
        srv->stats.calls_failed++;
    if (call->user_visible && call->method && call->method->on_close)
        call->method->on_close(call, call->method->ud, status);
}

static bool hdrs_append(struct skpx_grpc_call *call, const uint8_t *s, size_t len)
{
    if (skpx_grow_capped(&call->hdrs, &call->hdrs_cap, call->hdrs_len + len + 1, 1, 512,
                         GRPC_SERVER_MAX_HEADER_BYTES) != SKP_OK)
        return false; /* past the header limit, or no memory */
    memcpy(call->hdrs + call->hdrs_len, s, len);
    call->hdrs[call->hdrs_len + len] = '\0';
    call->hdrs_len += len + 1;
    call_recharge(call, false);
    return true;
}

static const char *hdr_get(const struct skpx_grpc_call *call, const char *name)
{
    size_t off = 0;
    while (off < call->hdrs_len) {
        const char *n = call->hdrs + off;
        size_t nl = strlen(n);
        const char *v = n + nl + 1;
        if (strcmp(n, name) == 0)
            return v;
        off += nl + 1 + strlen(v) + 1;
    }
    return NULL;
}

#define MKNV(n, v)                                                                                 \
    {                                                                                              \
        (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE             \
    }

static ssize_t resp_read_cb(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
                            size_t length, uint32_t *data_flags, nghttp2_data_source *source,
                            void *user_data)
{
    (void)user_data;
    struct skpx_grpc_call *call = source->ptr;
    size_t left = call->resp_len - call->resp_off;
    if (left == 0 && !call->finished) {
        /* An early-answering call with nothing queued: wait for the next send or finish. */
        call->deferred = true;
        return NGHTTP2_ERR_DEFERRED;
    }
    size_t n = left < length ? left : length;
    if (n)
        memcpy(buf, call->resp + call->resp_off, n);
    call->resp_off += n;
    if (call->resp_off == call->resp_len && call->finished) {
        char status[12];
        snprintf(status, sizeof(status), "%d", call->status);
        nghttp2_nv trailers[] = {
            MKNV("grpc-status", status),
            MKNV("grpc-message", call->status_msg ? call->status_msg : ""),
        };
        *data_flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        int rv = nghttp2_submit_trailer(session, stream_id, trailers,
                                        SKP_ARRAY_LEN(trailers) - (call->status_msg ? 0 : 1));
        if (rv != 0) {
            SKPX_WARN("grpc-server: submit trailer failed on stream %d: %s", stream_id,
                      nghttp2_strerror(rv));
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        }
    }
    return (ssize_t)n;
}

/* Appends one length-prefixed message (NULL = empty message) to the call's response queue.
 * Errors: SKP_ETOOBIG (over GRPC_SERVER_MAX_PENDING_SEND or 4 GiB), SKP_ENOMEM. */
static skp_err call_queue_message(struct skpx_grpc_call *call, const ProtobufCMessage *msg)
{
    size_t body = msg ? protobuf_c_message_get_packed_size(msg) : 0;
    if (body > UINT32_MAX)
        return SKP_ETOOBIG;
    if (call->resp_off > 0 && call->resp_off == call->resp_len)
        call->resp_off = call->resp_len = 0;
    size_t pending = call->resp_len - call->resp_off;
    size_t need = call->resp_len + SKPX_GRPC_PREFIX_LEN + body;
    if (call->headers_sent && pending + SKPX_GRPC_PREFIX_LEN + body > GRPC_SERVER_MAX_PENDING_SEND)
        return SKP_ETOOBIG;
    if (need > call->resp_cap) {
        uint8_t *nb = skpx_realloc(call->resp, need);
        if (!nb)
            return SKP_ENOMEM;
        call->resp = nb;
        call->resp_cap = need;
    }
    call_recharge(call, false);
    skpx_grpc_prefix_write(call->resp + call->resp_len, (uint32_t)body);
    if (msg)
        protobuf_c_message_pack(msg, call->resp + call->resp_len + SKPX_GRPC_PREFIX_LEN);
    call->resp_len = need;
    return SKP_OK;
}

static void conn_queue_close(struct conn *c);

/* An nghttp2 submission for `call` failed (nghttp2 allocates through h2_mem, which fails like
 * any allocation): the stream is reset, and if even that cannot be queued the connection is
 * closed, so no client waits for an answer that will never come. */
static void call_submit_failed(struct skpx_grpc_call *call, int rv, const char *what)
{
    static struct skpx_log_limit lim;
    skpx_log_limited(&lim, SKPX_LOG_WARN, "grpc-server: %s failed on stream %d: %s", what,
                     call->stream_id, nghttp2_strerror(rv));
    if (nghttp2_submit_rst_stream(call->conn->session, NGHTTP2_FLAG_NONE, call->stream_id,
                                  NGHTTP2_INTERNAL_ERROR) != 0)
        conn_queue_close(call->conn);
}

/* Submits the response HEADERS with the queue as its data provider. */
static void call_submit_headers(struct skpx_grpc_call *call)
{
    nghttp2_nv nva[] = {
        MKNV(":status", "200"),
        MKNV("content-type", "application/grpc"),
        MKNV("grpc-accept-encoding", "identity"),
    };
    nghttp2_data_provider prd = {.source.ptr = call, .read_callback = resp_read_cb};
    call->headers_sent = true;
    int rv = nghttp2_submit_response(call->conn->session, call->stream_id, nva, SKP_ARRAY_LEN(nva),
                                     &prd);
    if (rv != 0)
        call_submit_failed(call, rv, "submit response");
}

/* Wakes a deferred data provider after the queue grew or the call finished. */
static void call_resume(struct skpx_grpc_call *call)
{
    if (!call->deferred)
        return;
    call->deferred = false;
    int rv = nghttp2_session_resume_data(call->conn->session, call->stream_id);
    if (rv != 0)
        call_submit_failed(call, rv, "resume data");
}

/* Sends a response without a body: Trailers-Only for gRPC errors (http_status 200), or a plain
 * HTTP error (405/415) that still carries grpc-status for gRPC clients. */
static void call_submit_trailers_only(struct skpx_grpc_call *call, const char *http_status)
{
    char status[12];
    snprintf(status, sizeof(status), "%d", call->status);
    nghttp2_nv nva[] = {
        MKNV(":status", http_status),
        MKNV("content-type", "application/grpc"),
        MKNV("grpc-status", status),
        MKNV("grpc-message", call->status_msg ? call->status_msg : ""),
    };
    size_t n = SKP_ARRAY_LEN(nva) - (call->status_msg ? 0 : 1);
    int rv = nghttp2_submit_response(call->conn->session, call->stream_id, nva, n, NULL);
    if (rv != 0)
        call_submit_failed(call, rv, "submit response");
}

static void call_set_message(struct skpx_grpc_call *call, const char *message)
{
    if (!message || !*message)
        return;
    size_t in_len = strnlen(message, GRPC_SERVER_MAX_STATUS_MSG);
    size_t need = skpx_grpc_percent_encode(message, in_len, NULL, 0);
    call->status_msg = skpx_malloc(need + 1);
    if (call->status_msg)
        skpx_grpc_percent_encode(message, in_len, call->status_msg, need + 1);
}

/* Answers with a non-OK status (internal errors and user errors alike). */
static void call_fail(struct skpx_grpc_call *call, int status, const char *http_status,
                      const char *message)
{
    if (call->finished)
        return;
    call->finished = true;
    call->status = status;
    call_set_message(call, message);
    if (call->headers_sent)
        call_resume(call); /* answered early: the status leaves in the trailers */
    else
        call_submit_trailers_only(call, http_status);
    conn_flush(call->conn);
}

skp_err skpx_grpc_call_send(struct skpx_grpc_call *call, const ProtobufCMessage *msg)
{
    if (!call || call->finished || call->closed || call->conn->dying)
        return SKP_ESTATE;
    skp_err err = call_queue_message(call, msg);
    if (err)
        return err;
    if (!call->headers_sent)
        call_submit_headers(call);
    else
        call_resume(call);
    conn_flush(call->conn);
    return SKP_OK;
}

void skpx_grpc_call_finish(struct skpx_grpc_call *call, const ProtobufCMessage *resp, int status,
                           const char *message)
{
    if (!call || call->finished || call->closed || call->conn->dying)
        return;
    if (status != SKPX_GRPC_OK) {
        call_fail(call, status, "200", message);
        return;
    }
    /* After an early send, NULL means "no further message"; otherwise it is an empty one. */
    if (resp || !call->headers_sent) {
        skp_err err = call_queue_message(call, resp);
        if (err) {
            call_fail(call, err == SKP_ENOMEM ? SKPX_GRPC_RESOURCE_EXHAUSTED : SKPX_GRPC_INTERNAL,
                      "200", err == SKP_ENOMEM ? "server out of memory" : "response too large");
            return;
        }
    }
    call->finished = true;
    call->status = SKPX_GRPC_OK;
    if (call->headers_sent)
        call_resume(call);
    else
        call_submit_headers(call);
    conn_flush(call->conn);
}

const char *skpx_grpc_call_path(const struct skpx_grpc_call *call)
{
    return call->path ? call->path : "";
}

const char *skpx_grpc_call_metadata(const struct skpx_grpc_call *call, const char *name)
{
    return hdr_get(call, name);
}

const char *skpx_grpc_call_peer(const struct skpx_grpc_call *call)
{
    return call->conn->peer;
}

void skpx_grpc_call_set_data(struct skpx_grpc_call *call, void *data)
{
    call->data = data;
}

void *skpx_grpc_call_get_data(const struct skpx_grpc_call *call)
{
    return call->data;
}

/* ---------------------------------------------------------------- request processing */

static const struct skpx_grpc_method *route(const struct skpx_grpc_server *srv, const char *path)
{
    for (size_t i = 0; i < srv->n_methods; i++) {
        if (strcmp(srv->methods[i]->path, path) == 0)
            return srv->methods[i];
    }
    return NULL;
}

/* The request headers are complete: validate and route, then let the handler accept it. */
static void call_headers_done(struct skpx_grpc_call *call)
{
    struct skpx_grpc_server *srv = call->conn->srv;
    call->headers_done = true;
    srv->stats.calls_started++;
    if (call->hdrs_too_big) {
        call_fail(call, SKPX_GRPC_RESOURCE_EXHAUSTED, "200", "request metadata too large");
        return;
    }
    if (over_new_budget(srv)) {
        srv->stats.budget_refused++;
        call_fail(call, SKPX_GRPC_RESOURCE_EXHAUSTED, "200",
                  "server memory budget reached, retry later");
        return;
    }
    call->path = hdr_get(call, ":path");
    const char *method = hdr_get(call, ":method");
    const char *ctype = hdr_get(call, "content-type");
    if (!method || strcmp(method, "POST") != 0) {
        call_fail(call, SKPX_GRPC_INTERNAL, "405", "gRPC requires POST");
        return;
    }
    /* "application/grpc" optionally followed by "+proto", ";params" etc. */
    if (!ctype || strncmp(ctype, "application/grpc", 16) != 0 ||
        (ctype[16] != '\0' && ctype[16] != '+' && ctype[16] != ';')) {
        call_fail(call, SKPX_GRPC_INTERNAL, "415", "invalid gRPC content-type");
        return;
    }
    const struct skpx_grpc_method *m = route(srv, call->path ? call->path : "");
    if (!m) {
        char msg[GRPC_SERVER_MAX_STATUS_MSG];
        snprintf(msg, sizeof(msg), "unknown method %s", call->path ? call->path : "");
        call_fail(call, SKPX_GRPC_UNIMPLEMENTED, "200", msg);
        return;
    }
    call->method = m;
    call->user_visible = true;
    if (m->on_start) {
        int st = m->on_start(call, m->ud);
        if (st != SKPX_GRPC_OK)
            call_fail(call, st, "200", skpx_grpc_status_name(st));
    }
}

static skp_err on_grpc_message(void *ud, const uint8_t *raw, size_t len)
{
    struct skpx_grpc_call *call = ud;
    const struct skpx_grpc_method *m = call->method;
    struct skpx_grpc_server *srv = call->conn->srv;

    srv->stats.messages_received++;
    call->n_msgs++;
    if (!m->client_streaming && call->n_msgs > 1) {
        call_fail(call, SKPX_GRPC_INTERNAL, "200", "more than one request message in a unary call");
        return SKP_ESTATE;
    }
    ProtobufCMessage *msg = NULL;
    if (m->request_desc) {
        msg = protobuf_c_message_unpack(m->request_desc, &srv->pb_allocator, len, raw);
        if (!msg) {
            bool over = srv->arena.over;
            arena_reset(&srv->arena);
            if (over) {
                srv->stats.decode_refused++;
                call_fail(call, SKPX_GRPC_RESOURCE_EXHAUSTED, "200",
                          "request message decodes into more memory than allowed");
            } else {
                call_fail(call, SKPX_GRPC_INVALID_ARGUMENT, "200", "cannot decode request message");
            }
            return SKP_ESTATE;
        }
    }
    int st = SKPX_GRPC_OK;
    if (m->on_message)
        st = m->on_message(call, m->ud, msg, raw, len);
    if (msg)
        arena_reset(&srv->arena); /* frees msg */
    if (st != SKPX_GRPC_OK) {
        call_fail(call, st, "200", skpx_grpc_status_name(st));
        return SKP_ESTATE;
    }
    /* The handler may have answered already: stop delivering messages. */
    return call->finished ? SKP_ESTATE : SKP_OK;
}

static void call_data(struct skpx_grpc_call *call, const uint8_t *data, size_t len)
{
    if (call->finished || !call->method)
        return;
    struct conn *c = call->conn;
    struct skpx_grpc_server *srv = c->srv;
    size_t cap_before = call->reader.buf_cap;
    skp_err err = skpx_grpc_reader_feed(&call->reader, data, len, on_grpc_message, call);
    c->partial_bytes += call->reader.buf_cap - cap_before;
    if (call->reader.buf_cap != cap_before)
        call_recharge(call, false);
    if (err == SKP_OK && (c->partial_bytes > GRPC_SERVER_MAX_CONN_PARTIAL || over_budget(srv))) {
        bool budget = c->partial_bytes <= GRPC_SERVER_MAX_CONN_PARTIAL;
        c->partial_bytes -= call->reader.buf_cap;
        skpx_grpc_reader_cleanup(&call->reader);
        call_recharge(call, false);
        if (budget)
            srv->stats.budget_refused++;
        call_fail(call, SKPX_GRPC_RESOURCE_EXHAUSTED, "200",
                  budget ? "server memory budget reached, retry later"
                         : "too much partially received request data on this connection");
        return;
    }
    switch (err) {
    case SKP_OK:
    case SKP_ESTATE: /* answered from inside the message callback */
        break;
    case SKP_ETOOBIG: {
        char msg[128];
        snprintf(msg, sizeof(msg), "request message larger than max (%zu bytes)",
                 call->reader.max_msg);
        call_fail(call, SKPX_GRPC_RESOURCE_EXHAUSTED, "200", msg);
        break;
    }
    case SKP_ENOTSUP:
        call_fail(call, SKPX_GRPC_UNIMPLEMENTED, "200", "compression not supported");
        break;
    case SKP_ENOMEM:
        call_fail(call, SKPX_GRPC_RESOURCE_EXHAUSTED, "200", "server out of memory");
        break;
    default:
        call_fail(call, SKPX_GRPC_INTERNAL, "200", "malformed gRPC message prefix");
        break;
    }
}

/* The client half-closed the stream. */
static void call_remote_end(struct skpx_grpc_call *call)
{
    call->remote_closed = true;
    if (call->finished || !call->method)
        return;
    if (!skpx_grpc_reader_idle(&call->reader)) {
        call_fail(call, SKPX_GRPC_INTERNAL, "200", "request stream ended inside a message");
        return;
    }
    if (!call->method->client_streaming && call->n_msgs == 0) {
        call_fail(call, SKPX_GRPC_INTERNAL, "200", "unary call without a request message");
        return;
    }
    call->method->on_end(call, call->method->ud);
}

/* ---------------------------------------------------------------- nghttp2 callbacks */

static int h2_on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame,
                               void *user_data)
{
    struct conn *c = user_data;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    struct skpx_grpc_call *call = call_new(c, frame->hd.stream_id);
    if (!call)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets this stream only */
    nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, call);
    return 0;
}

static int h2_on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                        size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                        void *user_data)
{
    (void)flags;
    (void)user_data;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    struct skpx_grpc_call *call =
        nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (!call || call->hdrs_too_big)
        return 0;
    /* Names arrive lower-case: nghttp2's HTTP messaging checks reject upper-case ones. */
    if (!hdrs_append(call, name, namelen) || !hdrs_append(call, value, valuelen))
        call->hdrs_too_big = true;
    return 0;
}

static int h2_on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                            const uint8_t *data, size_t len, void *user_data)
{
    (void)flags;
    (void)user_data;
    struct skpx_grpc_call *call = nghttp2_session_get_stream_user_data(session, stream_id);
    if (call) {
        call->last_rx_ms = skpx_mono_ms();
        call_data(call, data, len);
    }
    return 0;
}

static int h2_on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    struct conn *c = user_data;
    if (!c->got_frame) {
        c->got_frame = true;
        event_del(c->handshake_ev); /* handshake done: idle connections are fine from here */
    }
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
        return 0;
    struct skpx_grpc_call *call =
        nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (!call)
        return 0;
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
        call_headers_done(call);
    if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
        call_remote_end(call);
    return 0;
}

static int h2_on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    struct conn *c = user_data;
    if (frame->hd.type == NGHTTP2_GOAWAY && frame->goaway.error_code != NGHTTP2_NO_ERROR)
        c->proto_error = true;
    if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
        !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    struct skpx_grpc_call *call =
        nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (!call)
        return 0;
    call->response_sent = true;
    /* The answer is complete but the client is still sending (an early error): ask it to stop
     * without an error (RFC 9113 section 8.1), so no more request data is wasted. */
    if (!call->remote_closed)
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, call->stream_id, NGHTTP2_NO_ERROR);
    return 0;
}

static int h2_on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
                              void *user_data)
{
    (void)error_code;
    (void)user_data;
    struct skpx_grpc_call *call = nghttp2_session_get_stream_user_data(session, stream_id);
    if (!call)
        return 0;
    nghttp2_session_set_stream_user_data(session, stream_id, NULL);
    call_report_close(call, call->response_sent ? call->status : SKPX_GRPC_CANCELLED);
    call_free(call);
    return 0;
}

/* ---------------------------------------------------------------- connections */

static void conn_close_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    conn_free(arg);
}

static void conn_queue_close(struct conn *c)
{
    if (c->close_queued)
        return;
    c->close_queued = true;
    event_active(c->close_ev, EV_TIMEOUT, 0);
}

/* Writes pending output without blocking; sendmsg(MSG_NOSIGNAL), so a peer that went away
 * never raises SIGPIPE in the host process. Returns 1 when everything left, 0 when the socket
 * is full (write_ev is armed, with `tv` if not NULL), -1 on a socket error. */
static int conn_write_out(struct conn *c, const struct timeval *tv)
{
    while (evbuffer_get_length(c->out) > 0) {
        struct evbuffer_iovec vec[GRPC_SERVER_WRITE_IOVECS];
        struct iovec iov[GRPC_SERVER_WRITE_IOVECS];
        int n = evbuffer_peek(c->out, -1, NULL, vec, GRPC_SERVER_WRITE_IOVECS);
        if (n > GRPC_SERVER_WRITE_IOVECS)
            n = GRPC_SERVER_WRITE_IOVECS;
        for (int i = 0; i < n; i++) {
            iov[i].iov_base = vec[i].iov_base;
            iov[i].iov_len = vec[i].iov_len;
        }
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                event_add(c->write_ev, tv);
                return 0;
            }
            SKPX_DEBUG("grpc-server: %s: write failed: %s", c->peer, strerror(errno));
            return -1;
        }
        evbuffer_drain(c->out, (size_t)w);
    }
    return 1;
}

/* Stops reading and closes once pending output has left (bounded by a write timeout). */
static void conn_close_soon(struct conn *c)
{
    static const struct timeval tv = {GRPC_SERVER_CLOSE_WRITE_TIMEOUT_MS / 1000,
                                      (GRPC_SERVER_CLOSE_WRITE_TIMEOUT_MS % 1000) * 1000};
    event_del(c->read_ev);
    if (conn_write_out(c, &tv) != 0) {
        conn_queue_close(c);
        return;
    }
    c->close_after_write = true;
}

static void conn_check_done(struct conn *c)
{
    if (!nghttp2_session_want_read(c->session) && !nghttp2_session_want_write(c->session) &&
        evbuffer_get_length(c->out) == 0)
        conn_queue_close(c);
}

/* Moves nghttp2's pending frames to the socket: everything queued since the last flush leaves
 * in as few sendmsg() calls as possible. Never runs inside nghttp2 callbacks (in_io). */
static void conn_flush(struct conn *c)
{
    if (c->in_io || c->dying || c->close_queued || c->close_after_write)
        return;
    c->in_io = true;
    for (;;) {
        size_t produced = 0;
        while (evbuffer_get_length(c->out) < GRPC_SERVER_OUTBUF_HIGH) {
            const uint8_t *data = NULL;
            ssize_t n = nghttp2_session_mem_send(c->session, &data);
            if (n < 0) {
                SKPX_WARN("grpc-server: %s: send failed: %s", c->peer, nghttp2_strerror((int)n));
                c->in_io = false;
                conn_queue_close(c);
                return;
            }
            if (n == 0)
                break;
            if (evbuffer_add(c->out, data, (size_t)n) != 0) {
                c->in_io = false;
                conn_queue_close(c);
                return;
            }
            produced += (size_t)n;
        }
        int w = conn_write_out(c, NULL);
        if (w < 0) {
            c->in_io = false;
            conn_queue_close(c);
            return;
        }
        /* Socket full: write_ev resumes later. Nothing more to produce: done. */
        if (w == 0 || produced == 0 || !nghttp2_session_want_write(c->session))
            break;
    }
    c->in_io = false;
    conn_check_done(c);
}

static void conn_write_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    struct conn *c = arg;
    if (what & EV_TIMEOUT) {
        conn_free(c); /* a closing connection's last bytes could not leave in time */
        return;
    }
    if (c->close_after_write) {
        static const struct timeval tv = {GRPC_SERVER_CLOSE_WRITE_TIMEOUT_MS / 1000,
                                          (GRPC_SERVER_CLOSE_WRITE_TIMEOUT_MS % 1000) * 1000};
        if (conn_write_out(c, &tv) != 0)
            conn_queue_close(c);
        return;
    }
    conn_flush(c);
    if (c->read_paused && !c->close_queued && !c->dying && evbuffer_get_length(c->out) == 0) {
        c->read_paused = false;
        event_add(c->read_ev, NULL);
        if (c->pend_len)
            event_active(c->read_ev, EV_READ, 0);
    }
}

/* True once this turn of the loop has given the gRPC connections their share
 * (GRPC_SERVER_TURN_NS). A turn is known by the time libevent caches after each poll (it
 * changes from one turn to the next), so ordinary turns arm no timer. */
static bool turn_spent(struct skpx_grpc_server *srv)
{
    struct timeval tv;
    int64_t now = skpx_mono_ns();
    event_base_gettimeofday_cached(srv->base, &tv);
    if (tv.tv_sec != srv->turn_tv.tv_sec || tv.tv_usec != srv->turn_tv.tv_usec) {
        srv->turn_tv = tv;
        srv->turn_start_ns = now;
        return false;
    }
    return now - srv->turn_start_ns > GRPC_SERVER_TURN_NS;
}

/* Runs after the loop's next poll, behind the I/O that arrived meanwhile: the deferred
 * connections read again (those holding bytes at once). */
static void turn_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct skpx_grpc_server *srv = arg;
    for (struct conn *c = srv->conns; c; c = c->next) {
        if (!c->turn_deferred)
            continue;
        c->turn_deferred = false;
        if (c->read_paused || c->close_queued || c->close_after_write)
            continue;
        event_add(c->read_ev, NULL);
        if (c->pend_len)
            event_active(c->read_ev, EV_READ, 0);
    }
}

static void conn_defer(struct conn *c)
{
    static const struct timeval zero = {0, 0};
    event_del(c->read_ev);
    c->turn_deferred = true;
    c->srv->stats.turn_yields++;
    if (!evtimer_pending(c->srv->turn_ev, NULL))
        evtimer_add(c->srv->turn_ev, &zero);
}

static void pend_drop(struct conn *c)
{
    struct skpx_grpc_server_stats *st = &c->srv->stats;
    st->buffered_bytes -= c->pend_len;
    skpx_free(c->pend);
    c->pend = NULL;
    c->pend_len = 0;
}

/* Hands data[0..len) to nghttp2 a slice at a time, flushing after each (the streams refused in a
 * slice are answered and freed before the next). Returns 1 when all of it went in, 0 when the
 * turn ended first (the rest is kept in c->pend and the connection waits for its next turn), -1
 * when the connection is closing. */
static int conn_feed(struct conn *c, const uint8_t *data, size_t len)
{
    struct skpx_grpc_server *srv = c->srv;
    size_t off = 0;
    while (off < len) {
        if (off > 0 && turn_spent(srv)) {
            uint8_t *rest = skpx_malloc(len - off);
            if (!rest) {
                conn_close_soon(c);
                return -1;
            }
            memcpy(rest, data + off, len - off);
            c->pend = rest;
            c->pend_len = len - off;
            srv->stats.buffered_bytes += c->pend_len;
            if (srv->stats.buffered_bytes > srv->stats.buffered_peak)
                srv->stats.buffered_peak = srv->stats.buffered_bytes;
            conn_defer(c);
            return 0;
        }
        size_t n = len - off < GRPC_SERVER_FEED_SLICE ? len - off : GRPC_SERVER_FEED_SLICE;
        c->in_io = true;
        ssize_t rv = nghttp2_session_mem_recv(c->session, data + off, n);
        c->in_io = false;
        if (rv < 0) {
            /* Bad preface, flood or a fatal session error: the session cannot continue. Send
             * what nghttp2 queued (a GOAWAY if it got that far), then drop the connection. */
            SKPX_DEBUG("grpc-server: %s: HTTP/2 error: %s", c->peer, nghttp2_strerror((int)rv));
            c->proto_error = true;
            conn_flush(c);
            conn_close_soon(c);
            return -1;
        }
        off += n;
        conn_flush(c);
        if (c->close_queued || c->close_after_write)
            return -1;
    }
    return 1;
}

/* Reads straight into the server's read buffer and hands it to nghttp2 (libevent 2.1's
 * bufferevents read at most 4 KiB per call, plus an ioctl each: a third of the server's CPU when
 * streaming, hence no bufferevents here). A few reads per wakeup keep one busy connection from
 * starving the others, and the turn's time budget keeps the gRPC connections together from
 * starving the HTTP listener: tens of thousands of streams arriving at once took the loop for
 * seconds. */
static void conn_read_cb(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    struct skpx_grpc_server *srv = c->srv;

    (void)what;
    if (c->close_queued || c->close_after_write)
        return;
    if (c->pend_len) {
        if (turn_spent(srv)) {
            conn_defer(c);
            return;
        }
        /* The kept bytes are fed from their own buffer; a new one keeps what is left again. */
        uint8_t *p = c->pend;
        size_t len = c->pend_len;
        srv->stats.buffered_bytes -= len;
        c->pend = NULL;
        c->pend_len = 0;
        int r = conn_feed(c, p, len);
        skpx_free(p);
        if (r <= 0)
            return;
    }
    for (int i = 0; i < GRPC_SERVER_READS_PER_WAKEUP; i++) {
        if (c->close_queued || c->close_after_write)
            return;
        /* Over the new-call limit with answers that cannot leave (the peer does not read):
         * every stream read now would be refused and held until its answer leaves, so reading
         * waits until the output drains (conn_write_cb). */
        if (over_new_budget(srv) && evbuffer_get_length(c->out) > 0) {
            event_del(c->read_ev);
            c->read_paused = true;
            return;
        }
        if (turn_spent(srv)) {
            conn_defer(c);
            return;
        }
        size_t want = read_slice(srv);
        ssize_t n = recv(fd, srv->rbuf, want, 0);
        if (n == 0) {
            if (!c->got_frame && c->bytes_in > 0)
                c->proto_error = true; /* truncated preface */
            conn_free(c);
            return;
        }
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                return;
            SKPX_DEBUG("grpc-server: %s: read failed: %s", c->peer, strerror(errno));
            conn_free(c);
            return;
        }
        c->bytes_in += (uint64_t)n;
        c->last_rx_ms = skpx_mono_ms();
        if (conn_feed(c, srv->rbuf, (size_t)n) <= 0)
            return;
        if ((size_t)n < want)
            return; /* the socket is drained */
    }
}

static void conn_free(struct conn *c)
{
    if (!c)
        return;
    struct skpx_grpc_server *srv = c->srv;
    c->dying = true;
    /* nghttp2_session_del() does not report open streams: every call still on the list ends
     * here, as CANCELLED unless its answer already left. */
    while (c->calls) {
        struct skpx_grpc_call *call = c->calls;
        call_report_close(call, call->response_sent ? call->status : SKPX_GRPC_CANCELLED);
        call_free(call);
    }
    if (c->proto_error)
        srv->stats.protocol_errors++;
    nghttp2_session_del(c->session);
    if (c->read_ev)
        event_free(c->read_ev);
    if (c->write_ev)
        event_free(c->write_ev);
    if (c->handshake_ev)
        event_free(c->handshake_ev);
    if (c->out)
        evbuffer_free(c->out);
    pend_drop(c);
    if (c->fd >= 0)
        evutil_closesocket(c->fd);
    if (c->close_ev)
        event_free(c->close_ev);
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    srv->stats.connections_open--;
    skpx_peer_count_give(&srv->peers, c->peer_key);
    skpx_free(c);
    accept_resume(srv); /* an fd is free again */
    if (srv->shutting_down && !srv->conns && !srv->done_fired && srv->done_ev)
        event_active(srv->done_ev, EV_TIMEOUT, 0);
}

static void format_peer(const struct sockaddr *sa, char *out, size_t cap)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
        snprintf(out, cap, "%s:%u", ip, ntohs(in->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
        snprintf(out, cap, "[%s]:%u", ip, ntohs(in6->sin6_port));
    } else {
        snprintf(out, cap, "unknown");
    }
}

static skp_err conn_session_start(struct conn *c)
{
    struct skpx_grpc_server *srv = c->srv;
    nghttp2_mem mem = {c, h2_malloc, h2_free, h2_calloc, h2_realloc};
    if (nghttp2_session_server_new3(&c->session, srv->cbs, c, srv->h2opt, &mem) != 0)
        return SKP_ENOMEM;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, srv->opts.max_concurrent_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, srv->opts.window_bytes},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, GRPC_SERVER_MAX_HEADER_BYTES * 2},
    };
    if (nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, iv, SKP_ARRAY_LEN(iv)) != 0)
        return SKP_ENOMEM;
    if (nghttp2_session_set_local_window_size(c->session, NGHTTP2_FLAG_NONE, 0,
                                              (int32_t)srv->opts.window_bytes) != 0)
        return SKP_ENOMEM;
    return SKP_OK;
}

static void conn_handshake_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct conn *c = arg;
    if (c->got_frame)
        return;
    SKPX_DEBUG("grpc-server: %s: no HTTP/2 preface within %d ms", c->peer,
               c->srv->opts.handshake_timeout_ms);
    c->proto_error = true;
    conn_free(c);
}

static void listener_accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
                               int socklen, void *arg)
{
    (void)l;
    (void)socklen;
    struct skpx_grpc_server *srv = arg;
    static struct skpx_log_limit refuse_lim;
    if (srv->shutting_down) {
        evutil_closesocket(fd);
        return;
    }
    bool over = over_new_budget(srv);
    if (srv->stats.connections_open >= srv->opts.max_connections || over) {
        srv->stats.connections_refused += over ? 0 : 1;
        srv->stats.budget_refused += over ? 1 : 0;
        skpx_log_limited(&refuse_lim, SKPX_LOG_WARN, "grpc-server: %s, refusing new connections",
                         over ? "memory budget reached" : "connection limit reached");
        evutil_closesocket(fd);
        return;
    }
    uint64_t key = skpx_peer_key(sa);
    if (!skpx_peer_count_take(&srv->peers, key, srv->opts.max_conns_per_peer, NULL)) {
        char peer[INET6_ADDRSTRLEN + 8];
        format_peer(sa, peer, sizeof(peer));
        srv->stats.connections_refused++;
        skpx_log_limited(&refuse_lim, SKPX_LOG_WARN,
                         "grpc-server: %s has %zu connections (the per-peer cap), refusing", peer,
                         srv->opts.max_conns_per_peer);
        evutil_closesocket(fd);
        return;
    }
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct conn *c = skpx_calloc(1, sizeof(*c));
    if (!c) {
        skpx_peer_count_give(&srv->peers, key);
        evutil_closesocket(fd);
        return;
    }
    c->srv = srv;
    c->fd = fd; /* owned from here: conn_free closes it */
    c->peer_key = key;
    c->last_rx_ms = skpx_mono_ms();
    format_peer(sa, c->peer, sizeof(c->peer));
    c->out = evbuffer_new();
    c->close_ev = event_new(srv->base, -1, 0, conn_close_cb, c);
    c->read_ev = event_new(srv->base, fd, EV_READ | EV_PERSIST, conn_read_cb, c);
    c->write_ev = event_new(srv->base, fd, EV_WRITE, conn_write_cb, c);
    c->handshake_ev = evtimer_new(srv->base, conn_handshake_cb, c);
    /* Link first so conn_free can undo a partial setup. */
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    srv->stats.connections_open++;
    srv->stats.connections_accepted++;
    if (!c->out || !c->close_ev || !c->read_ev || !c->write_ev || !c->handshake_ev ||
        conn_session_start(c) != SKP_OK) {
        conn_free(c);
        return;
    }
    int hs_ms = srv->opts.handshake_timeout_ms;
    struct timeval tv = {hs_ms / 1000, (hs_ms % 1000) * 1000};
    event_add(c->read_ev, NULL);
    event_add(c->handshake_ev, &tv);
    conn_flush(c); /* our SETTINGS go out first */
}

static void set_listeners(struct skpx_grpc_server *srv, bool on)
{
    for (size_t i = 0; i < srv->n_listeners; i++) {
        if (on)
            evconnlistener_enable(srv->listeners[i]);
        else
            evconnlistener_disable(srv->listeners[i]);
    }
}

/* Accepting again after a pause (a connection closed, or the retry timer fired). */
static void accept_resume(struct skpx_grpc_server *srv)
{
    if (!srv->accept_paused || srv->shutting_down)
        return;
    srv->accept_paused = false;
    event_del(srv->resume_ev);
    set_listeners(srv, true);
}

static void accept_resume_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    accept_resume(arg);
}

/* Stops accepting until a connection closes or the retry timer fires. */
static void pause_accept(struct skpx_grpc_server *srv)
{
    if (!srv || srv->accept_paused || srv->shutting_down)
        return;
    srv->accept_paused = true;
    srv->stats.accept_pauses++;
    set_listeners(srv, false);
    struct timeval tv = {0, GRPC_SERVER_ACCEPT_RETRY_MS * 1000};
    event_add(srv->resume_ev, &tv);
}

/* accept() failed. Out of fds (EMFILE/ENFILE) or kernel memory: the pending connection stays in
 * the backlog and the listener would be woken again at once, so stop accepting until an fd is
 * free instead of spinning (and logging) at full CPU. */
static void listener_error_cb(struct evconnlistener *l, void *arg)
{
    (void)l;
    struct skpx_grpc_server *srv = arg;
    int e = EVUTIL_SOCKET_ERROR();
    static struct skpx_log_limit lim;
    if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
        skpx_log_limited(&lim, SKPX_LOG_WARN,
                         "grpc-server: accept failed: %s; accepting paused until a connection "
                         "closes",
                         evutil_socket_error_to_string(e));
        pause_accept(srv);
        return;
    }
    skpx_log_limited(&lim, SKPX_LOG_WARN, "grpc-server: accept failed: %s",
                     evutil_socket_error_to_string(e));
}

/* Idle limits, checked a few times per timeout: a connection without calls that has received
 * nothing for idle_timeout_ms gets GOAWAY and closes; a call whose client neither sent nor
 * half-closed for stream_idle_timeout_ms ends CANCELLED (and its stream is reset). */
static void sweep_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct skpx_grpc_server *srv = arg;
    int64_t now = skpx_mono_ms();
    int idle = srv->opts.idle_timeout_ms, sidle = srv->opts.stream_idle_timeout_ms;
    for (struct conn *c = srv->conns; c; c = c->next) {
        if (c->dying || c->close_queued || c->close_after_write || !c->got_frame)
            continue;
        if (!c->calls) {
            if (idle > 0 && now - c->last_rx_ms >= idle) {
                srv->stats.idle_closed++;
                SKPX_DEBUG("grpc-server: %s: idle for %d ms, closing", c->peer, idle);
                nghttp2_submit_goaway(c->session, NGHTTP2_FLAG_NONE,
                                      nghttp2_session_get_last_proc_stream_id(c->session),
                                      NGHTTP2_NO_ERROR, NULL, 0);
                conn_flush(c);
                if (!c->close_queued)
                    conn_close_soon(c);
            }
            continue;
        }
        if (sidle <= 0)
            continue;
        /* Only queue frames while walking the list: flushing could close streams (and free
         * calls) under the loop. */
        bool any = false;
        c->in_io = true;
        for (struct skpx_grpc_call *call = c->calls; call; call = call->next) {
            if (call->remote_closed || call->finished || !call->headers_done ||
                now - call->last_rx_ms < sidle)
                continue;
            srv->stats.streams_idle_cancelled++;
            call_fail(call, SKPX_GRPC_CANCELLED, "200", "stream idle too long");
            any = true;
        }
        c->in_io = false;
        if (any)
            conn_flush(c);
    }
}

/* ---------------------------------------------------------------- server */

skp_err skpx_grpc_server_new(struct event_base *base, const struct skpx_grpc_server_opts *opts,
                             struct skpx_grpc_server **out)
{
    *out = NULL;
    struct skpx_grpc_server *srv = skpx_calloc(1, sizeof(*srv));
    if (!srv)
        return SKP_ENOMEM;
    srv->base = base;
    srv->arena.cap = GRPC_SERVER_ARENA_INIT;
    srv->pb_allocator.alloc = arena_alloc;
    srv->pb_allocator.free = arena_free;
    srv->pb_allocator.allocator_data = &srv->arena;
    if (opts)
        srv->opts = *opts;
    if (!srv->opts.max_msg)
        srv->opts.max_msg = SKPX_GRPC_DEFAULT_MAX_MSG;
    if (!srv->opts.window_bytes)
        srv->opts.window_bytes = GRPC_SERVER_DEFAULT_WINDOW;
    if (srv->opts.window_bytes > NGHTTP2_MAX_WINDOW_SIZE)
        srv->opts.window_bytes = NGHTTP2_MAX_WINDOW_SIZE;
    if (!srv->opts.max_concurrent_streams)
        srv->opts.max_concurrent_streams = GRPC_SERVER_DEFAULT_MAX_STREAMS;
    if (!srv->opts.max_connections)
        srv->opts.max_connections = GRPC_SERVER_DEFAULT_MAX_CONNS;
    if (srv->opts.handshake_timeout_ms <= 0)
        srv->opts.handshake_timeout_ms = GRPC_SERVER_DEFAULT_HANDSHAKE_MS;
    if (!srv->opts.max_conns_per_peer)
        srv->opts.max_conns_per_peer = GRPC_SERVER_DEFAULT_PER_PEER;
    if (!srv->opts.idle_timeout_ms)
        srv->opts.idle_timeout_ms = GRPC_SERVER_DEFAULT_IDLE_MS;
    if (!srv->opts.stream_idle_timeout_ms)
        srv->opts.stream_idle_timeout_ms = GRPC_SERVER_DEFAULT_STREAM_IDLE_MS;
    if (!srv->opts.memory_budget)
        srv->opts.memory_budget = GRPC_SERVER_DEFAULT_BUDGET;
    if (!srv->opts.max_decoded_bytes)
        srv->opts.max_decoded_bytes = GRPC_SERVER_DEFAULT_MAX_DECODED;
    srv->arena.limit = srv->opts.max_decoded_bytes;

    if (nghttp2_session_callbacks_new(&srv->cbs) != 0 || nghttp2_option_new(&srv->h2opt) != 0) {
        skpx_grpc_server_free(srv);
        return SKP_ENOMEM;
    }
    /* Closed streams are kept only for RFC 7540's priority tree, which gRPC does not use: each
     * would hold memory after its call ended. */
    nghttp2_option_set_no_closed_streams(srv->h2opt, 1);
    nghttp2_session_callbacks_set_on_begin_headers_callback(srv->cbs, h2_on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(srv->cbs, h2_on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(srv->cbs, h2_on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(srv->cbs, h2_on_frame_recv);
    nghttp2_session_callbacks_set_on_frame_send_callback(srv->cbs, h2_on_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(srv->cbs, h2_on_stream_close);
    srv->done_ev = event_new(base, -1, 0, server_done_cb, srv);
    srv->rbuf = skpx_malloc(GRPC_SERVER_READ_BUF);
    srv->resume_ev = evtimer_new(base, accept_resume_cb, srv);
    srv->sweep_ev = event_new(base, -1, EV_PERSIST, sweep_cb, srv);
    srv->turn_ev = evtimer_new(base, turn_cb, srv);
    if (!srv->done_ev || !srv->rbuf || !srv->resume_ev || !srv->sweep_ev || !srv->turn_ev) {
        skpx_grpc_server_free(srv);
        return SKP_ENOMEM;
    }
    /* Sweep often enough that a timeout fires within a quarter of its length (50 ms..1 s). */
    int tick = 1000;
    if (srv->opts.idle_timeout_ms > 0 && srv->opts.idle_timeout_ms / 4 < tick)
        tick = srv->opts.idle_timeout_ms / 4;
    if (srv->opts.stream_idle_timeout_ms > 0 && srv->opts.stream_idle_timeout_ms / 4 < tick)
        tick = srv->opts.stream_idle_timeout_ms / 4;
    if (tick < 50)
        tick = 50;
    struct timeval tv = {tick / 1000, (tick % 1000) * 1000};
    if (event_add(srv->sweep_ev, &tv) != 0) {
        skpx_grpc_server_free(srv);
        return SKP_ENOMEM;
    }
    *out = srv;
    return SKP_OK;
}

skp_err skpx_grpc_server_add_method(struct skpx_grpc_server *srv, const struct skpx_grpc_method *m)
{
    if (!m || !m->path || !m->on_end)
        return SKP_EINVAL;
    if (route(srv, m->path))
        return SKP_EEXIST;
    struct skpx_grpc_method *copy = skpx_malloc(sizeof(*copy));
    if (!copy)
        return SKP_ENOMEM;
    struct skpx_grpc_method **nm =
        skpx_realloc(srv->methods, (srv->n_methods + 1) * sizeof(*srv->methods));
    if (!nm) {
        skpx_free(copy);
        return SKP_ENOMEM;
    }
    *copy = *m;
    srv->methods = nm;
    srv->methods[srv->n_methods++] = copy;
    return SKP_OK;
}

/* Splits "host:port" / "[v6]:port" into host and port strings. */
static skp_err split_addr(const char *addr, char *host, size_t host_cap, const char **port)
{
    const char *colon = strrchr(addr, ':');
    if (!colon || colon[1] == '\0')
        return SKP_EINVAL;
    const char *h = addr;
    size_t hl = (size_t)(colon - addr);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    if (hl >= host_cap)
        return SKP_EINVAL;
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = colon + 1;
    return SKP_OK;
}

skp_err skpx_grpc_server_listen(struct skpx_grpc_server *srv, const char *addr,
                                uint16_t *bound_port)
{
    char host[256];
    const char *port = NULL;
    struct addrinfo hints = {0};
    struct addrinfo *res = NULL;

    if (bound_port)
        *bound_port = 0;
    if (!addr || split_addr(addr, host, sizeof(host), &port) != SKP_OK)
        return SKP_EINVAL;
    if (srv->n_listeners >= GRPC_SERVER_MAX_LISTENERS)
        return SKP_EINVAL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int gai = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
    if (gai != 0) {
        SKPX_ERROR("grpc-server: cannot resolve %s: %s", addr, gai_strerror(gai));
        return SKP_EINVAL;
    }
    struct evconnlistener *l = evconnlistener_new_bind(
        srv->base, listener_accept_cb, srv, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE,
        GRPC_SERVER_LISTEN_BACKLOG, res->ai_addr, (int)res->ai_addrlen);
    freeaddrinfo(res);
    if (!l) {
        SKPX_ERROR("grpc-server: cannot listen on %s: %s", addr, strerror(errno));
        return SKP_EIO;
    }
    evconnlistener_set_error_cb(l, listener_error_cb);
    srv->listeners[srv->n_listeners++] = l;
    if (srv->accept_paused)
        evconnlistener_disable(l);
    if (bound_port) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        if (getsockname(evconnlistener_get_fd(l), (struct sockaddr *)&ss, &sl) == 0) {
            if (ss.ss_family == AF_INET)
                *bound_port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
            else if (ss.ss_family == AF_INET6)
                *bound_port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        }
    }
    return SKP_OK;
}

static void close_listeners(struct skpx_grpc_server *srv)
{
    for (size_t i = 0; i < srv->n_listeners; i++)
        evconnlistener_free(srv->listeners[i]);
    srv->n_listeners = 0;
}

static void server_done_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct skpx_grpc_server *srv = arg;
    if (srv->done_fired)
        return;
    srv->done_fired = true;
    if (srv->grace_ev)
        event_del(srv->grace_ev);
    /* Last statement: the callback may free the server. */
    if (srv->done_cb)
        srv->done_cb(srv->done_ud);
}

static void server_grace_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct skpx_grpc_server *srv = arg;
    if (srv->conns)
        SKPX_WARN("grpc-server: shutdown grace period over, dropping %llu connection(s)",
                  (unsigned long long)srv->stats.connections_open);
    while (srv->conns)
        conn_free(srv->conns);
    /* conn_free activated done_ev (or there were no connections). */
    if (!srv->done_fired)
        event_active(srv->done_ev, EV_TIMEOUT, 0);
}

void skpx_grpc_server_shutdown(struct skpx_grpc_server *srv, int grace_ms, void (*done)(void *ud),
                               void *ud)
{
    if (!srv || srv->shutting_down)
        return;
    srv->shutting_down = true;
    event_del(srv->sweep_ev);
    event_del(srv->resume_ev);
    srv->done_cb = done;
    srv->done_ud = ud;
    close_listeners(srv);
    srv->grace_ev = evtimer_new(srv->base, server_grace_cb, srv);
    if (srv->grace_ev) {
        struct timeval tv = {grace_ms / 1000, (grace_ms % 1000) * 1000};
        evtimer_add(srv->grace_ev, &tv);
    }
    if (!srv->conns) {
        event_active(srv->done_ev, EV_TIMEOUT, 0);
        return;
    }
    for (struct conn *c = srv->conns; c; c = c->next) {
        /* Streams the peer opened after this point are refused; nghttp2 reports want_read ==
         * want_write == 0 once the last open stream ends, and conn_check_done closes. */
        nghttp2_submit_goaway(c->session, NGHTTP2_FLAG_NONE,
                              nghttp2_session_get_last_proc_stream_id(c->session), NGHTTP2_NO_ERROR,
                              NULL, 0);
        conn_flush(c);
    }
}

void skpx_grpc_server_free(struct skpx_grpc_server *srv)
{
    if (!srv)
        return;
    close_listeners(srv);
    while (srv->conns)
        conn_free(srv->conns);
    if (srv->grace_ev)
        event_free(srv->grace_ev);
    if (srv->done_ev)
        event_free(srv->done_ev);
    if (srv->resume_ev)
        event_free(srv->resume_ev);
    if (srv->sweep_ev)
        event_free(srv->sweep_ev);
    if (srv->turn_ev)
        event_free(srv->turn_ev);
    skpx_peer_count_cleanup(&srv->peers);
    if (srv->cbs)
        nghttp2_session_callbacks_del(srv->cbs);
    if (srv->h2opt)
        nghttp2_option_del(srv->h2opt);
    for (size_t i = 0; i < srv->n_methods; i++)
        skpx_free(srv->methods[i]);
    skpx_free(srv->methods);
    arena_cleanup(&srv->arena);
    skpx_free(srv->rbuf);
    skpx_free(srv);
}

void skpx_grpc_server_get_stats(const struct skpx_grpc_server *srv,
                                struct skpx_grpc_server_stats *out)
{
    *out = srv->stats;
}
