/* Unit tests of src/cli/http_client.c: URL parsing and path escaping, and the HTTP client
 * against a scripted local server (Content-Length, chunked, truncated, garbage, refused, silent
 * peer). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli/http_client.h"
#include "common/alloc.h"

static void url_parse_table(void **state)
{
    (void)state;
    static const struct {
        const char *url;
        int ok;
        const char *host, *port, *base;
    } cases[] = {
        {"http://127.0.0.1:12800", 1, "127.0.0.1", "12800", ""},
        {"http://localhost", 1, "localhost", "80", ""},
        {"http://h:1/api/", 1, "h", "1", "/api"},
        {"http://[::1]:8080/x", 1, "::1", "8080", "/x"},
        {"https://h", 0, NULL, NULL, NULL},
        {"ftp://h", 0, NULL, NULL, NULL},
        {"http://", 0, NULL, NULL, NULL},
        {"http://h:", 0, NULL, NULL, NULL},
        {"http://h:0", 0, NULL, NULL, NULL},
        {"http://h:70000", 0, NULL, NULL, NULL},
        {"http://h:12a", 0, NULL, NULL, NULL},
        {"http://[::1", 0, NULL, NULL, NULL},
        {"h:80", 0, NULL, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct http_url u;
        skp_err err = http_url_parse(cases[i].url, &u);
        if (!cases[i].ok) {
            assert_int_equal(err, SKP_EINVAL);
            continue;
        }
        assert_int_equal(err, SKP_OK);
        assert_string_equal(u.host, cases[i].host);
        assert_string_equal(u.port, cases[i].port);
        assert_string_equal(u.base, cases[i].base);
    }
}

static void path_escape(void **state)
{
    (void)state;
    char buf[64] = "/t/";
    assert_true(http_path_escape(buf, sizeof(buf), "1733_ZGVt==.1 a/b"));
    assert_string_equal(buf, "/t/1733_ZGVt%3D%3D.1%20a%2Fb");
    char small[8] = "/";
    assert_false(http_path_escape(small, sizeof(small), "aaaaaaaaaa"));
}

/* ---- scripted server: accepts one connection, reads the request, writes `reply`, closes ---- */

struct script {
    int fd;
    const char *reply; /* NULL: never answer (the client must time out) */
    char request[4096];
};

static void *serve_once(void *arg)
{
    struct script *s = arg;
    int c = accept(s->fd, NULL, NULL);
    if (c < 0)
        return NULL;
    size_t n = 0;
    while (n < sizeof(s->request) - 1) {
        ssize_t r = recv(c, s->request + n, sizeof(s->request) - 1 - n, 0);
        if (r <= 0)
            break;
        n += (size_t)r;
        s->request[n] = 0;
        char *end = strstr(s->request, "\r\n\r\n");
        if (end) {
            const char *cl = strstr(s->request, "Content-Length: ");
            size_t body = cl ? strtoul(cl + 16, NULL, 10) : 0;
            if (n >= (size_t)(end + 4 - s->request) + body)
                break;
        }
    }
    if (s->reply) {
        send(c, s->reply, strlen(s->reply), MSG_NOSIGNAL);
    } else {
        char b;
        (void)recv(c, &b, 1, 0); /* wait until the client gives up */
    }
    close(c);
    return NULL;
}

static int listen_any(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 4), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static skp_err exchange(const char *reply, const char *method, const char *body, int timeout_ms,
                        struct http_response *resp, char *request_out, size_t cap)
{
    int port;
    struct script s = {.reply = reply};
    s.fd = listen_any(&port);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, serve_once, &s), 0);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/base", port);
    struct http_url u;
    assert_int_equal(http_url_parse(url, &u), SKP_OK);
    skp_err err = http_request(&u, method, "/api/x?y=1", "tok", body, body ? strlen(body) : 0,
                               timeout_ms, resp);
    pthread_join(th, NULL);
    close(s.fd);
    if (request_out)
        snprintf(request_out, cap, "%s", s.request);
    return err;
}

