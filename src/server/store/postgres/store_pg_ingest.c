/* store_pg_ingest.c - PostgreSQL backend: snapshot ingest and the analyzer's scans.
 *
 * Ingest: one transaction per acknowledged batch - references resolved with a few batched
 * upserts (store_pg_refs.c), then one multi-row INSERT of the (task, segment) links, the lock
 * of the batch's segments, and one statement that stores the snapshots as runs (schema step 6:
 * a row per (segment, task) holding arrays; the arrays in through unnest, prepared once per
 * connection), duplicates left out by reading the stored runs whose sequences meet the
 * batch's. Runs are partitioned by the day of their segment's first receive time
 * (first_ms, the retention clock): partitions are made on demand, each under an advisory lock
 * in a short transaction of its own, before the batch's transaction. A serialization failure,
 * a deadlock or a partition dropped under us (retention on another collector) retries the
 * batch, at most PG_INGEST_TRIES times.
 *
 * Scans run a cursor in a read transaction and fetch PG_SCAN_CHUNK rows at a time; the stacks
 * of a chunk (and their frames) are loaded in bulk before its callbacks, which may call
 * store_get_stack / store_get_frame between fetches. */
#include "server/store/postgres/store_pg_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/log.h"

#define PG_INGEST_TRIES 3
#define PG_SCAN_CHUNK 20000
/* The advisory lock key of partition creation ("skppart"). */
#define PG_LOCK_PARTITION 0x736b7070617274LL

static int64_t day_of(int64_t ms)
{
    return ms >= 0 ? ms / PG_DAY_MS : -((-ms + PG_DAY_MS - 1) / PG_DAY_MS);
}

static void partition_name(int64_t day, char *out, size_t cap)
{
    if (day >= 0)
        snprintf(out, cap, "snapshot_runs_d%" PRId64, day);
    else
        snprintf(out, cap, "snapshot_runs_dm%" PRId64, -day);
}

/* Makes sure the partition of `day` exists (its own transaction: not inside a batch). */
static skp_err ensure_partition(struct pg_store *st, int64_t day)
{
    uint64_t one;
    if (skpx_u64map_get(&st->parts, (uint64_t)day, &one))
        return SKP_OK;
    char name[48], sql[320];
    partition_name(day, name, sizeof(name));
    snprintf(sql, sizeof(sql), "SELECT to_regclass('%s') IS NOT NULL", name);
    skp_err err = SKP_OK;
    PGresult *r = pg__exec(st, sql, NULL, &err, "find partition");
    if (!r)
        return err;
    bool exists = strcmp(pg__txt(r, 0, 0), "t") == 0;
    PQclear(r);
    if (!exists) {
        err = pg__begin_locked(st, PG_LOCK_PARTITION, "partition lock");
        if (err)
            return err;
        snprintf(sql, sizeof(sql),
                 "CREATE TABLE IF NOT EXISTS %s PARTITION OF snapshot_runs "
                 "FOR VALUES FROM (%" PRId64 ") TO (%" PRId64 ")",
                 name, day * PG_DAY_MS, (day + 1) * PG_DAY_MS);
        err = pg__cmd(st, sql, "create partition");
        err = pg__finish(st, err);
        if (err)
            return err;
    }
    if (skpx_u64map_put(&st->parts, (uint64_t)day, 1) != SKP_OK) {
        /* only a cache */
    }
    return SKP_OK;
}

/* The partitions of every first_ms the requests may use (the known ones cost nothing). */
static skp_err ensure_partitions(struct pg_store *st, const struct pg_ref_req *v, size_t n,
                                 bool resolved)
{
    skp_err err = SKP_OK;
    int64_t last = INT64_MIN;
    for (size_t i = 0; i < n && !err; i++) {
        int64_t day = day_of(resolved ? v[i].seg_first_ms : v[i].first_ms);
        if (day == last)
            continue;
        last = day;
        err = ensure_partition(st, day);
        /* the next day too, so that midnight finds its partition made */
        if (!err && !resolved)
            err = ensure_partition(st, day + 1);
    }
    return err;
}

static bool partitions_known(struct pg_store *st, const struct pg_ref_req *v, size_t n)
{
    uint64_t one;
    for (size_t i = 0; i < n; i++)
        if (!skpx_u64map_get(&st->parts, (uint64_t)day_of(v[i].seg_first_ms), &one))
            return false;
    return true;
}

/* The parameters of a batch's statements: the new (task, segment) links (*n_links of them),
 * the snapshots, and the batch's segments (*n_first of them, repeats allowed: their segids
 * rows are locked first, PGS_LISTING_LOCK), as arrays; and the statements in the order they
 * run (n of ids[] with params[], batch_statements). */
