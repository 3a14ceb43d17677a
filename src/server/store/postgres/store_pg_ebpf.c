/* store_pg_ebpf.c - PostgreSQL backend of store_ebpf.h: tables ebpf_processes and ebpf_stacks
 * (the feature step of store_pg_schema.c). As in the SQLite backend, stacks are kept as uploaded
 * (one row per stack per upload, symbols as text) and summed by the scan. A process report
 * arriving at two collectors at once is one upsert on its id: the first report time is kept. */
#include "server/store/store_ebpf.h"

#include <string.h>

#include "server/store/postgres/store_pg_int.h"

skp_err pg_store_ebpf_upsert_process(struct store *base, const struct store_ebpf_process *p,
                                     int64_t now_ms)
{
    struct pg_store *st = pg_store_of(base);
    if (!p || !p->id || !p->id[0])
        return SKP_EINVAL;
    if (st->base.read_only)
        return SKP_EIO;
    struct store_ebpf_process row = *p;
    row.first_ms = row.last_ping_ms = now_ms;
    return pg__insert_row(st,
                          "INSERT INTO ebpf_processes(" STORE_EBPF_PROCESS_COLS ") "
                          "VALUES(" STORE_EBPF_PROCESS_PG ") "
                          "ON CONFLICT (id) DO UPDATE SET service = excluded.service, "
                          "instance = excluded.instance, process_name = excluded.process_name, "
                          "layer = excluded.layer, pid = excluded.pid, labels = excluded.labels, "
                          "properties = excluded.properties, agent_id = excluded.agent_id, "
                          "last_ping_ms = excluded.last_ping_ms",
                          &store_ebpf_process_row, &row, "upsert eBPF process");
}

skp_err pg_store_ebpf_touch_process(struct store *base, const char *id, int64_t now_ms, bool *found)
{
    struct pg_store *st = pg_store_of(base);
    *found = false;
    if (!id)
        return SKP_EINVAL;
    if (st->base.read_only)
        return SKP_EIO;
    skp_err err = SKP_OK;
    struct pg_params q = {0};
    pgp_int(&q, now_ms);
    pgp_text(&q, id);
    PGresult *r = pg__query(st, "UPDATE ebpf_processes SET last_ping_ms = $1 WHERE id = $2", &q,
                            &err, "touch eBPF process");
    if (r)
        *found = strcmp(PQcmdTuples(r), "0") != 0;
    PQclear(r);
    return err;
}

skp_err pg_store_ebpf_list_processes(struct store *base, const char *service,
                                     store_ebpf_process_cb cb, void *ud)
{
    if (!cb)
        return SKP_EINVAL;
    struct pg_params q = {0};
    pgp_text(&q, service);
    return pg__query_each(pg_store_of(base),
                          "SELECT " STORE_EBPF_PROCESS_READ " FROM ebpf_processes "
                          "WHERE $1::text IS NULL OR service = $1 "
                          "ORDER BY service COLLATE \"C\", instance COLLATE \"C\", "
                          "process_name COLLATE \"C\", id COLLATE \"C\"",
                          &q, &store_ebpf_process_row, &STORE_VISIT(ebpf_process, cb, ud),
                          "list eBPF processes");
}

/* A batch of stacks and when it arrived. */
struct stack_batch {
    const struct store_ebpf_stack *v;
    int64_t now_ms;
};

static void bind_stack(struct pg_params *p, size_t i, const void *rows)
{
    const struct stack_batch *b = rows;
    const struct store_ebpf_stack *k = &b->v[i];
    pgp_row(p, &store_ebpf_stack_row, k);
    pgp_int(p, b->now_ms);
}

skp_err pg_store_ebpf_insert_stacks(struct store *base, const struct store_ebpf_stack *v, size_t n,
                                    int64_t now_ms)
{
    struct pg_store *st = pg_store_of(base);
    const struct stack_batch b = {v, now_ms};
    return pg__insert_rows(st,
                           "INSERT INTO ebpf_stacks(" STORE_EBPF_STACK_COLS ", received_ms) "
                           "VALUES(" STORE_EBPF_STACK_PG ", $8)",
                           n, bind_stack, &b, "insert eBPF stack");
}

skp_err pg_store_ebpf_scan_task(struct store *base, const char *task_id, const char *process_id,
                                int64_t from_ms, int64_t to_ms, store_ebpf_stack_cb cb, void *ud)
{
    if (!task_id || !cb)
        return SKP_EINVAL;
    struct pg_params q = {0};
    pgp_text(&q, task_id);
    pgp_text(&q, process_id);
    pgp_int(&q, from_ms);
    pgp_int(&q, to_ms);
    /* ORDER BY with COLLATE "C": the same byte order as SQLite's, whatever the database's
     * collation. */
    return pg__query_each(pg_store_of(base),
                          "SELECT " STORE_EBPF_SUM_READ " FROM ebpf_stacks WHERE task_id = $1 "
                          "AND ($2::text IS NULL OR process_id = $2) AND time_ms >= $3 AND "
                          "time_ms <= $4 GROUP BY task_id, process_id, kind, symbols "
                          "ORDER BY process_id COLLATE \"C\", kind, symbols COLLATE \"C\"",
                          &q, &store_ebpf_sum_row, &STORE_VISIT(ebpf_stack, cb, ud),
                          "scan eBPF stacks");
}
