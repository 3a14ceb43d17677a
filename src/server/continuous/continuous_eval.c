/* continuous_eval.c - the server-side evaluator of continuous-profiling policies (see
 * continuous_eval.h). Per service with a policy: its flattened server-side items, one series per
 * tracked endpoint (an open slot accumulating, a ring of closed slot values as long as the
 * largest period), and the quiet time and recent trigger times of the service. */
#include "server/continuous/continuous_eval.h"

#include <math.h>
#include <string.h>

#include "common/alloc.h"
#include "common/grow.h"
#include "common/map.h"
#include "server/stats/endpoint_stats.h"

#define NEG_MARK UINT32_MAX /* endpoint → "matches no item" */
#define MAX_FLAT_ITEMS 64   /* items of one policy (6 targets x 9 types < 64) */

struct slot_val {
    int64_t slot; /* slot number (time / slot_ms); -1 = empty */
    uint32_t count, errors;
    float avg, p90, p99;
};

/* A slot still taking requests (its requests may arrive up to the horizon late). */
struct open_slot {
    int64_t slot; /* -1 = unused */
    uint32_t count, errors;
    double sum;
    struct es_hist hist; /* its latencies (the bucket buffer is reused) */
    bool dirty;          /* merged mode: recorded since the last export */
};

struct series {
    char *endpoint;
    uint64_t items;         /* bit i: flat item i matches this endpoint */
    struct open_slot *open; /* n_open entries, indexed by slot % n_open */
    struct slot_val *ring;  /* closed slots: window entries, indexed by slot % window */
    char *inst[CONT_EVAL_MAX_INSTANCES];
    int64_t inst_slot[CONT_EVAL_MAX_INSTANCES];
};

struct flat_item {
    enum cont_target target;
    const struct cont_item *it;
};

struct svc {
    bool active;
    struct cont_policy pol;
    struct flat_item items[MAX_FLAT_ITEMS];
    size_t n_items;
    int64_t window; /* slots kept: the largest period */
    struct series *series;
    size_t n_series, cap_series;
    struct skpx_strmap ep; /* endpoint → series index, or NEG_MARK */
    size_t n_neg;
    int64_t quiet_until_ms;
    int64_t *fired; /* trigger times, ring of pol.max_per_hour */
    size_t n_fired, fired_pos;
};

struct cont_eval {
    int64_t slot_ms;
    int64_t horizon; /* slots a request may be late: lateness / slot_ms */
    int64_t extra;   /* merged mode: slots the other collectors' shares may take to be stored */
    int64_t n_open;  /* open slots per series: horizon + extra */
    bool merged;
    size_t max_series;
    size_t max_policies;
    size_t total_series;
    struct svc **svcs;
    size_t n_svcs, cap_svcs;
    struct skpx_strmap by_name; /* service → svcs index */
    struct skpx_strmap held;    /* service → 1 while it has a policy (any kind), 0 once removed */
    size_t n_held;              /* services with a policy, for max_policies */
    struct cont_eval_counters ctr;
};

skp_err cont_eval_new(const struct cont_eval_opts *opts, struct cont_eval **out)
{
    struct cont_eval *e = skpx_calloc(1, sizeof(*e));
    if (!e)
        return SKP_ENOMEM;
    e->slot_ms = opts && opts->slot_ms > 0 ? opts->slot_ms : 1000;
    e->max_series = opts && opts->max_series ? opts->max_series : CONT_EVAL_MAX_SERIES;
    e->max_policies = opts && opts->max_policies ? opts->max_policies : CONT_EVAL_MAX_POLICIES;
    int64_t late = opts && opts->lateness_ms > 0 ? opts->lateness_ms : CONT_EVAL_LATENESS_MS;
    e->horizon = (late + e->slot_ms - 1) / e->slot_ms;
    if (e->horizon < 1)
        e->horizon = 1;
    if (e->horizon > CONT_EVAL_MAX_HORIZON)
        e->horizon = CONT_EVAL_MAX_HORIZON;
    e->merged = opts && opts->merged;
    if (e->merged) {
        int64_t d = opts->merge_delay_ms > 0 ? opts->merge_delay_ms : e->slot_ms;
        e->extra = (d + e->slot_ms - 1) / e->slot_ms + 1;
        if (e->extra > CONT_EVAL_MAX_HORIZON)
            e->extra = CONT_EVAL_MAX_HORIZON;
    }
    e->n_open = e->horizon + e->extra;
    *out = e;
    return SKP_OK;
}

