/* Unit test of http_framing.c, table-driven: well-formed requests (pipelined, with and without
 * bodies, Content-Length or chunked, split at every byte) produce the same events and body
 * lengths; each framing the scanner must refuse (two Content-Length headers, `+N`, lists,
 * Transfer-Encoding other than chunked or with a space before the colon, malformed chunk sizes,
 * chunk data without CRLF, forbidden trailer fields, obsolete folding, bare LF, a body on GET,
 * long heads, unknown methods and versions) gives its status. The `;` of a chunk extension is
 * rewritten into a space, and nothing else is. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "server/http/http_framing.h"

struct outcome {
    int n_heads;            /* HEAD_DONE events */
    int n_done;             /* REQUEST_DONE events (requests with a body) */
    int n_chunks;           /* CHUNK events */
    uint64_t chunked_total; /* sum of chunk_len */
    char out[512];          /* the input as the scanner left it (rewrites applied) */
    int status;             /* 0 = no error */
    uint64_t last_body;
    char authz[HTTP_FRAMING_AUTHZ_MAX + 1];
};

/* Feeds a copy of `s` in pieces of `chunk` bytes. */
static struct outcome frame_all(const char *s, size_t chunk)
{
    static struct http_framing f;
    static uint8_t buf[HTTP_FRAMING_HEAD_MAX + 64];
    struct outcome o = {0};
    http_framing_init(&f, 1000);
    size_t n = strlen(s), off = 0;
    assert_true(n <= sizeof(buf));
    memcpy(buf, s, n);
    while (off < n && !o.status) {
        size_t end = off + chunk < n ? off + chunk : n;
        while (off < end) {
            enum http_framing_event ev;
            size_t used = http_framing_feed(&f, buf + off, end - off, &ev);
            off += used;
            if (ev == HTTP_FRAMING_CHUNK) {
                o.n_chunks++;
                o.chunked_total += f.chunk_len;
            } else if (ev == HTTP_FRAMING_HEAD_DONE) {
                o.n_heads++;
                o.last_body = f.body_len;
                snprintf(o.authz, sizeof(o.authz), "%s", f.has_authz ? f.authz : "");
            } else if (ev == HTTP_FRAMING_REQUEST_DONE) {
                o.n_done++;
            } else if (ev == HTTP_FRAMING_ERROR) {
                o.status = f.status;
                break;
            }
        }
    }
    snprintf(o.out, sizeof(o.out), "%.*s", (int)(n < sizeof(o.out) ? n : sizeof(o.out) - 1),
             (const char *)buf);
    return o;
}

