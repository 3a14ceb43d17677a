/* jfr_timeline.c - per-thread timeline of JFR samples (see jfr_timeline.h).
 *
 * Design: the parser (frames without lines) hands each sample of the kind to on_sample, which
 * keeps (time, thread index, leaf name, weight) in one growing array; names are interned by the
 * parser, so a leaf is a pointer and equal pointers mean equal functions. finish sorts the kept
 * samples by (thread, bucket, leaf) and reads each thread's buckets as runs of that order: the
 * longest leaf run of a bucket is its cell's frame. Thread order and the thread cap come from
 * each thread's total weight. */
#include "server/analysis/jfr_timeline.h"

#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/grow.h"
#include "common/map.h"
#include "server/formats/jfr_int.h"

#define NO_THREAD "(unknown thread)"
#define NO_STACK "[no stack trace]"

struct tsample {
    int64_t time_ms;
    uint32_t thread; /* index in thr; after ranking, the output index or UINT32_MAX */
    uint32_t bucket;
    const char *leaf;
    uint64_t weight;
};

struct tthread {
    const char *name;
    uint64_t weight;
    uint32_t out; /* index in view.threads, UINT32_MAX when omitted */
};

struct jfr_timeline {
    enum jfr_kind kind;
    struct jfr_parser *p;
    struct tsample *s;
    size_t n, cap;
    struct tthread *thr;
    size_t n_thr, cap_thr;
    struct skpx_u64map thread_idx; /* interned thread pointer → index in thr */
    struct skpx_u64map frame_idx;  /* interned leaf pointer → index in view.frames */
    struct jfr_timeline_view v;
    bool finished;
};

static skp_err thread_index(struct jfr_timeline *t, const char *name, uint32_t *out)
{
    uint64_t idx = 0;
    if (skpx_u64map_get(&t->thread_idx, (uint64_t)(uintptr_t)name, &idx)) {
        *out = (uint32_t)idx;
        return SKP_OK;
    }
    if (skpx_grow(&t->thr, &t->cap_thr, t->n_thr + 1, sizeof(*t->thr), 32))
        return SKP_ENOMEM;
    idx = t->n_thr;
    skp_err err = skpx_u64map_put(&t->thread_idx, (uint64_t)(uintptr_t)name, idx);
    if (err)
        return err;
    t->thr[t->n_thr++] = (struct tthread){.name = name ? name : NO_THREAD};
    *out = (uint32_t)idx;
    return SKP_OK;
}

static skp_err on_sample(void *ctx, const struct jfr_sample *s)
{
    struct jfr_timeline *t = ctx;
    if (s->kind != t->kind)
        return SKP_OK;
    if (s->time_ms == 0) {
        t->v.n_untimed++;
        return SKP_OK;
    }
    if (t->n >= JFR_TIMELINE_MAX_SAMPLES) {
        t->v.n_dropped++;
        return SKP_OK;
    }
    if (skpx_grow(&t->s, &t->cap, t->n + 1, sizeof(*t->s), 4096))
        return SKP_ENOMEM;
    uint32_t th;
    skp_err err = thread_index(t, s->thread, &th);
    if (err)
        return err;
    const char *leaf = s->object_class ? s->object_class
                       : s->n_frames   ? s->frames[s->n_frames - 1]
                                       : NO_STACK;
    t->s[t->n++] =
        (struct tsample){.time_ms = s->time_ms, .thread = th, .leaf = leaf, .weight = s->weight};
    t->thr[th].weight += s->weight;
    t->v.n_samples++;
    return SKP_OK;
}

skp_err jfr_timeline_new(enum jfr_kind kind, struct jfr_timeline **out)
{
    *out = NULL;
    if ((unsigned)kind >= JFR_KIND_COUNT)
        return SKP_EINVAL;
    struct jfr_timeline *t = skpx_calloc(1, sizeof(*t));
    if (!t)
        return SKP_ENOMEM;
    t->kind = kind;
    struct jfr_parse_opts po = {.with_lines = false};
    skp_err err = jfr_parser_new(&po, on_sample, t, &t->p);
    if (err) {
        jfr_timeline_free(t);
        return err;
    }
    *out = t;
    return SKP_OK;
}

skp_err jfr_timeline_add_mem(struct jfr_timeline *t, const uint8_t *buf, size_t len,
                             struct jfr_error *err)
{
    return jfr_parser_parse_mem(t->p, buf, len, err);
}

static int cmp_rank(const void *a, const void *b, void *thr)
{
    const struct tthread *t = thr;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (t[x].weight != t[y].weight)
        return t[x].weight < t[y].weight ? 1 : -1;
    int c = strcmp(t[x].name, t[y].name);
    return c ? c : (x < y ? -1 : 1);
}

static int cmp_sample(const void *a, const void *b)
{
    const struct tsample *x = a, *y = b;
    if (x->thread != y->thread)
        return x->thread < y->thread ? -1 : 1;
    if (x->bucket != y->bucket)
        return x->bucket < y->bucket ? -1 : 1;
    if (x->leaf != y->leaf)
        return (uintptr_t)x->leaf < (uintptr_t)y->leaf ? -1 : 1;
    return 0;
}

static skp_err frame_index(struct jfr_timeline *t, const char *leaf, uint32_t *out)
{
    uint64_t idx = 0;
    if (skpx_u64map_get(&t->frame_idx, (uint64_t)(uintptr_t)leaf, &idx)) {
        *out = (uint32_t)idx;
        return SKP_OK;
    }
    /* One frame per distinct leaf among the cells: at most threads x buckets. */
    const char **f = skpx_realloc(t->v.frames, (t->v.n_frames + 1) * sizeof(*f));
    if (!f)
        return SKP_ENOMEM;
    t->v.frames = f;
    idx = t->v.n_frames;
    skp_err err = skpx_u64map_put(&t->frame_idx, (uint64_t)(uintptr_t)leaf, idx);
    if (err)
        return err;
    f[t->v.n_frames++] = leaf;
    *out = (uint32_t)idx;
    return SKP_OK;
}

