/* cont_eval.c - slot windows and firing of continuous-profiling checks (see cont_eval.h). */
#include "agent/cont_eval.h"

#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/log.h"
#include "common/uri_regex.h"

static bool is_http(int m)
{
    return m == SKP_CONT_HTTP_ERROR_RATE || m == SKP_CONT_HTTP_AVG_RESPONSE_TIME;
}

void skp__cont_eval_init(struct skp__cont_eval *e)
{
    memset(e, 0, sizeof(*e));
}

static void drop_checks(struct skp__cont_eval *e)
{
    for (int t = 0; t < SKP_CONT_N_TARGETS; t++) {
        for (int m = 0; m < SKP_CONT_N_MONITORS; m++) {
            struct skp__cont_check *c = &e->chk[t][m];
            for (int i = 0; i < c->n_series; i++)
                skpx_free(c->series[i].vals);
            if (c->has_re)
                regfree(&c->re);
            memset(c, 0, sizeof(*c));
        }
    }
    skpx_free(e->pol);
    e->pol = NULL;
    e->needs_cpu = e->needs_threads = e->needs_load = e->needs_http = false;
}

void skp__cont_eval_cleanup(struct skp__cont_eval *e)
{
    drop_checks(e);
    skpx_free(e->ep_map);
    e->ep_map = NULL;
}

skp_err skp__cont_eval_set_policy(struct skp__cont_eval *e, const struct skp__cont_policy *p)
{
    drop_checks(e);
    if (!p)
        return SKP_OK;
    e->pol = skpx_malloc(sizeof(*e->pol));
    if (!e->pol)
        return SKP_ENOMEM;
    *e->pol = *p;
    if (!e->ep_map) {
        e->ep_map = skpx_malloc(SKP_CONT_EP_MAX * sizeof(*e->ep_map));
        if (!e->ep_map) {
            drop_checks(e);
            return SKP_ENOMEM;
        }
    }
    memset(e->ep_map, 0xfe, SKP_CONT_EP_MAX * sizeof(*e->ep_map)); /* -2: not computed */
    for (int t = 0; t < SKP_CONT_N_TARGETS; t++) {
        for (int m = 0; m < SKP_CONT_N_MONITORS; m++) {
            const struct skp__cont_item *it = &p->items[t][m];
            struct skp__cont_check *c = &e->chk[t][m];
            if (!it->present)
                continue;
            c->n_series = 1;
            if (is_http(m)) {
                e->needs_http = true;
                if (it->regex[0]) {
                    char why[160];
                    c->has_re =
                        skpx_uri_regex_compile(&c->re, it->regex, why, sizeof(why)) == SKP_OK;
                    if (!c->has_re)
                        SKPX_WARN("skyprof: continuous profiling: URIRegex %.100s refused (%s); "
                                  "its check never fires",
                                  it->regex, why);
                } else if (it->n_uris > 0) {
                    c->n_series = it->n_uris;
                } /* neither: one series of every endpoint */
            } else if (m == SKP_CONT_PROCESS_CPU) {
                e->needs_cpu = true;
            } else if (m == SKP_CONT_PROCESS_THREAD_COUNT) {
                e->needs_threads = true;
            } else {
                e->needs_load = true;
            }
            for (int i = 0; i < c->n_series; i++) {
                c->series[i].vals = skpx_calloc((size_t)it->period, sizeof(float));
                if (!c->series[i].vals) {
                    c->n_series = i;
                    drop_checks(e);
                    return SKP_ENOMEM;
                }
            }
        }
    }
    return SKP_OK;
}

void skp__cont_eval_clear(struct skp__cont_eval *e)
{
    for (int t = 0; t < SKP_CONT_N_TARGETS; t++)
        for (int m = 0; m < SKP_CONT_N_MONITORS; m++)
            for (int i = 0; i < e->chk[t][m].n_series; i++) {
                struct skp__cont_series *s = &e->chk[t][m].series[i];
                s->head = s->filled = 0;
                s->count = s->errors = s->sum_ms = 0;
            }
}

bool skp__cont_uri_matches(const char *name, const char *uri)
{
    if (strcmp(name, uri) == 0)
        return true;
    /* "GET:/path" (SkyWalking's HTTP operation names in several plugins): the path part */
    const char *c = strchr(name, ':');
    if (!c || c == name || c[1] != '/')
        return false;
    for (const char *p = name; p < c; p++)
        if (*p < 'A' || *p > 'Z')
            return false;
    return strcmp(c + 1, uri) == 0;
}

static bool regex_matches(const regex_t *re, const char *name)
{
    if (regexec(re, name, 0, NULL, 0) == 0)
        return true;
    const char *c = strchr(name, ':');
    return c && c[1] == '/' && regexec(re, c + 1, 0, NULL, 0) == 0;
}

