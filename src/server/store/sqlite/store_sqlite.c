/* store_sqlite.c - the SQLite backend of store.h: connection, prepared statements,
 * transactions, open/close and stats. The other parts of the backend are listed in store_int.h.
 *
 * Design: one connection, WAL + synchronous=NORMAL, one IMMEDIATE transaction per batch.
 * Snapshots are stored as (segment ref, sequence, task ref, time, stack ref) in a WITHOUT ROWID
 * table; frame strings and stacks (varint-encoded frame-id lists) are stored once and found
 * through bounded in-memory caches, so a batch of repetitive stacks costs one small row per
 * snapshot. Ingest caches are dropped whenever a transaction rolls back, because they may
 * name rows that were never committed. Single-threaded (one store per thread). */
#include "server/store/store.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "server/store/sqlite/store_int.h"
#include "server/store/sqlite/store_sqlite_checkpoint.h"

static const char *const k_sql[STMT_COUNT] = {
    [STMT_BEGIN] = "BEGIN IMMEDIATE",
    [STMT_COMMIT] = "COMMIT",
    [STMT_ROLLBACK] = "ROLLBACK",
    [STMT_FRAME_GET] = "SELECT id FROM frames WHERE sig = ?",
    [STMT_FRAME_INS] = "INSERT INTO frames(sig) VALUES(?)",
    [STMT_FRAME_SIG] = "SELECT sig FROM frames WHERE id = ?",
    [STMT_STACK_BY_HASH] = "SELECT id, frames FROM stacks WHERE hash = ?",
    [STMT_STACK_INS] = "INSERT INTO stacks(hash, frames) VALUES(?, ?)",
    [STMT_STACK_GET] = "SELECT frames FROM stacks WHERE id = ?",
    [STMT_SEGID_GET] = "SELECT id FROM segids WHERE segment_id = ?",
    [STMT_SEGID_INS] = "INSERT INTO segids(segment_id, first_ms) VALUES(?, ?)",
    [STMT_TASKKEY_GET] = "SELECT id FROM task_keys WHERE task_id = ?",
    [STMT_TASKKEY_INS] = "INSERT INTO task_keys(task_id) VALUES(?)",
    [STMT_TASKSEG_INS] = "INSERT OR IGNORE INTO task_segments(task, seg) VALUES(?, ?)",
    [STMT_SNAP_INS] = "INSERT OR IGNORE INTO snapshots(seg, seq, task, time, stack, weight) "
                      "VALUES(?, ?, ?, ?, ?, ?)",
    [STMT_SCAN_SEGMENT] = "SELECT seg, seq, time, stack, weight FROM snapshots "
                          "WHERE seg = ? AND seq BETWEEN ? AND ? ORDER BY seq",
    [STMT_SEQ_WINDOW] = "SELECT min(seq), max(seq) FROM snapshots "
                        "WHERE seg = ? AND time BETWEEN ? AND ?",
    [STMT_SCAN_TASK] = "SELECT sn.seg, sn.seq, sn.time, sn.stack, sn.weight "
                       "FROM task_segments ts "
                       "JOIN snapshots sn ON sn.seg = ts.seg AND sn.task = ts.task "
                       "WHERE ts.task = ? ORDER BY ts.seg, sn.seq",
    [STMT_SNAP_INS_UNWEIGHTED] = "INSERT OR IGNORE INTO snapshots(seg, seq, task, time, stack) "
                                 "VALUES(?, ?, ?, ?, ?)",
    [STMT_SCAN_SEGMENT_UNWEIGHTED] = "SELECT seg, seq, time, stack, 1 FROM snapshots "
                                     "WHERE seg = ? AND seq BETWEEN ? AND ? ORDER BY seq",
    [STMT_SCAN_TASK_UNWEIGHTED] = "SELECT sn.seg, sn.seq, sn.time, sn.stack, 1 "
                                  "FROM task_segments ts "
                                  "JOIN snapshots sn ON sn.seg = ts.seg AND sn.task = ts.task "
                                  "WHERE ts.task = ? ORDER BY ts.seg, sn.seq",
    [STMT_SEGMENT_INS] = "INSERT OR IGNORE INTO segments(" STORE_SEGMENT_COLS ") "
                         "VALUES(" STORE_SEGMENT_SQ ")",
    [STMT_SEG_RANGE] = "SELECT (SELECT time FROM snapshots WHERE seg = ?1 AND seq = 0 "
                       "AND task = ?2), (SELECT time FROM snapshots WHERE seg = ?1 AND "
                       "task = ?2 ORDER BY seq DESC LIMIT 1)",
};

