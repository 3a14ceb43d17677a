/* http_services.c - services and instances registered by agents (ManagementService): the
 * store's rows as the JSON of docs/api.md. */
#include "common/alloc.h"
#include "server/http_int.h"
#include "server/utf8.h"

static json_t *str_or_null(const char *s)
{
    return s ? skp_json_str(s) : json_null();
}

skp_err http_service_push(void *ud, const struct store_service_row *r)
{
    return http_push_json(ud, json_pack("{s:o, s:o, s:I, s:I}", "name", skp_json_str(r->name),
                                        "layer", str_or_null(r->layer), "lastSeen",
                                        (json_int_t)r->last_seen_ms, "instances",
                                        (json_int_t)r->n_instances));
}

skp_err http_instance_push(void *ud, const struct store_instance_row *r)
{
    json_t *props = json_object();
    if (!props)
        return SKP_ENOMEM;
    for (size_t i = 0; i < r->n_props; i++) {
        char *key = skp_utf8_sanitize(r->props[i].key);
        int rc = key ? json_object_set_new(props, key, skp_json_str(r->props[i].value)) : -1;
        skpx_free(key);
        if (rc != 0) {
            json_decref(props);
            return SKP_ENOMEM;
        }
    }
    return http_push_json(ud, json_pack("{s:o, s:o, s:I, s:o}", "name", skp_json_str(r->name),
                                        "language", str_or_null(r->language), "lastHeartbeat",
                                        (json_int_t)r->last_heartbeat_ms, "properties", props));
}

void http_services_list(struct http_ctx *cx)
{
    json_t *list = json_array();
    skp_err err = list ? store_list_services(cx->api->store, http_service_push, list) : SKP_ENOMEM;
    if (err) {
        json_decref(list);
        http_reply_store_error(cx, err, "services");
        return;
    }
    http_reply_json(cx, 200, list);
}

void http_services_instances(struct http_ctx *cx, const char *name)
{
    json_t *list = json_array();
    skp_err err =
        list ? store_list_instances(cx->api->store, name, http_instance_push, list) : SKP_ENOMEM;
    if (err) {
        json_decref(list);
        http_reply_store_error(cx, err, "service");
        return;
    }
    http_reply_json(cx, 200, list);
}
