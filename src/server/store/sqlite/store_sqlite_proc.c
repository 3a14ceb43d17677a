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

static char *col_dup(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? skpx_strdup((const char *)t) : NULL;
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

#define TASK_COLS                                                                                  \
    "id, kind, service, all_live, events, duration_s, dump_period, sampling_hz, exec_args, "       \
    "create_time"
/* What the reads select: the columns above, then the cancel time (0 = not cancelled). */
#define TASK_READ_COLS TASK_COLS ", coalesce(cancelled_ms, 0)"

struct names_acc {
    char **v;
    size_t n, cap;
};

static skp_err names_row(void *ud, sqlite3_stmt *s)
{
    struct names_acc *a = ud;
    if (skpx_grow(&a->v, &a->cap, a->n + 1, sizeof(*a->v), 8) != SKP_OK)
        return SKP_ENOMEM;
    a->v[a->n] = col_dup(s, 0);
    if (!a->v[a->n])
        return SKP_ENOMEM;
    a->n++;
    return SKP_OK;
}

static skp_err load_instances(struct sqlite_store *st, struct proc_task *t)
{
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(
        st, "SELECT instance FROM proc_task_instances WHERE task_id = ? ORDER BY instance", &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, t->id, -1, SQLITE_STATIC);
    struct names_acc a = {0};
    err = store__each_row(st, s, names_row, &a, "proc task instances");
    sqlite3_finalize(s);
    if (err) {
        store_proc_names_free(a.v, a.n);
        return err;
    }
    t->instances = a.v;
    t->n_instances = a.n;
    return SKP_OK;
}

static skp_err read_task(sqlite3_stmt *s, struct proc_task *t)
{
    memset(t, 0, sizeof(*t));
    t->id = col_dup(s, 0);
    const unsigned char *kind = sqlite3_column_text(s, 1);
    t->kind = kind && strcmp((const char *)kind, "async-profiler") == 0 ? PROC_KIND_ASYNC_PROFILER
                                                                        : PROC_KIND_PPROF;
    t->service = col_dup(s, 2);
    t->all_live = sqlite3_column_int(s, 3) != 0;
    t->events = col_dup(s, 4);
    t->duration_s = sqlite3_column_int64(s, 5);
    t->dump_period = sqlite3_column_int64(s, 6);
    t->sampling_hz = sqlite3_column_int64(s, 7);
    t->exec_args = col_dup(s, 8);
    t->create_time = sqlite3_column_int64(s, 9);
    t->cancelled_ms = sqlite3_column_int64(s, 10);
    if (!t->id || !t->service || !t->events) {
        store_proc_task_cleanup(t);
        return SKP_ENOMEM;
    }
    return SKP_OK;
}

skp_err sqlite_store_proc_insert_task(struct store *base, const struct proc_task *t)
{
    struct sqlite_store *st = sqlite_store_of(base);
    skp_err err = store__begin(st);
    if (err)
        return err;
    sqlite3_stmt *s = NULL;
    err =
        store__prepare(st, "INSERT INTO proc_tasks(" TASK_COLS ") VALUES(?,?,?,?,?,?,?,?,?,?)", &s);
    if (err)
        goto out;
    sqlite3_bind_text(s, 1, t->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, kind_name(t->kind), -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, t->service, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 4, t->all_live ? 1 : 0);
    sqlite3_bind_text(s, 5, t->events, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 6, t->duration_s);
    sqlite3_bind_int64(s, 7, t->dump_period);
    sqlite3_bind_int64(s, 8, t->sampling_hz);
    if (t->exec_args)
        sqlite3_bind_text(s, 9, t->exec_args, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 10, t->create_time);
    err = step_done(st, s, "insert proc task");
    sqlite3_finalize(s);
    s = NULL;
    if (err)
        goto out;
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
        err = read_task(s, out);
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
    skp_err err = store__prepare(st, "SELECT " TASK_READ_COLS " FROM proc_tasks WHERE id = ?", &s);
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
    skp_err err = store__prepare(st,
                                 "SELECT " TASK_READ_COLS " FROM proc_tasks WHERE kind = ? AND "
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
        "SELECT " TASK_READ_COLS " FROM proc_tasks t WHERE kind = ? AND service = ? AND "
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

struct tasks_acc {
    struct proc_task *v;
    size_t n, cap;
};

static skp_err tasks_row(void *ud, sqlite3_stmt *s)
{
    struct tasks_acc *a = ud;
    if (skpx_grow(&a->v, &a->cap, a->n + 1, sizeof(*a->v), 16) != SKP_OK)
        return SKP_ENOMEM;
    skp_err err = read_task(s, &a->v[a->n]);
    if (!err)
        a->n++;
    return err;
}

skp_err sqlite_store_proc_list_tasks(struct store *base, enum proc_kind kind, const char *service,
                                     size_t limit, struct proc_task **out, size_t *n)
{
    struct sqlite_store *st = sqlite_store_of(base);
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st,
                                 "SELECT " TASK_READ_COLS " FROM proc_tasks WHERE kind = ? AND "
                                 "(?2 IS NULL OR service = ?2) ORDER BY create_time DESC LIMIT ?3",
                                 &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, kind_name(kind), -1, SQLITE_STATIC);
    if (service)
        sqlite3_bind_text(s, 2, service, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, (sqlite3_int64)(limit ? limit : PROC_LIST_DEFAULT));
    struct tasks_acc a = {0};
    err = store__each_row(st, s, tasks_row, &a, "list proc tasks");
    sqlite3_finalize(s);
    for (size_t i = 0; !err && i < a.n; i++)
        err = load_instances(st, &a.v[i]);
    if (err) {
        store_proc_tasks_free(a.v, a.n);
        return err;
    }
    *out = a.v;
    *n = a.n;
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
    struct names_acc a = {0};
    err = store__each_row(st, s, names_row, &a, "live instances");
    sqlite3_finalize(s);
    if (err) {
        store_proc_names_free(a.v, a.n);
        return err;
    }
    *out = a.v;
    *n = a.n;
    return SKP_OK;
}

/* ---------------------------------------------------------------- logs */

static skp_err insert_log(struct sqlite_store *st, const char *task_id, const char *instance,
                          const char *op, int64_t time_ms, const char *message)
{
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st,
                                 "INSERT OR IGNORE INTO proc_task_logs(task_id, instance, op, "
                                 "time, message)"
                                 " VALUES(?, ?, ?, ?, ?)",
                                 &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, task_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, instance, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, op, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 4, time_ms);
    if (message)
        sqlite3_bind_text(s, 5, message, -1, SQLITE_STATIC);
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

struct logs_acc {
    struct proc_log *v;
    size_t n, cap;
};

static skp_err logs_row(void *ud, sqlite3_stmt *s)
{
    struct logs_acc *a = ud;
    if (skpx_grow(&a->v, &a->cap, a->n + 1, sizeof(*a->v), 16) != SKP_OK)
        return SKP_ENOMEM;
    struct proc_log *l = &a->v[a->n];
    memset(l, 0, sizeof(*l));
    l->instance = col_dup(s, 0);
    l->op = col_dup(s, 1);
    l->time_ms = sqlite3_column_int64(s, 2);
    l->message = col_dup(s, 3);
    a->n++;
    if (!l->instance || !l->op || (sqlite3_column_type(s, 3) != SQLITE_NULL && !l->message))
        return SKP_ENOMEM;
    return SKP_OK;
}

skp_err sqlite_store_proc_list_logs(struct store *base, const char *task_id, struct proc_log **out,
                                    size_t *n)
{
    struct sqlite_store *st = sqlite_store_of(base);
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st,
                                 "SELECT instance, op, time, message FROM proc_task_logs WHERE "
                                 "task_id = ? ORDER BY time, id",
                                 &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, task_id, -1, SQLITE_STATIC);
    struct logs_acc a = {0};
    err = store__each_row(st, s, logs_row, &a, "list proc task logs");
    sqlite3_finalize(s);
    if (err) {
        store_proc_logs_free(a.v, a.n);
        return err;
    }
    *out = a.v;
    *n = a.n;
    return SKP_OK;
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
                         "INSERT INTO proc_files(task_id, instance, time, size, data) "
                         "VALUES(?, ?, ?, ?, ?)",
                         &s);
    if (err)
        goto out;
    sqlite3_bind_text(s, 1, task_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, instance, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, time_ms);
    sqlite3_bind_int64(s, 4, (sqlite3_int64)len);
    sqlite3_bind_blob64(s, 5, len ? (const void *)data : "", (sqlite3_uint64)len, SQLITE_STATIC);
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

struct files_acc {
    struct proc_file *v;
    size_t n, cap;
};

static skp_err files_row(void *ud, sqlite3_stmt *s)
{
    struct files_acc *a = ud;
    if (skpx_grow(&a->v, &a->cap, a->n + 1, sizeof(*a->v), 8) != SKP_OK)
        return SKP_ENOMEM;
    struct proc_file *f = &a->v[a->n];
    f->id = sqlite3_column_int64(s, 0);
    f->instance = col_dup(s, 1);
    f->time_ms = sqlite3_column_int64(s, 2);
    f->size_bytes = sqlite3_column_int64(s, 3);
    a->n++;
    return f->instance ? SKP_OK : SKP_ENOMEM;
}

skp_err sqlite_store_proc_list_files(struct store *base, const char *task_id,
                                     struct proc_file **out, size_t *n)
{
    struct sqlite_store *st = sqlite_store_of(base);
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(
        st, "SELECT id, instance, time, size FROM proc_files WHERE task_id = ? ORDER BY id", &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, task_id, -1, SQLITE_STATIC);
    struct files_acc a = {0};
    err = store__each_row(st, s, files_row, &a, "list proc files");
    sqlite3_finalize(s);
    if (err) {
        store_proc_files_free(a.v, a.n);
        return err;
    }
    *out = a.v;
    *n = a.n;
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
        char *inst = instance_out ? col_dup(s, 1) : NULL;
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
