/* continuous_cluster.c - the evaluator across collectors (see continuous_cluster.h).
 *
 * A read visits the shares ordered by service, endpoint, slot and writer, so one (service,
 * endpoint, slot) is summed at a time and handed to the evaluator when the next begins; memory
 * is one histogram and the instances of one slot. */
#include "server/continuous/continuous_cluster.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/grow.h"
#include "common/log.h"
#include "server/stats/endpoint_stats.h"
#include "server/store/store_continuous.h"

#define REPLAY_MAX 1000
#define PURGE_EVERY_MS 60000
#define PID_BITS 22

struct cont_cluster {
    struct store *st;
    int64_t ttl_ms;
    int64_t read_from_ms; /* shares of slots from here on are not read yet (-1: none read) */
    int64_t purged_ms;
    struct cont_cluster_counters ctr;
};

skp_err cont_cluster_new(struct store *st, int64_t check_ms, int64_t now_ms,
                         struct cont_cluster **out)
{
    *out = NULL;
    struct cont_cluster *cc = skpx_calloc(1, sizeof(*cc));
    if (!cc)
        return SKP_ENOMEM;
    cc->st = st;
    cc->ttl_ms = 3 * check_ms > CONT_CLUSTER_LEASE_MS ? 3 * check_ms : CONT_CLUSTER_LEASE_MS;
    cc->read_from_ms = -1;
    cc->purged_ms = now_ms;
    /* distinct per run, and the process id readable from it (tests find the holder by it) */
    int64_t t = skpx_now_ms() & ((INT64_C(1) << 40) - 1);
    cc->ctr.writer = t << PID_BITS | ((int64_t)getpid() & ((INT64_C(1) << PID_BITS) - 1));
    skp_err err =
        store_cont_lease(st, CONT_CLUSTER_LEASE_NAME, cc->ctr.writer, cc->ttl_ms, &cc->ctr.held);
    if (err) {
        skpx_free(cc);
        return err;
    }
    if (cc->ctr.held) {
        cc->ctr.takeovers++;
        SKPX_INFO("continuous: this collector (writer %lld) evaluates the policies",
                  (long long)cc->ctr.writer);
    }
    *out = cc;
    return SKP_OK;
}

void cont_cluster_free(struct cont_cluster *cc)
{
    if (!cc)
        return;
    bool held;
    if (cc->ctr.held)
        (void)!store_cont_lease(cc->st, CONT_CLUSTER_LEASE_NAME, cc->ctr.writer, 0, &held);
    skpx_free(cc);
}

void cont_cluster_counters(const struct cont_cluster *cc, struct cont_cluster_counters *out)
{
    *out = cc->ctr;
}

/* ---------------------------------------------------------------- export */

struct out_share {
    struct store_cont_slot row;
    uint8_t *hist;
    char *instances;
};

struct export
{
    struct cont_cluster *cc;
    struct out_share *v;
    size_t n, cap;
};

static skp_err add_share(void *ud, const struct cont_part *p)
{
    struct export *x = ud;
    if (skpx_grow(&x->v, &x->cap, x->n + 1, sizeof(*x->v), 64) != SKP_OK)
        return SKP_ENOMEM;
    struct out_share *o = &x->v[x->n];
    memset(o, 0, sizeof(*o));
    o->hist = skpx_malloc(es_hist_encoded_max(p->hist) + 1);
    size_t len = 1;
    for (size_t i = 0; i < p->n_instances; i++)
        len += strlen(p->instances[i]) + 1;
    o->instances = skpx_malloc(len);
    if (!o->hist || !o->instances) {
        skpx_free(o->hist);
        skpx_free(o->instances);
        return SKP_ENOMEM;
    }
    size_t at = 0;
    for (size_t i = 0; i < p->n_instances; i++) {
        size_t l = strlen(p->instances[i]);
        memcpy(o->instances + at, p->instances[i], l);
        at += l;
        if (i + 1 < p->n_instances)
            o->instances[at++] = '\n';
    }
    o->instances[at] = '\0';
    o->row = (struct store_cont_slot){.service = p->service,
                                      .endpoint = p->endpoint,
                                      .slot_ms = p->slot_ms,
                                      .writer = x->cc->ctr.writer,
                                      .count = p->count,
                                      .errors = p->errors,
                                      .sum_ms = p->sum_ms,
                                      .hist = o->hist,
                                      .hist_len = es_hist_encode(p->hist, o->hist),
                                      .instances = o->instances};
    x->n++;
    return SKP_OK;
}

