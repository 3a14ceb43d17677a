/* collector.c - registration, authentication and helpers shared by the gRPC handlers. */
#include "server/collector/collector.h"
#include "server/collector/collector_ebpf.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/Command.pb-c.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"

static void *pb_alloc(void *ud, size_t n)
{
    (void)ud;
    return skpx_malloc(n);
}

static void pb_free(void *ud, void *p)
{
    (void)ud;
    skpx_free(p);
}

ProtobufCAllocator collector_pb_alloc = {pb_alloc, pb_free, NULL};

static const Skywalking__V3__Commands empty_commands = SKYWALKING__V3__COMMANDS__INIT;

const ProtobufCMessage *collector_empty_commands(void)
{
    return &empty_commands.base;
}

int64_t collector_now(const struct collector *c)
{
    return c->now_ms ? c->now_ms() : skpx_now_ms();
}

/* Constant-time comparison so the token cannot be guessed byte by byte from timings. */
static bool token_equal(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char diff = (unsigned char)(la != lb);
    for (size_t i = 0; i < la; i++)
        diff |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
    return diff == 0;
}

int collector_on_start(struct skpx_grpc_call *call, void *ud)
{
    struct collector *c = ud;
    if (!c->auth_token)
        return SKPX_GRPC_OK;
    const char *got = skpx_grpc_call_metadata(call, "authentication");
    if (got && token_equal(got, c->auth_token))
        return SKPX_GRPC_OK;
    c->metrics->auth_failures++;
    static struct skpx_log_limit lim;
    skpx_log_limited(&lim, SKPX_LOG_WARN, "grpc %s from %s: %s authentication token",
                     skpx_grpc_call_path(call), skpx_grpc_call_peer(call),
                     got ? "wrong" : "missing");
    return SKPX_GRPC_UNAUTHENTICATED;
}

struct skpx_grpc_method collector_unary_method(
    const ProtobufCMessageDescriptor *request_desc,
    int (*on_message)(struct skpx_grpc_call *call, void *ud, const ProtobufCMessage *msg,
                      const uint8_t *raw, size_t raw_len),
    void *ud)
{
    return (struct skpx_grpc_method){
        .client_streaming = false,
        .request_desc = request_desc,
        .on_start = collector_on_start,
        .on_message = on_message,
        .on_end = collector_unary_on_end,
        .on_close = collector_unary_on_close,
        .ud = ud,
    };
}

skp_err collector_add(struct skpx_grpc_server *srv, const char *packaged_path,
                      const char *compat_path, struct skpx_grpc_method m)
{
    m.path = packaged_path;
    skp_err err = skpx_grpc_server_add_method(srv, &m);
    if (err || !compat_path)
        return err;
    m.path = compat_path;
    return skpx_grpc_server_add_method(srv, &m);
}

skp_err collector_add_unary(struct collector *c, struct skpx_grpc_server *srv,
                            const struct collector_unary_route *routes, size_t n)
{
    skp_err err = SKP_OK;
    for (size_t i = 0; !err && i < n; i++)
        err =
            collector_add(srv, routes[i].packaged_path, routes[i].compat_path,
                          collector_unary_method(routes[i].request_desc, routes[i].on_message, c));
    return err;
}

void *collector_call_state(struct skpx_grpc_call *call, size_t size, bool *fresh)
{
    void *st = skpx_grpc_call_get_data(call);
    if (fresh)
        *fresh = !st;
    if (st)
        return st;
    st = skpx_calloc(1, size);
    if (st)
        skpx_grpc_call_set_data(call, st);
    return st;
}

void *collector_call_take(struct skpx_grpc_call *call)
{
    void *st = skpx_grpc_call_get_data(call);
    skpx_grpc_call_set_data(call, NULL);
    return st;
}

struct collector_unary *collector_unary_attach(struct skpx_grpc_call *call)
{
    struct collector_unary *u = skpx_calloc(1, sizeof(*u));
    if (u)
        skpx_grpc_call_set_data(call, u);
    return u;
}

int collector_unary_fail(struct collector_unary *u, int status, const char *fmt, ...)
{
    u->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(u->message, sizeof(u->message), fmt, ap);
    va_end(ap);
    return SKPX_GRPC_OK;
}

int collector_unary_store_failed(struct collector_unary *u, skp_err err, const char *what)
{
    return collector_unary_fail(
        u, err == SKP_ENOMEM ? SKPX_GRPC_RESOURCE_EXHAUSTED : SKPX_GRPC_UNAVAILABLE,
        "skyprofd: %s: %s", what, skp_strerror(err));
}

void *collector_unary_own(struct collector_unary *u, size_t size,
                          void (*free_fn)(struct collector_unary *u))
{
    void *a = skpx_calloc(1, size);
    if (a) {
        u->owned = a;
        u->free_fn = free_fn;
    }
    return a;
}

int collector_unary_run(struct skpx_grpc_call *call, void *ud, const ProtobufCMessage *msg,
                        collector_unary_fn fn)
{
    struct collector_unary *u = collector_unary_attach(call);
    if (!u)
        return SKPX_GRPC_RESOURCE_EXHAUSTED;
    return fn(ud, u, msg);
}

void collector_unary_on_end(struct skpx_grpc_call *call, void *ud)
{
    (void)ud;
    struct collector_unary *u = skpx_grpc_call_get_data(call);
    if (!u) {
        skpx_grpc_call_finish(call, NULL, SKPX_GRPC_INTERNAL, "request not processed");
        return;
    }
    if (u->status != SKPX_GRPC_OK)
        skpx_grpc_call_finish(call, NULL, u->status, u->message[0] ? u->message : NULL);
    else
        skpx_grpc_call_finish(call, u->resp ? u->resp : collector_empty_commands(), SKPX_GRPC_OK,
                              NULL);
}

void collector_unary_on_close(struct skpx_grpc_call *call, void *ud, int status)
{
    (void)ud;
    (void)status;
    struct collector_unary *u = collector_call_take(call);
    if (!u)
        return;
    if (u->free_fn)
        u->free_fn(u);
    skpx_free(u);
}

skp_err collector_register(struct collector *c, struct skpx_grpc_server *srv)
{
    /* In this order; the first failure stops the rest. */
    static skp_err (*const services[])(struct collector *, struct skpx_grpc_server *) = {
        collector_profile_register,    collector_management_register, collector_tracing_register,
        collector_drop_register,       collector_pprof_register,      collector_async_register,
        collector_continuous_register, collector_ebpf_register,
    };
    skp_err err = SKP_OK;
    for (size_t i = 0; !err && i < sizeof(services) / sizeof(services[0]); i++)
        err = services[i](c, srv);
    return err;
}
