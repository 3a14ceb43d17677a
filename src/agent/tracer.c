/* tracer.c - per-thread segments and spans, the public tracer API, and the tracer hub.
 * Hot path rules: with no task live, entry_begin + entry_end do two clock reads, a few atomic
 * loads, string copies into the thread's own segment, and one allocation + lock-free push for the
 * finished segment. No lock, no syscall (the thread id is read once per thread, and only when a
 * task is live). */
#include "agent/tracer.h"

#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/cont_http.h"
#include "agent/sw8.h"
#include "common/alloc.h"
#include "common/clock.h"

static struct skp__hub g_hub;
static __thread int t_tid; /* kernel tid of this thread, 0 = not read yet */

struct skp__hub *skp__hub(void)
{
    return &g_hub;
}

skp_err skp__hub_publish(struct skp__tracer_conf *conf)
{
    if (!g_hub.segments_ready && conf) {
        /* sized by the first agent's segment_buffer_size; later agents get at most this */
        size_t cap = conf->segment_limit;
        if (cap < 64)
            cap = 64;
        if (cap > SKP_SEGMENT_RING_MAX)
            cap = SKP_SEGMENT_RING_MAX;
        skp_err err = skp__ring_init(&g_hub.segments, cap);
        if (err)
            return err;
        g_hub.segments_ready = true;
    }
    struct skp__tracer_conf *old = atomic_exchange(&g_hub.conf, conf);
    if (old) {
        /* request threads may still read it: keep it (a few hundred bytes per start) */
        old->next_retired = g_hub.retired;
        g_hub.retired = old;
    }
    return SKP_OK;
}

void skp__finished_segment_free(struct skp__finished_segment *fs)
{
    skpx_free(fs);
}

void skp__hub_after_fork_child(void)
{
    /* Only this thread exists now. Slots referencing the parent's threads are reset (their
     * sequence kept so a stale release by this thread fails); handles are not released: they
     * belong to the parent's threads. */
    atomic_store(&g_hub.conf, NULL);
    atomic_store(&g_hub.ctx.live, 0);
    atomic_store(&g_hub.ctx.users, 0);
    for (int i = 0; i < SKYPROF_MAX_PARALLEL_CAP; i++) {
        uint64_t w = atomic_load(&g_hub.ctx.slots[i].word);
        atomic_store(&g_hub.ctx.slots[i].word, SKP_SLOT_WORD(SKP_SLOT_SEQ(w) + 1, SKP_SLOT_FREE));
    }
    atomic_store(&g_hub.ctx.n_profiling, 0);
    t_tid = 0; /* runs on the forking thread, the child's only thread: it has a new tid */
}

/* ---------------------------------------------------------------------------------------------
 * Per-thread state
 * ------------------------------------------------------------------------------------------- */
struct seg_work {
    bool open;
    const struct skp__tracer_conf *conf;
    struct skp__profiling_ref prof;
    int32_t active; /* innermost open span, -1 none */
    struct skp__finished_segment hdr;
    struct skp__span_rec spans[SKYPROF_MAX_SPANS];
    struct skp__tag_rec tags[SKP_SEGMENT_TAGS_MAX];
    char text[SKP_SEGMENT_TEXT_MAX];
};

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t seg_key;
static bool seg_key_ok;
static __thread struct seg_work *t_seg;
static __thread uint32_t t_idx;
static __thread uint32_t t_seq;

static void seg_destroy(void *p)
{
    struct seg_work *w = p;
    if (!w)
        return;
    /* A thread exiting inside a profiled request: stop sampling it before it is gone. */
    skp__task_ctx_release(&w->prof);
    if (t_seg == w)
        t_seg = NULL;
    skpx_free(w);
}

static void key_create(void)
{
    seg_key_ok = pthread_key_create(&seg_key, seg_destroy) == 0;
}

