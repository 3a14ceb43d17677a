/* store_pg.c - the PostgreSQL backend of store.h: connection from a postgresql:// URL (password
 * and TLS from the URL or libpq's environment: PGPASSWORD, PGSSLMODE, ~/.pgpass ...),
 * reconnect with backoff, parameters, prepared statements, transactions, error mapping,
 * open/close, check, stats and the ops table. The other parts are listed in store_pg_int.h.
 * Single-threaded: one connection per store object. */
#include "server/store/postgres/store_pg_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/grow.h"
#include "common/log.h"
#include "server/formats/utf8.h"

/* ---- parameters ---- */

void pgp_text(struct pg_params *p, const char *s)
{
    if (p->n >= PG_MAX_PARAMS) {
        p->n = PG_MAX_PARAMS + 1; /* recorded as a failure */
        return;
    }
    int i = p->n++;
    p->owned[i] = NULL;
    if (s && !skp_utf8_valid(s, strlen(s))) {
        p->owned[i] = skp_utf8_sanitize(s);
        if (!p->owned[i]) {
            p->n = PG_MAX_PARAMS + 1;
            return;
        }
        s = p->owned[i];
    }
    p->v[i] = s;
}

void pgp_int(struct pg_params *p, int64_t v)
{
    if (p->n >= PG_MAX_PARAMS) {
        p->n = PG_MAX_PARAMS + 1;
        return;
    }
    int i = p->n++;
    p->owned[i] = NULL;
    snprintf(p->num[i], sizeof(p->num[i]), "%" PRId64, v);
    p->v[i] = p->num[i];
}

void pgp_owned(struct pg_params *p, char *s)
{
    if (p->n >= PG_MAX_PARAMS || !s) {
        skpx_free(s);
        p->n = PG_MAX_PARAMS + 1;
        return;
    }
    int i = p->n++;
    p->owned[i] = s;
    p->v[i] = s;
}

bool pgp_ok(const struct pg_params *p)
{
    return p->n <= PG_MAX_PARAMS;
}

void pgp_free(struct pg_params *p)
{
    int n = p->n <= PG_MAX_PARAMS ? p->n : PG_MAX_PARAMS;
    for (int i = 0; i < n; i++)
        skpx_free(p->owned[i]);
    p->n = 0;
}

/* ---- growable text ---- */

static void pgb_need(struct pg_buf *b, size_t more)
{
    /* every character and number of a snapshot batch's array literals passes here: the common
     * case (room left) stays inline, without skpx_grow's call */
    if (b->failed || b->len + more + 1 <= b->cap)
        return;
    if (skpx_grow(&b->s, &b->cap, b->len + more + 1, 1, 256))
        b->failed = true;
}

void pgb_putc(struct pg_buf *b, char c)
{
    pgb_need(b, 1);
    if (b->failed)
        return;
    b->s[b->len++] = c;
    b->s[b->len] = '\0';
}

void pgb_puts(struct pg_buf *b, const char *s)
{
    size_t n = strlen(s);
    pgb_need(b, n);
    if (b->failed)
        return;
    memcpy(b->s + b->len, s, n + 1);
    b->len += n;
}

void pgb_int(struct pg_buf *b, int64_t v)
{
    char num[24];
    snprintf(num, sizeof(num), "%" PRId64, v);
    pgb_puts(b, num);
}

void pgb_elem(struct pg_buf *b, const char *s)
{
    char *fixed = NULL;
    if (!skp_utf8_valid(s, strlen(s))) {
        fixed = skp_utf8_sanitize(s);
        if (!fixed) {
            b->failed = true;
            return;
        }
        s = fixed;
    }
    pgb_need(b, strlen(s) * 2 + 2);
    if (!b->failed) {
        b->s[b->len++] = '"';
        for (const char *c = s; *c; c++) {
            if (*c == '"' || *c == '\\')
                b->s[b->len++] = '\\';
            b->s[b->len++] = *c;
        }
        b->s[b->len++] = '"';
        b->s[b->len] = '\0';
    }
    skpx_free(fixed);
}

