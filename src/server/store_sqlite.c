/* store_sqlite.c - the SQLite implementation of store.h: connection, transactions, caches,
 * services/instances, tasks and logs, snapshot ingest, analysis scans, retention, stats.
 * Segments and the profiled-segment listing live in store_segments.c, the schema in
 * store_schema.c.
 *
 * Design: one connection, WAL + synchronous=NORMAL, one IMMEDIATE transaction per batch.
 * Snapshots are stored as (segment ref, sequence, task ref, time, stack ref) in a WITHOUT ROWID
 * table; frame strings and stacks (varint-encoded frame-id lists) are stored once and found
 * through bounded in-memory caches, so a batch of repetitive stacks costs one small row per
 * snapshot. Ingest caches are dropped whenever a transaction rolls back, because they may
 * name rows that were never committed. Single-threaded (one store per thread). */
#include "server/store.h"

#include <string.h>
#include <sys/stat.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/err.h"
#include "common/log.h"
#include "server/store_int.h"
#include "server/utf8.h"

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
    [STMT_SNAP_INS] = "INSERT OR IGNORE INTO snapshots(seg, seq, task, time, stack) "
                      "VALUES(?, ?, ?, ?, ?)",
    [STMT_SCAN_SEGMENT] = "SELECT seg, seq, time, stack FROM snapshots "
                          "WHERE seg = ? AND seq BETWEEN ? AND ? ORDER BY seq",
    [STMT_SEQ_WINDOW] = "SELECT min(seq), max(seq) FROM snapshots "
                        "WHERE seg = ? AND time BETWEEN ? AND ?",
    [STMT_SCAN_TASK] = "SELECT sn.seg, sn.seq, sn.time, sn.stack FROM task_segments ts "
                       "JOIN snapshots sn ON sn.seg = ts.seg AND sn.task = ts.task "
                       "WHERE ts.task = ? ORDER BY ts.seg, sn.seq",
    [STMT_SEGMENT_INS] = "INSERT OR IGNORE INTO segments(seg, trace_id, service, instance, "
                         "endpoint, start_ms, end_ms, received_ms, spans) "
                         "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)",
    [STMT_SEG_RANGE] = "SELECT (SELECT time FROM snapshots WHERE seg = ?1 AND seq = 0 "
                       "AND task = ?2), (SELECT time FROM snapshots WHERE seg = ?1 AND "
                       "task = ?2 ORDER BY seq DESC LIMIT 1)",
};

#define TASK_COLUMNS                                                                               \
    "id, service, endpoint, start_time, duration_min, min_duration_threshold, dump_period, "      \
    "max_sampling_count, create_time"

/* ---- plumbing ---- */

skp_err store__sqlerr(struct store *st, int rc, const char *what)
{
    int primary = rc & 0xff;
    const char *msg = st && st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc);
    SKPX_ERROR("store: %s: %s (sqlite %d)", what, msg, rc);
    return primary == SQLITE_NOMEM ? SKP_ENOMEM : SKP_EIO;
}

sqlite3 *store__db(struct store *st)
{
    return st->db;
}

skp_err store__prepare(struct store *st, const char *sql, sqlite3_stmt **out)
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

sqlite3_stmt *store__stmt(struct store *st, enum store_stmt id, skp_err *err)
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

skp_err store__exec(struct store *st, const char *sql)
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

/* Steps a statement that returns no row; resets it. */
static skp_err step_done(struct store *st, sqlite3_stmt *s, const char *what)
{
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        return store__sqlerr(st, rc, what);
    return SKP_OK;
}

skp_err store__begin(struct store *st)
{
    skp_err err = SKP_OK;
    sqlite3_stmt *s = store__stmt(st, STMT_BEGIN, &err);
    if (!s)
        return err;
    err = step_done(st, s, "begin");
    if (!err)
        st->in_tx = true;
    return err;
}

skp_err store__commit(struct store *st)
{
    skp_err err = SKP_OK;
    sqlite3_stmt *s = store__stmt(st, STMT_COMMIT, &err);
    if (!s)
        return err;
    int64_t t0 = skpx_mono_ns();
    err = step_done(st, s, "commit");
    if (err)
        return err;     /* caller rolls back */
    st->in_tx = false;
    st->commits++;
    st->commit_ns_total += (uint64_t)(skpx_mono_ns() - t0);
    return SKP_OK;
}

void store__drop_ingest_caches(struct store *st)
{
    strmap_clear(&st->frame_ids);
    strmap_clear(&st->seg_ids);
    strmap_clear(&st->task_keys);
    u64map_clear(&st->task_segs);
    st->n_stacks = 0;
    st->pool_len = 0;
    u64map_clear(&st->stack_by_hash);
    u64map_clear(&st->stack_by_id);
    st->n_snapshots = -1;
}

void store__rollback(struct store *st)
{
    if (sqlite3_get_autocommit(st->db) == 0) {
        skp_err err = SKP_OK;
        sqlite3_stmt *s = store__stmt(st, STMT_ROLLBACK, &err);
        /* A failed ROLLBACK leaves SQLite to roll back on close/next open (WAL). */
        if (s && step_done(st, s, "rollback") != SKP_OK)
            SKPX_ERROR("store: rollback failed");
    }
    st->in_tx = false;
    store__drop_ingest_caches(st);
}

/* ---- open / close ---- */