static void series_cleanup(const struct cont_eval *e, struct series *s)
{
    skpx_free(s->endpoint);
    for (int64_t i = 0; s->open && i < e->n_open; i++)
        es_hist_cleanup(&s->open[i].hist);
    skpx_free(s->open);
    skpx_free(s->ring);
    for (size_t i = 0; i < CONT_EVAL_MAX_INSTANCES; i++)
        skpx_free(s->inst[i]);
    memset(s, 0, sizeof(*s));
}

static void svc_clear(struct cont_eval *e, struct svc *v)
{
    for (size_t i = 0; i < v->n_series; i++)
        series_cleanup(e, &v->series[i]);
    e->total_series -= v->n_series;
    skpx_free(v->series);
    v->series = NULL;
    v->n_series = v->cap_series = 0;
    skpx_strmap_cleanup(&v->ep);
    v->n_neg = 0;
    cont_policy_cleanup(&v->pol);
    skpx_free(v->fired);
    v->fired = NULL;
    v->n_fired = v->fired_pos = 0;
    v->n_items = 0;
    v->active = false;
}

void cont_eval_free(struct cont_eval *e)
{
    if (!e)
        return;
    for (size_t i = 0; i < e->n_svcs; i++) {
        svc_clear(e, e->svcs[i]);
        skpx_free(e->svcs[i]);
    }
    skpx_free(e->svcs);
    skpx_strmap_cleanup(&e->by_name);
    skpx_strmap_cleanup(&e->held);
    skpx_free(e);
}

static struct svc *find_svc(const struct cont_eval *e, const char *service)
{
    uint32_t idx;
    if (!service || !skpx_strmap_get(&e->by_name, service, &idx))
        return NULL;
    struct svc *v = e->svcs[idx];
    return v->active ? v : NULL;
}

const char *cont_eval_policy_uuid(const struct cont_eval *e, const char *service)
{
    const struct svc *v = find_svc(e, service);
    return v ? v->pol.uuid : NULL;
}

int64_t cont_eval_quiet_until(const struct cont_eval *e, const char *service)
{
    const struct svc *v = find_svc(e, service);
    return v ? v->quiet_until_ms : 0;
}

static bool under_cap(struct svc *v, int64_t now_ms)
{
    size_t cap = (size_t)v->pol.max_per_hour;
    if (v->n_fired < cap)
        return true;
    /* the ring is full: the oldest of the last `cap` triggers must be an hour old */
    return now_ms - v->fired[v->fired_pos] >= 3600 * 1000;
}

static void note_fired(struct svc *v, int64_t now_ms)
{
    size_t cap = (size_t)v->pol.max_per_hour;
    v->fired[v->fired_pos] = now_ms;
    v->fired_pos = (v->fired_pos + 1) % cap;
    if (v->n_fired < cap)
        v->n_fired++;
}

/* The ring's trigger times, oldest first, into out (room for CONT_PER_HOUR_MAX). */
static size_t fired_in_order(const struct svc *v, int64_t *out)
{
    size_t cap = (size_t)v->pol.max_per_hour;
    if (!v->fired || !cap)
        return 0;
    size_t first = v->n_fired < cap ? 0 : v->fired_pos;
    for (size_t i = 0; i < v->n_fired; i++)
        out[i] = v->fired[(first + i) % cap];
    return v->n_fired;
}

