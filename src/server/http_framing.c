/* http_framing.c - strict HTTP/1.1 request framing (see http_framing.h).
 *
 * Design: a byte-at-a-time state machine over lines. A line is collected (up to
 * HTTP_FRAMING_LINE_MAX bytes) until CRLF and then judged whole: the request line, then header
 * lines until the empty line. Only the headers that decide framing (Content-Length,
 * Transfer-Encoding) and the early token check (Authorization) are looked at; evhttp parses the
 * rest. The body is skipped by count. Each rule errs on refusing: evhttp is lenient (bare LF,
 * folding, first-of-two Content-Length), and any input two parsers could frame differently is
 * refused before evhttp sees it. */
#include "server/http_framing.h"

#include <string.h>

enum {
    ST_LINE = 0,  /* request line (or nothing yet) */
    ST_HEADER,    /* header lines */
    ST_BODY,      /* skipping body_left bytes */
    ST_ERROR,
};

void http_framing_init(struct http_framing *f, uint64_t max_body)
{
    memset(f, 0, offsetof(struct http_framing, _line));
    f->_max_body = max_body;
    f->_state = ST_LINE;
}

bool http_framing_in_request(const struct http_framing *f)
{
    return f->_state == ST_BODY || f->_state == ST_HEADER ||
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

static const struct {
    const char *name;
    enum http_framing_method m;
} methods[] = {
    {"GET", HTTP_FRAMING_GET},         {"HEAD", HTTP_FRAMING_HEAD},
    {"POST", HTTP_FRAMING_POST},       {"PUT", HTTP_FRAMING_PUT},
    {"DELETE", HTTP_FRAMING_DELETE},   {"OPTIONS", HTTP_FRAMING_OPTIONS},
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
    return 0;
}

/* One header line "name: value". Returns 0 or the refusal status. */
static int header_line(struct http_framing *f, const char **why)
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
        f->_has_te = true;
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
        *why = f->_has_cl ? "both Transfer-Encoding and Content-Length"
                          : "Transfer-Encoding not implemented (send Content-Length)";
        return f->_has_cl ? 400 : 501;
    }
    bool may_have_body = f->method == HTTP_FRAMING_POST || f->method == HTTP_FRAMING_PUT ||
                         f->method == HTTP_FRAMING_PATCH;
    if (f->body_len > 0 && !may_have_body) {
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

static void request_reset(struct http_framing *f)
{
    f->body_len = 0;
    f->has_authz = false;
    f->authz_too_long = false;
    f->authz[0] = '\0';
    f->_has_cl = false;
    f->_has_te = false;
    f->_n_headers = 0;
    f->_head_bytes = 0;
}

size_t http_framing_feed(struct http_framing *f, const uint8_t *p, size_t n,
                         enum http_framing_event *ev)
{
    *ev = HTTP_FRAMING_MORE;
    if (f->_state == ST_ERROR) {
        *ev = HTTP_FRAMING_ERROR;
        return 0;
    }
    size_t i = 0;
    while (i < n) {
        if (f->_state == ST_BODY) {
            uint64_t take = n - i < f->_body_left ? n - i : f->_body_left;
            i += (size_t)take;
            f->_body_left -= take;
            if (f->_body_left == 0) {
                f->_state = ST_LINE;
                *ev = HTTP_FRAMING_REQUEST_DONE;
                return i;
            }
            continue;
        }
        uint8_t c = p[i++];
        bool starting = f->_state == ST_LINE && f->_line_len == 0 && !f->_cr;
        if (starting)
            request_reset(f);
        if (++f->_head_bytes > HTTP_FRAMING_HEAD_MAX)
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
            } else if (f->_line_len == 0) {
                st = head_done(f, &why);
                if (!st) {
                    f->_line_len = 0;
                    if (f->body_len > 0) {
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
                st = header_line(f, &why);
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
            if (f->_line_len >= HTTP_FRAMING_LINE_MAX)
                return fail(f, f->_state == ST_LINE ? 414 : 431, "request line or header too long",
                            i, ev);
            f->_line[f->_line_len++] = (char)c;
        }
        if (starting) {
            *ev = HTTP_FRAMING_REQUEST_START;
            return i;
        }
    }
    return i;
}