static struct seg_work *seg_get(void)
{
    struct seg_work *w = t_seg;
    if (w)
        return w;
    pthread_once(&key_once, key_create);
    if (!seg_key_ok)
        return NULL;
    w = skpx_calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    if (pthread_setspecific(seg_key, w) != 0) {
        skpx_free(w);
        return NULL;
    }
    t_seg = w;
    t_idx = atomic_fetch_add_explicit(&g_hub.next_thread_idx, 1, memory_order_relaxed) + 1;
    return w;
}

int skp__gettid_cached(void)
{
    if (!t_tid)
        t_tid = (int)syscall(SYS_gettid);
    return t_tid;
}

/* ---------------------------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------------------------- */
static size_t put_u64(char *p, uint64_t v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    return n;
}

/* SkyWalking's GlobalIdGenerator shape: <instance uuid>.<thread>.<ms * 10000 + seq>, where the
 * last part is written as decimal(ms) followed by the 4-digit seq. The decimal ms is cached per
 * thread: converting a 13-digit number costs a chain of ~13 dependent multiplies, paid once per
 * millisecond instead of twice per request. */
static __thread int64_t t_id_ms = -1;
static __thread char t_id_ms_txt[24];
static __thread size_t t_id_ms_len;

static void make_id(const struct skp__tracer_conf *conf, int64_t now_ms, char *out)
{
    size_t n = strlen(conf->id_prefix);
    memcpy(out, conf->id_prefix, n);
    out[n++] = '.';
    n += put_u64(out + n, t_idx);
    out[n++] = '.';
    if (now_ms != t_id_ms) {
        t_id_ms = now_ms;
        t_id_ms_len = put_u64(t_id_ms_txt, (uint64_t)(now_ms > 0 ? now_ms : 0));
    }
    memcpy(out + n, t_id_ms_txt, t_id_ms_len);
    n += t_id_ms_len;
    unsigned seq = t_seq++ % 10000u;
    out[n++] = (char)('0' + seq / 1000);
    out[n++] = (char)('0' + seq / 100 % 10);
    out[n++] = (char)('0' + seq / 10 % 10);
    out[n++] = (char)('0' + seq % 10);
    out[n] = '\0';
}

static bool text_put(struct seg_work *w, const char *s, size_t len, uint32_t *off, uint32_t *outlen)
{
    *off = w->hdr.text_len;
    *outlen = 0;
    if (!s || !len)
        return true;
    if (len > SKP_SEGMENT_TEXT_MAX - w->hdr.text_len) {
        w->hdr.size_limited = true;
        return false;
    }
    memcpy(w->text + w->hdr.text_len, s, len);
    w->hdr.text_len += (uint32_t)len;
    *outlen = (uint32_t)len;
    return true;
}

static struct skp__span_rec *open_span(struct seg_work *w, enum skyprof_span_kind kind,
                                       const char *name, const char *peer, int64_t now_ms)
{
    if (w->hdr.n_spans >= SKYPROF_MAX_SPANS) {
        w->hdr.size_limited = true;
        return NULL;
    }
    struct skp__span_rec *r = &w->spans[w->hdr.n_spans];
    memset(r, 0, sizeof(*r));
    r->id = w->hdr.n_spans;
    r->parent = w->active;
    r->start_ms = now_ms;
    r->kind = (uint8_t)kind;
    text_put(w, name, name ? strlen(name) : 0, &r->name_off, &r->name_len);
    text_put(w, peer, peer ? strlen(peer) : 0, &r->peer_off, &r->peer_len);
    w->hdr.n_spans++;
    w->active = r->id;
    return r;
}

static struct seg_work *owner_of(skyprof_span *h)
{
    struct seg_work *w = t_seg;
    if (!h || !w || !w->open)
        return NULL;
    struct skp__span_rec *r = (struct skp__span_rec *)(void *)h;
    if (r < w->spans || r >= w->spans + w->hdr.n_spans)
        return NULL; /* not a span of this thread's open segment */
    return w;
}

