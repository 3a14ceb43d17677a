/* store_pg_endpoint_stats.c - PostgreSQL backend: the per-minute endpoint statistics rolled up
 * by endpoint_stats.c (table endpoint_minutes, created by the feature step of store_pg_schema.c).
 * One row per (service, endpoint, instance, minute, writer): every skyprofd writes its own rows
 * (its writer number), so collectors sharing the database never overwrite each other's minutes
 * and readers add them up. A minute rolled up again by the same writer replaces its row. */
#include "server/store/store.h"

#include <string.h>

#include "common/alloc.h"
#include "server/store/postgres/store_pg_bytea.h"
#include "server/store/postgres/store_pg_features.h"
#include "server/store/postgres/store_pg_int.h"

static void bind_minute(struct pg_params *p, size_t i, const void *rows)
{
    const struct store_endpoint_minute *m = (const struct store_endpoint_minute *)rows + i;
    pgp_text(p, m->service ? m->service : "");
    pgp_text(p, m->endpoint ? m->endpoint : "");
    pgp_text(p, m->instance ? m->instance : "");
    pgp_int(p, m->minute_ms);
    pgp_int(p, (int64_t)m->writer);
    pgp_int(p, (int64_t)m->count);
    pgp_int(p, (int64_t)m->errors);
    pgp_owned(p, pg_bytea_hex(m->hist, m->hist_len));
}

skp_err pg_store_put_endpoint_minutes(struct store *base, const struct store_endpoint_minute *v,
                                      size_t n)
{
    struct pg_store *st = pg_store_of(base);
    if (n == 0)
        return SKP_OK;
    if (!v)
        return SKP_EINVAL;
    if (st->read_only)
        return SKP_EIO;
    return pg__insert_rows(
        st,
        "INSERT INTO endpoint_minutes(service, endpoint, instance, "
        "minute_ms, writer, count, errors, hist) "
        "VALUES($1, $2, $3, $4, $5, $6, $7, $8::bytea) "
        "ON CONFLICT (md5(service), md5(endpoint), md5(instance), minute_ms, "
        "writer) DO UPDATE SET count = excluded.count, errors = excluded.errors, "
        "hist = excluded.hist",
        n, bind_minute, v, "put endpoint minute");
}

skp_err pg_store_list_endpoint_minutes(struct store *base, const char *service, int64_t from_ms,
                                       int64_t to_ms, store_endpoint_minute_cb cb, void *ud)
{
    struct pg_store *st = pg_store_of(base);
    if (!service || !cb)
        return SKP_EINVAL;
    skp_err err = pg__ready(st);
    if (err)
        return err;
    struct pg_params p = {0};
    pgp_text(&p, service);
    pgp_int(&p, from_ms);
    pgp_int(&p, to_ms);
    PGresult *r =
        pg__exec(st,
                 "SELECT service, endpoint, instance, minute_ms, count, errors, hist, "
                 "writer FROM endpoint_minutes WHERE md5(service) = md5($1) AND service = $1 AND "
                 "minute_ms >= $2 AND minute_ms < $3 "
                 "ORDER BY endpoint COLLATE \"C\", instance COLLATE \"C\", minute_ms, writer",
                 &p, &err, "list endpoint minutes");
    pgp_free(&p);
    if (!r)
        return err;
    int rows = PQntuples(r);
    for (int i = 0; i < rows && !err; i++) {
        uint8_t *hist = NULL;
        size_t hist_len = 0;
        err = pg_bytea_decode(pg__txt(r, i, 6), &hist, &hist_len);
        if (err)
            break;
        struct store_endpoint_minute m = {
            .service = pg__txt(r, i, 0),
            .endpoint = pg__txt(r, i, 1),
            .instance = pg__txt(r, i, 2),
            .minute_ms = pg__i64(r, i, 3),
            .count = (uint64_t)pg__i64(r, i, 4),
            .errors = (uint64_t)pg__i64(r, i, 5),
            .hist = hist,
            .hist_len = hist_len,
            .writer = (uint64_t)pg__i64(r, i, 7),
        };
        err = cb(ud, &m);
        skpx_free(hist);
    }
    PQclear(r);
    return err;
}
