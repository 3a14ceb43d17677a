/* collector_management.c - ManagementService: instance registration (reportInstanceProperties)
 * and heartbeats (keepAlive), kept in the store for the services/instances API. */
#include <stdio.h>

#include "common/alloc.h"
#include "common/log.h"
#include "management/Management.pb-c.h"
#include "server/collector/collector.h"

#define PATHS(method) "/skywalking.v3.ManagementService/" method, "/ManagementService/" method
/* Properties kept per instance; agents send a dozen. */
#define MAX_PROPS 256

static bool bad_names(struct collector_unary *u, const char *service, const char *instance)
{
    if (service && service[0] && instance && instance[0])
        return false;
    collector_unary_fail(u, SKPX_GRPC_INVALID_ARGUMENT, "service and serviceInstance must be set");
    return true;
}

static int properties(struct collector *c, struct collector_unary *u, const ProtobufCMessage *msg)
{
    const Skywalking__V3__InstanceProperties *p = (const void *)msg;
    c->metrics->heartbeats++;
    if (bad_names(u, p->service, p->serviceinstance))
        return SKPX_GRPC_OK;
    size_t n = p->n_properties < MAX_PROPS ? p->n_properties : MAX_PROPS;
    struct store_kv *kv = n ? skpx_calloc(n, sizeof(*kv)) : NULL;
    if (n && !kv)
        return SKPX_GRPC_RESOURCE_EXHAUSTED;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const Skywalking__V3__KeyStringValuePair *e = p->properties[i];
        if (!e || !e->key || !e->key[0])
            continue;
        kv[k].key = e->key;
        kv[k].value = e->value ? e->value : "";
        k++;
    }
    skp_err err =
        store_upsert_instance(c->store, p->service, p->serviceinstance,
                              p->layer && p->layer[0] ? p->layer : NULL, kv, k, collector_now(c));
    skpx_free(kv);
    return err ? collector_unary_store_failed(u, err, "instance not stored") : SKPX_GRPC_OK;
}

static int keepalive(struct collector *c, struct collector_unary *u, const ProtobufCMessage *msg)
{
    const Skywalking__V3__InstancePingPkg *p = (const void *)msg;
    c->metrics->heartbeats++;
    if (bad_names(u, p->service, p->serviceinstance))
        return SKPX_GRPC_OK;
    skp_err err = store_touch_instance(c->store, p->service, p->serviceinstance, collector_now(c));
    return err ? collector_unary_store_failed(u, err, "instance not stored") : SKPX_GRPC_OK;
}

COLLECTOR_UNARY_ON_MESSAGE(on_properties, properties)
COLLECTOR_UNARY_ON_MESSAGE(on_keepalive, keepalive)

static const struct collector_unary_route routes[] = {
    {PATHS("reportInstanceProperties"), &skywalking__v3__instance_properties__descriptor,
     on_properties},
    {PATHS("keepAlive"), &skywalking__v3__instance_ping_pkg__descriptor, on_keepalive},
};

skp_err collector_management_register(struct collector *c, struct skpx_grpc_server *srv)
{
    return collector_add_unary(c, srv, routes, sizeof(routes) / sizeof(routes[0]));
}
