/* grpc_server.h - gRPC server over HTTP/2 cleartext (h2c, prior knowledge) built on nghttp2,
 * running in the caller's libevent loop (one thread, no locks; every callback runs on the loop).
 *
 * Routing is by exact `:path`. A method is unary or client-streaming (a handler may also answer
 * messages before the end with skpx_grpc_call_send, which makes it bidirectional). Each incoming
 * message is
 * decoded with the method's protobuf-c descriptor and handed to on_message as it arrives; when
 * the client half-closes, on_end runs and the handler answers with skpx_grpc_call_finish(), then
 * or later (e.g. after a storage commit: a durable ack). Unknown paths get a Trailers-Only
 * UNIMPLEMENTED; oversized messages RESOURCE_EXHAUSTED; compressed messages UNIMPLEMENTED
 * ("compression not supported"); undecodable protobuf INVALID_ARGUMENT. */
#ifndef SKP_WIRE_GRPC_SERVER_H
#define SKP_WIRE_GRPC_SERVER_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "skyprof/skp_err.h"
#include "wire/grpc_frame.h"

struct event_base;
struct skpx_grpc_server;
struct skpx_grpc_call;

struct skpx_grpc_method {
    /* e.g. "/skywalking.v3.ProfileTask/collectSnapshot" (borrowed; must outlive the server) */
    const char *path;
    bool client_streaming; /* false: unary (exactly one request message required) */
    /* Request decoder; NULL = raw mode (on_message gets msg == NULL and the raw bytes). */
    const ProtobufCMessageDescriptor *request_desc;
    /* Optional. Headers arrived. Return SKPX_GRPC_OK to accept, or a status to refuse the call
     * with a Trailers-Only response (e.g. UNAUTHENTICATED). */
    int (*on_start)(struct skpx_grpc_call *call, void *ud);
    /* Optional. One decoded message (borrowed: freed after the callback returns).
     * Return SKPX_GRPC_OK to continue or a status to end the call with it (the handler's
     * on_end then does not run; on_close does). */
    int (*on_message)(struct skpx_grpc_call *call, void *ud, const ProtobufCMessage *msg,
                      const uint8_t *raw, size_t raw_len);
    /* Required. The client half-closed: answer now or later with skpx_grpc_call_finish(). */
    void (*on_end)(struct skpx_grpc_call *call, void *ud);
    /* Optional. The call is over (finished, failed, cancelled by the client or connection lost).
     * After it returns the call pointer is invalid; free per-call state here. Always runs
     * exactly once for every call whose on_start ran (or that reached on_message/on_end). */
    void (*on_close)(struct skpx_grpc_call *call, void *ud, int status);
    void *ud;
};

struct skpx_grpc_server_opts {
    size_t max_msg;                  /* per-message limit, 0 = SKPX_GRPC_DEFAULT_MAX_MSG */
    uint32_t window_bytes;           /* stream/connection window, 0 = 16 MiB */
    uint32_t max_concurrent_streams; /* 0 = 1000 */
    size_t max_connections;          /* 0 = 1024; further accepts are closed at once */
    int handshake_timeout_ms;        /* preface + first frame must arrive within; 0 = 10000 */
    size_t max_conns_per_peer;       /* connections from one IP address; 0 = 256 */
    int idle_timeout_ms;             /* a connection with no open call and no frame for this long
                                      * gets GOAWAY and is closed; 0 = 300000, < 0 = never */
    int stream_idle_timeout_ms;      /* a call whose client sends nothing for this long (and has
                                      * not half-closed) ends CANCELLED; 0 = 120000, < 0 = never */
    size_t memory_budget;            /* server-wide bytes of buffered request data, headers,
                                      * queued answers, open calls and what nghttp2 allocates
                                      * for its sessions; beyond it new calls and
                                      * growing messages get RESOURCE_EXHAUSTED; 0 = 256 MiB */
    size_t max_decoded_bytes;        /* memory one request message may decode into; beyond it
                                      * the call ends RESOURCE_EXHAUSTED; 0 = 64 MiB */
};

/* Creates a server on `base` (borrowed; must outlive the server). `opts` may be NULL.
 * Errors: SKP_ENOMEM. */
SKP_MUST_CHECK skp_err skpx_grpc_server_new(struct event_base *base,
                                            const struct skpx_grpc_server_opts *opts,
                                            struct skpx_grpc_server **out);
/* Registers a method (the struct is copied). Errors: SKP_EEXIST (path taken), SKP_ENOMEM. */
SKP_MUST_CHECK skp_err skpx_grpc_server_add_method(struct skpx_grpc_server *srv,
                                                   const struct skpx_grpc_method *m);
