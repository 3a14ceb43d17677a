/* store_sqlite_retention.c - SQLite backend: store_purge_before. Retention works per segment
 * (a segment's snapshots, task links and SegmentObject go together), then drops tasks, logs,
 * and the stacks and frames nothing refers to any more. One transaction. */
#include "server/store/store.h"

#include "common/alloc.h"
#include "common/err.h"
#include "common/log.h"
#include "server/store/store_codec.h"
#include "server/store/sqlite/store_int.h"

/* ---- retention ---- */

static skp_err exec_count(struct sqlite_store *st, const char *sql, int64_t before_ms, uint64_t *n)
{
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st, sql, &s);
    if (err)
        return err;
    if (sqlite3_bind_parameter_count(s) >= 1)
        sqlite3_bind_int64(s, 1, before_ms);
    int rc = sqlite3_step(s);
    if (rc != SQLITE_DONE)
        err = store__sqlerr(st, rc, "purge");
    else
        *n += (uint64_t)sqlite3_changes(st->db);
    sqlite3_finalize(s);
    return err;
}

/* Deletes frames no remaining stack refers to (stack blobs are opaque to SQL). */
static skp_err purge_frames(struct sqlite_store *st, uint64_t *n)
{
    sqlite3_stmt *s = NULL;
    uint8_t *used = NULL;
    skp_err err = store__prepare(st, "SELECT max(id) FROM frames", &s);
    if (err)
        return err;
    int rc = sqlite3_step(s);
    int64_t max_id = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
    sqlite3_finalize(s);
    s = NULL;
    if (rc != SQLITE_ROW)
        return store__sqlerr(st, rc, "max frame id");
    if (max_id <= 0)
        return SKP_OK;
    used = skpx_calloc((size_t)max_id / 8 + 1, 1);
    if (!used)
        return SKP_ENOMEM;
    err = store__prepare(st, "SELECT frames FROM stacks", &s);
    if (err)
        goto out;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        const uint8_t *b = sqlite3_column_blob(s, 0);
        size_t bl = (size_t)sqlite3_column_bytes(s, 0);
        err = store__ensure_scratch(st, bl ? bl : 1);
        if (err)
            goto out;
        size_t cnt = store_decode_ids(b, bl, st->scratch_ids, bl);
        if (cnt == SIZE_MAX) {
            /* keep every frame rather than delete ones a corrupt stack might name */
            SKPX_ERROR("store: corrupt stack found while purging; frames kept");
            goto out;
        }
        for (size_t i = 0; i < cnt; i++)
            if (st->scratch_ids[i] <= (uint64_t)max_id)
                used[st->scratch_ids[i] / 8] |= (uint8_t)(1u << (st->scratch_ids[i] % 8));
    }
    if (rc != SQLITE_DONE) {
        err = store__sqlerr(st, rc, "scan stacks");
        goto out;
    }
    sqlite3_finalize(s);
    s = NULL;
    sqlite3_stmt *del = NULL;
    err = store__prepare(st, "DELETE FROM frames WHERE id = ?", &del);
    if (err)
        goto out;
    err = store__prepare(st, "SELECT id FROM frames", &s);
    if (err) {
        sqlite3_finalize(del);
        goto out;
    }
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(s, 0);
        if (id > max_id || (used[id / 8] & (1u << (id % 8))))
            continue;
        sqlite3_bind_int64(del, 1, id);
        int drc = sqlite3_step(del);
        sqlite3_reset(del);
        if (drc != SQLITE_DONE) {
            err = store__sqlerr(st, drc, "delete frame");
            break;
        }
        (*n)++;
    }
    if (!err && rc != SQLITE_DONE)
        err = store__sqlerr(st, rc, "scan frames");
    sqlite3_finalize(del);
out:
    sqlite3_finalize(s);
    skpx_free(used);
    return err;
}

skp_err sqlite_store_purge_before(struct store *base, int64_t before_ms, uint64_t *n_deleted)
{
    struct sqlite_store *st = sqlite_store_of(base);
    /* Retention works per segment: a segment's snapshots, task links and SegmentObject go
     * together once the segment was first seen before `before_ms`. */
    static const char *const k_purge[] = {
        "DELETE FROM snapshots WHERE seg IN (SELECT id FROM segids WHERE first_ms < ?1)",
        "DELETE FROM task_segments WHERE seg IN (SELECT id FROM segids WHERE first_ms < ?1)",
        "DELETE FROM segments WHERE received_ms < ?1 OR "
        "seg IN (SELECT id FROM segids WHERE first_ms < ?1)",
        "DELETE FROM segids WHERE first_ms < ?1",
        "DELETE FROM task_logs WHERE time < ?1",
        "DELETE FROM tasks WHERE start_time + duration_min * 60000 < ?1",
        "DELETE FROM task_keys WHERE task_id NOT IN (SELECT id FROM tasks) AND "
        "id NOT IN (SELECT task FROM task_segments)",
        "DELETE FROM stacks WHERE id NOT IN (SELECT stack FROM snapshots)",
        /* Process-profiling tasks (store_sqlite_proc.c) go with their files and logs. */
        "DELETE FROM proc_files WHERE task_id IN "
        "(SELECT id FROM proc_tasks WHERE create_time < ?1)",
        "DELETE FROM proc_task_logs WHERE task_id IN "
        "(SELECT id FROM proc_tasks WHERE create_time < ?1)",
        "DELETE FROM proc_task_instances WHERE task_id IN "
        "(SELECT id FROM proc_tasks WHERE create_time < ?1)",
        "DELETE FROM proc_tasks WHERE create_time < ?1",
        "DELETE FROM endpoint_minutes WHERE minute_ms < ?1",
        /* continuous profiling (store_sqlite_continuous.c): triggers by their time */
        "DELETE FROM continuous_trigger_causes WHERE trigger_id IN "
        "(SELECT id FROM continuous_triggers WHERE time_ms < ?1)",
        "DELETE FROM continuous_triggers WHERE time_ms < ?1",
        /* eBPF services (store_sqlite_ebpf.c): stacks by arrival, processes by last ping. */
        "DELETE FROM ebpf_stacks WHERE received_ms < ?1",
        "DELETE FROM ebpf_processes WHERE last_ping_ms < ?1",
    };
    uint64_t n = 0;
    if (n_deleted)
        *n_deleted = 0;
    if (st->base.read_only)
        return SKP_EIO;
    skp_err err = store__begin(st);
    if (err)
        return err;
    for (size_t i = 0; i < SKP_ARRAY_LEN(k_purge) && !err; i++)
        err = exec_count(st, k_purge[i], before_ms, &n);
    if (!err)
        err = purge_frames(st, &n);
    if (!err)
        err = store__commit(st);
    if (err) {
        store__rollback(st);
        return err;
    }
    store__drop_ingest_caches(st);
    if (n_deleted)
        *n_deleted = n;
    return SKP_OK;
}