/* Appends the cell of the bucket run s[a..b) (one thread, one bucket, leaves sorted). */
static skp_err add_cell(struct jfr_timeline *t, struct jfr_timeline_thread *th,
                        const struct tsample *s, size_t a, size_t b, size_t *cap)
{
    uint64_t all = 0, best = 0;
    const char *best_leaf = NULL;
    for (size_t i = a; i < b;) {
        size_t j = i;
        uint64_t w = 0;
        while (j < b && s[j].leaf == s[i].leaf)
            w += s[j++].weight;
        all += w;
        if (!best_leaf || w > best || (w == best && strcmp(s[i].leaf, best_leaf) < 0)) {
            best = w;
            best_leaf = s[i].leaf;
        }
        i = j;
    }
    uint32_t fi;
    skp_err err = frame_index(t, best_leaf, &fi);
    if (err)
        return err;
    if (th->n_cells == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        struct jfr_timeline_cell *c = skpx_realloc(th->cells, nc * sizeof(*c));
        if (!c)
            return SKP_ENOMEM;
        th->cells = c;
        *cap = nc;
    }
    th->cells[th->n_cells++] = (struct jfr_timeline_cell){
        .bucket = s[a].bucket, .frame = fi, .leaf_weight = best, .weight = all};
    return SKP_OK;
}

skp_err jfr_timeline_finish(struct jfr_timeline *t, uint32_t n_buckets,
                            const struct jfr_timeline_view **out)
{
    *out = NULL;
    if (t->finished)
        return SKP_EINVAL;
    t->finished = true;
    struct jfr_timeline_view *v = &t->v;
    if (t->n == 0) {
        *out = v;
        return SKP_OK;
    }
    if (n_buckets < 1)
        n_buckets = 1;
    if (n_buckets > JFR_TIMELINE_MAX_BUCKETS)
        n_buckets = JFR_TIMELINE_MAX_BUCKETS;
    int64_t from = t->s[0].time_ms, to = from;
    for (size_t i = 1; i < t->n; i++) {
        if (t->s[i].time_ms < from)
            from = t->s[i].time_ms;
        if (t->s[i].time_ms > to)
            to = t->s[i].time_ms;
    }
    /* Spans are at most a few days of ms: the subtraction cannot overflow for real recordings,
     * and a hostile one is clamped. */
    uint64_t span = (uint64_t)to - (uint64_t)from + 1;
    if (span == 0 || span > (uint64_t)INT64_MAX)
        span = (uint64_t)INT64_MAX;
    uint64_t bucket = (span + n_buckets - 1) / n_buckets;
    v->from_ms = from;
    v->to_ms = to;
    v->bucket_ms = (int64_t)bucket;
    v->n_buckets = (uint32_t)((span + bucket - 1) / bucket);

    /* Rank the threads, keep the busiest. */
    uint32_t *rank = skpx_malloc(t->n_thr * sizeof(*rank));
    if (!rank)
        return SKP_ENOMEM;
    for (size_t i = 0; i < t->n_thr; i++)
        rank[i] = (uint32_t)i;
    qsort_r(rank, t->n_thr, sizeof(*rank), cmp_rank, t->thr);
    size_t keep = t->n_thr < JFR_TIMELINE_MAX_THREADS ? t->n_thr : JFR_TIMELINE_MAX_THREADS;
    for (size_t i = 0; i < t->n_thr; i++)
        t->thr[rank[i]].out = i < keep ? (uint32_t)i : UINT32_MAX;
    v->threads = skpx_calloc(keep ? keep : 1, sizeof(*v->threads));
    if (!v->threads) {
        skpx_free(rank);
        return SKP_ENOMEM;
    }
    v->n_threads = keep;
    v->n_threads_omitted = t->n_thr - keep;
    for (size_t i = 0; i < keep; i++)
        v->threads[i] = (struct jfr_timeline_thread){.name = t->thr[rank[i]].name,
                                                     .weight = t->thr[rank[i]].weight};
    skpx_free(rank);

    for (size_t i = 0; i < t->n; i++) {
        t->s[i].thread = t->thr[t->s[i].thread].out;
        t->s[i].bucket = (uint32_t)(((uint64_t)t->s[i].time_ms - (uint64_t)from) / bucket);
    }
    qsort(t->s, t->n, sizeof(*t->s), cmp_sample);
    skp_err err = SKP_OK;
    size_t cap = 0;
    for (size_t a = 0; a < t->n && !err;) {
        if (t->s[a].thread == UINT32_MAX)
            break; /* omitted threads sort last */
        size_t b = a;
        while (b < t->n && t->s[b].thread == t->s[a].thread && t->s[b].bucket == t->s[a].bucket)
            b++;
        if (a == 0 || t->s[a - 1].thread != t->s[a].thread)
            cap = 0;
        err = add_cell(t, &v->threads[t->s[a].thread], t->s, a, b, &cap);
        a = b;
    }
    if (err)
        return err;
    *out = v;
    return SKP_OK;
}

void jfr_timeline_free(struct jfr_timeline *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->v.n_threads; i++)
        skpx_free(t->v.threads[i].cells);
    SKPX_FREE_ALL(t->v.threads, t->v.frames, t->s, t->thr);
    skpx_u64map_cleanup(&t->thread_idx);
    skpx_u64map_cleanup(&t->frame_idx);
    jfr_parser_free(t->p);
    skpx_free(t);
}
