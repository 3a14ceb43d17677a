/* store_segments.c - trace segments (SegmentObject) and the profiled-segment listing of a task.
 * A segment row keeps the columns the listing needs (trace id, service, instance, endpoint,
 * start/end) plus its spans as one compact JSON text, already shaped as the API returns them,
 * so listing is a row read plus a parse. Single-threaded, like the rest of the store. */
#include "server/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/log.h"
#include "server/store_int.h"
#include "server/utf8.h"

static const char *str_or_empty(const char *s)
{
    return s ? s : "";
}

static const char *span_type_name(Skywalking__V3__SpanType t)
{
    switch (t) {
    case SKYWALKING__V3__SPAN_TYPE__Entry:
        return "Entry";
    case SKYWALKING__V3__SPAN_TYPE__Exit:
        return "Exit";
    case SKYWALKING__V3__SPAN_TYPE__Local:
        return "Local";
    default:
        return "Unknown";
    }
}

static const char *span_layer_name(Skywalking__V3__SpanLayer l)
{
    switch (l) {
    case SKYWALKING__V3__SPAN_LAYER__Database:
        return "Database";
    case SKYWALKING__V3__SPAN_LAYER__RPCFramework:
        return "RPCFramework";
    case SKYWALKING__V3__SPAN_LAYER__Http:
        return "Http";
    case SKYWALKING__V3__SPAN_LAYER__MQ:
        return "MQ";
    case SKYWALKING__V3__SPAN_LAYER__Cache:
        return "Cache";
    case SKYWALKING__V3__SPAN_LAYER__FAAS:
        return "FAAS";
    default:
        return "Unknown";
    }
}

