/* segment_keep.c - see segment_keep.h.
 *
 * Design: held segments live in a FIFO (arrival order = expiry order) of owned copies, found
 * by segment id through a u64 map of the id's hash (an entry is checked by its id, so a hash
 * collision costs a miss, never a wrong segment). Recently profiled segment ids are two
 * hash sets (current and previous generation), rotated every grace period: an id is
 * remembered for one to two grace periods. Single-threaded. */
#include "server/stats/segment_keep.h"

#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/map.h"

struct held {
    char *segment_id;
    uint8_t *raw;
    size_t len;
    int64_t arrived_ms;
    bool ready;
    bool gone; /* handed out: skipped by the FIFO */
};

struct segment_keep {
    struct keep_policy p;
    struct held *q; /* FIFO ring */
    size_t head, n, cap;
    size_t bytes;
    size_t n_ready;
    struct skpx_u64map index; /* hash(id) → position (head-relative sequence) */
    uint64_t seq_head;        /* sequence number of q[head] */
    struct skpx_u64map profiled[2];
    int cur;
    int64_t rotated_ms;
    struct segment_keep_counters ctr;
};

skp_err keep_policy_parse(const char *text, struct keep_policy *out)
{
    memset(out, 0, sizeof(*out));
    if (!text)
        return SKP_EINVAL;
    if (strcmp(text, "profiled") == 0)
        out->mode = KEEP_PROFILED;
    else if (strcmp(text, "none") == 0)
        out->mode = KEEP_NONE;
    else if (strcmp(text, "all") == 0)
        out->mode = KEEP_ALL;
    else if (strncmp(text, "sampled:", 8) == 0) {
        char *end = NULL;
        long n = strtol(text + 8, &end, 10);
        if (end == text + 8 || *end || n < 1 || n > 1000000)
            return SKP_EINVAL;
        out->mode = KEEP_SAMPLED;
        out->sample_n = (uint32_t)n;
    } else
        return SKP_EINVAL;
    return SKP_OK;
}

skp_err segment_keep_new(const struct keep_policy *p, struct segment_keep **out)
{
    *out = NULL;
    struct segment_keep *sk = skpx_calloc(1, sizeof(*sk));
    if (!sk)
        return SKP_ENOMEM;
    if (p)
        sk->p = *p;
    if (sk->p.grace_ms <= 0)
        sk->p.grace_ms = KEEP_DEFAULT_GRACE_MS;
    if (sk->p.max_held_bytes == 0)
        sk->p.max_held_bytes = KEEP_DEFAULT_HELD_BYTES;
    if (sk->p.mode == KEEP_SAMPLED && sk->p.sample_n == 0)
        sk->p.sample_n = 1;
    *out = sk;
    return SKP_OK;
}

static void held_free(struct held *h)
{
    skpx_free(h->segment_id);
    skpx_free(h->raw);
    memset(h, 0, sizeof(*h));
}

void segment_keep_free(struct segment_keep *sk)
{
    if (!sk)
        return;
    for (size_t i = 0; i < sk->n; i++)
        held_free(&sk->q[(sk->head + i) % sk->cap]);
    skpx_free(sk->q);
    skpx_u64map_cleanup(&sk->index);
    skpx_u64map_cleanup(&sk->profiled[0]);
    skpx_u64map_cleanup(&sk->profiled[1]);
    skpx_free(sk);
}

const struct keep_policy *segment_keep_policy(const struct segment_keep *sk)
{
    return &sk->p;
}

static uint64_t id_hash(const char *id, size_t len)
{
    return skpx_hash_bytes(id, len);
}

static void rotate(struct segment_keep *sk, int64_t now_ms)
{
    if (now_ms - sk->rotated_ms < sk->p.grace_ms)
        return;
    sk->cur ^= 1;
    skpx_u64map_clear(&sk->profiled[sk->cur]);
    sk->rotated_ms = now_ms;
}

static bool was_profiled(const struct segment_keep *sk, uint64_t h)
{
    uint64_t v;
    return skpx_u64map_get(&sk->profiled[0], h, &v) || skpx_u64map_get(&sk->profiled[1], h, &v);
}

/* The held entry of id, or NULL. */
static struct held *find_held(struct segment_keep *sk, const char *id, size_t len, uint64_t h)
{
    uint64_t seq;
    if (!skpx_u64map_get(&sk->index, h, &seq) || seq < sk->seq_head || seq >= sk->seq_head + sk->n)
        return NULL;
    struct held *e = &sk->q[(sk->head + (size_t)(seq - sk->seq_head)) % sk->cap];
    if (e->gone || strlen(e->segment_id) != len || memcmp(e->segment_id, id, len) != 0)
        return NULL;
    return e;
}

static bool sampled(const struct segment_keep *sk, uint64_t h)
{
    return sk->p.mode == KEEP_SAMPLED && (h >> 7) % sk->p.sample_n == 0;
}

