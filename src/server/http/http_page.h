/* http_page.h - pagination of the HTTP API's listing routes (issue 15, finding 6): `limit`
 * (bounded, with a per-route default) and an opaque `cursor`; an answer that stops before the end
 * carries `X-Next-Cursor: <cursor>` (and a `Link: <…>; rel="next"`), and the body stays the
 * JSON array it always was. A cursor is the sort key of the last row sent, hex-encoded, so a
 * page stays right when rows are added or purged between calls. Helpers for the loop and for
 * worker jobs; the listing jobs (segments, task logs) are here too. */
#ifndef SKP_SERVER_HTTP_PAGE_H
#define SKP_SERVER_HTTP_PAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/http/http_int.h"

/* Longest cursor accepted or produced (hex of the key parts). */
#define HTTP_CURSOR_MAX 4096
/* Most parts a cursor's key has. */
#define HTTP_CURSOR_PARTS 3
/* Rows per page: the default when no `limit` is given, and the most a `limit` may ask. A
 * segment carries its spans (at most --max-segment-spans), hence the smaller pages. */
#define HTTP_PAGE_SEGMENTS_DEFAULT 100
#define HTTP_PAGE_SEGMENTS_MAX 1000
#define HTTP_PAGE_LOGS_DEFAULT 1000
#define HTTP_PAGE_LOGS_MAX 10000
#define HTTP_PAGE_TASKS_DEFAULT 100
#define HTTP_PAGE_TASKS_MAX 1000
#define HTTP_PAGE_SERVICES_DEFAULT 1000
#define HTTP_PAGE_SERVICES_MAX 10000

struct http_page {
    size_t limit; /* rows per page */
    bool has_cursor;
    char buf[HTTP_CURSOR_MAX / 2 + 1];   /* decoded key parts, NUL-separated */
    const char *part[HTTP_CURSOR_PARTS]; /* into buf */
    size_t n_parts;
};

/* Reads ?limit= (1..max_limit; default def_limit) and ?cursor= into *pg. On a bad value replies
 * 400 and returns false. */
bool http_page_parse(struct http_ctx *cx, size_t def_limit, size_t max_limit, struct http_page *pg);
/* Encodes the parts into `out` (cap >= HTTP_CURSOR_MAX); false if they do not fit. Pure. */
bool http_cursor_encode(char *out, size_t cap, const char *const *parts, size_t n);
/* Adds X-Next-Cursor and Link headers for `cursor` to the request's answer (loop thread). */
void http_page_set_next(struct http_ctx *cx, const char *cursor);

/* Listing routes that run on the worker (http_tasks.c calls them). */
void http_page_segments(struct http_ctx *cx, const char *task_id);
void http_page_task_logs(struct http_ctx *cx, const char *task_id);

#endif