/* Stores the shares recorded since the last tick. The evaluator counts them exported as they
 * are visited: a failed statement loses that tick's shares (logged), it does not stall. */
static void export_shares(struct cont_cluster *cc, struct cont_eval *e)
{
    struct export x = {.cc = cc};
    skp_err err = cont_eval_export(e, add_share, &x);
    struct store_cont_slot *rows = NULL;
    if (!err && x.n) {
        rows = skpx_malloc(x.n * sizeof(*rows));
        if (!rows)
            err = SKP_ENOMEM;
        for (size_t i = 0; rows && i < x.n; i++)
            rows[i] = x.v[i].row;
    }
    if (!err && x.n)
        err = store_cont_put_slots(cc->st, rows, x.n);
    if (err) {
        cc->ctr.errors++;
        static struct skpx_log_limit lim;
        skpx_log_limited(&lim, SKPX_LOG_WARN, "continuous: %zu slot shares not stored: %s", x.n,
                         skp_strerror(err));
    } else {
        cc->ctr.shares_written += x.n;
    }
    for (size_t i = 0; i < x.n; i++) {
        skpx_free(x.v[i].hist);
        skpx_free(x.v[i].instances);
    }
    skpx_free(x.v);
    skpx_free(rows);
}

/* ---------------------------------------------------------------- merged read */

struct merge {
    struct cont_cluster *cc;
    struct cont_eval *e;
    bool open;
    char *service, *endpoint;
    int64_t slot_ms, count, errors;
    double sum_ms;
    struct es_hist hist;
    char *inst[CONT_EVAL_MAX_INSTANCES];
    size_t n_inst;
};

static void merge_flush(struct merge *m)
{
    if (!m->open)
        return;
    m->open = false;
    struct cont_part p = {.service = m->service,
                          .endpoint = m->endpoint,
                          .slot_ms = m->slot_ms,
                          .count = m->count,
                          .errors = m->errors,
                          .sum_ms = m->sum_ms,
                          .hist = &m->hist,
                          .instances = (const char *const *)m->inst,
                          .n_instances = m->n_inst};
    cont_eval_put_merged(m->e, &p);
    skpx_free(m->service);
    skpx_free(m->endpoint);
    m->service = m->endpoint = NULL;
    for (size_t i = 0; i < m->n_inst; i++)
        skpx_free(m->inst[i]);
    m->n_inst = 0;
    m->hist.n = 0;
    m->hist.total = 0;
}

static void note_instances(struct merge *m, const char *list)
{
    while (list && *list) {
        const char *nl = strchr(list, '\n');
        size_t len = nl ? (size_t)(nl - list) : strlen(list);
        bool seen = len == 0 || m->n_inst == CONT_EVAL_MAX_INSTANCES;
        for (size_t i = 0; i < m->n_inst && !seen; i++)
            seen = strlen(m->inst[i]) == len && memcmp(m->inst[i], list, len) == 0;
        if (!seen) {
            char *c = skpx_malloc(len + 1);
            if (c) {
                memcpy(c, list, len);
                c[len] = '\0';
                m->inst[m->n_inst++] = c;
            }
        }
        list = nl ? nl + 1 : NULL;
    }
}

static skp_err on_share(void *ud, const struct store_cont_slot *s)
{
    struct merge *m = ud;
    m->cc->ctr.shares_read++;
    if (!m->open || s->slot_ms != m->slot_ms || strcmp(s->endpoint, m->endpoint) != 0 ||
        strcmp(s->service, m->service) != 0) {
        merge_flush(m);
        m->service = skpx_strdup(s->service);
        m->endpoint = skpx_strdup(s->endpoint);
        if (!m->service || !m->endpoint) {
            skpx_free(m->service);
            skpx_free(m->endpoint);
            m->service = m->endpoint = NULL;
            return SKP_ENOMEM;
        }
        m->slot_ms = s->slot_ms;
        m->count = m->errors = 0;
        m->sum_ms = 0;
        m->open = true;
    }
    struct es_hist h;
    skp_err err = es_hist_decode(s->hist, s->hist_len, &h);
    if (err == SKP_EINVAL)
        return SKP_OK; /* a malformed histogram: that share is left out */
    if (err)
        return err;
    err = es_hist_merge(&m->hist, &h, NULL);
    es_hist_cleanup(&h);
    if (err)
        return err;
    m->count += s->count;
    m->errors += s->errors;
    m->sum_ms += s->sum_ms;
    note_instances(m, s->instances);
    return SKP_OK;
}

