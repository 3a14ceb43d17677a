/* http_client.c - blocking HTTP/1.1 over a TCP socket with poll()-based deadlines.
 * The whole response is read until the server closes (we ask for Connection: close), then the
 * status line, headers and body (Content-Length or chunked) are parsed from the buffer. */
#include "cli/http_client.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/grow.h"

skp_err http_url_parse(const char *url, struct http_url *out)
{
    memset(out, 0, sizeof(*out));
    if (!url || strncmp(url, "http://", 7) != 0)
        return SKP_EINVAL;
    const char *h = url + 7;
    const char *slash = strchr(h, '/');
    size_t hostport_len = slash ? (size_t)(slash - h) : strlen(h);
    const char *hp_end = h + hostport_len;
    const char *port = NULL;
    const char *host_end = hp_end;
    if (*h == '[') {
        const char *close = memchr(h, ']', hostport_len);
        if (!close)
            return SKP_EINVAL;
        h++;
        host_end = close;
        if (close + 1 < hp_end) {
            if (close[1] != ':')
                return SKP_EINVAL;
            port = close + 2;
        }
    } else {
        const char *colon = memchr(h, ':', hostport_len);
        if (colon) {
            host_end = colon;
            port = colon + 1;
        }
    }
    size_t host_len = (size_t)(host_end - h);
    if (host_len == 0 || host_len >= sizeof(out->host))
        return SKP_EINVAL;
    memcpy(out->host, h, host_len);
    if (port) {
        size_t port_len = (size_t)(hp_end - port);
        if (port_len == 0 || port_len >= sizeof(out->port))
            return SKP_EINVAL;
        for (size_t i = 0; i < port_len; i++)
            if (port[i] < '0' || port[i] > '9')
                return SKP_EINVAL;
        memcpy(out->port, port, port_len);
        long p = strtol(out->port, NULL, 10);
        if (p < 1 || p > 65535)
            return SKP_EINVAL;
    } else {
        memcpy(out->port, "80", 3);
    }
    if (slash) {
        size_t base_len = strlen(slash);
        while (base_len > 0 && slash[base_len - 1] == '/')
            base_len--;
        if (base_len >= sizeof(out->base))
            return SKP_EINVAL;
        memcpy(out->base, slash, base_len);
    }
    return SKP_OK;
}

int http_path_escape(char *dst, size_t cap, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(dst);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                     c == '-' || c == '_' || c == '.' || c == '~';
        if (n + (plain ? 1 : 3) >= cap)
            return 0;
        if (plain) {
            dst[n++] = (char)c;
        } else {
            dst[n++] = '%';
            dst[n++] = hex[c >> 4];
            dst[n++] = hex[c & 15];
        }
    }
    dst[n] = 0;
    return 1;
}

static int remaining_ms(int64_t deadline_ms)
{
    int64_t left = deadline_ms - skpx_mono_ms();
    return left < 0 ? 0 : (int)left;
}

static skp_err wait_fd(int fd, short events, int64_t deadline_ms)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        int rc = poll(&p, 1, remaining_ms(deadline_ms));
        if (rc > 0)
            return SKP_OK;
        if (rc == 0)
            return SKP_ETIMEDOUT;
        if (errno != EINTR)
            return SKP_EIO;
    }
}

static skp_err connect_any(const struct http_url *url, int64_t deadline_ms, int *out_fd)
{
    struct addrinfo hints, *res = NULL;
    skp_err err = SKP_EUNAVAILABLE;

    *out_fd = -1;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(url->host, url->port, &hints, &res) != 0)
        return SKP_EUNAVAILABLE;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd =
            socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
        if (fd < 0)
            continue;
        int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
            skp_err werr = wait_fd(fd, POLLOUT, deadline_ms);
            int so_err = 0;
            socklen_t len = sizeof(so_err);
            if (werr == SKP_OK && getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_err, &len) == 0 &&
                so_err == 0) {
                rc = 0;
            } else {
                if (werr == SKP_ETIMEDOUT)
                    err = SKP_ETIMEDOUT;
                rc = -1;
            }
        }
        if (rc == 0) {
            *out_fd = fd;
            err = SKP_OK;
            break;
        }
        close(fd);
    }
    freeaddrinfo(res);
    return err;
}

