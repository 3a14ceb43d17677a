/* store_pg_endpoint_stats.c - PostgreSQL backend: the per-minute endpoint statistics rolled up
 * by endpoint_stats.c (table endpoint_minutes, created by the feature step of store_pg_schema.c).
 * One row per (service, endpoint, instance, minute, writer): every skyprofd writes its own rows
 * (its writer number), so collectors sharing the database never overwrite each other's minutes
 * and readers add them up. A minute rolled up again by the same writer replaces its row. */
#include "server/store/store.h"

#include <string.h>

#include "server/store/postgres/store_pg_int.h"

static void bind_minute(struct pg_params *p, size_t i, const void *rows)
{
    const struct store_endpoint_minute *m = (const struct store_endpoint_minute *)rows + i;
    pgp_row(p, &store_endpoint_minute_row, m);
}

skp_err pg_store_put_endpoint_minutes(struct store *base, const struct store_endpoint_minute *v,
                                      size_t n)
{
    struct pg_store *st = pg_store_of(base);
    return pg__insert_rows(
        st,
        "INSERT INTO endpoint_minutes(" STORE_ENDPOINT_MINUTE_COLS ") "
        "VALUES(" STORE_ENDPOINT_MINUTE_PG ") "
        "ON CONFLICT (md5(service), md5(endpoint), md5(instance), minute_ms, "
        "writer) DO UPDATE SET count = excluded.count, errors = excluded.errors, "
        "hist = excluded.hist",
        n, bind_minute, v, "put endpoint minute");
}

skp_err pg_store_list_endpoint_minutes(struct store *base, const char *service, int64_t from_ms,
                                       int64_t to_ms, store_endpoint_minute_cb cb, void *ud)
{
    if (!service || !cb)
        return SKP_EINVAL;
    struct pg_params p = {0};
    pgp_text(&p, service);
    pgp_int(&p, from_ms);
    pgp_int(&p, to_ms);
    return pg__query_each(
        pg_store_of(base),
        "SELECT " STORE_ENDPOINT_MINUTE_READ " FROM endpoint_minutes WHERE "
        "md5(service) = md5($1) AND service = $1 AND minute_ms >= $2 AND minute_ms < $3 "
        "ORDER BY endpoint COLLATE \"C\", instance COLLATE \"C\", minute_ms, writer",
        &p, &store_endpoint_minute_row, &STORE_VISIT(endpoint_minute, cb, ud),
        "list endpoint minutes");
}