static void end_span(struct seg_work *w, struct skp__span_rec *r, int64_t now_ms)
{
    if (r->ended)
        return;
    r->ended = true;
    r->end_ms = now_ms;
    if (w->active == r->id) {
        int32_t p = r->parent;
        while (p >= 0 && w->spans[p].ended)
            p = w->spans[p].parent;
        w->active = p;
    }
}

static void parse_ref(struct seg_work *w, const char *sw8)
{
    char store[SKYPROF_SW8_MAX];
    struct skyprof_sw8 in;
    w->hdr.ref.present = false;
    if (!sw8 || !*sw8 || strlen(sw8) >= SKYPROF_SW8_MAX)
        return;
    if (skyprof_sw8_parse(sw8, &in, store, sizeof(store)) != SKP_OK)
        return; /* malformed: start a new trace */
    if (strlen(in.trace_id) >= SKP_ID_MAX)
        return;
    const char *parts[6] = {in.trace_id,        in.parent_segment_id, in.parent_service,
                            in.parent_instance, in.parent_endpoint,   in.peer};
    for (int i = 0; i < 6; i++)
        if (!text_put(w, parts[i], strlen(parts[i]), &w->hdr.ref.off[i], &w->hdr.ref.len[i]))
            return;
    memcpy(w->hdr.trace_id, in.trace_id, strlen(in.trace_id) + 1);
    w->hdr.ref.parent_span_id = in.parent_span_id;
    w->hdr.ref.present = true;
}

/* ---------------------------------------------------------------------------------------------
 * Public tracer API
 * ------------------------------------------------------------------------------------------- */
skyprof_span *skyprof_entry_begin(const char *endpoint, const char *sw8)
{
    const struct skp__tracer_conf *conf = atomic_load_explicit(&g_hub.conf, memory_order_acquire);
    if (!conf || !endpoint)
        return NULL;
    struct seg_work *w = seg_get();
    if (!w)
        return NULL;
    int64_t now = skpx_now_ms();
    if (w->open) /* nested entry (e.g. a framework span inside a server span) */
        return (skyprof_span *)(void *)open_span(w, SKYPROF_SPAN_ENTRY, endpoint, NULL, now);
    w->open = true;
    w->conf = conf;
    w->active = -1;
    w->prof.ctx = NULL;
    w->hdr.epoch = conf->epoch;
    w->hdr.size_limited = false;
    w->hdr.n_spans = 0;
    w->hdr.n_tags = 0;
    w->hdr.text_len = 0;
    make_id(conf, now, w->hdr.segment_id);
    parse_ref(w, sw8);
    if (!w->hdr.ref.present)
        make_id(conf, now, w->hdr.trace_id);
    struct skp__span_rec *r = open_span(w, SKYPROF_SPAN_ENTRY, endpoint, NULL, now);
    if (conf->profile_active && atomic_load_explicit(&g_hub.ctx.live, memory_order_relaxed))
        (void)skp__task_ctx_attempt(&g_hub.ctx, endpoint, w->hdr.segment_id, now,
                                    skp__gettid_cached(), &w->prof);
    return (skyprof_span *)(void *)r;
}

/* One finished request for the HTTP checks of continuous profiling (cont_http.h): the entry
 * endpoint, its duration, and whether it answered 5xx (its http.status_code tag; without one,
 * its error flag). Only while a policy with HTTP checks exists. */
static void note_request(const struct seg_work *w)
{
    const struct skp__span_rec *r = &w->spans[0];
    bool server_error = r->is_error;
    for (int32_t i = 0; i < w->hdr.n_tags; i++) {
        const struct skp__tag_rec *t = &w->tags[i];
        if (t->span != 0 || t->key_len != 16 ||
            memcmp(w->text + t->key_off, "http.status_code", 16) != 0)
            continue;
        int code = 0;
        for (uint32_t k = 0; k < t->val_len && k < 4; k++) {
            char c = w->text[t->val_off + k];
            if (c < '0' || c > '9')
                break;
            code = code * 10 + (c - '0');
        }
        server_error = code >= 500;
        break;
    }
    skp__cont_http_record(w->text + r->name_off, r->name_len, r->end_ms - r->start_ms,
                          server_error);
}

