/* http_endpoints.c - "no silent nothing": GET /api/v1/services/{name}/endpoints (the endpoint
 * names seen in the entry spans of every segment the service's agents reported - stored or not -
 * with counts and first/last seen, most requests first) and the reason a finished task has no
 * profiled segment (task "statusReason"). Source: the collector's in-memory endpoint statistics
 * for the minutes they hold (endpoint_stats.h, the last ES_DEFAULT_WINDOW_MIN minutes) and the
 * minutes rolled up into the store before them (store_list_endpoint_minutes), so nothing is
 * counted twice. Times have minute resolution except the last request of a minute still in
 * memory. The listing's pages are built on a worker (ep_job_run); the statusReason on the loop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/grow.h"
#include "server/stats/endpoint_stats.h"
#include "server/http/http_int.h"
#include "server/formats/utf8.h"

#define ENDPOINTS_MAX 1000       /* endpoints one listing collects (more: dropped) */
#define REASON_ENDPOINTS_SHOWN 5 /* endpoints named in a task's statusReason */
#define REASON_MAX 1024          /* bytes of a statusReason */
#define MINUTE_MS 60000

struct ep_acc {
    char *name;
    int64_t count;
    int64_t first_ms;
    int64_t last_ms;
};

/* The endpoints of one service over [from_ms, to_ms): owned names, at most ENDPOINTS_MAX. */
struct ep_set {
    struct ep_acc *v;
    size_t n, cap;
    int64_t from_ms, to_ms;
};

