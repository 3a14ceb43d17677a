/* store_pg_retention.c - PostgreSQL backend: store_purge_step (store_purge_before is one step
 * without a row bound). A step is one transaction that deletes about max_rows rows: the oldest
 * segments first (a bounded number per step: their snapshot runs, task links, SegmentObjects
 * and segids rows together), then the snapshot partitions whose whole day is older than the
 * cut (emptied, then dropped), then the other tables, each statement bounded by what is left
 * of the step's rows (DELETE ... WHERE ctid = ANY(ARRAY(SELECT ctid ... LIMIT n))), then the
 * stacks and frames nothing refers to any more. The next step starts again from the top, so
 * the order holds across steps. The segment listing follows by triggers (store_pg_schema.c
 * step 3; not counted, as SQLite's): its rows go with their segids rows, and a SegmentObject
 * purged before its dumps moves its rows back to the first dump's time. Feature tables add
 * their line to k_purge_features (store_pg_<feature>.c owns the table, this list its
 * retention). Every step moves the purge epoch: the ingest caches of every collector are
 * dropped after it (ids purged here). */
#include "server/store/postgres/store_pg_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/log.h"
#include "server/store/store_codec.h"

/* One bounded purge statement: rows of `table` (read as `from`, for an alias) matching `cond`,
 * where $cut stands for the cut (ms). */
struct purge_stmt {
    const char *table;
    const char *from;
    const char *cond;
};

/* After the step's segments (purge_head), in order. */
static const struct purge_stmt k_purge[] = {
    {"segments", "segments", "received_ms < $cut"},
    {"task_logs", "task_logs", "time < $cut"},
    {"tasks", "tasks", "start_time + duration_min * 60000::bigint < $cut"},
    {"task_keys", "task_keys tk",
     "NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = tk.task_id) "
     "AND NOT EXISTS (SELECT 1 FROM task_segments ts WHERE ts.task = tk.id)"},
    {"stacks", "stacks s", "NOT EXISTS (SELECT 1 FROM snapshots sn WHERE sn.stack = s.id)"},
};

/* Feature tables' retention (pgfeat: one line per table). */
static const struct purge_stmt k_purge_features[] = {
    /* process profiling (store_pg_proc.c): tasks by creation, with their rows */
    {"proc_files", "proc_files", "task_id IN (SELECT id FROM proc_tasks WHERE create_time < $cut)"},
    {"proc_task_logs", "proc_task_logs",
     "task_id IN (SELECT id FROM proc_tasks WHERE create_time < $cut)"},
    {"proc_task_instances", "proc_task_instances",
     "task_id IN (SELECT id FROM proc_tasks WHERE create_time < $cut)"},
    {"proc_tasks", "proc_tasks", "create_time < $cut"},
    /* endpoint statistics (store/store_endpoint_stats.c) */
    {"endpoint_minutes", "endpoint_minutes", "minute_ms < $cut"},
    /* continuous profiling (store_pg_continuous.c): triggers by their time */
    {"continuous_trigger_causes", "continuous_trigger_causes",
     "trigger_id IN (SELECT id FROM continuous_triggers WHERE time_ms < $cut)"},
    {"continuous_triggers", "continuous_triggers", "time_ms < $cut"},
    /* eBPF (store/store_ebpf.c): stacks by arrival, processes by last ping */
    {"ebpf_stacks", "ebpf_stacks", "received_ms < $cut"},
    {"ebpf_processes", "ebpf_processes", "last_ping_ms < $cut"},
};

/* The rows a step may still delete, and what it deleted. */
struct purge {
    struct pg_store *st;
    int64_t before_ms;
    int64_t left;
    uint64_t n, n_snaps;
};

/* Appends tmpl with every "$cut" replaced by the cut. */
static void put_cut(struct pg_buf *b, const char *tmpl, int64_t before_ms)
{
    for (const char *p = tmpl; *p;) {
        const char *c = strstr(p, "$cut");
        if (!c) {
            pgb_puts(b, p);
            break;
        }
        for (; p < c; p++)
            pgb_putc(b, *p);
        pgb_int(b, before_ms);
        p = c + 4;
    }
}

/* Runs a statement whose result is (rows deleted, snapshots deleted) or a command tag;
 * p may be NULL. Counts into pu. *rows = rows deleted. */
