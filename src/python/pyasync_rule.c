/* pyasync_rule.c - the sampler's side of pyasync.h: the ready-or-waiting test of a suspended
 * task's chain end, on safe reads only (no interpreter, no GIL: unit-tested without Python).
 *
 * Design. The test needs up to seven words: the awaited object's type and future field, the
 * future's state, the sleep timer's type and `_when`, that float's type and value. Two of them
 * are pointers to the others, so a cold test takes two batched reads; the memo keeps what the
 * last test found behind the chain's end, so the words can be read speculatively, ahead of the
 * capture in the sampler's batch of await chains (skp__pyasync_plan), and a test whose chain
 * ends where it ended before makes no read at all. */
#include "python/pyasync.h"

#include <string.h>

#include "common/rawload.h"
#include "python/safe_read.h"

/* The words of one test, in a fixed order (struct skp__pyasync_ahead.idx). */
enum {
    W_IT_TYPE,   /* the awaited object's type */
    W_IT_FUT,    /* its future field (when it is a FutureIter) */
    W_FUT_STATE, /* the future's state word (8 bytes read: the int and its neighbour) */
    W_TM_TYPE,   /* the sleep timer's type */
    W_TM_WHEN,   /* its `_when` slot */
    W_FL_TYPE,   /* that float's type */
    W_FL_VALUE,  /* and value */
};

/* The reads of one batch: a word each, adjacent in `v` (one destination for the kernel). */
struct batch {
    struct iovec loc[SKP_PYASYNC_WORDS];
    struct iovec rem[SKP_PYASYNC_WORDS];
    uint64_t v[SKP_PYASYNC_WORDS];
    int8_t idx[SKP_PYASYNC_WORDS];
    size_t n;
};

static void add(struct batch *b, int word, uintptr_t addr)
{
    size_t i = b->n++;
    b->v[i] = 0;
    b->idx[word] = (int8_t)i;
    b->loc[i] = (struct iovec){&b->v[i], sizeof(uint64_t)};
    b->rem[i] = (struct iovec){(void *)addr, sizeof(uint64_t)};
}

/* Plans the words at the addresses of `m` (its awaited object, timer, and what was behind). */
static void plan(const struct skp__pyasync *a, const struct skp__pyasync_memo *m, struct batch *b)
{
    b->n = 0;
    memset(b->idx, -1, sizeof(b->idx));
    if (skpx_plausible_ptr(m->awaited)) {
        add(b, W_IT_TYPE, m->awaited + a->obj_type);
        add(b, W_IT_FUT, m->awaited + a->futiter_future);
        if (skpx_plausible_ptr(m->future))
            add(b, W_FUT_STATE, m->future + a->fut_state);
    }
    if (skpx_plausible_ptr(m->timer)) {
        add(b, W_TM_TYPE, m->timer + a->obj_type);
        add(b, W_TM_WHEN, m->timer + a->timer_when);
        if (skpx_plausible_ptr(m->when_obj)) {
            add(b, W_FL_TYPE, m->when_obj + a->obj_type);
            add(b, W_FL_VALUE, m->when_obj + a->float_value);
        }
    }
}

size_t skp__pyasync_plan(const struct skp__pyasync *a, const struct skp__pyasync_memo *memo,
                         uint8_t *words, struct iovec *loc, struct iovec *rem,
                         struct skp__pyasync_ahead *ah)
{
    struct batch b;
    plan(a, memo, &b);
    ah->at = *memo;
    ah->v = words;
    ah->n_read = 0;
    memcpy(ah->idx, b.idx, sizeof(ah->idx));
    memset(words, 0, b.n * sizeof(uint64_t));
    for (size_t i = 0; i < b.n; i++) {
        loc[i] = (struct iovec){words + i * sizeof(uint64_t), sizeof(uint64_t)};
        rem[i] = b.rem[i];
    }
    return b.n;
}

/* Word `w` of a read (v, idx, n_read) into *out; false when it was not planned or not read. */
static bool word(const uint8_t *v, const int8_t *idx, size_t n_read, int w, uint64_t *out)
{
    if (idx[w] < 0 || (size_t)idx[w] >= n_read)
        return false;
    memcpy(out, v + (size_t)idx[w] * sizeof(uint64_t), sizeof(*out));
    return true;
}

