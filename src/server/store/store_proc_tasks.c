/* store_proc_tasks.c - store_proc.h's reads of process-profiling tasks (pprof, async-profiler:
 * tables proc_tasks and proc_task_instances), of their logs and complete files, and of a service's
 * live instances, for both backends, written once over the statements of store_query.h with their
 * SQLite and PostgreSQL text side by side. The writes and the file contents stay in each backend's
 * proc file. PostgreSQL orders texts with COLLATE "C": the same byte order as SQLite's, whatever
 * the database's collation. */
#include "server/store/store_proc.h"

#include <string.h>

#include "server/store/store_query.h"
#include "server/store/store_rows.h"

#define PROC_LIST_DEFAULT 1000 /* rows of a list without a limit */

static const char *kind_name(enum proc_kind k)
{
    return k == PROC_KIND_ASYNC_PROFILER ? "async-profiler" : "pprof";
}

static const struct store_sql task_instances = {
    .sqlite = "SELECT instance FROM proc_task_instances WHERE task_id = ? ORDER BY instance",
    .pg = "SELECT instance FROM proc_task_instances WHERE task_id = $1 "
          "ORDER BY instance COLLATE \"C\"",
    .what = "proc task instances",
};

/* Fills t->instances from proc_task_instances. */
static skp_err load_instances(struct store *st, struct proc_task *t)
{
    struct store_params p = {0};
    store_param_text(&p, t->id);
    return store_query_rows(st, &task_instances, &p, &store_name_row, &t->instances,
                            &t->n_instances);
}

/* Runs a query yielding at most one task row (out zeroed first; SKP_ENOTFOUND for none). */
static skp_err one_task(struct store *st, const struct store_sql *q, const struct store_params *p,
                        struct proc_task *out)
{
    memset(out, 0, sizeof(*out));
    skp_err err = store_query_one(st, q, p, &store_proc_task_row, out);
    if (!err) {
        err = load_instances(st, out);
        if (err)
            store_proc_task_cleanup(out);
    }
    return err;
}

static const struct store_sql get_task = {
    .sqlite = "SELECT " STORE_PROC_TASK_READ " FROM proc_tasks WHERE id = ?",
    .pg = "SELECT " STORE_PROC_TASK_READ " FROM proc_tasks WHERE id = $1",
    .what = "read proc task",
};

skp_err store_proc_get_task(struct store *st, const char *id, struct proc_task *out)
{
    struct store_params p = {0};
    store_param_text(&p, id);
    return one_task(st, &get_task, &p, out);
}

static const struct store_sql latest_task = {
    .sqlite = "SELECT " STORE_PROC_TASK_READ " FROM proc_tasks WHERE kind = ? AND "
              "service = ? AND events = ? ORDER BY create_time DESC LIMIT 1",
    .pg = "SELECT " STORE_PROC_TASK_READ " FROM proc_tasks WHERE kind = $1 AND "
          "service = $2 AND events = $3 ORDER BY create_time DESC LIMIT 1",
    .what = "read proc task",
};

skp_err store_proc_latest_task(struct store *st, enum proc_kind kind, const char *service,
                               const char *events, struct proc_task *out)
{
    struct store_params p = {0};
    store_param_text(&p, kind_name(kind));
    store_param_text(&p, service);
    store_param_text(&p, events);
    return one_task(st, &latest_task, &p, out);
}

static const struct store_sql next_task = {
    .sqlite =
        "SELECT " STORE_PROC_TASK_READ " FROM proc_tasks t WHERE kind = ? AND service = ? AND "
        "create_time > ? AND create_time + duration_s * 1000 + ? >= ? AND cancelled_ms IS NULL "
        "AND EXISTS(SELECT 1 FROM "
        "proc_task_instances i WHERE i.task_id = t.id AND i.instance = ?) "
        "ORDER BY create_time LIMIT 1",
    .pg = "SELECT " STORE_PROC_TASK_READ " FROM proc_tasks t WHERE kind = $1 AND "
          "service = $2 AND create_time > $3 AND "
          "create_time + duration_s * 1000 + $4 >= $5 AND cancelled_ms IS NULL AND "
          "EXISTS(SELECT 1 FROM proc_task_instances i WHERE i.task_id = t.id AND "
          "i.instance = $6) ORDER BY create_time, id LIMIT 1",
    .what = "read proc task",
};

