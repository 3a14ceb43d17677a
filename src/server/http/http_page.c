/* http_page.c - `limit` + `cursor` pagination of the listing routes, and the listings that run
 * on the worker thread (profiled segments, task logs: their size grows with what agents send).
 * Design: the store visits rows in a total order; a page skips the rows up to the cursor's key
 * and stops one row past the limit (that row's existence is the "more" answer). The segments
 * listing pushes the skip and the limit into the store (store_list_profiled_segments_page), so
 * a page builds only its own rows' spans. */
#include "server/http/http_page.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/hex.h"

/* ---- cursors ---- */

bool http_cursor_encode(char *out, size_t cap, const char *const *parts, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *p = (const unsigned char *)parts[i];
        size_t len = strlen(parts[i]) + (i + 1 < n); /* parts are separated by a NUL byte */
        for (size_t k = 0; k < len; k++) {
            if (o + 3 > cap)
                return false;
            out[o++] = hex[p[k] >> 4];
            out[o++] = hex[p[k] & 15];
        }
    }
    if (o + 1 > cap)
        return false;
    out[o] = '\0';
    return true;
}

static bool cursor_decode(const char *in, struct http_page *pg)
{
    size_t n = strlen(in);
    if (n == 0 || n % 2 || n / 2 >= sizeof(pg->buf))
        return false;
    for (size_t i = 0; i < n / 2; i++) {
        int hi = skpx_hex_value(in[2 * i]), lo = skpx_hex_value(in[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        pg->buf[i] = (char)(hi << 4 | lo);
    }
    pg->buf[n / 2] = '\0';
    pg->n_parts = 0;
    for (const char *p = pg->buf; p <= pg->buf + n / 2; p += strlen(p) + 1) {
        if (pg->n_parts == HTTP_CURSOR_PARTS)
            return false;
        pg->part[pg->n_parts++] = p;
    }
    return true;
}

bool http_page_parse(struct http_ctx *cx, size_t def_limit, size_t max_limit, struct http_page *pg)
{
    memset(pg, 0, sizeof(*pg));
    pg->limit = def_limit;
    const char *l = http_query(cx, "limit");
    if (l) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(l, &end, 10);
        if (!*l || *end || errno || *l == '-' || v < 1 || v > max_limit) {
            char msg[96];
            snprintf(msg, sizeof(msg), "must be an integer in 1..%zu", max_limit);
            http_reply_field_error(cx, 400, "limit", msg);
            return false;
        }
        pg->limit = (size_t)v;
    }
    const char *c = http_query(cx, "cursor");
    if (c && *c) {
        if (!cursor_decode(c, pg)) {
            http_reply_field_error(cx, 400, "cursor",
                                   "malformed cursor (pass the X-Next-Cursor "
                                   "value of the previous page as it is)");
            return false;
        }
        pg->has_cursor = true;
    }
    return true;
}

void http_page_set_next(struct http_ctx *cx, const char *cursor)
{
    evhttp_add_header(evhttp_request_get_output_headers(cx->req), "X-Next-Cursor", cursor);
}

/* Parses a decimal int64 cursor part. */
static bool part_i64(const char *s, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno)
        return false;
    *out = v;
    return true;
}

/* ---- the worker listings ---- */

enum list_kind { LIST_SEGMENTS, LIST_TASK_LOGS };

struct list_job {
    struct http_job base; /* base.id: the task's */
    enum list_kind kind;
    struct http_page pg;
    /* while running */
    json_t *arr;
    size_t n;
    char last[HTTP_CURSOR_MAX]; /* cursor of the last row added */
    bool more;
};

static skp_err segment_row(void *ud, const struct store_profiled_segment *s)
{
    struct list_job *l = ud;
    char start[24];
    snprintf(start, sizeof(start), "%" PRId64, s->start_ms);
    const char *parts[] = {start, s->segment_id};
    if (!http_cursor_encode(l->last, sizeof(l->last), parts, 2))
        l->last[0] = '\0'; /* an id too long for a cursor: the page ends the listing */
    l->n++;
    return http_segment_push(l->arr, s);
}

