/* store_templates.c - store_templates.h for both backends: table ui_templates (each backend's
 * schema step), written once over the statements of store_query.h with their SQLite and
 * PostgreSQL text side by side. Collectors sharing a PostgreSQL database share the dashboards. */
#include "server/store/store_templates.h"

#include <string.h>

#include "server/store/store_backend.h"
#include "server/store/store_query.h"
#include "server/store/store_rows.h"

static const struct store_sql put_template = {
    .sqlite = "INSERT INTO ui_templates(" STORE_TEMPLATE_COLS ") "
              "VALUES(" STORE_TEMPLATE_SQ ") ON CONFLICT(id) DO UPDATE SET "
              "configuration = excluded.configuration, disabled = 0, "
              "updated_ms = excluded.updated_ms",
    .pg = "INSERT INTO ui_templates(" STORE_TEMPLATE_COLS ") "
          "VALUES(" STORE_TEMPLATE_PG ") ON CONFLICT (id) DO UPDATE SET "
          "configuration = excluded.configuration, disabled = false, "
          "updated_ms = excluded.updated_ms",
    .what = "put template",
};

skp_err store_put_template(struct store *st, const char *id, const char *configuration,
                           int64_t now_ms)
{
    if (!id || !configuration || strlen(configuration) > STORE_TEMPLATE_MAX_BYTES)
        return SKP_EINVAL;
    if (st->read_only)
        return SKP_EIO;
    const struct store_template_row row = {id, configuration, false, now_ms};
    return store_query_insert(st, &put_template, &store_template_row, &row);
}

static const struct store_sql disable_template = {
    .sqlite = "UPDATE ui_templates SET disabled = 1, updated_ms = ?2 WHERE id = ?1",
    .pg = "UPDATE ui_templates SET disabled = true, updated_ms = $2 WHERE id = $1",
    .what = "disable template",
};

skp_err store_disable_template(struct store *st, const char *id, int64_t now_ms)
{
    if (!id)
        return SKP_EINVAL;
    if (st->read_only)
        return SKP_EIO;
    struct store_params p = {0};
    store_param_text(&p, id);
    store_param_int(&p, now_ms);
    int64_t changed = 0;
    skp_err err = store_query_done(st, &disable_template, &p, &changed);
    return !err && changed == 0 ? SKP_ENOTFOUND : err;
}

static const struct store_sql list_templates = {
    .sqlite = "SELECT " STORE_TEMPLATE_READ " FROM ui_templates ORDER BY id",
    .pg = "SELECT " STORE_TEMPLATE_READ " FROM ui_templates ORDER BY id COLLATE \"C\"",
    .what = "list templates",
};

skp_err store_list_templates(struct store *st, store_template_cb cb, void *ud)
{
    return store_query_each(st, &list_templates, NULL, &store_template_row,
                            &STORE_VISIT(template_row, cb, ud));
}
