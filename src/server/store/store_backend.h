/* store_backend.h - the dispatch behind store.h: a backend is a table of functions, one per
 * store function, and every store object starts with a pointer to its backend's table.
 * store.c implements the public store_* functions by forwarding through st->ops; callers never
 * see this header (only backends and store.c include it).
 *
 * Backends:
 *   SQLite      store_sqlite*.c, table sqlite_store_ops (store_int.h), a file path
 *   PostgreSQL  store_pg*.c, table pg_store_ops (store_pg_int.h), a postgresql:// or
 *               postgres:// URL
 * store_open picks the backend from its argument (store_backend_for below).
 *
 * How a backend registers its functions:
 *   1. its object embeds `struct store base;` as FIRST member and sets base.ops to its table
 *      when opened (so a struct store * converts to the backend's object by a cast);
 *   2. its table names one function per member below, each with the contract of the store.h /
 *      store_<feature>.h function of the same name (member `insert_task` is store_insert_task);
 *   3. its open function is called by store_open (add a line there for a new backend).
 *
 * Core ops must all be set. FEATURE ops (the second group: process tasks store_proc.h,
 * continuous profiling store_continuous.h) may be NULL while a backend lacks the feature: the
 * public function then answers SKP_ENOTSUP.
 * The PostgreSQL feature ops live in store_pg_<feature>.c (one file per feature, beside
 * store_sqlite_<feature>.c).
 *
 * A feature adding a store function adds: its line in a list below (FEATURE), its forwarding
 * function in store.c, and the function in each backend (or NULL in its table where not yet
 * written). A feature whose logic is the same on both backends instead writes it once in
 * store/store_<feature>.c over the statements of store_query.h (the query_* core ops), each
 * with its SQL text per backend: store_ebpf.c, store_templates.c, store_endpoint_stats.c,
 * store_cont_policies.c, store_tasks.c, store_services.c, store_segment_info.c. */
#ifndef SKP_SERVER_STORE_BACKEND_H
#define SKP_SERVER_STORE_BACKEND_H

#include "server/store/store.h"
#include "server/store/store_continuous.h"
#include "server/store/store_ebpf.h"
#include "server/store/store_proc.h"
#include "server/store/store_query.h"

/* The store functions a backend implements, one line each, X(name, parameters...) with the
 * parameters after `struct store *st`, every one returning skp_err with the contract of the
 * store_<name> function. The ops table below has a member per line, and each backend declares
 * its functions and fills its table from the same lists (STORE_BACKEND_DECLARE,
 * STORE_BACKEND_SET), so a new op is one line here.
 *   CORE      store.h, and store_query.h's statements: every backend sets them all
 *   FEATURE   store_proc.h, store_continuous.h
 *   CLUSTER   store_continuous.h's state shared by several collectors (PostgreSQL only) */
#define STORE_CORE_OPS(X)                                                                          \
    X(upsert_instance, const char *service, const char *instance, const char *layer,               \
      const struct store_kv *props, size_t n_props, int64_t now_ms)                                \
    X(touch_instance, const char *service, const char *instance, int64_t now_ms)                   \
    X(insert_task, const struct store_task *t)                                                     \
    X(cancel_task, const char *id, int64_t now_ms)                                                 \
    X(tasks_lock, const char *service)                                                             \
    X(tasks_unlock, bool commit)                                                                   \
    X(add_task_log, const char *task_id, const char *service, const char *instance,                \
      enum store_task_op op, int64_t time_ms)                                                      \
    X(insert_snapshots, const struct store_snapshot *v, size_t n, size_t *n_dup)                   \
    X(insert_segments, const struct store_segment *v, size_t n, int64_t received_ms)               \
    X(segment_has_snapshots, const char *segment_id, bool *out)                                    \
    X(list_profiled_segments, const char *task_id, store_profiled_segment_cb cb, void *ud)         \
    X(list_profiled_segments_page, const char *task_id, const struct store_segment_key *after,     \
      size_t limit, store_profiled_segment_cb cb, void *ud, bool *more)                            \
    X(scan_segment, const char *segment_id, int32_t lo_seq, int32_t hi_seq, store_sample_cb cb,    \
      void *ud)                                                                                    \
    X(segment_seq_window, const char *segment_id, int64_t from_ms, int64_t to_ms, int32_t *lo,     \
      int32_t *hi)                                                                                 \
    X(scan_task, const char *task_id, store_sample_cb cb, void *ud)                                \
    X(get_stack, uint32_t stack, const uint32_t **frames, size_t *n)                               \
    X(get_frame, uint32_t frame, const char **sig)                                                 \
    X(check, char *detail, size_t cap)                                                             \
    X(purge_step, int64_t before_ms, uint64_t max_rows, uint64_t *n_deleted, bool *done)           \
    X(get_stats, struct store_stats *out)                                                          \
    X(query_each, const struct store_sql *q, const struct store_params *p,                         \
      const struct store_row_desc *d, const struct store_visit *v)                                 \
    X(query_one, const struct store_sql *q, const struct store_params *p,                          \
      const struct store_row_desc *d, void *out)                                                   \
    X(query_rows, const struct store_sql *q, const struct store_params *p,                         \
      const struct store_row_desc *d, void **out, size_t *n)                                       \
    X(query_done, const struct store_sql *q, const struct store_params *p, int64_t *changed)       \
    X(query_insert, const struct store_sql *q, const struct store_row_desc *d, const void *row)    \
    X(query_insert_rows, const struct store_sql *q, const struct store_row_batch *b)