void pgb_bytea_elem(struct pg_buf *b, const uint8_t *p, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    pgb_need(b, n * 2 + 6);
    if (b->failed)
        return;
    memcpy(b->s + b->len, "\"\\\\x", 4);
    b->len += 4;
    for (size_t i = 0; i < n; i++) {
        b->s[b->len++] = hex[p[i] >> 4];
        b->s[b->len++] = hex[p[i] & 15];
    }
    b->s[b->len++] = '"';
    b->s[b->len] = '\0';
}

char *pgb_take(struct pg_buf *b)
{
    char *s = b->failed ? NULL : b->s;
    if (b->failed)
        skpx_free(b->s);
    else if (!s)
        s = skpx_strdup("");
    memset(b, 0, sizeof(*b));
    return s;
}

/* ---- connection ---- */

static void notice_quiet(void *arg, const char *message)
{
    (void)arg;
    SKPX_DEBUG("store: postgresql: %s", message);
}

/* Our session settings (again after a reset): quiet notices, no JIT (our statements are short:
 * compiling costs more than it saves), reads only for a read-only store. */
static skp_err session_setup(struct pg_store *st)
{
    PQsetNoticeProcessor(st->conn, notice_quiet, NULL);
    return pg__cmd(st,
                   st->base.read_only ? "SET client_min_messages = warning; SET jit = off; "
                                        "SET default_transaction_read_only = on"
                                      : "SET client_min_messages = warning; SET jit = off",
                   "session setup");
}

/* Connects (st->conn) and sets the session up. Errors: SKP_EIO (logged). */
static skp_err connect_db(struct pg_store *st)
{
    /* Our defaults first: what the URL says wins (expand_dbname). */
    const char *keys[] = {"connect_timeout", "application_name", "dbname", NULL};
    const char *vals[] = {"10", "skyprofd", st->url, NULL};
    st->conn = PQconnectdbParams(keys, vals, 1);
    if (!st->conn)
        return SKP_ENOMEM;
    if (PQstatus(st->conn) != CONNECTION_OK) {
        SKPX_ERROR("store: cannot connect to %s: %s", st->shown, PQerrorMessage(st->conn));
        return SKP_EIO;
    }
    st->prepared = 0;
    return session_setup(st);
}

skp_err pg__ready(struct pg_store *st)
{
    if (st->conn && !st->connecting && PQstatus(st->conn) == CONNECTION_OK)
        return SKP_OK;
    int64_t now = skpx_now_ms();
    if (!st->connecting && now < st->next_reset_ms)
        return SKP_EIO;
    st->in_tx = false;
    st->scanning = false;
    st->prepared = 0;
    pg__drop_ingest_caches(st);
    if (st->stall_ms) { /* on the event loop: never wait for a connect (store_pg_io.c) */
        bool done = false;
        skp_err e = pg__io_reconnect(st, &done);
        if (e == SKP_ENOMEM)
            return e;
        if (!e && !done)
            return SKP_EIO;
        if (e)
            goto failed;
    } else if (st->conn) {
        PQreset(st->conn);
    }
    if (st->conn && PQstatus(st->conn) == CONNECTION_OK) {
        if (session_setup(st) != SKP_OK)
            goto failed;
        SKPX_INFO("store: reconnected to %s", st->shown);
        st->backoff_ms = 0;
        st->next_reset_ms = 0;
        return SKP_OK;
    }
failed:
    st->backoff_ms = st->backoff_ms ? st->backoff_ms * 2 : PG_BACKOFF_MIN_MS;
    if (st->backoff_ms > PG_BACKOFF_MAX_MS)
        st->backoff_ms = PG_BACKOFF_MAX_MS;
    st->next_reset_ms = now + st->backoff_ms;
    SKPX_WARN("store: %s unreachable (%s); next attempt in %" PRId64 " ms", st->shown,
              st->conn ? PQerrorMessage(st->conn) : "no connection", st->backoff_ms);
    return SKP_EIO;
}

/* ---- statements ---- */

