/* store_sqlite_endpoint_stats.c - SQLite backend: the per-minute endpoint statistics rolled up
 * by endpoint_stats.c (table endpoint_minutes, schema v3). One row per (service, endpoint,
 * instance, minute); a minute rolled up again replaces its row. Single-threaded. */
#include "server/store.h"

#include "server/store_int.h"

skp_err sqlite_store_put_endpoint_minutes(struct store *base, const struct store_endpoint_minute *v,
                                          size_t n)
{
    struct sqlite_store *st = sqlite_store_of(base);
    if (n == 0)
        return SKP_OK;
    if (!v)
        return SKP_EINVAL;
    if (st->read_only)
        return SKP_EIO;
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st,
                                 "INSERT OR REPLACE INTO endpoint_minutes(service, endpoint, "
                                 "instance, minute_ms, count, errors, hist, writer) "
                                 "VALUES(?, ?, ?, ?, ?, ?, ?, ?)",
                                 &s);
    if (err)
        return err;
    err = store__begin(st);
    for (size_t i = 0; i < n && !err; i++) {
        sqlite3_reset(s);
        sqlite3_bind_text(s, 1, v[i].service ? v[i].service : "", -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, v[i].endpoint ? v[i].endpoint : "", -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 3, v[i].instance ? v[i].instance : "", -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 4, v[i].minute_ms);
        sqlite3_bind_int64(s, 5, (sqlite3_int64)v[i].count);
        sqlite3_bind_int64(s, 6, (sqlite3_int64)v[i].errors);
        if (v[i].hist_len)
            sqlite3_bind_blob(s, 7, v[i].hist, (int)v[i].hist_len, SQLITE_STATIC);
        else
            sqlite3_bind_zeroblob(s, 7, 0);
        sqlite3_bind_int64(s, 8, (sqlite3_int64)v[i].writer);
        err = store__step_done(st, s, "put endpoint minute");
    }
    if (!err)
        err = store__commit(st);
    if (err)
        store__rollback(st);
    sqlite3_finalize(s);
    return err;
}

struct minute_visit {
    store_endpoint_minute_cb cb;
    void *ud;
};

static skp_err minute_row(void *ud, sqlite3_stmt *s)
{
    const struct minute_visit *v = ud;
    struct store_endpoint_minute m = {
        .service = store__col_text(s, 0),
        .endpoint = store__col_text(s, 1),
        .instance = store__col_text(s, 2),
        .minute_ms = sqlite3_column_int64(s, 3),
        .count = (uint64_t)sqlite3_column_int64(s, 4),
        .errors = (uint64_t)sqlite3_column_int64(s, 5),
        .hist = sqlite3_column_blob(s, 6),
        .hist_len = (size_t)sqlite3_column_bytes(s, 6),
        .writer = (uint64_t)sqlite3_column_int64(s, 7),
    };
    return v->cb(v->ud, &m);
}

skp_err sqlite_store_list_endpoint_minutes(struct store *base, const char *service, int64_t from_ms,
                                           int64_t to_ms, store_endpoint_minute_cb cb, void *ud)
{
    struct sqlite_store *st = sqlite_store_of(base);
    if (!service || !cb)
        return SKP_EINVAL;
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st,
                                 "SELECT service, endpoint, instance, minute_ms, count, errors, "
                                 "hist, writer FROM endpoint_minutes WHERE service = ? AND "
                                 "minute_ms >= ? AND minute_ms < ? "
                                 "ORDER BY endpoint, instance, minute_ms, writer",
                                 &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, service, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, from_ms);
    sqlite3_bind_int64(s, 3, to_ms);
    struct minute_visit v = {cb, ud};
    err = store__each_row(st, s, minute_row, &v, "list endpoint minutes");
    sqlite3_finalize(s);
    return err;
}
