/* store_pg_int.h - internals shared by the files of the PostgreSQL backend of store.h (libpq).
 * Not a contract for other modules. The backend's files:
 *   store_pg.c            connection (URL, reconnect with backoff), parameters, statements,
 *                         transactions, errors, open/close, check, stats, the ops table
 *   store_pg_schema.c     the schema as migration steps (skp_schema_version, advisory lock)
 *   store_pg_registry.c   services, instances, tasks (+ the service task lock), task logs
 *   store_pg_refs.c       segment / task ids → numbers, de-duplicated frames and stacks
 *                         (batch upserts safe under concurrent collectors), stack and frame reads
 *   store_pg_ingest.c     snapshot ingest (day partitions made on demand) and the analyzer's scans
 *   store_pg_segments.c   segments, the profiled-segment listing (keyset pages of the
 *                         segment_listing table, kept by triggers), segment info
 *   store_pg_retention.c  store_purge_before (drops whole day partitions)
 * A feature's tables go in a store_pg_<feature>.c of their own, whose functions are members of
 * pg_store_ops (store_pg.c) and whose migration step is appended to store_pg_schema.c.
 *
 * Design: one connection per store object (libpq is not shared between threads); every text
 * parameter is sent as valid UTF-8 (agent bytes are sanitized as the SQLite backend sanitizes
 * frames); numbers are text parameters; results are read in text format. Every public function
 * starts with pg__ready: a connection found lost is reset at most once per backoff period
 * (100 ms doubling to 5 s), and calls in between answer SKP_EIO at once. */
#ifndef SKP_SERVER_STORE_PG_INT_H
#define SKP_SERVER_STORE_PG_INT_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/map.h"
#include "server/store/store.h"
#include "server/store/store_backend.h"
#include "server/store/store_rows.h"
#include "server/store/store_stack_cache.h"

#define PG_FRAME_CACHE_MAX (1u << 18) /* signature → id entries */
#define PG_NAME_CACHE_MAX (1u << 16)  /* segment / task id strings → ids */
#define PG_PAIR_CACHE_MAX (1u << 16)  /* (task, segment) pairs known to be recorded */
#define PG_MAX_FRAMES 4096            /* frames kept per stack (as the SQLite backend) */
#define PG_DAY_MS ((int64_t)86400000) /* snapshot partitions are this wide */
#define PG_BACKOFF_MIN_MS 100
#define PG_BACKOFF_MAX_MS 5000
#define PG_MAX_PARAMS 16
/* Characters of a segment id in segment_listing's key (its id_head column, schema step 3): a
 * btree entry holds ~2.7 kB, 256 characters of UTF-8 at most 1 kB. */
#define PG_LISTING_HEAD_SQL "256"

/* Prepared statements: prepared on a connection at first use (a bit in pg_store.prepared),
 * again after a reconnect. */
enum pg_stmt {
    PGS_FRAME_SIG,
    PGS_STACK_GET,
    PGS_SEG_FIND,
    PGS_TASKKEY_FIND,
    PGS_SNAP_INS,
    PGS_TASKSEG_INS,
    PGS_SEGMENT_INS,
    PGS_EPOCH_CHECK,
    PGS_LISTING_LOCK,
    PGS_SNAP_INS_UNWEIGHTED, /* a schema before step 5 (no weight column) */
    PGS_COUNT
};

struct pg_store {
    struct store base; /* first member: the backend ops (store_backend.h) */
    PGconn *conn;
    char *url;   /* owned: what store_open got (reconnects use it) */
    char *shown; /* owned: the URL without its password, for logs */
    bool in_tx;
    bool scanning;     /* a scan is running its callback */
    uint64_t prepared; /* bit i: statement i is prepared on this connection */
    int64_t next_reset_ms;
    int64_t backoff_ms;
    char sqlstate[6]; /* of the last failed statement ("" when none) */

