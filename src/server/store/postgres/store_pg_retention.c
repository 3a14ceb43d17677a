/* store_pg_retention.c - PostgreSQL backend: store_purge_before. Snapshot partitions whose
 * whole day is older than the cut are dropped (their rows counted first); the partition holding
 * the cut loses its older rows by DELETE, as do the other tables (segments, links, ids, tasks,
 * logs, then stacks and frames nothing refers to any more). One transaction. The segment
 * listing follows by triggers (store_pg_schema.c step 3; not counted, as SQLite's): its rows
 * go with their segids rows, and a SegmentObject purged before its dumps moves its rows back
 * to the first dump's time. Feature tables add their DELETE to k_purge_features
 * (store_pg_<feature>.c owns the table, this list its retention). */
#include "server/store/postgres/store_pg_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/log.h"
#include "server/store/store_codec.h"

/* The cut is $1 (ms). Order matters: snapshots go first (partitions, then the boundary). */
static const char *const k_purge[] = {
    /* runs (schema step 6): the count is of the snapshots they held, a row each */
    "WITH d AS (DELETE FROM snapshot_runs WHERE first_ms < $1 RETURNING cardinality(seqs) AS c) "
    "SELECT FROM d CROSS JOIN LATERAL generate_series(1, d.c)",
    "DELETE FROM task_segments WHERE seg IN (SELECT id FROM segids WHERE first_ms < $1)",
    "DELETE FROM segments WHERE received_ms < $1 OR "
    "seg IN (SELECT id FROM segids WHERE first_ms < $1)",
    "DELETE FROM segids WHERE first_ms < $1",
    "DELETE FROM task_logs WHERE time < $1",
    "DELETE FROM tasks WHERE start_time + duration_min * 60000::bigint < $1",
    "DELETE FROM task_keys tk WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = tk.task_id) "
    "AND NOT EXISTS (SELECT 1 FROM task_segments ts WHERE ts.task = tk.id)",
    "DELETE FROM stacks s WHERE NOT EXISTS (SELECT 1 FROM snapshots sn WHERE sn.stack = s.id)",
};

/* Feature tables' retention (pgfeat: one line per table, cut = $1). */
static const char *const k_purge_features[] = {
    /* process profiling (store_pg_proc.c): tasks by creation, with their rows */
    "DELETE FROM proc_files WHERE task_id IN (SELECT id FROM proc_tasks WHERE create_time < $1)",
    "DELETE FROM proc_task_logs WHERE task_id IN "
    "(SELECT id FROM proc_tasks WHERE create_time < $1)",
    "DELETE FROM proc_task_instances WHERE task_id IN "
    "(SELECT id FROM proc_tasks WHERE create_time < $1)",
    "DELETE FROM proc_tasks WHERE create_time < $1",
    /* endpoint statistics (store_pg_endpoint_stats.c) */
    "DELETE FROM endpoint_minutes WHERE minute_ms < $1",
    /* continuous profiling (store_pg_continuous.c): triggers by their time */
    "DELETE FROM continuous_trigger_causes WHERE trigger_id IN "
    "(SELECT id FROM continuous_triggers WHERE time_ms < $1)",
    "DELETE FROM continuous_triggers WHERE time_ms < $1",
    /* eBPF (store_pg_ebpf.c): stacks by arrival, processes by last ping */
    "DELETE FROM ebpf_stacks WHERE received_ms < $1",
    "DELETE FROM ebpf_processes WHERE last_ping_ms < $1",
    NULL,
};

static skp_err exec_count(struct pg_store *st, const char *sql, int64_t before_ms, uint64_t *n)
{
    struct pg_params p = {0};
    if (strstr(sql, "$1"))
        pgp_int(&p, before_ms);
    skp_err err = SKP_OK;
    PGresult *r = pg__exec(st, sql, &p, &err, "purge");
    pgp_free(&p);
    if (!r)
        return err;
    *n += strtoull(PQcmdTuples(r), NULL, 10);
    PQclear(r);
    return SKP_OK;
}

