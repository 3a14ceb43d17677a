/* store_sqlite_segments.c - SQLite backend: trace segments and the profiled-segment listing of
 * a task (store_get_segment_info: store/store_segment_info.c). A segment row keeps the columns
 * the listing needs (trace id, service, instance, endpoint, start/end) plus its spans as one
 * compact JSON text (the backend's column format since schema v1, see docs/internals/store.md),
 * written from and read back into struct store_span rows here. Single-threaded, like the rest
 * of the store. */
#include "server/store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/log.h"
#include "server/store/store_codec.h"
#include "server/store/sqlite/store_int.h"
#include "server/formats/utf8.h"

/* ---- ingest ---- */

/* Stores one segment inside the open transaction. */
static skp_err insert_segment(struct sqlite_store *st, const struct store_segment *seg,
                              int64_t received_ms)
{
    struct store_segment_row row;
    skp_err err = store_segment_row_of(seg, received_ms, &row);
    if (err)
        return err;
    uint32_t ref = 0;
    err = store__segment_ref(st, seg->segment_id, received_ms, &ref); /* retention clock */
    row.seg = ref;
    sqlite3_stmt *s = err ? NULL : store__stmt(st, STMT_SEGMENT_INS, &err);
    if (s) {
        store__bind_row(s, 1, &store_segment_row, &row);
        err = store__step_done(st, s, "insert segment");
    }
    skpx_free(row.spans);
    return err;
}