static skp_err send_all(int fd, const char *p, size_t n, int64_t deadline_ms)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            skp_err err = wait_fd(fd, POLLOUT, deadline_ms);
            if (err)
                return err;
            continue;
        }
        return SKP_EIO;
    }
    return SKP_OK;
}

/* Reads until EOF into a growing buffer (NUL-terminated). */
static skp_err recv_all(int fd, int64_t deadline_ms, char **out, size_t *out_len)
{
    size_t cap = 0, len = 0;
    char *buf = NULL;
    skp_err err = SKP_OK;

    *out = NULL;
    *out_len = 0;
    for (;;) {
        if (len + 1 >= cap) {
            err = skpx_grow_capped(&buf, &cap, len + 2, 1, 16384,
                                   CLI_HTTP_MAX_RESPONSE_BYTES + 65536);
            if (err)
                break;
        }
        ssize_t r = recv(fd, buf + len, cap - len - 1, 0);
        if (r > 0) {
            len += (size_t)r;
            continue;
        }
        if (r == 0)
            break;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            err = wait_fd(fd, POLLIN, deadline_ms);
            if (err)
                break;
            continue;
        }
        err = SKP_EIO;
        break;
    }
    if (err) {
        skpx_free(buf);
        return err;
    }
    buf[len] = 0;
    *out = buf;
    *out_len = len;
    return SKP_OK;
}

/* Finds header `name` in [hdr, hdr_end); copies its trimmed value. */
static bool header_value(const char *hdr, const char *hdr_end, const char *name, char *dst,
                         size_t cap)
{
    size_t nlen = strlen(name);
    const char *p = hdr;
    while (p < hdr_end) {
        const char *eol = memchr(p, '\n', (size_t)(hdr_end - p));
        if (!eol)
            eol = hdr_end;
        if ((size_t)(eol - p) > nlen && strncasecmp(p, name, nlen) == 0 && p[nlen] == ':') {
            const char *v = p + nlen + 1;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            const char *e = eol;
            while (e > v && (e[-1] == '\r' || e[-1] == ' '))
                e--;
            size_t n = (size_t)(e - v);
            if (n >= cap)
                n = cap - 1;
            memcpy(dst, v, n);
            dst[n] = 0;
            return true;
        }
        p = eol + 1;
    }
    return false;
}

/* Decodes a chunked body in place; returns the decoded length or -1. */
static long dechunk(char *body, size_t len)
{
    size_t in = 0, out = 0;
    for (;;) {
        char *end;
        if (in >= len)
            return -1;
        unsigned long n = strtoul(body + in, &end, 16);
        char *eol = memchr(body + in, '\n', len - in);
        if (!eol || end == body + in)
            return -1;
        in = (size_t)(eol - body) + 1;
        if (n == 0)
            return (long)out;
        if (n > len - in)
            return -1;
        memmove(body + out, body + in, n);
        out += n;
        in += n;
        if (in < len && body[in] == '\r')
            in++;
        if (in < len && body[in] == '\n')
            in++;
    }
}

skp_err http_request(const struct http_url *url, const char *method, const char *target,
                     const char *token, const char *body, size_t body_len, int timeout_ms,
                     struct http_response *resp)
{
    int64_t deadline_ms = skpx_mono_ms() + timeout_ms;
    char *raw = NULL;
    size_t raw_len = 0;
    int fd = -1;
    skp_err err;

    memset(resp, 0, sizeof(*resp));
    err = connect_any(url, deadline_ms, &fd);
    if (err)
        return err;