skp_err cont_eval_set_policy(struct cont_eval *e, struct cont_policy *p)
{
    struct cont_policy pol = *p;
    memset(p, 0, sizeof(*p));
    uint32_t idx;
    if (!skpx_strmap_get(&e->held, pol.service, &idx) || idx == 0) {
        if (skpx_strmap_put(&e->held, pol.service, 1) != SKP_OK)
            goto oom;
        e->n_held++;
    }
    struct svc *v = NULL;
    if (skpx_strmap_get(&e->by_name, pol.service, &idx)) {
        v = e->svcs[idx];
        if (v->active && strcmp(v->pol.uuid, pol.uuid) == 0) {
            cont_policy_cleanup(&pol); /* unchanged: keep the series and the quiet time */
            return SKP_OK;
        }
    }
    if (!cont_policy_has_server_items(&pol)) {
        if (v)
            svc_clear(e, v);
        cont_policy_cleanup(&pol);
        return SKP_OK;
    }
    if (!v) {
        if (skpx_grow(&e->svcs, &e->cap_svcs, e->n_svcs + 1, sizeof(*e->svcs), 8) != SKP_OK)
            goto oom;
        v = skpx_calloc(1, sizeof(*v));
        if (!v)
            goto oom;
        if (skpx_strmap_put(&e->by_name, pol.service, (uint32_t)e->n_svcs) != SKP_OK) {
            skpx_free(v);
            goto oom;
        }
        e->svcs[e->n_svcs++] = v;
    }
    /* An edited policy keeps the quiet time and the triggers of the last hour: editing must not
     * reset the hourly cap. */
    int64_t quiet = v->quiet_until_ms;
    int64_t past[CONT_PER_HOUR_MAX];
    size_t n_past = fired_in_order(v, past);
    svc_clear(e, v);
    v->quiet_until_ms = quiet;
    v->fired = skpx_calloc((size_t)pol.max_per_hour, sizeof(int64_t));
    if (!v->fired)
        goto oom;
    v->pol = pol;
    for (size_t i = 0; i < n_past; i++)
        note_fired(v, past[i]);
    v->window = 1;
    for (size_t t = 0; t < v->pol.n_targets; t++)
        for (size_t i = 0; i < v->pol.targets[t].n_items; i++) {
            const struct cont_item *it = &v->pol.targets[t].items[i];
            if (!cont_monitor_server_side(it->type) || v->n_items == MAX_FLAT_ITEMS)
                continue;
            v->items[v->n_items++] = (struct flat_item){v->pol.targets[t].type, it};
            if (it->period_s > v->window)
                v->window = it->period_s;
        }
    v->active = true;
    e->ctr.policies = 0;
    for (size_t i = 0; i < e->n_svcs; i++)
        e->ctr.policies += e->svcs[i]->active;
    return SKP_OK;
oom:
    cont_policy_cleanup(&pol);
    return SKP_ENOMEM;
}

bool cont_eval_policy_room(const struct cont_eval *e, const char *service)
{
    uint32_t held = 0;
    return (skpx_strmap_get(&e->held, service, &held) && held) || e->n_held < e->max_policies;
}

void cont_eval_remove_policy(struct cont_eval *e, const char *service)
{
    uint32_t held = 0;
    if (skpx_strmap_get(&e->held, service, &held) && held &&
        skpx_strmap_put(&e->held, service, 0) == SKP_OK) /* replaces: no allocation */
        e->n_held--;
    struct svc *v = find_svc(e, service);
    if (!v)
        return;
    svc_clear(e, v);
    e->ctr.policies--;
}

/* ---------------------------------------------------------------- slots */

static double slot_value(const struct slot_val *sv, enum cont_monitor m)
{
    switch (m) {
    case CONT_MON_ENDPOINT_AVG_RESPONSE_TIME:
        return sv->avg;
    case CONT_MON_ENDPOINT_P90_RESPONSE_TIME:
        return sv->p90;
    case CONT_MON_ENDPOINT_P99_RESPONSE_TIME:
        return sv->p99;
    case CONT_MON_ENDPOINT_ERROR_RATE:
        return 100.0 * sv->errors / sv->count;
    default:
        return NAN;
    }
}

/* Moves an open slot's values into the ring of closed slots and empties it (merged mode: the
 * ring is filled from every collector's shares instead, cont_eval_put_merged). */
