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
    struct sqlite_store *st = sqlite_store_of(base);
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(
        st, "UPDATE ui_templates SET disabled = 1, updated_ms = ?2 WHERE id = ?1", &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, now_ms);
    err = store__step_done(st, s, "disable template");
    sqlite3_finalize(s);
    if (!err && sqlite3_changes(st->db) == 0)
        err = SKP_ENOTFOUND;
    return err;
}

skp_err sqlite_store_list_templates(struct store *base, store_template_cb cb, void *ud)
{
    struct sqlite_store *st = sqlite_store_of(base);
    sqlite3_stmt *s = NULL;
    skp_err err =
        store__prepare(st, "SELECT " STORE_TEMPLATE_READ " FROM ui_templates ORDER BY id", &s);
    if (err)
        return err;
    return store__visit_rows(st, s, &store_template_row, &STORE_VISIT(template_row, cb, ud),
                             "list templates");
}