/* The series of HTTP check (t, m) that endpoint `name` feeds, -1 none. */
static int series_of(const struct skp__cont_eval *e, int t, int m, const char *name)
{
    const struct skp__cont_item *it = &e->pol->items[t][m];
    const struct skp__cont_check *c = &e->chk[t][m];
    if (it->regex[0])
        return c->has_re && regex_matches(&c->re, name) ? 0 : -1;
    if (it->n_uris == 0)
        return 0;
    for (int i = 0; i < it->n_uris; i++)
        if (skp__cont_uri_matches(name, it->uris[i]))
            return i;
    return -1;
}

void skp__cont_eval_http(struct skp__cont_eval *e, int index, const char *name, uint64_t count,
                         uint64_t errors, uint64_t sum_ms)
{
    if (!e->pol || !e->needs_http || index < 0 || index >= SKP_CONT_EP_MAX || count == 0)
        return;
    if (errors > count)
        errors = count; /* counters read one after the other */
    for (int t = 0; t < SKP_CONT_N_TARGETS; t++) {
        for (int k = 0; k < 2; k++) {
            int m = k == 0 ? SKP_CONT_HTTP_ERROR_RATE : SKP_CONT_HTTP_AVG_RESPONSE_TIME;
            if (!e->pol->items[t][m].present)
                continue;
            int8_t *slot = &e->ep_map[index][t][k];
            if (*slot == -2) /* first request of this endpoint since the policy came */
                *slot = (int8_t)series_of(e, t, m, name);
            if (*slot < 0)
                continue;
            struct skp__cont_series *s = &e->chk[t][m].series[*slot];
            s->count += count;
            s->errors += errors;
            s->sum_ms += sum_ms;
        }
    }
}

static void push(struct skp__cont_series *s, int period, double v)
{
    s->vals[s->head] = (float)v;
    s->head = (s->head + 1) % period;
    if (s->filled < period)
        s->filled++;
}

void skp__cont_eval_slot(struct skp__cont_eval *e, const struct skp__cont_sample *smp)
{
    if (!e->pol)
        return;
    /* the process-wide monitors' values of this slot, and whether the sample has each */
    const struct {
        bool has;
        double v;
    } proc[SKP_CONT_N_MONITORS] = {
        [SKP_CONT_PROCESS_CPU] = {smp->has_cpu, smp->cpu_pct},
        [SKP_CONT_PROCESS_THREAD_COUNT] = {smp->has_threads, smp->threads},
        [SKP_CONT_SYSTEM_LOAD] = {smp->has_load, smp->load1},
    };
    for (int t = 0; t < SKP_CONT_N_TARGETS; t++) {
        for (int m = 0; m < SKP_CONT_N_MONITORS; m++) {
            struct skp__cont_check *c = &e->chk[t][m];
            int period = e->pol->items[t][m].period;
            for (int i = 0; i < c->n_series; i++) {
                struct skp__cont_series *s = &c->series[i];
                double v;
                if (m == SKP_CONT_HTTP_ERROR_RATE)
                    v = s->count ? (double)s->errors * 100.0 / (double)s->count : 0;
                else if (m == SKP_CONT_HTTP_AVG_RESPONSE_TIME)
                    v = s->count ? (double)s->sum_ms / (double)s->count : 0;
                else if (proc[m].has)
                    v = proc[m].v;
                else
                    continue;
                push(s, period, v);
                s->count = s->errors = s->sum_ms = 0;
            }
        }
    }
}

bool skp__cont_eval_fired(const struct skp__cont_eval *e, int target,
                          struct skp__cont_cause *causes, int cap, int *n_causes)
{
    *n_causes = 0;
    if (!e->pol || target < 0 || target >= SKP_CONT_N_TARGETS)
        return false;
    bool fired = false;
    for (int m = 0; m < SKP_CONT_N_MONITORS; m++) {
        const struct skp__cont_item *it = &e->pol->items[target][m];
        const struct skp__cont_check *c = &e->chk[target][m];
        if (!it->present)
            continue;
        for (int i = 0; i < c->n_series; i++) {
            const struct skp__cont_series *s = &c->series[i];
            int over = 0;
            double latest = 0;
            bool have_latest = false;
            /* newest first: the slot before head, back over the filled ones */
            for (int k = 1; k <= s->filled; k++) {
                float v = s->vals[(s->head - k + it->period) % it->period];
                if ((double)v >= it->threshold) {
                    over++;
                    if (!have_latest) {
                        latest = v;
                        have_latest = true;
                    }
                }
            }
            if (over < it->count)
                continue;
            fired = true;
            if (*n_causes >= cap)
                continue;
            struct skp__cont_cause *cs = &causes[(*n_causes)++];
            memset(cs, 0, sizeof(*cs));
            cs->monitor = m;
            cs->threshold = it->threshold;
            cs->current = latest;
            cs->n_over = over;
            cs->period = it->period;
            if (is_http(m) && (it->regex[0] || it->n_uris > 0)) {
                cs->uri_kind = it->regex[0] ? 2 : 1;
                snprintf(cs->uri, sizeof(cs->uri), "%s", it->regex[0] ? it->regex : it->uris[i]);
            }
        }
    }
    return fired;
}
