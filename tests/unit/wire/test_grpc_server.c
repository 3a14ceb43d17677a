/* In-process tests for src/wire/grpc_server.c: the server runs on a libevent loop in this thread
 * and a minimal nghttp2 client session talks to it over a real loopback TCP connection; the
 * test pumps both sides until a condition holds (with a deadline). Covers what the grpcio interop
 * suite cannot observe directly: registration errors, raw-mode methods, on_close bookkeeping when
 * the server is freed with calls open, early answers, and allocation failures at every step.
 * No SIGPIPE handler is installed: the server writes with MSG_NOSIGNAL and must never raise it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <nghttp2/nghttp2.h>

#include "common/alloc.h"
#include "harness/skp_alloc_faults.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/pct.h"
#include "profile/Profile.pb-c.h"
#include "wire/grpc_server.h"

#define PUMP_DEADLINE_MS 5000
#define MAX_STREAMS 20

/* ---------------------------------------------------------------- tiny HTTP/2 client */

struct tstream {
    int32_t id;
    int http_status;
    int grpc_status; /* -1 until seen */
    char grpc_message[256];
    uint8_t data[4096];
    size_t data_len;
    bool closed;
    uint32_t close_code;
    const uint8_t *body; /* request body to send (borrowed) */
    size_t body_len;
    size_t body_off;
    bool end_stream; /* half-close after the body */
};

struct tclient {
    int fd;
    nghttp2_session *s;
    struct tstream st[MAX_STREAMS];
    int n_st;
    bool broken; /* connection closed by the server */
};

static struct tstream *find_stream(struct tclient *c, int32_t id)
{
    for (int i = 0; i < c->n_st; i++) {
        if (c->st[i].id == id)
            return &c->st[i];
    }
    return NULL;
}

static int cl_on_header(nghttp2_session *s, const nghttp2_frame *frame, const uint8_t *name,
                        size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                        void *ud)
{
    (void)s;
    (void)flags;
    struct tstream *t = find_stream(ud, frame->hd.stream_id);
    if (!t)
        return 0;
    char v[256];
    snprintf(v, sizeof(v), "%.*s", (int)valuelen, (const char *)value);
    if (namelen == 7 && memcmp(name, ":status", 7) == 0)
        t->http_status = (int)strtol(v, NULL, 10);
    else if (namelen == 11 && memcmp(name, "grpc-status", 11) == 0)
        t->grpc_status = (int)strtol(v, NULL, 10);
    else if (namelen == 12 && memcmp(name, "grpc-message", 12) == 0)
        skpx_pct_decode(v, strlen(v), t->grpc_message, sizeof(t->grpc_message), NULL);
    return 0;
}

static int cl_on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data,
                      size_t len, void *ud)
{
    (void)s;
    (void)flags;
    struct tstream *t = find_stream(ud, id);
    if (t && t->data_len + len <= sizeof(t->data)) {
        memcpy(t->data + t->data_len, data, len);
        t->data_len += len;
    }
    return 0;
}

static int cl_on_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
    (void)s;
    struct tstream *t = find_stream(ud, id);
    if (t) {
        t->closed = true;
        t->close_code = code;
    }
    return 0;
}

static ssize_t cl_body_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len,
                            uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    (void)s;
    (void)id;
    (void)ud;
    struct tstream *t = src->ptr;
    size_t n = t->body_len - t->body_off;
    if (n > len)
        n = len;
    memcpy(buf, t->body + t->body_off, n);
    t->body_off += n;
    if (t->body_off == t->body_len) {
        if (t->end_stream)
            *flags |= NGHTTP2_DATA_FLAG_EOF;
        else if (n == 0)
            return NGHTTP2_ERR_DEFERRED; /* keep the stream open */
    }
    return (ssize_t)n;
}

static void tclient_open(struct tclient *c, uint16_t port)
{
    memset(c, 0, sizeof(*c));
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(c->fd >= 0);
    struct sockaddr_in sa = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(fcntl(c->fd, F_SETFL, O_NONBLOCK), 0);
    nghttp2_session_callbacks *cbs;
    assert_int_equal(nghttp2_session_callbacks_new(&cbs), 0);
    nghttp2_session_callbacks_set_on_header_callback(cbs, cl_on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, cl_on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, cl_on_close);
    assert_int_equal(nghttp2_session_client_new(&c->s, cbs, c), 0);
    nghttp2_session_callbacks_del(cbs);
    assert_int_equal(nghttp2_submit_settings(c->s, NGHTTP2_FLAG_NONE, NULL, 0), 0);
}