/* Listens on "host:port" (port 0 = any free port; *bound_port receives it, may be NULL).
 * Sets SO_REUSEADDR; accepted sockets get TCP_NODELAY. Errors: SKP_EINVAL (bad address),
 * SKP_EIO (bind/listen failed, detail logged). */
SKP_MUST_CHECK skp_err skpx_grpc_server_listen(struct skpx_grpc_server *srv, const char *addr,
                                               uint16_t *bound_port);
/* Graceful shutdown: stops accepting, sends GOAWAY, lets in-flight calls finish; `done` runs on
 * the loop once every connection is closed (or after `grace_ms`, when remaining connections are
 * dropped). */
void skpx_grpc_server_shutdown(struct skpx_grpc_server *srv, int grace_ms, void (*done)(void *ud),
                               void *ud);
/* Closes everything at once and frees the server (on_close runs for open calls). NULL ok. */
void skpx_grpc_server_free(struct skpx_grpc_server *srv);

/* Counters for /metrics and tests. */
struct skpx_grpc_server_stats {
    uint64_t connections_accepted;
    uint64_t connections_open;
    uint64_t calls_started;
    uint64_t calls_failed; /* finished with a non-OK status, incl. protocol errors */
    uint64_t messages_received;
    uint64_t protocol_errors;        /* connections closed for HTTP/2 or framing violations */
    uint64_t connections_refused;    /* over max_connections or max_conns_per_peer */
    uint64_t accept_pauses;          /* accept() ran out of file descriptors: accepting paused */
    uint64_t idle_closed;            /* connections closed by idle_timeout_ms */
    uint64_t streams_idle_cancelled; /* calls ended by stream_idle_timeout_ms */
    uint64_t budget_refused;         /* calls refused or ended: memory_budget reached */
    uint64_t decode_refused;         /* messages over max_decoded_bytes */
    uint64_t buffered_bytes;         /* gauge: bytes counted against memory_budget now */
    uint64_t buffered_peak;          /* gauge: the largest buffered_bytes so far */
    uint64_t turn_yields;            /* reads put off to the loop's next turn (turn_spent) */
    uint64_t nghttp2_bytes;          /* gauge: nghttp2's own allocations (in buffered_bytes) */
};
void skpx_grpc_server_get_stats(const struct skpx_grpc_server *srv,
                                struct skpx_grpc_server_stats *out);

/* ---- per call (valid from on_start until on_close returns) ---- */

/* Request path (borrowed). */
const char *skpx_grpc_call_path(const struct skpx_grpc_call *call);
/* Value of a request header/metadata (lower-case name, e.g. "authentication"), or NULL.
 * Borrowed until on_close. */
const char *skpx_grpc_call_metadata(const struct skpx_grpc_call *call, const char *name);
/* Peer address "ip:port" (borrowed). */
const char *skpx_grpc_call_peer(const struct skpx_grpc_call *call);
/* Charges (delta > 0) or gives back (delta < 0) memory the handler holds for this call (its
 * per-stream buffers) against the server's memory budget, so --grpc-memory-budget covers them:
 * while the budget is exceeded new calls are refused with RESOURCE_EXHAUSTED. What is charged is
 * released when the call closes at the latest. Returns false if the budget is now exceeded (the
 * handler may end this call too). */
bool skpx_grpc_call_charge(struct skpx_grpc_call *call, int64_t delta);
/* Per-call user data slot. */
void skpx_grpc_call_set_data(struct skpx_grpc_call *call, void *data);
void *skpx_grpc_call_get_data(const struct skpx_grpc_call *call);
/* Answers the call: with status OK, `resp` (borrowed; packed at once, may be NULL for an empty
 * message) is sent as the single response message followed by trailers; with any other status,
 * no message is sent (Trailers-Only if no headers were sent yet) and `message` (may be NULL)
 * becomes the percent-encoded grpc-message. Call at most once; a call already cancelled by the
 * peer is ignored. on_close follows (possibly from within this call). */
void skpx_grpc_call_finish(struct skpx_grpc_call *call, const ProtobufCMessage *resp, int status,
                           const char *message);
/* Sends one response message now and keeps the call open (bidirectional methods that answer
 * before the client half-closes, e.g. pprof `collect`: metadata in, a status out, then the
 * chunks). The first send opens the response (HEADERS); later sends append; skpx_grpc_call_finish
 * ends it with trailers: after a send, a NULL `resp` there adds no further message and a non-OK
 * status travels in the trailers. `msg` is borrowed (packed at once; NULL = an empty message).
 * Errors: SKP_ESTATE (call finished, closed or its connection dying), SKP_ETOOBIG (more than
 * 4 MiB queued and not yet sent), SKP_ENOMEM. */
SKP_MUST_CHECK skp_err skpx_grpc_call_send(struct skpx_grpc_call *call,
                                           const ProtobufCMessage *msg);

#endif
