/* http_framing.c - strict HTTP/1.1 request framing (see http_framing.h).
 *
 * Design: a byte-at-a-time state machine over lines. A line is collected (up to
 * HTTP_FRAMING_LINE_MAX bytes) until CRLF and then judged whole: the request line, then header
 * lines until the empty line. Only the headers that decide framing (Content-Length,
 * Transfer-Encoding) and the early token check (Authorization) are looked at; evhttp parses the
 * rest. A Content-Length body is skipped by count; a chunked body is walked chunk by chunk
 * (size line, data skipped by count, CRLF) up to the last chunk and its trailer section. Each
 * rule errs on refusing: evhttp is lenient (bare LF, folding, first-of-two Content-Length, blank
 * lines between chunks, `0x` and signs in chunk sizes), and any input two parsers could frame
 * differently is refused before evhttp sees it. */
#include "server/http/http_framing.h"

#include <string.h>

#include "common/hex.h"

enum {
    ST_LINE = 0, /* request line (or nothing yet) */
    ST_HEADER,   /* header lines */
    ST_BODY,     /* skipping body_left bytes */
    ST_ERROR,
    ST_CHUNK_SIZE, /* a chunk-size line */
    ST_CHUNK_DATA, /* skipping body_left bytes of a chunk */
    ST_CHUNK_END,  /* the CRLF after a chunk's data */
    ST_TRAILER,    /* trailer lines after the last chunk */
};

void http_framing_init(struct http_framing *f, uint64_t max_body)
{
    memset(f, 0, offsetof(struct http_framing, _line));
    f->_max_body = max_body;
    f->_state = ST_LINE;
}

bool http_framing_in_request(const struct http_framing *f)
{
    return f->_state == ST_BODY || f->_state == ST_HEADER || f->_state == ST_CHUNK_SIZE ||
           f->_state == ST_CHUNK_DATA || f->_state == ST_CHUNK_END || f->_state == ST_TRAILER ||
           (f->_state == ST_LINE && (f->_line_len > 0 || f->_cr));
}

static size_t fail(struct http_framing *f, int status, const char *reason, size_t used,
                   enum http_framing_event *ev)
{
    f->_state = ST_ERROR;
    f->status = status;
    f->reason = reason;
    *ev = HTTP_FRAMING_ERROR;
    return used;
}

/* RFC 9110 tchar. */
static bool is_tchar(unsigned char c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return true;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool name_is(const char *name, size_t len, const char *want)
{
    size_t wl = strlen(want);
    if (len != wl)
        return false;
    for (size_t i = 0; i < len; i++) {
        char a = name[i];
        if (a >= 'A' && a <= 'Z')
            a = (char)(a + 32);
        if (a != want[i])
            return false;
    }
    return true;
}

/* Fields refused in a trailer: evhttp adds trailer fields to the request's headers, and these
 * frame, route, authorise or describe the request (RFC 9110 section 6.5.1 forbids merging them);
 * skyprofd reads Host, Content-Type, Origin and Authorization. */
static const char *const k_trailer_refused[] = {
    "authorization",
    "connection",
    "content-encoding",
    "content-length",
    "content-range",
    "content-type",
    "cookie",
    "expect",
    "host",
    "keep-alive",
    "origin",
    "proxy-authorization",
    "range",
    "referer",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
};

static const struct {
    const char *name;
    enum http_framing_method m;
} methods[] = {
    {"GET", HTTP_FRAMING_GET},       {"HEAD", HTTP_FRAMING_HEAD},
    {"POST", HTTP_FRAMING_POST},     {"PUT", HTTP_FRAMING_PUT},
    {"DELETE", HTTP_FRAMING_DELETE}, {"OPTIONS", HTTP_FRAMING_OPTIONS},
    {"PATCH", HTTP_FRAMING_PATCH},
};

/* "METHOD SP target SP HTTP/1.x": single spaces, a target of visible characters. Returns 0 or
 * the refusal status (reason in *why). */
static int request_line(struct http_framing *f, const char **why)
{
    const char *l = f->_line;
    size_t n = f->_line_len;
    const char *sp1 = memchr(l, ' ', n);
    if (!sp1 || sp1 == l) {
        *why = "malformed request line";
        return 400;
    }
    size_t ml = (size_t)(sp1 - l);
    bool known = false;
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        if (strlen(methods[i].name) == ml && memcmp(methods[i].name, l, ml) == 0) {
            f->method = methods[i].m;
            known = true;
        }
    }
    if (!known) {
        for (size_t i = 0; i < ml; i++) {
            if (!is_tchar((unsigned char)l[i])) {
                *why = "malformed request line";
                return 400;
            }
        }
        *why = "method not implemented";
        return 501;
    }
    const char *t = sp1 + 1;
    const char *end = l + n;
    const char *sp2 = memchr(t, ' ', (size_t)(end - t));
    if (!sp2 || sp2 == t) {
        *why = "malformed request line";
        return 400;
    }
    for (const char *p = t; p < sp2; p++) {
        unsigned char c = (unsigned char)*p;
        if (c <= 0x20 || c == 0x7f) {
            *why = "malformed request target";
            return 400;
        }
    }
    const char *v = sp2 + 1;
    size_t vl = (size_t)(end - v);
    if (vl != 8 || memcmp(v, "HTTP/1.", 7) != 0) {
        *why = "malformed request line";
        return 400;
    }
    if (v[7] != '0' && v[7] != '1') {
        *why = "HTTP version not supported";
        return 505;
    }
    f->_http10 = v[7] == '0';
    return 0;
}