static void tclient_close(struct tclient *c)
{
    nghttp2_session_del(c->s);
    close(c->fd);
}

/* Starts a request; `body` (borrowed) is sent as DATA, then END_STREAM if `end`. */
static struct tstream *tclient_request(struct tclient *c, const char *path, const uint8_t *body,
                                       size_t body_len, bool end)
{
    assert_true(c->n_st < MAX_STREAMS);
    struct tstream *t = &c->st[c->n_st++];
    memset(t, 0, sizeof(*t));
    t->grpc_status = -1;
    t->body = body;
    t->body_len = body_len;
    t->end_stream = end;
    nghttp2_nv nva[] = {
        {(uint8_t *)":method", (uint8_t *)"POST", 7, 4, 0},
        {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
        {(uint8_t *)":path", (uint8_t *)path, 5, strlen(path), 0},
        {(uint8_t *)":authority", (uint8_t *)"test", 10, 4, 0},
        {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, 0},
        {(uint8_t *)"authentication", (uint8_t *)"tok", 14, 3, 0},
    };
    nghttp2_data_provider prd = {.source.ptr = t, .read_callback = cl_body_read};
    t->id = nghttp2_submit_request(c->s, NULL, nva, SKP_ARRAY_LEN(nva),
                                   (body_len || !end) ? &prd : NULL, NULL);
    assert_true(t->id > 0);
    return t;
}

/* Moves bytes both ways and runs the server loop until pred(arg) or the deadline. */
static bool pump_ms(struct event_base *base, struct tclient *c, bool (*pred)(void *), void *arg,
                    int64_t ms)
{
    int64_t deadline = skpx_mono_ms() + ms;
    while (skpx_mono_ms() < deadline) {
        if (pred(arg))
            return true;
        if (!c->broken) {
            for (int i = 0; i < c->n_st; i++)
                nghttp2_session_resume_data(c->s, c->st[i].id); /* harmless if not deferred */
            const uint8_t *out;
            ssize_t n;
            while ((n = nghttp2_session_mem_send(c->s, &out)) > 0) {
                ssize_t off = 0;
                while (off < n) {
                    ssize_t w = send(c->fd, out + off, (size_t)(n - off), MSG_NOSIGNAL);
                    if (w < 0 && errno == EAGAIN) {
                        event_base_loop(base, EVLOOP_NONBLOCK);
                        continue;
                    }
                    if (w < 0) {
                        c->broken = true;
                        break;
                    }
                    off += w;
                }
            }
        }
        event_base_loop(base, EVLOOP_NONBLOCK);
        uint8_t buf[16384];
        ssize_t r = recv(c->fd, buf, sizeof(buf), 0);
        if (r == 0 || (r < 0 && errno != EAGAIN)) {
            c->broken = true;
        } else if (r > 0 && !c->broken) {
            if (nghttp2_session_mem_recv(c->s, buf, (size_t)r) < 0)
                c->broken = true;
        } else {
            struct pollfd p = {.fd = c->fd, .events = POLLIN};
            (void)poll(&p, 1, 1);
        }
    }
    return pred(arg);
}

static bool pump(struct event_base *base, struct tclient *c, bool (*pred)(void *), void *arg)
{
    return pump_ms(base, c, pred, arg, PUMP_DEADLINE_MS);
}

static bool stream_closed(void *arg)
{
    return ((struct tstream *)arg)->closed;
}

static bool client_broken(void *arg)
{
    return ((struct tclient *)arg)->broken;
}

/* The call's stream ended or its whole connection went away (arg: a struct call_run). */
struct call_run;
static bool call_over(void *arg);

/* ---------------------------------------------------------------- test handlers */

struct record {
    int n_start;
    int n_msg;
    int n_end;
    int n_close;
    int last_close_status;
    size_t raw_total;
    bool msg_was_null;
    bool finish_in_message; /* answer OK from on_message (before half-close) */
    int refuse;             /* on_start returns this */
    struct skpx_grpc_call *open_call;
};

static int h_start(struct skpx_grpc_call *call, void *ud)
{
    struct record *r = ud;
    r->n_start++;
    r->open_call = call;
    return r->refuse;
}

static int h_message(struct skpx_grpc_call *call, void *ud, const ProtobufCMessage *msg,
                     const uint8_t *raw, size_t raw_len)
{
    (void)raw;
    struct record *r = ud;
    r->n_msg++;
    r->raw_total += raw_len;
    r->msg_was_null = msg == NULL;
    if (r->finish_in_message)
        skpx_grpc_call_finish(call, NULL, SKPX_GRPC_OK, NULL);
    return SKPX_GRPC_OK;
}

static void h_end(struct skpx_grpc_call *call, void *ud)
{
    struct record *r = ud;
    r->n_end++;
    Skywalking__V3__ProfileTaskCommandQuery q = SKYWALKING__V3__PROFILE_TASK_COMMAND_QUERY__INIT;
    q.service = "answer";
    skpx_grpc_call_finish(call, &q.base, SKPX_GRPC_OK, NULL);
}

static void h_close(struct skpx_grpc_call *call, void *ud, int status)
{
    (void)call;
    struct record *r = ud;
    r->n_close++;
    r->last_close_status = status;
    r->open_call = NULL;
}

struct fixture {
    struct event_base *base;
    struct skpx_grpc_server *srv;
    uint16_t port;
    struct record rec;
    int64_t live_before;
};

static void fixture_start_opts(struct fixture *f, const ProtobufCMessageDescriptor *desc,
                               const struct skpx_grpc_server_opts *opts)
{
    memset(f, 0, sizeof(*f));
    f->live_before = skpx_alloc_live_bytes();
    f->base = event_base_new();
    assert_non_null(f->base);
    assert_int_equal(skpx_grpc_server_new(f->base, opts, &f->srv), SKP_OK);
    struct skpx_grpc_method m = {
        .path = "/t.S/m",
        .client_streaming = true,
        .request_desc = desc,
        .on_start = h_start,
        .on_message = h_message,
        .on_end = h_end,
        .on_close = h_close,
        .ud = &f->rec,
    };
    assert_int_equal(skpx_grpc_server_add_method(f->srv, &m), SKP_OK);
    assert_int_equal(skpx_grpc_server_listen(f->srv, "127.0.0.1:0", &f->port), SKP_OK);
    assert_true(f->port > 0);
}

static void fixture_start(struct fixture *f, const ProtobufCMessageDescriptor *desc)
{
    fixture_start_opts(f, desc, NULL);
}

static void fixture_stop(struct fixture *f)
{
    skpx_grpc_server_free(f->srv);
    event_base_free(f->base);
    assert_int_equal(skpx_alloc_live_bytes(), f->live_before);
}

static size_t grpc_message(uint8_t *out, const ProtobufCMessage *m)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    skpx_grpc_prefix_write(out, (uint32_t)n);
    protobuf_c_message_pack(m, out + SKPX_GRPC_PREFIX_LEN);
    return n + SKPX_GRPC_PREFIX_LEN;
}