struct batch_params {
    struct pg_params links, snaps, lock;
    size_t n_links, n_first;
    enum pg_stmt ids[3];
    struct pg_params *params[3];
    size_t n;
};

static void batch_statements(const struct pg_store *st, struct batch_params *b);

static void batch_params(struct pg_store *st, const struct store_snapshot *v,
                         const struct pg_ref_req *refs, size_t n, struct batch_params *b)
{
    struct pg_buf ls = {0}, lt = {0}, first = {0};
    struct pg_buf c[7] = {{0}};
    uint64_t one;
    b->n_links = b->n_first = 0;
    pgb_putc(&ls, '{');
    pgb_putc(&lt, '{');
    pgb_putc(&first, '{');
    for (int k = 0; k < 7; k++)
        pgb_putc(&c[k], '{');
    for (size_t i = 0; i < n; i++) {
        uint64_t pair = (uint64_t)refs[i].task << 32 | refs[i].seg;
        if (!skpx_u64map_get(&st->task_segs, pair, &one)) {
            if (b->n_links++) {
                pgb_putc(&lt, ',');
                pgb_putc(&ls, ',');
            }
            pgb_int(&lt, refs[i].task);
            pgb_int(&ls, refs[i].seg);
        }
        const int64_t vals[7] = {refs[i].seg,
                                 v[i].sequence,
                                 refs[i].task,
                                 v[i].time_ms,
                                 refs[i].stack,
                                 refs[i].seg_first_ms,
                                 v[i].weight ? (int64_t)v[i].weight : 1};
        for (int k = 0; k < 7; k++) {
            if (i)
                pgb_putc(&c[k], ',');
            pgb_int(&c[k], vals[k]);
        }
        if (i == 0 || refs[i].seg != refs[i - 1].seg) {
            if (b->n_first++)
                pgb_putc(&first, ',');
            pgb_int(&first, refs[i].seg);
        }
    }
    pgb_putc(&ls, '}');
    pgb_putc(&lt, '}');
    pgb_putc(&first, '}');
    for (int k = 0; k < 7; k++)
        pgb_putc(&c[k], '}');
    pgp_owned(&b->links, pgb_take(&lt));
    pgp_owned(&b->links, pgb_take(&ls));
    for (int k = 0; k < 7; k++) {
        if (k < 6 || !st->unweighted)
            pgp_owned(&b->snaps, pgb_take(&c[k]));
        else
            skpx_free(pgb_take(&c[k]));
    }
    pgp_owned(&b->lock, pgb_take(&first));
    batch_statements(st, b);
}

static void batch_params_free(struct batch_params *b)
{
    pgp_free(&b->links);
    pgp_free(&b->snaps);
    pgp_free(&b->lock);
}

/* The batch's statements in the order they run: links, the lock of its first dumps' segments,
 * snapshots (the last: its row count is the batch's). */
static void batch_statements(const struct pg_store *st, struct batch_params *b)
{
    size_t k = 0;
    if (b->n_links) {
        b->ids[k] = PGS_TASKSEG_INS;
        b->params[k++] = &b->links;
    }
    if (b->n_first) {
        b->ids[k] = PGS_LISTING_LOCK;
        b->params[k++] = &b->lock;
    }
    b->ids[k] = st->unweighted ? PGS_SNAP_INS_UNWEIGHTED : PGS_SNAP_INS;
    b->params[k++] = &b->snaps;
    b->n = k;
}

/* The batch's rows inside its transaction; *inserted gets the new snapshots' count. */
static skp_err write_batch(struct pg_store *st, const struct store_snapshot *v,
                           struct pg_ref_req *refs, size_t n, size_t *inserted, bool *retry)
{
    *retry = false;
    skp_err err = pg__batch_epoch(st);
    if (!err)
        err = pg__resolve(st, refs, n);
    if (err)
        return err;
    if (!partitions_known(st, refs, n)) {
        *retry = true; /* made outside the transaction: the caller rolls back and retries */
        return SKP_EIO;
    }
    struct batch_params b = {0};
    batch_params(st, v, refs, n, &b);
    for (size_t i = 0; i < b.n && !err; i++) {
        enum pg_stmt id = b.ids[i];
        const char *what = id == PGS_TASKSEG_INS    ? "insert task segments"
                           : id == PGS_LISTING_LOCK ? "lock listed segments"
                                                    : "insert snapshots";
        PGresult *r = pg__execp(st, id, b.params[i], &err, what);
        if (r && (id == PGS_SNAP_INS || id == PGS_SNAP_INS_UNWEIGHTED))
            *inserted = (size_t)strtoull(PQcmdTuples(r), NULL, 10);
        PQclear(r);
    }
    batch_params_free(&b);
    return err;
}