static void close_slot(const struct cont_eval *e, const struct svc *v, struct series *s,
                       struct open_slot *o)
{
    if (o->count && !e->merged) {
        struct slot_val *sv = &s->ring[o->slot % v->window];
        sv->slot = o->slot;
        sv->count = o->count;
        sv->errors = o->errors;
        sv->avg = (float)(o->sum / o->count);
        sv->p90 = (float)es_hist_quantile(&o->hist, 0.90);
        sv->p99 = (float)es_hist_quantile(&o->hist, 0.99);
    }
    o->slot = -1;
    o->count = o->errors = 0;
    o->dirty = false;
    o->sum = 0;
    o->hist.n = 0; /* keep the bucket buffer for the next slot */
    o->hist.total = 0;
}

/* Closes the open slots before `first_open` (those out of the lateness horizon). */
static void roll(const struct cont_eval *e, const struct svc *v, struct series *s,
                 int64_t first_open)
{
    for (int64_t i = 0; i < e->n_open; i++)
        if (s->open[i].slot >= 0 && s->open[i].slot < first_open)
            close_slot(e, v, s, &s->open[i]);
}

static uint64_t items_matching(const struct svc *v, const char *endpoint)
{
    uint64_t m = 0;
    for (size_t i = 0; i < v->n_items; i++)
        if (cont_item_matches(v->items[i].it, endpoint))
            m |= UINT64_C(1) << i;
    return m;
}

/* The series of `endpoint`, created when an item matches it; NULL when none does (or bound). */
static struct series *series_of(struct cont_eval *e, struct svc *v, const char *endpoint)
{
    uint32_t idx;
    if (skpx_strmap_get(&v->ep, endpoint, &idx))
        return idx == NEG_MARK ? NULL : &v->series[idx];
    uint64_t m = items_matching(v, endpoint);
    if (!m) {
        if (v->n_neg >= CONT_EVAL_MAX_NEG) { /* forget the misses; tracked ones stay mapped */
            skpx_strmap_clear(&v->ep);
            v->n_neg = 0;
            for (size_t i = 0; i < v->n_series; i++)
                if (skpx_strmap_put(&v->ep, v->series[i].endpoint, (uint32_t)i) != SKP_OK)
                    return NULL;
        }
        if (skpx_strmap_put(&v->ep, endpoint, NEG_MARK) == SKP_OK)
            v->n_neg++;
        return NULL;
    }
    if (e->total_series >= e->max_series) {
        e->ctr.untracked++;
        return NULL;
    }
    if (skpx_grow(&v->series, &v->cap_series, v->n_series + 1, sizeof(*v->series), 8) != SKP_OK)
        return NULL;
    struct series *s = &v->series[v->n_series];
    memset(s, 0, sizeof(*s));
    s->endpoint = skpx_strdup(endpoint);
    s->ring = skpx_malloc((size_t)v->window * sizeof(*s->ring));
    s->open = skpx_calloc((size_t)e->n_open, sizeof(*s->open));
    if (!s->endpoint || !s->ring || !s->open ||
        skpx_strmap_put(&v->ep, endpoint, (uint32_t)v->n_series) != SKP_OK) {
        series_cleanup(e, s);
        return NULL;
    }
    for (int64_t i = 0; i < v->window; i++)
        s->ring[i].slot = -1;
    for (int64_t i = 0; i < e->n_open; i++)
        s->open[i].slot = -1;
    s->items = m;
    v->n_series++;
    e->total_series++;
    return s;
}

static void note_instance(struct series *s, const char *instance, int64_t slot)
{
    if (!instance || !*instance)
        return;
    size_t oldest = 0;
    for (size_t i = 0; i < CONT_EVAL_MAX_INSTANCES; i++) {
        if (s->inst[i] && strcmp(s->inst[i], instance) == 0) {
            s->inst_slot[i] = slot;
            return;
        }
        if (!s->inst[i] || s->inst_slot[i] < s->inst_slot[oldest])
            oldest = i;
        if (!s->inst[i])
            break;
    }
    char *c = skpx_strdup(instance);
    if (!c)
        return;
    skpx_free(s->inst[oldest]);
    s->inst[oldest] = c;
    s->inst_slot[oldest] = slot;
}