/* ---------------------------------------------------------------- tests */

static void registration_and_listen_errors(void **state)
{
    (void)state;
    struct event_base *base = event_base_new();
    struct skpx_grpc_server *srv = NULL;
    int64_t before = skpx_alloc_live_bytes();
    assert_int_equal(skpx_grpc_server_new(base, NULL, &srv), SKP_OK);
    struct skpx_grpc_method m = {.path = "/a/b", .on_end = h_end};
    assert_int_equal(skpx_grpc_server_add_method(srv, &m), SKP_OK);
    assert_int_equal(skpx_grpc_server_add_method(srv, &m), SKP_EEXIST);
    struct skpx_grpc_method no_end = {.path = "/a/c"};
    assert_int_equal(skpx_grpc_server_add_method(srv, &no_end), SKP_EINVAL);
    uint16_t port = 1;
    assert_int_equal(skpx_grpc_server_listen(srv, "no-port", &port), SKP_EINVAL);
    assert_int_equal(port, 0);
    assert_int_equal(skpx_grpc_server_listen(srv, "127.0.0.1:", NULL), SKP_EINVAL);
    /* A port already taken by our own first listener (SO_REUSEADDR does not allow two). */
    assert_int_equal(skpx_grpc_server_listen(srv, "127.0.0.1:0", &port), SKP_OK);
    char addr[32];
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
    assert_int_equal(skpx_grpc_server_listen(srv, addr, NULL), SKP_EIO);
    struct skpx_grpc_server_stats st;
    skpx_grpc_server_get_stats(srv, &st);
    assert_int_equal(st.connections_accepted, 0);
    skpx_grpc_server_free(srv);
    skpx_grpc_server_free(NULL);
    event_base_free(base);
    assert_int_equal(skpx_alloc_live_bytes(), before);
}

