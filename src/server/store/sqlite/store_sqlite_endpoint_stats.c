/* store_sqlite_endpoint_stats.c - SQLite backend: the per-minute endpoint statistics rolled up
 * by endpoint_stats.c (table endpoint_minutes, schema v3). One row per (service, endpoint,
 * instance, minute); a minute rolled up again replaces its row. Single-threaded. */
#include "server/store/store.h"

#include "server/store/sqlite/store_int.h"

static void bind_minute(sqlite3_stmt *s, size_t i, const void *rows)
{
    const struct store_endpoint_minute *m = (const struct store_endpoint_minute *)rows + i;
    store__bind_row(s, 1, &store_endpoint_minute_row, m);
}

skp_err sqlite_store_put_endpoint_minutes(struct store *base, const struct store_endpoint_minute *v,
                                          size_t n)
{
    struct sqlite_store *st = sqlite_store_of(base);
    return store__insert_rows(st,
                              "INSERT OR REPLACE INTO endpoint_minutes(" STORE_ENDPOINT_MINUTE_COLS
                              ") VALUES(" STORE_ENDPOINT_MINUTE_SQ ")",
                              n, bind_minute, v, "put endpoint minute");
}

skp_err sqlite_store_list_endpoint_minutes(struct store *base, const char *service, int64_t from_ms,
                                           int64_t to_ms, store_endpoint_minute_cb cb, void *ud)
{
    if (!service || !cb)
        return SKP_EINVAL;
    struct store_params p = {0};
    store_param_text(&p, service);
    store_param_int(&p, from_ms);
    store_param_int(&p, to_ms);
    return store__query_each(sqlite_store_of(base),
                             "SELECT " STORE_ENDPOINT_MINUTE_READ " FROM endpoint_minutes "
                             "WHERE service = ? AND minute_ms >= ? AND minute_ms < ? "
                             "ORDER BY endpoint, instance, minute_ms, writer",
                             &p, &store_endpoint_minute_row, &STORE_VISIT(endpoint_minute, cb, ud),
                             "list endpoint minutes");
}
