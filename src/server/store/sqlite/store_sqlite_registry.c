/* store_sqlite_registry.c - SQLite backend: services and instances (registered by agents),
 * profile task writes and task logs (their reads: store/store_services.c, store/store_tasks.c).
 * Instance properties are kept as a JSON object text (store_codec.h). Single-threaded. */
#include "server/store/store.h"

#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/log.h"
#include "server/store/store_codec.h"
#include "server/store/sqlite/store_int.h"
#include "server/formats/utf8.h"

/* ---- services and instances ---- */

static skp_err service_ref(struct sqlite_store *st, const char *service, const char *layer,
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

static skp_err instance_upsert(struct sqlite_store *st, int64_t service_id, const char *instance,
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

static skp_err upsert(struct sqlite_store *st, const char *service, const char *instance,
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
    return store__finish(st, err);
}

skp_err sqlite_store_upsert_instance(struct store *base, const char *service, const char *instance,
                                     const char *layer, const struct store_kv *props,
                                     size_t n_props, int64_t now_ms)
{
    struct sqlite_store *st = sqlite_store_of(base);
    const char *language = NULL;
    char *text = store_props_to_text(props, n_props, &language);
    if (!text)
        return SKP_ENOMEM;
    skp_err err = upsert(st, service, instance, layer, language, text, now_ms);
    skpx_free(text);
    return err;
}

skp_err sqlite_store_touch_instance(struct store *base, const char *service, const char *instance,
                                    int64_t now_ms)
{
    struct sqlite_store *st = sqlite_store_of(base);
    return upsert(st, service, instance, NULL, NULL, NULL, now_ms);
}

/* ---- tasks ---- */

skp_err sqlite_store_insert_task(struct store *base, const struct store_task *t)
{
    struct sqlite_store *st = sqlite_store_of(base);
    if (!t || !t->id || !t->service || !t->endpoint)
        return SKP_EINVAL;
    skp_err err = store__insert_row(st,
                                    "INSERT INTO tasks(" STORE_TASK_COLS ") "
                                    "VALUES(" STORE_TASK_SQ ")",
                                    &store_task_row, t, NULL, "insert task");
    if (!err)
        st->commits++;
    return err;
}

skp_err sqlite_store_cancel_task(struct store *base, const char *id, int64_t now_ms)
{
    if (!id)
        return SKP_EINVAL;
    struct store_params p = {0};
    store_param_text(&p, id);
    store_param_int(&p, now_ms);
    return store__cancel(sqlite_store_of(base),
                         "UPDATE tasks SET cancelled_ms = ?2 WHERE id = ?1 AND "
                         "cancelled_ms IS NULL AND start_time + duration_min * 60000 > ?2",
                         "SELECT 1 FROM tasks WHERE id = ?1", &p, "cancel task");
}

/* SQLite has one writer at a time: an IMMEDIATE transaction is the lock. */
skp_err sqlite_store_tasks_lock(struct store *base, const char *service)
{
    struct sqlite_store *st = sqlite_store_of(base);
    if (!service)
        return SKP_EINVAL;
    if (st->in_tx)
        return SKP_ESTATE;
    return store__begin(st);
}

skp_err sqlite_store_tasks_unlock(struct store *base, bool commit)
{
    struct sqlite_store *st = sqlite_store_of(base);
    if (!st->in_tx)
        return SKP_ESTATE;
    if (commit)
        return store__finish(st, SKP_OK);
    store__rollback(st);
    return SKP_OK;
}

skp_err sqlite_store_add_task_log(struct store *base, const char *task_id, const char *service,
                                  const char *instance, enum store_task_op op, int64_t time_ms)
{
    struct sqlite_store *st = sqlite_store_of(base);
    if (!task_id || !instance || (op != STORE_TASK_NOTIFIED && op != STORE_TASK_EXECUTION_FINISHED))
        return SKP_EINVAL;
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st,
                                 "INSERT OR IGNORE INTO task_logs(" STORE_TASK_LOG_COLS
                                 ", service) VALUES(" STORE_TASK_LOG_SQ ", ?)",
                                 &s);
    if (err)
        return err;
    const struct store_task_log l = {task_id, instance, op, time_ms};
    int k = store__bind_row(s, 1, &store_task_log_row, &l);
    if (service)
        sqlite3_bind_text(s, k, service, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc != SQLITE_DONE)
        err = store__sqlerr(st, rc, "add task log");
    else
        st->commits++;
    sqlite3_finalize(s);
    return err;
}