/* ---- plumbing ---- */

skp_err store__sqlerr(struct sqlite_store *st, int rc, const char *what)
{
    int primary = rc & 0xff;
    const char *msg = st && st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc);
    SKPX_ERROR("store: %s: %s (sqlite %d)", what, msg, rc);
    return primary == SQLITE_NOMEM ? SKP_ENOMEM : SKP_EIO;
}

sqlite3 *store__db(struct store *base)
{
    return base && base->ops == &sqlite_store_ops ? sqlite_store_of(base)->db : NULL;
}

skp_err store__prepare(struct sqlite_store *st, const char *sql, sqlite3_stmt **out)
{
    *out = NULL;
    int rc = sqlite3_prepare_v2(st->db, sql, -1, out, NULL);
    if (rc != SQLITE_OK) {
        sqlite3_finalize(*out);
        *out = NULL;
        return store__sqlerr(st, rc, "prepare");
    }
    return SKP_OK;
}

sqlite3_stmt *store__stmt(struct sqlite_store *st, enum store_stmt id, skp_err *err)
{
    sqlite3_stmt *s = st->stmts[id];
    if (!s) {
        int rc = sqlite3_prepare_v3(st->db, k_sql[id], -1, SQLITE_PREPARE_PERSISTENT, &s, NULL);
        if (rc != SQLITE_OK) {
            sqlite3_finalize(s);
            *err = store__sqlerr(st, rc, k_sql[id]);
            return NULL;
        }
        st->stmts[id] = s;
    } else {
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
    }
    return s;
}

skp_err store__exec(struct sqlite_store *st, const char *sql)
{
    char *msg = NULL;
    int rc = sqlite3_exec(st->db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        SKPX_ERROR("store: exec failed: %s (sqlite %d)", msg ? msg : sqlite3_errstr(rc), rc);
        sqlite3_free(msg);
        return (rc & 0xff) == SQLITE_NOMEM ? SKP_ENOMEM : SKP_EIO;
    }
    return SKP_OK;
}

skp_err store__step_done(struct sqlite_store *st, sqlite3_stmt *s, const char *what)
{
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        return store__sqlerr(st, rc, what);
    return SKP_OK;
}

skp_err store__insert_rows(struct sqlite_store *st, const char *sql, size_t n, store_bind_fn bind,
                           const void *rows, const char *what)
{
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st, sql, &s);
    if (err)
        return err;
    err = store__begin(st);
    for (size_t i = 0; i < n && !err; i++) {
        sqlite3_reset(s);
        bind(s, i, rows);
        err = store__step_done(st, s, what);
    }
    sqlite3_finalize(s);
    return store__finish(st, err);
}

/* Runs the cached statement `which` (no result rows). */
static skp_err step_cached(struct sqlite_store *st, enum store_stmt which, const char *what)
{
    skp_err err = SKP_OK;
    sqlite3_stmt *s = store__stmt(st, which, &err);
    return s ? store__step_done(st, s, what) : err;
}

skp_err store__begin(struct sqlite_store *st)
{
    skp_err err = step_cached(st, STMT_BEGIN, "begin");
    if (!err)
        st->in_tx = true;
    return err;
}

skp_err store__commit(struct sqlite_store *st)
{
    int64_t t0 = skpx_mono_ns();
    skp_err err = step_cached(st, STMT_COMMIT, "commit");
    if (err)
        return err; /* caller rolls back */
    st->in_tx = false;
    st->commits++;
    st->commit_ns_total += (uint64_t)(skpx_mono_ns() - t0);
    return SKP_OK;
}

skp_err store__finish(struct sqlite_store *st, skp_err err)
{
    if (!err)
        err = store__commit(st);
    if (err)
        store__rollback(st);
    return err;
}

/* The ingest caches (the ids of names, keys and stacks already stored), one list for emptying
 * them (release false) and for freeing them at close. */