static const char *const k_sql[PGS_COUNT] = {
    [PGS_FRAME_SIG] = "SELECT sig FROM frames WHERE id = $1",
    [PGS_STACK_GET] = "SELECT frames FROM stacks WHERE id = $1",
    [PGS_SEG_FIND] = "SELECT id, first_ms FROM segids WHERE md5(segment_id) = md5($1) AND "
                     "segment_id = $1",
    [PGS_TASKKEY_FIND] = "SELECT id FROM task_keys WHERE md5(task_id) = md5($1) AND "
                         "task_id = $1",
    /* One statement per batch: arrays of the columns in, one run per (segment, task, t0) out
     * (schema step 6). Duplicates are dropped: within the batch the first one stays, and a
     * (segment, task, sequence) some stored run holds is left out (the runs read are those
     * whose sequence range meets the batch's; PGS_LISTING_LOCK made the batch's segments its
     * own). Its row count is the snapshots stored (a row without columns each). */
    [PGS_SNAP_INS] =
        "WITH b AS (SELECT * FROM unnest($1::bigint[], $2::int[], $3::bigint[], $4::bigint[], "
        "$5::bigint[], $6::bigint[], $7::int[]) WITH ORDINALITY "
        "AS b(seg, seq, task, time, stack, first_ms, weight, o)), "
        "d AS (SELECT DISTINCT ON (seg, task, first_ms, seq) * FROM b "
        "ORDER BY seg, task, first_ms, seq, o), "
        "k AS (SELECT seg, task, first_ms, min(seq) AS lo, max(seq) AS hi FROM d "
        "GROUP BY 1, 2, 3), "
        "old AS (SELECT k.seg, k.task, k.first_ms, u.seq FROM k CROSS JOIN LATERAL "
        "(SELECT r.seqs FROM snapshot_runs r WHERE r.seg = k.seg AND r.task = k.task "
        "AND r.first_ms = k.first_ms AND r.hi_seq >= k.lo AND r.lo_seq <= k.hi) r "
        "CROSS JOIN LATERAL unnest(r.seqs) AS u(seq)), "
        "n AS (SELECT * FROM d WHERE NOT EXISTS (SELECT 1 FROM old WHERE old.seg = d.seg "
        "AND old.task = d.task AND old.first_ms = d.first_ms AND old.seq = d.seq)), "
        "ins AS (INSERT INTO snapshot_runs(seg, task, first_ms, t0, lo_seq, hi_seq, seqs, dts, "
        "stacks, weights) SELECT seg, task, first_ms, t0, min(seq), max(seq), "
        "array_agg(seq ORDER BY seq), array_agg((time - t0)::int ORDER BY seq), "
        "array_agg(stack::int ORDER BY seq), CASE WHEN bool_and(weight = 1) THEN NULL "
        "ELSE array_agg(weight ORDER BY seq) END "
        "FROM (SELECT *, (time >> 30) << 30 AS t0 FROM n) x GROUP BY seg, task, first_ms, t0) "
        "SELECT FROM n",
    [PGS_SNAP_INS_UNWEIGHTED] = "INSERT INTO snapshots(seg, seq, task, time, stack, first_ms) "
                                "SELECT * FROM unnest($1::bigint[], $2::int[], $3::bigint[], "
                                "$4::bigint[], $5::bigint[], $6::bigint[]) ON CONFLICT DO NOTHING",
    [PGS_TASKSEG_INS] = "INSERT INTO task_segments(task, seg) SELECT * FROM "
                        "unnest($1::bigint[], $2::bigint[]) AS v(t, s) ORDER BY 1, 2 "
                        "ON CONFLICT DO NOTHING",
    /* FOR SHARE: a purge's epoch update waits for this batch, or this batch for the purge;
     * a moved epoch divides by zero (22012): the batch's cached ids may name purged rows. */
    [PGS_EPOCH_CHECK] = "SELECT 1 / (CASE WHEN epoch = $1 THEN 1 ELSE 0 END) "
                        "FROM skp_purge_epoch FOR SHARE",
    [PGS_SEGMENT_INS] = "INSERT INTO segments(" STORE_SEGMENT_COLS ") "
                        "VALUES(" STORE_SEGMENT_PG ") ON CONFLICT DO NOTHING",
    /* Before a batch's snapshots: the segids rows of all its segments in id order, FOR NO KEY
     * UPDATE: two batches storing dumps of one segment take turns, so the second one's
     * de-duplication (PGS_SNAP_INS, a new statement: it sees the first one's commit) finds
     * the first one's runs. Stronger than the segment_listing trigger's KEY SHARE (schema
     * step 3), and in id order, so that two batches never wait for each other in a cycle. */
    [PGS_LISTING_LOCK] = "SELECT 1 FROM segids WHERE id = ANY($1::bigint[]) ORDER BY id "
                         "FOR NO KEY UPDATE",
};