static json_t *kv_array(Skywalking__V3__KeyStringValuePair *const *kv, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        json_t *o = json_pack("{s:o, s:o}", "key", skp_json_str(kv[i]->key), "value",
                              skp_json_str(kv[i]->value));
        if (!o || json_array_append_new(a, o) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *span_json(const Skywalking__V3__SegmentObject *seg,
                         const Skywalking__V3__SpanObject *sp)
{
    json_t *refs = json_array();
    json_t *logs = json_array();
    json_t *tags = kv_array(sp->tags, sp->n_tags);
    json_t *o = NULL;
    if (!refs || !logs || !tags)
        goto fail;
    for (size_t i = 0; i < sp->n_refs; i++) {
        const Skywalking__V3__SegmentReference *r = sp->refs[i];
        json_t *ro = json_pack("{s:o, s:o, s:i, s:s}", "traceId", skp_json_str(r->traceid),
                               "parentSegmentId", skp_json_str(r->parenttracesegmentid),
                               "parentSpanId", (int)r->parentspanid, "type",
                               r->reftype == SKYWALKING__V3__REF_TYPE__CrossThread
                                   ? "CROSS_THREAD"
                                   : "CROSS_PROCESS");
        if (!ro || json_array_append_new(refs, ro) != 0)
            goto fail;
    }
    for (size_t i = 0; i < sp->n_logs; i++) {
        json_t *data = kv_array(sp->logs[i]->data, sp->logs[i]->n_data);
        json_t *lo = data ? json_pack("{s:I, s:o}", "time", (json_int_t)sp->logs[i]->time,
                                      "data", data)
                          : NULL;
        if (!lo || json_array_append_new(logs, lo) != 0)
            goto fail;
    }
    char component[16];
    snprintf(component, sizeof(component), "%d", (int)sp->componentid);
    /* "component" is the agent's numeric component id as a string: the id → name table
     * (component-libraries.yml) is not part of skyprof. */
    o = json_pack("{s:i, s:i, s:o, s:o, s:o, s:o, s:I, s:I, s:o, s:s, s:o, s:s, s:b, s:s, "
                  "s:o, s:o}",
                  "spanId", (int)sp->spanid, "parentSpanId", (int)sp->parentspanid, "segmentId",
                  skp_json_str(seg->tracesegmentid), "refs", refs, "serviceCode",
                  skp_json_str(seg->service), "serviceInstanceName",
                  skp_json_str(seg->serviceinstance), "startTime", (json_int_t)sp->starttime,
                  "endTime", (json_int_t)sp->endtime, "endpointName",
                  skp_json_str(sp->operationname), "type", span_type_name(sp->spantype), "peer",
                  skp_json_str(sp->peer), "component", component, "isError", (int)sp->iserror,
                  "layer", span_layer_name(sp->spanlayer), "tags", tags, "logs", logs);
    return o; /* json_pack "o" stole refs/tags/logs, also on failure */
fail:
    json_decref(refs);
    json_decref(logs);
    json_decref(tags);
    return NULL;
}

/* Stores one segment inside the open transaction. */
static skp_err insert_segment(struct store *st, const Skywalking__V3__SegmentObject *seg,
                              int64_t received_ms)
{
    skp_err err = SKP_OK;
    char *text = NULL;
    int64_t start = INT64_MAX, end = INT64_MIN;
    const char *endpoint = NULL;
    json_t *spans = json_array();
    if (!spans)
        return SKP_ENOMEM;
    for (size_t i = 0; i < seg->n_spans; i++) {
        const Skywalking__V3__SpanObject *sp = seg->spans[i];
        if (sp->starttime < start)
            start = sp->starttime;
        if (sp->endtime > end)
            end = sp->endtime;
        if (!endpoint && sp->spantype == SKYWALKING__V3__SPAN_TYPE__Entry)
            endpoint = sp->operationname;
        json_t *o = span_json(seg, sp);
        if (!o || json_array_append_new(spans, o) != 0) {
            err = SKP_ENOMEM;
            goto out;
        }
    }
    if (seg->n_spans == 0)
        start = end = received_ms;
    if (end < start)
        end = start;
    /* No entry span (a local-only segment, e.g. a cross-thread continuation): name it after
     * its first span. */
    if (!endpoint && seg->n_spans > 0)
        endpoint = seg->spans[0]->operationname;
    size_t len = json_dumpb(spans, NULL, 0, JSON_COMPACT);
    text = skpx_malloc(len + 1);
    if (!text || json_dumpb(spans, text, len, JSON_COMPACT) != len) {
        err = SKP_ENOMEM;
        goto out;
    }
    text[len] = '\0';
    uint32_t ref = 0;
    err = store__segment_ref(st, str_or_empty(seg->tracesegmentid), start, &ref);
    if (err)
        goto out;
    sqlite3_stmt *s = store__stmt(st, STMT_SEGMENT_INS, &err);
    if (!s)
        goto out;
    sqlite3_bind_int64(s, 1, ref);
    sqlite3_bind_text(s, 2, str_or_empty(seg->traceid), -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, str_or_empty(seg->service), -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, str_or_empty(seg->serviceinstance), -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 5, str_or_empty(endpoint), -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 6, start);
    sqlite3_bind_int64(s, 7, end);
    sqlite3_bind_int64(s, 8, received_ms);
    sqlite3_bind_text(s, 9, text, (int)len, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        err = store__sqlerr(st, rc, "insert segment");
out:
    skpx_free(text);
    json_decref(spans);
    return err;
}

skp_err store_insert_segments(struct store *st, Skywalking__V3__SegmentObject *const *segs,
                              size_t n, int64_t received_ms)
{
    if (n == 0)
        return SKP_OK;
    if (!segs)
        return SKP_EINVAL;
    if (st->read_only)
        return SKP_EIO;
    skp_err err = store__begin(st);
    if (err)
        return err;
    for (size_t i = 0; i < n; i++) {
        if (!segs[i] || !segs[i]->tracesegmentid || !segs[i]->tracesegmentid[0])
            continue; /* nothing to key it by; the collector counts malformed input */
        err = insert_segment(st, segs[i], received_ms);
        if (err)
            goto fail;
    }
    err = store__commit(st);
    if (err)
        goto fail;
    return SKP_OK;
fail:
    store__rollback(st);
    return err;
}

/* ---- one segment ---- */

void store_segment_info_cleanup(struct store_segment_info *i)
{
    if (!i)
        return;
    skpx_free(i->trace_id);
    skpx_free(i->endpoint);
    i->trace_id = i->endpoint = NULL;
}

/* A copy of column i, NULL when it is NULL or empty; false on allocation failure. */
static bool col_dup(sqlite3_stmt *s, int i, char **out)
{
    const char *t = (const char *)sqlite3_column_text(s, i);
    *out = t && *t ? skpx_strdup(t) : NULL;
    return !t || !*t || *out;
}

skp_err store_get_segment_info(struct store *st, const char *segment_id,
                               struct store_segment_info *out)
{
    memset(out, 0, sizeof(*out));
    if (!segment_id)
        return SKP_EINVAL;
    sqlite3_stmt *s = NULL;
    /* The task is found through the segment's first snapshot (a primary-key seek). */
    skp_err err = store__prepare(st,
                                 "SELECT g.trace_id, COALESCE(NULLIF(g.endpoint, ''), t.endpoint), "
                                 "t.dump_period FROM segids si "
                                 "LEFT JOIN segments g ON g.seg = si.id "
                                 "LEFT JOIN task_keys tk ON tk.id = (SELECT sn.task FROM "
                                 "snapshots sn WHERE sn.seg = si.id ORDER BY sn.seq LIMIT 1) "
                                 "LEFT JOIN tasks t ON t.id = tk.task_id "
                                 "WHERE si.segment_id = ?",
                                 &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, segment_id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        out->dump_period = sqlite3_column_int(s, 2);
        if (!col_dup(s, 0, &out->trace_id) || !col_dup(s, 1, &out->endpoint)) {
            store_segment_info_cleanup(out);
            err = SKP_ENOMEM;
        }
    } else {
        err = rc == SQLITE_DONE ? SKP_ENOTFOUND : store__sqlerr(st, rc, "segment info");
    }
    sqlite3_finalize(s);
    return err;
}

/* ---- listing ---- */

struct listed {
    int64_t start;
    const char *segment_id; /* borrowed from obj */
    json_t *obj;
};

static int cmp_listed(const void *a, const void *b)
{
    const struct listed *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return strcmp(x->segment_id, y->segment_id);
}

/* Snapshot time range of (segment, task), for segments whose SegmentObject is missing: the
 * first dump's time (sequence 0, which a listed segment has) to the last dump's time. Two
 * primary-key seeks instead of a scan of the segment's dumps. */
static skp_err snapshot_range(struct store *st, int64_t seg, int64_t task, int64_t *lo,
                              int64_t *hi)
{
    skp_err err = SKP_OK;
    sqlite3_stmt *s = store__stmt(st, STMT_SEG_RANGE, &err);
    if (!s)
        return err;
    sqlite3_bind_int64(s, 1, seg);
    sqlite3_bind_int64(s, 2, task);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *lo = sqlite3_column_int64(s, 0);
        *hi = sqlite3_column_int64(s, 1);
        if (*hi < *lo)
            *hi = *lo;
    } else {
        err = store__sqlerr(st, rc, "snapshot range");
    }
    sqlite3_reset(s);
    return err;
}

/* Builds one listing object from a row of the listing query. */
static skp_err listed_from_row(struct store *st, sqlite3_stmt *s, const char *task_service,
                               struct listed *out)
{
    const char *segment_id = (const char *)sqlite3_column_text(s, 0);
    int64_t seg = sqlite3_column_int64(s, 1);
    int64_t task = sqlite3_column_int64(s, 2);
    bool have_segment = sqlite3_column_type(s, 3) != SQLITE_NULL;
    int64_t start = 0, end = 0;
    json_t *spans = NULL, *names = json_array();
    if (!names)
        return SKP_ENOMEM;
    skp_err err = SKP_OK;
    if (have_segment) {
        start = sqlite3_column_int64(s, 7);
        end = sqlite3_column_int64(s, 8);
        spans = json_loads((const char *)sqlite3_column_text(s, 9), 0, NULL);
        if (!spans || !json_is_array(spans)) {
            SKPX_ERROR("store: spans of segment %s are unreadable", segment_id);
            json_decref(spans);
            spans = json_array();
        }
        size_t i;
        json_t *sp;
        json_array_foreach(spans, i, sp)
        {
            json_object_set_new(sp, "profiled", json_true());
            const char *type = json_string_value(json_object_get(sp, "type"));
            json_t *ep = json_object_get(sp, "endpointName");
            if (type && strcmp(type, "Entry") == 0 && json_string_length(ep) > 0) {
                bool seen = false;
                size_t j;
                json_t *nm;
                json_array_foreach(names, j, nm) seen = seen || json_equal(nm, ep);
                if (!seen)
                    json_array_append(names, ep);
            }
        }
        const char *endpoint = (const char *)sqlite3_column_text(s, 6);
        if (json_array_size(names) == 0 && endpoint && *endpoint)
            json_array_append_new(names, json_string(endpoint));
    } else {
        err = snapshot_range(st, seg, task, &start, &end);
        if (err) {
            json_decref(names);
            return err;
        }
        spans = json_array();
    }
    const char *service = have_segment ? (const char *)sqlite3_column_text(s, 4) : task_service;
    out->obj = json_pack("{s:o, s:o, s:o, s:o, s:o, s:I, s:I, s:o}", "segmentId",
                         skp_json_str(segment_id), "traceId",
                         skp_json_str(have_segment ? (const char *)sqlite3_column_text(s, 3) : ""),
                         "service", skp_json_str(service), "instanceName",
                         skp_json_str(have_segment ? (const char *)sqlite3_column_text(s, 5) : ""),
                         "endpointNames", names, "start", (json_int_t)start, "duration",
                         (json_int_t)(end - start), "spans", spans);
    if (!out->obj)
        return SKP_ENOMEM;
    out->start = start;
    out->segment_id = json_string_value(json_object_get(out->obj, "segmentId"));
    return SKP_OK;
}

struct listed_vec {
    struct store *st;
    const char *task_service;
    struct listed *v;
    size_t n, cap;
};

static skp_err push_listed_row(void *ud, sqlite3_stmt *s)
{
    struct listed_vec *lv = ud;
    struct listed *nv = store__grow(lv->v, lv->n, &lv->cap, sizeof(*nv), 16);
    if (!nv)
        return SKP_ENOMEM;
    lv->v = nv;
    skp_err err = listed_from_row(lv->st, s, lv->task_service, &lv->v[lv->n]);
    if (!err)
        lv->n++;
    return err;
}

skp_err store_list_profiled_segments(struct store *st, const char *task_id, json_t **out)
{
    *out = NULL;
    if (!task_id)
        return SKP_EINVAL;
    sqlite3_stmt *s = NULL;
    struct listed_vec lv = {.st = st};
    char *task_service = NULL;
    json_t *arr = NULL;

    skp_err err = store__prepare(st, "SELECT service FROM tasks WHERE id = ?", &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, task_id, -1, SQLITE_STATIC);
    if (sqlite3_step(s) == SQLITE_ROW) {
        task_service = skpx_strdup((const char *)sqlite3_column_text(s, 0));
        if (!task_service) {
            err = SKP_ENOMEM;
            goto out;
        }
    }
    sqlite3_finalize(s);
    s = NULL;
    lv.task_service = task_service;

    err = store__prepare(st,
                         "SELECT si.segment_id, ts.seg, ts.task, g.trace_id, g.service, "
                         "g.instance, g.endpoint, g.start_ms, g.end_ms, g.spans "
                         "FROM task_keys tk JOIN task_segments ts ON ts.task = tk.id "
                         "JOIN segids si ON si.id = ts.seg "
                         "LEFT JOIN segments g ON g.seg = ts.seg "
                         "WHERE tk.task_id = ? AND EXISTS (SELECT 1 FROM snapshots sn "
                         "WHERE sn.seg = ts.seg AND sn.seq = 0 AND sn.task = ts.task)",
                         &s);
    if (err)
        goto out;
    sqlite3_bind_text(s, 1, task_id, -1, SQLITE_STATIC);
    err = store__each_row(st, s, push_listed_row, &lv, "list profiled segments");
    if (err)
        goto out;
    if (lv.n > 1)
        qsort(lv.v, lv.n, sizeof(*lv.v), cmp_listed);
    arr = json_array();
    if (!arr) {
        err = SKP_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < lv.n; i++) {
        if (json_array_append(arr, lv.v[i].obj) != 0) {
            err = SKP_ENOMEM;
            goto out;
        }
    }
    *out = arr;
    arr = NULL;
out:
    for (size_t i = 0; i < lv.n; i++)
        json_decref(lv.v[i].obj);
    skpx_free(lv.v);
    skpx_free(task_service);
    json_decref(arr);
    sqlite3_finalize(s);
    return err;
}
