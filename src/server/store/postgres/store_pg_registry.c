/* store_pg_registry.c - PostgreSQL backend: services and instances (registered by agents),
 * profile tasks (with the service task lock that makes the overlap rule hold across
 * collectors) and their logs; their reads: store/store_services.c, store/store_tasks.c.
 * Properties use the shared JSON text (store_codec.h). */
#include "server/store/postgres/store_pg_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/grow.h"
#include "common/log.h"
#include "server/store/store_codec.h"

/* ---- services and instances ---- */

/* Registers service + instance in one statement (each collector may do it at once: upserts). */
static skp_err upsert(struct pg_store *st, const char *service, const char *instance,
                      const char *layer, const char *language, const char *props_json,
                      int64_t now_ms)
{
    if (!service || !instance)
        return SKP_EINVAL;
    skp_err err = SKP_OK;
    struct pg_params p = {0};
    pgp_text(&p, service);
    pgp_text(&p, layer && *layer ? layer : NULL);
    pgp_int(&p, now_ms);
    pgp_text(&p, instance);
    pgp_text(&p, language);
    pgp_text(&p, props_json);
    PGresult *r = pg__query(
        st,
        "WITH s AS (INSERT INTO services(name, layer, last_seen) VALUES($1, $2, $3) "
        "ON CONFLICT(name) DO UPDATE SET layer = COALESCE(excluded.layer, services.layer), "
        "last_seen = greatest(services.last_seen, excluded.last_seen) RETURNING id) "
        "INSERT INTO instances(service_id, name, language, properties, last_seen) "
        "SELECT id, $4, $5, COALESCE($6, '{}'), $3 FROM s "
        "ON CONFLICT(service_id, name) DO UPDATE SET "
        "language = COALESCE(excluded.language, instances.language), "
        "properties = CASE WHEN $6::text IS NULL THEN instances.properties "
        "ELSE excluded.properties END, "
        "last_seen = greatest(instances.last_seen, excluded.last_seen)",
        &p, &err, "upsert instance");
    PQclear(r);
    if (!err)
        st->commits++;
    return err;
}

skp_err pg_store_upsert_instance(struct store *base, const char *service, const char *instance,
                                 const char *layer, const struct store_kv *props, size_t n_props,
                                 int64_t now_ms)
{
    const char *language = NULL;
    char *text = store_props_to_text(props, n_props, &language);
    if (!text)
        return SKP_ENOMEM;
    skp_err err = upsert(pg_store_of(base), service, instance, layer, language, text, now_ms);
    skpx_free(text);
    return err;
}

skp_err pg_store_touch_instance(struct store *base, const char *service, const char *instance,
                                int64_t now_ms)
{
    return upsert(pg_store_of(base), service, instance, NULL, NULL, NULL, now_ms);
}

/* ---- tasks ---- */

skp_err pg_store_insert_task(struct store *base, const struct store_task *t)
{
    struct pg_store *st = pg_store_of(base);
    if (!t || !t->id || !t->service || !t->endpoint)
        return SKP_EINVAL;
    skp_err err = SKP_OK;
    struct pg_params p = {0};
    pgp_row(&p, &store_task_row, t);
    /* DO NOTHING, not an error: a taken id must not abort the caller's transaction (the task
     * lock), task_create tries the next id. */
    PGresult *r = pg__query(st,
                            "INSERT INTO tasks(" STORE_TASK_COLS ") "
                            "VALUES(" STORE_TASK_PG ") ON CONFLICT DO NOTHING",
                            &p, &err, "insert task");
    if (!r)
        return err;
    bool inserted = strcmp(PQcmdTuples(r), "1") == 0;
    PQclear(r);
    if (!inserted)
        return SKP_EEXIST;
    st->commits++;
    return SKP_OK;
}

skp_err pg_store_cancel_task(struct store *base, const char *id, int64_t now_ms)
{
    if (!id)
        return SKP_EINVAL;
    struct pg_params p = {0};
    pgp_text(&p, id);
    pgp_int(&p, now_ms);
    return pg__cancel(pg_store_of(base),
                      "UPDATE tasks SET cancelled_ms = $2 WHERE id = $1 AND "
                      "cancelled_ms IS NULL AND start_time + duration_min * 60000::bigint > $2",
                      "SELECT 1 FROM tasks WHERE id = $1", id, &p, true, "cancel task");
}

/* The lock is a transaction-scoped advisory lock on a hash of the service name: held until
 * unlock's COMMIT/ROLLBACK, by one store object of any collector at a time. */
skp_err pg_store_tasks_lock(struct store *base, const char *service)
{
    struct pg_store *st = pg_store_of(base);
    if (!service)
        return SKP_EINVAL;
    if (st->in_tx)
        return SKP_ESTATE;
    skp_err err = pg__begin(st);
    if (err)
        return err;
    struct pg_params p = {0};
    pgp_text(&p, service);
    PQclear(pg__query(st, "SELECT pg_advisory_xact_lock(hashtextextended('skp.tasks:' || $1, 0))",
                      &p, &err, "task lock"));
    if (err)
        pg__rollback(st);
    return err;
}

skp_err pg_store_tasks_unlock(struct store *base, bool commit)
{
    struct pg_store *st = pg_store_of(base);
    if (!st->in_tx)
        return SKP_ESTATE;
    if (commit)
        return pg__finish(st, SKP_OK);
    pg__rollback(st);
    return SKP_OK;
}

/* ---- task logs ---- */

skp_err pg_store_add_task_log(struct store *base, const char *task_id, const char *service,
                              const char *instance, enum store_task_op op, int64_t time_ms)
{
    struct pg_store *st = pg_store_of(base);
    if (!task_id || !instance || (op != STORE_TASK_NOTIFIED && op != STORE_TASK_EXECUTION_FINISHED))
        return SKP_EINVAL;
    const struct store_task_log l = {task_id, instance, op, time_ms};
    struct pg_params p = {0};
    pgp_row(&p, &store_task_log_row, &l);
    pgp_text(&p, service);
    /* the first (task, instance, op) row is kept, whichever collector wrote it */
    skp_err err = SKP_OK;
    PQclear(pg__query(st,
                      "INSERT INTO task_logs(" STORE_TASK_LOG_COLS ", service) "
                      "VALUES(" STORE_TASK_LOG_PG ", $5) ON CONFLICT DO NOTHING",
                      &p, &err, "add task log"));
    if (!err)
        st->commits++;
    return err;
}
