/* store_sqlite_templates.c - SQLite table of dashboards (see store_templates.h): ui_templates
 * (its step of store_schema.c). */
#include "server/store/store_templates.h"

#include <string.h>

#include "server/store/sqlite/store_int.h"

skp_err sqlite_store_put_template(struct store *base, const char *id, const char *configuration,
                                  int64_t now_ms)
{
    const struct store_template_row row = {id, configuration, false, now_ms};
    return store__insert_row(sqlite_store_of(base),
                             "INSERT INTO ui_templates(" STORE_TEMPLATE_COLS ") "
                             "VALUES(" STORE_TEMPLATE_SQ ") ON CONFLICT(id) DO UPDATE SET "
                             "configuration = excluded.configuration, disabled = 0, "
                             "updated_ms = excluded.updated_ms",
                             &store_template_row, &row, NULL, "put template");
}

skp_err sqlite_store_disable_template(struct store *base, const char *id, int64_t now_ms)
{
    struct store_params p = {0};
    store_param_text(&p, id);
    store_param_int(&p, now_ms);
    int64_t changed = 0;
    skp_err err = store__query_done(sqlite_store_of(base),
                                    "UPDATE ui_templates SET disabled = 1, updated_ms = ?2 "
                                    "WHERE id = ?1",
                                    &p, &changed, "disable template");
    return !err && changed == 0 ? SKP_ENOTFOUND : err;
}

skp_err sqlite_store_list_templates(struct store *base, store_template_cb cb, void *ud)
{
    return store__query_each(
        sqlite_store_of(base), "SELECT " STORE_TEMPLATE_READ " FROM ui_templates ORDER BY id", NULL,
        &store_template_row, &STORE_VISIT(template_row, cb, ud), "list templates");
}
