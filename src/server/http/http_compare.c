/* http_compare.c - POST /api/v1/profile/compare: two analysis selectors (a segment, a trace task,
 * either optionally cut to a time range; a pprof task's instances and sample type; an
 * async-profiler task's event kind, instances and thread) analysed by the existing analyzers
 * (analyzer.c, pprof_analyze.c, jfr_tree.c) and merged by profile_compare.c into one tree with
 * both weights and shares per node, plus the largest changes per frame (docs/compare.md).
 * granularity "functions" merges the lines of a function: pprof and JFR trees are built so, trace
 * analyses are reduced by the merge. The body is validated on the loop; both analyses and the
 * merge run as one worker job. */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/grow.h"
#include "server/analysis/analyzer.h"
#include "server/http/http_int.h"
#include "server/http/http_proc_analyze.h"
#include "server/analysis/jfr_tree.h"
#include "server/analysis/profile_compare.h"
#include "server/store/store_proc.h"
#include "server/formats/utf8.h"

/* Changes listed by default and at most. */
#define COMPARE_DEFAULT_LIMIT 20
#define COMPARE_MAX_LIMIT 10000
/* Longest string field of a selector (ids, filters, names). */
#define SELECTOR_FIELD_MAX 65536

enum cmp_kind { CK_SEGMENT, CK_TASK, CK_PPROF, CK_JFR };

static const char *const kind_names[] = {"segment", "task", "pprof", "jfr"};

struct cmp_side {
    enum cmp_kind kind;
    char *id; /* segment or task id */
    bool has_range;
    int64_t start_ms, end_ms; /* inclusive, when has_range */
    char *instances;          /* pprof/jfr: comma-separated filter, NULL = all */
    char *sample_type;        /* pprof: NULL = the profiles' default */
    char *event_type;         /* jfr: NULL = the task's first event */
    char *thread;             /* jfr: NULL = every thread */
};

struct cmp_job {
    struct http_job base;
    struct cmp_side side[2];
    bool by_function;
    size_t limit;
    uint64_t max_snapshots;
};

static void side_cleanup(struct cmp_side *s)
{
    SKPX_FREE_ALL(s->id, s->instances, s->sample_type, s->event_type, s->thread);
}

static void cmp_destroy(struct http_job *j)
{
    struct cmp_job *c = (struct cmp_job *)j;
    side_cleanup(&c->side[0]);
    side_cleanup(&c->side[1]);
    skpx_free(c);
}

/* ---- the analyses (worker thread) ---- */

struct seg_windows {
    struct analyze_query *q;
    size_t n, cap;
    int64_t lo, hi;
    skp_err err;
};

static skp_err window_push(void *ud, const struct store_profiled_segment *s)
{
    struct seg_windows *w = ud;
    int64_t a = s->start_ms > w->lo ? s->start_ms : w->lo;
    int64_t b = s->end_ms < w->hi ? s->end_ms : w->hi;
    if (a > b)
        return SKP_OK;
    if (skpx_grow(&w->q, &w->cap, w->n + 1, sizeof(*w->q), 16))
        return SKP_ENOMEM;
    char *id = skpx_strdup(s->segment_id);
    if (!id)
        return SKP_ENOMEM;
    w->q[w->n++] = (struct analyze_query){.segment_id = id, .start_ms = a, .end_ms = b};
    return SKP_OK;
}

/* A task's segments cut to [lo, hi]: every profiled segment overlapping it, each analysed over
 * the overlap. No segment overlapping gives an empty analysis. */
static skp_err task_range(struct store *st, const struct cmp_side *s, const struct analyze_opts *o,
                          struct analysis **out)
{
    struct seg_windows w = {.lo = s->start_ms, .hi = s->end_ms};
    skp_err err = store_list_profiled_segments(st, s->id, window_push, &w);
    if (!err && w.n == 0) {
        *out = skpx_calloc(1, sizeof(**out));
        err = *out ? SKP_OK : SKP_ENOMEM;
    } else if (!err) {
        err = analyze_segments(st, w.q, w.n, o, out);
    }
    for (size_t i = 0; i < w.n; i++)
        skpx_free((char *)w.q[i].segment_id);
    skpx_free(w.q);
    return err;
}