static void raw_mode_unary_answer(void **state)
{
    (void)state;
    struct fixture f;
    fixture_start(&f, NULL);
    struct tclient c;
    tclient_open(&c, f.port);
    uint8_t body[64];
    skpx_grpc_prefix_write(body, 3);
    memcpy(body + 5, "\x01\x02\x03", 3);
    skpx_grpc_prefix_write(body + 8, 0);
    struct tstream *t = tclient_request(&c, "/t.S/m", body, 13, true);
    assert_true(pump(f.base, &c, stream_closed, t));
    assert_int_equal(t->http_status, 200);
    assert_int_equal(t->grpc_status, 0);
    assert_int_equal(f.rec.n_msg, 2);
    assert_int_equal(f.rec.raw_total, 3);
    assert_true(f.rec.msg_was_null);
    assert_int_equal(f.rec.n_end, 1);
    assert_int_equal(f.rec.n_close, 1);
    assert_int_equal(f.rec.last_close_status, SKPX_GRPC_OK);
    /* The answer: one message (the packed query "answer"). */
    assert_true(t->data_len > 5);
    Skywalking__V3__ProfileTaskCommandQuery *q =
        skywalking__v3__profile_task_command_query__unpack(NULL, t->data_len - 5, t->data + 5);
    assert_non_null(q);
    assert_string_equal(q->service, "answer");
    skywalking__v3__profile_task_command_query__free_unpacked(q, NULL);
    tclient_close(&c);
    fixture_stop(&f);
}

static void refused_call_still_closes(void **state)
{
    (void)state;
    struct fixture f;
    fixture_start(&f, &skywalking__v3__profile_task_command_query__descriptor);
    f.rec.refuse = SKPX_GRPC_PERMISSION_DENIED;
    struct tclient c;
    tclient_open(&c, f.port);
    struct tstream *t = tclient_request(&c, "/t.S/m", NULL, 0, true);
    assert_true(pump(f.base, &c, stream_closed, t));
    assert_int_equal(t->grpc_status, SKPX_GRPC_PERMISSION_DENIED);
    assert_int_equal(t->data_len, 0);
    assert_int_equal(f.rec.n_start, 1);
    assert_int_equal(f.rec.n_end, 0);
    assert_int_equal(f.rec.n_close, 1);
    assert_int_equal(f.rec.last_close_status, SKPX_GRPC_PERMISSION_DENIED);
    struct skpx_grpc_server_stats st;
    skpx_grpc_server_get_stats(f.srv, &st);
    assert_int_equal(st.calls_started, 1);
    assert_int_equal(st.calls_failed, 1);
    tclient_close(&c);
    fixture_stop(&f);
}

static void early_answer_resets_sender(void **state)
{
    (void)state;
    struct fixture f;
    fixture_start(&f, &skywalking__v3__profile_task_command_query__descriptor);
    f.rec.finish_in_message = true;
    struct tclient c;
    tclient_open(&c, f.port);
    uint8_t body[128];
    Skywalking__V3__ProfileTaskCommandQuery q = SKYWALKING__V3__PROFILE_TASK_COMMAND_QUERY__INIT;
    q.service = "early";
    size_t n = grpc_message(body, &q.base);
    struct tstream *t = tclient_request(&c, "/t.S/m", body, n, false); /* never half-closes */
    assert_true(pump(f.base, &c, stream_closed, t));
    assert_int_equal(t->grpc_status, 0);
    assert_int_equal(t->data_len, 5); /* an empty response message */
    assert_int_equal(t->close_code, NGHTTP2_NO_ERROR);
    assert_int_equal(f.rec.n_end, 0);
    assert_int_equal(f.rec.n_close, 1);
    assert_int_equal(f.rec.last_close_status, SKPX_GRPC_OK);
    tclient_close(&c);
    fixture_stop(&f);
}

