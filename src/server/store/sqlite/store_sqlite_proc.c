/* store_sqlite_proc.c - SQLite tables of process-profiling tasks (see store_proc.h): proc_tasks,
 * proc_task_instances, proc_task_logs, proc_files (schema step 3 in store_schema.c) and
 * proc_file_pieces (step 11). A file is a proc_files row (complete = 0 while its pieces are
 * written) and its pieces, one BLOB row of at most STORE_PROC_FILE_PIECE bytes each, each
 * written in a transaction of its own; the row is shown in the transaction that logs the
 * upload, so a file is either listed with its EXECUTION_FINISHED log or not at all. Files
 * stored before step 11 keep their bytes in proc_files.data. */
#include "server/store/store_proc.h"

#include <inttypes.h>
#include <string.h>

#include "common/alloc.h"
#include "common/grow.h"
#include "common/log.h"
#include "server/store/sqlite/store_int.h"

static skp_err step_done(struct sqlite_store *st, sqlite3_stmt *s, const char *what)
{
    int rc = sqlite3_step(s);
    if (rc == SQLITE_DONE)
        return SKP_OK;
    if ((rc & 0xff) == SQLITE_CONSTRAINT) /* extended codes (e.g. _PRIMARYKEY) included */
        return SKP_EEXIST;
    return store__sqlerr(st, rc, what);
}

/* ---------------------------------------------------------------- tasks */

skp_err sqlite_store_proc_insert_task(struct store *base, const struct proc_task *t)
{
    struct sqlite_store *st = sqlite_store_of(base);
    skp_err err = store__begin(st);
    if (err)
        return err;
    err = store__insert_row(st,
                            "INSERT INTO proc_tasks(" STORE_PROC_TASK_COLS ") "
                            "VALUES(" STORE_PROC_TASK_SQ ")",
                            &store_proc_task_row, t, NULL, "insert proc task");
    if (err)
        goto out;
    sqlite3_stmt *s = NULL;
    err = store__prepare(st,
                         "INSERT OR IGNORE INTO proc_task_instances(" STORE_PROC_INSTANCE_COLS
                         ") VALUES(" STORE_PROC_INSTANCE_SQ ")",
                         &s);
    if (err)
        goto out;
    for (size_t i = 0; i < t->n_instances && !err; i++) {
        const struct store_proc_instance_row row = {t->id, t->instances[i]};
        sqlite3_reset(s);
        store__bind_row(s, 1, &store_proc_instance_row, &row);
        err = step_done(st, s, "insert proc task instance");
    }
    sqlite3_finalize(s);
    if (err)
        goto out;
    return store__commit(st);
out:
    store__rollback(st);
    return err;
}

/* ---------------------------------------------------------------- logs */

static skp_err insert_log(struct sqlite_store *st, const char *task_id, const char *instance,
                          const char *op, int64_t time_ms, const char *message)
{
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st,
                                 "INSERT OR IGNORE INTO proc_task_logs(" STORE_PROC_LOG_COLS
                                 ", task_id) VALUES(" STORE_PROC_LOG_SQ ", ?)",
                                 &s);
    if (err)
        return err;
    const struct proc_log l = {(char *)instance, (char *)op, time_ms, (char *)message};
    sqlite3_bind_text(s, store__bind_row(s, 1, &store_proc_log_row, &l), task_id, -1,
                      SQLITE_STATIC);
    err = step_done(st, s, "insert proc task log");
    sqlite3_finalize(s);
    return err;
}

skp_err sqlite_store_proc_cancel_task(struct store *base, const char *id, int64_t now_ms,
                                      int64_t grace_ms)
{
    if (!id)
        return SKP_EINVAL;
    struct store_params p = {0};
    store_param_text(&p, id);
    store_param_int(&p, now_ms);
    store_param_int(&p, grace_ms);
    return store__cancel(sqlite_store_of(base),
                         "UPDATE proc_tasks SET cancelled_ms = ?2 WHERE id = ?1 AND "
                         "cancelled_ms IS NULL AND create_time + duration_s * 1000 + ?3 >= ?2",
                         "SELECT 1 FROM proc_tasks WHERE id = ?1", &p, "cancel process task");
}

skp_err sqlite_store_proc_add_log(struct store *base, const char *task_id, const char *instance,
                                  const char *op, int64_t time_ms, const char *message)
{
    struct sqlite_store *st = sqlite_store_of(base);
    return insert_log(st, task_id, instance, op, time_ms, message);
}

/* ---------------------------------------------------------------- files */

/* Runs `sql` with its parameters bound by `bind` in a transaction of its own. */
static skp_err one_statement(struct sqlite_store *st, const char *sql,
                             void (*bind)(sqlite3_stmt *s, const void *ud), const void *ud,
                             const char *what)
{
    skp_err err = store__begin(st);
    if (err)
        return err;
    sqlite3_stmt *s = NULL;
    err = store__prepare(st, sql, &s);
    if (!err) {
        bind(s, ud);
        err = step_done(st, s, what);
    }
    sqlite3_finalize(s);
    return store__finish(st, err);
}

struct file_begin {
    const struct proc_file *f;
    const char *task_id;
};

static void bind_begin(sqlite3_stmt *s, const void *ud)
{
    const struct file_begin *b = ud;
    sqlite3_bind_text(s, store__bind_row(s, 1, &store_proc_file_row, b->f), b->task_id, -1,
                      SQLITE_STATIC);
}