static void finish_segment(struct seg_work *w, int64_t now)
{
    skp__task_ctx_release(&w->prof); /* the thread is no longer sampled from here on */
    for (int32_t i = 0; i < w->hdr.n_spans; i++)
        end_span(w, &w->spans[i], now);
    w->open = false;
    if (skp__cont_http_enabled() && w->hdr.n_spans > 0)
        note_request(w);
    const struct skp__tracer_conf *conf = atomic_load_explicit(&g_hub.conf, memory_order_acquire);
    if (!conf || conf != w->conf || !conf->report_segments)
        return; /* the agent that saw it begin is gone */
    if (!g_hub.segments_ready || skp__ring_size(&g_hub.segments) >= conf->segment_limit) {
        atomic_fetch_add_explicit(&g_hub.segments_dropped, 1, memory_order_relaxed);
        return;
    }
    size_t sz = sizeof(struct skp__finished_segment) +
                (size_t)w->hdr.n_spans * sizeof(struct skp__span_rec) +
                (size_t)w->hdr.n_tags * sizeof(struct skp__tag_rec) + w->hdr.text_len;
    struct skp__finished_segment *fs = skpx_malloc(sz);
    if (!fs) {
        atomic_fetch_add_explicit(&g_hub.segments_dropped, 1, memory_order_relaxed);
        return;
    }
    *fs = w->hdr;
    fs->spans = (struct skp__span_rec *)(void *)(fs + 1);
    memcpy(fs->spans, w->spans, (size_t)w->hdr.n_spans * sizeof(struct skp__span_rec));
    fs->tags = (struct skp__tag_rec *)(void *)(fs->spans + w->hdr.n_spans);
    memcpy(fs->tags, w->tags, (size_t)w->hdr.n_tags * sizeof(struct skp__tag_rec));
    fs->text = (char *)(fs->tags + w->hdr.n_tags);
    memcpy(fs->text, w->text, w->hdr.text_len);
    if (!skp__ring_push(&g_hub.segments, fs)) {
        atomic_fetch_add_explicit(&g_hub.segments_dropped, 1, memory_order_relaxed);
        skpx_free(fs);
    }
}

void skyprof_entry_end(skyprof_span *span)
{
    struct seg_work *w = owner_of(span);
    if (!w)
        return;
    struct skp__span_rec *r = (struct skp__span_rec *)(void *)span;
    int64_t now = skpx_now_ms();
    if (r->id == 0)
        finish_segment(w, now);
    else
        end_span(w, r, now);
}

skyprof_span *skyprof_span_begin(enum skyprof_span_kind kind, const char *name, const char *peer)
{
    struct seg_work *w = t_seg;
    if (!w || !w->open)
        return NULL;
    if (kind != SKYPROF_SPAN_EXIT && kind != SKYPROF_SPAN_LOCAL && kind != SKYPROF_SPAN_ENTRY)
        return NULL;
    return (skyprof_span *)(void *)open_span(w, kind, name, peer, skpx_now_ms());
}

void skyprof_span_end(skyprof_span *span)
{
    struct seg_work *w = owner_of(span);
    if (!w)
        return;
    struct skp__span_rec *r = (struct skp__span_rec *)(void *)span;
    if (r->id == 0) {
        finish_segment(w, skpx_now_ms());
        return;
    }
    end_span(w, r, skpx_now_ms());
}

void skyprof_span_set_error(skyprof_span *span, bool is_error)
{
    if (owner_of(span))
        ((struct skp__span_rec *)(void *)span)->is_error = is_error;
}

