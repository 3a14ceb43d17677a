/* store_pg_templates.c - PostgreSQL backend of store_templates.h: ui_templates (schema step of
 * store_pg_schema.c). Collectors sharing the database share the dashboards. */
#include "server/store/store_templates.h"

#include <stdlib.h>
#include <string.h>

#include "server/store/postgres/store_pg_int.h"

skp_err pg_store_put_template(struct store *base, const char *id, const char *configuration,
                              int64_t now_ms)
{
    struct pg_params p = {0};
    pgp_text(&p, id);
    pgp_text(&p, configuration);
    pgp_int(&p, now_ms);
    skp_err err = SKP_OK;
    PQclear(pg__query(pg_store_of(base),
                      "INSERT INTO ui_templates(id, configuration, disabled, updated_ms) "
                      "VALUES($1, $2, false, $3) ON CONFLICT (id) DO UPDATE SET "
                      "configuration = excluded.configuration, disabled = false, "
                      "updated_ms = excluded.updated_ms",
                      &p, &err, "put template"));
    return err;
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
    skp_err err = SKP_OK;
    PGresult *r = pg__query(pg_store_of(base),
                            "SELECT id, configuration, disabled, updated_ms FROM ui_templates "
                            "ORDER BY id COLLATE \"C\"",
                            NULL, &err, "list templates");
    for (int i = 0; r && !err && i < PQntuples(r); i++) {
        struct store_template_row row = {
            .id = PQgetvalue(r, i, 0),
            .configuration = PQgetvalue(r, i, 1),
            .disabled = PQgetvalue(r, i, 2)[0] == 't',
            .updated_ms = strtoll(PQgetvalue(r, i, 3), NULL, 10),
        };
        err = cb(ud, &row);
    }
    PQclear(r);
    return err;
}
