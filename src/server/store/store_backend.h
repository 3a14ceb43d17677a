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
 * continuous profiling store_continuous.h, eBPF store_ebpf.h, endpoint statistics in store.h)
 * may be NULL while a backend lacks the feature: the public function then answers SKP_ENOTSUP.
 * The PostgreSQL feature ops live in store_pg_<feature>.c (one file per feature, beside
 * store_sqlite_<feature>.c).
 *
 * A feature adding a store function adds: its member here (feature group), its forwarding
 * function in store.c, and the function in each backend (or NULL where not yet written). */
#ifndef SKP_SERVER_STORE_BACKEND_H
#define SKP_SERVER_STORE_BACKEND_H

#include "server/store/store.h"
#include "server/store/store_continuous.h"
#include "server/store/store_ebpf.h"
#include "server/store/store_proc.h"
#include "server/store/store_templates.h"

struct store_backend_ops {
    const char *name; /* "sqlite", "postgresql": for logs and /metrics */

    /* ---- core (store.h) ---- */
    void (*close)(struct store *st);
    skp_err (*upsert_instance)(struct store *st, const char *service, const char *instance,
                               const char *layer, const struct store_kv *props, size_t n_props,
                               int64_t now_ms);
    skp_err (*touch_instance)(struct store *st, const char *service, const char *instance,
                              int64_t now_ms);
    skp_err (*list_services)(struct store *st, store_service_cb cb, void *ud);
    skp_err (*list_instances)(struct store *st, const char *service, store_instance_cb cb,
                              void *ud);
    skp_err (*insert_task)(struct store *st, const struct store_task *t);
    skp_err (*get_task)(struct store *st, const char *id, struct store_task *out);
    skp_err (*latest_task_before)(struct store *st, const char *service, int64_t start_before,
                                  struct store_task *out);
    skp_err (*cancel_task)(struct store *st, const char *id, int64_t now_ms);
    skp_err (*tasks_for_agent)(struct store *st, const char *service, int64_t after_create_time,
                               int64_t now_ms, struct store_task **out, size_t *n_out);
    skp_err (*list_tasks)(struct store *st, const char *service, const char *endpoint,
                          store_task_cb cb, void *ud);
    skp_err (*tasks_lock)(struct store *st, const char *service);
    skp_err (*tasks_unlock)(struct store *st, bool commit);
    skp_err (*add_task_log)(struct store *st, const char *task_id, const char *service,
                            const char *instance, enum store_task_op op, int64_t time_ms);
    skp_err (*list_task_logs)(struct store *st, const char *task_id, store_task_log_cb cb,
                              void *ud);
    skp_err (*insert_snapshots)(struct store *st, const struct store_snapshot *v, size_t n,
                                size_t *n_dup);
    skp_err (*insert_segments)(struct store *st, const struct store_segment *v, size_t n,
                               int64_t received_ms);
    skp_err (*segment_has_snapshots)(struct store *st, const char *segment_id, bool *out);
    skp_err (*list_profiled_segments)(struct store *st, const char *task_id,
                                      store_profiled_segment_cb cb, void *ud);
    skp_err (*list_profiled_segments_page)(struct store *st, const char *task_id,
                                           const struct store_segment_key *after, size_t limit,
                                           store_profiled_segment_cb cb, void *ud, bool *more);
    skp_err (*get_segment_info)(struct store *st, const char *segment_id,
                                struct store_segment_info *out);
    skp_err (*scan_segment)(struct store *st, const char *segment_id, int32_t lo_seq,
                            int32_t hi_seq, store_sample_cb cb, void *ud);
    skp_err (*segment_seq_window)(struct store *st, const char *segment_id, int64_t from_ms,
                                  int64_t to_ms, int32_t *lo, int32_t *hi);
    skp_err (*scan_task)(struct store *st, const char *task_id, store_sample_cb cb, void *ud);
    skp_err (*get_stack)(struct store *st, uint32_t stack, const uint32_t **frames, size_t *n);
    skp_err (*get_frame)(struct store *st, uint32_t frame, const char **sig);
    skp_err (*purge_before)(struct store *st, int64_t before_ms, uint64_t *n_deleted);
    skp_err (*check)(struct store *st, char *detail, size_t cap);
    skp_err (*get_stats)(struct store *st, struct store_stats *out);

