/* http_response.c - the one reply path of the HTTP API. A response is built into a
 * struct http_response (by the loop's handlers or by a worker job, with the same builders) and
 * sent on the loop thread by http_send, which adds the common headers (Content-Type, nosniff,
 * X-Request-Id, Content-Disposition), counts the status class for /metrics and frees the body.
 * Bodies are always skpx-allocated: JSON is serialised with json_dumpb into our own buffer, so
 * nothing here depends on which allocator jansson was given. */
#include <event2/buffer.h>
#include <event2/http.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/log.h"
#include "server/formats/utf8.h"
#include "server/http/http_int.h"

static const char g_oom_json[] = "{\"error\":\"out of memory\"}";

void http_response_cleanup(struct http_response *r)
{
    if (!r)
        return;
    if (!r->borrowed)
        skpx_free(r->body);
    r->body = NULL;
    r->body_len = 0;
    r->borrowed = false;
    r->oom = false;
    skpx_free(r->next_cursor);
    r->next_cursor = NULL;
}

void http_response_bytes(struct http_response *r, int code, const char *content_type, char *body,
                         size_t len)
{
    http_response_cleanup(r);
    r->code = code;
    r->content_type = content_type;
    r->body = body;
    r->body_len = len;
}

void http_response_json(struct http_response *r, int code, json_t *body)
{
    size_t len = 0;
    char *text = skp_json_text(body, &len);
    json_decref(body);
    if (!text) {
        /* Out of memory: the static body needs no allocation (body NULL marks it). */
        http_response_bytes(r, 500, "application/json", NULL, 0);
        r->oom = true;
        return;
    }
    http_response_bytes(r, code, "application/json", text, len);
}

void http_response_verror(struct http_response *r, int code, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    http_response_json(r, code, json_pack("{s:s}", "error", msg));
}

void http_response_error(struct http_response *r, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    http_response_verror(r, code, fmt, ap);
    va_end(ap);
}

void http_response_field_error(struct http_response *r, int code, const char *field,
                               const char *msg)
{
    http_response_json(r, code, json_pack("{s:s,s:s}", "error", msg, "field", field));
}

void http_response_store_error(struct http_response *r, uint64_t req_id, skp_err err,
                               const char *what)
{
    if (err == SKP_ENOTFOUND) {
        http_response_error(r, 404, "%s not found", what);
        return;
    }
    /* One limiter for the loop and the worker: a failing database makes every request fail. */
    static struct skpx_log_limit lim;
    skpx_log_limited(&lim, SKPX_LOG_ERROR, "http req %" PRIu64 ": %s: store error: %s", req_id,
                     what, skp_strerror(err));
    http_response_error(r, err == SKP_ENOMEM ? 500 : 503, "storage unavailable (%s): %s", what,
                        skp_strerror(err));
}

void http_send_reply(struct evhttp_request *req, int code, const char *reason,
                     struct evbuffer *body)
{
    /* evhttp writes a HEAD answer's body and no Content-Length (a keep-alive client then reads
     * the body as the next answer): send the GET's length and no body. */
    if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {
        char len[24];
        snprintf(len, sizeof(len), "%zu", body ? evbuffer_get_length(body) : (size_t)0);
        struct evkeyvalq *h = evhttp_request_get_output_headers(req);
        evhttp_remove_header(h, "Content-Length");
        evhttp_add_header(h, "Content-Length", len);
        evhttp_send_reply(req, code, reason, NULL);
        return;
    }
    evhttp_send_reply(req, code, reason, body);
}

void http_send(struct http_ctx *cx, struct http_response *r)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(cx->req);
    const void *data = r->body;
    size_t len = r->body_len;
    if (r->oom) {
        data = g_oom_json;
        len = sizeof(g_oom_json) - 1;
    }
    evhttp_add_header(h, "Content-Type", r->content_type ? r->content_type : "application/json");
    evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
    char id[24];
    snprintf(id, sizeof(id), "%" PRIu64, cx->req_id);
    evhttp_add_header(h, "X-Request-Id", id);
    if (r->disposition[0])
        evhttp_add_header(h, "Content-Disposition", r->disposition);
    if (r->next_cursor && r->code == 200)
        evhttp_add_header(h, "X-Next-Cursor", r->next_cursor);
    struct evbuffer *b = evbuffer_new();
    if (b && len)
        evbuffer_add(b, data, len);
    http_count(cx->api, r->code);
    http_send_reply(cx->req, r->code, NULL, b);
    if (b)
        evbuffer_free(b);
    http_response_cleanup(r);
}

/* ---- the loop's shorthands: build, then send at once ---- */

void http_reply_bytes(struct http_ctx *cx, int code, const char *content_type, const void *data,
                      size_t len, const char *hdr_name, const char *hdr_value)
{
    if (hdr_name && hdr_value)
        evhttp_add_header(evhttp_request_get_output_headers(cx->req), hdr_name, hdr_value);
    /* The caller keeps its bytes (borrowed body; http_send copies them into the reply). */
    struct http_response r = {.code = code, .content_type = content_type, .borrowed = true};
    r.body = (char *)data;
    r.body_len = len;
    http_send(cx, &r);
}

void http_reply_json(struct http_ctx *cx, int code, json_t *body)
{
    struct http_response r = {0};
    http_response_json(&r, code, body);
    http_send(cx, &r);
}

void http_reply_error(struct http_ctx *cx, int code, const char *fmt, ...)
{
    struct http_response r = {0};
    va_list ap;
    va_start(ap, fmt);
    http_response_verror(&r, code, fmt, ap);
    va_end(ap);
    http_send(cx, &r);
}

void http_reply_field_error(struct http_ctx *cx, int code, const char *field, const char *msg)
{
    struct http_response r = {0};
    http_response_field_error(&r, code, field, msg);
    http_send(cx, &r);
}

void http_reply_store_error(struct http_ctx *cx, skp_err err, const char *what)
{
    struct http_response r = {0};
    http_response_store_error(&r, cx->req_id, err, what);
    http_send(cx, &r);
}

void http_reply_answer(struct http_ctx *cx, skp_err err, json_t *body, const char *what)
{
    if (err) {
        json_decref(body);
        http_reply_store_error(cx, err, what);
        return;
    }
    http_reply_json(cx, 200, body);
}