static void http_content_length_and_request_shape(void **state)
{
    (void)state;
    struct http_response r;
    char req[4096];
    skp_err err = exchange("HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
                           "Content-Length: 8\r\n\r\n{\"id\":1}",
                           "POST", "{\"a\":1}", 5000, &r, req, sizeof(req));
    assert_int_equal(err, SKP_OK);
    assert_int_equal(r.status, 201);
    assert_string_equal(r.content_type, "application/json");
    assert_int_equal(r.body_len, 8);
    assert_string_equal(r.body, "{\"id\":1}");
    assert_non_null(strstr(req, "POST /base/api/x?y=1 HTTP/1.1\r\n"));
    assert_non_null(strstr(req, "Authorization: Bearer tok\r\n"));
    assert_non_null(strstr(req, "Content-Length: 7\r\n"));
    assert_non_null(strstr(req, "\r\n\r\n{\"a\":1}"));
    http_response_cleanup(&r);
    assert_null(r.body); /* empty again: nothing of the answer is left */
    assert_int_equal(r.body_len, 0);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.content_type, "");
}

static void http_chunked_and_close_delimited(void **state)
{
    (void)state;
    struct http_response r;
    assert_int_equal(exchange("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "4\r\nWiki\r\n5\r\npedia\r\n0\r\n\r\n",
                              "GET", NULL, 5000, &r, NULL, 0),
                     SKP_OK);
    assert_string_equal(r.body, "Wikipedia");
    http_response_cleanup(&r);
    assert_int_equal(
        exchange("HTTP/1.0 404 Not Found\r\n\r\n{\"error\":\"x\"}", "GET", NULL, 5000, &r, NULL, 0),
        SKP_OK);
    assert_int_equal(r.status, 404);
    assert_string_equal(r.body, "{\"error\":\"x\"}");
    http_response_cleanup(&r);
}

/* A body many times the first 16 KiB read buffer: the buffer grows and keeps every byte. */
static void http_large_body(void **state)
{
    (void)state;
    enum { BODY = 200000 };
    static const char head[] = "HTTP/1.1 200 OK\r\nContent-Length: 200000\r\n\r\n";
    char *reply = malloc(sizeof(head) + BODY);
    assert_non_null(reply);
    memcpy(reply, head, sizeof(head) - 1);
    for (size_t i = 0; i < BODY; i++)
        reply[sizeof(head) - 1 + i] = (char)('a' + i % 26);
    reply[sizeof(head) - 1 + BODY] = 0;
    struct http_response r;
    assert_int_equal(exchange(reply, "GET", NULL, 5000, &r, NULL, 0), SKP_OK);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, BODY);
    assert_memory_equal(r.body, reply + sizeof(head) - 1, BODY);
    assert_int_equal(r.body[BODY], 0);
    http_response_cleanup(&r);
    free(reply);
}

static void http_malformed_responses(void **state)
{
    (void)state;
    struct http_response r;
    static const char *bad[] = {
        "garbage\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nabc",
        "HTTP/1.1 200 OK",
        "",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        skp_err err = exchange(bad[i], "GET", NULL, 5000, &r, NULL, 0);
        assert_int_equal(err, SKP_EPROTO);
        assert_null(r.body);
        assert_int_equal(r.status, 0); /* not even a status read before the body failed */
    }
}

static void http_refused_and_timeout(void **state)
{
    (void)state;
    int port;
    int fd = listen_any(&port);
    close(fd); /* nothing listens there now */
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
    struct http_url u;
    struct http_response r;
    assert_int_equal(http_url_parse(url, &u), SKP_OK);
    assert_int_equal(http_request(&u, "GET", "/", NULL, NULL, 0, 2000, &r), SKP_EUNAVAILABLE);
    /* A peer that accepts but never answers: the deadline ends the wait. */
    assert_int_equal(exchange(NULL, "GET", NULL, 300, &r, NULL, 0), SKP_ETIMEDOUT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(url_parse_table),
        cmocka_unit_test(path_escape),
        cmocka_unit_test(http_content_length_and_request_shape),
        cmocka_unit_test(http_chunked_and_close_delimited),
        cmocka_unit_test(http_large_body),
        cmocka_unit_test(http_malformed_responses),
        cmocka_unit_test(http_refused_and_timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