static skp_err run(struct purge *pu, char *sql, struct pg_params *p, bool counted, int64_t *rows)
{
    skp_err err = SKP_OK;
    PGresult *r = sql ? pg__exec(pu->st, sql, p, &err, "purge") : NULL;
    skpx_free(sql);
    if (p)
        pgp_free(p);
    if (!sql)
        return SKP_ENOMEM;
    if (!r)
        return err;
    if (counted) {
        *rows = pg__i64(r, 0, 0);
        pu->n_snaps += (uint64_t)pg__i64(r, 0, 1);
        pu->n += (uint64_t)pg__i64(r, 0, 1);
    } else {
        *rows = strtoll(PQcmdTuples(r), NULL, 10);
        pu->n += (uint64_t)*rows;
    }
    PQclear(r);
    pu->left -= *rows;
    return SKP_OK;
}

/* One bounded statement of k_purge / k_purge_features. */
static skp_err run_bounded(struct purge *pu, const struct purge_stmt *s, int64_t *rows)
{
    struct pg_buf b = {0};
    pgb_puts(&b, "DELETE FROM ");
    pgb_puts(&b, s->table);
    pgb_puts(&b, " WHERE ctid = ANY(ARRAY(SELECT ctid FROM ");
    pgb_puts(&b, s->from);
    pgb_puts(&b, " WHERE ");
    put_cut(&b, s->cond, pu->before_ms);
    pgb_puts(&b, " LIMIT ");
    pgb_int(&b, pu->left);
    pgb_puts(&b, "))");
    return run(pu, pgb_take(&b), NULL, false, rows);
}

/* The partitions of snapshot_runs (*out: one name a row; the caller PQclear()s it). */
static skp_err list_partitions(struct pg_store *st, PGresult **out)
{
    skp_err err = SKP_OK;
    *out = pg__exec(st,
                    "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                    "WHERE i.inhparent = 'snapshot_runs'::regclass",
                    NULL, &err, "list partitions");
    return err;
}

/* Our partitions are named snapshot_runs_d<day> / snapshot_runs_dm<-day>, a day each. */
static bool partition_day(const char *name, int64_t *day)
{
    if (strncmp(name, "snapshot_runs_dm", 16) == 0)
        *day = -strtoll(name + 16, NULL, 10);
    else if (strncmp(name, "snapshot_runs_d", 15) == 0)
        *day = strtoll(name + 15, NULL, 10);
    else
        return false;
    return true;
}

/* The step's segments: the oldest ones first seen before the cut, at most `head` of them, with
 * their snapshot runs (counted as the snapshots they hold), task links and SegmentObjects.
 * *more: there may be older segments left for the next step. */
static skp_err purge_head(struct purge *pu, int64_t head, bool *more)
{
    *more = false;
    char sql[192];
    snprintf(sql, sizeof(sql),
             "SELECT id FROM segids WHERE first_ms < %" PRId64 " ORDER BY first_ms LIMIT %" PRId64,
             pu->before_ms, head);
    skp_err err = SKP_OK;
    PGresult *r = pg__exec(pu->st, sql, NULL, &err, "purge head");
    if (!r)
        return err;
    int n = PQntuples(r);
    char *arr = pg__column_array(r, 0);
    PQclear(r);
    if (!arr)
        return SKP_ENOMEM;
    if (n == 0) {
        skpx_free(arr);
        return SKP_OK;
    }
    bool full = n >= head;
    /* runs (schema step 6), partition by partition (the days that begin before the cut: a
     * run's first_ms is its segment's), bounded by the rows left; then the rows that name the
     * segments, their segids rows last, once no run of theirs is left */
    PGresult *parts = NULL;
    err = list_partitions(pu->st, &parts);
    for (int i = 0; !err && i < PQntuples(parts) && pu->left > 0; i++) {
        int64_t day;
        const char *name = pg__txt(parts, i, 0);
        if (!partition_day(name, &day) || day * PG_DAY_MS >= pu->before_ms)
            continue;
        char del[320];
        snprintf(del, sizeof(del),
                 "WITH d AS (DELETE FROM \"%s\" WHERE ctid = ANY(ARRAY(SELECT ctid FROM \"%s\" "
                 "WHERE seg = ANY($1::bigint[]) LIMIT %" PRId64
                 ")) RETURNING cardinality(seqs) AS c) SELECT count(*), coalesce(sum(c), 0) FROM d",
                 name, name, pu->left);
        int64_t rows = 0;
        struct pg_params p = {0};
        pgp_text(&p, arr);
        err = run(pu, skpx_strdup(del), &p, true, &rows);
    }
    PQclear(parts);
    if (!err && pu->left <= 0)
        *more = true; /* runs of these segments may be left: the next step goes on */
    if (err || *more) {
        skpx_free(arr);
        return err;
    }
    static const char *const k_named[] = {
        "DELETE FROM task_segments WHERE seg = ANY($1::bigint[])",
        "DELETE FROM segments WHERE seg = ANY($1::bigint[])",
        "DELETE FROM segids WHERE id = ANY($1::bigint[])",
    };
    int64_t rows = 0;
    for (size_t i = 0; i < SKP_ARRAY_LEN(k_named) && !err; i++) {
        struct pg_params q = {0};
        pgp_text(&q, arr);
        err = run(pu, skpx_strdup(k_named[i]), &q, false, &rows);
    }
    skpx_free(arr);
    *more = full;
    return err;
}

