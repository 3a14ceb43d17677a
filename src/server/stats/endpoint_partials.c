/* endpoint_partials.c - see endpoint_partials.h.
 *
 * The store hands the rows ordered by endpoint, instance, minute and writer, so one endpoint is
 * merged at a time: per-minute histograms for the points, one histogram for the window, and
 * the summary goes to the callback when the next endpoint begins. Memory is bounded by one
 * endpoint's histograms (window minutes + 1, each at most ES_HIST_BUCKETS buckets). */
#include "server/stats/endpoint_partials.h"

#include <stdio.h>
#include <string.h>

#include "common/alloc.h"

#define MINUTE_MS 60000
#define NAME_MAX_BYTES 1024

struct merge {
    const char *after;
    size_t limit, sent;
    bool *more;
    bool stopped; /* the page is full and another endpoint follows */
    int64_t first_ms, now_ms;
    int n_min;
    es_summary_cb cb;
    void *ud;
    /* the endpoint being merged */
    bool open;
    char endpoint[NAME_MAX_BYTES];
    char instance[NAME_MAX_BYTES]; /* the last instance counted */
    struct es_summary s;
    struct es_point *pts;
    struct es_hist *ph; /* n_min */
    struct es_hist all;
};

static void begin(struct merge *m, const char *endpoint)
{
    snprintf(m->endpoint, sizeof(m->endpoint), "%s", endpoint);
    m->instance[0] = '\0';
    m->s = (struct es_summary){
        .endpoint = m->endpoint, .points = m->pts, .n_points = (size_t)m->n_min};
    for (int k = 0; k < m->n_min; k++) {
        m->pts[k] = (struct es_point){.minute_ms = m->first_ms + (int64_t)k * MINUTE_MS};
        m->ph[k].n = 0;
        m->ph[k].total = 0;
    }
    m->all.n = 0;
    m->all.total = 0;
    m->open = true;
}

/* Sends the endpoint merged so far (nothing when it had no request). */
static skp_err finish(struct merge *m)
{
    if (!m->open)
        return SKP_OK;
    m->open = false;
    if (m->s.count == 0)
        return SKP_OK;
    if (m->limit && m->sent == m->limit) {
        if (m->more)
            *m->more = true;
        m->stopped = true;
        return SKP_ESTATE; /* stops the store's visit; not an error (see the caller) */
    }
    for (int k = 0; k < m->n_min; k++) {
        m->pts[k].p50_ms = es_hist_quantile(&m->ph[k], 0.50);
        m->pts[k].p99_ms = es_hist_quantile(&m->ph[k], 0.99);
    }
    m->s.p50_ms = es_hist_quantile(&m->all, 0.50);
    m->s.p90_ms = es_hist_quantile(&m->all, 0.90);
    m->s.p99_ms = es_hist_quantile(&m->all, 0.99);
    m->sent++;
    return m->cb(m->ud, &m->s);
}

static skp_err on_row(void *ud, const struct store_endpoint_minute *r)
{
    struct merge *m = ud;
    const char *ep = r->endpoint ? r->endpoint : "";
    if (m->after && strcmp(ep, m->after) <= 0)
        return SKP_OK;
    if (!m->open || strncmp(ep, m->endpoint, sizeof(m->endpoint) - 1) != 0) {
        skp_err err = finish(m);
        if (err)
            return err;
        begin(m, ep);
    }
    if (r->count == 0 || r->minute_ms < m->first_ms)
        return SKP_OK;
    int64_t k = (r->minute_ms - m->first_ms) / MINUTE_MS;
    if (k >= m->n_min)
        return SKP_OK;
    struct es_hist h;
    skp_err err = es_hist_decode(r->hist, r->hist_len, &h);
    if (err == SKP_EINVAL)
        return SKP_OK; /* a malformed histogram: its row is left out, not the answer */
    if (err)
        return err;
    err = es_hist_merge(&m->ph[k], &h, NULL);
    if (!err)
        err = es_hist_merge(&m->all, &h, NULL);
    es_hist_cleanup(&h);
    if (err)
        return err;
    m->pts[k].count += r->count;
    m->pts[k].errors += r->errors;
    m->s.count += r->count;
    m->s.errors += r->errors;
    const char *inst = r->instance ? r->instance : "";
    if (m->s.n_instances == 0 || strncmp(inst, m->instance, sizeof(m->instance) - 1) != 0) {
        m->s.n_instances++;
        snprintf(m->instance, sizeof(m->instance), "%s", inst);
    }
    int64_t last = r->minute_ms + MINUTE_MS - 1;
    if (last > m->now_ms)
        last = m->now_ms;
    if (last > m->s.last_seen_ms)
        m->s.last_seen_ms = last;
    return SKP_OK;
}

skp_err endpoint_partials_query_page(struct store *st, const char *service, int window_s,
                                     int64_t now_ms, const char *after, size_t limit,
                                     es_summary_cb cb, void *ud, bool *more)
{
    if (more)
        *more = false;
    if (!st || !service || !cb || window_s <= 0)
        return SKP_EINVAL;
    int n_min = (window_s + 59) / 60;
    if (n_min > ES_DEFAULT_WINDOW_MIN)
        n_min = ES_DEFAULT_WINDOW_MIN;
    int64_t now_min = now_ms >= 0 ? now_ms / MINUTE_MS : (now_ms - MINUTE_MS + 1) / MINUTE_MS;
    struct merge m = {.after = after,
                      .limit = limit,
                      .more = more,
                      .first_ms = (now_min - n_min + 1) * MINUTE_MS,
                      .now_ms = now_ms,
                      .n_min = n_min,
                      .cb = cb,
                      .ud = ud};
    m.pts = skpx_calloc((size_t)n_min, sizeof(*m.pts));
    m.ph = skpx_calloc((size_t)n_min, sizeof(*m.ph));
    skp_err err = m.pts && m.ph ? SKP_OK : SKP_ENOMEM;
    if (!err)
        err = store_list_endpoint_minutes(st, service, m.first_ms, (now_min + 1) * MINUTE_MS,
                                          on_row, &m);
    if (!err)
        err = finish(&m);
    if (m.stopped)
        err = SKP_OK;
    for (int k = 0; m.ph && k < n_min; k++)
        es_hist_cleanup(&m.ph[k]);
    es_hist_cleanup(&m.all);
    skpx_free(m.ph);
    skpx_free(m.pts);
    return err;
}
