/* store_sqlite_retention.c - SQLite backend: store_purge_step (store_purge_before is one step
 * without a row bound). Retention works per segment (a segment's snapshots, task links and
 * SegmentObject go together, oldest segments first), then drops SegmentObjects received before
 * the cut, tasks, logs, feature rows, and the stacks and frames nothing refers to any more.
 * A step is one transaction that deletes about max_rows rows: each statement deletes at most
 * what is left of the step's rows, and the step ends when that is spent; the next step starts
 * again from the top, so the order of the list holds across steps (a segment's snapshots are
 * gone before its segids row, stacks before frames). */
#include "server/store/store.h"

#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/log.h"
#include "server/store/store_codec.h"
#include "server/store/sqlite/store_int.h"

/* The oldest segments a step works on (?1 = the cut, ?3 = how many). */
#define HEAD "(SELECT id FROM segids WHERE first_ms < ?1 ORDER BY first_ms, id LIMIT ?3)"

/* One purge statement: the rows of `table` matching `cond` (?1 = the cut). A bounded one
 * deletes at most the rows left to the step (by `key`, ?2 = the bound); a head one deletes
 * the rows of the step's segments (HEAD: a bounded number of segments). */
struct purge_stmt {
    const char *table;
    const char *key;
    const char *cond;
    bool head;
};

static const struct purge_stmt k_purge[] = {
    {"snapshots", "seg, seq, task", "seg IN " HEAD, false},
    {"task_segments", NULL, "seg IN " HEAD, true},
    {"segments", NULL, "seg IN " HEAD, true},
    {"segids", NULL, "id IN " HEAD, true},
    {"segments", "seg", "received_ms < ?1", false},
    {"task_logs", "task_id, instance, op, time", "time < ?1", false},
    {"tasks", "id", "start_time + duration_min * 60000 < ?1", false},
    {"task_keys", "id",
     "task_id NOT IN (SELECT id FROM tasks) AND id NOT IN (SELECT task FROM task_segments)", false},
    {"stacks", "id", "id NOT IN (SELECT stack FROM snapshots)", false},
    /* Process-profiling tasks (store_sqlite_proc.c) go with their files and logs. */
    {"proc_files", "id", "task_id IN (SELECT id FROM proc_tasks WHERE create_time < ?1)", false},
    {"proc_task_logs", "id", "task_id IN (SELECT id FROM proc_tasks WHERE create_time < ?1)",
     false},
    {"proc_task_instances", "task_id, instance",
     "task_id IN (SELECT id FROM proc_tasks WHERE create_time < ?1)", false},
    {"proc_tasks", "id", "create_time < ?1", false},
    {"endpoint_minutes", "service, endpoint, instance, minute_ms, writer", "minute_ms < ?1", false},
    /* continuous profiling (store_sqlite_continuous.c): triggers by their time */
    {"continuous_trigger_causes", "trigger_id, seq",
     "trigger_id IN (SELECT id FROM continuous_triggers WHERE time_ms < ?1)", false},
    {"continuous_triggers", "id", "time_ms < ?1", false},
    /* eBPF services (store/store_ebpf.c): stacks by arrival, processes by last ping. */
    {"ebpf_stacks", "id", "received_ms < ?1", false},
    {"ebpf_processes", "id", "last_ping_ms < ?1", false},
};

/* Runs one statement of k_purge; *changes = rows deleted. */
static skp_err run_stmt(struct sqlite_store *st, const struct purge_stmt *p, int64_t before_ms,
                        int64_t bound, int64_t head, int64_t *changes)
{
    char sql[512];
    if (p->head)
        snprintf(sql, sizeof(sql), "DELETE FROM %s WHERE %s", p->table, p->cond);
    else
        snprintf(sql, sizeof(sql),
                 "DELETE FROM %s WHERE (%s) IN (SELECT %s FROM %s WHERE %s LIMIT ?2)", p->table,
                 p->key, p->key, p->table, p->cond);
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st, sql, &s);
    if (err)
        return err;
    int np = sqlite3_bind_parameter_count(s);
    if (np >= 1)
        sqlite3_bind_int64(s, 1, before_ms);
    if (np >= 2)
        sqlite3_bind_int64(s, 2, bound);
    if (np >= 3)
        sqlite3_bind_int64(s, 3, head);
    int rc = sqlite3_step(s);
    if (rc != SQLITE_DONE)
        err = store__sqlerr(st, rc, "purge");
    else
        *changes = sqlite3_changes(st->db);
    sqlite3_finalize(s);
    return err;
}