static void ep_set_cleanup(struct ep_set *s)
{
    for (size_t i = 0; i < s->n; i++)
        skpx_free(s->v[i].name);
    skpx_free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

/* Adds `count` requests seen from first_ms to last_ms to a. */
static void ep_acc_merge(struct ep_acc *a, int64_t count, int64_t first_ms, int64_t last_ms)
{
    a->count += count;
    if (first_ms < a->first_ms)
        a->first_ms = first_ms;
    if (last_ms > a->last_ms)
        a->last_ms = last_ms;
}

/* True for a minute `p` of `sum` that has requests and overlaps [s->from_ms, s->to_ms); then
 * *last_ms is its last request: the minute's end, or the summary's last request when that falls
 * inside the minute. */
static bool memory_minute(const struct ep_set *s, const struct es_summary *sum,
                          const struct es_point *p, int64_t *last_ms)
{
    if (p->minute_ms + MINUTE_MS <= s->from_ms || p->minute_ms >= s->to_ms || !p->count)
        return false;
    *last_ms = p->minute_ms + MINUTE_MS - 1;
    if (sum->last_seen_ms >= p->minute_ms && sum->last_seen_ms < *last_ms)
        *last_ms = sum->last_seen_ms;
    return true;
}

static skp_err ep_add(struct ep_set *s, const char *name, int64_t count, int64_t first_ms,
                      int64_t last_ms)
{
    if (!name || !*name || count <= 0)
        return SKP_OK;
    for (size_t i = 0; i < s->n; i++) {
        struct ep_acc *a = &s->v[i];
        if (strcmp(a->name, name) != 0)
            continue;
        ep_acc_merge(a, count, first_ms, last_ms);
        return SKP_OK;
    }
    if (s->n == ENDPOINTS_MAX)
        return SKP_OK; /* bounded: the rest is not listed */
    if (skpx_grow(&s->v, &s->cap, s->n + 1, sizeof(*s->v), 16))
        return SKP_ENOMEM;
    char *copy = skpx_strdup(name);
    if (!copy)
        return SKP_ENOMEM;
    s->v[s->n++] = (struct ep_acc){copy, count, first_ms, last_ms};
    return SKP_OK;
}

static skp_err stored_minute(void *ud, const struct store_endpoint_minute *m)
{
    return ep_add(ud, m->endpoint, (int64_t)m->count, m->minute_ms, m->minute_ms + MINUTE_MS - 1);
}

static skp_err memory_summary(void *ud, const struct es_summary *sum)
{
    struct ep_set *s = ud;
    for (size_t i = 0; i < sum->n_points; i++) {
        const struct es_point *p = &sum->points[i];
        int64_t last;
        if (!memory_minute(s, sum, p, &last))
            continue;
        skp_err err = ep_add(s, sum->endpoint, (int64_t)p->count, p->minute_ms, last);
        if (err)
            return err;
    }
    return SKP_OK;
}

static int by_count(const void *a, const void *b)
{
    const struct ep_acc *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Fills s with the endpoints of `service` whose requests ended in minutes overlapping
 * [from_ms, to_ms), most requests first. */
static skp_err collect(struct http_ctx *cx, const char *service, int64_t from_ms, int64_t to_ms,
                       struct ep_set *s)
{
    s->from_ms = from_ms;
    s->to_ms = to_ms;
    int64_t now = http_now(cx->api);
    /* the oldest minute the in-memory statistics hold; older minutes come from the store */
    int64_t mem_from = (now / MINUTE_MS - (ES_DEFAULT_WINDOW_MIN - 1)) * MINUTE_MS;
    skp_err err = SKP_OK;
    if (from_ms < mem_from) {
        int64_t lo = from_ms / MINUTE_MS * MINUTE_MS;
        int64_t hi = to_ms < mem_from ? to_ms : mem_from;
        err = store_list_endpoint_minutes(cx->api->store, service, lo, hi, stored_minute, s);
    }
    if (!err && to_ms > mem_from && cx->api->endpoint_stats)
        err = endpoint_stats_query(cx->api->endpoint_stats, service, ES_DEFAULT_WINDOW_MIN * 60,
                                   now, memory_summary, s);
    if (!err && s->n > 1)
        qsort(s->v, s->n, sizeof(*s->v), by_count);
    return err;
}

/* The listing as a worker job (issue 25): the loop copies the in-memory minutes as one
 * aggregate per endpoint (the statistics belong to the loop; at most ENDPOINTS_MAX entries, no
 * search), the worker reads the stored minutes from its own connection, merges, sorts and
 * serialises. */
struct ep_job {
    struct http_job base;
    char *service;
    int64_t from_ms, to_ms, mem_from, limit;
    int64_t now;       /* a stored minute's lastSeen is at most now */
    struct ep_set mem; /* in-memory minutes, one entry per endpoint, names unique */
};

static void ep_job_destroy(struct http_job *j)
{
    struct ep_job *p = (struct ep_job *)j;
    ep_set_cleanup(&p->mem);
    skpx_free(p->service);
    http_response_cleanup(&j->res);
    skpx_free(p);
}

/* Loop thread: one endpoint's in-memory minutes in [from_ms, to_ms) as one entry. */
static skp_err memory_copy(void *ud, const struct es_summary *sum)
{
    struct ep_set *s = ud;
    struct ep_acc a = {.count = 0, .first_ms = INT64_MAX, .last_ms = INT64_MIN};
    for (size_t i = 0; i < sum->n_points; i++) {
        const struct es_point *p = &sum->points[i];
        int64_t last;
        if (memory_minute(s, sum, p, &last))
            ep_acc_merge(&a, (int64_t)p->count, p->minute_ms, last);
    }
    if (!a.count || !sum->endpoint || !*sum->endpoint || s->n == ENDPOINTS_MAX)
        return SKP_OK;
    if (skpx_grow(&s->v, &s->cap, s->n + 1, sizeof(*s->v), 16))
        return SKP_ENOMEM;
    if (!(a.name = skpx_strdup(sum->endpoint)))
        return SKP_ENOMEM;
    s->v[s->n++] = a;
    return SKP_OK;
}

/* Worker thread. */
static void ep_job_run(struct http_job *j, struct store *st)
{
    struct ep_job *p = (struct ep_job *)j;
    struct ep_set s = {.from_ms = p->from_ms, .to_ms = p->to_ms};
    skp_err err = SKP_OK;
    if (p->from_ms < p->mem_from) {
        int64_t lo = p->from_ms / MINUTE_MS * MINUTE_MS;
        int64_t hi = p->to_ms < p->mem_from ? p->to_ms : p->mem_from;
        err = store_list_endpoint_minutes(st, p->service, lo, hi, stored_minute, &s);
    }
    for (size_t i = 0; !err && i < p->mem.n; i++) {
        const struct ep_acc *m = &p->mem.v[i];
        err = ep_add(&s, m->name, m->count, m->first_ms, m->last_ms);
    }
    for (size_t i = 0; !err && i < s.n; i++)
        if (s.v[i].last_ms > p->now)
            s.v[i].last_ms = p->now;
    if (!err && s.n > 1)
        qsort(s.v, s.n, sizeof(*s.v), by_count);
    json_t *list = err ? NULL : json_array();
    if (!err && !list)
        err = SKP_ENOMEM;
    for (size_t i = 0; !err && i < s.n && i < (size_t)p->limit; i++)
        err = http_push_json(
            list, json_pack("{s:o, s:I, s:I, s:I}", "name", skp_json_str(s.v[i].name), "count",
                            (json_int_t)s.v[i].count, "firstSeen", (json_int_t)s.v[i].first_ms,
                            "lastSeen", (json_int_t)s.v[i].last_ms));
    ep_set_cleanup(&s);
    if (err) {
        json_decref(list);
        http_job_set_store_error(j, err, "endpoints");
        return;
    }
    http_job_set_json(j, 200, list);
}

void http_services_endpoints(struct http_ctx *cx, const char *name)
{
    bool has_from = false, has_to = false, has_limit = false;
    int64_t from = 0, to = INT64_MAX, limit = 0;
    if (!http_query_int(cx, "from", &has_from, &from) || !http_query_int(cx, "to", &has_to, &to) ||
        !http_query_int(cx, "limit", &has_limit, &limit))
        return;
    if (!has_to)
        to = INT64_MAX;
    if (limit <= 0 || limit > ENDPOINTS_MAX)
        limit = ENDPOINTS_MAX;
    struct ep_job *p = http_job_new(cx, sizeof(*p), ep_job_run, ep_job_destroy);
    if (!p || !http_job_strdup(cx, &p->base, &p->service, name))
        return;
    p->from_ms = p->mem.from_ms = from;
    p->to_ms = p->mem.to_ms = to;
    p->limit = limit;
    int64_t now = http_now(cx->api);
    /* the oldest minute the in-memory statistics hold; older minutes come from the store */
    p->mem_from = (now / MINUTE_MS - (ES_DEFAULT_WINDOW_MIN - 1)) * MINUTE_MS;
    p->now = now;
    /* a database shared by several collectors (PostgreSQL): every minute from the store, where
     * each collector writes its current minutes every second (stats/endpoint_partials.h), so the
     * listing counts the whole cluster's requests */
    if (cx->api->db_remote)
        p->mem_from = INT64_MAX;
    skp_err err = SKP_OK;
    if (to > p->mem_from && cx->api->endpoint_stats)
        err = endpoint_stats_query(cx->api->endpoint_stats, name, ES_DEFAULT_WINDOW_MIN * 60, now,
                                   memory_copy, &p->mem);
    http_job_dispatch_after(cx, &p->base, err, "endpoints");
}

/* ---- a finished task's reason ---- */

static skp_err stop_at_first(void *ud, const struct store_profiled_segment *seg)
{
    (void)seg;
    *(bool *)ud = true;
    return SKP_EEXIST; /* one is enough: stop the listing */
}

/* Distinct instances of the task's NOTIFIED logs (logs: the array http_task_decorate built). */
static size_t notified_instances(json_t *logs)
{
    size_t n = 0;
    size_t i, j;
    json_t *l, *m;
    json_array_foreach(logs, i, l) {
        const char *op = json_string_value(json_object_get(l, "operationType"));
        const char *inst = json_string_value(json_object_get(l, "instanceName"));
        if (!op || !inst || strcmp(op, "NOTIFIED") != 0)
            continue;
        bool dup = false;
        json_array_foreach(logs, j, m) {
            if (j >= i)
                break;
            const char *op2 = json_string_value(json_object_get(m, "operationType"));
            const char *inst2 = json_string_value(json_object_get(m, "instanceName"));
            if (op2 && inst2 && !strcmp(op2, "NOTIFIED") && !strcmp(inst2, inst)) {
                dup = true;
                break;
            }
        }
        n += !dup;
    }
    return n;
}

skp_err http_task_explain(struct http_ctx *cx, json_t *task)
{
    const char *status = json_string_value(json_object_get(task, "status"));
    const char *id = json_string_value(json_object_get(task, "id"));
    const char *service = json_string_value(json_object_get(task, "service"));
    const char *endpoint = json_string_value(json_object_get(task, "endpointName"));
    if (!status || strcmp(status, "finished") != 0 || !id || !service || !endpoint)
        return SKP_OK;
    bool profiled = false;
    skp_err err = store_list_profiled_segments(cx->api->store, id, stop_at_first, &profiled);
    if (err && err != SKP_EEXIST)
        return err;
    if (profiled)
        return SKP_OK;
    int64_t start = json_integer_value(json_object_get(task, "startTime"));
    int64_t end = start + json_integer_value(json_object_get(task, "duration")) * 60000;
    size_t notified = notified_instances(json_object_get(task, "logs"));
    char reason[REASON_MAX];
    if (notified == 0) {
        snprintf(reason, sizeof(reason),
                 "no instance of %s was notified: no agent of this service polled for tasks "
                 "during the window",
                 service);
    } else {
        struct ep_set set = {0};
        err = collect(cx, service, start, end, &set);
        if (err) {
            ep_set_cleanup(&set);
            return err;
        }
        int64_t n_task_endpoint = 0;
        size_t n_other = 0;
        char seen[REASON_MAX / 2] = "";
        size_t len = 0;
        for (size_t i = 0; i < set.n; i++) {
            if (strcmp(set.v[i].name, endpoint) == 0) {
                n_task_endpoint = set.v[i].count;
                continue;
            }
            if (n_other++ >= REASON_ENDPOINTS_SHOWN)
                continue;
            int w = snprintf(seen + len, sizeof(seen) - len, "%s%s (%lld)", n_other > 1 ? ", " : "",
                             set.v[i].name, (long long)set.v[i].count);
            if (w > 0 && (size_t)w < sizeof(seen) - len)
                len += (size_t)w;
        }
        ep_set_cleanup(&set);
        const char *inst = notified == 1 ? "instance" : "instances";
        if (n_task_endpoint > 0)
            snprintf(reason, sizeof(reason),
                     "%lld request(s) to %s were seen on the %zu notified %s but none was "
                     "sampled: each was shorter than minDurationThreshold (%lld ms) or took no "
                     "profiling slot",
                     (long long)n_task_endpoint, endpoint, notified, inst,
                     (long long)json_integer_value(json_object_get(task, "minDurationThreshold")));
        else if (n_other > 0)
            snprintf(reason, sizeof(reason),
                     "no request to %s was seen on the %zu notified %s; endpoints seen: %s%s",
                     endpoint, notified, inst, seen,
                     n_other > REASON_ENDPOINTS_SHOWN ? ", ..." : "");
        else
            snprintf(reason, sizeof(reason),
                     "no request to %s was seen on the %zu notified %s; the service reported no "
                     "segment during the window",
                     endpoint, notified, inst);
    }
    json_t *v = skp_json_str(reason);
    if (!v || json_object_set_new(task, "statusReason", v) != 0)
        return SKP_ENOMEM;
    return SKP_OK;
}
