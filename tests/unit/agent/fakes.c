/* fakes.c - see fakes.h. */
#include "fakes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent_int.h"
#include "common/alloc.h"

static int64_t fc_now(void *ud)
{
    return atomic_load(&((struct fake_clock *)ud)->now_ms);
}

static int64_t fc_mono(void *ud)
{
    return atomic_load(&((struct fake_clock *)ud)->mono_ns);
}

void fake_clock_init(struct fake_clock *c, int64_t now_ms)
{
    atomic_store(&c->now_ms, now_ms);
    atomic_store(&c->mono_ns, 1000000000LL);
    c->clock.now_ms = fc_now;
    c->clock.mono_ns = fc_mono;
    c->clock.ud = c;
}

void fake_clock_advance(struct fake_clock *c, int64_t ms)
{
    atomic_fetch_add(&c->now_ms, ms);
    atomic_fetch_add(&c->mono_ns, ms * 1000000LL);
}

void fake_transport_init(struct fake_transport *f)
{
    memset(f, 0, sizeof(*f));
    pthread_mutex_init(&f->mu, NULL);
}

void fake_transport_cleanup(struct fake_transport *f)
{
    for (int i = 0; i < f->n_calls; i++)
        free(f->calls[i].req);
    for (int i = 0; i < f->n_stream_msgs; i++)
        free(f->stream_msgs[i]);
    free(f->next_tasks);
    pthread_mutex_destroy(&f->mu);
}

static uint8_t *pack(const ProtobufCMessage *m, size_t *len)
{
    *len = protobuf_c_message_get_packed_size(m);
    uint8_t *b = malloc(*len + 1);
    protobuf_c_message_pack(m, b);
    return b;
}

static struct fake_call *record(struct fake_transport *f, const char *path)
{
    if (f->n_calls >= FAKE_CALLS_MAX)
        return NULL;
    struct fake_call *c = &f->calls[f->n_calls++];
    memset(c, 0, sizeof(*c));
    snprintf(c->path, sizeof(c->path), "%s", path);
    return c;
}

static ProtobufCMessage *empty_commands(void)
{
    uint8_t none = 0;
    return protobuf_c_message_unpack(&skywalking__v3__commands__descriptor, NULL, 0, &none);
}

static skp_err f_unary(void *ud, const char *path, const ProtobufCMessage *req,
                       const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
                       int timeout_ms)
{
    struct fake_transport *f = ud;
    (void)timeout_ms;
    (void)resp_desc;
    *resp = NULL;
    pthread_mutex_lock(&f->mu);
    if (f->down) {
        pthread_mutex_unlock(&f->mu);
        return SKP_EUNAVAILABLE;
    }
    if (f->connects == 0)
        f->connects = 1;
    struct fake_call *c = record(f, path);
    if (c)
        c->req = pack(req, &c->req_len);
    if (strcmp(path, SKP_PATH_GET_TASKS) == 0 && f->next_tasks) {
        *resp = protobuf_c_message_unpack(&skywalking__v3__commands__descriptor, NULL,
                                          f->next_tasks_len, f->next_tasks);
        free(f->next_tasks);
        f->next_tasks = NULL;
    } else {
        *resp = empty_commands();
    }
    pthread_mutex_unlock(&f->mu);
    return SKP_OK;
}

static skp_err f_stream(void *ud, const char *path, skp__transport_next_cb next, void *next_ud,
                        const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
                        int timeout_ms)
{
    struct fake_transport *f = ud;
    (void)timeout_ms;
    (void)resp_desc;
    *resp = NULL;
    pthread_mutex_lock(&f->mu);
    if (f->down) {
        pthread_mutex_unlock(&f->mu);
        return SKP_EUNAVAILABLE;
    }
    struct fake_call *c = record(f, path);
    const ProtobufCMessage *m;
    int n = 0;
    while (next(next_ud, &m) == 1) {
        n++;
        if (f->n_stream_msgs < FAKE_STREAM_MSGS_MAX) {
            int i = f->n_stream_msgs++;
            f->stream_msgs[i] = pack(m, &f->stream_lens[i]);
            snprintf(f->stream_paths[i], sizeof(f->stream_paths[i]), "%s", path);
        }
    }
    if (c)
        c->n_stream_msgs = n;
    if (f->fail_next_streams > 0) {
        f->fail_next_streams--;
        pthread_mutex_unlock(&f->mu);
        return SKP_EUNAVAILABLE;
    }
    *resp = empty_commands();
    pthread_mutex_unlock(&f->mu);
    return SKP_OK;
}

static uint64_t f_connects(void *ud)
{
    struct fake_transport *f = ud;
    pthread_mutex_lock(&f->mu);
    uint64_t c = f->connects;
    pthread_mutex_unlock(&f->mu);
    return c;
}

struct skp__transport fake_transport_vtable(struct fake_transport *f)
{
    struct skp__transport t = {f_unary, f_stream, f_connects, NULL, f, NULL, NULL};
    return t;
}