/* Deletes at most `bound` frames no remaining stack refers to (stack blobs are opaque to SQL);
 * *changes = frames deleted. */
static skp_err purge_frames(struct sqlite_store *st, int64_t bound, int64_t *changes)
{
    sqlite3_stmt *s = NULL;
    uint8_t *used = NULL;
    *changes = 0;
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
    while (*changes < bound && (rc = sqlite3_step(s)) == SQLITE_ROW) {
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
        (*changes)++;
    }
    if (!err && *changes < bound && rc != SQLITE_DONE)
        err = store__sqlerr(st, rc, "scan frames");
    sqlite3_finalize(del);
out:
    sqlite3_finalize(s);
    skpx_free(used);
    return err;
}

/* The statements of one step, in order, within what is left of `left` rows. */
static skp_err step(struct sqlite_store *st, int64_t before_ms, int64_t left, uint64_t *n,
                    uint64_t *n_snaps, bool *done)
{
    /* a segment costs its segids row, its SegmentObject, its task links and its snapshots */
    int64_t head = left / 4 + 1;
    *done = false;
    for (size_t i = 0; i < SKP_ARRAY_LEN(k_purge); i++) {
        const struct purge_stmt *p = &k_purge[i];
        int64_t c = 0;
        skp_err err = run_stmt(st, p, before_ms, left, head, &c);
        if (err)
            return err;
        *n += (uint64_t)c;
        if (i == 0)
            *n_snaps += (uint64_t)c;
        left -= c;
        if (left <= 0)
            return SKP_OK;
        /* more old segments than the step's head: they are the next step's */
        if (p->head && strcmp(p->table, "segids") == 0 && c >= head)
            return SKP_OK;
    }
    int64_t c = 0;
    skp_err err = purge_frames(st, left, &c);
    if (err)
        return err;
    *n += (uint64_t)c;
    *done = c < left;
    return SKP_OK;
}

skp_err sqlite_store_purge_step(struct store *base, int64_t before_ms, uint64_t max_rows,
                                uint64_t *n_deleted, bool *done)
{
    struct sqlite_store *st = sqlite_store_of(base);
    uint64_t n = 0, n_snaps = 0;
    if (n_deleted)
        *n_deleted = 0;
    *done = false;
    if (st->base.read_only)
        return SKP_EIO;
    int64_t left =
        max_rows == 0 || max_rows > (uint64_t)INT64_MAX / 2 ? INT64_MAX / 2 : (int64_t)max_rows;
    skp_err err = store__begin(st);
    if (err)
        return err;
    err = step(st, before_ms, left, &n, &n_snaps, done);
    err = store__finish(st, err);
    if (err) {
        *done = false;
        return err;
    }
    if (n) { /* the caches may name deleted rows; the snapshot count stays known */
        int64_t snaps = st->n_snapshots;
        store__drop_ingest_caches(st);
        if (snaps >= 0)
            st->n_snapshots = snaps > (int64_t)n_snaps ? snaps - (int64_t)n_snaps : 0;
    }
    if (n_deleted)
        *n_deleted = n;
    return SKP_OK;
}

skp_err sqlite_store_purge_before(struct store *base, int64_t before_ms, uint64_t *n_deleted)
{
    bool done = false;
    return sqlite_store_purge_step(base, before_ms, 0, n_deleted, &done);
}
