/* store_sqlite_templates.c - SQLite table of dashboards (see store_templates.h): ui_templates
 * (its step of store_schema.c). */
#include "server/store/store_templates.h"

#include <string.h>

#include "server/store/sqlite/store_int.h"

skp_err sqlite_store_put_template(struct store *base, const char *id, const char *configuration,
                                  int64_t now_ms)
{
    struct sqlite_store *st = sqlite_store_of(base);
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st,
                                 "INSERT INTO ui_templates(id, configuration, disabled, updated_ms)"
                                 " VALUES(?1, ?2, 0, ?3) ON CONFLICT(id) DO UPDATE SET"
                                 " configuration = ?2, disabled = 0, updated_ms = ?3",
                                 &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, configuration, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, now_ms);
    err = store__step_done(st, s, "put template");
    sqlite3_finalize(s);
    return err;
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

struct visit {
    store_template_cb cb;
    void *ud;
};

static skp_err template_row(void *ud, sqlite3_stmt *s)
{
    struct visit *v = ud;
    const char *conf = (const char *)sqlite3_column_text(s, 1);
    struct store_template_row r = {
        .id = (const char *)sqlite3_column_text(s, 0),
        .configuration = conf ? conf : "",
        .disabled = sqlite3_column_int(s, 2) != 0,
        .updated_ms = sqlite3_column_int64(s, 3),
    };
    return r.id ? v->cb(v->ud, &r) : SKP_OK;
}

skp_err sqlite_store_list_templates(struct store *base, store_template_cb cb, void *ud)
{
    struct sqlite_store *st = sqlite_store_of(base);
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(
        st, "SELECT id, configuration, disabled, updated_ms FROM ui_templates ORDER BY id", &s);
    if (err)
        return err;
    struct visit v = {cb, ud};
    err = store__each_row(st, s, template_row, &v, "list templates");
    sqlite3_finalize(s);
    return err;
}
