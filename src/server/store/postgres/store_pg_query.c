/* store_pg_query.c - PostgreSQL's execute primitives behind store_query.h: a statement's
 * PostgreSQL text run through pg__query_each, pg__query, pg__insert_row and pg__insert_rows, its
 * key parameters added as text values. */
#include "server/store/store_query.h"

#include <stdlib.h>

#include "server/store/postgres/store_pg_int.h"

/* Adds the values of q (may be NULL) to p, in order; returns p. (store_query.c refuses a q
 * that is over its bound before a backend sees it.) */
static struct pg_params *add_params(struct pg_params *p, const struct store_params *q)
{
    for (int i = 0; q && i < q->n; i++) {
        if (q->v[i].is_int)
            pgp_int(p, q->v[i].num);
        else
            pgp_text(p, q->v[i].text);
    }
    return p;
}

skp_err pg_store_query_each(struct store *base, const struct store_sql *q,
                            const struct store_params *p, const struct store_row_desc *d,
                            const struct store_visit *v)
{
    struct pg_params pp = {0};
    return pg__query_each(pg_store_of(base), q->pg, add_params(&pp, p), d, v, q->what);
}

skp_err pg_store_query_one(struct store *base, const struct store_sql *q,
                           const struct store_params *p, const struct store_row_desc *d, void *out)
{
    struct pg_params pp = {0};
    return pg__query_one(pg_store_of(base), q->pg, add_params(&pp, p), d, out, q->what);
}

skp_err pg_store_query_rows(struct store *base, const struct store_sql *q,
                            const struct store_params *p, const struct store_row_desc *d,
                            void **out, size_t *n)
{
    struct pg_params pp = {0};
    return pg__query_rows(pg_store_of(base), q->pg, add_params(&pp, p), d, out, n, q->what);
}

skp_err pg_store_query_done(struct store *base, const struct store_sql *q,
                            const struct store_params *p, int64_t *changed)
{
    struct pg_params pp = {0};
    skp_err err = SKP_OK;
    PGresult *r = pg__query(pg_store_of(base), q->pg, add_params(&pp, p), &err, q->what);
    if (r && changed)
        *changed = strtoll(PQcmdTuples(r), NULL, 10);
    PQclear(r);
    return err;
}

skp_err pg_store_query_insert(struct store *base, const struct store_sql *q,
                              const struct store_row_desc *d, const void *row)
{
    return pg__insert_row(pg_store_of(base), q->pg, d, row, q->what);
}

static void bind_batch_row(struct pg_params *p, size_t i, const void *rows)
{
    const struct store_row_batch *b = rows;
    pgp_row(p, b->d, store_row_batch_at(b, i));
    add_params(p, b->after);
}

skp_err pg_store_query_insert_rows(struct store *base, const struct store_sql *q,
                                   const struct store_row_batch *b)
{
    return pg__insert_rows(pg_store_of(base), q->pg, b->n, bind_batch_row, b, q->what);
}