    /* ingest caches (cleared on rollback and purge: they may name rows that no longer exist) */
    struct skpx_strmap frame_ids;         /* signature (raw) → frames.id */
    struct skpx_strmap seg_ids;           /* segment id → segids.id */
    struct skpx_u64map seg_first;         /* segids.id → first_ms (its snapshot partition) */
    struct skpx_strmap task_keys;         /* task id → task_keys.id */
    struct skpx_u64map task_segs;         /* (task << 32 | seg) → 1 */
    struct store_stack_cache stack_cache; /* by id and by frame ids */
    struct skpx_u64map parts;             /* day number → 1: snapshot partitions known to exist */

    /* read cache: frames.id → signature, kept until close (store_get_frame's contract) */
    struct store_frame_sigs frame_sigs;

    uint32_t *scratch_ids;
    size_t scratch_cap;

    uint64_t commits;
    uint64_t commit_ns_total;
    int64_t n_snapshots; /* -1 until first counted */
    bool unweighted;     /* schema before step 5 (schema_version_max): snapshots have no weight */
    bool cluster_tables; /* store_pg_cluster.c's tables were created (or found) */
    int64_t epoch;       /* skp_purge_epoch when the ingest caches were filled (-1 unknown) */

    /* store_pg_io.c: the stall bound (0 = none) and a reconnect in progress */
    int64_t stall_ms;
    bool connecting;          /* conn is a PQconnectStartParams connection being polled */
    int connect_poll;         /* the last PostgresPollingStatusType of it */
    int64_t connect_began_ms; /* monotonic */
    char down[160];           /* why the connection was last lost ("" = never) */
};

static inline struct pg_store *pg_store_of(struct store *base)
{
    return (struct pg_store *)base;
}

/* ---- parameters: text values (NULL = SQL NULL) ---- */
struct pg_params {
    int n;
    const char *v[PG_MAX_PARAMS];
    char num[PG_MAX_PARAMS][24];
    char *owned[PG_MAX_PARAMS]; /* sanitized copies / built arrays */
};
/* Adds a text (sanitized to UTF-8 when it is not; NULL = SQL NULL). */
void pgp_text(struct pg_params *p, const char *s);
void pgp_int(struct pg_params *p, int64_t v);
/* Adds a text the params take ownership of (skpx_malloc'd; NULL = out of memory recorded). */
void pgp_owned(struct pg_params *p, char *s);
/* True if every value could be added (no allocation failed). */
bool pgp_ok(const struct pg_params *p);
void pgp_free(struct pg_params *p);

/* ---- a growable text (array literals) ---- */
struct pg_buf {
    char *s;
    size_t len, cap;
    bool failed;
};
void pgb_putc(struct pg_buf *b, char c);
void pgb_puts(struct pg_buf *b, const char *s);
void pgb_int(struct pg_buf *b, int64_t v);
/* Appends s as a quoted array element ("..." with \ and " escaped), sanitized to UTF-8. */
void pgb_elem(struct pg_buf *b, const char *s);
/* Appends bytes as a quoted bytea array element ("\\x0a0b"). */
void pgb_bytea_elem(struct pg_buf *b, const uint8_t *p, size_t n);
/* Hands the text over (NULL if an append failed); the buffer is empty afterwards. */
char *pgb_take(struct pg_buf *b);

/* ---- statements ---- */
/* Makes the connection usable: SKP_OK, or SKP_EIO when it is lost and could not be reset
 * (or the backoff since the last attempt has not passed). */
SKP_MUST_CHECK skp_err pg__ready(struct pg_store *st);
/* Runs sql with p (may be NULL). Returns the result when its status is COMMAND_OK or
 * TUPLES_OK, else NULL with *err set (logged with `what` and the server's message; sqlstate
 * kept in st->sqlstate). The caller PQclear()s the result. */
PGresult *pg__exec(struct pg_store *st, const char *sql, struct pg_params *p, skp_err *err,
                   const char *what);
/* The same through the prepared statement `id`. */
PGresult *pg__execp(struct pg_store *st, enum pg_stmt id, struct pg_params *p, skp_err *err,
                    const char *what);