skp_err sqlite_store_insert_segments(struct store *base, const struct store_segment *v, size_t n,
                                     int64_t received_ms)
{
    struct sqlite_store *st = sqlite_store_of(base);
    skp_err err = store__begin(st);
    if (err)
        return err;
    for (size_t i = 0; i < n; i++) {
        if (!store_segment_storable(&v[i]))
            continue;
        err = insert_segment(st, &v[i], received_ms);
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

skp_err sqlite_store_segment_has_snapshots(struct store *base, const char *segment_id, bool *out)
{
    struct sqlite_store *st = sqlite_store_of(base);
    *out = false;
    uint32_t seg = 0;
    skp_err err = store__segment_find(st, segment_id, &seg);
    if (err)
        return err == SKP_ENOTFOUND ? SKP_OK : err;
    struct store_params p = {0};
    store_param_int(&p, seg);
    return store__query_exists(st, "SELECT 1 FROM snapshots WHERE seg = ? LIMIT 1", &p, out,
                               "segment has snapshots");
}

/* ---- listing ---- */

/* A page is one range seek on segment_listing (schema v8): its primary key is (task, start,
 * segment id), the listing's order, kept by triggers as snapshots and SegmentObjects arrive and
 * go. So a page reads its own rows (plus one to tell whether more follow), whatever the size of
 * the task. Each row's SegmentObject is read with it, so one segment's spans are in memory at a
 * time. */

/* Snapshot time range of (segment, task), for segments whose SegmentObject is missing: the
 * first dump's time (sequence 0, which a listed segment has) to the last dump's time. Two
 * primary-key seeks instead of a scan of the segment's dumps. */
static skp_err snapshot_range(struct sqlite_store *st, int64_t seg, int64_t task, int64_t *lo,
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

/* Columns of the page query below. */
enum {
    LC_SEGMENT_ID,
    LC_SEG,
    LC_TASK,
    LC_START,
    LC_HAS_OBJECT,
    LC_TRACE_ID,
    LC_SERVICE,
    LC_INSTANCE,
    LC_ENDPOINT,
    LC_END,
    LC_SPANS,
};

#define LISTING_SELECT                                                                             \
    "SELECT l.segment_id, l.seg, l.task, l.start_ms, g.seg IS NOT NULL, g.trace_id, g.service, "   \
    "g.instance, g.endpoint, g.end_ms, g.spans "                                                   \
    "FROM task_keys tk JOIN segment_listing l ON l.task = tk.id "                                  \
    "LEFT JOIN segments g ON g.seg = l.seg WHERE tk.task_id = ?1 "
#define LISTING_ORDER "ORDER BY l.start_ms, l.segment_id LIMIT ?2"

/* One row of the page: builds the segment (spans parsed from its object) and visits it. */
static skp_err visit_row(struct sqlite_store *st, sqlite3_stmt *s, const char *task_service,
                         store_profiled_segment_cb cb, void *ud)
{
    bool object = sqlite3_column_int(s, LC_HAS_OBJECT) != 0;
    struct store_profiled_segment p = {
        .segment_id = store__col_text(s, LC_SEGMENT_ID),
        .has_object = object,
        .trace_id = store__col_text(s, LC_TRACE_ID),
        .service = object         ? store__col_text(s, LC_SERVICE)
                   : task_service ? task_service
                                  : "",
        .instance = store__col_text(s, LC_INSTANCE),
        .endpoint = store__col_text(s, LC_ENDPOINT),
        .start_ms = sqlite3_column_int64(s, LC_START),
        .end_ms = sqlite3_column_int64(s, LC_END),
    };
    if (!object) {
        p.start_ms = p.end_ms = 0;
        skp_err err = snapshot_range(st, sqlite3_column_int64(s, LC_SEG),
                                     sqlite3_column_int64(s, LC_TASK), &p.start_ms, &p.end_ms);
        if (err)
            return err;
    }
    return store_profiled_segment_visit(&p, store__col_text(s, LC_SPANS), cb, ud);
}

skp_err sqlite_store_list_profiled_segments(struct store *base, const char *task_id,
                                            store_profiled_segment_cb cb, void *ud)
{
    return sqlite_store_list_profiled_segments_page(base, task_id, NULL, 0, cb, ud, NULL);
}

skp_err sqlite_store_list_profiled_segments_page(struct store *base, const char *task_id,
                                                 const struct store_segment_key *after,
                                                 size_t limit, store_profiled_segment_cb cb,
                                                 void *ud, bool *more)
{
    struct sqlite_store *st = sqlite_store_of(base);
    if (more)
        *more = false;
    if (!task_id || !cb || (after && !after->segment_id))
        return SKP_EINVAL;
    sqlite3_stmt *s = NULL;
    char *task_service = NULL;

    skp_err err = store__prepare(st, "SELECT service FROM tasks WHERE id = ?", &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, task_id, -1, SQLITE_STATIC);
    if (sqlite3_step(s) == SQLITE_ROW) {
        task_service = skpx_strdup(store__col_text(s, 0));
        if (!task_service) {
            err = SKP_ENOMEM;
            goto out;
        }
    }
    sqlite3_finalize(s);
    s = NULL;

    /* A row value comparison after the cursor: SQLite seeks the primary key to it. */
    err = store__prepare(st,
                         after ? LISTING_SELECT
                             "AND (l.start_ms, l.segment_id) > (?3, ?4) " LISTING_ORDER
                               : LISTING_SELECT LISTING_ORDER,
                         &s);
    if (err)
        goto out;
    sqlite3_bind_text(s, 1, task_id, -1, SQLITE_STATIC);
    /* One row past the page answers *more. */
    sqlite3_bind_int64(s, 2, limit && limit < (size_t)INT64_MAX ? (int64_t)limit + 1 : -1);
    if (after) {
        sqlite3_bind_int64(s, 3, after->start_ms);
        sqlite3_bind_text(s, 4, after->segment_id, -1, SQLITE_STATIC);
    }
    size_t n = 0;
    int rc = SQLITE_DONE;
    while (!err && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (limit && n == limit) {
            if (more)
                *more = true;
            break;
        }
        n++;
        err = visit_row(st, s, task_service, cb, ud);
    }
    if (!err && rc != SQLITE_ROW && rc != SQLITE_DONE)
        err = store__sqlerr(st, rc, "list profiled segments");
out:
    skpx_free(task_service);
    sqlite3_finalize(s);
    return err;
}
