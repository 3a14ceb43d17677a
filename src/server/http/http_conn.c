/* http_conn.c - the connection guard over evhttp (see http_conn.h).
 *
 * Design: evhttp 2.1 offers no per-connection hook besides evhttp_set_bevcb, which creates each
 * accepted connection's bufferevent before evhttp owns it. The guard creates that bufferevent,
 * puts an evbuffer callback on its input (it runs as bytes arrive, before evhttp's read callback
 * parses them) and, from an event activated in the same loop iteration (so before any read on the
 * new socket), finds the evhttp connection (the bufferevent's callback argument) to be told when
 * it closes (evhttp_connection_set_closecb). The close callback removes the input callback
 * before evhttp drains the buffer, and frees the guard's state. A refusal writes its answer with
 * send() and shuts the socket down both ways; evhttp then reads EOF and frees the connection the
 * way it frees any connection whose client went away.
 *
 * Pipelining: the guard frames requests as their bytes arrive, while evhttp answers them one at a
 * time (an analysis may take a while on the worker). A refusal of request K while an earlier
 * request is still unanswered would overtake that answer, so it waits: the input is cut back to
 * where K starts (evhttp never sees K), and the refusal is sent when the last earlier request's
 * answer has been written (evhttp's on-complete callback, set on every request by http_api.c
 * through http_conns_request_begin). The guard counts the bytes added to and removed from the
 * input to know where K starts in the buffer. */
#include "server/http/http_conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>

#include "common/alloc.h"
#include "common/log.h"
#include "wire/peer_count.h"

#define HTTP_CONNS_DEFAULT_MAX 1024u
#define HTTP_CONNS_DEFAULT_PER_PEER 256u
#define HTTP_CONNS_DEFAULT_TIMEOUT_MS 30000
/* Bodies are at most 2 MiB each (http_api.c): 64 MiB lets 32 large uploads arrive at once. */
#define HTTP_CONNS_DEFAULT_BODY_BUDGET (64u * 1024 * 1024)
/* accept() failed for lack of fds: retry after this long if no connection closed before. */
#define HTTP_CONNS_ACCEPT_RETRY_MS 250
/* Room for a refusal's status line, headers and JSON body. */
#define HTTP_CONNS_REFUSAL_MAX 512

struct hconn {
    struct http_conns *hc;
    struct hconn *prev, *next;
    struct bufferevent *bev;         /* evhttp owns it once bevcb returned */
    struct evbuffer_cb_entry *in_cb; /* on bev's input; removed at close */
    struct event *deadline_ev;       /* owned; the current request's read deadline */
    uint64_t peer_key;
    uint64_t body_reserved; /* counted in metrics->http_body_bytes */
    bool hooked;            /* the close callback is set */
    bool peer_counted;
    bool closing;   /* refused: the socket is shut down */
    bool deferred;  /* refused after earlier requests' answers (below) */
    bool rewriting; /* the guard itself moves input bytes: not counted */
    int deferred_status;
    const char *deferred_reason;   /* static text */
    uint64_t in_added, in_removed; /* input bytes ever added / removed (offsets below) */
    uint64_t req_start;            /* offset of the current request's first byte */
    uint64_t n_framed;             /* requests whose framing completed */
    uint64_t n_answered;           /* requests whose answer evhttp finished writing */
    struct http_framing fr;
};

struct http_conns {
    struct event_base *base;
    struct evhttp *http;
    struct http_conns_opts o;
    struct metrics *m;
    struct evconnlistener *listener; /* borrowed (evhttp's) */
    struct hconn *conns;
    struct event *hook_ev; /* hooks connections created since it last ran */
    struct event *resume_ev;
    bool paused_full; /* at max_connections */
    bool paused_fds;  /* accept() failed with EMFILE & co */
    struct skpx_peer_count peers;
};

static const char *status_text(int status)
{
    switch (status) {
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 408:
        return "Request Timeout";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 431:
        return "Request Header Fields Too Large";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Error";
    }
}