static skp_err trace_side(struct store *st, const struct cmp_side *s, uint64_t max_snapshots,
                          struct analysis **out)
{
    struct analyze_opts o = {.max_snapshots = max_snapshots};
    if (s->kind == CK_SEGMENT) {
        bool has = false;
        skp_err err = store_segment_has_snapshots(st, s->id, &has);
        if (err)
            return err;
        if (!has)
            return SKP_ENOTFOUND;
        if (!s->has_range)
            return analyze_segment_all(st, s->id, &o, out);
        struct analyze_query q = {
            .segment_id = s->id, .start_ms = s->start_ms, .end_ms = s->end_ms};
        return analyze_segments(st, &q, 1, &o, out);
    }
    struct store_task t = {0};
    skp_err err = store_get_task(st, s->id, &t);
    store_task_cleanup(&t);
    if (err)
        return err;
    return s->has_range ? task_range(st, s, &o, out) : analyze_task(st, s->id, &o, out);
}

/* A pprof or JFR task's merged tree, as its analyze route builds it (files that do not read are
 * left out), and the unit of its values. */
static skp_err proc_side(struct store *st, const struct cmp_side *s, bool by_function,
                         struct analysis **out, char *unit, size_t unit_len)
{
    struct http_proc_job *j =
        s->kind == CK_PPROF
            ? http_pprof_job_new(s->id, s->instances, s->sample_type, by_function)
            : http_jfr_job_new(s->id, s->instances, s->event_type, s->thread, by_function);
    if (!j)
        return SKP_ENOMEM;
    struct proc_task t = {0};
    void *acc = NULL;
    skp_err err = http_proc_get_task(st, j->fmt, s->id, &t);
    if (!err)
        err = http_proc_analysis(st, j, &t, &acc, out, NULL, NULL);
    if (!err)
        snprintf(unit, unit_len, "%s", j->fmt->unit(acc));
    j->fmt->free(acc);
    store_proc_task_cleanup(&t);
    http_proc_job_free(j);
    return err;
}

static json_t *side_json(const struct cmp_side *s, int64_t total, const char *unit)
{
    json_t *o = json_pack("{s:s,s:o,s:I,s:s}", "kind", kind_names[s->kind], "id",
                          skp_json_str(s->id), "total", (json_int_t)total, "unit", unit);
    if (o && s->has_range)
        json_object_set_new(
            o, "timeRange",
            json_pack("{s:I,s:I}", "start", (json_int_t)s->start_ms, "end", (json_int_t)s->end_ms));
    return o;
}

static json_t *result_json(const struct cmp_job *c, const struct compare_result *r,
                           const char units[2][32])
{
    json_t *nodes = json_array(), *changes = json_array();
    json_t *doc = json_object();
    if (!nodes || !changes || !doc)
        goto fail;
    for (size_t i = 0; i < r->n_nodes; i++) {
        const struct compare_node *n = &r->nodes[i];
        double b = compare_share(r, n, COMPARE_BASE), t = compare_share(r, n, COMPARE_TARGET);
        json_t *e = json_pack(
            "{s:I,s:I,s:o,s:I,s:I,s:I,s:I,s:f,s:f,s:f}", "id", (json_int_t)i + 1, "parentId",
            (json_int_t)(n->parent == UINT32_MAX ? 0 : n->parent + 1), "codeSignature",
            skp_json_str(n->sig), "base", (json_int_t)n->weight[0], "target",
            (json_int_t)n->weight[1], "baseSelf", (json_int_t)n->self[0], "targetSelf",
            (json_int_t)n->self[1], "baseShare", b, "targetShare", t, "delta", t - b);
        if (http_push_json(nodes, e))
            goto fail;
    }
    size_t lim = r->n_changes < c->limit ? r->n_changes : c->limit;
    for (size_t i = 0; i < lim; i++) {
        const struct compare_change *ch = &r->changes[i];
        json_t *e = json_pack(
            "{s:o,s:I,s:I,s:I,s:I,s:f,s:f,s:f,s:f,s:f,s:f}", "codeSignature", skp_json_str(ch->sig),
            "base", (json_int_t)ch->weight[0], "target", (json_int_t)ch->weight[1], "baseSelf",
            (json_int_t)ch->self[0], "targetSelf", (json_int_t)ch->self[1], "baseShare",
            ch->share[0], "targetShare", ch->share[1], "delta", ch->delta, "baseSelfShare",
            ch->self_share[0], "targetSelfShare", ch->self_share[1], "selfDelta", ch->self_delta);
        if (http_push_json(changes, e))
            goto fail;
    }
    /* json_object_set_new steals its value even when it fails. */
    int bad = json_object_set_new(doc, "base", side_json(&c->side[0], r->total[0], units[0]));
    bad |= json_object_set_new(doc, "target", side_json(&c->side[1], r->total[1], units[1]));
    bad |= json_object_set_new(doc, "nodes", nodes);
    bad |= json_object_set_new(doc, "changes", changes);
    nodes = changes = NULL;
    bad |= json_object_set_new(doc, "changesTotal", json_integer((json_int_t)r->n_changes));
    if (bad)
        goto fail;
    return doc;
fail:
    json_decref(nodes);
    json_decref(changes);
    json_decref(doc);
    return NULL;
}