static skp_err configure(struct store *st)
{
    int rc = sqlite3_busy_timeout(st->db, STORE_BUSY_TIMEOUT_MS);
    if (rc != SQLITE_OK)
        return store__sqlerr(st, rc, "busy_timeout");
    if (st->read_only)
        return store__exec(st, "PRAGMA query_only = 1");
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st, "PRAGMA journal_mode = WAL", &s);
    if (err)
        return err;
    rc = sqlite3_step(s);
    bool wal = rc == SQLITE_ROW &&
               sqlite3_stricmp((const char *)sqlite3_column_text(s, 0), "wal") == 0;
    sqlite3_finalize(s);
    if (!wal) {
        SKPX_ERROR("store: cannot switch %s to WAL (sqlite %d: %s)", st->path, rc,
                   sqlite3_errmsg(st->db));
        return SKP_EIO;
    }
    return store__exec(st, "PRAGMA synchronous = NORMAL");
}

skp_err store_open(const char *path, const struct store_opts *opts, struct store **out)
{
    skp_err err = SKP_OK;
    *out = NULL;
    if (!path)
        return SKP_EINVAL;
    struct store *st = skpx_calloc(1, sizeof(*st));
    if (!st)
        return SKP_ENOMEM;
    st->n_snapshots = -1;
    st->read_only = opts && opts->read_only;
    st->path = skpx_strdup(path);
    if (!st->path) {
        err = SKP_ENOMEM;
        goto out;
    }
    int flags = st->read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
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
    *out = st;
    st = NULL;
out:
    store_close(st);
    return err;
}