static void update_listener(struct http_conns *hc)
{
    if (!hc->listener)
        return;
    if (hc->paused_full || hc->paused_fds)
        evconnlistener_disable(hc->listener);
    else
        evconnlistener_enable(hc->listener);
}

static void body_release(struct hconn *h)
{
    h->hc->m->http_body_bytes -= h->body_reserved;
    h->body_reserved = 0;
}

/* Answers `status` and closes now: the rest of the request is not read. */
static void refuse_now(struct hconn *h, int status, const char *reason)
{
    if (h->closing)
        return;
    h->closing = true;
    h->deferred = false;
    event_del(h->deadline_ev);
    body_release(h);
    evutil_socket_t fd = bufferevent_getfd(h->bev);
    char buf[HTTP_CONNS_REFUSAL_MAX];
    char body[256];
    int bl = snprintf(body, sizeof(body), "{\"error\":\"%s\"}\n", reason);
    if (bl < 0 || (size_t)bl >= sizeof(body))
        bl = 0;
    int n = snprintf(buf, sizeof(buf),
                     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
                     "X-Content-Type-Options: nosniff\r\n%sContent-Length: %d\r\n"
                     "Connection: close\r\n\r\n%s",
                     status, status_text(status),
                     status == 401 ? "WWW-Authenticate: Bearer realm=\"skyprof\"\r\n" : "", bl,
                     bl ? body : "");
    if (fd >= 0) {
        if (n > 0 && (size_t)n < sizeof(buf))
            (void)send(fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
        shutdown(fd, SHUT_RDWR); /* evhttp reads EOF next and frees the connection */
    }
    /* Nothing more of this connection reaches evhttp's parser. */
    struct evbuffer *in = bufferevent_get_input(h->bev);
    evbuffer_drain(in, evbuffer_get_length(in));
    int cls = status / 100;
    h->hc->m->http_requests[cls >= 1 && cls <= 5 ? cls : 0]++;
}

/* Drops the input buffer's bytes after its first `keep` (those evhttp has not read yet). */
static void truncate_input(struct hconn *h, size_t keep)
{
    struct evbuffer *in = bufferevent_get_input(h->bev);
    size_t len = evbuffer_get_length(in);
    if (keep >= len)
        return;
    h->rewriting = true;
    if (keep == 0) {
        evbuffer_drain(in, len);
        h->rewriting = false;
        return;
    }
    struct evbuffer *tmp = evbuffer_new();
    bool ok = tmp && evbuffer_remove_buffer(in, tmp, keep) == (int)keep;
    if (ok) {
        evbuffer_drain(in, evbuffer_get_length(in));
        ok = evbuffer_add_buffer(in, tmp) == 0;
    }
    if (tmp)
        evbuffer_free(tmp);
    h->rewriting = false;
    if (!ok) /* out of memory: the earlier requests cannot be kept apart, give up on them */
        refuse_now(h, h->deferred_status, h->deferred_reason);
}

/* Refuses the current request with `status`: at once when every earlier request of the
 * connection was answered, else once they are (see the file's head). */
static void refuse(struct hconn *h, int status, const char *reason)
{
    if (h->closing || h->deferred)
        return;
    if (h->n_answered >= h->n_framed) {
        refuse_now(h, status, reason);
        return;
    }
    h->deferred = true;
    h->deferred_status = status;
    h->deferred_reason = reason;
    event_del(h->deadline_ev); /* the earlier requests are complete: evhttp's timeouts apply */
    body_release(h);
    /* The earlier requests' bytes evhttp has not read yet stay; request K's go. */
    uint64_t keep = h->req_start > h->in_removed ? h->req_start - h->in_removed : 0;
    truncate_input(h, (size_t)keep);
}

/* Refuses h's request with 503 and `reason` (a limit of the server was hit): counted in
 * *refused and logged as `why` (a format of the one size_t `limit`) through the caller's
 * limiter. */
static void refuse_busy(struct hconn *h, uint64_t *refused, struct skpx_log_limit *lim,
                        const char *why, size_t limit, const char *reason)
{
    (*refused)++;
    skpx_log_limited(lim, SKPX_LOG_WARN, why, limit);
    refuse(h, 503, reason);
}

static void arm_deadline(struct hconn *h)
{
    int ms = h->hc->o.request_timeout_ms;
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    event_add(h->deadline_ev, &tv);
}

static void deadline_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct hconn *h = arg;
    h->hc->m->http_timeouts++;
    static struct skpx_log_limit lim;
    skpx_log_limited(&lim, SKPX_LOG_INFO, "http: a request did not arrive within %d ms: 408",
                     h->hc->o.request_timeout_ms);
    refuse(h, 408, "request not received in time");
}