static void cmp_run(struct http_job *j, struct store *st)
{
    struct cmp_job *c = (struct cmp_job *)j;
    struct analysis *a[2] = {NULL, NULL};
    char units[2][32] = {"dumps", "dumps"};
    struct compare_result *r = NULL;
    for (int i = 0; i < 2; i++) {
        const struct cmp_side *s = &c->side[i];
        skp_err err;
        if (s->kind == CK_PPROF || s->kind == CK_JFR)
            err = proc_side(st, s, c->by_function, &a[i], units[i], sizeof(units[i]));
        else
            err = trace_side(st, s, c->max_snapshots, &a[i]);
        if (err == SKP_ETOOBIG) {
            http_job_set_error(j, 413, "the %s profile is too large to compare",
                               i ? "target" : "base");
            goto out;
        }
        if (err) {
            char what[64];
            snprintf(what, sizeof(what), "%s %s", i ? "target" : "base", kind_names[s->kind]);
            http_job_set_store_error(j, err, what);
            goto out;
        }
    }
    skp_err err = compare_analyses(a[0], a[1], c->by_function, &r);
    if (err == SKP_ETOOBIG) {
        http_job_set_error(j, 413, "the merged tree is too large");
        goto out;
    }
    if (err) {
        http_job_set_store_error(j, err, "comparison");
        goto out;
    }
    http_job_set_json(j, 200, result_json(c, r, (const char(*)[32])units));
out:
    compare_free(r);
    analysis_free(a[0]);
    analysis_free(a[1]);
}

/* ---- the request (loop thread) ---- */

/* An optional string member copied into *out (NULL when absent or empty). Arrays of strings
 * ("instances") are joined with commas. Replies 400 and returns false when malformed. */
static bool opt_string(struct http_ctx *cx, json_t *sel, const char *side, const char *name,
                       char **out)
{
    json_t *v = json_object_get(sel, name);
    char field[64];
    snprintf(field, sizeof(field), "%s.%s", side, name);
    if (!v || json_is_null(v))
        return true;
    if (json_is_array(v) && strcmp(name, "instances") == 0) {
        size_t total = 0, i;
        json_t *e;
        json_array_foreach(v, i, e) {
            if (!json_is_string(e) || strchr(json_string_value(e), ',')) {
                http_reply_field_error(cx, 400, field, "instances must be names without commas");
                return false;
            }
            total += json_string_length(e) + 1;
        }
        if (total > SELECTOR_FIELD_MAX) {
            http_reply_field_error(cx, 400, field, "too long");
            return false;
        }
        if (total == 0)
            return true;
        char *s = skpx_malloc(total);
        if (!s) {
            http_reply_error(cx, 500, "out of memory");
            return false;
        }
        size_t at = 0;
        json_array_foreach(v, i, e) {
            size_t l = json_string_length(e);
            memcpy(s + at, json_string_value(e), l);
            at += l;
            s[at++] = ',';
        }
        s[at - 1] = '\0';
        *out = s;
        return true;
    }
    if (!json_is_string(v)) {
        http_reply_field_error(cx, 400, field, "must be a string");
        return false;
    }
    if (json_string_length(v) > SELECTOR_FIELD_MAX) {
        http_reply_field_error(cx, 400, field, "too long");
        return false;
    }
    if (json_string_length(v) == 0)
        return true;
    *out = skpx_strdup(json_string_value(v));
    if (!*out) {
        http_reply_error(cx, 500, "out of memory");
        return false;
    }
    return true;
}

