/* store_sqlite_rows.c - SQLite side of the row descriptions (store_rows.h): one function binds
 * a row's columns as a statement's parameters, one reads a result row into the struct. */
#include <stddef.h>
#include <string.h>

#include "common/alloc.h"
#include "common/grow.h"
#include "server/store/sqlite/store_int.h"

int store__bind_row(sqlite3_stmt *s, int first, const struct store_row_desc *d, const void *row)
{
    int k = first;
    for (size_t i = 0; i < d->n_cols; i++) {
        const struct store_col *c = &d->cols[i];
        if (c->flags & STORE_COL_READ)
            continue;
        switch (c->type) {
        case STORE_COL_TEXT: {
            const char *t = store_col_text(c, row);
            if (t)
                sqlite3_bind_text(s, k, t, -1, SQLITE_STATIC);
            else
                sqlite3_bind_null(s, k);
            break;
        }
        case STORE_COL_NAME:
            sqlite3_bind_text(s, k, store_col_name_of(c, store_col_int(c, row)), -1, SQLITE_STATIC);
            break;
        case STORE_COL_DOUBLE:
            sqlite3_bind_double(s, k, store_col_double(c, row));
            break;
        case STORE_COL_BLOB: {
            const uint8_t *b;
            size_t len;
            memcpy(&b, store_col_cfield(c, row), sizeof(b));
            memcpy(&len, (const char *)row + c->len_off, sizeof(len));
            if (len)
                sqlite3_bind_blob64(s, k, b, len, SQLITE_STATIC);
            else
                sqlite3_bind_zeroblob(s, k, 0);
            break;
        }
        default:
            sqlite3_bind_int64(s, k, store_col_int(c, row));
            break;
        }
        k++;
    }
    return k;
}

/* A text or blob column's value: borrowed from the statement's row, or copied when own. */
static skp_err read_bytes(sqlite3_stmt *s, int col, const struct store_col *c, void *out, bool own)
{
    void *f = store_col_field(c, out);
    if (sqlite3_column_type(s, col) == SQLITE_NULL && (c->flags & STORE_COL_NULLABLE))
        return SKP_OK; /* the field stays NULL */
    if (c->type == STORE_COL_TEXT) {
        const char *v = store__col_text(s, col);
        const char *t = own ? skpx_strdup(v) : v;
        memcpy(f, &t, sizeof(t));
        return t ? SKP_OK : SKP_ENOMEM;
    }
    const void *b = sqlite3_column_blob(s, col);
    size_t len = (size_t)sqlite3_column_bytes(s, col);
    if (own) {
        void *copy = skpx_malloc(len ? len : 1);
        if (!copy)
            return SKP_ENOMEM;
        if (len)
            memcpy(copy, b, len);
        b = copy;
    }
    memcpy(f, &b, sizeof(b));
    memcpy((char *)out + c->len_off, &len, sizeof(len));
    return SKP_OK;
}

skp_err store__read_row(sqlite3_stmt *s, int col0, const struct store_row_desc *d, void *out,
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
            err = read_bytes(s, col, c, out, own);
            break;
        case STORE_COL_NAME:
            store_col_set_int(c, out, store_col_value_of(c, store__col_text(s, col)));
            break;
        case STORE_COL_DOUBLE:
            store_col_set_double(c, out, sqlite3_column_double(s, col));
            break;
        default:
            store_col_set_int(c, out, sqlite3_column_int64(s, col));
            break;
        }
    }
    if (err && own)
        store_row_cleanup(d, out);
    return err;
}

struct rows_acc {
    const struct store_row_desc *d;
    char *v;
    size_t n, cap;
};

static skp_err push_row(void *ud, sqlite3_stmt *s)
{
    struct rows_acc *a = ud;
    if (skpx_grow(&a->v, &a->cap, a->n + 1, a->d->size, 4))
        return SKP_ENOMEM;
    skp_err err = store__read_row(s, 0, a->d, a->v + a->n * a->d->size, true);
    if (!err)
        a->n++;
    return err;
}

skp_err store__read_rows(struct sqlite_store *st, sqlite3_stmt *s, const struct store_row_desc *d,
                         void **out, size_t *n, const char *what)
{
    struct rows_acc a = {d, NULL, 0, 0};
    skp_err err = store__each_row(st, s, push_row, &a, what);
    sqlite3_finalize(s);
    if (err) {
        for (size_t i = 0; i < a.n; i++)
            store_row_cleanup(d, a.v + i * d->size);
        skpx_free(a.v);
        *out = NULL;
        *n = 0;
        return err;
    }
    *out = a.v;
    *n = a.n;
    return SKP_OK;
}

struct visit_acc {
    const struct store_row_desc *d;
    const struct store_visit *v;
    void *row;
};

static skp_err visit_row(void *ud, sqlite3_stmt *s)
{
    const struct visit_acc *a = ud;
    skp_err err = store__read_row(s, 0, a->d, a->row, false);
    return err ? err : a->v->call(a->v, a->row);
}

skp_err store__visit_rows(struct sqlite_store *st, sqlite3_stmt *s, const struct store_row_desc *d,
                          const struct store_visit *v, const char *what)
{
    _Alignas(max_align_t) char row[STORE_ROW_MAX];
    skp_err err = SKP_EINVAL;
    if (d->size <= sizeof(row)) {
        struct visit_acc a = {d, v, row};
        err = store__each_row(st, s, visit_row, &a, what);
    }
    sqlite3_finalize(s);
    return err;
}