static skp_err result_error(struct pg_store *st, const PGresult *r, const char *what)
{
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    snprintf(st->sqlstate, sizeof(st->sqlstate), "%s", state ? state : "");
    const char *msg = r ? PQresultErrorMessage(r) : "";
    if (!msg || !*msg)
        msg = PQerrorMessage(st->conn);
    /* unique_violation is a caller's case (an id taken), not a failure to log */
    if (strcmp(st->sqlstate, "23505") == 0)
        return SKP_EEXIST;
    /* the purge-epoch check's way of saying "moved" (PGS_EPOCH_CHECK): not a failure either */
    if (strcmp(st->sqlstate, "22012") == 0 && strcmp(what, "purge epoch") == 0)
        return SKP_EIO;
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        n--;
    SKPX_ERROR("store: %s: %.*s%s%s%s", what, (int)n, msg, *st->sqlstate ? " (sqlstate " : "",
               st->sqlstate, *st->sqlstate ? ")" : "");
    /* no result at all while the connection is fine: libpq could not allocate one */
    if (!r && PQstatus(st->conn) == CONNECTION_OK)
        return SKP_ENOMEM;
    return SKP_EIO;
}

static PGresult *checked(struct pg_store *st, PGresult *r, skp_err *err, const char *what)
{
    ExecStatusType s = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK) {
        st->sqlstate[0] = '\0';
        *err = SKP_OK;
        return r;
    }
    *err = result_error(st, r, what);
    PQclear(r);
    return NULL;
}

PGresult *pg__exec(struct pg_store *st, const char *sql, struct pg_params *p, skp_err *err,
                   const char *what)
{
    if (p && !pgp_ok(p)) {
        *err = SKP_ENOMEM;
        return NULL;
    }
    PGresult *r = pg__io_exec(st, sql, p ? p->n : 0, p ? p->v : NULL);
    return checked(st, r, err, what);
}

PGresult *pg__execp(struct pg_store *st, enum pg_stmt id, struct pg_params *p, skp_err *err,
                    const char *what)
{
    if (p && !pgp_ok(p)) {
        *err = SKP_ENOMEM;
        return NULL;
    }
    char name[16];
    snprintf(name, sizeof(name), "skp%d", (int)id);
    if (!(st->prepared & (1ull << id))) {
        PGresult *r = checked(st, pg__io_prepare(st, name, k_sql[id]), err, k_sql[id]);
        if (!r)
            return NULL;
        PQclear(r);
        st->prepared |= 1ull << id;
    }
    PGresult *r = pg__io_exec_prepared(st, name, p ? p->n : 0, p ? p->v : NULL);
    return checked(st, r, err, what);
}

/* Reads one pipelined command's result(s) up to its terminating NULL; keeps the first error. */
static skp_err pipeline_result(struct pg_store *st, skp_err prev, size_t *rows, const char *what)
{
    skp_err err = prev;
    PGresult *r;
    while ((r = pg__io_result(st)) != NULL) {
        ExecStatusType s = PQresultStatus(r);
        if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK) {
            if (rows)
                *rows = (size_t)strtoull(PQcmdTuples(r), NULL, 10);
        } else if (s != PGRES_PIPELINE_ABORTED && !err) {
            err = result_error(st, r, what);
        } else if (!err) {
            err = SKP_EIO;
        }
        PQclear(r);
    }
    return err;
}