/* One header line "name: value" (a trailer line when `trailer`). Returns 0 or the refusal
 * status. */
static int header_line(struct http_framing *f, bool trailer, const char **why)
{
    const char *l = f->_line;
    size_t n = f->_line_len;
    if (l[0] == ' ' || l[0] == '\t') {
        *why = "obsolete line folding";
        return 400;
    }
    const char *colon = memchr(l, ':', n);
    if (!colon || colon == l) {
        *why = "malformed header line";
        return 400;
    }
    size_t nl = (size_t)(colon - l);
    for (size_t i = 0; i < nl; i++) {
        if (!is_tchar((unsigned char)l[i])) {
            *why = l[i] == ' ' || l[i] == '\t' ? "whitespace before a header's colon"
                                               : "malformed header name";
            return 400;
        }
    }
    const char *v = colon + 1;
    const char *e = l + n;
    for (const char *p = v; p < e; p++) {
        unsigned char c = (unsigned char)*p;
        if ((c < 0x20 && c != '\t') || c == 0x7f) {
            *why = "control character in a header value";
            return 400;
        }
    }
    while (v < e && (*v == ' ' || *v == '\t'))
        v++;
    while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    size_t vl = (size_t)(e - v);
    if (trailer) {
        for (size_t i = 0; i < sizeof(k_trailer_refused) / sizeof(k_trailer_refused[0]); i++) {
            if (name_is(l, nl, k_trailer_refused[i])) {
                *why = "a field not allowed in a trailer";
                return 400;
            }
        }
        return 0;
    }
    if (name_is(l, nl, "content-length")) {
        if (f->_has_cl) {
            *why = "more than one Content-Length";
            return 400;
        }
        f->_has_cl = true;
        if (vl == 0 || vl > 19) {
            *why = "malformed Content-Length";
            return 400;
        }
        uint64_t x = 0;
        for (size_t i = 0; i < vl; i++) {
            if (v[i] < '0' || v[i] > '9') {
                *why = "malformed Content-Length";
                return 400;
            }
            x = x * 10 + (uint64_t)(v[i] - '0');
        }
        f->body_len = x;
    } else if (name_is(l, nl, "transfer-encoding")) {
        if (f->_has_te) {
            *why = "more than one Transfer-Encoding";
            return 400;
        }
        f->_has_te = true;
        /* evhttp skips leading spaces (not tabs) and trims trailing blanks, then compares the
         * whole value with "chunked": a value only we would call chunked is refused. */
        const char *ev = colon + 1;
        const char *ee = l + n;
        while (ev < ee && *ev == ' ')
            ev++;
        while (ee > ev && (ee[-1] == ' ' || ee[-1] == '\t'))
            ee--;
        f->_te_chunked = name_is(ev, (size_t)(ee - ev), "chunked");
        f->_te_blank = !f->_te_chunked && name_is(v, vl, "chunked");
    } else if (name_is(l, nl, "authorization")) {
        if (f->has_authz) {
            *why = "more than one Authorization";
            return 400;
        }
        f->has_authz = true;
        if (vl > HTTP_FRAMING_AUTHZ_MAX) {
            f->authz_too_long = true;
        } else {
            memcpy(f->authz, v, vl);
            f->authz[vl] = '\0';
        }
    }
    return 0;
}