static bool method_mutates(enum http_framing_method m)
{
    return m == HTTP_FRAMING_POST || m == HTTP_FRAMING_PUT || m == HTTP_FRAMING_PATCH ||
           m == HTTP_FRAMING_DELETE;
}

/* Counts `len` more body bytes of h's request in the budget all connections share, or refuses
 * the request with 503 when they do not fit. */
static void reserve_body(struct hconn *h, uint64_t len)
{
    struct http_conns *hc = h->hc;
    if (len > hc->o.body_budget || hc->m->http_body_bytes > hc->o.body_budget - len) {
        static struct skpx_log_limit lim;
        refuse_busy(h, &hc->m->http_budget_refused, &lim,
                    "http: request bodies over the budget (%zu bytes), refusing with 503",
                    hc->o.body_budget, "server busy receiving other requests, retry");
        return;
    }
    h->body_reserved += len;
    hc->m->http_body_bytes += len;
}

/* Headers are in: the token, then the body budget. */
static void head_done(struct hconn *h)
{
    struct http_conns *hc = h->hc;
    struct http_framing *f = &h->fr;
    body_release(h); /* the previous request's body was handed to evhttp */
    if (hc->o.token_ok && method_mutates(f->method) &&
        !hc->o.token_ok(hc->o.token_ud, f->method,
                        f->has_authz && !f->authz_too_long ? f->authz : NULL)) {
        hc->m->http_early_unauthorized++;
        refuse(h, 401, "missing or wrong API token (Authorization: Bearer ...)");
        return;
    }
    if (f->chunked)
        return; /* the body's size is known chunk by chunk (reserve_chunk) */
    if (f->body_len == 0) {
        event_del(h->deadline_ev);
        return;
    }
    reserve_body(h, f->body_len);
}

/* A chunk of a chunked body was announced: the body budget as for a Content-Length body, one
 * chunk at a time. */
static void reserve_chunk(struct hconn *h)
{
    if (h->fr.chunk_len != 0)
        reserve_body(h, h->fr.chunk_len);
}

/* Frames [p, p+n), which starts at input offset `off`. */
static void scan(struct hconn *h, uint8_t *p, size_t n, uint64_t off)
{
    while (n > 0 && !h->closing && !h->deferred) {
        enum http_framing_event ev;
        size_t used = http_framing_feed(&h->fr, p, n, &ev);
        p += used;
        n -= used;
        off += used;
        switch (ev) {
        case HTTP_FRAMING_MORE:
            break;
        case HTTP_FRAMING_REQUEST_START:
            h->req_start = off - 1;
            if (!event_pending(h->deadline_ev, EV_TIMEOUT, NULL))
                arm_deadline(h);
            break;
        case HTTP_FRAMING_HEAD_DONE:
            head_done(h);
            if (!h->closing && !h->deferred && h->fr.body_len == 0 && !h->fr.chunked)
                h->n_framed++;
            break;
        case HTTP_FRAMING_CHUNK:
            reserve_chunk(h);
            break;
        case HTTP_FRAMING_REQUEST_DONE:
            event_del(h->deadline_ev);
            h->n_framed++;
            break;
        case HTTP_FRAMING_ERROR:
            h->hc->m->http_framing_errors++;
            refuse(h, h->fr.status, h->fr.reason);
            return;
        }
        if (used == 0 && ev != HTTP_FRAMING_ERROR)
            return; /* cannot happen: every call consumes a byte or reports */
    }
}