skp_err sqlite_store_proc_file_begin(struct store *base, const char *task_id, const char *instance,
                                     int64_t time_ms, size_t size, int64_t *id_out)
{
    struct sqlite_store *st = sqlite_store_of(base);
    *id_out = 0;
    const struct proc_file f = {0, (char *)instance, time_ms, (int64_t)size};
    const struct file_begin b = {&f, task_id};
    skp_err err =
        one_statement(st,
                      "INSERT INTO proc_files(" STORE_PROC_FILE_COLS
                      ", task_id, data, complete) VALUES(" STORE_PROC_FILE_SQ ", ?, x'', 0)",
                      bind_begin, &b, "insert proc file");
    if (!err)
        *id_out = sqlite3_last_insert_rowid(st->db);
    return err;
}

static void bind_piece(sqlite3_stmt *s, const void *ud)
{
    store__bind_row(s, 1, &store_proc_piece_row, ud);
}

skp_err sqlite_store_proc_file_append(struct store *base, int64_t id, int seq, const uint8_t *data,
                                      size_t len)
{
    const struct store_proc_piece_row p = {id, seq, data, len};
    return one_statement(sqlite_store_of(base),
                         "INSERT INTO proc_file_pieces(" STORE_PROC_PIECE_COLS ") "
                         "VALUES(" STORE_PROC_PIECE_SQ ")",
                         bind_piece, &p, "insert proc file piece");
}

static void bind_id(sqlite3_stmt *s, const void *ud)
{
    sqlite3_bind_int64(s, 1, *(const int64_t *)ud);
}

skp_err sqlite_store_proc_file_finish(struct store *base, const char *task_id, const char *instance,
                                      int64_t id, int64_t time_ms, const char *op)
{
    struct sqlite_store *st = sqlite_store_of(base);
    skp_err err = store__begin(st);
    if (err)
        return err;
    sqlite3_stmt *s = NULL;
    err = store__prepare(st, "UPDATE proc_files SET complete = 1 WHERE id = ?", &s);
    if (!err) {
        bind_id(s, &id);
        err = step_done(st, s, "show proc file");
        if (!err && sqlite3_changes(st->db) != 1)
            err = SKP_ENOTFOUND;
    }
    sqlite3_finalize(s);
    if (!err && op)
        err = insert_log(st, task_id, instance, op, time_ms, NULL);
    return store__finish(st, err);
}

skp_err sqlite_store_proc_file_abort(struct store *base, int64_t id)
{
    /* The pieces go with the row (trigger proc_files_pieces). */
    return one_statement(sqlite_store_of(base), "DELETE FROM proc_files WHERE id = ?", bind_id, &id,
                         "delete proc file");
}

/* The pieces of file `id` in order, `size` bytes in all, into a new buffer. */
static skp_err read_pieces(struct sqlite_store *st, int64_t id, size_t size, uint8_t **out)
{
    sqlite3_stmt *s = NULL;
    skp_err err =
        store__prepare(st, "SELECT data FROM proc_file_pieces WHERE file_id = ? ORDER BY seq", &s);
    if (err)
        return err;
    sqlite3_bind_int64(s, 1, id);
    uint8_t *buf = skpx_malloc(size ? size : 1);
    size_t n = 0;
    int rc = SQLITE_ROW;
    while (buf && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        size_t k = (size_t)sqlite3_column_bytes(s, 0);
        if (k > size - n) {
            rc = SQLITE_CORRUPT; /* more than the row's size */
            break;
        }
        if (k)
            memcpy(buf + n, sqlite3_column_blob(s, 0), k);
        n += k;
    }
    if (!buf)
        err = SKP_ENOMEM;
    else if (rc != SQLITE_DONE || n != size)
        err = rc == SQLITE_DONE || rc == SQLITE_CORRUPT ? SKP_EIO
                                                        : store__sqlerr(st, rc, "read file pieces");
    sqlite3_finalize(s);
    if (err) {
        if (err == SKP_EIO && buf)
            SKPX_ERROR("store: file %" PRId64 ": its pieces hold %zu of %zu bytes", id, n, size);
        skpx_free(buf);
        return err;
    }
    *out = buf;
    return SKP_OK;
}

skp_err sqlite_store_proc_get_file(struct store *base, const char *task_id, int64_t id,
                                   uint8_t **data, size_t *len, char **instance_out)
{
    struct sqlite_store *st = sqlite_store_of(base);
    *data = NULL;
    *len = 0;
    if (instance_out)
        *instance_out = NULL;
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st,
                                 "SELECT data, instance, size FROM proc_files WHERE id = ? AND "
                                 "task_id = ? AND complete = 1",
                                 &s);
    if (err)
        return err;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_text(s, 2, task_id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    uint8_t *buf = NULL;
    size_t n = 0;
    char *inst = NULL;
    if (rc == SQLITE_DONE) {
        err = SKP_ENOTFOUND;
    } else if (rc != SQLITE_ROW) {
        err = store__sqlerr(st, rc, "read proc file");
    } else {
        n = (size_t)sqlite3_column_bytes(s, 0);
        int64_t size = sqlite3_column_int64(s, 2);
        inst = instance_out ? skpx_strdup(store__col_text(s, 1)) : NULL;
        if (instance_out && !inst) {
            err = SKP_ENOMEM;
        } else if (n == 0 && size > 0) { /* stored in pieces */
            n = (size_t)size;
            err = read_pieces(st, id, n, &buf);
        } else if (!(buf = skpx_malloc(n ? n : 1))) {
            err = SKP_ENOMEM;
        } else if (n) {
            memcpy(buf, sqlite3_column_blob(s, 0), n);
        }
    }
    sqlite3_finalize(s);
    if (err) {
        skpx_free(inst);
        return err;
    }
    *data = buf;
    *len = n;
    if (instance_out)
        *instance_out = inst;
    return SKP_OK;
}
