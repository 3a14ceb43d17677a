/* transport_grpc.c - the real transport over skp_wire_client (nghttp2 + one socket, no threads,
 * fork-safe: a forked child drops the inherited socket without writing to it).
 *
 * Design: the target may be a comma list of collectors (SkyWalking's
 * SW_AGENT_COLLECTOR_BACKEND_SERVICES). One client per collector is created up front (none
 * connects until used); calls go to the current one only. When a call on it fails because the
 * collector is away (SKP_EUNAVAILABLE: refused, lost, or backing off; SKP_ETIMEDOUT: hung; the
 * grpc-status UNAVAILABLE: skyprofd without its database), the
 * call's error is returned as before (the channel keeps what was not acknowledged and retries)
 * and the next call goes to the next collector in the list. Each client keeps its own capped
 * exponential backoff, so a collector that failed is not tried again until its backoff ends: with
 * every collector down each call fails at once, and the first one back is found within one turn of
 * the list. A call is never repeated on another collector by the transport itself: a stream's
 * source cannot be rewound, and the channel already retries. Used by one thread. */
#include "agent/agent_thread.h"
#include "agent/transport.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/log.h"
#include "wire/grpc_client.h"

struct multi {
    struct skpx_grpc_client *c[SKP_TRANSPORT_MAX_TARGETS];
    char target[SKP_TRANSPORT_MAX_TARGETS][256];
    int n;
    int cur;
    uint64_t failovers;
};

/* A collector is away when it cannot be reached or does not answer in time, and also when it
 * answers UNAVAILABLE: skyprofd does so while its database is away, and another collector on the
 * same database may be fine (or have its own database). */
static void after_call(struct multi *m, skp_err err, const struct skpx_grpc_result *res)
{
    bool away = err == SKP_EUNAVAILABLE || err == SKP_ETIMEDOUT ||
                (err == SKP_EGRPC && res->status == SKPX_GRPC_UNAVAILABLE);
    if (m->n < 2 || !away)
        return;
    int from = m->cur;
    m->cur = (m->cur + 1) % m->n;
    m->failovers++;
    SKPX_INFO("skyprof: collector %.100s failed (%s); next calls go to %.100s", m->target[from],
              skp_strerror(err), m->target[m->cur]);
}

static skp_err g_unary(void *ud, const char *path, const ProtobufCMessage *req,
                       const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
                       int timeout_ms)
{
    struct multi *m = ud;
    struct skpx_grpc_result res = {.status = -1};
    skp_err err =
        skpx_grpc_client_unary(m->c[m->cur], path, req, resp_desc, resp, timeout_ms, &res);
    after_call(m, err, &res);
    return err;
}

static skp_err g_stream(void *ud, const char *path, skp__transport_next_cb next, void *next_ud,
                        const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
                        int timeout_ms)
{
    struct multi *m = ud;
    struct skpx_grpc_result res = {.status = -1};
    skp_err err = skpx_grpc_client_stream(m->c[m->cur], path, next, next_ud, resp_desc, resp,
                                          timeout_ms, &res);
    after_call(m, err, &res);
    return err;
}

static skp_err g_stream_gated(void *ud, const char *path, skp__transport_next_resp_cb next,
                              void *next_ud, const ProtobufCMessageDescriptor *resp_desc,
                              ProtobufCMessage **resp, int timeout_ms)
{
    struct multi *m = ud;
    struct skpx_grpc_result res = {.status = -1};
    skp_err err = skpx_grpc_client_stream_gated(m->c[m->cur], path, next, next_ud, resp_desc, resp,
                                                timeout_ms, &res);
    after_call(m, err, &res);
    return err;
}

static uint64_t g_connects(void *ud)
{
    const struct multi *m = ud;
    uint64_t sum = 0;
    for (int i = 0; i < m->n; i++) {
        struct skpx_grpc_client_stats st;
        skpx_grpc_client_get_stats(m->c[i], &st);
        sum += st.connects;
    }
    return sum;
}

static const char *g_current(void *ud)
{
    const struct multi *m = ud;
    return m->target[m->cur];
}

static void g_destroy(void *ud)
{
    struct multi *m = ud;
    if (!m)
        return;
    for (int i = 0; i < m->n; i++)
        skpx_grpc_client_free(m->c[i]);
    skpx_free(m);
}

int skp__transport_split_targets(const char *list, char (*out)[256], int cap)
{
    int n = 0;
    const char *p = list;
    for (;;) {
        size_t len = strcspn(p, ",");
        const char *s = p;
        size_t l = len;
        while (l > 0 && (*s == ' ' || *s == '\t')) {
            s++;
            l--;
        }
        while (l > 0 && (s[l - 1] == ' ' || s[l - 1] == '\t'))
            l--;
        if (l == 0 || l >= 256 || n >= cap || !memchr(s, ':', l))
            return -1;
        memcpy(out[n], s, l);
        out[n][l] = '\0';
        n++;
        if (p[len] == '\0')
            return n;
        p += len + 1;
    }
}

skp_err skp__transport_grpc_new(const char *target, const char *authentication,
                                struct skp__transport *out)
{
    memset(out, 0, sizeof(*out));
    if (!target)
        return SKP_EINVAL;
    struct multi *m = skpx_calloc(1, sizeof(*m));
    if (!m)
        return SKP_ENOMEM;
    m->n = skp__transport_split_targets(target, m->target, SKP_TRANSPORT_MAX_TARGETS);
    if (m->n <= 0) {
        skpx_free(m);
        return SKP_EINVAL;
    }
    for (int i = 0; i < m->n; i++) {
        struct skpx_grpc_client_opts o;
        memset(&o, 0, sizeof(o));
        o.target = m->target[i];
        o.authentication = authentication;
        o.backoff_min_ms = 500;
        o.backoff_max_ms = 30000;
        o.wait_hook = skp__fork_idle_hook; /* a blocked channel thread is no reason to delay fork */
        skp_err err = skpx_grpc_client_new(&o, &m->c[i]);
        if (err) {
            m->n = i;
            g_destroy(m);
            return err;
        }
    }
    out->unary = g_unary;
    out->stream = g_stream;
    out->stream_gated = g_stream_gated;
    out->connects = g_connects;
    out->current = g_current;
    out->destroy = g_destroy;
    out->ud = m;
    return SKP_OK;
}
