/* store_sqlite_proc.c - SQLite tables of process-profiling tasks (see store_proc.h): proc_tasks,
 * proc_task_instances, proc_task_logs, proc_files (schema step 3 in store_schema.c). Files are
 * BLOB rows; a 30 MiB file is one row, written in the transaction that logs its upload, so a
 * file is either stored with its EXECUTION_FINISHED log or not at all. */
#include "server/store/store_proc.h"

#include <string.h>

#include "common/alloc.h"
#include "common/grow.h"
#include "common/log.h"
#include "server/store/sqlite/store_int.h"

#define PROC_LIST_DEFAULT 1000

static const char *kind_name(enum proc_kind k)
{
    return k == PROC_KIND_ASYNC_PROFILER ? "async-profiler" : "pprof";
}

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

static skp_err load_instances(struct sqlite_store *st, struct proc_task *t)
{
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(
        st, "SELECT instance FROM proc_task_instances WHERE task_id = ? ORDER BY instance", &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, t->id, -1, SQLITE_STATIC);
    void *v = NULL;
    err = store__read_rows(st, s, &store_name_row, &v, &t->n_instances, "proc task instances");
    t->instances = v;
    return err;
}

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
    err = store__prepare(
        st, "INSERT OR IGNORE INTO proc_task_instances(task_id, instance) VALUES(?, ?)", &s);
    if (err)
        goto out;
    for (size_t i = 0; i < t->n_instances && !err; i++) {
        sqlite3_reset(s);
        sqlite3_bind_text(s, 1, t->id, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, t->instances[i], -1, SQLITE_STATIC);
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

/* Runs a statement expected to yield at most one task row. */
static skp_err one_task(struct sqlite_store *st, sqlite3_stmt *s, struct proc_task *out)
{
    int rc = sqlite3_step(s);
    skp_err err;
    if (rc == SQLITE_ROW)
        err = store__read_row(s, 0, &store_proc_task_row, out, true);
    else if (rc == SQLITE_DONE)
        err = SKP_ENOTFOUND;
    else
        err = store__sqlerr(st, rc, "read proc task");
    sqlite3_finalize(s);
    if (!err) {
        err = load_instances(st, out);
        if (err)
            store_proc_task_cleanup(out);
    }
    return err;
}

skp_err sqlite_store_proc_get_task(struct store *base, const char *id, struct proc_task *out)
{
    struct sqlite_store *st = sqlite_store_of(base);
    memset(out, 0, sizeof(*out));
    sqlite3_stmt *s = NULL;
    skp_err err =
        store__prepare(st, "SELECT " STORE_PROC_TASK_READ " FROM proc_tasks WHERE id = ?", &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    return one_task(st, s, out);
}

skp_err sqlite_store_proc_latest_task(struct store *base, enum proc_kind kind, const char *service,
                                      const char *events, struct proc_task *out)
{
    struct sqlite_store *st = sqlite_store_of(base);
    memset(out, 0, sizeof(*out));
    sqlite3_stmt *s = NULL;
    skp_err err =
        store__prepare(st,
                       "SELECT " STORE_PROC_TASK_READ " FROM proc_tasks WHERE kind = ? AND "
                       "service = ? AND events = ? ORDER BY create_time DESC LIMIT 1",
                       &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, kind_name(kind), -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, service, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, events, -1, SQLITE_STATIC);
    return one_task(st, s, out);
}

skp_err sqlite_store_proc_next_task(struct store *base, enum proc_kind kind, const char *service,
                                    const char *instance, int64_t after_ms, int64_t now_ms,
                                    int64_t grace_ms, struct proc_task *out)
{
    struct sqlite_store *st = sqlite_store_of(base);
    memset(out, 0, sizeof(*out));
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(
        st,
        "SELECT " STORE_PROC_TASK_READ " FROM proc_tasks t WHERE kind = ? AND service = ? AND "
        "create_time > ? AND create_time + duration_s * 1000 + ? >= ? AND cancelled_ms IS NULL "
        "AND EXISTS(SELECT 1 FROM "
        "proc_task_instances i WHERE i.task_id = t.id AND i.instance = ?) "
        "ORDER BY create_time LIMIT 1",
        &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, kind_name(kind), -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, service, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, after_ms);
    sqlite3_bind_int64(s, 4, grace_ms);
    sqlite3_bind_int64(s, 5, now_ms);
    sqlite3_bind_text(s, 6, instance, -1, SQLITE_STATIC);
    return one_task(st, s, out);
}

skp_err sqlite_store_proc_list_tasks(struct store *base, enum proc_kind kind, const char *service,
                                     size_t limit, struct proc_task **out, size_t *n)
{
    struct sqlite_store *st = sqlite_store_of(base);
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s = NULL;
    skp_err err =
        store__prepare(st,
                       "SELECT " STORE_PROC_TASK_READ " FROM proc_tasks WHERE kind = ? AND "
                       "(?2 IS NULL OR service = ?2) ORDER BY create_time DESC LIMIT ?3",
                       &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, kind_name(kind), -1, SQLITE_STATIC);
    if (service)
        sqlite3_bind_text(s, 2, service, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, (sqlite3_int64)(limit ? limit : PROC_LIST_DEFAULT));
    void *v = NULL;
    size_t got = 0;
    err = store__read_rows(st, s, &store_proc_task_row, &v, &got, "list proc tasks");
    struct proc_task *tasks = v;
    for (size_t i = 0; !err && i < got; i++)
        err = load_instances(st, &tasks[i]);
    if (err) {
        store_proc_tasks_free(tasks, got);
        return err;
    }
    *out = tasks;
    *n = got;
    return SKP_OK;
}

skp_err sqlite_store_proc_live_instances(struct store *base, const char *service, int64_t since_ms,
                                         char ***out, size_t *n)
{
    struct sqlite_store *st = sqlite_store_of(base);
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st,
                                 "SELECT i.name FROM instances i JOIN services v ON "
                                 "v.id = i.service_id WHERE v.name = ? AND i.last_seen >= ? "
                                 "ORDER BY i.name",
                                 &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, service, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, since_ms);
    void *v = NULL;
    err = store__read_rows(st, s, &store_name_row, &v, n, "live instances");
    *out = v;
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
    struct sqlite_store *st = sqlite_store_of(base);
    if (!id)
        return SKP_EINVAL;
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st,
                                 "UPDATE proc_tasks SET cancelled_ms = ?2 WHERE id = ?1 AND "
                                 "cancelled_ms IS NULL AND create_time + duration_s * 1000 + ?3 "
                                 ">= ?2",
                                 &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, now_ms);
    sqlite3_bind_int64(s, 3, grace_ms);
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE)
        return store__sqlerr(st, rc, "cancel process task");
    st->commits++;
    if (sqlite3_changes(st->db) == 1)
        return SKP_OK;
    struct proc_task t;
    err = sqlite_store_proc_get_task(base, id, &t);
    store_proc_task_cleanup(&t);
    return err ? err : SKP_ESTATE;
}