/* pg__exec, then pgp_free(p) (p may be NULL): the call most statements make. Outside a
 * transaction it starts with pg__ready (a lost connection is reset, or SKP_EIO at once). */
PGresult *pg__query(struct pg_store *st, const char *sql, struct pg_params *p, skp_err *err,
                    const char *what);
/* pg__query of an INSERT ... RETURNING id: the id of its one row (0 with *err set when it
 * failed, SKP_EIO when it gave no single row). */
int64_t pg__query_id(struct pg_store *st, const char *sql, struct pg_params *p, skp_err *err,
                     const char *what);
/* Fills the parameters of row i of a batch. */
typedef void (*pg_bind_fn)(struct pg_params *p, size_t i, const void *rows);
/* Runs `sql` once for each of the n rows with the parameters bind(p, i, rows) gives, in one
 * transaction; the first error rolls it back. Errors: pg__ready's, the server's (logged with
 * `what`). */
SKP_MUST_CHECK skp_err pg__insert_rows(struct pg_store *st, const char *sql, size_t n,
                                       pg_bind_fn bind, const void *rows, const char *what);
/* Runs sql (no parameters) and discards the result. */
SKP_MUST_CHECK skp_err pg__cmd(struct pg_store *st, const char *sql, const char *what);
/* BEGIN (after pg__ready) / COMMIT (timed) / ROLLBACK (also drops the ingest caches). */
SKP_MUST_CHECK skp_err pg__begin(struct pg_store *st);
SKP_MUST_CHECK skp_err pg__commit(struct pg_store *st);
/* Ends the transaction as `err` says: COMMIT when it is SKP_OK, ROLLBACK when it is not or the
 * commit failed. Returns err, or the commit's error. */
SKP_MUST_CHECK skp_err pg__finish(struct pg_store *st, skp_err err);
/* pg__begin, then the transaction's advisory lock `key` (pg_advisory_xact_lock, logged as
 * `what` when it fails): held until COMMIT or ROLLBACK, so collectors doing the same wait for
 * each other. A failed lock is rolled back: on error no transaction is open. */
SKP_MUST_CHECK skp_err pg__begin_locked(struct pg_store *st, int64_t key, const char *what);
void pg__rollback(struct pg_store *st);
void pg__drop_ingest_caches(struct pg_store *st);
/* Whether the last failure was a serialization failure or a deadlock (worth a retry). */
bool pg__retryable(const struct pg_store *st);

/* store_pg_io.c: libpq's waits within st->stall_ms (when set; libpq's blocking calls when 0).
 * The exec functions are PQexecParams, PQexecPrepared, PQprepare and PQexec; pg__io_result is
 * PQgetResult; pg__io_flush sends what is queued (false: not sent, the connection is lost);
 * pg__io_nonblocking switches the socket mode around sends (no-op without a bound). A wait
 * that runs out shuts the connection's socket down: libpq then fails at once. */
PGresult *pg__io_exec(struct pg_store *st, const char *sql, int n, const char *const *v);
PGresult *pg__io_exec_prepared(struct pg_store *st, const char *name, int n, const char *const *v);
PGresult *pg__io_prepare(struct pg_store *st, const char *name, const char *sql);
PGresult *pg__io_exec_simple(struct pg_store *st, const char *sql);
PGresult *pg__io_result(struct pg_store *st);
bool pg__io_flush(struct pg_store *st);
bool pg__io_nonblocking(struct pg_store *st, bool on);
/* One step of a reconnect that never waits (started when none runs): *done once connected;
 * SKP_OK without *done while it goes on; SKP_EIO when it failed (st->down says why). */
SKP_MUST_CHECK skp_err pg__io_reconnect(struct pg_store *st, bool *done);

