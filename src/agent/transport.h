/* transport.h - the channel thread's seam to the backend: unary and client-streaming gRPC calls.
 * Two implementations: the real one over skp_wire_client (transport_grpc.c) and the unit tests'
 * fake. Owned and used by one thread (the channel thread). */
#ifndef SKP_AGENT_TRANSPORT_H
#define SKP_AGENT_TRANSPORT_H

#include <protobuf-c/protobuf-c.h>
#include <stdint.h>

#include "skyprof/skp_err.h"

/* Pulls the next message of a client stream: 1 = *msg set (borrowed until the next pull), 0 =
 * half-close, -1 = abort. Same contract as skpx_grpc_next_cb. */
typedef int (*skp__transport_next_cb)(void *ud, const ProtobufCMessage **msg);

/* Source of a gated stream: `resp` = latest response so far (NULL before the first); returning
 * 2 waits for the next response. Same contract as skpx_grpc_next_resp_cb. */
typedef int (*skp__transport_next_resp_cb)(void *ud, const ProtobufCMessage *resp,
                                           const ProtobufCMessage **msg);

struct skp__transport {
    /* On SKP_OK and resp_desc != NULL, *resp is freed by the caller with
     * protobuf_c_message_free_unpacked(*resp, NULL). Errors as skpx_grpc_client_unary. */
    skp_err (*unary)(void *ud, const char *path, const ProtobufCMessage *req,
                     const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
                     int timeout_ms);
    skp_err (*stream)(void *ud, const char *path, skp__transport_next_cb next, void *next_ud,
                      const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
                      int timeout_ms);
    uint64_t (*connects)(void *ud); /* successful connections so far */
    void (*destroy)(void *ud);      /* NULL ok */
    void *ud;
    /* A call whose source waits for the server's answers (skpx_grpc_client_stream_gated);
     * NULL in transports without it (process-profiling uploads are then not sent). */
    skp_err (*stream_gated)(void *ud, const char *path, skp__transport_next_resp_cb next,
                            void *next_ud, const ProtobufCMessageDescriptor *resp_desc,
                            ProtobufCMessage **resp, int timeout_ms);
    /* The collector calls go to now ("host:port", borrowed until the next call); NULL in
     * transports without one. */
    const char *(*current)(void *ud);
};

/* Most collectors in a comma list (SW_AGENT_COLLECTOR_BACKEND_SERVICES). */
#define SKP_TRANSPORT_MAX_TARGETS 8

/* Splits "host:port[,host:port...]" (blanks around entries ignored) into out[0..cap). Returns
 * the number of entries, or -1 when an entry is empty, has no ':', is 256 bytes or longer, or
 * there are more than cap. Pure. */
int skp__transport_split_targets(const char *list, char (*out)[256], int cap);

/* The real transport: a skp_wire_client connection to `target`, a collector "host:port" or a
 * comma list of them (the current one is used; a call that finds it away moves the next calls to
 * the next one: transport_grpc.c), with the `authentication` metadata when non-empty. Connects
 * lazily. Errors: SKP_EINVAL (a bad list), SKP_ENOMEM, SKP_ENOTSUP (built without
 * skp_wire_client). */
SKP_MUST_CHECK skp_err skp__transport_grpc_new(const char *target, const char *authentication,
                                               struct skp__transport *out);

#endif
