/* http_services.c - services and instances registered by agents (ManagementService). */
#include "server/http_int.h"

void http_services_list(struct http_ctx *cx)
{
    json_t *list = NULL;
    skp_err err = store_list_services(cx->api->store, &list);
    if (err) {
        http_reply_store_error(cx, err, "services");
        return;
    }
    http_reply_json(cx, 200, list);
}

void http_services_instances(struct http_ctx *cx, const char *name)
{
    json_t *list = NULL;
    skp_err err = store_list_instances(cx->api->store, name, &list);
    if (err) {
        http_reply_store_error(cx, err, "service");
        return;
    }
    http_reply_json(cx, 200, list);
}