skp_err pg__pipeline_tx(struct pg_store *st, const enum pg_stmt *ids,
                        struct pg_params *const *params, size_t n, size_t *rows)
{
    for (size_t i = 0; i < n; i++)
        if (!pgp_ok(params[i]))
            return SKP_ENOMEM;
    if (!pg__io_nonblocking(st, true) || !PQenterPipelineMode(st->conn))
        return SKP_EIO;
    bool sent = PQsendQueryParams(st->conn, "BEGIN", 0, NULL, NULL, NULL, NULL, 0);
    struct pg_params ep = {0};
    pgp_int(&ep, st->epoch);
    enum pg_stmt all[8];
    struct pg_params *allp[8];
    size_t k = 0;
    all[k] = PGS_EPOCH_CHECK;
    allp[k++] = &ep;
    for (size_t i = 0; i < n && k < 8; i++) {
        all[k] = ids[i];
        allp[k++] = params[i];
    }
    uint64_t prepared = st->prepared;
    for (size_t i = 0; i < k && sent; i++) {
        char name[16];
        snprintf(name, sizeof(name), "skp%d", (int)all[i]);
        if (!(prepared & (1ull << all[i]))) {
            sent = PQsendPrepare(st->conn, name, k_sql[all[i]], 0, NULL);
            prepared |= 1ull << all[i];
        }
        sent = sent && PQsendQueryPrepared(st->conn, name, allp[i]->n, allp[i]->v, NULL, NULL, 0);
    }
    sent = sent && PQsendQueryParams(st->conn, "COMMIT", 0, NULL, NULL, NULL, NULL, 0);
    sent = sent && PQpipelineSync(st->conn) && pg__io_flush(st);
    skp_err err = sent ? SKP_OK : SKP_EIO;
    bool epoch_moved = false;
    int64_t t0 = skpx_mono_ns();
    if (sent) {
        st->in_tx = true;
        err = pipeline_result(st, err, NULL, "begin");
        for (size_t i = 0; i < k; i++) {
            if (!(st->prepared & (1ull << all[i]))) {
                skp_err b = err;
                err = pipeline_result(st, err, NULL, k_sql[all[i]]);
                if (!b && !err)
                    st->prepared |= 1ull << all[i];
            }
            skp_err before = err;
            err = pipeline_result(st, err, rows, i == 0 ? "purge epoch" : "batch");
            if (i == 0 && !before && err && strcmp(st->sqlstate, "22012") == 0)
                epoch_moved = true;
        }
        err = pipeline_result(st, err, NULL, "commit");
        PGresult *r = pg__io_result(st); /* the sync */
        if (!r || PQresultStatus(r) != PGRES_PIPELINE_SYNC)
            err = err ? err : SKP_EIO;
        PQclear(r);
    } else {
        SKPX_ERROR("store: cannot send a batch: %s", PQerrorMessage(st->conn));
    }
    pgp_free(&ep);
    if (!PQexitPipelineMode(st->conn) && !err)
        err = SKP_EIO;
    pg__io_nonblocking(st, false);
    if (err) {
        if (!sent) /* what was sent is unknown: the connection is not trusted any more */
            st->prepared = 0;
        pg__rollback(st);
        if (epoch_moved) {
            st->epoch = -1;
            return SKP_ESTATE;
        }
        return err;
    }
    st->in_tx = false;
    st->commits++;
    st->commit_ns_total += (uint64_t)(skpx_mono_ns() - t0);
    return SKP_OK;
}

skp_err pg__insert_rows(struct pg_store *st, const char *sql, size_t n, pg_bind_fn bind,
                        const void *rows, const char *what)
{
    skp_err err = pg__begin(st);
    for (size_t i = 0; i < n && !err; i++) {
        struct pg_params p = {0};
        bind(&p, i, rows);
        PQclear(pg__exec(st, sql, &p, &err, what));
        pgp_free(&p);
    }
    return pg__finish(st, err);
}

skp_err pg__cmd(struct pg_store *st, const char *sql, const char *what)
{
    skp_err err = SKP_OK;
    PGresult *r = checked(st, pg__io_exec_simple(st, sql), &err, what);
    PQclear(r);
    return err;
}

skp_err pg__begin(struct pg_store *st)
{
    skp_err err = pg__ready(st);
    if (!err)
        err = pg__cmd(st, "BEGIN", "begin");
    if (!err)
        st->in_tx = true;
    return err;
}

skp_err pg__commit(struct pg_store *st)
{
    int64_t t0 = skpx_mono_ns();
    skp_err err = pg__cmd(st, "COMMIT", "commit");
    st->in_tx = false;
    if (err) {
        pg__drop_ingest_caches(st);
        return err;
    }
    st->commits++;
    st->commit_ns_total += (uint64_t)(skpx_mono_ns() - t0);
    return SKP_OK;
}

