/* store_sqlite_ebpf.c - SQLite backend of store_ebpf.h: tables ebpf_processes and ebpf_stacks.
 * Stacks are kept as uploaded (one row per stack per upload, symbols as text) and summed by the
 * scan: a triggered task is short (minutes) and holds few distinct stacks per upload, so the
 * de-duplicated frames/stacks tables of trace snapshots are not worth their cost here.
 * Single-threaded, like the rest of the store. */
#include "server/store/store_ebpf.h"

#include "server/store/sqlite/store_int.h"

skp_err sqlite_store_ebpf_upsert_process(struct store *base, const struct store_ebpf_process *p,
                                         int64_t now_ms)
{
    struct sqlite_store *st = sqlite_store_of(base);
    if (!p || !p->id || !p->id[0])
        return SKP_EINVAL;
    if (st->base.read_only)
        return SKP_EIO;
    struct store_ebpf_process row = *p;
    row.first_ms = row.last_ping_ms = now_ms;
    return store__insert_row(
        st,
        "INSERT INTO ebpf_processes(" STORE_EBPF_PROCESS_COLS ") "
        "VALUES(" STORE_EBPF_PROCESS_SQ ") "
        "ON CONFLICT(id) DO UPDATE SET service = excluded.service, instance = excluded.instance, "
        "process_name = excluded.process_name, layer = excluded.layer, pid = excluded.pid, "
        "labels = excluded.labels, properties = excluded.properties, "
        "agent_id = excluded.agent_id, last_ping_ms = excluded.last_ping_ms",
        &store_ebpf_process_row, &row, NULL, "upsert eBPF process");
}

skp_err sqlite_store_ebpf_touch_process(struct store *base, const char *id, int64_t now_ms,
                                        bool *found)
{
    struct sqlite_store *st = sqlite_store_of(base);
    *found = false;
    if (!id)
        return SKP_EINVAL;
    if (st->base.read_only)
        return SKP_EIO;
    struct sq_params q = {0};
    sqp_int(&q, now_ms);
    sqp_text(&q, id);
    int64_t changed = 0;
    skp_err err = store__query_done(st, "UPDATE ebpf_processes SET last_ping_ms = ? WHERE id = ?",
                                    &q, &changed, "touch eBPF process");
    *found = changed > 0;
    return err;
}

skp_err sqlite_store_ebpf_list_processes(struct store *base, const char *service,
                                         store_ebpf_process_cb cb, void *ud)
{
    if (!cb)
        return SKP_EINVAL;
    struct sq_params q = {0};
    sqp_text(&q, service);
    return store__query_each(sqlite_store_of(base),
                             "SELECT " STORE_EBPF_PROCESS_READ " FROM ebpf_processes "
                             "WHERE ?1 IS NULL OR service = ?1 "
                             "ORDER BY service, instance, process_name, id",
                             &q, &store_ebpf_process_row, &STORE_VISIT(ebpf_process, cb, ud),
                             "list eBPF processes");
}

/* A batch of stacks and when it arrived. */
struct stack_batch {
    const struct store_ebpf_stack *v;
    int64_t now_ms;
};

static void bind_stack(sqlite3_stmt *s, size_t i, const void *rows)
{
    const struct stack_batch *b = rows;
    const struct store_ebpf_stack *k = &b->v[i];
    sqlite3_bind_int64(s, store__bind_row(s, 1, &store_ebpf_stack_row, k), b->now_ms);
}

skp_err sqlite_store_ebpf_insert_stacks(struct store *base, const struct store_ebpf_stack *v,
                                        size_t n, int64_t now_ms)
{
    struct sqlite_store *st = sqlite_store_of(base);
    const struct stack_batch b = {v, now_ms};
    return store__insert_rows(st,
                              "INSERT INTO ebpf_stacks(" STORE_EBPF_STACK_COLS ", received_ms) "
                              "VALUES(" STORE_EBPF_STACK_SQ ", ?)",
                              n, bind_stack, &b, "insert eBPF stack");
}

skp_err sqlite_store_ebpf_scan_task(struct store *base, const char *task_id, const char *process_id,
                                    int64_t from_ms, int64_t to_ms, store_ebpf_stack_cb cb,
                                    void *ud)
{
    if (!task_id || !cb)
        return SKP_EINVAL;
    struct sq_params q = {0};
    sqp_text(&q, task_id);
    sqp_text(&q, process_id);
    sqp_int(&q, from_ms);
    sqp_int(&q, to_ms);
    return store__query_each(sqlite_store_of(base),
                             "SELECT " STORE_EBPF_SUM_READ " FROM ebpf_stacks "
                             "WHERE task_id = ?1 AND (?2 IS NULL OR process_id = ?2) AND "
                             "time_ms >= ?3 AND time_ms <= ?4 "
                             "GROUP BY task_id, process_id, kind, symbols "
                             "ORDER BY process_id, kind, symbols",
                             &q, &store_ebpf_sum_row, &STORE_VISIT(ebpf_stack, cb, ud),
                             "scan eBPF stacks");
}