static void ingest_caches(struct sqlite_store *st, bool release)
{
    void (*text_map)(struct skpx_strmap *) = release ? skpx_strmap_cleanup : skpx_strmap_clear;
    struct skpx_strmap *texts[] = {&st->frame_ids, &st->seg_ids, &st->task_keys};
    for (size_t i = 0; i < SKP_ARRAY_LEN(texts); i++)
        text_map(texts[i]);
    (release ? skpx_u64map_cleanup : skpx_u64map_clear)(&st->task_segs);
    (release ? store_stack_cache_cleanup : store_stack_cache_clear)(&st->stack_cache);
}

void store__drop_ingest_caches(struct sqlite_store *st)
{
    ingest_caches(st, false);
    st->n_snapshots = -1;
}

void store__rollback(struct sqlite_store *st)
{
    if (sqlite3_get_autocommit(st->db) == 0) {
        skp_err err = SKP_OK;
        sqlite3_stmt *s = store__stmt(st, STMT_ROLLBACK, &err);
        /* A failed ROLLBACK leaves SQLite to roll back on close/next open (WAL). */
        if (s && store__step_done(st, s, "rollback") != SKP_OK)
            SKPX_ERROR("store: rollback failed");
    }
    st->in_tx = false;
    store__drop_ingest_caches(st);
}

/* ---- open / close ---- */

static skp_err configure(struct sqlite_store *st)
{
    int rc = sqlite3_busy_timeout(st->db, STORE_BUSY_TIMEOUT_MS);
    if (rc != SQLITE_OK)
        return store__sqlerr(st, rc, "busy_timeout");
    if (st->base.read_only)
        return store__exec(st, "PRAGMA query_only = 1");
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st, "PRAGMA journal_mode = WAL", &s);
    if (err)
        return err;
    rc = sqlite3_step(s);
    bool wal =
        rc == SQLITE_ROW && sqlite3_stricmp((const char *)sqlite3_column_text(s, 0), "wal") == 0;
    sqlite3_finalize(s);
    if (!wal) {
        SKPX_ERROR("store: cannot switch %s to WAL (sqlite %d: %s)", st->path, rc,
                   sqlite3_errmsg(st->db));
        return SKP_EIO;
    }
    return store__exec(st, "PRAGMA synchronous = NORMAL");
}

skp_err sqlite_store_open(const char *path, const struct store_opts *opts, struct store **out)
{
    skp_err err = SKP_OK;
    *out = NULL;
    if (!path)
        return SKP_EINVAL;
    struct sqlite_store *st = skpx_calloc(1, sizeof(*st));
    if (!st)
        return SKP_ENOMEM;
    st->base.ops = &sqlite_store_ops;
    st->n_snapshots = -1;
    st->base.read_only = opts && opts->read_only;
    st->path = skpx_strdup(path);
    if (!st->path) {
        err = SKP_ENOMEM;
        goto out;
    }
    int flags =
        st->base.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    int rc = sqlite3_open_v2(path, &st->db, flags | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        err = store__sqlerr(st, rc, "open");
        SKPX_ERROR("store: cannot open %s", path);
        goto out;
    }
    sqlite3_extended_result_codes(st->db, 1);
    err = configure(st);
    if (err)
        goto out;
    err = store__migrate(st, opts ? opts->schema_version_max : 0);
    if (err)
        goto out;
    /* Without the thread, SQLite's automatic checkpoint (on the committing thread) stays. */
    if (!st->base.read_only &&
        sqlite_checkpointer_start(st->db, st->path, &st->checkpointer) != SKP_OK)
        SKPX_WARN("store: WAL checkpoints run in the commits of %s", path);
    *out = &st->base;
    st = NULL;
out:
    sqlite_store_close(st ? &st->base : NULL);
    return err;
}

skp_err sqlite_store_check(struct store *base, char *detail, size_t cap)
{
    struct sqlite_store *st = sqlite_store_of(base);
    if (cap)
        detail[0] = '\0';
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(st->db, "PRAGMA quick_check(4)", -1, &s, NULL);
    if (rc != SQLITE_OK) {
        snprintf(detail, cap, "the check could not run: %s", sqlite3_errmsg(st->db));
        sqlite3_finalize(s);
        return SKP_EIO;
    }
    size_t n = 0;
    bool ok = true;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        const char *line = store__col_text(s, 0);
        if (strcmp(line, "ok") == 0)
            continue;
        ok = false;
        if (n < cap) {
            int w = snprintf(detail + n, cap - n, "%s%s", n ? "; " : "", line);
            n += w > 0 ? (size_t)w : 0;
        }
    }
    if (rc != SQLITE_DONE) {
        ok = false;
        if (n == 0)
            snprintf(detail, cap, "%s", sqlite3_errmsg(st->db));
    }
    sqlite3_finalize(s);
    return ok ? SKP_OK : SKP_EIO;
}