void fake_transport_answer_tasks(struct fake_transport *f, const Skywalking__V3__Commands *cmds)
{
    pthread_mutex_lock(&f->mu);
    free(f->next_tasks);
    f->next_tasks = pack(&cmds->base, &f->next_tasks_len);
    pthread_mutex_unlock(&f->mu);
}

int fake_transport_count(struct fake_transport *f, const char *path)
{
    int n = 0;
    pthread_mutex_lock(&f->mu);
    for (int i = 0; i < f->n_calls; i++)
        n += strcmp(f->calls[i].path, path) == 0;
    pthread_mutex_unlock(&f->mu);
    return n;
}

static void add_arg(Skywalking__V3__Command *c, const char *k, const char *v)
{
    if (!v)
        return;
    Skywalking__V3__KeyStringValuePair *kv = calloc(1, sizeof(*kv));
    skywalking__v3__key_string_value_pair__init(kv);
    kv->key = strdup(k);
    kv->value = strdup(v);
    c->args = realloc(c->args, (c->n_args + 1) * sizeof(*c->args));
    c->args[c->n_args++] = kv;
}

Skywalking__V3__Command *make_task_command(const char *serial, const char *task_id,
                                           const char *endpoint, const char *duration,
                                           const char *threshold, const char *period,
                                           const char *max_sampling, const char *start,
                                           const char *create)
{
    Skywalking__V3__Command *c = calloc(1, sizeof(*c));
    skywalking__v3__command__init(c);
    c->command = strdup("ProfileTaskQuery");
    add_arg(c, "SerialNumber", serial);
    add_arg(c, "TaskId", task_id);
    add_arg(c, "EndpointName", endpoint);
    add_arg(c, "Duration", duration);
    add_arg(c, "MinDurationThreshold", threshold);
    add_arg(c, "DumpPeriod", period);
    add_arg(c, "MaxSamplingCount", max_sampling);
    add_arg(c, "StartTime", start);
    add_arg(c, "CreateTime", create);
    return c;
}

void free_command(Skywalking__V3__Command *c)
{
    for (size_t i = 0; i < c->n_args; i++) {
        free(c->args[i]->key);
        free(c->args[i]->value);
        free(c->args[i]);
    }
    free(c->args);
    free(c->command);
    free(c);
}

static void *fs_attach(void *ud)
{
    struct fake_source *s = ud;
    atomic_fetch_add(&s->attaches, 1);
    return s; /* any non-NULL handle */
}

static void fs_release(void *ud, void *h)
{
    struct fake_source *s = ud;
    (void)h;
    atomic_fetch_add(&s->releases, 1);
}

static int fs_capture(void *ud, void *h, int tid, struct skyprof_capture *out)
{
    struct fake_source *s = ud;
    (void)h;
    (void)tid;
    atomic_fetch_add(&s->captures, 1);
    int us = atomic_load(&s->capture_sleep_us);
    if (us)
        usleep((useconds_t)us);
    if (s->end_during_capture) {
        skp__task_ctx_release(s->end_during_capture);
        s->end_during_capture = NULL;
    }
    if (atomic_load(&s->fail))
        return -1;
    if (atomic_load(&s->lose) > 0) {
        atomic_fetch_sub(&s->lose, 1);
        return SKYPROF_CAPTURE_LOST;
    }
    int depth = atomic_load(&s->depth);
    uint32_t n = 0;
    for (int i = 0; i < depth && n < out->cap; i++) {
        /* innermost first: frame i is at depth (depth - 1 - i) from the root */
        const char *name = s->names[depth - 1 - i];
        out->frames[n].kind = SKYPROF_FRAME_STR;
        out->frames[n].str = name;
        out->frames[n].len = (uint32_t)strlen(name);
        n++;
    }
    out->n = n;
    out->truncated = depth > (int)out->cap;
    return 0;
}

static void fs_prepare(void *ud, void *const *handles, size_t n)
{
    struct fake_source *s = ud;
    int mine = 0;
    for (size_t i = 0; i < n; i++)
        mine += handles[i] == s; /* the handles fs_attach gave */
    atomic_fetch_add(&s->prepares, 1);
    atomic_store(&s->prepared_n, mine == (int)n ? (int)n : -1);
    atomic_store(&s->captures_at_prepare, atomic_load(&s->captures));
}

void fake_source_init(struct fake_source *s, int depth)
{
    memset(s, 0, sizeof(*s));
    atomic_store(&s->depth, depth);
    for (int i = 0; i < 4096; i++)
        snprintf(s->names[i], sizeof(s->names[i]), "f%d", i);
}

struct skyprof_stack_source fake_source_vtable(struct fake_source *s)
{
    struct skyprof_stack_source v = {.name = "fake",
                                     .ud = s,
                                     .thread_attach = fs_attach,
                                     .capture = fs_capture,
                                     .thread_release = fs_release,
                                     .capture_prepare = fs_prepare};
    return v;
}