/* The steady state: every reference cached, every partition known, the caches still valid
 * (epoch known): the whole batch is one round trip. SKP_ESTATE when it does not apply (or the
 * epoch moved: nothing written), and the caller takes the full path. */
static skp_err fast_batch(struct pg_store *st, const struct store_snapshot *v,
                          struct pg_ref_req *refs, size_t n, size_t *inserted)
{
    if (st->epoch < 0 || !pg__resolve_cached(st, refs, n) || !partitions_known(st, refs, n))
        return SKP_ESTATE;
    struct batch_params b = {0};
    batch_params(st, v, refs, n, &b);
    skp_err err = pg__pipeline_tx(st, b.ids, b.params, b.n, inserted);
    batch_params_free(&b);
    if (err && (pg__retryable(st) || strcmp(st->sqlstate, "23514") == 0) &&
        PQstatus(st->conn) == CONNECTION_OK)
        err = SKP_ESTATE; /* worth the full path */
    return err;
}

/* Remembers the batch's (task, segment) links after its commit. */
static void remember_links(struct pg_store *st, const struct pg_ref_req *refs, size_t n)
{
    if (st->task_segs.n + n > PG_PAIR_CACHE_MAX)
        skpx_u64map_clear(&st->task_segs);
    for (size_t i = 0; i < n; i++) {
        if (skpx_u64map_put(&st->task_segs, (uint64_t)refs[i].task << 32 | refs[i].seg, 1) !=
            SKP_OK)
            break; /* only a cache */
    }
}

skp_err pg_store_insert_snapshots(struct store *base, const struct store_snapshot *v, size_t n,
                                  size_t *n_dup)
{
    struct pg_store *st = pg_store_of(base);
    struct pg_ref_req *refs = NULL;
    skp_err err = pg__ref_reqs(st, n, &refs);
    if (err)
        return err;
    for (size_t i = 0; i < n; i++) {
        refs[i].segment_id = v[i].segment_id ? v[i].segment_id : "";
        /* A segment ages out from when we first received it, not from the agent's clock. */
        refs[i].first_ms = v[i].received_ms ? v[i].received_ms : v[i].time_ms;
        refs[i].task_id = v[i].task_id ? v[i].task_id : "";
        refs[i].frames = v[i].frames;
        refs[i].n_frames = v[i].frames ? v[i].n_frames : 0;
    }
    size_t inserted = 0;
    err = fast_batch(st, v, refs, n, &inserted);
    for (int attempt = 0; err == SKP_ESTATE && attempt < PG_INGEST_TRIES; attempt++) {
        bool retry = false;
        err = ensure_partitions(st, refs, n, attempt > 0);
        if (!err)
            err = pg__begin(st);
        if (err)
            break;
        err = write_batch(st, v, refs, n, &inserted, &retry);
        if (!err)
            err = pg__commit(st);
        if (!err)
            break;
        /* a partition dropped by another collector's retention: "no partition for row" */
        bool gone = strcmp(st->sqlstate, "23514") == 0;
        retry = retry || gone || pg__retryable(st);
        pg__rollback(st);
        if (!retry || PQstatus(st->conn) != CONNECTION_OK)
            break;
        err = SKP_ESTATE;
        if (attempt + 1 < PG_INGEST_TRIES) {
            /* ensure_partitions(resolved) needs the batch's first_ms: resolve them again */
            err = pg__begin(st);
            if (!err)
                err = pg__resolve(st, refs, n);
            pg__rollback(st);
            if (err)
                break;
            err = SKP_ESTATE; /* once more */
        }
    }
    if (err == SKP_ESTATE)
        err = SKP_EIO; /* retried PG_INGEST_TRIES times */
    if (!err) {
        remember_links(st, refs, n);
        if (st->n_snapshots >= 0)
            st->n_snapshots += (int64_t)inserted;
        if (n_dup)
            *n_dup = n - inserted;
    }
    skpx_free(refs);
    return err;
}

/* ---- scans ---- */

/* Runs `sql` (numbers inlined by the caller, no parameters) through a cursor. The task scan
 * reads each segment's snapshots through its partition's primary key, already in sequence order
 * (a LATERAL per segment), instead of sorting the whole task's rows. */
