/* http_services.c - services and instances registered by agents (ManagementService): the
 * store's rows as the JSON of docs/api.md. */
#include <string.h>

#include "common/alloc.h"
#include "server/http/http_int.h"
#include "server/http/http_page.h"
#include "server/formats/utf8.h"

static json_t *str_or_null(const char *s)
{
    return s ? skp_json_str(s) : json_null();
}

skp_err http_service_push(void *ud, const struct store_service_row *r)
{
    return http_push_json(ud,
                          json_pack("{s:o, s:o, s:I, s:I}", "name", skp_json_str(r->name), "layer",
                                    str_or_null(r->layer), "lastSeen", (json_int_t)r->last_seen_ms,
                                    "instances", (json_int_t)r->n_instances));
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

/* One page of a by-name listing (services, instances): names after the cursor's, at most
 * pg->limit, then one more to know there is more. */
struct name_page {
    struct http_page *pg;
    json_t *arr;
    size_t n;
    bool more;
    char last[HTTP_CURSOR_MAX];
};

static skp_err name_page_take(struct name_page *p, const char *name, bool *take)
{
    *take = false;
    if (p->pg->has_cursor && strcmp(name, p->pg->part[0]) <= 0)
        return SKP_OK;
    if (p->n == p->pg->limit) {
        p->more = true;
        return SKP_EFULL; /* stop one row past the page */
    }
    const char *parts[] = {name};
    if (!http_cursor_encode(p->last, sizeof(p->last), parts, 1))
        p->last[0] = '\0';
    p->n++;
    *take = true;
    return SKP_OK;
}

static skp_err service_page_row(void *ud, const struct store_service_row *r)
{
    bool take;
    skp_err err = name_page_take(ud, r->name, &take);
    return err || !take ? err : http_service_push(((struct name_page *)ud)->arr, r);
}

static skp_err instance_page_row(void *ud, const struct store_instance_row *r)
{
    bool take;
    skp_err err = name_page_take(ud, r->name, &take);
    return err || !take ? err : http_instance_push(((struct name_page *)ud)->arr, r);
}

static void reply_page(struct http_ctx *cx, struct name_page *p, skp_err err, const char *what)
{
    if (err == SKP_EFULL)
        err = SKP_OK;
    if (err) {
        json_decref(p->arr);
        http_reply_store_error(cx, err, what);
        return;
    }
    if (p->more && p->last[0])
        http_page_set_next(cx, p->last);
    http_reply_json(cx, 200, p->arr);
}

void http_services_list(struct http_ctx *cx)
{
    struct http_page pg;
    if (!http_page_parse(cx, HTTP_PAGE_SERVICES_DEFAULT, HTTP_PAGE_SERVICES_MAX, &pg))
        return;
    struct name_page p = {.pg = &pg, .arr = json_array()};
    skp_err err = p.arr ? store_list_services(cx->api->store, service_page_row, &p) : SKP_ENOMEM;
    reply_page(cx, &p, err, "services");
}

void http_services_instances(struct http_ctx *cx, const char *name)
{
    struct http_page pg;
    if (!http_page_parse(cx, HTTP_PAGE_SERVICES_DEFAULT, HTTP_PAGE_SERVICES_MAX, &pg))
        return;
    struct name_page p = {.pg = &pg, .arr = json_array()};
    skp_err err =
        p.arr ? store_list_instances(cx->api->store, name, instance_page_row, &p) : SKP_ENOMEM;
    reply_page(cx, &p, err, "service");
}
