/* store_sqlite_ingest.c - SQLite backend: snapshot ingest (one transaction per acknowledged
 * batch, duplicates ignored by primary key) and the analyzer's scans. Single-threaded. */
#include "server/store/store.h"

#include <string.h>

#include "common/alloc.h"
#include "common/log.h"
#include "server/store/sqlite/store_int.h"

/* ---- snapshots ---- */

static skp_err insert_one(struct sqlite_store *st, const struct store_snapshot *sn, bool *dup)
{
    uint32_t seg = 0, task = 0, stack = 0;
    const char *seg_id = sn->segment_id ? sn->segment_id : "";
    const char *task_id = sn->task_id ? sn->task_id : "";
    /* A segment ages out from when we first received it, not from the agent's clock (a 1970 or
     * far-future snapshot time would otherwise purge it at once or never). */
    skp_err err =
        store__segment_ref(st, seg_id, sn->received_ms ? sn->received_ms : sn->time_ms, &seg);
    if (!err)
        err = store__task_key(st, task_id, true, &task);
    if (!err)
        err = store__stack_ref(st, sn->frames, sn->frames ? sn->n_frames : 0, &stack);
    if (err)
        return err;
    uint64_t pair = (uint64_t)task << 32 | seg;
    uint64_t one;
    sqlite3_stmt *s;
    if (!skpx_u64map_get(&st->task_segs, pair, &one)) {
        s = store__stmt(st, STMT_TASKSEG_INS, &err);
        if (!s)
            return err;
        sqlite3_bind_int64(s, 1, task);
        sqlite3_bind_int64(s, 2, seg);
        err = store__step_done(st, s, "insert task segment");
        if (err)
            return err;
        if (st->task_segs.n >= STORE_PAIR_CACHE_MAX)
            skpx_u64map_clear(&st->task_segs);
        if (skpx_u64map_put(&st->task_segs, pair, 1) != SKP_OK) {
            /* only a cache: the INSERT OR IGNORE runs again next time */
        }
    }
    s = store__stmt(st, st->unweighted ? STMT_SNAP_INS_UNWEIGHTED : STMT_SNAP_INS, &err);
    if (!s)
        return err;
    sqlite3_bind_int64(s, 1, seg);
    sqlite3_bind_int(s, 2, sn->sequence);
    sqlite3_bind_int64(s, 3, task);
    sqlite3_bind_int64(s, 4, sn->time_ms);
    sqlite3_bind_int64(s, 5, stack);
    if (!st->unweighted)
        sqlite3_bind_int64(s, 6, sn->weight ? sn->weight : 1);
    err = store__step_done(st, s, "insert snapshot");
    if (err)
        return err;
    *dup = sqlite3_changes(st->db) == 0;
    return SKP_OK;
}

skp_err sqlite_store_insert_snapshots(struct store *base, const struct store_snapshot *v, size_t n,
                                      size_t *n_dup)
{
    struct sqlite_store *st = sqlite_store_of(base);
    size_t dups = 0;
    skp_err err = store__begin(st);
    if (err)
        return err;
    for (size_t i = 0; i < n; i++) {
        bool dup = false;
        err = insert_one(st, &v[i], &dup);
        if (err)
            goto fail;
        dups += dup;
    }
    err = store__commit(st);
    if (err)
        goto fail;
    if (st->n_snapshots >= 0)
        st->n_snapshots += (int64_t)(n - dups);
    if (n_dup)
        *n_dup = dups;
    return SKP_OK;
fail:
    store__rollback(st);
    return err;
}

/* ---- analysis scans ---- */

static skp_err task_key_find(struct sqlite_store *st, const char *task_id, uint32_t *out)
{
    return store__task_key(st, task_id, false, out);
}

static skp_err run_scan(struct sqlite_store *st, sqlite3_stmt *s, store_sample_cb cb, void *ud)
{
    int rc;
    st->scanning = true;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        struct store_sample smp = {
            .segment = (uint32_t)sqlite3_column_int64(s, 0),
            .sequence = sqlite3_column_int(s, 1),
            .time_ms = sqlite3_column_int64(s, 2),
            .stack = (uint32_t)sqlite3_column_int64(s, 3),
            .weight = (uint32_t)sqlite3_column_int64(s, 4),
        };
        cb(ud, &smp);
    }
    st->scanning = false;
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        return store__sqlerr(st, rc, "scan snapshots");
    return SKP_OK;
}

/* Both scans: the scan's key (segment or task ref, looked up by `find`: nothing to visit when
 * it is unknown) as ?1, for the segment scan its sequence range `seqs` (NULL for the task scan)
 * as ?2 and ?3, in the cached statement `weighted` (`unweighted` for an unweighted store). */
static skp_err scan_key(struct store *base, const char *id,
                        skp_err (*find)(struct sqlite_store *, const char *, uint32_t *),
                        enum store_stmt weighted, enum store_stmt unweighted, const int32_t *seqs,
                        store_sample_cb cb, void *ud)
{
    struct sqlite_store *st = sqlite_store_of(base);
    if (!id || !cb)
        return SKP_EINVAL;
    if (st->scanning)
        return SKP_ESTATE; /* a nested scan would reset the running one */
    uint32_t key = 0;
    skp_err err = find(st, id, &key);
    if (err)
        return err == SKP_ENOTFOUND ? SKP_OK : err;
    sqlite3_stmt *s = store__stmt(st, st->unweighted ? unweighted : weighted, &err);
    if (!s)
        return err;
    sqlite3_bind_int64(s, 1, key);
    if (seqs) {
        sqlite3_bind_int(s, 2, seqs[0]);
        sqlite3_bind_int(s, 3, seqs[1]);
    }
    return run_scan(st, s, cb, ud);
}

skp_err sqlite_store_scan_segment(struct store *base, const char *segment_id, int32_t lo_seq,
                                  int32_t hi_seq, store_sample_cb cb, void *ud)
{
    const int32_t seqs[2] = {lo_seq, hi_seq};
    return scan_key(base, segment_id, store__segment_find, STMT_SCAN_SEGMENT,
                    STMT_SCAN_SEGMENT_UNWEIGHTED, seqs, cb, ud);
}

skp_err sqlite_store_segment_seq_window(struct store *base, const char *segment_id, int64_t from_ms,
                                        int64_t to_ms, int32_t *lo, int32_t *hi)
{
    struct sqlite_store *st = sqlite_store_of(base);
    uint32_t seg = 0;
    skp_err err = store__segment_find(st, segment_id, &seg);
    if (err)
        return err;
    sqlite3_stmt *s = store__stmt(st, STMT_SEQ_WINDOW, &err);
    if (!s)
        return err;
    sqlite3_bind_int64(s, 1, seg);
    sqlite3_bind_int64(s, 2, from_ms);
    sqlite3_bind_int64(s, 3, to_ms);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL) {
        *lo = sqlite3_column_int(s, 0);
        *hi = sqlite3_column_int(s, 1);
        err = SKP_OK;
    } else if (rc == SQLITE_ROW) {
        err = SKP_ENOTFOUND;
    } else {
        err = store__sqlerr(st, rc, "sequence window");
    }
    sqlite3_reset(s);
    return err;
}

skp_err sqlite_store_scan_task(struct store *base, const char *task_id, store_sample_cb cb,
                               void *ud)
{
    return scan_key(base, task_id, task_key_find, STMT_SCAN_TASK, STMT_SCAN_TASK_UNWEIGHTED, NULL,
                    cb, ud);
}
