/* store_int.h - internals shared by the files of the SQLite backend of store.h and by its unit
 * tests. Not a contract for other modules. The backend's files:
 *   store_sqlite.c           connection, prepared statements, transactions, open/close, stats,
 *                            the ops table sqlite_store_ops (store_backend.h)
 *   store_sqlite_registry.c  services, instances, tasks, task logs
 *   store_sqlite_stacks.c    name → id references, de-duplicated frames and stacks
 *   store_sqlite_ingest.c    snapshot ingest and the analyzer's scans
 *   store_sqlite_segments.c  segments, the profiled-segment listing, segment info
 *   store_sqlite_retention.c store_purge_before
 *   store_schema.c           the schema as migration steps
 * A feature's tables go in a store_sqlite_<feature>.c of their own (see store.h). */
#ifndef SKP_SERVER_STORE_INT_H
#define SKP_SERVER_STORE_INT_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/grow.h"
#include "common/map.h"
#include "server/store/store.h"
#include "server/store/store_backend.h"
#include "server/store/store_rows.h"
#include "server/store/store_stack_cache.h"

/* Cache bounds: each cache is cleared when it reaches its bound (they only save lookups). */
#define STORE_FRAME_CACHE_MAX (1u << 18) /* signature → id entries (~262k frames) */
#define STORE_NAME_CACHE_MAX (1u << 16)  /* segment / task id strings → row ids */
#define STORE_PAIR_CACHE_MAX (1u << 16)  /* (task, segment) pairs known to be recorded */
#define STORE_BUSY_TIMEOUT_MS 5000
#define STORE_MAX_FRAMES 4096 /* frames kept per stack (deeper stacks truncated at the leaf) */

/* Prepared statements, prepared on first use and kept until close. */
enum store_stmt {
    STMT_BEGIN,
    STMT_COMMIT,
    STMT_ROLLBACK,
    STMT_FRAME_GET,
    STMT_FRAME_INS,
    STMT_FRAME_SIG,
    STMT_STACK_BY_HASH,
    STMT_STACK_INS,
    STMT_STACK_GET,
    STMT_SEGID_GET,
    STMT_SEGID_INS,
    STMT_TASKKEY_GET,
    STMT_TASKKEY_INS,
    STMT_TASKSEG_INS,
    STMT_SNAP_INS,
    STMT_SCAN_SEGMENT,
    STMT_SEQ_WINDOW,
    STMT_SCAN_TASK,
    STMT_SEGMENT_INS,
    STMT_SEG_RANGE,
    /* the same three at a schema before STORE_SCHEMA_WEIGHT (no snapshots.weight) */
    STMT_SNAP_INS_UNWEIGHTED,
    STMT_SCAN_SEGMENT_UNWEIGHTED,
    STMT_SCAN_TASK_UNWEIGHTED,
    STMT_COUNT
};

/* The schema step that adds snapshots.weight; a store opened at an older schema_version_max
 * (tests of migrations) writes and reads without it (weight 1). */
#define STORE_SCHEMA_WEIGHT 10

struct sqlite_store {
    struct store base; /* first member: the backend ops (store_backend.h) */
    sqlite3 *db;
    char *path;
    struct sqlite_checkpointer *checkpointer; /* writable stores (store_sqlite_checkpoint.h) */
    bool in_tx;
    bool scanning;   /* a store_scan_* is running its callback */
    bool unweighted; /* schema before STORE_SCHEMA_WEIGHT */
    sqlite3_stmt *stmts[STMT_COUNT];

    /* ingest caches (cleared on rollback and purge: they may name rows that no longer exist) */
    struct skpx_strmap frame_ids; /* signature → frames.id */
    struct skpx_strmap seg_ids;   /* segment id → segids.id */
    struct skpx_strmap task_keys; /* task id → task_keys.id */
    struct skpx_u64map task_segs; /* (task key << 32 | seg) → 1 */

    /* stack cache, used by ingest (by frame ids) and by readers (by id) */
    struct store_stack_cache stack_cache;

    /* read cache: frames.id → signature, kept until close (store_get_frame's contract) */
    struct store_frame_sigs frame_sigs;

    /* scratch for stack encoding */
    uint32_t *scratch_ids;
    size_t scratch_cap;
    uint8_t *scratch_blob;
    size_t scratch_blob_cap;

    /* stats */
    uint64_t commits;
    uint64_t commit_ns_total;
    int64_t n_snapshots; /* -1 until first counted */
};

/* Maps an SQLite result code to skp_err (SQLITE_NOMEM → ENOMEM, everything else → EIO) and
 * logs `what` with SQLite's message. */
skp_err store__sqlerr(struct sqlite_store *st, int rc, const char *what);
/* Returns the cached prepared statement for `id`, reset and unbound; NULL on failure
 * (*err set). */