void store_close(struct store *st)
{
    if (!st)
        return;
    for (int i = 0; i < STMT_COUNT; i++)
        sqlite3_finalize(st->stmts[i]);
    if (st->db) {
        if (!st->read_only && sqlite3_get_autocommit(st->db))
            (void)sqlite3_wal_checkpoint_v2(st->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
        sqlite3_close_v2(st->db);
    }
    strmap_cleanup(&st->frame_ids);
    strmap_cleanup(&st->seg_ids);
    strmap_cleanup(&st->task_keys);
    u64map_cleanup(&st->task_segs);
    u64map_cleanup(&st->stack_by_hash);
    u64map_cleanup(&st->stack_by_id);
    skpx_free(st->stacks);
    skpx_free(st->stack_pool);
    u64map_cleanup(&st->frame_sig_idx);
    for (size_t i = 0; i < st->n_frame_sigs; i++)
        skpx_free(st->frame_sigs[i]);
    skpx_free(st->frame_sigs);
    skpx_free(st->scratch_ids);
    skpx_free(st->scratch_blob);
    skpx_free(st->path);
    skpx_free(st);
}

/* ---- small helpers ---- */

static const char *col_text(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? (const char *)t : "";
}

static json_t *col_json_str_or_null(sqlite3_stmt *s, int i)
{
    if (sqlite3_column_type(s, i) == SQLITE_NULL)
        return json_null();
    return skp_json_str(col_text(s, i));
}

/* Appends v to array a, consuming v; false on allocation failure. */
static bool arr_push(json_t *a, json_t *v)
{
    return v && json_array_append_new(a, v) == 0;
}

skp_err store__each_row(struct store *st, sqlite3_stmt *s, store_row_fn row, void *ud,
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

struct rows_json {
    json_t *arr;
    store_row_json_fn row;
    void *ud;
};

static skp_err push_row_json(void *ud, sqlite3_stmt *s)
{
    struct rows_json *r = ud;
    return arr_push(r->arr, r->row(r->ud, s)) ? SKP_OK : SKP_ENOMEM;
}

skp_err store__rows_to_json(struct store *st, sqlite3_stmt *s, store_row_json_fn row, void *ud,
                            const char *what, json_t **out)
{
    *out = NULL;
    struct rows_json r = {.arr = json_array(), .row = row, .ud = ud};
    skp_err err = r.arr ? store__each_row(st, s, push_row_json, &r, what) : SKP_ENOMEM;
    sqlite3_finalize(s);
    if (err) {
        json_decref(r.arr);
        return err;
    }
    *out = r.arr;
    return SKP_OK;
}

void *store__grow(void *v, size_t n, size_t *cap, size_t elem, size_t first)
{
    if (n < *cap)
        return v;
    size_t ncap = *cap ? *cap * 2 : first;
    if (ncap < n + 1 || ncap > SIZE_MAX / elem)
        return NULL;
    void *nv = skpx_realloc(v, ncap * elem);
    if (nv)
        *cap = ncap;
    return nv;
}

/* Serialises j compactly into a new skpx buffer (NUL-terminated). */
static char *json_to_text(const json_t *j)
{
    size_t n = json_dumpb(j, NULL, 0, JSON_COMPACT);
    if (n == 0)
        return NULL;
    char *buf = skpx_malloc(n + 1);
    if (!buf)
        return NULL;
    if (json_dumpb(j, buf, n, JSON_COMPACT) != n) {
        skpx_free(buf);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

/* ---- services and instances ---- */

static skp_err service_ref(struct store *st, const char *service, const char *layer,
                           int64_t now_ms, int64_t *out)
{
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st,
                                 "INSERT INTO services(name, layer, last_seen) VALUES(?, ?, ?) "
                                 "ON CONFLICT(name) DO UPDATE SET "
                                 "layer = COALESCE(excluded.layer, layer), "
                                 "last_seen = max(last_seen, excluded.last_seen) RETURNING id",
                                 &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, service, -1, SQLITE_STATIC);
    if (layer && *layer)
        sqlite3_bind_text(s, 2, layer, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, now_ms);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *out = sqlite3_column_int64(s, 0);
        rc = sqlite3_step(s);
    }
    if (rc != SQLITE_DONE)
        err = store__sqlerr(st, rc, "upsert service");
    sqlite3_finalize(s);
    return err;
}

static skp_err instance_upsert(struct store *st, int64_t service_id, const char *instance,
                               const char *language, const char *props_json, int64_t now_ms)
{
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(
        st,
        "INSERT INTO instances(service_id, name, language, properties, last_seen) "
        "VALUES(?1, ?2, ?3, COALESCE(?4, '{}'), ?5) "
        "ON CONFLICT(service_id, name) DO UPDATE SET "
        "language = COALESCE(excluded.language, language), "
        "properties = CASE WHEN ?4 IS NULL THEN properties ELSE excluded.properties END, "
        "last_seen = max(last_seen, excluded.last_seen)",
        &s);
    if (err)
        return err;
    sqlite3_bind_int64(s, 1, service_id);
    sqlite3_bind_text(s, 2, instance, -1, SQLITE_STATIC);
    if (language)
        sqlite3_bind_text(s, 3, language, -1, SQLITE_STATIC);
    if (props_json)
        sqlite3_bind_text(s, 4, props_json, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 5, now_ms);
    int rc = sqlite3_step(s);
    if (rc != SQLITE_DONE)
        err = store__sqlerr(st, rc, "upsert instance");
    sqlite3_finalize(s);
    return err;
}

static skp_err upsert(struct store *st, const char *service, const char *instance,
                      const char *layer, const char *language, const char *props_json,
                      int64_t now_ms)
{
    if (!service || !instance)
        return SKP_EINVAL;
    skp_err err = store__begin(st);
    if (err)
        return err;
    int64_t sid = 0;
    err = service_ref(st, service, layer, now_ms, &sid);
    if (!err)
        err = instance_upsert(st, sid, instance, language, props_json, now_ms);
    if (!err)
        err = store__commit(st);
    if (err)
        store__rollback(st);
    return err;
}

skp_err store_upsert_instance(struct store *st, const char *service, const char *instance,
                              const char *layer, const struct store_kv *props, size_t n_props,
                              int64_t now_ms)
{
    skp_err err = SKP_OK;
    const char *language = NULL;
    char *text = NULL;
    json_t *obj = json_object();
    if (!obj)
        return SKP_ENOMEM;
    for (size_t i = 0; i < n_props; i++) {
        if (!props[i].key)
            continue;
        const char *v = props[i].value ? props[i].value : "";
        if (strcmp(props[i].key, "language") == 0)
            language = v;
        char *key = skp_utf8_sanitize(props[i].key);
        int rc = key ? json_object_set_new(obj, key, skp_json_str(v)) : -1;
        skpx_free(key);
        if (rc != 0) {
            err = SKP_ENOMEM;
            goto out;
        }
    }
    text = json_to_text(obj);
    if (!text) {
        err = SKP_ENOMEM;
        goto out;
    }
    err = upsert(st, service, instance, layer, language, text, now_ms);
out:
    skpx_free(text);
    json_decref(obj);
    return err;
}

skp_err store_touch_instance(struct store *st, const char *service, const char *instance,
                             int64_t now_ms)
{
    return upsert(st, service, instance, NULL, NULL, NULL, now_ms);
}

static json_t *service_json(void *ud, sqlite3_stmt *s)
{
    (void)ud;
    return json_pack("{s:o, s:o, s:I, s:I}", "name", skp_json_str(col_text(s, 0)), "layer",
                     col_json_str_or_null(s, 1), "lastSeen", (json_int_t)sqlite3_column_int64(s, 2),
                     "instances", (json_int_t)sqlite3_column_int64(s, 3));
}

skp_err store_list_services(struct store *st, json_t **out)
{
    *out = NULL;
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st,
                                 "SELECT s.name, s.layer, s.last_seen, "
                                 "(SELECT count(*) FROM instances i WHERE i.service_id = s.id) "
                                 "FROM services s ORDER BY s.name",
                                 &s);
    if (err)
        return err;
    return store__rows_to_json(st, s, service_json, NULL, "list services", out);
}

static json_t *instance_json(void *ud, sqlite3_stmt *s)
{
    (void)ud;
    json_t *props = json_loads(col_text(s, 3), 0, NULL);
    if (!props)
        props = json_object();
    return json_pack("{s:o, s:o, s:I, s:o}", "name", skp_json_str(col_text(s, 0)), "language",
                     col_json_str_or_null(s, 1), "lastHeartbeat",
                     (json_int_t)sqlite3_column_int64(s, 2), "properties", props);
}

skp_err store_list_instances(struct store *st, const char *service, json_t **out)
{
    *out = NULL;
    if (!service)
        return SKP_EINVAL;
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st, "SELECT id FROM services WHERE name = ?", &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, service, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    int64_t sid = 0;
    if (rc == SQLITE_ROW)
        sid = sqlite3_column_int64(s, 0);
    else
        err = rc == SQLITE_DONE ? SKP_ENOTFOUND : store__sqlerr(st, rc, "find service");
    sqlite3_finalize(s);
    if (err)
        return err;
    err = store__prepare(st,
                         "SELECT name, language, last_seen, properties FROM instances "
                         "WHERE service_id = ? ORDER BY name",
                         &s);
    if (err)
        return err;
    sqlite3_bind_int64(s, 1, sid);
    return store__rows_to_json(st, s, instance_json, NULL, "list instances", out);
}

/* ---- tasks ---- */

void store_task_cleanup(struct store_task *t)
{
    if (!t)
        return;
    skpx_free(t->id);
    skpx_free(t->service);
    skpx_free(t->endpoint);
    t->id = t->service = t->endpoint = NULL;
}

static skp_err task_from_row(sqlite3_stmt *s, struct store_task *t)
{
    memset(t, 0, sizeof(*t));
    t->id = skpx_strdup(col_text(s, 0));
    t->service = skpx_strdup(col_text(s, 1));
    t->endpoint = skpx_strdup(col_text(s, 2));
    t->start_time = sqlite3_column_int64(s, 3);
    t->duration_min = sqlite3_column_int(s, 4);
    t->min_duration_threshold = sqlite3_column_int(s, 5);
    t->dump_period = sqlite3_column_int(s, 6);
    t->max_sampling_count = sqlite3_column_int(s, 7);
    t->create_time = sqlite3_column_int64(s, 8);
    if (!t->id || !t->service || !t->endpoint) {
        store_task_cleanup(t);
        return SKP_ENOMEM;
    }
    return SKP_OK;
}

static json_t *task_json(void *ud, sqlite3_stmt *s)
{
    (void)ud;
    return json_pack("{s:o, s:o, s:o, s:I, s:i, s:i, s:i, s:i, s:I}", "id",
                     skp_json_str(col_text(s, 0)), "service", skp_json_str(col_text(s, 1)),
                     "endpointName", skp_json_str(col_text(s, 2)), "startTime",
                     (json_int_t)sqlite3_column_int64(s, 3), "duration", sqlite3_column_int(s, 4),
                     "minDurationThreshold", sqlite3_column_int(s, 5), "dumpPeriod",
                     sqlite3_column_int(s, 6), "maxSamplingCount", sqlite3_column_int(s, 7),
                     "createTime", (json_int_t)sqlite3_column_int64(s, 8));
}

skp_err store_insert_task(struct store *st, const struct store_task *t)
{
    if (!t || !t->id || !t->service || !t->endpoint)
        return SKP_EINVAL;
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st, "INSERT INTO tasks(" TASK_COLUMNS ") "
                                     "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                 &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, t->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, t->service, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, t->endpoint, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 4, t->start_time);
    sqlite3_bind_int(s, 5, t->duration_min);
    sqlite3_bind_int(s, 6, t->min_duration_threshold);
    sqlite3_bind_int(s, 7, t->dump_period);
    sqlite3_bind_int(s, 8, t->max_sampling_count);
    sqlite3_bind_int64(s, 9, t->create_time);
    int rc = sqlite3_step(s);
    if ((rc & 0xff) == SQLITE_CONSTRAINT)
        err = SKP_EEXIST;
    else if (rc != SQLITE_DONE)
        err = store__sqlerr(st, rc, "insert task");
    else
        st->commits++;
    sqlite3_finalize(s);
    return err;
}

/* Runs a task query expected to yield at most one row into *out. */
static skp_err one_task(struct store *st, sqlite3_stmt *s, struct store_task *out)
{
    int rc = sqlite3_step(s);
    skp_err err;
    if (rc == SQLITE_ROW)
        err = task_from_row(s, out);
    else if (rc == SQLITE_DONE)
        err = SKP_ENOTFOUND;
    else
        err = store__sqlerr(st, rc, "read task");
    sqlite3_finalize(s);
    return err;
}

skp_err store_get_task(struct store *st, const char *id, struct store_task *out)
{
    memset(out, 0, sizeof(*out));
    if (!id)
        return SKP_EINVAL;
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st, "SELECT " TASK_COLUMNS " FROM tasks WHERE id = ?", &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    return one_task(st, s, out);
}

skp_err store_latest_task_before(struct store *st, const char *service, int64_t start_before,
                                 struct store_task *out)
{
    memset(out, 0, sizeof(*out));
    if (!service)
        return SKP_EINVAL;
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st,
                                 "SELECT " TASK_COLUMNS " FROM tasks WHERE service = ? AND "
                                 "start_time <= ? ORDER BY start_time DESC, create_time DESC "
                                 "LIMIT 1",
                                 &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, service, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, start_before);
    return one_task(st, s, out);
}

