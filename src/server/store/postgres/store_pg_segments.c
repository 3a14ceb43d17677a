/* store_pg_segments.c - PostgreSQL backend: trace segments and the profiled-segment listing of
 * a task (one range scan of segment_listing per page: keyset on (start, segment id), the order
 * of the SQLite backend, byte order of ids); store_get_segment_info: store/store_segment_info.c.
 * Spans are kept as the shared JSON text (store_codec.h). */
#include "server/store/postgres/store_pg_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/log.h"
#include "server/store/store_codec.h"

/* ---- ingest ---- */

static skp_err insert_segment(struct pg_store *st, const struct store_segment *seg, uint32_t ref,
                              int64_t received_ms)
{
    struct store_segment_row row;
    skp_err err = store_segment_row_of(seg, received_ms, &row);
    if (err)
        return err;
    row.seg = ref;
    struct pg_params p = {0};
    pgp_row(&p, &store_segment_row, &row); /* texts borrowed until the statement ran */
    PQclear(pg__execp(st, PGS_SEGMENT_INS, &p, &err, "insert segment"));
    pgp_free(&p);
    skpx_free(row.spans);
    return err;
}

/* The segments' ids as an array literal (owned; NULL: out of memory). */
static char *seg_array(const struct pg_ref_req *refs, size_t n)
{
    struct pg_buf arr = {0};
    pgb_putc(&arr, '{');
    for (size_t i = 0; i < n; i++) {
        if (i)
            pgb_putc(&arr, ',');
        pgb_int(&arr, refs[i].seg);
    }
    pgb_putc(&arr, '}');
    return pgb_take(&arr);
}

/* The segids rows of the segments about to be stored, FOR UPDATE in id order, as the
 * segment_listing trigger of each SegmentObject will (schema step 3), so that two batches
 * never lock them in orders that wait in a cycle. `segs`: seg_array's. */
static skp_err listing_lock(struct pg_store *st, const char *segs)
{
    struct pg_params p = {0};
    pgp_text(&p, segs);
    skp_err err = SKP_OK;
    PQclear(pg__query(st,
                      "SELECT 1 FROM segids WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE",
                      &p, &err, "lock listed segments"));
    return err;
}

skp_err pg_store_insert_segments(struct store *base, const struct store_segment *v, size_t n,
                                 int64_t received_ms)
{
    struct pg_store *st = pg_store_of(base);
    struct pg_ref_req *refs = NULL;
    skp_err err = pg__ref_reqs(st, n, &refs);
    if (err)
        return err;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!store_segment_storable(&v[i]))
            continue; /* nothing to key it by; the collector counts malformed input */
        refs[k].segment_id = v[i].segment_id;
        refs[k].first_ms = received_ms; /* the retention clock */
        refs[k].n_frames = SIZE_MAX;
        k++;
    }
    for (int attempt = 0; attempt < 3 && k; attempt++) {
        err = pg__begin(st);
        if (err)
            break;
        err = pg__batch_epoch(st);
        if (!err)
            err = pg__resolve(st, refs, k);
        char *segs = err ? NULL : seg_array(refs, k);
        if (!err && !segs)
            err = SKP_ENOMEM;
        if (!err)
            err = listing_lock(st, segs);
        size_t j = 0;
        for (size_t i = 0; i < n && !err; i++) {
            if (!store_segment_storable(&v[i]))
                continue;
            err = insert_segment(st, &v[i], refs[j++].seg, received_ms);
        }
        skpx_free(segs);
        if (!err)
            err = pg__commit(st);
        if (!err)
            break;
        bool retry = pg__retryable(st);
        pg__rollback(st);
        if (!retry)
            break;
    }
    skpx_free(refs);
    return err;
}

/* ---- one segment ---- */

skp_err pg_store_segment_has_snapshots(struct store *base, const char *segment_id, bool *out)
{
    struct pg_store *st = pg_store_of(base);
    *out = false;
    uint32_t seg = 0;
    int64_t first = 0;
    skp_err err = pg__segment_find(st, segment_id, &seg, &first);
    if (err)
        return err == SKP_ENOTFOUND ? SKP_OK : err;
    struct pg_params p = {0};
    pgp_int(&p, seg);
    pgp_int(&p, first);
    PGresult *r = pg__query(st, "SELECT 1 FROM snapshots WHERE seg = $1 AND first_ms = $2 LIMIT 1",
                            &p, &err, "segment has snapshots");
    if (!r)
        return err;
    *out = PQntuples(r) > 0;
    PQclear(r);
    return SKP_OK;
}

/* ---- listing ---- */

skp_err pg_store_list_profiled_segments(struct store *base, const char *task_id,
                                        store_profiled_segment_cb cb, void *ud)
{
    return pg_store_list_profiled_segments_page(base, task_id, NULL, 0, cb, ud, NULL);
}