/* The empty line ended the head: decide how the body is framed. */
static int head_done(struct http_framing *f, const char **why)
{
    if (f->_has_te) {
        if (f->_has_cl) {
            *why = "both Transfer-Encoding and Content-Length";
            return 400;
        }
        if (f->_http10) {
            *why = "Transfer-Encoding in an HTTP/1.0 request";
            return 400;
        }
        if (f->_te_blank) {
            *why = "malformed Transfer-Encoding";
            return 400;
        }
        if (!f->_te_chunked) {
            *why = "Transfer-Encoding other than chunked not implemented";
            return 501;
        }
        f->chunked = true;
    }
    bool may_have_body = f->method == HTTP_FRAMING_POST || f->method == HTTP_FRAMING_PUT ||
                         f->method == HTTP_FRAMING_PATCH;
    if ((f->body_len > 0 || f->chunked) && !may_have_body) {
        /* evhttp reads no body for these methods: the bytes would be parsed as a request. */
        *why = "a body on a method that takes none";
        return 400;
    }
    if (f->body_len > f->_max_body) {
        *why = "request body too large";
        return 413;
    }
    return 0;
}

/* "HEX[;ext]": 1 to 16 hex digits, then nothing or extensions (visible characters, spaces and
 * tabs) after a `;`. Sets chunk_len. Returns 0 or the refusal status. */
static int chunk_size_line(struct http_framing *f, const char **why)
{
    const char *l = f->_line;
    size_t n = f->_line_len;
    size_t i = 0;
    uint64_t x = 0;
    for (; i < n && skpx_hex_value(l[i]) >= 0; i++) {
        if (i == 16) {
            *why = "chunk size too long";
            return 400;
        }
        x = x << 4 | (uint64_t)skpx_hex_value(l[i]);
    }
    if (i == 0 || (i < n && l[i] != ';')) {
        *why = "malformed chunk size";
        return 400;
    }
    for (size_t k = i; k < n; k++) {
        unsigned char c = (unsigned char)l[k];
        if ((c < 0x20 && c != '\t') || c == 0x7f) {
            *why = "control character in a chunk extension";
            return 400;
        }
    }
    f->_ext_bytes += n - i;
    if (f->_ext_bytes > HTTP_FRAMING_CHUNK_EXT_MAX) {
        *why = "chunk extensions too long";
        return 400;
    }
    if (x > f->_max_body - f->_body_total) {
        *why = "request body too large";
        return 413;
    }
    f->_body_total += x;
    f->chunk_len = x;
    return 0;
}

static void request_reset(struct http_framing *f)
{
    f->body_len = 0;
    f->chunked = false;
    f->chunk_len = 0;
    f->_te_chunked = false;
    f->_te_blank = false;
    f->_http10 = false;
    f->_body_total = 0;
    f->_ext_bytes = 0;
    f->has_authz = false;
    f->authz_too_long = false;
    f->authz[0] = '\0';
    f->_has_cl = false;
    f->_has_te = false;
    f->_n_headers = 0;
    f->_head_bytes = 0;
}

