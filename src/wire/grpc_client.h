/* grpc_client.h - gRPC client over HTTP/2 cleartext for use inside host processes (the agent).
 * nghttp2 + one plain non-blocking socket + poll(); starts no threads; every call blocks the
 * calling thread (the agent's own channel thread) at most until its deadline. One connection,
 * opened lazily and re-opened after failures with capped exponential backoff: while backing off,
 * calls fail at once with SKP_EUNAVAILABLE instead of reconnecting.
 *
 * Not thread-safe: one thread owns a client. Fork-safe: the client remembers the pid that
 * created its connection; in a forked child the first use drops (closes the child's copy of)
 * the inherited socket without writing to it and opens a new connection. Sends use
 * MSG_NOSIGNAL, so a broken connection never raises SIGPIPE. Memory is bounded: the outgoing
 * buffer is flushed before more messages are pulled, and responses are limited to max_msg. */
#ifndef SKP_WIRE_GRPC_CLIENT_H
#define SKP_WIRE_GRPC_CLIENT_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "skyprof/skp_err.h"
#include "wire/grpc_frame.h"

struct skpx_grpc_client;

struct skpx_grpc_client_opts {
    /* "host:port" (copied); host may be a name or an IPv4/IPv6 literal */
    const char *target;
    /* value of the `authentication` metadata, NULL/"" = none (copied) */
    const char *authentication;
    const char *user_agent; /* NULL = "skyprof/<version>" (copied) */
    int connect_timeout_ms; /* 0 = 3000 */
    int backoff_min_ms;     /* first retry delay after a failure, 0 = 500 */
    int backoff_max_ms;     /* cap, 0 = 30000 */
    size_t max_msg;         /* response size limit, 0 = SKPX_GRPC_DEFAULT_MAX_MSG */
    /* Optional: called with true just before the client blocks in poll() (connect or call I/O
     * waits, never zero-timeout polls) and with false right after. The agent marks these waits
     * as safe points for fork (agent_thread.h). NULL = none. */
    void (*wait_hook)(bool entering);
};

/* Result details of the last call. */
struct skpx_grpc_result {
    int status;        /* grpc-status from the server, or -1 when no status arrived */
    char message[256]; /* decoded grpc-message or a transport error description */
};

/* Creates a client; does not connect. Errors: SKP_EINVAL (bad target), SKP_ENOMEM. */
SKP_MUST_CHECK skp_err skpx_grpc_client_new(const struct skpx_grpc_client_opts *opts,
                                            struct skpx_grpc_client **out);
/* Closes the connection (in the creating process; in a forked child it only closes the fd)
 * and frees. NULL ok. */
void skpx_grpc_client_free(struct skpx_grpc_client *c);

/* Unary call. `req` is borrowed. On SKP_OK, *resp (if resp_desc != NULL) is a message the
 * caller frees with protobuf_c_message_free_unpacked(*resp, NULL). `res` may be NULL.
 * Errors: SKP_EUNAVAILABLE (cannot connect / backing off / connection lost), SKP_ETIMEDOUT
 * (deadline expired: the stream was reset with CANCEL), SKP_EGRPC (non-OK grpc-status; details
 * in res), SKP_EPROTO (bad response), SKP_ETOOBIG, SKP_ENOMEM.
 * timeout_ms <= 0 means the default deadline (30 s), never "no deadline". A DEADLINE_EXCEEDED
 * grpc-status from the server is also reported as SKP_ETIMEDOUT (res->status 4). Requests
 * larger than max_msg fail with SKP_ETOOBIG. */
SKP_MUST_CHECK skp_err skpx_grpc_client_unary(struct skpx_grpc_client *c, const char *path,
                                              const ProtobufCMessage *req,
                                              const ProtobufCMessageDescriptor *resp_desc,
                                              ProtobufCMessage **resp, int timeout_ms,
                                              struct skpx_grpc_result *res);

/* Pulls the next request message of a client stream: return 1 and set *msg (borrowed until
 * the next pull or the end of the call) to send it, 0 to half-close, -1 to abort the call
 * (the stream is reset with CANCEL and the call fails with SKP_EINVAL). */
typedef int (*skpx_grpc_next_cb)(void *ud, const ProtobufCMessage **msg);

/* Client-streaming call: pulls messages from `next` until it returns 0, half-closes and waits
 * for the single response. Same result/error contract as the unary call. Messages are packed
 * and coalesced into large writes; `next` is only called while the outgoing buffer has room. */
SKP_MUST_CHECK skp_err skpx_grpc_client_stream(struct skpx_grpc_client *c, const char *path,
                                               skpx_grpc_next_cb next, void *next_ud,
                                               const ProtobufCMessageDescriptor *resp_desc,
                                               ProtobufCMessage **resp, int timeout_ms,
                                               struct skpx_grpc_result *res);

/* Source of a gated call: like skpx_grpc_next_cb, and `resp` is the latest response message
 * received so far (NULL before the first; borrowed until the next pull). Returning 2 waits until
 * a response message arrives (or the call ends), then the source is pulled again. */
typedef int (*skpx_grpc_next_resp_cb)(void *ud, const ProtobufCMessage *resp,
                                      const ProtobufCMessage **msg);

/* A call whose request stream depends on the server's answers (SkyWalking's PprofTask/collect:
 * metadata, wait for SUCCESS or TERMINATED_BY_OVERSIZE, then the content). The server may send
 * several response messages; *resp is the last one. resp_desc is required. Same result/error
 * contract as skpx_grpc_client_stream. */
SKP_MUST_CHECK skp_err skpx_grpc_client_stream_gated(struct skpx_grpc_client *c, const char *path,
                                                     skpx_grpc_next_resp_cb next, void *next_ud,
                                                     const ProtobufCMessageDescriptor *resp_desc,
                                                     ProtobufCMessage **resp, int timeout_ms,
                                                     struct skpx_grpc_result *res);

/* Drops the connection now (next call reconnects, subject to backoff). */
void skpx_grpc_client_disconnect(struct skpx_grpc_client *c);
/* Forgets backoff state so the next call connects at once (e.g. after a config change). */
void skpx_grpc_client_reset_backoff(struct skpx_grpc_client *c);

struct skpx_grpc_client_stats {
    uint64_t connects; /* successful connections */
    uint64_t connect_failures;
    uint64_t calls_ok;
    uint64_t calls_failed;
    uint64_t bytes_sent;
};
void skpx_grpc_client_get_stats(const struct skpx_grpc_client *c,
                                struct skpx_grpc_client_stats *out);

#endif
