/* store_services.c - store.h's listings of services and of a service's instances for both
 * backends (tables services and instances), written once over the statements of store_query.h
 * with their SQLite and PostgreSQL text side by side. The writes (the upserts of an agent's
 * heartbeat and report) stay in each backend's registry file. PostgreSQL orders texts with
 * COLLATE "C": the same byte order as SQLite's, whatever the database's collation. */
#include "server/store/store.h"

#include "server/store/store_query.h"
#include "server/store/store_rows.h"

static const struct store_sql list_services = {
    .sqlite = "SELECT " STORE_SERVICE_READ " FROM services s ORDER BY s.name",
    .pg = "SELECT " STORE_SERVICE_READ " FROM services s ORDER BY s.name COLLATE \"C\"",
    .what = "list services",
};

skp_err store_list_services(struct store *st, store_service_cb cb, void *ud)
{
    if (!cb)
        return SKP_EINVAL;
    return store_query_each(st, &list_services, NULL, &store_service_row,
                            &STORE_VISIT(service, cb, ud));
}

static const struct store_sql find_service = {
    .sqlite = "SELECT name FROM services WHERE name = ?1",
    .pg = "SELECT name FROM services WHERE name = $1",
    .what = "find service",
};

/* Properties are a JSON object text written by store_upsert_instance. */
static const struct store_sql list_instances = {
    .sqlite = "SELECT " STORE_INSTANCE_READ " FROM instances i WHERE i.service_id = "
              "(SELECT id FROM services WHERE name = ?1) ORDER BY i.name",
    .pg = "SELECT " STORE_INSTANCE_READ " FROM instances i WHERE i.service_id = "
          "(SELECT id FROM services WHERE name = $1) ORDER BY i.name COLLATE \"C\"",
    .what = "list instances",
};

skp_err store_list_instances(struct store *st, const char *service, store_instance_cb cb, void *ud)
{
    if (!service || !cb)
        return SKP_EINVAL;
    struct store_params p = {0};
    store_param_text(&p, service);
    char *name = NULL; /* a row of store_name_row: the service exists */
    skp_err err = store_query_one(st, &find_service, &p, &store_name_row, &name);
    if (err)
        return err;
    store_row_cleanup(&store_name_row, &name);
    return store_query_each(st, &list_instances, &p, &store_instance_text_row,
                            &STORE_VISIT(instance, cb, ud));
}
