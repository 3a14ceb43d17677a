/* transport_grpc.c - the real transport over skp_wire_client (nghttp2 + one socket, no threads,
 * fork-safe: a forked child drops the inherited socket without writing to it). */
#include "agent/agent_thread.h"
#include "agent/transport.h"

#include <string.h>

#include "wire/grpc_client.h"

static skp_err g_unary(void *ud, const char *path, const ProtobufCMessage *req,
                       const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
                       int timeout_ms)
{
    return skpx_grpc_client_unary(ud, path, req, resp_desc, resp, timeout_ms, NULL);
}

static skp_err g_stream(void *ud, const char *path, skp__transport_next_cb next, void *next_ud,
                        const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
                        int timeout_ms)
{
    return skpx_grpc_client_stream(ud, path, next, next_ud, resp_desc, resp, timeout_ms, NULL);
}

static skp_err g_stream_gated(void *ud, const char *path, skp__transport_next_resp_cb next,
                              void *next_ud, const ProtobufCMessageDescriptor *resp_desc,
                              ProtobufCMessage **resp, int timeout_ms)
{
    return skpx_grpc_client_stream_gated(ud, path, next, next_ud, resp_desc, resp, timeout_ms,
                                         NULL);
}

static uint64_t g_connects(void *ud)
{
    struct skpx_grpc_client_stats st;
    skpx_grpc_client_get_stats(ud, &st);
    return st.connects;
}

static void g_destroy(void *ud)
{
    skpx_grpc_client_free(ud);
}

skp_err skp__transport_grpc_new(const char *target, const char *authentication,
                                struct skp__transport *out)
{
    memset(out, 0, sizeof(*out));
    struct skpx_grpc_client_opts o;
    memset(&o, 0, sizeof(o));
    o.target = target;
    o.authentication = authentication;
    o.backoff_min_ms = 500;
    o.backoff_max_ms = 30000;
    o.wait_hook = skp__fork_idle_hook; /* a blocked channel thread is no reason to delay fork */
    struct skpx_grpc_client *c = NULL;
    skp_err err = skpx_grpc_client_new(&o, &c);
    if (err)
        return err;
    out->unary = g_unary;
    out->stream = g_stream;
    out->stream_gated = g_stream_gated;
    out->connects = g_connects;
    out->destroy = g_destroy;
    out->ud = c;
    return SKP_OK;
}