static void test_good(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        int heads, done;
        uint64_t body;
        const char *authz;
    } cases[] = {
        {"GET / HTTP/1.1\r\nHost: a\r\n\r\n", 1, 0, 0, ""},
        {"GET / HTTP/1.0\r\n\r\n", 1, 0, 0, ""},
        {"POST /x HTTP/1.1\r\nContent-Length: 2\r\nAuthorization:  Bearer t \r\n\r\n{}", 1, 1, 2,
         "Bearer t"},
        {"POST /x HTTP/1.1\r\ncontent-length: 0\r\n\r\nGET /y HTTP/1.1\r\n\r\n", 2, 0, 0, ""},
        {"PUT /x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcDELETE /x HTTP/1.1\r\n\r\n", 2, 1, 0, ""},
        {"HEAD /x?a=b HTTP/1.1\r\nX-Tab:\tv\r\n\r\n", 1, 0, 0, ""},
        /* chunked: body_len stays 0; one REQUEST_DONE after the trailer section */
        {"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 1, 1, 0, ""},
        {"POST /x HTTP/1.1\r\nTransfer-Encoding:  Chunked \t\r\n\r\n0\r\n\r\n", 1, 1, 0, ""},
        {"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nA;n=v;m=\"q;x\"\r\n0123456789\r\n"
         "00000000000000f\r\nabcdefghijklmno\r\n0;last\r\nX-Sum: 1\r\nX-B: 2\r\n\r\n"
         "GET /y HTTP/1.1\r\n\r\n",
         2, 1, 0, ""},
        {"PATCH /x HTTP/1.1\r\ntransfer-encoding: CHUNKED\r\n\r\n1\r\n\r\r\n1\r\n\n\r\n0\r\n\r\n",
         1, 1, 0, ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        for (size_t chunk = 1; chunk <= strlen(cases[i].in); chunk++) {
            struct outcome o = frame_all(cases[i].in, chunk);
            if (o.status || o.n_heads != cases[i].heads || o.n_done != cases[i].done ||
                o.last_body != cases[i].body || strcmp(o.authz, cases[i].authz) != 0)
                fail_msg("case %zu chunk %zu: status %d heads %d done %d body %llu authz '%s'", i,
                         chunk, o.status, o.n_heads, o.n_done, (unsigned long long)o.last_body,
                         o.authz);
        }
    }
}

static void test_refused(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        int status;
    } cases[] = {
        {"POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400},
        {"POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}", 400},
        {"POST / HTTP/1.1\r\nContent-Length: +2\r\n\r\n{}", 400},
        {"POST / HTTP/1.1\r\nContent-Length: 2, 2\r\n\r\n{}", 400},
        {"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nContent-Length:\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nContent-Length: 1001\r\n\r\n", 413},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n0\r\n\r\n", 501},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", 501},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
         400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding:\tchunked\r\n\r\n0\r\n\r\n", 400},
        {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
        {"HEAD / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
        /* chunk sizes: hex digits only, at most 16, no blank, sign or prefix */
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0x2\r\n{}\r\n0\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n+2\r\n{}\r\n0\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n-2\r\n{}\r\n0\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n 2\r\n{}\r\n0\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2 \r\n{}\r\n0\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2 ;x\r\n{}\r\n0\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\ng\r\n", 400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n00000000000000002\r\n", 400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n", 413},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3e9\r\n", 413},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1f4\r\n", 0},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n2\n{}\r\n", 400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}x\r\n0\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\n0\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2;a\x01\r\n{}\r\n0\r\n\r\n", 400},
        /* trailers: header syntax; fields that frame, route or authorise refused */
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nContent-Type: a/b\r\n\r\n",
         400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nhost: x\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nAuthorization: x\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nContent-Length: 5\r\n\r\n",
         400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: a\r\n b\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX : a\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: a\n\r\n", 400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\nx", 400},
        {"GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\n\tb\r\n\r\n", 400},
        {"GET / HTTP/1.1\nHost: a\n\n", 400},
        {"GET / HTTP/1.1\r\nHost: a\rx\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", 400},
        {"DELETE / HTTP/1.1\r\nContent-Length: 1\r\n\r\nx", 400},
        {"\r\nGET / HTTP/1.1\r\n\r\n", 400},
        {"GET  / HTTP/1.1\r\n\r\n", 400},
        {"GET / HTTP/1.1 \r\n\r\n", 400},
        {"GET / HTTP/2.0\r\n\r\n", 400},
        {"GET / HTTP/1.2\r\n\r\n", 505},
        {"BREW / HTTP/1.1\r\n\r\n", 501},
        {"G@T / HTTP/1.1\r\n\r\n", 400},
        {"GET /\x01 HTTP/1.1\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nX: a\x01\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\n: v\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nNoColon\r\n\r\n", 400},
        {"POST / HTTP/1.1\r\nAuthorization: a\r\nAuthorization: b\r\n\r\n", 400},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct outcome o = frame_all(cases[i].in, strlen(cases[i].in));
        struct outcome b = frame_all(cases[i].in, 1);
        if (o.status != cases[i].status || b.status != cases[i].status)
            fail_msg("case %zu: status %d (byte by byte %d), want %d", i, o.status, b.status,
                     cases[i].status);
    }
}