void cont_eval_record(struct cont_eval *e, const char *service, const char *instance,
                      const char *endpoint, int64_t end_ms, int64_t latency_ms, bool is_error,
                      int64_t now_ms)
{
    if (e->ctr.policies == 0)
        return;
    struct svc *v = find_svc(e, service);
    if (!v || !endpoint)
        return;
    struct series *s = series_of(e, v, endpoint);
    if (!s)
        return;
    /* the slot of the request's end, unless the agent's clock puts it outside the open slots:
     * then the slot it arrived in */
    int64_t cur = now_ms / e->slot_ms;
    int64_t slot = end_ms >= 0 ? end_ms / e->slot_ms : cur;
    if (slot > cur || slot <= cur - e->horizon) {
        slot = cur;
        e->ctr.reslotted++;
    }
    struct open_slot *o = &s->open[slot % e->n_open];
    if (o->slot != slot) {
        if (o->slot >= 0)
            close_slot(e, v, s, o); /* an older slot: out of the horizon by now */
        o->slot = slot;
    }
    if (latency_ms < 0)
        latency_ms = 0;
    if (es_hist_add(&o->hist, (uint64_t)latency_ms, 1, NULL) != SKP_OK)
        return;
    o->count++;
    o->errors += is_error;
    o->sum += (double)latency_ms;
    o->dirty = e->merged;
    note_instance(s, instance, cur);
    e->ctr.recorded++;
}

/* ---------------------------------------------------------------- evaluation */

/* The first slot not judged yet: closed slots end before the lateness horizon (and, merged,
 * before the time the other collectors' shares take to be stored). */
static int64_t closed_before(const struct cont_eval *e, int64_t now_ms)
{
    return now_ms / e->slot_ms - e->horizon - e->extra + 1;
}

/* Judges flat item i on series s over the `period` closed slots before `cur`. */
static bool judge(const struct flat_item *fi, const struct series *s, int64_t window, int64_t cur,
                  int64_t *hits, double *mean)
{
    int64_t period = fi->it->period_s < window ? fi->it->period_s : window;
    int64_t n = 0;
    double sum = 0;
    for (int64_t k = cur - period; k < cur; k++) {
        if (k < 0)
            continue;
        const struct slot_val *sv = &s->ring[k % window];
        if (sv->slot != k || !sv->count)
            continue;
        double val = slot_value(sv, fi->it->type);
        if (val >= fi->it->threshold) {
            n++;
            sum += val;
        }
    }
    *hits = n;
    *mean = n ? sum / (double)n : 0;
    return n >= fi->it->count;
}

static void eval_svc(struct cont_eval *e, struct svc *v, int64_t now_ms, cont_fire_cb cb, void *ud)
{
    int64_t cur = closed_before(e, now_ms);
    for (size_t i = 0; i < v->n_series; i++)
        roll(e, v, &v->series[i], cur);
    if (now_ms < v->quiet_until_ms)
        return;
    int64_t quiet = 0;
    for (size_t t = 0; t < v->pol.n_targets; t++) {
        enum cont_target target = v->pol.targets[t].type;
        struct cont_cause causes[CONT_EVAL_MAX_CAUSES];
        size_t nc = 0;
        const struct series *first = NULL;
        for (size_t i = 0; i < v->n_items; i++) {
            if (v->items[i].target != target)
                continue;
            for (size_t k = 0; k < v->n_series && nc < CONT_EVAL_MAX_CAUSES; k++) {
                const struct series *s = &v->series[k];
                int64_t hits;
                double mean;
                if (!(s->items >> i & 1) || !judge(&v->items[i], s, v->window, cur, &hits, &mean))
                    continue;
                causes[nc++] =
                    (struct cont_cause){.type = v->items[i].it->type,
                                        .uri = s->endpoint,
                                        .threshold = v->items[i].it->threshold,
                                        .current = mean,
                                        .window_s = v->items[i].it->period_s * e->slot_ms / 1000,
                                        .hits = hits,
                                        .period = v->items[i].it->period_s};
                if (!first)
                    first = s;
            }
        }
        if (!nc)
            continue;
        if (!under_cap(v, now_ms)) {
            e->ctr.suppressed++;
            continue;
        }
        const char *inst[CONT_EVAL_MAX_INSTANCES];
        size_t ni = 0;
        for (size_t k = 0; k < CONT_EVAL_MAX_INSTANCES; k++)
            if (first->inst[k] && first->inst_slot[k] >= cur - v->window - e->horizon)
                inst[ni++] = first->inst[k];
        struct cont_fire f = {.policy = &v->pol,
                              .target = target,
                              .causes = causes,
                              .n_causes = nc,
                              .instances = inst,
                              .n_instances = ni,
                              .now_ms = now_ms,
                              .window_end_ms = cur * e->slot_ms};
        int64_t task_end = cb ? cb(ud, &f) : 0;
        note_fired(v, now_ms);
        e->ctr.fired++;
        int64_t busy = now_ms + v->pol.execute_s * e->slot_ms;
        if (task_end > busy)
            busy = task_end;
        int64_t q = busy + v->pol.silence_s * e->slot_ms;
        if (q > quiet)
            quiet = q;
    }
    if (quiet)
        v->quiet_until_ms = quiet;
}