/* Result helpers: value of (row, col) as text ("" when NULL), int64, NULL-ness. */
static inline const char *pg__txt(const PGresult *r, int row, int col)
{
    return PQgetvalue(r, row, col);
}
int64_t pg__i64(const PGresult *r, int row, int col);
/* Column `col` of every row of r as an array literal ("{1,2,3}": for values that need no
 * quoting, e.g. ids); NULL when out of memory. */
char *pg__column_array(const PGresult *r, int col);
/* Decodes a bytea in text (hex) form "\x0a0b..." in place; returns the length or SIZE_MAX. */
size_t pg__unhex(char *s);
/* In a batch's transaction, before its references are resolved: holds the purge epoch row
 * FOR SHARE (a purge waits for the batch, or the batch for the purge) and drops the ingest
 * caches when a purge ran since they were filled. */
SKP_MUST_CHECK skp_err pg__batch_epoch(struct pg_store *st);
static inline bool pg__null(const PGresult *r, int row, int col)
{
    return PQgetisnull(r, row, col) != 0;
}

/* ---- rows (store_pg_rows.c), by their description (store_rows.h) ---- */
/* Adds the bound columns of row as parameters, in the description's order. */
void pgp_row(struct pg_params *p, const struct store_row_desc *d, const void *row);
/* Reads columns col0.. of result row i into out (d's struct, zeroed first). own: texts and blobs
 * are copied (freed by d->cleanup; on an error nothing is left to free); else borrowed from r
 * until PQclear (a blob is decoded in place: a borrowed row is read once).
 * Errors: SKP_ENOMEM, SKP_EPROTO (a bytea not in hex form). */
SKP_MUST_CHECK skp_err pg__read_row(PGresult *r, int i, int col0, const struct store_row_desc *d,
                                    void *out, bool own);
/* Every row of r, owned, as one array (*out: skpx_free, each row d->cleanup; NULL when none). */
SKP_MUST_CHECK skp_err pg__read_rows(PGresult *r, const struct store_row_desc *d, void **out,
                                     size_t *n);
/* pg__query, then its rows as pg__read_rows gives them. Errors: pg__query's, pg__read_rows'. */
SKP_MUST_CHECK skp_err pg__query_rows(struct pg_store *st, const char *sql, struct pg_params *p,
                                      const struct store_row_desc *d, void **out, size_t *n,
                                      const char *what);
/* pg__query of sql with row's bound columns as its parameters (an INSERT of one row, as
 * SQLite's store__insert_row). Errors: pg__query's. */
SKP_MUST_CHECK skp_err pg__insert_row(struct pg_store *st, const char *sql,
                                      const struct store_row_desc *d, const void *row,
                                      const char *what);
/* Cancels task `id` (as SQLite's store__cancel): runs `update` with p (freed), counted in
 * st->commits when `counted`. SKP_OK when it changed the task's row, else SKP_ENOTFOUND when
 * `exists` ($1 the id) finds no task of that id, SKP_ESTATE when there is one (cancelled already,
 * or over). Errors: pg__query's. */
SKP_MUST_CHECK skp_err pg__cancel(struct pg_store *st, const char *update, const char *exists,
                                  const char *id, struct pg_params *p, bool counted,
                                  const char *what);
/* pg__query of a select of at most one row: that row, owned, into out (as pg__read_row);
 * SKP_ENOTFOUND when none. Errors: pg__query's, pg__read_row's. */
SKP_MUST_CHECK skp_err pg__query_one(struct pg_store *st, const char *sql, struct pg_params *p,
                                     const struct store_row_desc *d, void *out, const char *what);
/* pg__query, then each row read by d (borrowed) and handed to v; the first error stops the walk
 * and is returned. Errors: pg__query's, v's, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err pg__query_each(struct pg_store *st, const char *sql, struct pg_params *p,
                                      const struct store_row_desc *d, const struct store_visit *v,
                                      const char *what);

/* ---- the profiled-segment listing (store_pg_segments.c) ---- */
/* A page's query: $1 task id, $2 limit (NULL: all); the second with the cursor after it, $3
 * start, $4 segment id. Exposed for the test that checks their plan. */