/* A page is one range scan of segment_listing_by_start (schema step 3) - (task, start, id head,
 * seg): the listing's order, from the cursor on - then the page's rows' segids, SegmentObjects
 * and last dumps by primary key. So a page reads its own rows (plus one that tells whether more
 * follow), whatever the size of the task, and nothing sorts them: the plan cannot depend on
 * estimates (all of a task's segments may share one start). Rows of equal (start, id head) -
 * ids longer than PG_LISTING_HEAD_SQL characters sharing their head - follow in seg order; the
 * cursor finds its own row's seg by its id (gone: past every row of its (start, head)). The end
 * of a segment without object is its last dump's time (that segment's keys in its partition's
 * primary key, backwards). $1 task id, $2 limit (NULL: all), $3/$4 the cursor's start and
 * segment id. */
#define PAGE_SELECT                                                                                \
    "SELECT si.segment_id, g.seg IS NOT NULL, l.start_ms, "                                        \
    "  CASE WHEN g.seg IS NULL THEN (SELECT sn.time FROM snapshots sn WHERE sn.seg = l.seg AND "   \
    "   sn.task = l.task AND sn.first_ms = si.first_ms ORDER BY sn.seq DESC LIMIT 1) END, "        \
    "  g.trace_id, g.service, g.instance, g.endpoint, g.start_ms, g.end_ms, g.spans, "             \
    "  (SELECT service FROM tasks WHERE id = $1) "                                                 \
    "FROM segment_listing l JOIN segids si ON si.id = l.seg "                                      \
    "LEFT JOIN segments g ON g.seg = l.seg "                                                       \
    "WHERE l.task = (SELECT id FROM task_keys WHERE md5(task_id) = md5($1) AND task_id = $1) "
#define PAGE_ORDER "ORDER BY l.start_ms, l.id_head, l.seg LIMIT $2"
#define PAGE_AFTER                                                                                 \
    "AND (l.start_ms, l.id_head, l.seg) > ($3::bigint, left($4::text, " PG_LISTING_HEAD_SQL "), "  \
    "  coalesce((SELECT id FROM segids WHERE md5(segment_id) = md5($4) AND segment_id = $4), "     \
    "  9223372036854775807)) "

const char pg__page_sql_first[] = PAGE_SELECT PAGE_ORDER;
const char pg__page_sql_after[] = PAGE_SELECT PAGE_AFTER PAGE_ORDER;

/* Without object: the task's service, the listing's start and the last dump's time. */
static skp_err visit_row(const PGresult *r, int i, store_profiled_segment_cb cb, void *ud)
{
    bool object = strcmp(pg__txt(r, i, 1), "t") == 0;
    struct store_profiled_segment p = {
        .segment_id = pg__txt(r, i, 0),
        .has_object = object,
        .trace_id = pg__txt(r, i, 4),
        .service = object               ? pg__txt(r, i, 5)
                   : pg__null(r, i, 11) ? ""
                                        : pg__txt(r, i, 11),
        .instance = pg__txt(r, i, 6),
        .endpoint = pg__txt(r, i, 7),
        .start_ms = pg__i64(r, i, object ? 8 : 2),
        .end_ms = pg__i64(r, i, object ? 9 : 3),
    };
    return store_profiled_segment_visit(&p, pg__txt(r, i, 10), cb, ud);
}

skp_err pg_store_list_profiled_segments_page(struct store *base, const char *task_id,
                                             const struct store_segment_key *after, size_t limit,
                                             store_profiled_segment_cb cb, void *ud, bool *more)
{
    struct pg_store *st = pg_store_of(base);
    if (more)
        *more = false;
    if (!task_id || !cb || (after && !after->segment_id))
        return SKP_EINVAL;
    skp_err err = SKP_OK;
    struct pg_params p = {0};
    pgp_text(&p, task_id);
    if (limit && limit < (size_t)INT64_MAX)
        pgp_int(&p, (int64_t)limit + 1); /* one more tells whether segments remain */
    else
        pgp_text(&p, NULL); /* LIMIT NULL: all */
    if (after) {
        pgp_int(&p, after->start_ms);
        pgp_text(&p, after->segment_id);
    }
    PGresult *r = pg__query(st, after ? pg__page_sql_after : pg__page_sql_first, &p, &err,
                            "list profiled segments");
    if (!r)
        return err;
    int rows = PQntuples(r);
    if (limit && (size_t)rows > limit) {
        rows = (int)limit;
        if (more)
            *more = true;
    }
    for (int i = 0; i < rows && !err; i++)
        err = visit_row(r, i, cb, ud);
    PQclear(r);
    return err;
}