/* Drops the snapshot partitions whose day ends at or before the cut; counts their rows. */
static skp_err drop_partitions(struct pg_store *st, int64_t before_ms, uint64_t *n,
                               uint64_t *n_snaps)
{
    skp_err err = SKP_OK;
    PGresult *r = pg__exec(st,
                           "SELECT c.relname FROM pg_inherits i "
                           "JOIN pg_class c ON c.oid = i.inhrelid "
                           "WHERE i.inhparent = 'snapshot_runs'::regclass",
                           NULL, &err, "list partitions");
    if (!r)
        return err;
    for (int i = 0; i < PQntuples(r) && !err; i++) {
        const char *name = pg__txt(r, i, 0);
        /* our partitions are named snapshot_runs_d<day> / snapshot_runs_dm<-day>, a day each */
        int64_t day;
        if (strncmp(name, "snapshot_runs_dm", 16) == 0)
            day = -strtoll(name + 16, NULL, 10);
        else if (strncmp(name, "snapshot_runs_d", 15) == 0)
            day = strtoll(name + 15, NULL, 10);
        else
            continue;
        if ((day + 1) * PG_DAY_MS > before_ms)
            continue;
        char sql[160];
        snprintf(sql, sizeof(sql), "SELECT coalesce(sum(cardinality(seqs)), 0) FROM \"%s\"", name);
        PGresult *c = pg__exec(st, sql, NULL, &err, "count partition");
        if (!c)
            break;
        uint64_t rows = (uint64_t)pg__i64(c, 0, 0);
        PQclear(c);
        snprintf(sql, sizeof(sql), "DROP TABLE \"%s\"", name);
        err = pg__cmd(st, sql, "drop partition");
        if (!err) {
            *n += rows;
            *n_snaps += rows;
        }
    }
    PQclear(r);
    return err;
}

/* Deletes frames no remaining stack refers to (stack blobs are opaque to SQL: decoded here). */
static skp_err purge_frames(struct pg_store *st, uint64_t *n)
{
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
    r = NULL;
    struct pg_buf arr = {0};
    size_t k = 0;
    pgb_putc(&arr, '{');
    for (int64_t id = 1; id <= max_id; id++) {
        if (used[id / 8] & (1u << (id % 8)))
            continue;
        if (k++)
            pgb_putc(&arr, ',');
        pgb_int(&arr, id);
    }
    pgb_putc(&arr, '}');
    struct pg_params p = {0};
    pgp_owned(&p, pgb_take(&arr));
    r = pg__exec(st, "DELETE FROM frames WHERE id = ANY($1::bigint[])", &p, &err, "purge frames");
    pgp_free(&p);
    if (r)
        *n += strtoull(PQcmdTuples(r), NULL, 10);
out:
    PQclear(r);
    skpx_free(used);
    return err;
}

skp_err pg_store_purge_before(struct store *base, int64_t before_ms, uint64_t *n_deleted)
{
    struct pg_store *st = pg_store_of(base);
    uint64_t n = 0, n_snaps = 0;
    if (n_deleted)
        *n_deleted = 0;
    if (st->base.read_only)
        return SKP_EIO;
    skp_err err = pg__begin(st);
    if (err)
        return err;
    /* Batches of every collector hold this row FOR SHARE: the update waits for the running
     * ones, and later ones see the new epoch and drop their caches (ids purged here). */
    err = pg__cmd(st, "UPDATE skp_purge_epoch SET epoch = epoch + 1", "purge epoch");
    if (!err)
        err = drop_partitions(st, before_ms, &n, &n_snaps);
    for (size_t i = 0; i < SKP_ARRAY_LEN(k_purge) && !err; i++) {
        uint64_t before = n;
        err = exec_count(st, k_purge[i], before_ms, &n);
        if (i == 0)
            n_snaps += n - before;
    }
    for (size_t i = 0; i < SKP_ARRAY_LEN(k_purge_features) && k_purge_features[i] && !err; i++)
        err = exec_count(st, k_purge_features[i], before_ms, &n);
    if (!err)
        err = purge_frames(st, &n);
    if (!err)
        err = pg__commit(st);
    if (err) {
        pg__rollback(st);
        return err;
    }
    pg__drop_ingest_caches(st);
    if (st->n_snapshots >= 0)
        st->n_snapshots =
            st->n_snapshots > (int64_t)n_snaps ? st->n_snapshots - (int64_t)n_snaps : 0;
    if (n_deleted)
        *n_deleted = n;
    return SKP_OK;
}