    /* ---- features (NULL = the backend lacks the feature: SKP_ENOTSUP) ---- */
    skp_err (*put_endpoint_minutes)(struct store *st, const struct store_endpoint_minute *v,
                                    size_t n);
    skp_err (*list_endpoint_minutes)(struct store *st, const char *service, int64_t from_ms,
                                     int64_t to_ms, store_endpoint_minute_cb cb, void *ud);
    skp_err (*proc_insert_task)(struct store *st, const struct proc_task *t);
    skp_err (*proc_get_task)(struct store *st, const char *id, struct proc_task *out);
    skp_err (*proc_list_tasks)(struct store *st, enum proc_kind kind, const char *service,
                               size_t limit, struct proc_task **out, size_t *n);
    skp_err (*proc_latest_task)(struct store *st, enum proc_kind kind, const char *service,
                                const char *events, struct proc_task *out);
    skp_err (*proc_next_task)(struct store *st, enum proc_kind kind, const char *service,
                              const char *instance, int64_t after_ms, int64_t now_ms,
                              int64_t grace_ms, struct proc_task *out);
    skp_err (*proc_live_instances)(struct store *st, const char *service, int64_t since_ms,
                                   char ***out, size_t *n);
    skp_err (*proc_cancel_task)(struct store *st, const char *id, int64_t now_ms, int64_t grace_ms);
    skp_err (*proc_add_log)(struct store *st, const char *task_id, const char *instance,
                            const char *op, int64_t time_ms, const char *message);
    skp_err (*proc_list_logs)(struct store *st, const char *task_id, struct proc_log **out,
                              size_t *n);
    skp_err (*proc_insert_file)(struct store *st, const char *task_id, const char *instance,
                                int64_t time_ms, const uint8_t *data, size_t len, const char *op,
                                int64_t *id_out);
    skp_err (*proc_list_files)(struct store *st, const char *task_id, struct proc_file **out,
                               size_t *n);
    skp_err (*proc_get_file)(struct store *st, const char *task_id, int64_t id, uint8_t **data,
                             size_t *len, char **instance_out);
    skp_err (*cont_put_policy)(struct store *st, const char *service, const char *uuid,
                               const char *json, int64_t now_ms);
    skp_err (*cont_delete_policy)(struct store *st, const char *service);
    skp_err (*cont_list_policies)(struct store *st, const char *service, store_cont_policy_cb cb,
                                  void *ud);
    skp_err (*cont_insert_trigger)(struct store *st, const struct store_cont_trigger *t,
                                   int64_t *id_out);
    skp_err (*cont_list_triggers)(struct store *st, const char *service, const char *task_id,
                                  size_t limit, store_cont_trigger_cb cb, void *ud);
    skp_err (*cont_put_slots)(struct store *st, const struct store_cont_slot *v, size_t n);
    skp_err (*cont_list_slots)(struct store *st, int64_t from_ms, int64_t to_ms,
                               store_cont_slot_cb cb, void *ud);
    skp_err (*cont_lease)(struct store *st, const char *name, int64_t holder, int64_t ttl_ms,
                          bool *held);
    skp_err (*cont_claim_firing)(struct store *st, const char *service, const char *target,
                                 int64_t window_ms, bool *claimed);
    skp_err (*cont_purge_cluster)(struct store *st, int64_t before_ms, int64_t claims_before_ms);
    skp_err (*ebpf_upsert_process)(struct store *st, const struct store_ebpf_process *p,
                                   int64_t now_ms);
    skp_err (*ebpf_touch_process)(struct store *st, const char *id, int64_t now_ms, bool *found);
    skp_err (*ebpf_list_processes)(struct store *st, const char *service, store_ebpf_process_cb cb,
                                   void *ud);
    skp_err (*ebpf_insert_stacks)(struct store *st, const struct store_ebpf_stack *v, size_t n,
                                  int64_t now_ms);
    skp_err (*ebpf_scan_task)(struct store *st, const char *task_id, const char *process_id,
                              int64_t from_ms, int64_t to_ms, store_ebpf_stack_cb cb, void *ud);
    /* store_templates.h (dispatched by store_templates.c) */
    skp_err (*put_template)(struct store *st, const char *id, const char *configuration,
                            int64_t now_ms);
    skp_err (*disable_template)(struct store *st, const char *id, int64_t now_ms);
    skp_err (*list_templates)(struct store *st, store_template_cb cb, void *ud);
};

/* Every store object starts with this (see above). */
struct store {
    const struct store_backend_ops *ops;
    bool read_only; /* opened with store_opts.read_only: every write answers SKP_EIO */
};

enum store_backend_kind {
    STORE_BACKEND_SQLITE = 0,
    STORE_BACKEND_POSTGRESQL = 1,
};
/* The backend a store_open argument names: a "postgresql://" or "postgres://" URL (scheme
 * case-insensitive) is PostgreSQL, anything else an SQLite path. Pure; NULL is SQLite. */
enum store_backend_kind store_backend_for(const char *path_or_url);

#endif