size_t http_framing_feed(struct http_framing *f, uint8_t *p, size_t n, enum http_framing_event *ev)
{
    *ev = HTTP_FRAMING_MORE;
    if (f->_state == ST_ERROR) {
        *ev = HTTP_FRAMING_ERROR;
        return 0;
    }
    size_t i = 0;
    while (i < n) {
        if (f->_state == ST_BODY || f->_state == ST_CHUNK_DATA) {
            uint64_t take = n - i < f->_body_left ? n - i : f->_body_left;
            i += (size_t)take;
            f->_body_left -= take;
            if (f->_body_left == 0) {
                if (f->_state == ST_CHUNK_DATA) {
                    f->_state = ST_CHUNK_END;
                    f->_crlf = 0;
                    continue;
                }
                f->_state = ST_LINE;
                *ev = HTTP_FRAMING_REQUEST_DONE;
                return i;
            }
            continue;
        }
        uint8_t c = p[i++];
        if (f->_state == ST_CHUNK_END) {
            if (c != (f->_crlf == 0 ? '\r' : '\n'))
                return fail(f, 400, "chunk data not followed by CRLF", i, ev);
            if (++f->_crlf == 2)
                f->_state = ST_CHUNK_SIZE;
            continue;
        }
        bool starting = f->_state == ST_LINE && f->_line_len == 0 && !f->_cr;
        if (starting)
            request_reset(f);
        bool chunk_line = f->_state == ST_CHUNK_SIZE;
        if (!chunk_line && ++f->_head_bytes > HTTP_FRAMING_HEAD_MAX)
            return fail(f, 431, "request head too large", i, ev);
        if (f->_cr) {
            if (c != '\n')
                return fail(f, 400, "CR not followed by LF", i, ev);
            f->_cr = false;
            const char *why = NULL;
            int st = 0;
            if (f->_state == ST_LINE) {
                if (f->_line_len == 0)
                    return fail(f, 400, "empty request line", i, ev);
                st = request_line(f, &why);
                f->_state = ST_HEADER;
            } else if (chunk_line) {
                st = chunk_size_line(f, &why);
                f->_line_len = 0;
                if (st)
                    return fail(f, st, why, i, ev);
                if (f->chunk_len > 0) {
                    f->_state = ST_CHUNK_DATA;
                    f->_body_left = f->chunk_len;
                } else {
                    f->_state = ST_TRAILER;
                }
                *ev = HTTP_FRAMING_CHUNK;
                return i;
            } else if (f->_line_len == 0 && f->_state == ST_TRAILER) {
                f->_state = ST_LINE;
                *ev = HTTP_FRAMING_REQUEST_DONE;
                return i;
            } else if (f->_line_len == 0) {
                st = head_done(f, &why);
                if (!st) {
                    f->_line_len = 0;
                    if (f->chunked) {
                        f->_state = ST_CHUNK_SIZE;
                    } else if (f->body_len > 0) {
                        f->_state = ST_BODY;
                        f->_body_left = f->body_len;
                    } else {
                        f->_state = ST_LINE;
                    }
                    *ev = HTTP_FRAMING_HEAD_DONE;
                    return i;
                }
            } else {
                if (++f->_n_headers > HTTP_FRAMING_MAX_HEADERS)
                    return fail(f, 431, "too many header lines", i, ev);
                st = header_line(f, f->_state == ST_TRAILER, &why);
            }
            f->_line_len = 0;
            if (st)
                return fail(f, st, why, i, ev);
            continue;
        }
        if (c == '\r') {
            f->_cr = true;
        } else if (c == '\n') {
            return fail(f, 400, "bare LF line end", i, ev);
        } else {
            if (chunk_line && f->_line_len >= HTTP_FRAMING_CHUNK_LINE_MAX)
                return fail(f, 400, "chunk-size line too long", i, ev);
            if (f->_line_len >= HTTP_FRAMING_LINE_MAX)
                return fail(f, f->_state == ST_LINE ? 414 : 431, "request line or header too long",
                            i, ev);
            if (chunk_line && c == ';' && !memchr(f->_line, ';', f->_line_len))
                p[i - 1] = ' '; /* see http_framing_feed in the header */
            f->_line[f->_line_len++] = (char)c;
        }
        if (starting) {
            *ev = HTTP_FRAMING_REQUEST_START;
            return i;
        }
    }
    return i;
}
