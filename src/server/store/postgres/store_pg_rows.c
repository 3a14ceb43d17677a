/* store_pg_rows.c - PostgreSQL side of the row descriptions (store_rows.h): one function binds
 * a row's columns as text parameters, one reads a result row's text values into the struct. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "server/store/postgres/store_pg_bytea.h"
#include "server/store/postgres/store_pg_int.h"

void pgp_row(struct pg_params *p, const struct store_row_desc *d, const void *row)
{
    for (size_t i = 0; i < d->n_cols; i++) {
        const struct store_col *c = &d->cols[i];
        if (c->flags & STORE_COL_READ)
            continue;
        switch (c->type) {
        case STORE_COL_TEXT:
            pgp_text(p, store_col_text(c, row));
            break;
        case STORE_COL_BOOL:
            pgp_text(p, store_col_int(c, row) ? "true" : "false");
            break;
        case STORE_COL_NAME:
            pgp_text(p, store_col_name_of(c, store_col_int(c, row)));
            break;
        case STORE_COL_DOUBLE: {
            char num[40];
            snprintf(num, sizeof(num), "%.17g", store_col_double(c, row));
            pgp_owned(p, skpx_strdup(num));
            break;
        }
        case STORE_COL_BLOB: {
            const uint8_t *b;
            size_t len;
            memcpy(&b, store_col_cfield(c, row), sizeof(b));
            memcpy(&len, (const char *)row + c->len_off, sizeof(len));
            pgp_owned(p, pg_bytea_hex(b, len));
            break;
        }
        default:
            pgp_int(p, store_col_int(c, row));
            break;
        }
    }
}

/* A text or blob column's value: borrowed from r, or copied when own. */
static skp_err read_bytes(PGresult *r, int i, int col, const struct store_col *c, void *out,
                          bool own)
{
    void *f = store_col_field(c, out);
    if (pg__null(r, i, col) && (c->flags & STORE_COL_NULLABLE))
        return SKP_OK; /* the field stays NULL */
    char *v = PQgetvalue(r, i, col);
    if (c->type == STORE_COL_TEXT) {
        char *t = own ? skpx_strdup(v) : v;
        memcpy(f, &t, sizeof(t));
        return t ? SKP_OK : SKP_ENOMEM;
    }
    uint8_t *b = NULL;
    size_t len = 0;
    if (own) {
        skp_err err = pg_bytea_decode(v, &b, &len);
        if (err)
            return err;
    } else {
        len = pg__unhex(v); /* in place: a borrowed row is read once */
        if (len == SIZE_MAX)
            return SKP_EPROTO;
        b = (uint8_t *)v;
    }
    memcpy(f, &b, sizeof(b));
    memcpy((char *)out + c->len_off, &len, sizeof(len));
    return SKP_OK;
}

skp_err pg__read_row(PGresult *r, int i, int col0, const struct store_row_desc *d, void *out,
                     bool own)
{
    memset(out, 0, d->size);
    skp_err err = SKP_OK;
    for (size_t k = 0; k < d->n_cols && !err; k++) {
        const struct store_col *c = &d->cols[k];
        int col = col0 + (int)k;
        switch (c->type) {
        case STORE_COL_TEXT:
        case STORE_COL_BLOB:
            err = read_bytes(r, i, col, c, out, own);
            break;
        case STORE_COL_BOOL:
            store_col_set_int(c, out, pg__txt(r, i, col)[0] == 't');
            break;
        case STORE_COL_NAME:
            store_col_set_int(c, out, store_col_value_of(c, pg__txt(r, i, col)));
            break;
        case STORE_COL_DOUBLE:
            store_col_set_double(c, out, strtod(pg__txt(r, i, col), NULL));
            break;
        default:
            store_col_set_int(c, out, pg__i64(r, i, col));
            break;
        }
    }
    if (err && own)
        store_row_cleanup(d, out);
    return err;
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