void skyprof_span_add_tag(skyprof_span *span, const char *key, const char *value)
{
    struct seg_work *w = owner_of(span);
    if (!w || !key || !value)
        return;
    if (w->hdr.n_tags >= SKP_SEGMENT_TAGS_MAX) {
        w->hdr.size_limited = true;
        return;
    }
    struct skp__tag_rec *t = &w->tags[w->hdr.n_tags];
    uint32_t save = w->hdr.text_len;
    if (!text_put(w, key, strlen(key), &t->key_off, &t->key_len) ||
        !text_put(w, value, strlen(value), &t->val_off, &t->val_len)) {
        w->hdr.text_len = save;
        return;
    }
    t->span = ((struct skp__span_rec *)(void *)span)->id;
    w->hdr.n_tags++;
}

void skyprof_span_set_component(skyprof_span *span, int component_id)
{
    if (owner_of(span))
        ((struct skp__span_rec *)(void *)span)->component = component_id;
}

void skyprof_span_set_peer(skyprof_span *span, const char *peer)
{
    struct seg_work *w = owner_of(span);
    if (!w || !peer)
        return;
    struct skp__span_rec *r = (struct skp__span_rec *)(void *)span;
    uint32_t off = 0;
    uint32_t len = 0;
    if (text_put(w, peer, strlen(peer), &off, &len)) {
        r->peer_off = off;
        r->peer_len = len;
    }
}

void skyprof_span_set_layer(skyprof_span *span, enum skyprof_span_layer layer)
{
    if (owner_of(span))
        ((struct skp__span_rec *)(void *)span)->layer = (uint8_t)layer;
}

static void text_z(const struct seg_work *w, uint32_t off, uint32_t len, char *out, size_t cap)
{
    size_t n = len < cap - 1 ? len : cap - 1;
    memcpy(out, w->text + off, n);
    out[n] = '\0';
}

int skyprof_sw8_inject(char *buf, size_t cap)
{
    struct seg_work *w = t_seg;
    if (!w || !w->open || !buf || w->active < 0)
        return -1;
    const struct skp__span_rec *cur = &w->spans[w->active];
    const struct skp__span_rec *first = &w->spans[0];
    char endpoint[SKP_ENDPOINT_MAX];
    char peer[SKP_ENDPOINT_MAX];
    text_z(w, first->name_off, first->name_len, endpoint, sizeof(endpoint));
    text_z(w, cur->peer_off, cur->peer_len, peer, sizeof(peer));
    struct skyprof_sw8 out = {
        .sample = 1,
        .trace_id = w->hdr.trace_id,
        .parent_segment_id = w->hdr.segment_id,
        .parent_span_id = cur->id,
        .parent_service = w->conf->service,
        .parent_instance = w->conf->instance,
        .parent_endpoint = endpoint,
        .peer = peer,
    };
    return skyprof_sw8_format(&out, buf, cap);
}

const char *skyprof_current_trace_id(void)
{
    struct seg_work *w = t_seg;
    return w && w->open ? w->hdr.trace_id : NULL;
}

const char *skyprof_current_segment_id(void)
{
    struct seg_work *w = t_seg;
    return w && w->open ? w->hdr.segment_id : NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Request contexts (skyprof.h): a context is a seg_work not tied to a thread
 * ------------------------------------------------------------------------------------------- */
skyprof_context *skyprof_context_new(void)
{
    return (skyprof_context *)(void *)skpx_calloc(1, sizeof(struct seg_work));
}

skyprof_context *skyprof_context_swap(skyprof_context *ctx)
{
    struct seg_work *cur = t_seg;
    if (!cur)
        cur = seg_get(); /* the thread's own, created on first use */
    if (!cur)
        return NULL;
    struct seg_work *next = (struct seg_work *)(void *)ctx;
    if (!next && seg_key_ok)
        next = pthread_getspecific(seg_key);
    if (!next)
        return NULL;
    t_seg = next;
    return (skyprof_context *)(void *)cur;
}

void skyprof_context_free(skyprof_context *ctx)
{
    struct seg_work *w = (struct seg_work *)(void *)ctx;
    if (!w)
        return;
    skp__task_ctx_release(&w->prof);
    skpx_free(w);
}