static bool call_open(void *arg)
{
    struct fixture *f = arg;
    return f->rec.n_msg == 1;
}

static void free_with_open_call_closes_it(void **state)
{
    (void)state;
    struct fixture f;
    fixture_start(&f, &skywalking__v3__profile_task_command_query__descriptor);
    struct tclient c;
    tclient_open(&c, f.port);
    uint8_t body[128];
    Skywalking__V3__ProfileTaskCommandQuery q = SKYWALKING__V3__PROFILE_TASK_COMMAND_QUERY__INIT;
    size_t n = grpc_message(body, &q.base);
    tclient_request(&c, "/t.S/m", body, n, false);
    assert_true(pump(f.base, &c, call_open, &f));
    assert_non_null(f.rec.open_call);
    assert_string_equal(skpx_grpc_call_path(f.rec.open_call), "/t.S/m");
    assert_string_equal(skpx_grpc_call_metadata(f.rec.open_call, "authentication"), "tok");
    assert_string_equal(skpx_grpc_call_metadata(f.rec.open_call, ":authority"), "test");
    assert_null(skpx_grpc_call_metadata(f.rec.open_call, "missing"));
    assert_memory_equal(skpx_grpc_call_peer(f.rec.open_call), "127.0.0.1:", 10);
    struct skpx_grpc_server_stats st;
    skpx_grpc_server_get_stats(f.srv, &st);
    assert_int_equal(st.connections_open, 1);
    assert_int_equal(st.messages_received, 1);
    assert_int_equal(f.rec.n_close, 0);
    /* Registering more methods while a call is open must not move the open call's method. */
    static char paths[32][16];
    for (int i = 0; i < 32; i++) {
        snprintf(paths[i], sizeof(paths[i]), "/t.S/m%d", i);
        struct skpx_grpc_method more = {.path = paths[i], .on_end = h_end};
        assert_int_equal(skpx_grpc_server_add_method(f.srv, &more), SKP_OK);
    }
    skpx_grpc_server_free(f.srv);
    f.srv = NULL;
    assert_int_equal(f.rec.n_close, 1);
    assert_int_equal(f.rec.last_close_status, SKPX_GRPC_CANCELLED);
    assert_true(pump(f.base, &c, client_broken, &c)); /* the socket was closed */
    tclient_close(&c);
    fixture_stop(&f);
}

static void shutdown_done(void *ud)
{
    (*(int *)ud)++;
}

static bool done_called(void *arg)
{
    return *(int *)arg > 0;
}

static void shutdown_waits_for_async_answer(void **state)
{
    (void)state;
    struct fixture f;
    fixture_start(&f, &skywalking__v3__profile_task_command_query__descriptor);
    struct tclient c;
    tclient_open(&c, f.port);
    uint8_t body[128];
    Skywalking__V3__ProfileTaskCommandQuery q = SKYWALKING__V3__PROFILE_TASK_COMMAND_QUERY__INIT;
    size_t n = grpc_message(body, &q.base);
    struct tstream *t = tclient_request(&c, "/t.S/m", body, n, false);
    assert_true(pump(f.base, &c, call_open, &f));
    int done = 0;
    skpx_grpc_server_shutdown(f.srv, 5000, shutdown_done, &done);
    /* The call is still open: shutdown is not done while it is in flight. */
    assert_false(pump_ms(f.base, &c, done_called, &done, 200));
    assert_int_equal(done, 0);
    assert_non_null(f.rec.open_call);
    /* An answer from outside any callback (as after a storage commit) completes it. */
    skpx_grpc_call_finish(f.rec.open_call, NULL, SKPX_GRPC_ABORTED, "later: 50%");
    assert_true(pump(f.base, &c, done_called, &done));
    assert_int_equal(done, 1);
    assert_int_equal(t->grpc_status, SKPX_GRPC_ABORTED);
    assert_string_equal(t->grpc_message, "later: 50%");
    assert_int_equal(f.rec.n_close, 1);
    struct skpx_grpc_server_stats st;
    skpx_grpc_server_get_stats(f.srv, &st);
    assert_int_equal(st.connections_open, 0);
    tclient_close(&c);
    fixture_stop(&f);
}