/* Reads the shares of the slots closed since the last read (the longest window at first). */
static void read_merged(struct cont_cluster *cc, struct cont_eval *e, int64_t now_ms)
{
    int64_t to = cont_eval_closed_before_ms(e, now_ms);
    int64_t from = to - cont_eval_window_ms(e);
    if (cc->read_from_ms > from)
        from = cc->read_from_ms;
    if (from >= to)
        return;
    struct merge m = {.cc = cc, .e = e};
    skp_err err = store_cont_list_slots(cc->st, from, to, on_share, &m);
    if (!err)
        merge_flush(&m);
    else
        m.open = false;
    skpx_free(m.service);
    skpx_free(m.endpoint);
    for (size_t i = 0; i < m.n_inst; i++)
        skpx_free(m.inst[i]);
    es_hist_cleanup(&m.hist);
    if (err) {
        cc->ctr.errors++;
        static struct skpx_log_limit lim;
        skpx_log_limited(&lim, SKPX_LOG_WARN, "continuous: slot shares not read: %s",
                         skp_strerror(err));
        return;
    }
    cc->read_from_ms = to;
}

/* ---------------------------------------------------------------- tick */

void cont_cluster_tick(struct cont_cluster *cc, struct cont_eval *e, int64_t now_ms, bool *judge)
{
    export_shares(cc, e);
    bool was = cc->ctr.held, held = false;
    skp_err err =
        store_cont_lease(cc->st, CONT_CLUSTER_LEASE_NAME, cc->ctr.writer, cc->ttl_ms, &held);
    if (err)
        cc->ctr.errors++;
    cc->ctr.held = held;
    read_merged(cc, e, now_ms);
    if (held && !was) {
        /* the previous holder's triggers count against the cap and the quiet time here now */
        cc->ctr.takeovers++;
        cont_eval_reset_triggers(e);
        if (cont_cluster_replay(cc->st, e, now_ms) != SKP_OK)
            cc->ctr.errors++;
        SKPX_INFO("continuous: this collector (writer %lld) took the evaluator's lease over",
                  (long long)cc->ctr.writer);
    } else if (was && !held) {
        SKPX_INFO("continuous: this collector (writer %lld) no longer evaluates the policies",
                  (long long)cc->ctr.writer);
    }
    if (held && now_ms - cc->purged_ms >= PURGE_EVERY_MS) {
        cc->purged_ms = now_ms;
        int64_t keep = cont_eval_closed_before_ms(e, now_ms) - cont_eval_window_ms(e);
        if (store_cont_purge_cluster(cc->st, keep - CONT_CLUSTER_KEEP_MS,
                                     now_ms - 2 * 3600 * 1000) != SKP_OK)
            cc->ctr.errors++;
    }
    *judge = held;
}

bool cont_cluster_claim(struct cont_cluster *cc, const char *service, const char *target,
                        int64_t window_end_ms)
{
    bool claimed = false;
    if (store_cont_claim_firing(cc->st, service, target, window_end_ms, &claimed) != SKP_OK) {
        cc->ctr.errors++;
        return false;
    }
    if (!claimed)
        cc->ctr.claims_lost++;
    return claimed;
}

/* ---------------------------------------------------------------- replay */

/* The server's triggers of the last hour, newest first as the store lists them. */
struct past_triggers {
    int64_t since_ms;
    size_t n;
    struct {
        char service[256];
        int64_t time_ms;
        bool made_task;
    } t[REPLAY_MAX];
};

static skp_err collect_trigger(void *ud, const struct store_cont_trigger *t)
{
    struct past_triggers *p = ud;
    if (t->time_ms < p->since_ms || !t->source || strcmp(t->source, "server") != 0 ||
        p->n == REPLAY_MAX)
        return SKP_OK;
    snprintf(p->t[p->n].service, sizeof(p->t[p->n].service), "%s", t->service);
    p->t[p->n].made_task = t->task_id && t->task_id[0];
    p->t[p->n++].time_ms = t->time_ms;
    return SKP_OK;
}

skp_err cont_cluster_replay(struct store *st, struct cont_eval *e, int64_t now_ms)
{
    struct past_triggers *p = skpx_calloc(1, sizeof(*p));
    if (!p)
        return SKP_ENOMEM;
    p->since_ms = now_ms - 3600 * 1000;
    skp_err err = store_cont_list_triggers(st, NULL, NULL, REPLAY_MAX, collect_trigger, p);
    for (size_t i = p->n; i-- > 0 && !err;)
        cont_eval_note_trigger(e, p->t[i].service, p->t[i].time_ms, p->t[i].made_task);
    skpx_free(p);
    return err == SKP_ENOTSUP ? SKP_OK : err;
}