skp_err pg__finish(struct pg_store *st, skp_err err)
{
    if (!err)
        err = pg__commit(st);
    if (err)
        pg__rollback(st);
    return err;
}

skp_err pg__begin_locked(struct pg_store *st, int64_t key, const char *what)
{
    skp_err err = pg__begin(st);
    if (err)
        return err;
    char lock[64];
    snprintf(lock, sizeof(lock), "SELECT pg_advisory_xact_lock(%" PRId64 ")", key);
    err = pg__cmd(st, lock, what);
    if (err)
        pg__rollback(st);
    return err;
}

void pg__rollback(struct pg_store *st)
{
    if (st->in_tx && PQstatus(st->conn) == CONNECTION_OK) {
        char state[6];
        memcpy(state, st->sqlstate, sizeof(state)); /* keep the failure's, not ROLLBACK's */
        PQclear(pg__io_exec_simple(st, "ROLLBACK"));
        memcpy(st->sqlstate, state, sizeof(state));
    }
    st->in_tx = false;
    pg__drop_ingest_caches(st);
}

bool pg__retryable(const struct pg_store *st)
{
    return strcmp(st->sqlstate, "40001") == 0 || strcmp(st->sqlstate, "40P01") == 0;
}

/* The ingest caches (what the database answered for names, keys and partitions), one list for
 * emptying them (release false) and for freeing them at close. */
static void ingest_caches(struct pg_store *st, bool release)
{
    void (*text_map)(struct skpx_strmap *) = release ? skpx_strmap_cleanup : skpx_strmap_clear;
    void (*num_map)(struct skpx_u64map *) = release ? skpx_u64map_cleanup : skpx_u64map_clear;
    struct skpx_strmap *texts[] = {&st->frame_ids, &st->seg_ids, &st->task_keys};
    struct skpx_u64map *nums[] = {&st->seg_first, &st->task_segs, &st->parts};
    for (size_t i = 0; i < SKP_ARRAY_LEN(texts); i++)
        text_map(texts[i]);
    for (size_t i = 0; i < SKP_ARRAY_LEN(nums); i++)
        num_map(nums[i]);
    (release ? store_stack_cache_cleanup : store_stack_cache_clear)(&st->stack_cache);
}

void pg__drop_ingest_caches(struct pg_store *st)
{
    ingest_caches(st, false);
}

skp_err pg__batch_epoch(struct pg_store *st)
{
    skp_err err = SKP_OK;
    PGresult *r =
        pg__exec(st, "SELECT epoch FROM skp_purge_epoch FOR SHARE", NULL, &err, "purge epoch");
    if (!r)
        return err;
    int64_t e = PQntuples(r) ? pg__i64(r, 0, 0) : -1;
    PQclear(r);
    if (e != st->epoch) {
        pg__drop_ingest_caches(st);
        st->epoch = e;
    }
    return SKP_OK;
}

int64_t pg__i64(const PGresult *r, int row, int col)
{
    return strtoll(PQgetvalue(r, row, col), NULL, 10);
}

char *pg__column_array(const PGresult *r, int col)
{
    struct pg_buf b = {0};
    pgb_putc(&b, '{');
    for (int i = 0; i < PQntuples(r); i++) {
        if (i)
            pgb_putc(&b, ',');
        pgb_puts(&b, pg__txt(r, i, col));
    }
    pgb_putc(&b, '}');
    return pgb_take(&b);
}

/* ---- open / close ---- */

skp_err pg_store_open(const char *url, const struct store_opts *opts, struct store **out)
{
    *out = NULL;
    if (!url)
        return SKP_EINVAL;
    struct pg_store *st = skpx_calloc(1, sizeof(*st));
    if (!st)
        return SKP_ENOMEM;
    st->base.ops = &pg_store_ops;
    st->n_snapshots = -1;
    st->epoch = -1;
    st->base.read_only = opts && opts->read_only;
    st->url = skpx_strdup(url);
    size_t cap = strlen(url) + 8;
    st->shown = skpx_malloc(cap);
    if (st->shown)
        store_target_shown(url, st->shown, cap);
    skp_err err = st->url && st->shown ? SKP_OK : SKP_ENOMEM;
    if (!err)
        err = connect_db(st);
    if (!err)
        err = pg__migrate(st, opts ? opts->schema_version_max : 0);
    if (err) {
        pg_store_close(&st->base);
        return err;
    }
    *out = &st->base;
    return SKP_OK;
}