void sqlite_store_close(struct store *base)
{
    if (!base)
        return;
    struct sqlite_store *st = sqlite_store_of(base);
    for (int i = 0; i < STMT_COUNT; i++)
        sqlite3_finalize(st->stmts[i]);
    sqlite_checkpointer_stop(st->checkpointer);
    if (st->db) {
        if (!st->base.read_only && sqlite3_get_autocommit(st->db))
            (void)sqlite3_wal_checkpoint_v2(st->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
        sqlite3_close_v2(st->db);
    }
    ingest_caches(st, true);
    store_frame_sigs_cleanup(&st->frame_sigs);
    SKPX_FREE_ALL(st->scratch_ids, st->scratch_blob, st->path, st);
}

/* ---- row loop and arrays ---- */

skp_err store__each_row(struct sqlite_store *st, sqlite3_stmt *s, store_row_fn row, void *ud,
                        const char *what)
{
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        skp_err err = row(ud, s);
        if (err)
            return err;
    }
    if (rc != SQLITE_DONE)
        return store__sqlerr(st, rc, what);
    return SKP_OK;
}

/* ---- stats ---- */

static uint64_t file_size(const char *path, const char *suffix)
{
    char buf[4096];
    int len = snprintf(buf, sizeof(buf), "%s%s", path, suffix);
    if (len < 0 || (size_t)len >= sizeof(buf))
        return 0;
    struct stat sb;
    if (stat(buf, &sb) != 0)
        return 0;
    return (uint64_t)sb.st_size;
}

skp_err sqlite_store_get_stats(struct store *base, struct store_stats *out)
{
    struct sqlite_store *st = sqlite_store_of(base);
    memset(out, 0, sizeof(*out));
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st,
                                 "SELECT (SELECT count(*) FROM stacks), "
                                 "(SELECT count(*) FROM frames), (SELECT count(*) FROM segids), "
                                 "(SELECT count(*) FROM tasks)",
                                 &s);
    if (err)
        return err;
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        out->stacks = (uint64_t)sqlite3_column_int64(s, 0);
        out->frames = (uint64_t)sqlite3_column_int64(s, 1);
        out->segments = (uint64_t)sqlite3_column_int64(s, 2);
        out->tasks = (uint64_t)sqlite3_column_int64(s, 3);
    } else {
        err = store__sqlerr(st, rc, "stats");
    }
    sqlite3_finalize(s);
    if (err)
        return err;
    if (st->n_snapshots < 0) {
        /* counted once (a full scan), then maintained by insert and purge */
        err = store__prepare(st, "SELECT count(*) FROM snapshots", &s);
        if (err)
            return err;
        rc = sqlite3_step(s);
        if (rc == SQLITE_ROW)
            st->n_snapshots = sqlite3_column_int64(s, 0);
        else
            err = store__sqlerr(st, rc, "count snapshots");
        sqlite3_finalize(s);
        if (err)
            return err;
    }
    out->snapshots = (uint64_t)st->n_snapshots;
    out->file_bytes = file_size(st->path, "") + file_size(st->path, "-wal");
    out->commits = st->commits;
    out->commit_ns_total = st->commit_ns_total;
    return SKP_OK;
}

/* ---- the ops table (store_backend.h) ---- */

#define SQLITE_STORE_SET(...) STORE_BACKEND_SET(sqlite, __VA_ARGS__)
const struct store_backend_ops sqlite_store_ops = {
    .name = "sqlite",
    .close = sqlite_store_close,
    .purge_before = sqlite_store_purge_before,
    /* store_backend.h's lists, one a line */
    // clang-format off
    STORE_CORE_OPS(SQLITE_STORE_SET)
    STORE_FEATURE_OPS(SQLITE_STORE_SET)
    /* the CLUSTER ops: NULL, a single collector has no shared state (SKP_ENOTSUP) */
    // clang-format on
};