enum keep_decision segment_keep_decide(struct segment_keep *sk, const char *segment_id,
                                       size_t id_len, bool under_task, bool has_snapshots,
                                       const uint8_t *raw, size_t raw_len, int64_t now_ms)
{
    rotate(sk, now_ms);
    uint64_t h = id_hash(segment_id, id_len);
    if (sk->p.mode == KEEP_ALL) {
        sk->ctr.stored_now++;
        return KEEP_STORE;
    }
    if (sk->p.mode == KEEP_NONE) {
        sk->ctr.dropped++;
        return KEEP_DROP;
    }
    if (has_snapshots || was_profiled(sk, h) || sampled(sk, h)) {
        sk->ctr.stored_now++;
        return KEEP_STORE;
    }
    if (!under_task || find_held(sk, segment_id, id_len, h)) {
        sk->ctr.dropped++; /* a resent held segment is already waiting */
        return KEEP_DROP;
    }
    if (sk->n == sk->cap) {
        size_t ncap = sk->cap ? sk->cap * 2 : 64;
        struct held *nq = skpx_calloc(ncap, sizeof(*nq));
        if (!nq)
            goto store;
        for (size_t i = 0; i < sk->n; i++)
            nq[i] = sk->q[(sk->head + i) % sk->cap];
        skpx_free(sk->q);
        sk->q = nq;
        sk->cap = ncap;
        sk->head = 0;
    }
    struct held e = {.len = raw_len, .arrived_ms = now_ms};
    e.segment_id = skpx_malloc(id_len + 1);
    e.raw = skpx_malloc(raw_len ? raw_len : 1);
    if (!e.segment_id || !e.raw) {
        held_free(&e);
        goto store;
    }
    memcpy(e.segment_id, segment_id, id_len);
    e.segment_id[id_len] = '\0';
    if (raw_len)
        memcpy(e.raw, raw, raw_len);
    uint64_t seq = sk->seq_head + sk->n;
    if (skpx_u64map_put(&sk->index, h, seq) != SKP_OK) {
        held_free(&e);
        goto store;
    }
    sk->q[(sk->head + sk->n) % sk->cap] = e;
    sk->n++;
    sk->bytes += raw_len + id_len + sizeof(e);
    sk->ctr.held++;
    return KEEP_HOLD;
store:
    sk->ctr.stored_now++;
    return KEEP_STORE;
}

void segment_keep_mark_profiled(struct segment_keep *sk, const char *segment_id, int64_t now_ms)
{
    if (!segment_id)
        return;
    rotate(sk, now_ms);
    size_t len = strlen(segment_id);
    uint64_t h = id_hash(segment_id, len);
    if (skpx_u64map_put(&sk->profiled[sk->cur], h, 1) != SKP_OK) {
        /* only a memory of recent ids: a later segment is then checked in the store */
    }
    struct held *e = find_held(sk, segment_id, len, h);
    if (e && !e->ready) {
        e->ready = true;
        sk->n_ready++;
    }
}

bool segment_keep_has_ready(const struct segment_keep *sk)
{
    return sk->n_ready > 0;
}

static void hand_out(struct segment_keep *sk, struct held *e, segment_keep_cb cb, void *ud)
{
    bool ready = e->ready;
    bool stored = cb(ud, e->segment_id, e->raw, e->len, ready);
    if (ready)
        sk->n_ready--;
    if (ready && stored)
        sk->ctr.released++;
    else if (stored)
        sk->ctr.expired_profiled++;
    else
        sk->ctr.dropped++;
    sk->bytes -= e->len + strlen(e->segment_id) + sizeof(*e);
    skpx_free(e->segment_id);
    skpx_free(e->raw);
    e->segment_id = NULL;
    e->raw = NULL;
    e->gone = true;
}

void segment_keep_drain(struct segment_keep *sk, int64_t now_ms, bool expired_too,
                        segment_keep_cb cb, void *ud)
{
    if (sk->n_ready) {
        for (size_t i = 0; i < sk->n && sk->n_ready; i++) {
            struct held *e = &sk->q[(sk->head + i) % sk->cap];
            if (!e->gone && e->ready)
                hand_out(sk, e, cb, ud);
        }
    }
    /* pop from the front: handed-out ones, expired ones, and over-bound ones */
    while (sk->n) {
        struct held *e = &sk->q[sk->head];
        if (!e->gone) {
            bool over = sk->bytes > sk->p.max_held_bytes;
            bool expired = expired_too && now_ms - e->arrived_ms >= sk->p.grace_ms;
            if (!over && !expired)
                break;
            if (over && !expired)
                sk->ctr.evicted++;
            hand_out(sk, e, cb, ud);
        }
        memset(e, 0, sizeof(*e));
        sk->head = (sk->head + 1) % sk->cap;
        sk->n--;
        sk->seq_head++;
    }
    /* the index only grows between drains: rebuild it when mostly stale */
    if (sk->index.n > 2 * sk->n + 1024) {
        skpx_u64map_clear(&sk->index);
        for (size_t i = 0; i < sk->n; i++) {
            struct held *e = &sk->q[(sk->head + i) % sk->cap];
            if (!e->gone &&
                skpx_u64map_put(&sk->index, id_hash(e->segment_id, strlen(e->segment_id)),
                                sk->seq_head + i) != SKP_OK) {
                /* a held entry we cannot index is still decided at its expiry */
            }
        }
    }
}

void segment_keep_counters(const struct segment_keep *sk, struct segment_keep_counters *out)
{
    *out = sk->ctr;
    out->held_now = 0;
    for (size_t i = 0; i < sk->n; i++)
        out->held_now += !sk->q[(sk->head + i) % sk->cap].gone;
    out->held_bytes = sk->bytes;
}
