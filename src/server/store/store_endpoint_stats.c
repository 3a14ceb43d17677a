/* store_endpoint_stats.c - store.h's endpoint statistics for both backends: the per-minute rows
 * rolled up by stats/endpoint_stats.c (table endpoint_minutes, each backend's schema step),
 * written once over the statements of store_query.h with their SQLite and PostgreSQL text side
 * by side. SQLite: one row per (service, endpoint, instance, minute), a minute rolled up again
 * replaces its row. PostgreSQL: one row per (service, endpoint, instance, minute, writer): every
 * skyprofd writes its own rows (its writer number), so collectors sharing the database never
 * overwrite each other's minutes and readers add them up; a minute rolled up again by the same
 * writer replaces its row. */
#include "server/store/store.h"

#include "server/store/store_backend.h"
#include "server/store/store_query.h"
#include "server/store/store_rows.h"

static const struct store_sql put_minute = {
    .sqlite = "INSERT OR REPLACE INTO endpoint_minutes(" STORE_ENDPOINT_MINUTE_COLS ") "
              "VALUES(" STORE_ENDPOINT_MINUTE_SQ ")",
    .pg = "INSERT INTO endpoint_minutes(" STORE_ENDPOINT_MINUTE_COLS ") "
          "VALUES(" STORE_ENDPOINT_MINUTE_PG ") "
          "ON CONFLICT (md5(service), md5(endpoint), md5(instance), minute_ms, "
          "writer) DO UPDATE SET count = excluded.count, errors = excluded.errors, "
          "hist = excluded.hist",
    .what = "put endpoint minute",
};

skp_err store_put_endpoint_minutes(struct store *st, const struct store_endpoint_minute *v,
                                   size_t n)
{
    skp_err err;
    if (store_batch_answered(st, v, n, &err))
        return err;
    return store_query_insert_rows(st, &put_minute, &store_endpoint_minute_row, v, n, NULL);
}

static const struct store_sql list_minutes = {
    .sqlite = "SELECT " STORE_ENDPOINT_MINUTE_READ " FROM endpoint_minutes "
              "WHERE service = ?1 AND minute_ms >= ?2 AND minute_ms < ?3 "
              "ORDER BY endpoint, instance, minute_ms, writer",
    .pg = "SELECT " STORE_ENDPOINT_MINUTE_READ " FROM endpoint_minutes WHERE "
          "md5(service) = md5($1) AND service = $1 AND minute_ms >= $2 AND minute_ms < $3 "
          "ORDER BY endpoint COLLATE \"C\", instance COLLATE \"C\", minute_ms, writer",
    .what = "list endpoint minutes",
};

skp_err store_list_endpoint_minutes(struct store *st, const char *service, int64_t from_ms,
                                    int64_t to_ms, store_endpoint_minute_cb cb, void *ud)
{
    if (!service || !cb)
        return SKP_EINVAL;
    struct store_params p = {0};
    store_param_text(&p, service);
    store_param_int(&p, from_ms);
    store_param_int(&p, to_ms);
    return store_query_each(st, &list_minutes, &p, &store_endpoint_minute_row,
                            &STORE_VISIT(endpoint_minute, cb, ud));
}