/* Bytes were added to (or taken from) the connection's input buffer. Runs before evhttp's read
 * callback sees them. */
static void input_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    struct hconn *h = arg;
    if (h->rewriting)
        return;
    h->in_removed += info->n_deleted;
    if (info->n_added == 0)
        return;
    h->in_added += info->n_added;
    if (h->closing) {
        evbuffer_drain(buf, evbuffer_get_length(buf));
        return;
    }
    size_t len = evbuffer_get_length(buf);
    if (h->deferred) {
        /* Nothing after the refused request reaches evhttp. */
        truncate_input(h, len - info->n_added);
        return;
    }
    size_t start = len - info->n_added;
    struct evbuffer_ptr pos;
    if (evbuffer_ptr_set(buf, &pos, start, EVBUFFER_PTR_SET) != 0)
        return;
    struct evbuffer_iovec vec[8];
    size_t left = info->n_added;
    uint64_t off = h->in_added - info->n_added;
    while (left > 0 && !h->closing && !h->deferred) {
        int nv = evbuffer_peek(buf, (ev_ssize_t)left, &pos, vec, 8);
        if (nv <= 0)
            break;
        if (nv > 8)
            nv = 8;
        size_t done = 0;
        for (int i = 0; i < nv && left > 0 && !h->closing && !h->deferred; i++) {
            size_t take = vec[i].iov_len < left ? vec[i].iov_len : left;
            scan(h, vec[i].iov_base, take, off);
            left -= take;
            done += take;
            off += take;
        }
        if (h->closing || h->deferred || left == 0)
            break;
        if (evbuffer_ptr_set(buf, &pos, done, EVBUFFER_PTR_ADD) != 0)
            break;
    }
}

/* Takes h out of hc's list of connections. */
static void conns_unlink(struct http_conns *hc, struct hconn *h)
{
    if (h->prev)
        h->prev->next = h->next;
    else
        hc->conns = h->next;
    if (h->next)
        h->next->prev = h->prev;
}

/* Puts h (in no list) at the front of hc's list of connections. */
static void conns_push_front(struct http_conns *hc, struct hconn *h)
{
    h->prev = NULL;
    h->next = hc->conns;
    if (hc->conns)
        hc->conns->prev = h;
    hc->conns = h;
}

static void conn_unlink_free(struct hconn *h)
{
    struct http_conns *hc = h->hc;
    conns_unlink(hc, h);
    body_release(h);
    if (h->peer_counted)
        skpx_peer_count_give(&hc->peers, h->peer_key);
    if (h->deadline_ev)
        event_free(h->deadline_ev);
    hc->m->http_conns_open--;
    skpx_free(h);
    if (hc->paused_full && hc->m->http_conns_open < hc->o.max_connections)
        hc->paused_full = false;
    hc->paused_fds = false; /* an fd is free again */
    event_del(hc->resume_ev);
    update_listener(hc);
}

static void close_cb(struct evhttp_connection *evcon, void *arg)
{
    (void)evcon;
    struct hconn *h = arg;
    /* evhttp drains the input after this: our callback must be gone by then. */
    evbuffer_remove_cb_entry(bufferevent_get_input(h->bev), h->in_cb);
    conn_unlink_free(h);
}

