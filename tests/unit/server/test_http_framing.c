/* Unit test of http_framing.c, table-driven: well-formed requests (pipelined, with and without
 * bodies, split at every byte) produce the same events and body lengths; each framing the
 * scanner must refuse (two Content-Length headers, `+N`, lists, Transfer-Encoding with or
 * without a space before the colon, obsolete folding, bare LF, a body on GET, long heads,
 * unknown methods and versions) gives its status. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "server/http_framing.h"

struct outcome {
    int n_heads;      /* HEAD_DONE events */
    int n_done;       /* REQUEST_DONE events (requests with a body) */
    int status;       /* 0 = no error */
    uint64_t last_body;
    char authz[HTTP_FRAMING_AUTHZ_MAX + 1];
};

/* Feeds `s` in pieces of `chunk` bytes. */
static struct outcome frame_all(const char *s, size_t chunk)
{
    static struct http_framing f;
    struct outcome o = {0};
    http_framing_init(&f, 1000);
    size_t n = strlen(s), off = 0;
    while (off < n && !o.status) {
        size_t end = off + chunk < n ? off + chunk : n;
        while (off < end) {
            enum http_framing_event ev;
            size_t used = http_framing_feed(&f, (const uint8_t *)s + off, end - off, &ev);
            off += used;
            if (ev == HTTP_FRAMING_HEAD_DONE) {
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
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 501},
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
    const uint8_t bad[] = "GET / HTTP/1.1\n";
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
        cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
