/* store_pg_templates.c - PostgreSQL backend of store_templates.h: ui_templates (schema step of
 * store_pg_schema.c). Collectors sharing the database share the dashboards. */
#include "server/store/store_templates.h"

#include <string.h>

#include "server/store/postgres/store_pg_int.h"

skp_err pg_store_put_template(struct store *base, const char *id, const char *configuration,
                              int64_t now_ms)
{
    const struct store_template_row row = {id, configuration, false, now_ms};
    return pg__insert_row(pg_store_of(base),
                          "INSERT INTO ui_templates(" STORE_TEMPLATE_COLS ") "
                          "VALUES(" STORE_TEMPLATE_PG ") ON CONFLICT (id) DO UPDATE SET "
                          "configuration = excluded.configuration, disabled = false, "
                          "updated_ms = excluded.updated_ms",
                          &store_template_row, &row, "put template");
}

skp_err pg_store_disable_template(struct store *base, const char *id, int64_t now_ms)
{
    struct pg_params p = {0};
    pgp_text(&p, id);
    pgp_int(&p, now_ms);
    skp_err err = SKP_OK;
    PGresult *r = pg__query(
        pg_store_of(base), "UPDATE ui_templates SET disabled = true, updated_ms = $2 WHERE id = $1",
        &p, &err, "disable template");
    if (r && strcmp(PQcmdTuples(r), "0") == 0)
        err = SKP_ENOTFOUND;
    PQclear(r);
    return err;
}

skp_err pg_store_list_templates(struct store *base, store_template_cb cb, void *ud)
{
    return pg__query_each(
        pg_store_of(base),
        "SELECT " STORE_TEMPLATE_READ " FROM ui_templates ORDER BY id COLLATE \"C\"", NULL,
        &store_template_row, &STORE_VISIT(template_row, cb, ud), "list templates");
}
