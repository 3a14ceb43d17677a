/* store_sqlite_rows.c - SQLite side of the row descriptions (store_rows.h): one function binds
 * a row's columns as a statement's parameters, one reads a result row into the struct. */
#include <stddef.h>
#include <string.h>

#include "common/alloc.h"
#include "common/grow.h"
#include "server/store/sqlite/store_int.h"

/* ---- parameters ---- */

struct bind_ctx {
    sqlite3_stmt *s;
    int k; /* the next parameter */
};

static void bind_text(void *ctx, const char *v)
{
    struct bind_ctx *b = ctx;
    int k = b->k++;
    if (v)
        sqlite3_bind_text(b->s, k, v, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(b->s, k);
}

static void bind_int64(void *ctx, int64_t v)
{
    struct bind_ctx *b = ctx;
    sqlite3_bind_int64(b->s, b->k++, v);
}

static void bind_double(void *ctx, double v)
{
    struct bind_ctx *b = ctx;
    sqlite3_bind_double(b->s, b->k++, v);
}

static void bind_bool(void *ctx, bool v)
{
    bind_int64(ctx, v ? 1 : 0);
}

static void bind_blob(void *ctx, const uint8_t *p, size_t n)
{
    struct bind_ctx *b = ctx;
    int k = b->k++;
    if (n) /* an empty blob, not NULL */
        sqlite3_bind_blob64(b->s, k, p, n, SQLITE_STATIC);
    else
        sqlite3_bind_zeroblob(b->s, k, 0);
}

int store__bind_row(sqlite3_stmt *s, int first, const struct store_row_desc *d, const void *row)
{
    struct bind_ctx b = {s, first};
    const struct store_row_sink sink = {&b,          bind_text, bind_int64,
                                        bind_double, bind_bool, bind_blob};
    store_row_bind(d, row, &sink);
    return b.k;
}

/* ---- results ---- */

static bool col_null(void *ctx, int col)
{
    return sqlite3_column_type(ctx, col) == SQLITE_NULL;
}

static const char *col_text(void *ctx, int col)
{
    return store__col_text(ctx, col);
}

static int64_t col_int64(void *ctx, int col)
{
    return sqlite3_column_int64(ctx, col);
}

static double col_double(void *ctx, int col)
{
    return sqlite3_column_double(ctx, col);
}

static bool col_bool(void *ctx, int col)
{
    return sqlite3_column_int64(ctx, col) != 0;
}

static skp_err col_blob(void *ctx, int col, bool own, const uint8_t **p, size_t *n)
{
    const uint8_t *b = sqlite3_column_blob(ctx, col);
    size_t len = (size_t)sqlite3_column_bytes(ctx, col);
    if (own) {
        uint8_t *copy = skpx_malloc(len ? len : 1);
        if (!copy)
            return SKP_ENOMEM;
        if (len)
            memcpy(copy, b, len);
        b = copy;
    }
    *p = b;
    *n = len;
    return SKP_OK;
}

skp_err store__read_row(sqlite3_stmt *s, int col0, const struct store_row_desc *d, void *out,
                        bool own)
{
    const struct store_row_src src = {s,          col_null, col_text, col_int64,
                                      col_double, col_bool, col_blob};
    return store_row_read(d, &src, col0, out, own);
}

skp_err store__read_one(struct sqlite_store *st, sqlite3_stmt *s, const struct store_row_desc *d,
                        void *out, const char *what)
{
    int rc = sqlite3_step(s);
    skp_err err;
    if (rc == SQLITE_ROW)
        err = store__read_row(s, 0, d, out, true);
    else if (rc == SQLITE_DONE)
        err = SKP_ENOTFOUND;
    else
        err = store__sqlerr(st, rc, what);
    sqlite3_finalize(s);
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

void store__bind_params(sqlite3_stmt *s, int first, const struct store_params *p)
{
    for (int i = 0; p && i < p->n; i++) {
        const struct store_param *v = &p->v[i];
        if (v->is_int)
            sqlite3_bind_int64(s, first + i, v->num);
        else if (v->text)
            sqlite3_bind_text(s, first + i, v->text, -1, SQLITE_STATIC);
        /* else: unbound, NULL */
    }
}

skp_err store__prepare_with(struct sqlite_store *st, const char *sql, const struct store_params *p,
                            sqlite3_stmt **out)
{
    *out = NULL;
    if (p && p->over)
        return SKP_EINVAL;
    skp_err err = store__prepare(st, sql, out);
    if (!err)
        store__bind_params(*out, 1, p);
    return err;
}

skp_err store__query_one(struct sqlite_store *st, const char *sql, const struct store_params *p,
                         const struct store_row_desc *d, void *out, const char *what)
{
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare_with(st, sql, p, &s);
    return err ? err : store__read_one(st, s, d, out, what);
}

skp_err store__query_rows(struct sqlite_store *st, const char *sql, const struct store_params *p,
                          const struct store_row_desc *d, void **out, size_t *n, const char *what)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare_with(st, sql, p, &s);
    return err ? err : store__read_rows(st, s, d, out, n, what);
}

skp_err store__query_each(struct sqlite_store *st, const char *sql, const struct store_params *p,
                          const struct store_row_desc *d, const struct store_visit *v,
                          const char *what)
{
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare_with(st, sql, p, &s);
    return err ? err : store__visit_rows(st, s, d, v, what);
}

skp_err store__query_done(struct sqlite_store *st, const char *sql, const struct store_params *p,
                          int64_t *changes, const char *what)
{
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare_with(st, sql, p, &s);
    if (err)
        return err;
    int rc = sqlite3_step(s);
    if (rc != SQLITE_DONE)
        err = store__sqlerr(st, rc, what);
    else if (changes)
        *changes = sqlite3_changes(st->db);
    sqlite3_finalize(s);
    return err;
}

skp_err store__query_exists(struct sqlite_store *st, const char *sql, const struct store_params *p,
                            bool *found, const char *what)
{
    *found = false;
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare_with(st, sql, p, &s);
    if (err)
        return err;
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        *found = true;
    else if (rc != SQLITE_DONE)
        err = store__sqlerr(st, rc, what);
    sqlite3_finalize(s);
    return err;
}

skp_err store__cancel(struct sqlite_store *st, const char *update, const char *exists,
                      const struct store_params *p, const char *what)
{
    int64_t changed = 0;
    skp_err err = store__query_done(st, update, p, &changed, what);
    if (err)
        return err;
    st->commits++;
    if (changed == 1)
        return SKP_OK;
    struct store_params id = {0};
    store_param_text(&id, p->v[0].text);
    bool found = false;
    err = store__query_exists(st, exists, &id, &found, what);
    return err ? err : found ? SKP_ESTATE : SKP_ENOTFOUND;
}

skp_err store__insert_row(struct sqlite_store *st, const char *sql, const struct store_row_desc *d,
                          const void *row, int64_t *rowid, const char *what)
{
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st, sql, &s);
    if (err)
        return err;
    store__bind_row(s, 1, d, row);
    int rc = sqlite3_step(s);
    if ((rc & 0xff) == SQLITE_CONSTRAINT) /* extended codes (e.g. _PRIMARYKEY) included */
        err = SKP_EEXIST;
    else if (rc != SQLITE_DONE)
        err = store__sqlerr(st, rc, what);
    else if (rowid)
        *rowid = sqlite3_last_insert_rowid(st->db);
    sqlite3_finalize(s);
    return err;
}