void cont_eval_tick(struct cont_eval *e, int64_t now_ms, cont_fire_cb cb, void *ud)
{
    for (size_t i = 0; i < e->n_svcs; i++)
        if (e->svcs[i]->active)
            eval_svc(e, e->svcs[i], now_ms, cb, ud);
}

skp_err cont_eval_values(struct cont_eval *e, const char *service, int64_t now_ms,
                         cont_series_cb cb, void *ud)
{
    struct svc *v = find_svc(e, service);
    if (!v)
        return SKP_ENOTFOUND;
    int64_t cur = closed_before(e, now_ms);
    double *vals = skpx_malloc((size_t)v->window * sizeof(double));
    if (!vals)
        return SKP_ENOMEM;
    skp_err err = SKP_OK;
    for (size_t k = 0; k < v->n_series && !err; k++) {
        struct series *s = &v->series[k];
        roll(e, v, s, cur);
        for (size_t i = 0; i < v->n_items && !err; i++) {
            if (!(s->items >> i & 1))
                continue;
            for (int64_t j = 0; j < v->window; j++) {
                int64_t slot = cur - v->window + j;
                const struct slot_val *sv = slot >= 0 ? &s->ring[slot % v->window] : NULL;
                vals[j] = sv && sv->slot == slot && sv->count ? slot_value(sv, v->items[i].it->type)
                                                              : NAN;
            }
            struct cont_series_view view = {
                .target = cont_target_name(v->items[i].target),
                .type = cont_monitor_name(v->items[i].it->type),
                .uri = s->endpoint,
                .threshold = v->items[i].it->threshold,
                .period = v->items[i].it->period_s,
                .count = v->items[i].it->count,
                .first_slot_ms = (cur - v->window) * e->slot_ms,
                .slot_ms = e->slot_ms,
                .values = vals,
                .n_values = (size_t)v->window,
            };
            err = cb(ud, &view);
        }
    }
    skpx_free(vals);
    return err;
}

void cont_eval_counters(const struct cont_eval *e, struct cont_eval_counters *out)
{
    *out = e->ctr;
    out->series = e->total_series;
}

void cont_eval_note_trigger(struct cont_eval *e, const char *service, int64_t time_ms,
                            bool made_task)
{
    struct svc *v = find_svc(e, service);
    if (!v || !v->active || !v->fired)
        return;
    note_fired(v, time_ms);
    int64_t busy = time_ms + v->pol.execute_s * e->slot_ms;
    if (made_task) { /* the task's end, as the firing collector's quiet time had it */
        int64_t min = (v->pol.execute_s + 59) / 60;
        min = min < 1 ? 1 : min > 15 ? 15 : min;
        if (time_ms + min * 60000 > busy)
            busy = time_ms + min * 60000;
    }
    int64_t q = busy + v->pol.silence_s * e->slot_ms;
    if (q > v->quiet_until_ms)
        v->quiet_until_ms = q;
}