struct task_vec {
    struct store_task *v;
    size_t n, cap;
};

static skp_err push_task_row(void *ud, sqlite3_stmt *s)
{
    struct task_vec *tv = ud;
    struct store_task *nv = store__grow(tv->v, tv->n, &tv->cap, sizeof(*nv), 4);
    if (!nv)
        return SKP_ENOMEM;
    tv->v = nv;
    skp_err err = task_from_row(s, &tv->v[tv->n]);
    if (!err)
        tv->n++;
    return err;
}

skp_err store_tasks_for_agent(struct store *st, const char *service, int64_t after_create_time,
                              int64_t now_ms, struct store_task **out, size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    if (!service)
        return SKP_EINVAL;
    sqlite3_stmt *s = NULL;
    struct task_vec tv = {0};
    skp_err err = store__prepare(st,
                                 "SELECT " TASK_COLUMNS " FROM tasks WHERE service = ? AND "
                                 "create_time > ? AND start_time + duration_min * 60000 > ? "
                                 "ORDER BY create_time, id",
                                 &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, service, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, after_create_time);
    sqlite3_bind_int64(s, 3, now_ms);
    err = store__each_row(st, s, push_task_row, &tv, "tasks for agent");
    sqlite3_finalize(s);
    if (err) {
        for (size_t i = 0; i < tv.n; i++)
            store_task_cleanup(&tv.v[i]);
        skpx_free(tv.v);
        return err;
    }
    *out = tv.v;
    *n_out = tv.n;
    return SKP_OK;
}

skp_err store_list_tasks(struct store *st, const char *service, const char *endpoint,
                         json_t **out)
{
    *out = NULL;
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st,
                                 "SELECT " TASK_COLUMNS " FROM tasks WHERE "
                                 "(?1 IS NULL OR service = ?1) AND (?2 IS NULL OR endpoint = ?2) "
                                 "ORDER BY start_time DESC, create_time DESC",
                                 &s);
    if (err)
        return err;
    if (service)
        sqlite3_bind_text(s, 1, service, -1, SQLITE_STATIC);
    if (endpoint)
        sqlite3_bind_text(s, 2, endpoint, -1, SQLITE_STATIC);
    return store__rows_to_json(st, s, task_json, NULL, "list tasks", out);
}

