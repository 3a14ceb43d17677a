/* store_ebpf.c - store_ebpf.h for both backends: tables ebpf_processes and ebpf_stacks (each
 * backend's schema step "eBPF processes and profile stacks"), written once over the statements
 * of store_query.h with their SQLite and PostgreSQL text side by side. Stacks are kept as
 * uploaded (one row per stack per upload, symbols as text) and summed by the scan: a triggered
 * task is short (minutes) and holds few distinct stacks per upload, so the de-duplicated
 * frames/stacks tables of trace snapshots are not worth their cost here. A process report
 * arriving at two collectors at once (PostgreSQL) is one upsert on its id: the first report
 * time is kept. PostgreSQL orders with COLLATE "C": the same byte order as SQLite's, whatever
 * the database's collation. */
#include "server/store/store_ebpf.h"

#include "server/store/store_backend.h"
#include "server/store/store_query.h"
#include "server/store/store_rows.h"

static const struct store_sql upsert_process = {
    .sqlite = "INSERT INTO ebpf_processes(" STORE_EBPF_PROCESS_COLS ") "
              "VALUES(" STORE_EBPF_PROCESS_SQ ") "
              "ON CONFLICT(id) DO UPDATE SET service = excluded.service, "
              "instance = excluded.instance, process_name = excluded.process_name, "
              "layer = excluded.layer, pid = excluded.pid, labels = excluded.labels, "
              "properties = excluded.properties, agent_id = excluded.agent_id, "
              "last_ping_ms = excluded.last_ping_ms",
    .pg = "INSERT INTO ebpf_processes(" STORE_EBPF_PROCESS_COLS ") "
          "VALUES(" STORE_EBPF_PROCESS_PG ") "
          "ON CONFLICT (id) DO UPDATE SET service = excluded.service, "
          "instance = excluded.instance, process_name = excluded.process_name, "
          "layer = excluded.layer, pid = excluded.pid, labels = excluded.labels, "
          "properties = excluded.properties, agent_id = excluded.agent_id, "
          "last_ping_ms = excluded.last_ping_ms",
    .what = "upsert eBPF process",
};

skp_err store_ebpf_upsert_process(struct store *st, const struct store_ebpf_process *p,
                                  int64_t now_ms)
{
    if (!p || !p->id || !p->id[0])
        return SKP_EINVAL;
    if (st->read_only)
        return SKP_EIO;
    struct store_ebpf_process row = *p;
    row.first_ms = row.last_ping_ms = now_ms;
    return store_query_insert(st, &upsert_process, &store_ebpf_process_row, &row);
}

static const struct store_sql touch_process = {
    .sqlite = "UPDATE ebpf_processes SET last_ping_ms = ?1 WHERE id = ?2",
    .pg = "UPDATE ebpf_processes SET last_ping_ms = $1 WHERE id = $2",
    .what = "touch eBPF process",
};

skp_err store_ebpf_touch_process(struct store *st, const char *id, int64_t now_ms, bool *found)
{
    *found = false;
    if (!id)
        return SKP_EINVAL;
    if (st->read_only)
        return SKP_EIO;
    struct store_params q = {0};
    store_param_int(&q, now_ms);
    store_param_text(&q, id);
    int64_t changed = 0;
    skp_err err = store_query_done(st, &touch_process, &q, &changed);
    *found = changed > 0;
    return err;
}

static const struct store_sql list_processes = {
    .sqlite = "SELECT " STORE_EBPF_PROCESS_READ " FROM ebpf_processes "
              "WHERE ?1 IS NULL OR service = ?1 "
              "ORDER BY service, instance, process_name, id",
    .pg = "SELECT " STORE_EBPF_PROCESS_READ " FROM ebpf_processes "
          "WHERE $1::text IS NULL OR service = $1 "
          "ORDER BY service COLLATE \"C\", instance COLLATE \"C\", "
          "process_name COLLATE \"C\", id COLLATE \"C\"",
    .what = "list eBPF processes",
};

skp_err store_ebpf_list_processes(struct store *st, const char *service, store_ebpf_process_cb cb,
                                  void *ud)
{
    if (!cb)
        return SKP_EINVAL;
    struct store_params q = {0};
    store_param_text(&q, service);
    return store_query_each(st, &list_processes, &q, &store_ebpf_process_row,
                            &STORE_VISIT(ebpf_process, cb, ud));
}

/* Each stack's columns, then when the batch arrived. */
static const struct store_sql insert_stack = {
    .sqlite = "INSERT INTO ebpf_stacks(" STORE_EBPF_STACK_COLS ", received_ms) "
              "VALUES(" STORE_EBPF_STACK_SQ ", ?)",
    .pg = "INSERT INTO ebpf_stacks(" STORE_EBPF_STACK_COLS ", received_ms) "
          "VALUES(" STORE_EBPF_STACK_PG ", $8)",
    .what = "insert eBPF stack",
};

skp_err store_ebpf_insert_stacks(struct store *st, const struct store_ebpf_stack *v, size_t n,
                                 int64_t now_ms)
{
    skp_err err;
    if (store_batch_answered(st, v, n, &err))
        return err;
    struct store_params received = {0};
    store_param_int(&received, now_ms);
    return store_query_insert_rows(st, &insert_stack, &store_ebpf_stack_row, v, n, &received);
}

static const struct store_sql scan_task = {
    .sqlite = "SELECT " STORE_EBPF_SUM_READ " FROM ebpf_stacks "
              "WHERE task_id = ?1 AND (?2 IS NULL OR process_id = ?2) AND "
              "time_ms >= ?3 AND time_ms <= ?4 "
              "GROUP BY task_id, process_id, kind, symbols "
              "ORDER BY process_id, kind, symbols",
    .pg = "SELECT " STORE_EBPF_SUM_READ " FROM ebpf_stacks "
          "WHERE task_id = $1 AND ($2::text IS NULL OR process_id = $2) AND "
          "time_ms >= $3 AND time_ms <= $4 "
          "GROUP BY task_id, process_id, kind, symbols "
          "ORDER BY process_id COLLATE \"C\", kind, symbols COLLATE \"C\"",
    .what = "scan eBPF stacks",
};

skp_err store_ebpf_scan_task(struct store *st, const char *task_id, const char *process_id,
                             int64_t from_ms, int64_t to_ms, store_ebpf_stack_cb cb, void *ud)
{
    if (!task_id || !cb)
        return SKP_EINVAL;
    struct store_params q = {0};
    store_param_text(&q, task_id);
    store_param_text(&q, process_id);
    store_param_int(&q, from_ms);
    store_param_int(&q, to_ms);
    return store_query_each(st, &scan_task, &q, &store_ebpf_sum_row,
                            &STORE_VISIT(ebpf_stack, cb, ud));
}