static void test_chunked(void **state)
{
    (void)state;
    /* Events, sizes, and the extension rewrite (only the first `;` of each size line). */
    const char *in = "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "3;a=1;b\r\nx;y\r\n2\r\n;;\r\n0;z\r\n\r\n";
    const char *want = "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "3 a=1;b\r\nx;y\r\n2\r\n;;\r\n0 z\r\n\r\n";
    for (size_t chunk = 1; chunk <= strlen(in); chunk++) {
        struct outcome o = frame_all(in, chunk);
        assert_int_equal(o.status, 0);
        assert_int_equal(o.n_heads, 1);
        assert_int_equal(o.n_done, 1);
        assert_int_equal(o.n_chunks, 3);
        assert_int_equal(o.chunked_total, 5);
        assert_string_equal(o.out, want);
    }
    /* The sum of the chunks obeys the maximum (1000 here): 500 + 500 fits, one more byte not. */
    static char big[8192];
    int n = snprintf(big, sizeof(big), "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int k = 0; k < 2; k++) {
        n += snprintf(big + n, sizeof(big) - (size_t)n, "1f4\r\n");
        memset(big + n, 'x', 500);
        n += 500;
        n += snprintf(big + n, sizeof(big) - (size_t)n, "\r\n");
    }
    snprintf(big + n, sizeof(big) - (size_t)n, "1\r\nx\r\n0\r\n\r\n");
    assert_int_equal(frame_all(big, 7).status, 413);
    snprintf(big + n, sizeof(big) - (size_t)n, "0\r\n\r\n");
    struct outcome o = frame_all(big, 13);
    assert_int_equal(o.status, 0);
    assert_int_equal(o.chunked_total, 1000);
    /* Extensions are bounded per request. */
    n = snprintf(big, sizeof(big), "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int k = 0; k < 25; k++)
        n += snprintf(big + n, sizeof(big) - (size_t)n, "1;%0200d\r\nx\r\n", k);
    assert_int_equal(frame_all(big, strlen(big)).status, 400);
    /* One long size line. */
    n = snprintf(big, sizeof(big), "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1;");
    memset(big + n, 'e', HTTP_FRAMING_CHUNK_LINE_MAX);
    big[n + HTTP_FRAMING_CHUNK_LINE_MAX] = '\0';
    assert_int_equal(frame_all(big, strlen(big)).status, 400);
    /* in_request covers the chunked states. */
    static struct http_framing f;
    http_framing_init(&f, 100);
    uint8_t part[] = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n";
    enum http_framing_event ev;
    size_t used = 0;
    while (used < sizeof(part) - 1)
        used += http_framing_feed(&f, part + used, sizeof(part) - 1 - used, &ev);
    assert_true(http_framing_in_request(&f));
    uint8_t end[] = "0\r\n\r\n";
    used = 0;
    do
        used += http_framing_feed(&f, end + used, sizeof(end) - 1 - used, &ev);
    while (ev != HTTP_FRAMING_REQUEST_DONE && used < sizeof(end) - 1);
    assert_int_equal(ev, HTTP_FRAMING_REQUEST_DONE);
    assert_false(http_framing_in_request(&f));
}

static void test_limits(void **state)
{
    (void)state;
    static char big[HTTP_FRAMING_HEAD_MAX + 64];
    /* one over-long line */
    memset(big, 'a', sizeof(big) - 1);
    memcpy(big, "GET /", 5);
    assert_int_equal(frame_all(big, sizeof(big)).status, 414);
    /* too many header lines */
    size_t off = (size_t)snprintf(big, sizeof(big), "GET / HTTP/1.1\r\n");
    for (unsigned i = 0; i <= HTTP_FRAMING_MAX_HEADERS; i++)
        off += (size_t)snprintf(big + off, sizeof(big) - off, "X-%u: v\r\n", i);
    snprintf(big + off, sizeof(big) - off, "\r\n");
    assert_int_equal(frame_all(big, 7).status, 431);
    /* an error is final */
    static struct http_framing f;
    http_framing_init(&f, 10);
    enum http_framing_event ev;
    uint8_t bad[] = "GET / HTTP/1.1\n";
    size_t used = 0;
    do
        used += http_framing_feed(&f, bad + used, sizeof(bad) - 1 - used, &ev);
    while (ev != HTTP_FRAMING_ERROR && used < sizeof(bad) - 1);
    assert_int_equal(ev, HTTP_FRAMING_ERROR);
    assert_int_equal(http_framing_feed(&f, bad, 3, &ev), 0);
    assert_int_equal(ev, HTTP_FRAMING_ERROR);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_chunked),
        cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