skp_err store_add_task_log(struct store *st, const char *task_id, const char *service,
                           const char *instance, enum store_task_op op, int64_t time_ms)
{
    if (!task_id || !instance ||
        (op != STORE_TASK_NOTIFIED && op != STORE_TASK_EXECUTION_FINISHED))
        return SKP_EINVAL;
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st,
                                 "INSERT OR IGNORE INTO task_logs(task_id, instance, op, time, "
                                 "service) VALUES(?, ?, ?, ?, ?)",
                                 &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, task_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, instance, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 3, (int)op);
    sqlite3_bind_int64(s, 4, time_ms);
    if (service)
        sqlite3_bind_text(s, 5, service, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc != SQLITE_DONE)
        err = store__sqlerr(st, rc, "add task log");
    else
        st->commits++;
    sqlite3_finalize(s);
    return err;
}

static json_t *task_log_json(void *ud, sqlite3_stmt *s)
{
    const char *task_id = ud;
    int op = sqlite3_column_int(s, 1);
    int64_t t = sqlite3_column_int64(s, 2);
    char id[512];
    snprintf(id, sizeof(id), "%s_%s_%d_%lld", task_id, col_text(s, 0), op, (long long)t);
    return json_pack("{s:o, s:o, s:o, s:s, s:I}", "id", skp_json_str(id), "taskId",
                     skp_json_str(task_id), "instanceName", skp_json_str(col_text(s, 0)),
                     "operationType", op == STORE_TASK_NOTIFIED ? "NOTIFIED" : "EXECUTION_FINISHED",
                     "operationTime", (json_int_t)t);
}

skp_err store_list_task_logs(struct store *st, const char *task_id, json_t **out)
{
    *out = NULL;
    if (!task_id)
        return SKP_EINVAL;
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st,
                                 "SELECT instance, op, time FROM task_logs WHERE task_id = ? "
                                 "ORDER BY time, op, instance",
                                 &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, task_id, -1, SQLITE_STATIC);
    return store__rows_to_json(st, s, task_log_json, (void *)task_id, "list task logs", out);
}

/* ---- name → id references (segments, task keys) ---- */

/* SELECT-or-INSERT of a text key through the statements `get` (key → id) and `ins` (key, and
 * first_ms for segids), inside the caller's transaction. SKP_ENOTFOUND when absent and
 * !create. */
static skp_err select_or_insert(struct store *st, enum store_stmt get, enum store_stmt ins,
                                const char *key, bool create, int64_t first_ms, uint32_t *out)
{
    skp_err err = SKP_OK;
    sqlite3_stmt *s = store__stmt(st, get, &err);
    if (!s)
        return err;
    sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *out = (uint32_t)sqlite3_column_int64(s, 0);
        sqlite3_reset(s);
        return SKP_OK;
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        return store__sqlerr(st, rc, k_sql[get]);
    if (!create)
        return SKP_ENOTFOUND;
    s = store__stmt(st, ins, &err);
    if (!s)
        return err;
    sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
    if (ins == STMT_SEGID_INS)
        sqlite3_bind_int64(s, 2, first_ms);
    err = step_done(st, s, k_sql[ins]);
    if (err)
        return err;
    *out = (uint32_t)sqlite3_last_insert_rowid(st->db);
    return SKP_OK;
}

/* Remembers key → id in a lookup cache, clearing it first when it holds `max` entries. */
static void cache_put(struct strmap *cache, size_t max, const char *key, uint32_t id)
{
    if (cache->n >= max)
        strmap_clear(cache);
    if (strmap_put(cache, key, id) != SKP_OK) {
        /* only a cache: a failed put costs a lookup later */
    }
}

/* Finds `name` through cache → SELECT; when `create`, INSERTs it (inside the caller's
 * transaction). SKP_ENOTFOUND when absent and !create. */
static skp_err name_ref(struct store *st, struct strmap *cache, enum store_stmt get,
                        enum store_stmt ins, const char *name, bool create, int64_t first_ms,
                        uint32_t *out)
{
    if (strmap_get(cache, name, out))
        return SKP_OK;
    skp_err err = select_or_insert(st, get, ins, name, create, first_ms, out);
    if (err)
        return err;
    cache_put(cache, STORE_NAME_CACHE_MAX, name, *out);
    return SKP_OK;
}

skp_err store__segment_ref(struct store *st, const char *segment_id, int64_t first_ms,
                           uint32_t *out)
{
    return name_ref(st, &st->seg_ids, STMT_SEGID_GET, STMT_SEGID_INS, segment_id, true,
                    first_ms, out);
}

skp_err store__segment_find(struct store *st, const char *segment_id, uint32_t *out)
{
    return name_ref(st, &st->seg_ids, STMT_SEGID_GET, STMT_SEGID_INS, segment_id, false, 0,
                    out);
}

static skp_err task_key_find(struct store *st, const char *task_id, uint32_t *out)
{
    return name_ref(st, &st->task_keys, STMT_TASKKEY_GET, STMT_TASKKEY_INS, task_id, false, 0,
                    out);
}

/* ---- frames and stacks ---- */

