/* endpoint_stats.c - see endpoint_stats.h.
 *
 * Design: one entry per (service, instance, endpoint) key, found through a string map keyed by
 * the length-prefixed names. An entry holds two rings indexed by time: ES_SECOND_SLOTS
 * one-second slots (count, errors) and window+1 one-minute slots (count, errors, sparse
 * histogram). A slot whose time is not the one asked for is reset before use (its histogram
 * keeps its allocation), so memory is flat once the window has passed; a minute slot is
 * reused only window+1 minutes later, long after the flush rolled it up into the store.
 * Single-threaded. */
#include "server/stats/endpoint_stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/varint.h"
#include "common/alloc.h"
#include "common/grow.h"
#include "common/map.h"

/* Names longer than this are truncated in the key (and in what is reported). */
#define ES_NAME_MAX 512

/* ---- histogram ---- */

size_t es_bucket_of(uint64_t v)
{
    if (v < (1u << ES_SUB_BITS))
        return (size_t)v;
    if (v > UINT32_MAX)
        v = UINT32_MAX;
    int e = 63 - __builtin_clzll(v);     /* 7..31 */
    uint64_t m = v >> (e - ES_SUB_BITS); /* 128..255 */
    return (1u << ES_SUB_BITS) + (size_t)(e - ES_SUB_BITS) * (1u << ES_SUB_BITS) +
           (size_t)(m - (1u << ES_SUB_BITS));
}

uint64_t es_bucket_lo(size_t idx)
{
    if (idx < (1u << ES_SUB_BITS))
        return idx;
    size_t k = idx - (1u << ES_SUB_BITS);
    int e = ES_SUB_BITS + (int)(k >> ES_SUB_BITS);
    uint64_t m = (1u << ES_SUB_BITS) + (k & ((1u << ES_SUB_BITS) - 1));
    return m << (e - ES_SUB_BITS);
}

uint64_t es_bucket_mid(size_t idx)
{
    if (idx < (1u << ES_SUB_BITS))
        return idx;
    size_t k = idx - (1u << ES_SUB_BITS);
    int e = ES_SUB_BITS + (int)(k >> ES_SUB_BITS);
    uint64_t width = (uint64_t)1 << (e - ES_SUB_BITS);
    return es_bucket_lo(idx) + (width - 1) / 2;
}