#define STORE_FEATURE_OPS(X)                                                                       \
    X(proc_insert_task, const struct proc_task *t)                                                 \
    X(proc_cancel_task, const char *id, int64_t now_ms, int64_t grace_ms)                          \
    X(proc_add_log, const char *task_id, const char *instance, const char *op, int64_t time_ms,    \
      const char *message)                                                                         \
    X(proc_file_begin, const char *task_id, const char *instance, int64_t time_ms, size_t size,    \
      int64_t *id_out)                                                                             \
    X(proc_file_append, int64_t id, int seq, const uint8_t *data, size_t len)                      \
    X(proc_file_finish, const char *task_id, const char *instance, int64_t id, int64_t time_ms,    \
      const char *op)                                                                              \
    X(proc_file_abort, int64_t id)                                                                 \
    X(proc_get_file, const char *task_id, int64_t id, uint8_t **data, size_t *len,                 \
      char **instance_out)                                                                         \
    X(cont_insert_trigger, const struct store_cont_trigger *t, int64_t *id_out)                    \
    X(cont_list_triggers, const char *service, const char *task_id, size_t limit,                  \
      store_cont_trigger_cb cb, void *ud)

#define STORE_CLUSTER_OPS(X)                                                                       \
    X(cont_put_slots, const struct store_cont_slot *v, size_t n)                                   \
    X(cont_list_slots, int64_t from_ms, int64_t to_ms, store_cont_slot_cb cb, void *ud)            \
    X(cont_lease, const char *name, int64_t holder, int64_t ttl_ms, bool *held)                    \
    X(cont_claim_firing, const char *service, const char *target, int64_t window_ms,               \
      bool *claimed)                                                                               \
    X(cont_purge_cluster, int64_t before_ms, int64_t claims_before_ms)

/* A backend `prefix` declares its functions prefix_store_<name> of a list in its internal header
 * with a macro that passes its prefix on, e.g. for "pg":
 *   #define PG_STORE_DECLARE(...) STORE_BACKEND_DECLARE(pg, __VA_ARGS__)
 *   STORE_CORE_OPS(PG_STORE_DECLARE)
 * and names them in its table with STORE_BACKEND_SET in the same way. */
#define STORE_BACKEND_DECLARE(prefix, name, ...)                                                   \
    SKP_MUST_CHECK skp_err prefix##_store_##name(struct store *st, __VA_ARGS__);
#define STORE_BACKEND_SET(prefix, name, ...) .name = prefix##_store_##name,
#define STORE_BACKEND_MEMBER(name, ...) skp_err (*name)(struct store *, __VA_ARGS__);

struct store_backend_ops {
    const char *name; /* "sqlite", "postgresql": for logs and /metrics */
    void (*close)(struct store *st);
    skp_err (*purge_before)(struct store *st, int64_t before_ms, uint64_t *n_deleted);
    STORE_CORE_OPS(STORE_BACKEND_MEMBER)
    /* features: NULL = the backend lacks the feature (SKP_ENOTSUP) */
    STORE_FEATURE_OPS(STORE_BACKEND_MEMBER)
    STORE_CLUSTER_OPS(STORE_BACKEND_MEMBER)
};

/* Every store object starts with this (see above). */
struct store {
    const struct store_backend_ops *ops;
    bool read_only; /* opened with store_opts.read_only: every write answers SKP_EIO */
};

/* What every batch write answers before its backend sees it: true with *err SKP_OK for an empty
 * batch, SKP_EINVAL for rows missing, SKP_EIO on a read-only store; false: write it. */
bool store_batch_answered(const struct store *st, const void *v, size_t n, skp_err *err);

enum store_backend_kind {
    STORE_BACKEND_SQLITE = 0,
    STORE_BACKEND_POSTGRESQL = 1,
};
/* The backend a store_open argument names: a "postgresql://" or "postgres://" URL (scheme
 * case-insensitive) is PostgreSQL, anything else an SQLite path. Pure; NULL is SQLite. */
enum store_backend_kind store_backend_for(const char *path_or_url);

#endif