static skp_err frame_ref(struct store *st, const char *raw, uint32_t *out)
{
    if (strmap_get(&st->frame_ids, raw, out))
        return SKP_OK;
    /* Stored signatures are valid UTF-8 (they end up in JSON); the cache keeps the raw form. */
    char *fixed = NULL;
    const char *sig = raw;
    if (!skp_utf8_valid(raw, strlen(raw))) {
        fixed = skp_utf8_sanitize(raw);
        if (!fixed)
            return SKP_ENOMEM;
        sig = fixed;
    }
    skp_err err = select_or_insert(st, STMT_FRAME_GET, STMT_FRAME_INS, sig, true, 0, out);
    skpx_free(fixed);
    if (err)
        return err;
    cache_put(&st->frame_ids, STORE_FRAME_CACHE_MAX, raw, *out);
    return SKP_OK;
}

/* LEB128 varints: frame ids are small, so a 20-frame stack is ~20-40 bytes. */
static size_t encode_ids(const uint32_t *ids, size_t n, uint8_t *buf)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t v = ids[i];
        while (v >= 0x80) {
            buf[len++] = (uint8_t)(v | 0x80);
            v >>= 7;
        }
        buf[len++] = (uint8_t)v;
    }
    return len;
}

/* Decodes at most `max` ids; returns the count, or SIZE_MAX if the blob is malformed. */
static size_t decode_ids(const uint8_t *b, size_t len, uint32_t *ids, size_t max)
{
    size_t n = 0;
    size_t i = 0;
    while (i < len) {
        uint32_t v = 0;
        int shift = 0;
        for (;;) {
            if (i >= len || shift > 28)
                return SIZE_MAX;
            uint8_t c = b[i++];
            v |= (uint32_t)(c & 0x7f) << shift;
            if (!(c & 0x80))
                break;
            shift += 7;
        }
        if (n == max)
            return SIZE_MAX;
        ids[n++] = v;
    }
    return n;
}

static skp_err ensure_scratch(struct store *st, size_t n_ids)
{
    if (n_ids > st->scratch_cap) {
        uint32_t *p = skpx_realloc(st->scratch_ids, n_ids * sizeof(*p));
        if (!p)
            return SKP_ENOMEM;
        st->scratch_ids = p;
        st->scratch_cap = n_ids;
    }
    size_t blob = n_ids * 5;
    if (blob > st->scratch_blob_cap) {
        uint8_t *p = skpx_realloc(st->scratch_blob, blob);
        if (!p)
            return SKP_ENOMEM;
        st->scratch_blob = p;
        st->scratch_blob_cap = blob;
    }
    return SKP_OK;
}

static void stack_cache_clear(struct store *st)
{
    st->n_stacks = 0;
    st->pool_len = 0;
    u64map_clear(&st->stack_by_hash);
    u64map_clear(&st->stack_by_id);
}

/* Adds a stack to the cache; returns its frames' location in the pool or NULL when it was not
 * cached (allocation failure or too large). Clears the cache when the pool bound is reached. */
static const uint32_t *stack_cache_add(struct store *st, uint32_t id, uint64_t hash,
                                       const uint32_t *ids, size_t n)
{
    if (n > STORE_STACK_POOL_MAX / 4)
        return NULL;
    if (st->pool_len + n > STORE_STACK_POOL_MAX)
        stack_cache_clear(st);
    if (st->pool_len + n > st->pool_cap) {
        size_t ncap = st->pool_cap ? st->pool_cap : 4096;
        while (ncap < st->pool_len + n)
            ncap *= 2;
        uint32_t *p = skpx_realloc(st->stack_pool, ncap * sizeof(*p));
        if (!p)
            return NULL;
        st->stack_pool = p;
        st->pool_cap = ncap;
    }
    struct store_stack_entry *grown =
        store__grow(st->stacks, st->n_stacks, &st->cap_stacks, sizeof(*grown), 256);
    if (!grown)
        return NULL;
    st->stacks = grown;
    size_t idx = st->n_stacks;
    uint64_t dummy;
    if (u64map_put(&st->stack_by_id, id, idx) != SKP_OK)
        return NULL;
    if (!u64map_get(&st->stack_by_hash, hash, &dummy) &&
        u64map_put(&st->stack_by_hash, hash, idx) != SKP_OK) {
        stack_cache_clear(st);  /* keep both indexes consistent */
        return NULL;
    }
    struct store_stack_entry *e = &st->stacks[idx];
    e->id = id;
    e->n = (uint32_t)n;
    e->hash = hash;
    e->off = st->pool_len;
    if (n)
        memcpy(st->stack_pool + st->pool_len, ids, n * sizeof(*ids));
    st->pool_len += n;
    st->n_stacks++;
    return st->stack_pool + e->off;
}