/* Index in h->b of the first bucket with idx >= want. */
static uint32_t find(const struct es_hist *h, uint16_t want)
{
    uint32_t lo = 0, hi = h->n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (h->b[mid].idx < want)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

skp_err es_hist_add(struct es_hist *h, uint64_t v, uint32_t n, size_t *budget)
{
    if (n == 0)
        return SKP_OK;
    uint16_t idx = (uint16_t)es_bucket_of(v);
    uint32_t at = find(h, idx);
    if (at < h->n && h->b[at].idx == idx) {
        h->b[at].n = h->b[at].n > UINT32_MAX - n ? UINT32_MAX : h->b[at].n + n;
        h->total += n;
        return SKP_OK;
    }
    if (budget && *budget == 0)
        return SKP_EFULL;
    if (h->n == h->cap) {
        uint32_t ncap = h->cap ? h->cap * 2 : 4;
        if (ncap > ES_HIST_BUCKETS)
            ncap = ES_HIST_BUCKETS;
        struct es_bucket *nb = skpx_realloc(h->b, ncap * sizeof(*nb));
        if (!nb)
            return SKP_ENOMEM;
        h->b = nb;
        h->cap = ncap;
    }
    memmove(&h->b[at + 1], &h->b[at], (h->n - at) * sizeof(*h->b));
    h->b[at] = (struct es_bucket){.idx = idx, .n = n};
    h->n++;
    h->total += n;
    if (budget)
        (*budget)--;
    return SKP_OK;
}

skp_err es_hist_merge(struct es_hist *dst, const struct es_hist *src, size_t *budget)
{
    for (uint32_t i = 0; i < src->n; i++) {
        skp_err err = es_hist_add(dst, es_bucket_lo(src->b[i].idx), src->b[i].n, budget);
        if (err)
            return err;
    }
    return SKP_OK;
}

uint64_t es_hist_quantile(const struct es_hist *h, double q)
{
    if (h->total == 0)
        return 0;
    if (q < 0)
        q = 0;
    if (q > 1)
        q = 1;
    /* nearest rank: the smallest value with at least ceil(q * total) samples at or below */
    double r = q * (double)h->total;
    uint64_t rank = (uint64_t)r;
    if ((double)rank < r)
        rank++;
    if (rank == 0)
        rank = 1;
    uint64_t seen = 0;
    for (uint32_t i = 0; i < h->n; i++) {
        seen += h->b[i].n;
        if (seen >= rank)
            return es_bucket_mid(h->b[i].idx);
    }
    return es_bucket_mid(h->b[h->n - 1].idx);
}

void es_hist_cleanup(struct es_hist *h)
{
    if (!h)
        return;
    skpx_free(h->b);
    memset(h, 0, sizeof(*h));
}

size_t es_hist_encoded_max(const struct es_hist *h)
{
    return (size_t)h->n * 8;
}

size_t es_hist_encode(const struct es_hist *h, uint8_t *out)
{
    size_t len = 0;
    uint16_t prev = 0;
    for (uint32_t i = 0; i < h->n; i++) {
        len += skpx_varint_put(out + len, (uint64_t)(h->b[i].idx - prev));
        len += skpx_varint_put(out + len, h->b[i].n);
        prev = h->b[i].idx;
    }
    return len;
}

skp_err es_hist_decode(const uint8_t *b, size_t len, struct es_hist *h)
{
    memset(h, 0, sizeof(*h));
    size_t at = 0;
    uint64_t idx = 0;
    bool first = true;
    while (at < len) {
        uint64_t d, n;
        if (!skpx_varint_get(b, len, &at, &d) || !skpx_varint_get(b, len, &at, &n))
            goto bad;
        if ((!first && d == 0) || d >= ES_HIST_BUCKETS || n == 0 || n > UINT32_MAX)
            goto bad;
        idx += d;
        first = false;
        if (idx >= ES_HIST_BUCKETS)
            goto bad;
        skp_err err = es_hist_add(h, es_bucket_lo((size_t)idx), (uint32_t)n, NULL);
        if (err) {
            es_hist_cleanup(h);
            return err;
        }
    }
    return SKP_OK;
bad:
    es_hist_cleanup(h);
    return SKP_EINVAL;
}

/* ---- statistics ---- */

struct es_second {
    int64_t sec;
    uint32_t count, errors;
};

struct es_minute {
    int64_t minute; /* minute number (ms / 60000); -1 = unused */
    uint32_t count, errors;
    bool dirty; /* changed since the last flush */
    struct es_hist h;
};

struct es_entry {
    char *service, *instance, *endpoint;
    int64_t last_ms;
    struct es_second secs[ES_SECOND_SLOTS];
    struct es_minute *mins; /* n_min_slots */
};

struct endpoint_stats {
    int window_min;
    size_t n_min_slots; /* window + 1: the current minute and the window before it */
    size_t max_keys;
    size_t bucket_budget; /* buckets that may still be created */
    size_t max_buckets;
    struct skpx_strmap keys;  /* key → index in entries */
    size_t max_eps;           /* endpoints per service */
    struct skpx_strmap eps;   /* (service, endpoint) seen → 1 */
    struct skpx_strmap n_eps; /* service → its endpoints in eps */
    struct es_entry *entries;
    size_t n_entries, cap_entries;
    char *scratch; /* key buffer */
    struct endpoint_stats_counters ctr;
};

skp_err endpoint_stats_new(const struct endpoint_stats_opts *opts, struct endpoint_stats **out)
{
    *out = NULL;
    struct endpoint_stats_opts o = opts ? *opts : (struct endpoint_stats_opts){0};
    if (o.window_min < 0 || o.window_min > ES_MAX_WINDOW_MIN)
        return SKP_EINVAL;
    struct endpoint_stats *es = skpx_calloc(1, sizeof(*es));
    if (!es)
        return SKP_ENOMEM;
    es->window_min = o.window_min ? o.window_min : ES_DEFAULT_WINDOW_MIN;
    es->n_min_slots = (size_t)es->window_min + 1;
    es->max_keys = o.max_keys ? o.max_keys : ES_DEFAULT_MAX_KEYS;
    es->max_buckets = o.max_buckets ? o.max_buckets : ES_DEFAULT_MAX_BUCKETS;
    es->max_eps = o.max_endpoints_per_service ? o.max_endpoints_per_service
                                              : ES_DEFAULT_MAX_ENDPOINTS_PER_SERVICE;
    es->bucket_budget = es->max_buckets;
    es->scratch = skpx_malloc(3 * (ES_NAME_MAX + 24));
    if (!es->scratch) {
        endpoint_stats_free(es);
        return SKP_ENOMEM;
    }
    *out = es;
    return SKP_OK;
}

void endpoint_stats_free(struct endpoint_stats *es)
{
    if (!es)
        return;
    for (size_t i = 0; i < es->n_entries; i++) {
        struct es_entry *e = &es->entries[i];
        for (size_t m = 0; m < es->n_min_slots; m++)
            es_hist_cleanup(&e->mins[m].h);
        SKPX_FREE_ALL(e->mins, e->service, e->instance, e->endpoint);
    }
    skpx_free(es->entries);
    skpx_strmap_cleanup(&es->keys);
    skpx_strmap_cleanup(&es->eps);
    skpx_strmap_cleanup(&es->n_eps);
    skpx_free(es->scratch);
    skpx_free(es);
}

static size_t clamp_len(const char *s)
{
    size_t n = strnlen(s, ES_NAME_MAX);
    return n;
}

static const char *make_key(struct endpoint_stats *es, const char *svc, const char *inst,
                            const char *ep)
{
    size_t a = clamp_len(svc), b = clamp_len(inst), c = clamp_len(ep);
    snprintf(es->scratch, 3 * (ES_NAME_MAX + 24), "%zu:%.*s%zu:%.*s%.*s", a, (int)a, svc, b, (int)b,
             inst, (int)c, ep);
    return es->scratch;
}

static char *dup_name(const char *s)
{
    size_t n = clamp_len(s);
    char *d = skpx_malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static skp_err entry_find(struct endpoint_stats *es, const char *svc, const char *inst,
                          const char *ep, struct es_entry **out)
{
    const char *key = make_key(es, svc, inst, ep);
    uint32_t idx;
    if (skpx_strmap_get(&es->keys, key, &idx)) {
        *out = &es->entries[idx];
        return SKP_OK;
    }
    if (es->n_entries >= es->max_keys)
        return SKP_EFULL;
    /* A new endpoint of the service (not only a new instance of a known one): within the cap? */
    uint32_t seen, n_eps = 0;
    const char *pair = make_key(es, svc, "", ep);
    if (!skpx_strmap_get(&es->eps, pair, &seen)) {
        (void)skpx_strmap_get(&es->n_eps, svc, &n_eps);
        if (n_eps >= es->max_eps)
            return SKP_ETOOBIG;
        if (skpx_strmap_put(&es->eps, pair, 1) != SKP_OK ||
            skpx_strmap_put(&es->n_eps, svc, n_eps + 1) != SKP_OK)
            return SKP_ENOMEM;
    }
    key = make_key(es, svc, inst, ep);
    if (skpx_grow(&es->entries, &es->cap_entries, es->n_entries + 1, sizeof(*es->entries), 64))
        return SKP_ENOMEM;
    struct es_entry *e = &es->entries[es->n_entries];
    memset(e, 0, sizeof(*e));
    e->service = dup_name(svc);
    e->instance = dup_name(inst);
    e->endpoint = dup_name(ep);
    e->mins = skpx_calloc(es->n_min_slots, sizeof(*e->mins));
    if (!e->service || !e->instance || !e->endpoint || !e->mins ||
        skpx_strmap_put(&es->keys, key, (uint32_t)es->n_entries) != SKP_OK) {
        SKPX_FREE_ALL(e->service, e->instance, e->endpoint, e->mins);
        return SKP_ENOMEM;
    }
    for (size_t m = 0; m < es->n_min_slots; m++)
        e->mins[m].minute = -1;
    for (size_t s = 0; s < ES_SECOND_SLOTS; s++)
        e->secs[s].sec = -1;
    es->n_entries++;
    *out = e;
    return SKP_OK;
}

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static size_t slot_of(int64_t t, size_t n)
{
    int64_t r = t % (int64_t)n;
    return (size_t)(r < 0 ? r + (int64_t)n : r);
}

/* The minute slot for `minute`, reset when it held an older minute; NULL when the slot holds
 * a newer one (the minute is out of the ring). */
static struct es_minute *minute_slot(struct endpoint_stats *es, struct es_entry *e, int64_t minute)
{
    struct es_minute *m = &e->mins[slot_of(minute, es->n_min_slots)];
    if (m->minute == minute)
        return m;
    if (m->minute > minute)
        return NULL;
    es->bucket_budget += m->h.n;
    m->h.n = 0;
    m->h.total = 0;
    m->minute = minute;
    m->count = m->errors = 0;
    m->dirty = false;
    return m;
}

skp_err endpoint_stats_record(struct endpoint_stats *es, const char *service, const char *instance,
                              const char *endpoint, int64_t end_ms, int64_t latency_ms,
                              bool is_error, int64_t now_ms)
{
    if (end_ms > now_ms + 60000)
        end_ms = now_ms;
    int64_t minute = floor_div(end_ms, 60000);
    int64_t now_min = floor_div(now_ms, 60000);
    if (minute <= now_min - es->window_min) {
        es->ctr.dropped_late++;
        return SKP_OK;
    }
    struct es_entry *e = NULL;
    skp_err err = entry_find(es, service ? service : "", instance ? instance : "",
                             endpoint ? endpoint : "", &e);
    if (err) {
        es->ctr.dropped_keys++;
        es->ctr.dropped_endpoints += err == SKP_ETOOBIG;
        return err == SKP_EFULL || err == SKP_ETOOBIG ? SKP_OK : err;
    }
    struct es_minute *m = minute_slot(es, e, minute);
    if (!m) {
        es->ctr.dropped_late++;
        return SKP_OK;
    }
    m->count++;
    m->errors += is_error;
    m->dirty = true;
    err = es_hist_add(&m->h, latency_ms < 0 ? 0 : (uint64_t)latency_ms, 1, &es->bucket_budget);
    if (err)
        es->ctr.dropped_buckets++;
    int64_t sec = floor_div(end_ms, 1000);
    struct es_second *s = &e->secs[slot_of(sec, ES_SECOND_SLOTS)];
    if (s->sec != sec && s->sec < sec) {
        s->sec = sec;
        s->count = s->errors = 0;
    }
    if (s->sec == sec) {
        s->count++;
        s->errors += is_error;
    }
    if (end_ms > e->last_ms)
        e->last_ms = end_ms;
    es->ctr.recorded++;
    return err == SKP_ENOMEM ? err : SKP_OK;
}

void endpoint_stats_rate(struct endpoint_stats *es, const char *service, const char *endpoint,
                         int seconds, int64_t now_ms, uint64_t *count, uint64_t *errors)
{
    *count = *errors = 0;
    if (seconds > ES_SECOND_SLOTS - 1)
        seconds = ES_SECOND_SLOTS - 1;
    int64_t now_sec = floor_div(now_ms, 1000);
    for (size_t i = 0; i < es->n_entries; i++) {
        const struct es_entry *e = &es->entries[i];
        if (strcmp(e->service, service) != 0 || strcmp(e->endpoint, endpoint) != 0)
            continue;
        for (size_t s = 0; s < ES_SECOND_SLOTS; s++) {
            if (e->secs[s].sec < now_sec - seconds || e->secs[s].sec >= now_sec)
                continue;
            *count += e->secs[s].count;
            *errors += e->secs[s].errors;
        }
    }
}

/* Entries of one service sorted by endpoint name (query). */
static int cmp_entry_ptr(const void *a, const void *b)
{
    const struct es_entry *x = *(const struct es_entry *const *)a;
    const struct es_entry *y = *(const struct es_entry *const *)b;
    return strcmp(x->endpoint, y->endpoint);
}

skp_err endpoint_stats_query(struct endpoint_stats *es, const char *service, int window_s,
                             int64_t now_ms, es_summary_cb cb, void *ud)
{
    return endpoint_stats_query_page(es, service, window_s, now_ms, NULL, 0, cb, ud, NULL);
}

skp_err endpoint_stats_query_page(struct endpoint_stats *es, const char *service, int window_s,
                                  int64_t now_ms, const char *after, size_t limit, es_summary_cb cb,
                                  void *ud, bool *more)
{
    if (more)
        *more = false;
    if (!service || !cb || window_s <= 0)
        return SKP_EINVAL;
    size_t sent = 0;
    int n_min = (window_s + 59) / 60;
    if (n_min > es->window_min)
        n_min = es->window_min;
    int64_t now_min = floor_div(now_ms, 60000);
    int64_t first_min = now_min - n_min + 1;
    size_t n = 0;
    struct es_entry **sel = skpx_calloc(es->n_entries ? es->n_entries : 1, sizeof(*sel));
    struct es_point *pts = skpx_calloc((size_t)n_min, sizeof(*pts));
    struct es_hist *ph = skpx_calloc((size_t)n_min, sizeof(*ph));
    struct es_hist all = {0};
    skp_err err = SKP_OK;
    if (!sel || !pts || !ph) {
        err = SKP_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < es->n_entries; i++)
        if (strcmp(es->entries[i].service, service) == 0)
            sel[n++] = &es->entries[i];
    qsort(sel, n, sizeof(*sel), cmp_entry_ptr);
    size_t i0 = 0;
    while (after && i0 < n && strcmp(sel[i0]->endpoint, after) <= 0)
        i0++;
    for (size_t i = i0; i < n && !err;) {
        if (limit && sent == limit) {
            if (more)
                *more = true;
            break;
        }
        size_t j = i;
        struct es_summary s = {
            .endpoint = sel[i]->endpoint, .points = pts, .n_points = (size_t)n_min};
        for (int k = 0; k < n_min; k++) {
            pts[k] = (struct es_point){.minute_ms = (first_min + k) * 60000};
            ph[k].n = 0;
            ph[k].total = 0;
        }
        all.n = 0;
        all.total = 0;
        for (; j < n && strcmp(sel[j]->endpoint, sel[i]->endpoint) == 0; j++) {
            const struct es_entry *e = sel[j];
            bool seen = false;
            for (size_t m = 0; m < es->n_min_slots; m++) {
                const struct es_minute *mn = &e->mins[m];
                if (mn->minute < first_min || mn->minute > now_min || mn->count == 0)
                    continue;
                int k = (int)(mn->minute - first_min);
                pts[k].count += mn->count;
                pts[k].errors += mn->errors;
                s.count += mn->count;
                s.errors += mn->errors;
                seen = true;
                if (!err)
                    err = es_hist_merge(&ph[k], &mn->h, NULL);
                if (!err)
                    err = es_hist_merge(&all, &mn->h, NULL);
            }
            if (seen) {
                s.n_instances++;
                if (e->last_ms > s.last_seen_ms)
                    s.last_seen_ms = e->last_ms;
            }
        }
        i = j;
        if (err || s.count == 0)
            continue;
        for (int k = 0; k < n_min; k++) {
            pts[k].p50_ms = es_hist_quantile(&ph[k], 0.50);
            pts[k].p99_ms = es_hist_quantile(&ph[k], 0.99);
        }
        s.p50_ms = es_hist_quantile(&all, 0.50);
        s.p90_ms = es_hist_quantile(&all, 0.90);
        s.p99_ms = es_hist_quantile(&all, 0.99);
        err = cb(ud, &s);
        sent++;
    }
out:
    if (ph)
        for (int k = 0; k < n_min; k++)
            es_hist_cleanup(&ph[k]);
    es_hist_cleanup(&all);
    SKPX_FREE_ALL(ph, pts, sel);
    return err;
}

#define ES_FLUSH_BATCH 256

skp_err endpoint_stats_flush(struct endpoint_stats *es, int64_t now_ms, int64_t grace_ms,
                             es_minute_cb cb, void *ud)
{
    struct es_minute_row rows[ES_FLUSH_BATCH];
    struct es_minute *marks[ES_FLUSH_BATCH];
    size_t n = 0;
    skp_err err = SKP_OK;
    for (size_t i = 0; i < es->n_entries && !err; i++) {
        struct es_entry *e = &es->entries[i];
        for (size_t m = 0; m < es->n_min_slots && !err; m++) {
            struct es_minute *mn = &e->mins[m];
            if (!mn->dirty || (mn->minute + 1) * 60000 + grace_ms > now_ms)
                continue;
            rows[n] =
                (struct es_minute_row){e->service, e->instance, e->endpoint, mn->minute * 60000,
                                       mn->count,  mn->errors,  &mn->h};
            marks[n++] = mn;
            if (n == ES_FLUSH_BATCH) {
                err = cb(ud, rows, n);
                for (size_t k = 0; !err && k < n; k++)
                    marks[k]->dirty = false;
                n = 0;
            }
        }
    }
    if (!err && n) {
        err = cb(ud, rows, n);
        for (size_t k = 0; !err && k < n; k++)
            marks[k]->dirty = false;
    }
    return err;
}

void endpoint_stats_counters(const struct endpoint_stats *es, struct endpoint_stats_counters *out)
{
    *out = es->ctr;
    out->keys = es->n_entries;
    out->buckets = es->max_buckets - es->bucket_budget;
    size_t bytes = sizeof(*es) + es->cap_entries * sizeof(struct es_entry) +
                   es->keys.cap * sizeof(struct skpx_strmap_slot);
    for (size_t i = 0; i < es->n_entries; i++) {
        const struct es_entry *e = &es->entries[i];
        bytes += es->n_min_slots * sizeof(*e->mins) + strlen(e->service) + strlen(e->instance) +
                 2 * strlen(e->endpoint) + 40;
        for (size_t m = 0; m < es->n_min_slots; m++)
            bytes += e->mins[m].h.cap * sizeof(struct es_bucket);
    }
    out->bytes = bytes;
}