extern const char pg__page_sql_first[];
extern const char pg__page_sql_after[];

/* ---- schema (store_pg_schema.c) ---- */
/* Migrates to `target` (0 = latest) in one transaction under an advisory lock, so collectors
 * starting together migrate once. Errors: SKP_EIO (newer schema, failed step: rolled back). */
SKP_MUST_CHECK skp_err pg__migrate(struct pg_store *st, int target);
int pg_schema_version(void);

/* ---- references (store_pg_refs.c), inside the caller's transaction ---- */
/* One snapshot's keys as ingest resolves them. */
struct pg_ref_req {
    const char *segment_id;
    int64_t first_ms;    /* for a new segment: when it was first received */
    const char *task_id; /* NULL: no task key needed */
    char *const *frames;
    size_t n_frames;           /* SIZE_MAX: no stack needed */
    uint32_t seg, task, stack; /* out */
    int64_t seg_first_ms;      /* out: the segment's stored first_ms */
};
/* The first step of a batch's ingest: pg__ready, then n zeroed requests (*out: skpx_free).
 * Errors: pg__ready's, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err pg__ref_reqs(struct pg_store *st, size_t n, struct pg_ref_req **out);
/* Resolves segment ids, task ids and stacks of n requests with a few batched upserts.
 * Errors: SKP_EIO, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err pg__resolve(struct pg_store *st, struct pg_ref_req *v, size_t n);
/* The same from the caches alone (no statement): true when every reference was cached. */
bool pg__resolve_cached(struct pg_store *st, struct pg_ref_req *v, size_t n);
/* One round trip (libpq pipeline mode): BEGIN, the purge-epoch check against st->epoch, the
 * `n` prepared statements with their params, COMMIT. *rows gets the row count of the last
 * statement. SKP_ESTATE when the epoch moved (a purge ran: the caches are dropped, nothing was
 * written); other errors as pg__exec; the transaction is rolled back on any error. */
SKP_MUST_CHECK skp_err pg__pipeline_tx(struct pg_store *st, const enum pg_stmt *ids,
                                       struct pg_params *const *params, size_t n, size_t *rows);
/* Looks a segment (its id and first_ms, may be NULL) / task id up without creating it, after
 * pg__ready (the first step of the reads by segment or task): SKP_ENOTFOUND if unknown; a NULL
 * segment id is SKP_EINVAL. */
SKP_MUST_CHECK skp_err pg__segment_find(struct pg_store *st, const char *segment_id, uint32_t *out,
                                        int64_t *first_ms);
SKP_MUST_CHECK skp_err pg__task_key_find(struct pg_store *st, const char *task_id, uint32_t *out);
/* Loads the stacks (and their frames' signatures) of ids not cached yet, in bulk. */
SKP_MUST_CHECK skp_err pg__prefetch_stacks(struct pg_store *st, const uint32_t *ids, size_t n);

/* ---- the backend's entry points (store.h's functions with "pg_" before them) ---- */
/* Those of store_backend.h's lists are declared from the lists: the core ones in store_pg.c and
 * the files above, the features in one store_pg_<feature>.c each (store_pg_proc.c,
 * store_pg_continuous.c, store_pg_cluster.c); their tables: the feature steps of
 * store_pg_schema.c. */
extern const struct store_backend_ops pg_store_ops;
SKP_MUST_CHECK skp_err pg_store_open(const char *url, const struct store_opts *opts,
                                     struct store **out);
void pg_store_close(struct store *base);
SKP_MUST_CHECK skp_err pg_store_purge_before(struct store *base, int64_t before_ms,
                                             uint64_t *n_deleted);
#define PG_STORE_DECLARE(...) STORE_BACKEND_DECLARE(pg, __VA_ARGS__)
STORE_CORE_OPS(PG_STORE_DECLARE)
STORE_FEATURE_OPS(PG_STORE_DECLARE)
STORE_CLUSTER_OPS(PG_STORE_DECLARE)

#endif