skp_err sqlite_store_proc_add_log(struct store *base, const char *task_id, const char *instance,
                                  const char *op, int64_t time_ms, const char *message)
{
    struct sqlite_store *st = sqlite_store_of(base);
    return insert_log(st, task_id, instance, op, time_ms, message);
}

skp_err sqlite_store_proc_list_logs(struct store *base, const char *task_id, struct proc_log **out,
                                    size_t *n)
{
    struct sqlite_store *st = sqlite_store_of(base);
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st,
                                 "SELECT " STORE_PROC_LOG_READ " FROM proc_task_logs WHERE "
                                 "task_id = ? ORDER BY time, id",
                                 &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, task_id, -1, SQLITE_STATIC);
    void *v = NULL;
    err = store__read_rows(st, s, &store_proc_log_row, &v, n, "list proc task logs");
    *out = v;
    return err;
}

/* ---------------------------------------------------------------- files */

skp_err sqlite_store_proc_insert_file(struct store *base, const char *task_id, const char *instance,
                                      int64_t time_ms, const uint8_t *data, size_t len,
                                      const char *op, int64_t *id_out)
{
    struct sqlite_store *st = sqlite_store_of(base);
    if (id_out)
        *id_out = 0;
    skp_err err = store__begin(st);
    if (err)
        return err;
    sqlite3_stmt *s = NULL;
    err = store__prepare(st,
                         "INSERT INTO proc_files(" STORE_PROC_FILE_COLS ", task_id, data) "
                         "VALUES(" STORE_PROC_FILE_SQ ", ?, ?)",
                         &s);
    if (err)
        goto out;
    const struct proc_file f = {0, (char *)instance, time_ms, (int64_t)len};
    int k = store__bind_row(s, 1, &store_proc_file_row, &f);
    sqlite3_bind_text(s, k, task_id, -1, SQLITE_STATIC);
    sqlite3_bind_blob64(s, k + 1, len ? (const void *)data : "", (sqlite3_uint64)len,
                        SQLITE_STATIC);
    err = step_done(st, s, "insert proc file");
    sqlite3_finalize(s);
    if (err)
        goto out;
    int64_t id = sqlite3_last_insert_rowid(st->db);
    if (op) {
        err = insert_log(st, task_id, instance, op, time_ms, NULL);
        if (err)
            goto out;
    }
    err = store__commit(st);
    if (!err && id_out)
        *id_out = id;
    return err;
out:
    store__rollback(st);
    return err;
}

skp_err sqlite_store_proc_list_files(struct store *base, const char *task_id,
                                     struct proc_file **out, size_t *n)
{
    struct sqlite_store *st = sqlite_store_of(base);
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(
        st, "SELECT " STORE_PROC_FILE_READ " FROM proc_files WHERE task_id = ? ORDER BY id", &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, task_id, -1, SQLITE_STATIC);
    void *v = NULL;
    err = store__read_rows(st, s, &store_proc_file_row, &v, n, "list proc files");
    *out = v;
    return err;
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
    skp_err err = store__prepare(
        st, "SELECT data, instance FROM proc_files WHERE id = ? AND task_id = ?", &s);
    if (err)
        return err;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_text(s, 2, task_id, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) {
        err = SKP_ENOTFOUND;
    } else if (rc != SQLITE_ROW) {
        err = store__sqlerr(st, rc, "read proc file");
    } else {
        size_t n = (size_t)sqlite3_column_bytes(s, 0);
        const void *p = sqlite3_column_blob(s, 0);
        uint8_t *buf = skpx_malloc(n ? n : 1);
        char *inst = instance_out ? skpx_strdup(store__col_text(s, 1)) : NULL;
        if (!buf || (instance_out && !inst)) {
            skpx_free(buf);
            skpx_free(inst);
            err = SKP_ENOMEM;
        } else {
            if (n)
                memcpy(buf, p, n);
            *data = buf;
            *len = n;
            if (instance_out)
                *instance_out = inst;
        }
    }
    sqlite3_finalize(s);
    return err;
}