/* Runs in the loop iteration that accepted the connections, before any read on them. */
static void hook_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct http_conns *hc = arg;
    struct hconn *next = NULL;
    for (struct hconn *h = hc->conns; h; h = next) {
        next = h->next;
        if (h->hooked)
            continue;
        void *cbarg = NULL;
        bufferevent_getcb(h->bev, NULL, NULL, NULL, &cbarg);
        if (!cbarg)
            continue; /* not evhttp's (yet): cannot happen with libevent 2.1 */
        h->hooked = true;
        evhttp_connection_set_closecb(cbarg, close_cb, h);
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        evutil_socket_t s = bufferevent_getfd(h->bev);
        if (s >= 0 && getpeername(s, (struct sockaddr *)&ss, &sl) == 0) {
            h->peer_key = skpx_peer_key((struct sockaddr *)&ss);
            if (skpx_peer_count_take(&hc->peers, h->peer_key, hc->o.max_conns_per_peer, NULL)) {
                h->peer_counted = true;
            } else {
                static struct skpx_log_limit lim;
                refuse_busy(h, &hc->m->http_conns_refused, &lim,
                            "http: a peer has %zu connections (the per-peer cap), refusing",
                            hc->o.max_conns_per_peer, "too many connections from your address");
                continue;
            }
        }
        if (!h->closing)
            arm_deadline(h); /* the first request must arrive in time too */
    }
}

static struct bufferevent *bev_cb(struct event_base *base, void *arg)
{
    struct http_conns *hc = arg;
    struct hconn *h = skpx_calloc(1, sizeof(*h));
    if (!h)
        return NULL; /* evhttp makes its own bufferevent: this one connection goes unguarded */
    h->hc = hc;
    h->bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    h->deadline_ev = evtimer_new(base, deadline_cb, h);
    if (h->bev)
        h->in_cb = evbuffer_add_cb(bufferevent_get_input(h->bev), input_cb, h);
    if (!h->bev || !h->deadline_ev || !h->in_cb) {
        if (h->bev)
            bufferevent_free(h->bev);
        if (h->deadline_ev)
            event_free(h->deadline_ev);
        skpx_free(h);
        return NULL;
    }
    http_framing_init(&h->fr, hc->o.max_body);
    conns_push_front(hc, h);
    hc->m->http_conns_open++;
    if (hc->m->http_conns_open >= hc->o.max_connections && !hc->paused_full) {
        hc->paused_full = true;
        hc->m->http_conns_refused++; /* the next one waits in the backlog */
        static struct skpx_log_limit lim;
        skpx_log_limited(&lim, SKPX_LOG_WARN,
                         "http: %zu connections open (--http-max-connections): accepting paused",
                         hc->o.max_connections);
        update_listener(hc);
    }
    event_active(hc->hook_ev, EV_TIMEOUT, 0);
    return h->bev;
}

/* evhttp finished writing a request's answer (before it reads the next request). */
static void answered_cb(struct evhttp_request *req, void *arg)
{
    (void)req;
    struct hconn *h = arg;
    h->n_answered++;
    if (h->deferred && h->n_answered >= h->n_framed)
        refuse_now(h, h->deferred_status, h->deferred_reason);
}

void http_conns_request_begin(struct http_conns *hc, struct evhttp_request *req)
{
    struct evhttp_connection *evcon = hc ? evhttp_request_get_connection(req) : NULL;
    struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    if (!bev)
        return;
    struct hconn *h = hc->conns;
    while (h && h->bev != bev)
        h = h->next;
    if (!h)
        return; /* an unguarded connection (its guard state could not be allocated) */
    if (h != hc->conns) {
        /* Move to the front: a keep-alive client's next request finds it at once. */
        conns_unlink(hc, h);
        conns_push_front(hc, h);
    }
    evhttp_request_set_on_complete_cb(req, answered_cb, h);
}

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct http_conns *hc = arg;
    hc->paused_fds = false;
    update_listener(hc);
}

/* Guards by evhttp: a listener's error callback gets the listener's user data, which is evhttp's
 * (the struct evhttp). A process has one or two HTTP servers (tests: a few in turn). */
#define HTTP_CONNS_MAX_SERVERS 16
static struct {
    struct evhttp *http;
    struct http_conns *hc;
} g_servers[HTTP_CONNS_MAX_SERVERS];

