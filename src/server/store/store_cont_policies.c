/* store_cont_policies.c - store_continuous.h's policies for both backends: table
 * continuous_policies (one row per service; each backend's schema step), written once over the
 * statements of store_query.h with their SQLite and PostgreSQL text side by side. */
#include "server/store/store_continuous.h"

#include "server/store/store_backend.h"
#include "server/store/store_query.h"
#include "server/store/store_rows.h"

static const struct store_sql put_policy = {
    .sqlite = "INSERT OR REPLACE INTO continuous_policies(" STORE_CONT_POLICY_COLS ") "
              "VALUES(" STORE_CONT_POLICY_SQ ")",
    .pg = "INSERT INTO continuous_policies(" STORE_CONT_POLICY_COLS ") "
          "VALUES(" STORE_CONT_POLICY_PG ") ON CONFLICT (service) DO UPDATE SET "
          "uuid = excluded.uuid, json = excluded.json, updated_ms = excluded.updated_ms",
    .what = "put continuous policy",
};

skp_err store_cont_put_policy(struct store *st, const char *service, const char *uuid,
                              const char *json, int64_t now_ms)
{
    const struct store_cont_policy_row row = {service, uuid, json, now_ms};
    return store_query_insert(st, &put_policy, &store_cont_policy_row, &row);
}

static const struct store_sql delete_policy = {
    .sqlite = "DELETE FROM continuous_policies WHERE service = ?1",
    .pg = "DELETE FROM continuous_policies WHERE service = $1",
    .what = "delete continuous policy",
};

skp_err store_cont_delete_policy(struct store *st, const char *service)
{
    struct store_params p = {0};
    store_param_text(&p, service);
    int64_t changed = 0;
    skp_err err = store_query_done(st, &delete_policy, &p, &changed);
    return !err && changed == 0 ? SKP_ENOTFOUND : err;
}

static const struct store_sql list_policies = {
    .sqlite = "SELECT " STORE_CONT_POLICY_READ " FROM continuous_policies "
              "WHERE ?1 IS NULL OR service = ?1 ORDER BY service",
    .pg = "SELECT " STORE_CONT_POLICY_READ " FROM continuous_policies "
          "WHERE $1::text IS NULL OR service = $1 ORDER BY service COLLATE \"C\"",
    .what = "list continuous policies",
};

skp_err store_cont_list_policies(struct store *st, const char *service, store_cont_policy_cb cb,
                                 void *ud)
{
    struct store_params p = {0};
    store_param_text(&p, service);
    return store_query_each(st, &list_policies, &p, &store_cont_policy_row,
                            &STORE_VISIT(cont_policy, cb, ud));
}
