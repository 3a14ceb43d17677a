/* http_framing.h - a strict HTTP/1.1 request framing scanner. It reads the bytes a client sends
 * before evhttp parses them and decides where each request starts and ends, so skyprofd can
 * refuse what evhttp would frame differently from other servers or proxies (request smuggling,
 * keep-alive desynchronisation) and act on a request's headers before its body is read.
 *
 * Bodies are framed by Content-Length or by `Transfer-Encoding: chunked` (HTTP/1.1 only): chunk
 * sizes are hex digits only (at most 16, no sign, prefix or blank), each chunk's data ends in
 * CRLF, chunk extensions and trailer fields are bounded, and the sum of the chunks obeys the same
 * maximum as a Content-Length body.
 *
 * Refused with a status (the connection is then closed): bare LF or CR line ends, whitespace
 * before a header's colon, obsolete line folding, two Content-Length or Transfer-Encoding headers,
 * a Content-Length that is not plain digits (no sign, no list), both Content-Length and
 * Transfer-Encoding, a Transfer-Encoding other than `chunked` (501), a malformed chunk, a trailer
 * field skyprofd or evhttp act on (evhttp merges trailers into the headers), a body on a method
 * without one, request heads over HTTP_FRAMING_HEAD_MAX or HTTP_FRAMING_MAX_HEADERS lines, bodies
 * over the configured maximum, methods evhttp does not serve, versions other than HTTP/1.0 and
 * HTTP/1.1.
 * Pure: no I/O, no allocation; the state is a fixed-size struct. Not thread-safe per scanner. */
#ifndef SKP_SERVER_HTTP_FRAMING_H
#define SKP_SERVER_HTTP_FRAMING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Request line plus headers (evhttp's own limit in http_api.c is the same). */
#define HTTP_FRAMING_HEAD_MAX (64u * 1024)
/* Header lines per request. */
#define HTTP_FRAMING_MAX_HEADERS 100u
/* Longest single line kept for parsing (request line or one header). */
#define HTTP_FRAMING_LINE_MAX 8192u
/* Authorization value kept for the early token check; longer values count as wrong. */
#define HTTP_FRAMING_AUTHZ_MAX 512u
/* Longest chunk-size line (16 hex digits and the chunk's extensions). */
#define HTTP_FRAMING_CHUNK_LINE_MAX 256u
/* Bytes of chunk extensions in one request, all chunks together. */
#define HTTP_FRAMING_CHUNK_EXT_MAX 4096u

enum http_framing_method {
    HTTP_FRAMING_GET,
    HTTP_FRAMING_HEAD,
    HTTP_FRAMING_POST,
    HTTP_FRAMING_PUT,
    HTTP_FRAMING_DELETE,
    HTTP_FRAMING_OPTIONS,
    HTTP_FRAMING_PATCH,
};

enum http_framing_event {
    HTTP_FRAMING_MORE,          /* all input consumed, nothing to report */
    HTTP_FRAMING_REQUEST_START, /* the first byte of a request was consumed */
    HTTP_FRAMING_HEAD_DONE,     /* request line and headers complete: method, authz, body_len,
                                   chunked */
    HTTP_FRAMING_CHUNK,         /* a chunk-size line was read: chunk_len bytes of data follow
                                   (0: the last chunk, then the trailer section) */
    HTTP_FRAMING_REQUEST_DONE,  /* the body is complete (events only for requests with a body:
                                   Content-Length > 0 or chunked) */
    HTTP_FRAMING_ERROR,         /* refuse with `status` and `reason`, then close */
};

struct http_framing {
    /* ---- results, valid from HEAD_DONE until the next REQUEST_START ---- */
    enum http_framing_method method;
    uint64_t body_len;  /* Content-Length (0 without one, and when chunked) */
    bool chunked;       /* Transfer-Encoding: chunked */
    uint64_t chunk_len; /* with HTTP_FRAMING_CHUNK: the chunk's size */
    bool has_authz;
    bool authz_too_long;
    char authz[HTTP_FRAMING_AUTHZ_MAX + 1]; /* NUL-terminated, surrounding spaces trimmed */
    /* ---- set with HTTP_FRAMING_ERROR ---- */
    int status;         /* 400, 413, 414, 431, 501 or 505 */
    const char *reason; /* static text */
    /* ---- private ---- */
    uint64_t _max_body;
    int _state;
    bool _cr; /* previous byte was CR */
    bool _has_cl;
    bool _has_te;
    bool _te_chunked; /* the Transfer-Encoding value is `chunked` as evhttp reads it */
    bool _te_blank;   /* ... but only once blanks evhttp keeps are trimmed */
    bool _http10;
    uint8_t _crlf;        /* bytes of the CRLF after a chunk's data seen */
    uint64_t _body_total; /* chunked: sum of the chunk sizes so far */
    size_t _ext_bytes;    /* chunked: extension bytes so far */
    uint32_t _n_headers;
    size_t _head_bytes;
    size_t _line_len; /* bytes of the current line (without CRLF) */
    uint64_t _body_left;
    char _line[HTTP_FRAMING_LINE_MAX];
};

/* Starts a scanner for a new connection; bodies over `max_body` bytes are refused (413). */
void http_framing_init(struct http_framing *f, uint64_t max_body);
/* Consumes bytes of [p, p+n) up to and including the next event and returns how many; the
 * caller calls again with the rest. *ev is the event (HTTP_FRAMING_MORE when all was consumed
 * without one). After HTTP_FRAMING_ERROR every later call consumes nothing and repeats it.
 * Writes into the bytes it consumed in one case: the `;` that starts a chunk extension becomes a
 * space, because evhttp (which reads the body after us) ends a chunk size at a space but refuses
 * a `;`; so it ignores extensions as HTTP says to. Borrows p.
 * Hot path for API traffic: one pass over the bytes, no allocation. */
size_t http_framing_feed(struct http_framing *f, uint8_t *p, size_t n, enum http_framing_event *ev);
/* True while a request has started and is not complete (the read deadline applies). */
bool http_framing_in_request(const struct http_framing *f);

#endif