sqlite3_stmt *store__stmt(struct sqlite_store *st, enum store_stmt id, skp_err *err);
/* Prepares an ad-hoc statement (not cached). */
SKP_MUST_CHECK skp_err store__prepare(struct sqlite_store *st, const char *sql, sqlite3_stmt **out);
/* Runs SQL text without results. */
SKP_MUST_CHECK skp_err store__exec(struct sqlite_store *st, const char *sql);
/* BEGIN IMMEDIATE / COMMIT (timed) / ROLLBACK (also clears the ingest caches). */
SKP_MUST_CHECK skp_err store__begin(struct sqlite_store *st);
SKP_MUST_CHECK skp_err store__commit(struct sqlite_store *st);
/* Ends the transaction as `err` says: COMMIT when it is SKP_OK, ROLLBACK when it is not or the
 * commit failed. Returns err, or the commit's error. */
SKP_MUST_CHECK skp_err store__finish(struct sqlite_store *st, skp_err err);
void store__rollback(struct sqlite_store *st);
/* Clears the caches that may refer to rows rolled back or purged. */
void store__drop_ingest_caches(struct sqlite_store *st);

/* Reads the current row of `s`; a non-OK return stops the stepping and is passed on. */
typedef skp_err (*store_row_fn)(void *ud, sqlite3_stmt *s);
/* Steps `s` until SQLITE_DONE, calling row(ud, s) for every row. Returns row's first error, or
 * the SQLite error (store__sqlerr, logged with `what`). Neither resets nor finalizes `s`. */
SKP_MUST_CHECK skp_err store__each_row(struct sqlite_store *st, sqlite3_stmt *s, store_row_fn row,
                                       void *ud, const char *what);
/* Steps a statement that returns no row, then resets it. */
SKP_MUST_CHECK skp_err store__step_done(struct sqlite_store *st, sqlite3_stmt *s, const char *what);
/* Binds row i of a batch to `s` (parameters from 1; borrowed values stay valid until the next
 * row is bound). */
typedef void (*store_bind_fn)(sqlite3_stmt *s, size_t i, const void *rows);
/* Runs `sql` once for each of the n rows, after bind(s, i, rows), in one transaction; the first
 * error rolls it back. Errors: the SQLite error of the statement, BEGIN, a row or COMMIT
 * (logged with `what`). */
SKP_MUST_CHECK skp_err store__insert_rows(struct sqlite_store *st, const char *sql, size_t n,
                                          store_bind_fn bind, const void *rows, const char *what);
/* Text of column i, "" when NULL. Borrowed from the statement's current row. */
static inline const char *store__col_text(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? (const char *)t : "";
}
/* Text of column i, NULL when NULL. */
static inline const char *store__col_text_or_null(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? NULL : store__col_text(s, i);
}

/* ---- statements with key parameters ?1, ?2, ... (store_query.h's struct store_params; a row's
 * columns are bound by its description) ---- */
/* Binds p (may be NULL; at most STORE_MAX_PARAMS) from parameter `first` on (texts
 * SQLITE_STATIC); a NULL text stays unbound, SQL NULL. */
void store__bind_params(sqlite3_stmt *s, int first, const struct store_params *p);
/* Prepares an ad-hoc statement and binds p (may be NULL) as its parameters 1..n.
 * Errors: store__prepare's, SKP_EINVAL (p->over). */
SKP_MUST_CHECK skp_err store__prepare_with(struct sqlite_store *st, const char *sql,
                                           const struct store_params *p, sqlite3_stmt **out);
/* store__prepare_with, then store__read_one / store__read_rows / store__visit_rows. */
SKP_MUST_CHECK skp_err store__query_one(struct sqlite_store *st, const char *sql,
                                        const struct store_params *p,
                                        const struct store_row_desc *d, void *out,
                                        const char *what);
SKP_MUST_CHECK skp_err store__query_rows(struct sqlite_store *st, const char *sql,
                                         const struct store_params *p,
                                         const struct store_row_desc *d, void **out, size_t *n,
                                         const char *what);
SKP_MUST_CHECK skp_err store__query_each(struct sqlite_store *st, const char *sql,
                                         const struct store_params *p,
                                         const struct store_row_desc *d,
                                         const struct store_visit *v, const char *what);
/* store__prepare_with, then one step of a statement that returns no row; *changes (may be NULL)
 * gets the number of rows it changed. Errors: those of store__prepare_with, the SQLite error
 * (logged with `what`). */
SKP_MUST_CHECK skp_err store__query_done(struct sqlite_store *st, const char *sql,
                                         const struct store_params *p, int64_t *changes,
                                         const char *what);
/* store__prepare_with, then whether the select yields a row (*found). Errors: those of
 * store__prepare_with, the SQLite error (logged with `what`). */
SKP_MUST_CHECK skp_err store__query_exists(struct sqlite_store *st, const char *sql,
                                           const struct store_params *p, bool *found,
                                           const char *what);
/* Cancels a task: runs `update` with p (the task's id first), counted as a commit. SKP_OK when it
 * changed the task's row, else SKP_ENOTFOUND when `exists` (its ?1 the id) finds no task of that
 * id, SKP_ESTATE when there is one (cancelled already, or over). Errors: the SQLite error. */
SKP_MUST_CHECK skp_err store__cancel(struct sqlite_store *st, const char *update,
                                     const char *exists, const struct store_params *p,
                                     const char *what);