static skp_err stack_ref(struct store *st, char *const *frames, size_t n_frames, uint32_t *out)
{
    size_t n = n_frames < STORE_MAX_FRAMES ? n_frames : STORE_MAX_FRAMES;
    skp_err err = ensure_scratch(st, n ? n : 1);
    if (err)
        return err;
    uint32_t *ids = st->scratch_ids;
    for (size_t i = 0; i < n; i++) {
        err = frame_ref(st, frames[i] ? frames[i] : "", &ids[i]);
        if (err)
            return err;
    }
    uint64_t hash = skp_hash_u32s(ids, n);
    uint64_t idx;
    if (u64map_get(&st->stack_by_hash, hash, &idx)) {
        const struct store_stack_entry *e = &st->stacks[idx];
        if (e->n == n && memcmp(st->stack_pool + e->off, ids, n * sizeof(*ids)) == 0) {
            *out = e->id;
            return SKP_OK;
        }
    }
    size_t blob_len = encode_ids(ids, n, st->scratch_blob);
    sqlite3_stmt *s = store__stmt(st, STMT_STACK_BY_HASH, &err);
    if (!s)
        return err;
    sqlite3_bind_int64(s, 1, (sqlite3_int64)hash);
    int rc;
    bool found = false;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        const void *b = sqlite3_column_blob(s, 1);
        size_t bl = (size_t)sqlite3_column_bytes(s, 1);
        if (bl == blob_len && (bl == 0 || memcmp(b, st->scratch_blob, bl) == 0)) {
            *out = (uint32_t)sqlite3_column_int64(s, 0);
            found = true;
            break;
        }
    }
    sqlite3_reset(s);
    if (!found && rc != SQLITE_DONE)
        return store__sqlerr(st, rc, "find stack");
    if (!found) {
        s = store__stmt(st, STMT_STACK_INS, &err);
        if (!s)
            return err;
        sqlite3_bind_int64(s, 1, (sqlite3_int64)hash);
        if (blob_len)
            sqlite3_bind_blob(s, 2, st->scratch_blob, (int)blob_len, SQLITE_STATIC);
        else
            sqlite3_bind_zeroblob(s, 2, 0);
        err = step_done(st, s, "insert stack");
        if (err)
            return err;
        *out = (uint32_t)sqlite3_last_insert_rowid(st->db);
    }
    (void)stack_cache_add(st, *out, hash, ids, n);
    return SKP_OK;
}

skp_err store_get_stack(struct store *st, uint32_t stack, const uint32_t **frames, size_t *n)
{
    *frames = NULL;
    *n = 0;
    uint64_t idx;
    if (u64map_get(&st->stack_by_id, stack, &idx)) {
        const struct store_stack_entry *e = &st->stacks[idx];
        *frames = st->stack_pool + e->off;
        *n = e->n;
        return SKP_OK;
    }
    skp_err err = SKP_OK;
    sqlite3_stmt *s = store__stmt(st, STMT_STACK_GET, &err);
    if (!s)
        return err;
    sqlite3_bind_int64(s, 1, stack);
    int rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) {
        sqlite3_reset(s);
        return rc == SQLITE_DONE ? SKP_ENOTFOUND : store__sqlerr(st, rc, "read stack");
    }
    const uint8_t *b = sqlite3_column_blob(s, 0);
    size_t bl = (size_t)sqlite3_column_bytes(s, 0);
    /* every id takes at least one byte, so bl bounds the count */
    err = ensure_scratch(st, bl ? bl : 1);
    if (err) {
        sqlite3_reset(s);
        return err;
    }
    size_t cnt = decode_ids(b, bl, st->scratch_ids, bl);
    sqlite3_reset(s);
    if (cnt == SIZE_MAX) {
        SKPX_ERROR("store: stack %u is corrupt", stack);
        return SKP_EIO;
    }
    const uint32_t *cached = stack_cache_add(st, stack, skp_hash_u32s(st->scratch_ids, cnt),
                                             st->scratch_ids, cnt);
    *frames = cached ? cached : st->scratch_ids;
    *n = cnt;
    return SKP_OK;
}

skp_err store_get_frame(struct store *st, uint32_t frame, const char **sig)
{
    *sig = NULL;
    uint64_t idx;
    if (u64map_get(&st->frame_sig_idx, frame, &idx)) {
        *sig = st->frame_sigs[idx];
        return SKP_OK;
    }
    skp_err err = SKP_OK;
    sqlite3_stmt *s = store__stmt(st, STMT_FRAME_SIG, &err);
    if (!s)
        return err;
    sqlite3_bind_int64(s, 1, frame);
    int rc = sqlite3_step(s);
    if (rc != SQLITE_ROW) {
        sqlite3_reset(s);
        return rc == SQLITE_DONE ? SKP_ENOTFOUND : store__sqlerr(st, rc, "read frame");
    }
    char *copy = skpx_strdup(col_text(s, 0));
    sqlite3_reset(s);
    if (!copy)
        return SKP_ENOMEM;
    char **p = store__grow(st->frame_sigs, st->n_frame_sigs, &st->cap_frame_sigs, sizeof(*p), 256);
    if (!p) {
        skpx_free(copy);
        return SKP_ENOMEM;
    }
    st->frame_sigs = p;
    if (u64map_put(&st->frame_sig_idx, frame, st->n_frame_sigs) != SKP_OK) {
        skpx_free(copy);
        return SKP_ENOMEM;
    }
    st->frame_sigs[st->n_frame_sigs++] = copy;
    *sig = copy;
    return SKP_OK;
}

/* ---- snapshots ---- */

static skp_err insert_one(struct store *st, const struct store_snapshot *sn, bool *dup)
{
    uint32_t seg = 0, task = 0, stack = 0;
    const char *seg_id = sn->segment_id ? sn->segment_id : "";
    const char *task_id = sn->task_id ? sn->task_id : "";
    skp_err err = store__segment_ref(st, seg_id, sn->time_ms, &seg);
    if (!err)
        err = name_ref(st, &st->task_keys, STMT_TASKKEY_GET, STMT_TASKKEY_INS, task_id, true, 0,
                       &task);
    if (!err)
        err = stack_ref(st, sn->frames, sn->frames ? sn->n_frames : 0, &stack);
    if (err)
        return err;
    uint64_t pair = (uint64_t)task << 32 | seg;
    uint64_t one;
    sqlite3_stmt *s;
    if (!u64map_get(&st->task_segs, pair, &one)) {
        s = store__stmt(st, STMT_TASKSEG_INS, &err);
        if (!s)
            return err;
        sqlite3_bind_int64(s, 1, task);
        sqlite3_bind_int64(s, 2, seg);
        err = step_done(st, s, "insert task segment");
        if (err)
            return err;
        if (st->task_segs.n >= STORE_PAIR_CACHE_MAX)
            u64map_clear(&st->task_segs);
        if (u64map_put(&st->task_segs, pair, 1) != SKP_OK) {
            /* only a cache: the INSERT OR IGNORE runs again next time */
        }
    }
    s = store__stmt(st, STMT_SNAP_INS, &err);
    if (!s)
        return err;
    sqlite3_bind_int64(s, 1, seg);
    sqlite3_bind_int(s, 2, sn->sequence);
    sqlite3_bind_int64(s, 3, task);
    sqlite3_bind_int64(s, 4, sn->time_ms);
    sqlite3_bind_int64(s, 5, stack);
    err = step_done(st, s, "insert snapshot");
    if (err)
        return err;
    *dup = sqlite3_changes(st->db) == 0;
    return SKP_OK;
}