static struct http_conns *guard_of(const void *http)
{
    for (size_t i = 0; i < HTTP_CONNS_MAX_SERVERS; i++)
        if (g_servers[i].http && g_servers[i].http == http)
            return g_servers[i].hc;
    return NULL;
}

static void listener_error_cb(struct evconnlistener *l, void *arg)
{
    struct http_conns *hc = guard_of(arg);
    int e = EVUTIL_SOCKET_ERROR();
    if (!hc) {
        /* Not registered (table full): at least never spin. */
        evconnlistener_disable(l);
        return;
    }
    static struct skpx_log_limit lim;
    if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
        skpx_log_limited(&lim, SKPX_LOG_WARN,
                         "http: accept failed: %s; accepting paused until a connection closes",
                         evutil_socket_error_to_string(e));
        if (!hc->paused_fds) {
            hc->paused_fds = true;
            hc->m->http_accept_pauses++;
            update_listener(hc);
            struct timeval tv = {0, HTTP_CONNS_ACCEPT_RETRY_MS * 1000};
            event_add(hc->resume_ev, &tv);
        }
        return;
    }
    skpx_log_limited(&lim, SKPX_LOG_WARN, "http: accept failed: %s",
                     evutil_socket_error_to_string(e));
}

skp_err http_conns_new(struct event_base *base, struct evhttp *http,
                       const struct http_conns_opts *opts, struct http_conns **out)
{
    *out = NULL;
    struct http_conns *hc = skpx_calloc(1, sizeof(*hc));
    if (!hc)
        return SKP_ENOMEM;
    hc->base = base;
    hc->http = http;
    hc->o = *opts;
    hc->m = opts->metrics;
    if (!hc->o.max_connections)
        hc->o.max_connections = HTTP_CONNS_DEFAULT_MAX;
    if (!hc->o.max_conns_per_peer)
        hc->o.max_conns_per_peer = HTTP_CONNS_DEFAULT_PER_PEER;
    if (hc->o.request_timeout_ms <= 0)
        hc->o.request_timeout_ms = HTTP_CONNS_DEFAULT_TIMEOUT_MS;
    if (!hc->o.body_budget)
        hc->o.body_budget = HTTP_CONNS_DEFAULT_BODY_BUDGET;
    hc->hook_ev = event_new(base, -1, 0, hook_cb, hc);
    hc->resume_ev = evtimer_new(base, resume_cb, hc);
    if (!hc->hook_ev || !hc->resume_ev) {
        http_conns_free(hc);
        return SKP_ENOMEM;
    }
    for (size_t i = 0; i < HTTP_CONNS_MAX_SERVERS; i++) {
        if (!g_servers[i].http) {
            g_servers[i].http = http;
            g_servers[i].hc = hc;
            break;
        }
    }
    evhttp_set_bevcb(http, bev_cb, hc);
    *out = hc;
    return SKP_OK;
}

void http_conns_add_listener(struct http_conns *hc, struct evhttp_bound_socket *sock)
{
    hc->listener = evhttp_bound_socket_get_listener(sock);
    evconnlistener_set_error_cb(hc->listener, listener_error_cb);
}

void http_conns_remove_listener(struct http_conns *hc)
{
    if (hc)
        hc->listener = NULL;
}

void http_conns_free(struct http_conns *hc)
{
    if (!hc)
        return;
    for (size_t i = 0; i < HTTP_CONNS_MAX_SERVERS; i++)
        if (g_servers[i].hc == hc) {
            g_servers[i].http = NULL;
            g_servers[i].hc = NULL;
        }
    while (hc->conns) {
        /* evhttp is gone, so these were never hooked or never closed: just forget them. */
        struct hconn *h = hc->conns;
        hc->conns = h->next;
        if (h->deadline_ev)
            event_free(h->deadline_ev);
        skpx_free(h);
    }
    if (hc->hook_ev)
        event_free(hc->hook_ev);
    if (hc->resume_ev)
        event_free(hc->resume_ev);
    skpx_peer_count_cleanup(&hc->peers);
    skpx_free(hc);
}