/* ---- rows (store_sqlite_rows.c), by their description (store_rows.h) ---- */
/* Binds the bound columns of row from parameter `first` on; returns the next parameter's index.
 * Texts and blobs are bound SQLITE_STATIC: row must outlive the step. */
int store__bind_row(sqlite3_stmt *s, int first, const struct store_row_desc *d, const void *row);
/* Reads columns col0.. of the statement's current row into out (d's struct, zeroed first).
 * own: texts and blobs are copied (freed by d->cleanup; on SKP_ENOMEM nothing is left to free);
 * else borrowed from the statement until its next step. */
SKP_MUST_CHECK skp_err store__read_row(sqlite3_stmt *s, int col0, const struct store_row_desc *d,
                                       void *out, bool own);
/* Steps s to its end, every row owned in one array (*out: skpx_free, each row d->cleanup;
 * NULL when none), and finalizes s. Errors: SKP_ENOMEM, the SQLite error (logged with `what`). */
SKP_MUST_CHECK skp_err store__read_rows(struct sqlite_store *st, sqlite3_stmt *s,
                                        const struct store_row_desc *d, void **out, size_t *n,
                                        const char *what);
/* Steps s once: its row, owned, into out (as store__read_row); SKP_ENOTFOUND when it yields
 * none. Finalizes s. Errors: SKP_ENOMEM, the SQLite error (logged with `what`). */
SKP_MUST_CHECK skp_err store__read_one(struct sqlite_store *st, sqlite3_stmt *s,
                                       const struct store_row_desc *d, void *out, const char *what);
/* Prepares sql, binds row from parameter 1 on, runs it once. *rowid (may be NULL) gets the new
 * row's id. Errors: SKP_EEXIST (a constraint refused the row), the SQLite error (logged with
 * `what`). */
SKP_MUST_CHECK skp_err store__insert_row(struct sqlite_store *st, const char *sql,
                                         const struct store_row_desc *d, const void *row,
                                         int64_t *rowid, const char *what);
/* Steps s to its end, each row read by d (borrowed) and handed to v; the first error stops the
 * walk and is returned. Finalizes s. Errors: v's, SKP_ENOMEM, the SQLite error. */
SKP_MUST_CHECK skp_err store__visit_rows(struct sqlite_store *st, sqlite3_stmt *s,
                                         const struct store_row_desc *d,
                                         const struct store_visit *v, const char *what);

/* Segment id string → segids.id, creating the row (with first_ms) inside the current
 * transaction when missing. */
SKP_MUST_CHECK skp_err store__segment_ref(struct sqlite_store *st, const char *segment_id,
                                          int64_t first_ms, uint32_t *out);
/* Looks a segment id up without creating it; SKP_ENOTFOUND if unknown, SKP_EINVAL if NULL. */
SKP_MUST_CHECK skp_err store__segment_find(struct sqlite_store *st, const char *segment_id,
                                           uint32_t *out);
/* Task id string → task_keys.id; created inside the current transaction when `create`,
 * else SKP_ENOTFOUND if unknown. */
SKP_MUST_CHECK skp_err store__task_key(struct sqlite_store *st, const char *task_id, bool create,
                                       uint32_t *out);
/* Frames (root first, at most STORE_MAX_FRAMES kept) → de-duplicated stack id, inserting the
 * frames and the stack inside the current transaction when new. */
SKP_MUST_CHECK skp_err store__stack_ref(struct sqlite_store *st, char *const *frames,
                                        size_t n_frames, uint32_t *out);
/* Grows st->scratch_ids to n_ids ids (and the blob scratch to match). */
SKP_MUST_CHECK skp_err store__ensure_scratch(struct sqlite_store *st, size_t n_ids);

/* Schema (store_schema.c): migrates `db` from its user_version up to `target` (0 = latest).
 * Errors: SKP_EIO (newer schema than this build, failed step; the step is rolled back). */
SKP_MUST_CHECK skp_err store__migrate(struct sqlite_store *st, int target);

/* Test hook: the store's connection (tests set PRAGMA max_page_count to simulate a full disk). */
sqlite3 *store__db(struct store *st);

/* The SQLite backend object behind a struct store (base is its first member). */
static inline struct sqlite_store *sqlite_store_of(struct store *base)
{
    return (struct sqlite_store *)base;
}

/* The backend's entry points: store.h's functions of the same name without "sqlite_", reached
 * through sqlite_store_ops (store_sqlite.c); `base` is a store this backend opened. The ops of
 * store_backend.h's lists (all but the CLUSTER ones) are declared from the lists. */
extern const struct store_backend_ops sqlite_store_ops;
SKP_MUST_CHECK skp_err sqlite_store_open(const char *path, const struct store_opts *opts,
                                         struct store **out);
void sqlite_store_close(struct store *base);
SKP_MUST_CHECK skp_err sqlite_store_purge_before(struct store *base, int64_t before_ms,
                                                 uint64_t *n_deleted);
#define SQLITE_STORE_DECLARE(...) STORE_BACKEND_DECLARE(sqlite, __VA_ARGS__)
STORE_CORE_OPS(SQLITE_STORE_DECLARE)
STORE_FEATURE_OPS(SQLITE_STORE_DECLARE)

#endif
