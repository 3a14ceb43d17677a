/* store_query.h - a statement both backends run, so that a feature's store logic is written once
 * in store/ (e.g. store_ebpf.c) and each backend keeps only its SQL text and its execute
 * primitive. A statement is its SQL per backend (the same parameters in the same order: ?1.. in
 * SQLite, $1.. in PostgreSQL), the key parameters (struct store_params), the row description of
 * an insert's columns or of a select's result (store_rows.h), and for a select the visit that
 * gets each row. The functions below forward to the backend's ops (store_backend.h).
 *
 * Threading: like every store function, on the thread that owns `st`. */
#ifndef SKP_SERVER_STORE_QUERY_H
#define SKP_SERVER_STORE_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/store/store.h"
#include "server/store/store_rows.h"

/* A statement's SQL text for each backend, and what it does (for logs). */
struct store_sql {
    const char *sqlite;
    const char *pg;
    const char *what;
};

/* A statement's key parameters in order (a row's columns are bound by its description). */
#define STORE_MAX_PARAMS 8
struct store_params {
    int n;
    bool over; /* more than STORE_MAX_PARAMS were added */
    struct store_param {
        bool is_int;
        int64_t num;
        const char *text; /* borrowed: it outlives the statement; NULL: SQL NULL */
    } v[STORE_MAX_PARAMS];
};
void store_param_text(struct store_params *p, const char *s);
void store_param_int(struct store_params *p, int64_t v);

/* The rows of one insert_rows statement: n rows of description d, d->size apart from rows, each
 * bound followed by the parameters `after` (the same for every row; may be NULL). */
struct store_row_batch {
    const struct store_row_desc *d;
    const char *rows;
    size_t n;
    const struct store_params *after;
};
/* Row i of the batch. */
static inline const void *store_row_batch_at(const struct store_row_batch *b, size_t i)
{
    return b->rows + i * b->d->size;
}

/* Runs the select q with p (may be NULL): each row read by d (borrowed) and handed to v; the
 * first error stops the walk and is returned. Errors: SKP_EINVAL (p->over), SKP_EIO, SKP_ENOMEM,
 * v's. */
SKP_MUST_CHECK skp_err store_query_each(struct store *st, const struct store_sql *q,
                                        const struct store_params *p,
                                        const struct store_row_desc *d,
                                        const struct store_visit *v);
/* Runs the select q of at most one row with p: that row, owned, into out (d's struct; its
 * cleanup frees it); SKP_ENOTFOUND when none. Errors: SKP_EINVAL (p->over), SKP_EIO,
 * SKP_ENOMEM. */
SKP_MUST_CHECK skp_err store_query_one(struct store *st, const struct store_sql *q,
                                       const struct store_params *p, const struct store_row_desc *d,
                                       void *out);
/* Runs the select q with p: every row, owned, in one array of *n rows (skpx_free, each row d's
 * cleanup; NULL when none) stored at `parray`, the address of the caller's array pointer (of d's
 * struct, e.g. `&tasks`; written through memcpy, as skpx_grow does). Errors: SKP_EINVAL
 * (p->over), SKP_EIO, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err store_query_rows(struct store *st, const struct store_sql *q,
                                        const struct store_params *p,
                                        const struct store_row_desc *d, void *parray, size_t *n);
/* Runs q (no result rows) with p; *changed (may be NULL) gets the number of rows it changed.
 * Errors: SKP_EINVAL (p->over), SKP_EIO, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err store_query_done(struct store *st, const struct store_sql *q,
                                        const struct store_params *p, int64_t *changed);
/* Runs the insert q once with row's bound columns (d) as its parameters.
 * Errors: SKP_EEXIST (SQLite: a constraint refused the row), SKP_EIO, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err store_query_insert(struct store *st, const struct store_sql *q,
                                          const struct store_row_desc *d, const void *row);
/* Runs the insert q once for each of the n rows (d->size apart from rows), its parameters the
 * row's bound columns then `after` (the same for every row; may be NULL), in one transaction;
 * the first error rolls it back. Errors: SKP_EINVAL (after->over), SKP_EIO, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err store_query_insert_rows(struct store *st, const struct store_sql *q,
                                               const struct store_row_desc *d, const void *rows,
                                               size_t n, const struct store_params *after);

#endif