static skp_err run_scan(struct pg_store *st, const char *sql, store_sample_cb cb, void *ud)
{
    if (st->in_tx)
        return SKP_ESTATE;
    skp_err err = pg__begin(st);
    if (err)
        return err;
    size_t cap = strlen(sql) + 64;
    char *decl = skpx_malloc(cap);
    uint32_t *stacks = skpx_malloc(PG_SCAN_CHUNK * sizeof(*stacks));
    if (!decl || !stacks) {
        err = SKP_ENOMEM;
        goto out;
    }
    snprintf(decl, cap, "DECLARE skp_scan NO SCROLL CURSOR FOR %s", sql);
    err = pg__cmd(st, decl, "scan");
    char fetch[64];
    snprintf(fetch, sizeof(fetch), "FETCH FORWARD %d FROM skp_scan", PG_SCAN_CHUNK);
    while (!err) {
        PGresult *r = pg__exec(st, fetch, NULL, &err, "scan snapshots");
        if (!r)
            break;
        int rows = PQntuples(r);
        for (int i = 0; i < rows; i++)
            stacks[i] = (uint32_t)pg__i64(r, i, 3);
        err = pg__prefetch_stacks(st, stacks, (size_t)rows);
        st->scanning = true;
        for (int i = 0; i < rows && !err; i++) {
            struct store_sample s = {
                .segment = (uint32_t)pg__i64(r, i, 0),
                .sequence = (int32_t)pg__i64(r, i, 1),
                .time_ms = pg__i64(r, i, 2),
                .stack = stacks[i],
                .weight = (uint32_t)pg__i64(r, i, 4),
            };
            cb(ud, &s);
        }
        st->scanning = false;
        PQclear(r);
        if (rows < PG_SCAN_CHUNK)
            break;
    }
out:
    skpx_free(decl);
    skpx_free(stacks);
    return pg__finish(st, err); /* closes the cursor */
}

/* What both scans refuse before looking their key up. */
static skp_err scan_check(const struct pg_store *st, const char *id, store_sample_cb cb)
{
    if (!id || !cb)
        return SKP_EINVAL;
    return st->scanning ? SKP_ESTATE : SKP_OK; /* a nested scan would disturb the running one */
}

skp_err pg_store_scan_segment(struct store *base, const char *segment_id, int32_t lo_seq,
                              int32_t hi_seq, store_sample_cb cb, void *ud)
{
    struct pg_store *st = pg_store_of(base);
    uint32_t seg = 0;
    int64_t first = 0;
    skp_err err = scan_check(st, segment_id, cb);
    if (!err)
        err = pg__segment_find(st, segment_id, &seg, &first);
    if (err)
        return err == SKP_ENOTFOUND ? SKP_OK : err;
    char sql[384];
    snprintf(sql, sizeof(sql),
             "SELECT seg, seq, time, stack, %s FROM snapshots WHERE seg = %u AND "
             "first_ms = %" PRId64 " AND seq BETWEEN %d AND %d ORDER BY seq, task",
             st->unweighted ? "1" : "weight", seg, first, (int)lo_seq, (int)hi_seq);
    return run_scan(st, sql, cb, ud);
}

skp_err pg_store_segment_seq_window(struct store *base, const char *segment_id, int64_t from_ms,
                                    int64_t to_ms, int32_t *lo, int32_t *hi)
{
    struct pg_store *st = pg_store_of(base);
    uint32_t seg = 0;
    int64_t first = 0;
    skp_err err = pg__segment_find(st, segment_id, &seg, &first);
    if (err)
        return err;
    struct pg_params p = {0};
    pgp_int(&p, seg);
    pgp_int(&p, first);
    pgp_int(&p, from_ms);
    pgp_int(&p, to_ms);
    PGresult *r = pg__query(st,
                            "SELECT min(seq), max(seq) FROM snapshots WHERE seg = $1 AND "
                            "first_ms = $2 AND time BETWEEN $3 AND $4",
                            &p, &err, "sequence window");
    if (!r)
        return err;
    if (pg__null(r, 0, 0)) {
        err = SKP_ENOTFOUND;
    } else {
        *lo = (int32_t)pg__i64(r, 0, 0);
        *hi = (int32_t)pg__i64(r, 0, 1);
    }
    PQclear(r);
    return err;
}

skp_err pg_store_scan_task(struct store *base, const char *task_id, store_sample_cb cb, void *ud)
{
    struct pg_store *st = pg_store_of(base);
    uint32_t task = 0;
    skp_err err = scan_check(st, task_id, cb);
    if (!err)
        err = pg__task_key_find(st, task_id, &task);
    if (err)
        return err == SKP_ENOTFOUND ? SKP_OK : err;
    char sql[384];
    snprintf(sql, sizeof(sql),
             "SELECT ts.seg, x.seq, x.time, x.stack, x.weight FROM task_segments ts "
             "JOIN segids si ON si.id = ts.seg CROSS JOIN LATERAL "
             "(SELECT sn.seq, sn.time, sn.stack, %s AS weight FROM snapshots sn WHERE "
             "sn.seg = ts.seg AND sn.task = ts.task AND sn.first_ms = si.first_ms "
             "ORDER BY sn.seq) x WHERE ts.task = %u ORDER BY ts.seg, x.seq",
             st->unweighted ? "1" : "sn.weight", task);
    return run_scan(st, sql, cb, ud);
}
