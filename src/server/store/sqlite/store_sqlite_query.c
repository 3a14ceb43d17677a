/* store_sqlite_query.c - SQLite's execute primitives behind store_query.h: a statement's SQLite
 * text run through store__query_each / _done, store__insert_row and store__insert_rows. */
#include "server/store/store_query.h"

#include "server/store/sqlite/store_int.h"

skp_err sqlite_store_query_each(struct store *base, const struct store_sql *q,
                                const struct store_params *p, const struct store_row_desc *d,
                                const struct store_visit *v)
{
    return store__query_each(sqlite_store_of(base), q->sqlite, p, d, v, q->what);
}

skp_err sqlite_store_query_one(struct store *base, const struct store_sql *q,
                               const struct store_params *p, const struct store_row_desc *d,
                               void *out)
{
    return store__query_one(sqlite_store_of(base), q->sqlite, p, d, out, q->what);
}

skp_err sqlite_store_query_rows(struct store *base, const struct store_sql *q,
                                const struct store_params *p, const struct store_row_desc *d,
                                void **out, size_t *n)
{
    return store__query_rows(sqlite_store_of(base), q->sqlite, p, d, out, n, q->what);
}

skp_err sqlite_store_query_done(struct store *base, const struct store_sql *q,
                                const struct store_params *p, int64_t *changed)
{
    return store__query_done(sqlite_store_of(base), q->sqlite, p, changed, q->what);
}

skp_err sqlite_store_query_insert(struct store *base, const struct store_sql *q,
                                  const struct store_row_desc *d, const void *row)
{
    return store__insert_row(sqlite_store_of(base), q->sqlite, d, row, NULL, q->what);
}

static void bind_batch_row(sqlite3_stmt *s, size_t i, const void *rows)
{
    const struct store_row_batch *b = rows;
    store__bind_params(s, store__bind_row(s, 1, b->d, store_row_batch_at(b, i)), b->after);
}

skp_err sqlite_store_query_insert_rows(struct store *base, const struct store_sql *q,
                                       const struct store_row_batch *b)
{
    return store__insert_rows(sqlite_store_of(base), q->sqlite, b->n, bind_batch_row, b, q->what);
}