    char head[CLI_HTTP_MAX_TARGET + 1024];
    bool v6 = strchr(url->host, ':') != NULL;
    int n = snprintf(head, sizeof(head),
                     "%s %s%s HTTP/1.1\r\nHost: %s%s%s:%s\r\nUser-Agent: skyprof/%s\r\n"
                     "Accept: */*\r\nConnection: close\r\n",
                     method, url->base, target, v6 ? "[" : "", url->host, v6 ? "]" : "", url->port,
                     SKP_VERSION);
    if (n < 0 || (size_t)n >= sizeof(head)) {
        err = SKP_EINVAL;
        goto out;
    }
    size_t hl = (size_t)n;
    if (token && *token) {
        n = snprintf(head + hl, sizeof(head) - hl, "Authorization: Bearer %s\r\n", token);
        if (n < 0 || (size_t)n >= sizeof(head) - hl) {
            err = SKP_EINVAL;
            goto out;
        }
        hl += (size_t)n;
    }
    if (body) {
        n = snprintf(head + hl, sizeof(head) - hl,
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n", body_len);
    } else if (strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0) {
        n = snprintf(head + hl, sizeof(head) - hl, "Content-Length: 0\r\n");
    } else {
        n = 0;
    }
    if (n < 0 || (size_t)n >= sizeof(head) - hl - 2) {
        err = SKP_EINVAL;
        goto out;
    }
    hl += (size_t)n;
    memcpy(head + hl, "\r\n", 2);
    hl += 2;
    err = send_all(fd, head, hl, deadline_ms);
    if (!err && body)
        err = send_all(fd, body, body_len, deadline_ms);
    if (err)
        goto out;
    err = recv_all(fd, deadline_ms, &raw, &raw_len);
    if (err)
        goto out;

    /* Status line and headers. */
    char *hdr_end = strstr(raw, "\r\n\r\n");
    size_t sep = 4;
    if (!hdr_end) {
        hdr_end = strstr(raw, "\n\n");
        sep = 2;
    }
    int major, minor, status;
    if (!hdr_end || sscanf(raw, "HTTP/%d.%d %d", &major, &minor, &status) != 3 || status < 100 ||
        status > 999) {
        err = SKP_EPROTO;
        goto out;
    }
    resp->status = status;
    header_value(raw, hdr_end, "Content-Type", resp->content_type, sizeof(resp->content_type));
    header_value(raw, hdr_end, "X-Next-Cursor", resp->next_cursor, sizeof(resp->next_cursor));
    char te[64] = "", cl[32] = "";
    bool chunked = header_value(raw, hdr_end, "Transfer-Encoding", te, sizeof(te)) &&
                   strcasecmp(te, "chunked") == 0;
    char *b = hdr_end + sep;
    size_t blen = raw_len - (size_t)(b - raw);
    if (chunked) {
        long d = dechunk(b, blen);
        if (d < 0) {
            err = SKP_EPROTO;
            goto out;
        }
        blen = (size_t)d;
    } else if (header_value(raw, hdr_end, "Content-Length", cl, sizeof(cl))) {
        unsigned long long want = strtoull(cl, NULL, 10);
        if (want > blen) {
            err = SKP_EPROTO; /* the server closed before sending the whole body */
            goto out;
        }
        blen = (size_t)want;
    }
    resp->body = skpx_malloc(blen + 1);
    if (!resp->body) {
        err = SKP_ENOMEM;
        goto out;
    }
    memcpy(resp->body, b, blen);
    resp->body[blen] = 0;
    resp->body_len = blen;
out:
    if (fd >= 0)
        close(fd);
    skpx_free(raw);
    if (err)
        http_response_cleanup(resp);
    return err;
}

void http_response_cleanup(struct http_response *resp)
{
    if (!resp)
        return;
    skpx_free(resp->body);
    memset(resp, 0, sizeof(*resp)); /* as http_request starts it: no status, header or body */
}
