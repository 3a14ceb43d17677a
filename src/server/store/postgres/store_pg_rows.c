/* store_pg_rows.c - PostgreSQL side of the row descriptions (store_rows.h): one function binds
 * a row's columns as text parameters, one reads a result row's text values into the struct. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "server/store/postgres/store_pg_bytea.h"
#include "server/store/postgres/store_pg_int.h"

/* ---- parameters: text values ---- */

static void put_text(void *ctx, const char *v)
{
    pgp_text(ctx, v);
}

static void put_int64(void *ctx, int64_t v)
{
    pgp_int(ctx, v);
}

static void put_double(void *ctx, double v)
{
    char num[40];
    snprintf(num, sizeof(num), "%.17g", v); /* enough digits to read back the same double */
    pgp_owned(ctx, skpx_strdup(num));
}

static void put_bool(void *ctx, bool v)
{
    pgp_text(ctx, v ? "true" : "false");
}

static void put_blob(void *ctx, const uint8_t *p, size_t n)
{
    pgp_owned(ctx, pg_bytea_hex(p, n));
}

void pgp_row(struct pg_params *p, const struct store_row_desc *d, const void *row)
{
    const struct store_row_sink sink = {p, put_text, put_int64, put_double, put_bool, put_blob};
    store_row_bind(d, row, &sink);
}

/* ---- results: text values of one row ---- */

struct result_row {
    PGresult *r;
    int i;
};

static bool val_null(void *ctx, int col)
{
    const struct result_row *x = ctx;
    return pg__null(x->r, x->i, col);
}

static const char *val_text(void *ctx, int col)
{
    const struct result_row *x = ctx;
    return pg__txt(x->r, x->i, col);
}

static int64_t val_int64(void *ctx, int col)
{
    const struct result_row *x = ctx;
    return pg__i64(x->r, x->i, col);
}

static double val_double(void *ctx, int col)
{
    return strtod(val_text(ctx, col), NULL);
}

static bool val_bool(void *ctx, int col)
{
    return val_text(ctx, col)[0] == 't';
}

/* A bytea in hex text: decoded into a copy (own), else in place (a borrowed row is read once). */
static skp_err val_blob(void *ctx, int col, bool own, const uint8_t **p, size_t *n)
{
    const struct result_row *x = ctx;
    char *v = PQgetvalue(x->r, x->i, col);
    if (own)
        return pg_bytea_decode(v, (uint8_t **)p, n);
    size_t len = pg__unhex(v);
    if (len == SIZE_MAX)
        return SKP_EPROTO;
    *p = (const uint8_t *)v;
    *n = len;
    return SKP_OK;
}

skp_err pg__read_row(PGresult *r, int i, int col0, const struct store_row_desc *d, void *out,
                     bool own)
{
    struct result_row x = {r, i};
    const struct store_row_src src = {&x,         val_null, val_text, val_int64,
                                      val_double, val_bool, val_blob};
    return store_row_read(d, &src, col0, out, own);
}

skp_err pg__read_rows(PGresult *r, const struct store_row_desc *d, void **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    size_t rows = (size_t)PQntuples(r);
    if (rows == 0)
        return SKP_OK;
    char *v = skpx_calloc(rows, d->size);
    if (!v)
        return SKP_ENOMEM;
    skp_err err = SKP_OK;
    size_t got = 0;
    for (; got < rows && !err; got++)
        err = pg__read_row(r, (int)got, 0, d, v + got * d->size, true);
    if (err) {
        for (size_t i = 0; i + 1 < got; i++)
            store_row_cleanup(d, v + i * d->size);
        skpx_free(v);
        return err;
    }
    *out = v;
    *n = rows;
    return SKP_OK;
}

PGresult *pg__query(struct pg_store *st, const char *sql, struct pg_params *p, skp_err *err,
                    const char *what)
{
    PGresult *r = NULL;
    if (!st->in_tx)
        *err = pg__ready(st);
    if (st->in_tx || !*err)
        r = pg__exec(st, sql, p, err, what);
    if (p)
        pgp_free(p);
    return r;
}

int64_t pg__query_id(struct pg_store *st, const char *sql, struct pg_params *p, skp_err *err,
                     const char *what)
{
    PGresult *r = pg__query(st, sql, p, err, what);
    int64_t id = 0;
    if (r && PQntuples(r) == 1)
        id = pg__i64(r, 0, 0);
    else if (r)
        *err = SKP_EIO;
    PQclear(r);
    return id;
}

skp_err pg__query_rows(struct pg_store *st, const char *sql, struct pg_params *p,
                       const struct store_row_desc *d, void **out, size_t *n, const char *what)
{
    *out = NULL;
    *n = 0;
    skp_err err = SKP_OK;
    PGresult *r = pg__query(st, sql, p, &err, what);
    if (!r)
        return err;
    err = pg__read_rows(r, d, out, n);
    PQclear(r);
    return err;
}

skp_err pg__insert_row(struct pg_store *st, const char *sql, const struct store_row_desc *d,
                       const void *row, const char *what)
{
    struct pg_params p = {0};
    pgp_row(&p, d, row);
    skp_err err = SKP_OK;
    PQclear(pg__query(st, sql, &p, &err, what));
    return err;
}

skp_err pg__cancel(struct pg_store *st, const char *update, const char *exists, const char *id,
                   struct pg_params *p, bool counted, const char *what)
{
    skp_err err = SKP_OK;
    PGresult *r = pg__query(st, update, p, &err, what);
    if (!r)
        return err;
    bool done = strcmp(PQcmdTuples(r), "1") == 0;
    PQclear(r);
    st->commits += counted;
    if (done)
        return SKP_OK;
    struct pg_params q = {0};
    pgp_text(&q, id);
    r = pg__query(st, exists, &q, &err, what);
    if (!r)
        return err;
    err = PQntuples(r) ? SKP_ESTATE : SKP_ENOTFOUND;
    PQclear(r);
    return err;
}

skp_err pg__query_one(struct pg_store *st, const char *sql, struct pg_params *p,
                      const struct store_row_desc *d, void *out, const char *what)
{
    skp_err err = SKP_OK;
    PGresult *r = pg__query(st, sql, p, &err, what);
    if (!r)
        return err;
    err = PQntuples(r) ? pg__read_row(r, 0, 0, d, out, true) : SKP_ENOTFOUND;
    PQclear(r);
    return err;
}

skp_err pg__query_each(struct pg_store *st, const char *sql, struct pg_params *p,
                       const struct store_row_desc *d, const struct store_visit *v,
                       const char *what)
{
    _Alignas(max_align_t) char row[STORE_ROW_MAX];
    skp_err err = SKP_OK;
    PGresult *r = pg__query(st, sql, p, &err, what);
    if (!r)
        return err;
    if (d->size > sizeof(row))
        err = SKP_EINVAL;
    for (int i = 0; i < PQntuples(r) && !err; i++) {
        err = pg__read_row(r, i, 0, d, row, false);
        if (!err)
            err = v->call(v, row);
    }
    PQclear(r);
    return err;
}
