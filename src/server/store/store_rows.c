/* store_rows.c - the descriptions of the stored row types (store_rows.h) and the accessors the
 * backends' bind and read functions share. */
#include "server/store/store_rows.h"

#include <string.h>

#include "server/store/store.h"

/* Integer columns are read and written through their width: enums stored as numbers are int. */
_Static_assert(sizeof(int) == sizeof(int32_t), "STORE_COL_INT32 holds int fields");
_Static_assert(sizeof(enum store_task_op) == sizeof(int32_t), "enums are int");

size_t store_row_n_bound(const struct store_row_desc *d)
{
    size_t n = 0;
    for (size_t i = 0; i < d->n_cols; i++)
        n += !(d->cols[i].flags & STORE_COL_READ);
    return n;
}

int64_t store_col_int(const struct store_col *c, const void *row)
{
    const void *f = store_col_cfield(c, row);
    switch (c->type) {
    case STORE_COL_INT64: {
        int64_t v;
        memcpy(&v, f, sizeof(v));
        return v;
    }
    case STORE_COL_INT32:
    case STORE_COL_NAME: {
        int32_t v;
        memcpy(&v, f, sizeof(v));
        return v;
    }
    case STORE_COL_BOOL:
        return *(const bool *)f ? 1 : 0;
    default:
        return 0;
    }
}

void store_col_set_int(const struct store_col *c, void *row, int64_t v)
{
    void *f = store_col_field(c, row);
    switch (c->type) {
    case STORE_COL_INT64:
        memcpy(f, &v, sizeof(v));
        break;
    case STORE_COL_INT32:
    case STORE_COL_NAME: {
        int32_t w = (int32_t)v;
        memcpy(f, &w, sizeof(w));
        break;
    }
    case STORE_COL_BOOL:
        *(bool *)f = v != 0;
        break;
    default:
        break;
    }
}

const char *store_col_name_of(const struct store_col *c, int64_t v)
{
    return v >= 0 && v < c->n_names ? c->names[v] : c->names[0];
}

int64_t store_col_value_of(const struct store_col *c, const char *name)
{
    for (int i = 0; name && i < c->n_names; i++)
        if (strcmp(c->names[i], name) == 0)
            return i;
    return 0;
}

const char *store_col_text(const struct store_col *c, const void *row)
{
    const char *s;
    memcpy(&s, store_col_cfield(c, row), sizeof(s));
    return s || !(c->flags & STORE_COL_EMPTY) ? s : "";
}

/* ---- the descriptions ---- */

#define COL(st, field, ty, fl)                                                                     \
    {                                                                                              \
#field, ty, fl, offsetof(st, field), 0, NULL, 0                                            \
    }
#define COL_AS(name, st, field, ty, fl)                                                            \
    {                                                                                              \
        name, ty, fl, offsetof(st, field), 0, NULL, 0                                              \
    }
#define DESC(what, st, cleanup, cols)                                                              \
    {                                                                                              \
        what, sizeof(st), cleanup, cols, sizeof(cols) / sizeof(cols[0])                            \
    }

static void task_cleanup(void *row)
{
    store_task_cleanup(row);
}

static const struct store_col task_cols[] = {
    COL(struct store_task, id, STORE_COL_TEXT, 0),
    COL(struct store_task, service, STORE_COL_TEXT, 0),
    COL(struct store_task, endpoint, STORE_COL_TEXT, 0),
    COL(struct store_task, start_time, STORE_COL_INT64, 0),
    COL(struct store_task, duration_min, STORE_COL_INT32, 0),
    COL(struct store_task, min_duration_threshold, STORE_COL_INT32, 0),
    COL(struct store_task, dump_period, STORE_COL_INT32, 0),
    COL(struct store_task, max_sampling_count, STORE_COL_INT32, 0),
    COL(struct store_task, create_time, STORE_COL_INT64, 0),
    COL_AS("coalesce(cancelled_ms, 0)", struct store_task, cancelled_ms, STORE_COL_INT64,
           STORE_COL_READ),
};
const struct store_row_desc store_task_row =
    DESC("task", struct store_task, task_cleanup, task_cols);