/* Empties (at most what is left of the step), then drops, the snapshot partitions whose day
 * ends at or before the cut (their rows went with their segments: normally empty already). */
static skp_err drop_partitions(struct purge *pu)
{
    PGresult *r = NULL;
    skp_err err = list_partitions(pu->st, &r);
    for (int i = 0; !err && i < PQntuples(r) && pu->left > 0; i++) {
        const char *name = pg__txt(r, i, 0);
        int64_t day;
        if (!partition_day(name, &day) || (day + 1) * PG_DAY_MS > pu->before_ms)
            continue;
        char sql[320];
        snprintf(sql, sizeof(sql),
                 "WITH d AS (DELETE FROM \"%s\" WHERE ctid = ANY(ARRAY(SELECT ctid FROM \"%s\" "
                 "LIMIT %" PRId64 ")) RETURNING cardinality(seqs) AS c) "
                 "SELECT count(*), coalesce(sum(c), 0) FROM d",
                 name, name, pu->left);
        int64_t rows = 0, left = pu->left;
        err = run(pu, skpx_strdup(sql), NULL, true, &rows);
        if (!err && rows < left) {
            snprintf(sql, sizeof(sql), "DROP TABLE \"%s\"", name);
            err = pg__cmd(pu->st, sql, "drop partition");
        }
    }
    PQclear(r);
    return err;
}

/* Deletes at most `bound` frames no remaining stack refers to (stack blobs are opaque to SQL:
 * decoded here); *n = frames deleted. */
static skp_err purge_frames(struct pg_store *st, int64_t bound, int64_t *n)
{
    *n = 0;
    /* Frames referenced by a stack are kept, the rest deleted (batches wait: purge epoch). */
    skp_err err = SKP_OK;
    PGresult *r = pg__exec(st, "SELECT coalesce(max(id), 0) FROM frames", NULL, &err, "max frame");
    if (!r)
        return err;
    int64_t max_id = pg__i64(r, 0, 0);
    PQclear(r);
    if (max_id <= 0)
        return SKP_OK;
    uint8_t *used = skpx_calloc((size_t)max_id / 8 + 1, 1);
    if (!used)
        return SKP_ENOMEM;
    r = pg__exec(st, "SELECT frames FROM stacks", NULL, &err, "scan stacks");
    if (!r)
        goto out;
    for (int i = 0; i < PQntuples(r); i++) {
        char *b = PQgetvalue(r, i, 0);
        size_t bl = pg__unhex(b);
        uint32_t *ids = bl == SIZE_MAX ? NULL : skpx_malloc((bl ? bl : 1) * sizeof(*ids));
        size_t cnt = ids ? store_decode_ids((const uint8_t *)b, bl, ids, bl) : SIZE_MAX;
        if (cnt == SIZE_MAX) {
            skpx_free(ids);
            if (bl != SIZE_MAX && !ids) {
                err = SKP_ENOMEM;
                goto out;
            }
            /* keep every frame rather than delete ones a corrupt stack might name */
            SKPX_ERROR("store: corrupt stack found while purging; frames kept");
            goto out;
        }
        for (size_t k = 0; k < cnt; k++)
            if (ids[k] <= (uint64_t)max_id)
                used[ids[k] / 8] |= (uint8_t)(1u << (ids[k] % 8));
        skpx_free(ids);
    }
    PQclear(r);
    /* the frames that exist (ids have gaps: a sequence value is taken by every insert) */
    r = pg__exec(st, "SELECT id FROM frames", NULL, &err, "scan frames");
    if (!r)
        goto out;
    struct pg_buf arr = {0};
    int64_t k = 0;
    pgb_putc(&arr, '{');
    for (int i = 0; i < PQntuples(r) && k < bound; i++) {
        int64_t id = pg__i64(r, i, 0);
        if (id > max_id || (used[id / 8] & (1u << (id % 8))))
            continue;
        if (k++)
            pgb_putc(&arr, ',');
        pgb_int(&arr, id);
    }
    PQclear(r);
    r = NULL;
    pgb_putc(&arr, '}');
    struct pg_params p = {0};
    pgp_owned(&p, pgb_take(&arr));
    r = pg__exec(st, "DELETE FROM frames WHERE id = ANY($1::bigint[])", &p, &err, "purge frames");
    pgp_free(&p);
    if (r)
        *n = strtoll(PQcmdTuples(r), NULL, 10);
out:
    PQclear(r);
    skpx_free(used);
    return err;
}