skp_err store_insert_snapshots(struct store *st, const struct store_snapshot *v, size_t n,
                               size_t *n_dup)
{
    size_t dups = 0;
    if (n_dup)
        *n_dup = 0;
    if (n == 0)
        return SKP_OK;
    if (st->read_only)
        return SKP_EIO;
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

static skp_err run_scan(struct store *st, sqlite3_stmt *s, store_sample_cb cb, void *ud)
{
    int rc;
    st->scanning = true;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        struct store_sample smp = {
            .segment = (uint32_t)sqlite3_column_int64(s, 0),
            .sequence = sqlite3_column_int(s, 1),
            .time_ms = sqlite3_column_int64(s, 2),
            .stack = (uint32_t)sqlite3_column_int64(s, 3),
        };
        cb(ud, &smp);
    }
    st->scanning = false;
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        return store__sqlerr(st, rc, "scan snapshots");
    return SKP_OK;
}

/* What both scans check and look up before stepping: the scan's key (segment or task ref) and
 * its cached statement. SKP_ENOTFOUND when the key is unknown (nothing to visit). */
static skp_err scan_begin(struct store *st, const char *id, store_sample_cb cb,
                          skp_err (*find)(struct store *, const char *, uint32_t *),
                          enum store_stmt which, uint32_t *key, sqlite3_stmt **out)
{
    if (!id || !cb)
        return SKP_EINVAL;
    if (st->scanning)
        return SKP_ESTATE; /* a nested scan would reset the running one */
    skp_err err = find(st, id, key);
    if (err)
        return err;
    *out = store__stmt(st, which, &err);
    return *out ? SKP_OK : err;
}

skp_err store_scan_segment(struct store *st, const char *segment_id, int32_t lo_seq,
                           int32_t hi_seq, store_sample_cb cb, void *ud)
{
    uint32_t seg = 0;
    sqlite3_stmt *s = NULL;
    skp_err err = scan_begin(st, segment_id, cb, store__segment_find, STMT_SCAN_SEGMENT, &seg, &s);
    if (err)
        return err == SKP_ENOTFOUND ? SKP_OK : err;
    sqlite3_bind_int64(s, 1, seg);
    sqlite3_bind_int(s, 2, lo_seq);
    sqlite3_bind_int(s, 3, hi_seq);
    return run_scan(st, s, cb, ud);
}

skp_err store_segment_seq_window(struct store *st, const char *segment_id, int64_t from_ms,
                                 int64_t to_ms, int32_t *lo, int32_t *hi)
{
    if (!segment_id)
        return SKP_EINVAL;
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

skp_err store_scan_task(struct store *st, const char *task_id, store_sample_cb cb, void *ud)
{
    uint32_t task = 0;
    sqlite3_stmt *s = NULL;
    skp_err err = scan_begin(st, task_id, cb, task_key_find, STMT_SCAN_TASK, &task, &s);
    if (err)
        return err == SKP_ENOTFOUND ? SKP_OK : err;
    sqlite3_bind_int64(s, 1, task);
    return run_scan(st, s, cb, ud);
}

/* ---- retention ---- */

static skp_err exec_count(struct store *st, const char *sql, int64_t before_ms, uint64_t *n)
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
static skp_err purge_frames(struct store *st, uint64_t *n)
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
        err = ensure_scratch(st, bl ? bl : 1);
        if (err)
            goto out;
        size_t cnt = decode_ids(b, bl, st->scratch_ids, bl);
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

skp_err store_purge_before(struct store *st, int64_t before_ms, uint64_t *n_deleted)
{
    /* Retention works per segment: a segment's snapshots, task links and SegmentObject go
     * together once the segment was first seen before `before_ms`. */
    static const char *const k_purge[] = {
        "DELETE FROM snapshots WHERE seg IN (SELECT id FROM segids WHERE first_ms < ?1)",
        "DELETE FROM task_segments WHERE seg IN (SELECT id FROM segids WHERE first_ms < ?1)",
        "DELETE FROM segments WHERE end_ms < ?1 OR "
        "seg IN (SELECT id FROM segids WHERE first_ms < ?1)",
        "DELETE FROM segids WHERE first_ms < ?1",
        "DELETE FROM task_logs WHERE time < ?1",
        "DELETE FROM tasks WHERE start_time + duration_min * 60000 < ?1",
        "DELETE FROM task_keys WHERE task_id NOT IN (SELECT id FROM tasks) AND "
        "id NOT IN (SELECT task FROM task_segments)",
        "DELETE FROM stacks WHERE id NOT IN (SELECT stack FROM snapshots)",
    };
    uint64_t n = 0;
    if (n_deleted)
        *n_deleted = 0;
    if (st->read_only)
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

skp_err store_get_stats(struct store *st, struct store_stats *out)
{
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