/* Logs come in (time, op, instance) order, one per (instance, op). */
static skp_err log_row(void *ud, const struct store_task_log *g)
{
    struct list_job *l = ud;
    char t[24], op[8];
    snprintf(t, sizeof(t), "%" PRId64, g->time_ms);
    snprintf(op, sizeof(op), "%d", (int)g->op);
    if (l->pg.has_cursor) {
        int64_t ct = 0, cop = 0;
        if (l->pg.n_parts != 3 || !part_i64(l->pg.part[0], &ct) || !part_i64(l->pg.part[1], &cop))
            return SKP_EINVAL;
        int c = g->time_ms != ct        ? (g->time_ms < ct ? -1 : 1)
                : (int64_t)g->op != cop ? ((int64_t)g->op < cop ? -1 : 1)
                                        : strcmp(g->instance, l->pg.part[2]);
        if (c <= 0)
            return SKP_OK; /* at or before the cursor */
    }
    if (l->n == l->pg.limit) {
        l->more = true;
        return SKP_EFULL; /* stop: one row past the page */
    }
    const char *parts[] = {t, op, g->instance};
    if (!http_cursor_encode(l->last, sizeof(l->last), parts, 3))
        l->last[0] = '\0';
    l->n++;
    return http_task_log_push(l->arr, g);
}

static void list_run(struct http_job *j, struct store *st)
{
    struct list_job *l = (struct list_job *)j;
    struct store_task t = {0};
    skp_err err = store_get_task(st, l->base.id, &t);
    store_task_cleanup(&t);
    if (err) {
        http_job_set_store_error(j, err, "task");
        return;
    }
    l->arr = json_array();
    if (!l->arr) {
        http_job_set_store_error(j, SKP_ENOMEM, "listing");
        return;
    }
    if (l->kind == LIST_SEGMENTS) {
        struct store_segment_key key = {0};
        if (l->pg.has_cursor && (l->pg.n_parts != 2 || !part_i64(l->pg.part[0], &key.start_ms))) {
            json_decref(l->arr);
            http_job_set_error(j, 400, "malformed cursor for this listing");
            return;
        }
        key.segment_id = l->pg.has_cursor ? l->pg.part[1] : NULL;
        err = store_list_profiled_segments_page(st, l->base.id, l->pg.has_cursor ? &key : NULL,
                                                l->pg.limit, segment_row, l, &l->more);
    } else {
        err = store_list_task_logs(st, l->base.id, log_row, l);
        if (err == SKP_EFULL)
            err = SKP_OK;
    }
    if (err == SKP_EINVAL) {
        json_decref(l->arr);
        http_job_set_error(j, 400, "malformed cursor for this listing");
        return;
    }
    if (err) {
        json_decref(l->arr);
        http_job_set_store_error(j, err, l->kind == LIST_SEGMENTS ? "segments" : "task logs");
        return;
    }
    http_job_set_json(j, 200, l->arr); /* before the cursor: setting a body resets the reply */
    if (l->more && l->last[0])
        j->res.next_cursor = skpx_strdup(l->last);
}

static void list_dispatch(struct http_ctx *cx, const char *task_id, enum list_kind kind,
                          size_t def_limit, size_t max_limit)
{
    struct list_job *l = http_job_new(cx, sizeof(*l), list_run, http_job_free);
    if (!l || !http_job_strdup(cx, &l->base, &l->base.id, task_id))
        return;
    l->kind = kind;
    if (!http_page_parse(cx, def_limit, max_limit, &l->pg)) {
        http_job_free(&l->base);
        return;
    }
    http_job_dispatch(cx, &l->base);
}

void http_page_segments(struct http_ctx *cx, const char *task_id)
{
    list_dispatch(cx, task_id, LIST_SEGMENTS, HTTP_PAGE_SEGMENTS_DEFAULT, HTTP_PAGE_SEGMENTS_MAX);
}

void http_page_task_logs(struct http_ctx *cx, const char *task_id)
{
    list_dispatch(cx, task_id, LIST_TASK_LOGS, HTTP_PAGE_LOGS_DEFAULT, HTTP_PAGE_LOGS_MAX);
}