/* The statements of one step, in order, within pu->left rows; *done when all were run
 * without spending them. */
static skp_err step(struct purge *pu, bool *done)
{
    *done = false;
    /* a segment costs its segids row, SegmentObject, task links and snapshot runs */
    int64_t rows = 0, head = pu->left / 4 + 1;
    bool more = false;
    skp_err err = purge_head(pu, head, &more);
    if (err || more || pu->left <= 0)
        return err;
    err = drop_partitions(pu);
    if (err || pu->left <= 0)
        return err;
    for (size_t i = 0; i < SKP_ARRAY_LEN(k_purge); i++) {
        err = run_bounded(pu, &k_purge[i], &rows);
        if (err || pu->left <= 0)
            return err;
    }
    for (size_t i = 0; i < SKP_ARRAY_LEN(k_purge_features); i++) {
        err = run_bounded(pu, &k_purge_features[i], &rows);
        if (err || pu->left <= 0)
            return err;
    }
    err = purge_frames(pu->st, pu->left, &rows);
    if (err)
        return err;
    pu->n += (uint64_t)rows;
    *done = rows < pu->left;
    return SKP_OK;
}

skp_err pg_store_purge_step(struct store *base, int64_t before_ms, uint64_t max_rows,
                            uint64_t *n_deleted, bool *done)
{
    struct pg_store *st = pg_store_of(base);
    struct purge pu = {.st = st, .before_ms = before_ms};
    pu.left =
        max_rows == 0 || max_rows > (uint64_t)INT64_MAX / 8 ? INT64_MAX / 8 : (int64_t)max_rows;
    if (n_deleted)
        *n_deleted = 0;
    *done = false;
    if (st->base.read_only)
        return SKP_EIO;
    skp_err err = pg__begin(st);
    if (err)
        return err;
    /* Batches of every collector hold this row FOR SHARE: the update waits for the running
     * ones, and later ones see the new epoch and drop their caches (ids purged here). */
    err = pg__cmd(st, "UPDATE skp_purge_epoch SET epoch = epoch + 1", "purge epoch");
    if (!err)
        err = step(&pu, done);
    err = pg__finish(st, err);
    if (err) {
        *done = false;
        return err;
    }
    pg__drop_ingest_caches(st);
    if (st->n_snapshots >= 0)
        st->n_snapshots =
            st->n_snapshots > (int64_t)pu.n_snaps ? st->n_snapshots - (int64_t)pu.n_snaps : 0;
    if (n_deleted)
        *n_deleted = pu.n;
    return SKP_OK;
}

skp_err pg_store_purge_before(struct store *base, int64_t before_ms, uint64_t *n_deleted)
{
    bool done = false;
    return pg_store_purge_step(base, before_ms, 0, n_deleted, &done);
}