struct partial_ctx {
    struct tclient *c;
    int n_total;
};

static bool one_exhausted_rest_delivered(void *arg)
{
    struct partial_ctx *p = arg;
    int n_exhausted = 0;
    for (int i = 0; i < p->c->n_st; i++) {
        struct tstream *t = &p->c->st[i];
        if (t->closed && t->grpc_status == SKPX_GRPC_RESOURCE_EXHAUSTED)
            n_exhausted++;
        else if (t->body_off < t->body_len)
            return false; /* still sending */
    }
    return n_exhausted >= 1;
}

/* Many streams each holding most of a 4 MiB message: past the per-connection bound on partially
 * received data, the call that crosses it fails with RESOURCE_EXHAUSTED instead of the server
 * holding streams x max_msg bytes. */
static void partial_messages_bounded_per_connection(void **state)
{
    (void)state;
    enum { MSG = 4 * 1024 * 1024, BODY = MSG - 16, STREAMS = 17 };
    struct fixture f;
    fixture_start(&f, NULL);
    uint8_t *body = skpx_malloc(BODY + 5);
    assert_non_null(body);
    skpx_grpc_prefix_write(body, MSG);
    memset(body + 5, 'x', BODY);
    struct tclient c;
    tclient_open(&c, f.port);
    for (int i = 0; i < STREAMS; i++)
        tclient_request(&c, "/t.S/m", body, BODY + 5, false);
    struct partial_ctx p = {&c, STREAMS};
    assert_true(pump_ms(f.base, &c, one_exhausted_rest_delivered, &p, 60000));
    int n_exhausted = 0;
    for (int i = 0; i < c.n_st; i++)
        n_exhausted += c.st[i].grpc_status == SKPX_GRPC_RESOURCE_EXHAUSTED;
    assert_int_equal(n_exhausted, 1);
    assert_int_equal(f.rec.n_msg, 0);
    tclient_close(&c);
    skpx_grpc_server_free(f.srv);
    f.srv = NULL;
    assert_int_equal(f.rec.n_start, STREAMS);
    assert_int_equal(f.rec.n_close, STREAMS);
    skpx_free(body);
    fixture_stop(&f);
}

/* Regression: the handshake timeout used to sit on the persistent read event, and libevent
 * re-arms such a timeout at every wakeup, so connections idle for that long were dropped. */
static void idle_connection_outlives_handshake_timeout(void **state)
{
    (void)state;
    struct skpx_grpc_server_opts opts = {.handshake_timeout_ms = 200};
    struct fixture f;
    fixture_start_opts(&f, NULL, &opts);
    struct tclient c;
    tclient_open(&c, f.port);
    uint8_t body[5];
    skpx_grpc_prefix_write(body, 0);
    struct tstream *t = tclient_request(&c, "/t.S/m", body, 5, true);
    assert_true(pump(f.base, &c, stream_closed, t));
    assert_int_equal(t->grpc_status, 0);
    /* Idle (server loop running) for several handshake timeouts: the connection stays. */
    assert_false(pump_ms(f.base, &c, client_broken, &c, 1000));
    t = tclient_request(&c, "/t.S/m", body, 5, true);
    assert_true(pump(f.base, &c, stream_closed, t));
    assert_int_equal(t->grpc_status, 0);
    struct skpx_grpc_server_stats st;
    skpx_grpc_server_get_stats(f.srv, &st);
    assert_int_equal(st.connections_accepted, 1);
    assert_int_equal(st.protocol_errors, 0);
    tclient_close(&c);
    fixture_stop(&f);
}