skp_err store_proc_next_task(struct store *st, enum proc_kind kind, const char *service,
                             const char *instance, int64_t after_ms, int64_t now_ms,
                             int64_t grace_ms, struct proc_task *out)
{
    struct store_params p = {0};
    store_param_text(&p, kind_name(kind));
    store_param_text(&p, service);
    store_param_int(&p, after_ms);
    store_param_int(&p, grace_ms);
    store_param_int(&p, now_ms);
    store_param_text(&p, instance);
    return one_task(st, &next_task, &p, out);
}

static const struct store_sql list_tasks = {
    .sqlite = "SELECT " STORE_PROC_TASK_READ " FROM proc_tasks WHERE "
              "kind = ? AND (?2 IS NULL OR service = ?2) "
              "ORDER BY create_time DESC LIMIT ?3",
    .pg = "SELECT " STORE_PROC_TASK_READ " FROM proc_tasks WHERE kind = $1 AND "
          "($2::text IS NULL OR service = $2) "
          "ORDER BY create_time DESC, id DESC LIMIT $3",
    .what = "list proc tasks",
};

skp_err store_proc_list_tasks(struct store *st, enum proc_kind kind, const char *service,
                              size_t limit, struct proc_task **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    struct store_params p = {0};
    store_param_text(&p, kind_name(kind));
    store_param_text(&p, service);
    store_param_int(&p, (int64_t)(limit ? limit : PROC_LIST_DEFAULT));
    struct proc_task *tasks = NULL;
    size_t got = 0;
    skp_err err = store_query_rows(st, &list_tasks, &p, &store_proc_task_row, &tasks, &got);
    for (size_t i = 0; !err && i < got; i++)
        err = load_instances(st, &tasks[i]);
    if (err) {
        store_proc_tasks_free(tasks, got);
        return err;
    }
    *out = tasks;
    *n = got;
    return SKP_OK;
}

static const struct store_sql live_instances = {
    .sqlite = "SELECT i.name FROM instances i JOIN services v ON "
              "v.id = i.service_id WHERE v.name = ? AND i.last_seen >= ? "
              "ORDER BY i.name",
    .pg = "SELECT i.name FROM instances i JOIN services v ON "
          "v.id = i.service_id WHERE v.name = $1 AND i.last_seen >= $2 "
          "ORDER BY i.name COLLATE \"C\"",
    .what = "live instances",
};

skp_err store_proc_live_instances(struct store *st, const char *service, int64_t since_ms,
                                  char ***out, size_t *n)
{
    struct store_params p = {0};
    store_param_text(&p, service);
    store_param_int(&p, since_ms);
    return store_query_rows(st, &live_instances, &p, &store_name_row, out, n);
}

static const struct store_sql list_logs = {
    .sqlite = "SELECT " STORE_PROC_LOG_READ " FROM proc_task_logs WHERE "
              "task_id = ? ORDER BY time, id",
    .pg = "SELECT " STORE_PROC_LOG_READ " FROM proc_task_logs WHERE "
          "task_id = $1 ORDER BY time, id",
    .what = "list proc task logs",
};

skp_err store_proc_list_logs(struct store *st, const char *task_id, struct proc_log **out,
                             size_t *n)
{
    struct store_params p = {0};
    store_param_text(&p, task_id);
    return store_query_rows(st, &list_logs, &p, &store_proc_log_row, out, n);
}

static const struct store_sql list_files = {
    .sqlite = "SELECT " STORE_PROC_FILE_READ " FROM proc_files WHERE "
              "task_id = ? AND complete = 1 ORDER BY id",
    .pg = "SELECT " STORE_PROC_FILE_READ " FROM proc_files WHERE task_id = $1 "
          "AND complete ORDER BY id",
    .what = "list proc files",
};

skp_err store_proc_list_files(struct store *st, const char *task_id, struct proc_file **out,
                              size_t *n)
{
    struct store_params p = {0};
    store_param_text(&p, task_id);
    return store_query_rows(st, &list_files, &p, &store_proc_file_row, out, n);
}