/* What a read at the addresses of `at` tells: the future's state and the timer's deadline, each
 * when the read proves it (the objects still point where `at` says). */
struct found {
    bool state_ok, when_ok;
    bool it_other, tm_other; /* the awaited object is no FutureIter / the timer no TimerHandle */
    int state;
    double when;
    uintptr_t future, when_obj; /* what the awaited object and the timer point at now */
};

static void decode(const struct skp__pyasync *a, const struct skp__pyasync_memo *at,
                   const uint8_t *v, const int8_t *idx, size_t n_read, struct found *f)
{
    uint64_t x = 0, y = 0;
    if (word(v, idx, n_read, W_IT_TYPE, &x) && x != a->futiter_type)
        f->it_other = true;
    else if (word(v, idx, n_read, W_IT_TYPE, &x) && word(v, idx, n_read, W_IT_FUT, &y)) {
        f->future = (uintptr_t)y;
        if (f->future == at->future && word(v, idx, n_read, W_FUT_STATE, &x)) {
            int st;
            memcpy(&st, (const char *)&x, sizeof(st)); /* the int at the start of the word */
            f->state = st;
            f->state_ok = true;
        }
    }
    if (word(v, idx, n_read, W_TM_TYPE, &x) && x != a->timer_type)
        f->tm_other = true;
    else if (word(v, idx, n_read, W_TM_TYPE, &x) && word(v, idx, n_read, W_TM_WHEN, &y)) {
        f->when_obj = (uintptr_t)y;
        if (f->when_obj == at->when_obj && word(v, idx, n_read, W_FL_TYPE, &x) &&
            x == a->float_type && word(v, idx, n_read, W_FL_VALUE, &y)) {
            memcpy(&f->when, &y, sizeof(f->when));
            f->when_ok = true;
        }
    }
}

/* Reads at the addresses of `at` now (one batch) and decodes. */
static void read_now(const struct skp__pyasync *a, const struct skp__pyasync_memo *at,
                     struct found *f)
{
    struct batch b;
    plan(a, at, &b);
    size_t got = b.n ? skp__safe_readv(b.loc, b.rem, b.n) : 0;
    decode(a, at, (const uint8_t *)b.v, b.idx, got, f);
}

bool skp__pyasync_is_ready(const struct skp__pyasync *a, const struct skp__pyasync_chain *c,
                           struct skp__pyasync_memo *memo, const struct skp__pyasync_ahead *ah,
                           double now_s)
{
    if (!a || !c)
        return false;
    if (c->innermost_code && c->innermost_code == a->sleep0_code)
        return true; /* a bare yield: the task's next step is queued already */
    bool has_it = skpx_plausible_ptr(c->awaited);
    bool has_timer = skpx_plausible_ptr(c->timer);
    if (!has_it && !has_timer)
        return false;
    /* 1. the words read ahead, when the chain still ends where they were read; 2. else, or for
     * what they did not prove, one batch at the chain's end with the best guesses behind it
     * (what the words read ahead found there: the end is often the same object with a new
     * future, e.g. a loop of sleeps; else the memo's); 3. a last batch at what that batch found
     * behind the end, when the guesses were wrong. */
    struct found f = {0};
    struct skp__pyasync_memo at = {c->awaited, c->timer, memo->future, memo->when_obj};
    if (ah && ah->at.awaited == c->awaited && ah->at.timer == c->timer) {
        decode(a, &ah->at, ah->v, ah->idx, ah->n_read, &f);
        at.future = f.future ? f.future : at.future;
        at.when_obj = f.when_obj ? f.when_obj : at.when_obj;
    }
    if ((has_it && !f.state_ok && !f.it_other) || (has_timer && !f.when_ok && !f.tm_other)) {
        f = (struct found){0};
        read_now(a, &at, &f);
        if ((f.future && !f.state_ok) || (f.when_obj && !f.when_ok)) {
            at.future = f.future;
            at.when_obj = f.when_obj;
            f = (struct found){0};
            read_now(a, &at, &f);
        }
    }
    memo->awaited = c->awaited;
    memo->timer = c->timer;
    memo->future = f.future;
    memo->when_obj = f.when_obj;
    if (f.state_ok && f.state != a->fut_pending)
        return true;                     /* done: its callbacks queued the task's wakeup */
    return f.when_ok && now_s >= f.when; /* the sleep's timer is due: the loop has not got to it */
}