/* A connection that never sends the preface is closed after the handshake timeout. */
static void silent_connection_closed_after_handshake_timeout(void **state)
{
    (void)state;
    struct skpx_grpc_server_opts opts = {.handshake_timeout_ms = 200};
    struct fixture f;
    fixture_start_opts(&f, NULL, &opts);
    struct tclient c;
    tclient_open(&c, f.port); /* its SETTINGS are never sent: pump is not used */
    int64_t deadline = skpx_mono_ms() + PUMP_DEADLINE_MS;
    bool closed = false;
    while (!closed && skpx_mono_ms() < deadline) {
        event_base_loop(f.base, EVLOOP_NONBLOCK);
        uint8_t buf[4096];
        ssize_t r = recv(c.fd, buf, sizeof(buf), 0);
        if (r == 0 || (r < 0 && errno != EAGAIN)) {
            closed = true;
        } else {
            struct pollfd p = {.fd = c.fd, .events = POLLIN};
            (void)poll(&p, 1, 5);
        }
    }
    assert_true(closed);
    struct skpx_grpc_server_stats st;
    skpx_grpc_server_get_stats(f.srv, &st);
    assert_int_equal(st.protocol_errors, 1);
    assert_int_equal(st.connections_open, 0);
    tclient_close(&c);
    fixture_stop(&f);
}

/* Every allocation of the server in turn fails during a call: the call fails or succeeds, the
 * server never crashes, on_close stays balanced and nothing leaks. One run: a fresh server and
 * client, one call of two messages. */
struct call_run {
    struct fixture f;
    struct tclient c;
    struct tstream *t;
    bool closed;
    uint8_t body[256];
    size_t n;
};

static void call_setup(void *ctx, long k)
{
    (void)k;
    struct call_run *r = ctx;
    fixture_start(&r->f, &skywalking__v3__profile_task_command_query__descriptor);
    tclient_open(&r->c, r->f.port);
    Skywalking__V3__ProfileTaskCommandQuery q = SKYWALKING__V3__PROFILE_TASK_COMMAND_QUERY__INIT;
    q.service = "svc";
    q.serviceinstance = "inst";
    r->n = grpc_message(r->body, &q.base);
    r->n += grpc_message(r->body + r->n, &q.base);
}

static skp_err call_body(void *ctx, long k)
{
    (void)k;
    struct call_run *r = ctx;
    r->t = tclient_request(&r->c, "/t.S/m", r->body, r->n, true);
    /* Since nghttp2 allocates through skpx_malloc (its memory is in the budget), a failure
     * inside nghttp2 ends the whole connection: waiting on the stream alone took the full
     * deadline for each such k. */
    pump(r->f.base, &r->c, call_over, r);
    r->closed = r->t->closed;
    return r->closed && r->t->grpc_status == 0 ? SKP_OK : SKP_EUNAVAILABLE;
}

static bool call_over(void *arg)
{
    struct call_run *r = arg;
    return r->t->closed || r->c.broken;
}

static void call_check(void *ctx, long k, skp_err err)
{
    (void)k;
    struct call_run *r = ctx;
    /* Either the stream ended with some status/reset, or the whole connection went away. */
    assert_true(r->closed || r->c.broken);
    if (err == SKP_OK)
        assert_int_equal(r->f.rec.n_msg, 2);
    assert_int_equal(r->f.rec.n_start, r->f.rec.n_close + (r->f.rec.open_call ? 1 : 0));
    tclient_close(&r->c);
    skpx_grpc_server_free(r->f.srv);
    r->f.srv = NULL;
    assert_int_equal(r->f.rec.n_start, r->f.rec.n_close);
    event_base_free(r->f.base);
}

static void allocation_failures_during_calls(void **state)
{
    (void)state;
    struct call_run run;
    memset(&run, 0, sizeof(run));
    struct skp_alloc_fault_loop loop = {.body = call_body,
                                        .setup = call_setup,
                                        .check = call_check,
                                        .ctx = &run,
                                        .max_runs = 2000,
                                        .other_errors = true};
    struct skp_alloc_fault_runs runs = skp_test_alloc_fault_loop(&loop);
    /* Early k fail the call, late k leave it untouched: both paths were taken. */
    assert_true(runs.n_other > 0);
    assert_true(runs.n_ok > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(registration_and_listen_errors),
        cmocka_unit_test(raw_mode_unary_answer),
        cmocka_unit_test(refused_call_still_closes),
        cmocka_unit_test(early_answer_resets_sender),
        cmocka_unit_test(free_with_open_call_closes_it),
        cmocka_unit_test(shutdown_waits_for_async_answer),
        cmocka_unit_test(partial_messages_bounded_per_connection),
        cmocka_unit_test(idle_connection_outlives_handshake_timeout),
        cmocka_unit_test(silent_connection_closed_after_handshake_timeout),
        cmocka_unit_test(allocation_failures_during_calls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