void pg_store_close(struct store *base)
{
    if (!base)
        return;
    struct pg_store *st = pg_store_of(base);
    if (st->conn)
        PQfinish(st->conn);
    ingest_caches(st, true);
    store_frame_sigs_cleanup(&st->frame_sigs);
    SKPX_FREE_ALL(st->scratch_ids, st->url, st->shown, st);
}

/* ---- check and stats ---- */

skp_err pg_store_check(struct store *base, char *detail, size_t cap)
{
    struct pg_store *st = pg_store_of(base);
    if (cap)
        detail[0] = '\0';
    if (pg__ready(st) != SKP_OK) {
        snprintf(detail, cap, "database unreachable%s%s%s", st->down[0] ? ": " : "", st->down,
                 st->connecting ? " (reconnecting)" : "");
        return SKP_EIO;
    }
    skp_err err = SKP_OK;
    PGresult *r = pg__exec(st, "SELECT coalesce(max(version), 0) FROM skp_schema_version", NULL,
                           &err, "check");
    if (!r) {
        if (PQstatus(st->conn) != CONNECTION_OK && st->down[0])
            snprintf(detail, cap, "database unreachable: %s", st->down);
        else
            snprintf(detail, cap, "the check could not run");
        return SKP_EIO;
    }
    int64_t v = pg__i64(r, 0, 0);
    PQclear(r);
    if (v != pg_schema_version()) {
        snprintf(detail, cap, "schema version %" PRId64 ", this build writes %d", v,
                 pg_schema_version());
        return SKP_EIO;
    }
    return SKP_OK;
}

skp_err pg_store_get_stats(struct store *base, struct store_stats *out)
{
    struct pg_store *st = pg_store_of(base);
    memset(out, 0, sizeof(*out));
    skp_err err = pg__ready(st);
    if (err)
        return err;
    PGresult *r = pg__exec(st,
                           "SELECT (SELECT count(*) FROM stacks), (SELECT count(*) FROM frames), "
                           "(SELECT count(*) FROM segids), (SELECT count(*) FROM tasks), "
                           "pg_database_size(current_database())",
                           NULL, &err, "stats");
    if (!r)
        return err;
    out->stacks = (uint64_t)pg__i64(r, 0, 0);
    out->frames = (uint64_t)pg__i64(r, 0, 1);
    out->segments = (uint64_t)pg__i64(r, 0, 2);
    out->tasks = (uint64_t)pg__i64(r, 0, 3);
    out->file_bytes = (uint64_t)pg__i64(r, 0, 4);
    PQclear(r);
    if (st->n_snapshots < 0) {
        /* counted once (a full scan), then maintained by insert and purge */
        r = pg__exec(st, "SELECT coalesce(sum(cardinality(seqs)), 0) FROM snapshot_runs", NULL,
                     &err, "count snapshots");
        if (!r)
            return err;
        st->n_snapshots = pg__i64(r, 0, 0);
        PQclear(r);
    }
    out->snapshots = (uint64_t)st->n_snapshots;
    out->commits = st->commits;
    out->commit_ns_total = st->commit_ns_total;
    return SKP_OK;
}

/* ---- the ops table (store_backend.h) ---- */

#define PG_STORE_SET(...) STORE_BACKEND_SET(pg, __VA_ARGS__)
const struct store_backend_ops pg_store_ops = {
    .name = "postgresql",
    .close = pg_store_close,
    .purge_before = pg_store_purge_before,
    /* store_backend.h's lists, one a line */
    // clang-format off
    STORE_CORE_OPS(PG_STORE_SET)
    STORE_FEATURE_OPS(PG_STORE_SET)
    STORE_CLUSTER_OPS(PG_STORE_SET)
    // clang-format on
};
