/* store_tasks.c - store.h's reads of profile tasks and their logs for both backends (tables
 * tasks and task_logs), written once over the statements of store_query.h with their SQLite and
 * PostgreSQL text side by side. The writes (insert, cancel, the service lock, logs) stay in each
 * backend's registry file: they count commits and lock differently. PostgreSQL orders texts
 * with COLLATE "C": the same byte order as SQLite's, whatever the database's collation. */
#include "server/store/store.h"

#include <string.h>

#include "server/store/store_backend.h"
#include "server/store/store_query.h"
#include "server/store/store_rows.h"

static const struct store_sql get_task = {
    .sqlite = "SELECT " STORE_TASK_READ " FROM tasks WHERE id = ?1",
    .pg = "SELECT " STORE_TASK_READ " FROM tasks WHERE id = $1",
    .what = "read task",
};

skp_err store_get_task(struct store *st, const char *id, struct store_task *out)
{
    memset(out, 0, sizeof(*out));
    if (!id)
        return SKP_EINVAL;
    struct store_params p = {0};
    store_param_text(&p, id);
    return store_query_one(st, &get_task, &p, &store_task_row, out);
}

static const struct store_sql latest_task_before = {
    .sqlite = "SELECT " STORE_TASK_READ " FROM tasks WHERE service = ?1 AND "
              "start_time <= ?2 ORDER BY start_time DESC, create_time DESC LIMIT 1",
    .pg = "SELECT " STORE_TASK_READ " FROM tasks WHERE service = $1 AND "
          "start_time <= $2 ORDER BY start_time DESC, create_time DESC LIMIT 1",
    .what = "read task",
};

skp_err store_latest_task_before(struct store *st, const char *service, int64_t start_before,
                                 struct store_task *out)
{
    memset(out, 0, sizeof(*out));
    if (!service)
        return SKP_EINVAL;
    struct store_params p = {0};
    store_param_text(&p, service);
    store_param_int(&p, start_before);
    return store_query_one(st, &latest_task_before, &p, &store_task_row, out);
}

static const struct store_sql tasks_for_agent = {
    .sqlite = "SELECT " STORE_TASK_READ " FROM tasks WHERE service = ?1 AND "
              "create_time > ?2 AND start_time + duration_min * 60000 > ?3 "
              "AND cancelled_ms IS NULL ORDER BY create_time, id",
    .pg = "SELECT " STORE_TASK_READ " FROM tasks WHERE service = $1 AND "
          "create_time > $2 AND start_time + duration_min * 60000::bigint > $3 "
          "AND cancelled_ms IS NULL ORDER BY create_time, id COLLATE \"C\"",
    .what = "tasks for agent",
};

skp_err store_tasks_for_agent(struct store *st, const char *service, int64_t after_create_time,
                              int64_t now_ms, struct store_task **out, size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    if (!service)
        return SKP_EINVAL;
    struct store_params p = {0};
    store_param_text(&p, service);
    store_param_int(&p, after_create_time);
    store_param_int(&p, now_ms);
    return store_query_rows(st, &tasks_for_agent, &p, &store_task_row, out, n_out);
}

static const struct store_sql list_tasks = {
    .sqlite = "SELECT " STORE_TASK_READ " FROM tasks WHERE "
              "(?1 IS NULL OR service = ?1) AND (?2 IS NULL OR endpoint = ?2) "
              "ORDER BY start_time DESC, create_time DESC, id DESC",
    .pg = "SELECT " STORE_TASK_READ " FROM tasks WHERE "
          "($1::text IS NULL OR service = $1) AND ($2::text IS NULL OR endpoint = $2) "
          "ORDER BY start_time DESC, create_time DESC, id COLLATE \"C\" DESC",
    .what = "list tasks",
};

skp_err store_list_tasks(struct store *st, const char *service, const char *endpoint,
                         store_task_cb cb, void *ud)
{
    if (!cb)
        return SKP_EINVAL;
    struct store_params p = {0};
    store_param_text(&p, service);
    store_param_text(&p, endpoint);
    return store_query_each(st, &list_tasks, &p, &store_task_row, &STORE_VISIT(task, cb, ud));
}

static const struct store_sql list_task_logs = {
    .sqlite = "SELECT " STORE_TASK_LOG_READ " FROM task_logs "
              "WHERE task_id = ?1 ORDER BY time, op, instance",
    .pg = "SELECT " STORE_TASK_LOG_READ " FROM task_logs "
          "WHERE task_id = $1 ORDER BY time, op, instance COLLATE \"C\"",
    .what = "list task logs",
};

skp_err store_list_task_logs(struct store *st, const char *task_id, store_task_log_cb cb, void *ud)
{
    if (!task_id || !cb)
        return SKP_EINVAL;
    struct store_params p = {0};
    store_param_text(&p, task_id);
    return store_query_each(st, &list_task_logs, &p, &store_task_log_row,
                            &STORE_VISIT(task_log, cb, ud));
}