static bool parse_range(struct http_ctx *cx, json_t *sel, const char *side, struct cmp_side *s)
{
    json_t *tr = json_object_get(sel, "timeRange");
    char field[64];
    snprintf(field, sizeof(field), "%s.timeRange", side);
    if (!tr || json_is_null(tr))
        return true;
    json_t *a = json_object_get(tr, "start"), *b = json_object_get(tr, "end");
    if (!json_is_object(tr) || !json_is_integer(a) || !json_is_integer(b)) {
        http_reply_field_error(cx, 400, field, "timeRange needs integer start and end (ms)");
        return false;
    }
    s->start_ms = json_integer_value(a);
    s->end_ms = json_integer_value(b);
    if (s->start_ms > s->end_ms) {
        http_reply_field_error(cx, 400, field, "timeRange.start is after timeRange.end");
        return false;
    }
    s->has_range = true;
    return true;
}

static bool parse_side(struct http_ctx *cx, json_t *body, const char *name, struct cmp_side *s)
{
    json_t *sel = json_object_get(body, name);
    char field[64];
    if (!json_is_object(sel)) {
        http_reply_field_error(cx, 400, name,
                               "base and target must be selector objects (docs/compare.md)");
        return false;
    }
    json_t *k = json_object_get(sel, "kind");
    const char *ks = json_is_string(k) ? json_string_value(k) : "";
    size_t n_kinds = sizeof(kind_names) / sizeof(kind_names[0]);
    size_t ki = 0;
    while (ki < n_kinds && strcmp(ks, kind_names[ki]) != 0)
        ki++;
    snprintf(field, sizeof(field), "%s.kind", name);
    if (ki == n_kinds) {
        http_reply_field_error(cx, 400, field, "kind must be one of segment, task, pprof, jfr");
        return false;
    }
    s->kind = (enum cmp_kind)ki;
    const char *id_name = s->kind == CK_SEGMENT ? "segmentId" : "taskId";
    if (!opt_string(cx, sel, name, id_name, &s->id))
        return false;
    if (!s->id) {
        snprintf(field, sizeof(field), "%s.%s", name, id_name);
        http_reply_field_error(cx, 400, field, "a non-empty id is needed");
        return false;
    }
    if (s->kind == CK_SEGMENT || s->kind == CK_TASK)
        return parse_range(cx, sel, name, s);
    if (!opt_string(cx, sel, name, "instances", &s->instances))
        return false;
    if (s->kind == CK_PPROF)
        return opt_string(cx, sel, name, "sampleType", &s->sample_type);
    if (!opt_string(cx, sel, name, "eventType", &s->event_type) ||
        !opt_string(cx, sel, name, "thread", &s->thread))
        return false;
    enum jfr_kind jk;
    if (s->event_type && jfr_kind_parse(s->event_type, &jk)) {
        snprintf(field, sizeof(field), "%s.eventType", name);
        http_reply_field_error(cx, 400, field, "unknown JFR event type");
        return false;
    }
    return true;
}

void http_compare_post(struct http_ctx *cx)
{
    json_t *body = http_read_json(cx);
    struct cmp_job *c = NULL;
    if (!body)
        return;
    if (!json_is_object(body)) {
        http_reply_error(cx, 400, "request body must be {base: selector, target: selector}");
        goto out;
    }
    c = http_job_new(cx, sizeof(*c), cmp_run, cmp_destroy);
    if (!c)
        goto out;
    c->max_snapshots = cx->api->max_analyze_snapshots;
    c->limit = COMPARE_DEFAULT_LIMIT;
    if (!parse_side(cx, body, "base", &c->side[0]) || !parse_side(cx, body, "target", &c->side[1]))
        goto out;
    json_t *g = json_object_get(body, "granularity");
    if (g && !json_is_null(g)) {
        const char *gs = json_is_string(g) ? json_string_value(g) : "";
        if (strcmp(gs, "lines") != 0 && strcmp(gs, "functions") != 0) {
            http_reply_field_error(cx, 400, "granularity",
                                   "granularity must be lines or "
                                   "functions");
            goto out;
        }
        c->by_function = strcmp(gs, "functions") == 0;
    }
    json_t *lim = json_object_get(body, "limit");
    if (lim && !json_is_null(lim)) {
        if (!json_is_integer(lim) || json_integer_value(lim) < 1 ||
            json_integer_value(lim) > COMPARE_MAX_LIMIT) {
            http_reply_field_error(cx, 400, "limit", "limit must be an integer 1..10000");
            goto out;
        }
        c->limit = (size_t)json_integer_value(lim);
    }
    http_job_dispatch(cx, &c->base);
    c = NULL;
out:
    if (c)
        cmp_destroy(&c->base);
    json_decref(body);
}