/* ---------------------------------------------------------------- merged mode */

int64_t cont_eval_closed_before_ms(const struct cont_eval *e, int64_t now_ms)
{
    return closed_before(e, now_ms) * e->slot_ms;
}

int64_t cont_eval_window_ms(const struct cont_eval *e)
{
    int64_t w = 1;
    for (size_t i = 0; i < e->n_svcs; i++)
        if (e->svcs[i]->active && e->svcs[i]->window > w)
            w = e->svcs[i]->window;
    return w * e->slot_ms;
}

void cont_eval_roll(struct cont_eval *e, int64_t now_ms)
{
    int64_t cur = closed_before(e, now_ms);
    for (size_t i = 0; i < e->n_svcs; i++) {
        struct svc *v = e->svcs[i];
        for (size_t k = 0; v->active && k < v->n_series; k++)
            roll(e, v, &v->series[k], cur);
    }
}

void cont_eval_reset_triggers(struct cont_eval *e)
{
    for (size_t i = 0; i < e->n_svcs; i++) {
        struct svc *v = e->svcs[i];
        v->n_fired = v->fired_pos = 0;
        v->quiet_until_ms = 0;
    }
}

skp_err cont_eval_export(struct cont_eval *e, cont_part_cb cb, void *ud)
{
    if (!e->merged)
        return SKP_OK;
    skp_err err = SKP_OK;
    for (size_t i = 0; i < e->n_svcs && !err; i++) {
        struct svc *v = e->svcs[i];
        for (size_t k = 0; v->active && k < v->n_series && !err; k++) {
            struct series *s = &v->series[k];
            for (int64_t j = 0; j < e->n_open && !err; j++) {
                struct open_slot *o = &s->open[j];
                if (!o->dirty)
                    continue;
                const char *inst[CONT_EVAL_MAX_INSTANCES];
                size_t ni = 0;
                for (size_t q = 0; q < CONT_EVAL_MAX_INSTANCES; q++)
                    if (s->inst[q] && s->inst_slot[q] >= o->slot)
                        inst[ni++] = s->inst[q];
                struct cont_part p = {.service = v->pol.service,
                                      .endpoint = s->endpoint,
                                      .slot_ms = o->slot * e->slot_ms,
                                      .count = o->count,
                                      .errors = o->errors,
                                      .sum_ms = o->sum,
                                      .hist = &o->hist,
                                      .instances = inst,
                                      .n_instances = ni};
                err = cb(ud, &p);
                if (!err)
                    o->dirty = false;
            }
        }
    }
    return err;
}

void cont_eval_put_merged(struct cont_eval *e, const struct cont_part *p)
{
    struct svc *v = find_svc(e, p->service);
    if (!v || !p->endpoint || p->count <= 0 || p->slot_ms < 0)
        return;
    struct series *s = series_of(e, v, p->endpoint);
    if (!s)
        return;
    int64_t slot = p->slot_ms / e->slot_ms;
    struct slot_val *sv = &s->ring[slot % v->window];
    sv->slot = slot;
    sv->count = p->count > UINT32_MAX ? UINT32_MAX : (uint32_t)p->count;
    sv->errors = p->errors > (int64_t)sv->count ? sv->count : (uint32_t)p->errors;
    sv->avg = (float)(p->sum_ms / (double)p->count);
    sv->p90 = (float)es_hist_quantile(p->hist, 0.90);
    sv->p99 = (float)es_hist_quantile(p->hist, 0.99);
    for (size_t i = 0; i < p->n_instances; i++)
        note_instance(s, p->instances[i], slot);
}

void cont_eval_retain(struct cont_eval *e, bool (*keep)(void *ud, const char *service), void *ud)
{
    for (size_t i = 0; i < e->n_svcs; i++) {
        struct svc *v = e->svcs[i];
        if (!v->active || keep(ud, v->pol.service))
            continue;
        char *service = skpx_strdup(v->pol.service); /* the removal frees the policy's */
        if (service)
            cont_eval_remove_policy(e, service);
        skpx_free(service);
    }
}
