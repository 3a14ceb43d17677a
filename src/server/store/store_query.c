/* store_query.c - store_query.h: a statement's parameters, and the statements forwarded to the
 * backend's query ops. */
#include "server/store/store_query.h"

#include <string.h>

#include "server/store/store_backend.h"

void store_param_text(struct store_params *p, const char *s)
{
    if (p->n == STORE_MAX_PARAMS) {
        p->over = true;
        return;
    }
    p->v[p->n++] = (struct store_param){false, 0, s};
}

void store_param_int(struct store_params *p, int64_t v)
{
    if (p->n == STORE_MAX_PARAMS) {
        p->over = true;
        return;
    }
    p->v[p->n++] = (struct store_param){true, v, NULL};
}

skp_err store_query_each(struct store *st, const struct store_sql *q, const struct store_params *p,
                         const struct store_row_desc *d, const struct store_visit *v)
{
    if (p && p->over)
        return SKP_EINVAL;
    return st->ops->query_each(st, q, p, d, v);
}

skp_err store_query_one(struct store *st, const struct store_sql *q, const struct store_params *p,
                        const struct store_row_desc *d, void *out)
{
    if (p && p->over)
        return SKP_EINVAL;
    return st->ops->query_one(st, q, p, d, out);
}

skp_err store_query_rows(struct store *st, const struct store_sql *q, const struct store_params *p,
                         const struct store_row_desc *d, void *parray, size_t *n)
{
    void *rows = NULL;
    *n = 0;
    skp_err err = p && p->over ? SKP_EINVAL : st->ops->query_rows(st, q, p, d, &rows, n);
    memcpy(parray, &rows, sizeof(rows)); /* a T * is not read or written as a void * */
    return err;
}

skp_err store_query_done(struct store *st, const struct store_sql *q, const struct store_params *p,
                         int64_t *changed)
{
    if (changed)
        *changed = 0;
    if (p && p->over)
        return SKP_EINVAL;
    return st->ops->query_done(st, q, p, changed);
}

skp_err store_query_insert(struct store *st, const struct store_sql *q,
                           const struct store_row_desc *d, const void *row)
{
    return st->ops->query_insert(st, q, d, row);
}

skp_err store_query_insert_rows(struct store *st, const struct store_sql *q,
                                const struct store_row_desc *d, const void *rows, size_t n,
                                const struct store_params *after)
{
    if (after && after->over)
        return SKP_EINVAL;
    const struct store_row_batch b = {d, rows, n, after};
    return st->ops->query_insert_rows(st, q, &b);
}
