/* store_pg_features.h - the PostgreSQL backend's feature functions (members of pg_store_ops in
 * store_pg.c), each with the contract of the store_proc.h / store_continuous.h / store_ebpf.h /
 * store.h function of the same name without "pg_": store_pg_proc.c, store_pg_continuous.c,
 * store_pg_ebpf.c, store_pg_endpoint_stats.c. Their tables: the feature step of
 * store_pg_schema.c; their retention: k_purge_features in store_pg_retention.c. */
#ifndef SKP_SERVER_STORE_PG_FEATURES_H
#define SKP_SERVER_STORE_PG_FEATURES_H

#include "server/store/store.h"
#include "server/store/store_continuous.h"
#include "server/store/store_ebpf.h"
#include "server/store/store_proc.h"

SKP_MUST_CHECK skp_err pg_store_put_endpoint_minutes(struct store *base,
                                                     const struct store_endpoint_minute *v,
                                                     size_t n);
SKP_MUST_CHECK skp_err pg_store_list_endpoint_minutes(struct store *base, const char *service,
                                                      int64_t from_ms, int64_t to_ms,
                                                      store_endpoint_minute_cb cb, void *ud);
SKP_MUST_CHECK skp_err pg_store_proc_insert_task(struct store *base, const struct proc_task *t);
SKP_MUST_CHECK skp_err pg_store_proc_get_task(struct store *base, const char *id,
                                              struct proc_task *out);
SKP_MUST_CHECK skp_err pg_store_proc_list_tasks(struct store *base, enum proc_kind kind,
                                                const char *service, size_t limit,
                                                struct proc_task **out, size_t *n);
SKP_MUST_CHECK skp_err pg_store_proc_latest_task(struct store *base, enum proc_kind kind,
                                                 const char *service, const char *events,
                                                 struct proc_task *out);
SKP_MUST_CHECK skp_err pg_store_proc_next_task(struct store *base, enum proc_kind kind,
                                               const char *service, const char *instance,
                                               int64_t after_ms, int64_t now_ms, int64_t grace_ms,
                                               struct proc_task *out);
SKP_MUST_CHECK skp_err pg_store_proc_live_instances(struct store *base, const char *service,
                                                    int64_t since_ms, char ***out, size_t *n);
SKP_MUST_CHECK skp_err pg_store_proc_cancel_task(struct store *base, const char *id, int64_t now_ms,
                                                 int64_t grace_ms);
SKP_MUST_CHECK skp_err pg_store_proc_add_log(struct store *base, const char *task_id,
                                             const char *instance, const char *op, int64_t time_ms,
                                             const char *message);
SKP_MUST_CHECK skp_err pg_store_proc_list_logs(struct store *base, const char *task_id,
                                               struct proc_log **out, size_t *n);
SKP_MUST_CHECK skp_err pg_store_proc_insert_file(struct store *base, const char *task_id,
                                                 const char *instance, int64_t time_ms,
                                                 const uint8_t *data, size_t len, const char *op,
                                                 int64_t *id_out);
SKP_MUST_CHECK skp_err pg_store_proc_list_files(struct store *base, const char *task_id,
                                                struct proc_file **out, size_t *n);
SKP_MUST_CHECK skp_err pg_store_proc_get_file(struct store *base, const char *task_id, int64_t id,
                                              uint8_t **data, size_t *len, char **instance_out);
SKP_MUST_CHECK skp_err pg_store_cont_put_policy(struct store *base, const char *service,
                                                const char *uuid, const char *json, int64_t now_ms);
SKP_MUST_CHECK skp_err pg_store_cont_delete_policy(struct store *base, const char *service);
SKP_MUST_CHECK skp_err pg_store_cont_list_policies(struct store *base, const char *service,
                                                   store_cont_policy_cb cb, void *ud);
SKP_MUST_CHECK skp_err pg_store_cont_insert_trigger(struct store *base,
                                                    const struct store_cont_trigger *t,
                                                    int64_t *id_out);
SKP_MUST_CHECK skp_err pg_store_cont_list_triggers(struct store *base, const char *service,
                                                   const char *task_id, size_t limit,
                                                   store_cont_trigger_cb cb, void *ud);
SKP_MUST_CHECK skp_err pg_store_ebpf_upsert_process(struct store *base,
                                                    const struct store_ebpf_process *p,
                                                    int64_t now_ms);
SKP_MUST_CHECK skp_err pg_store_ebpf_touch_process(struct store *base, const char *id,
                                                   int64_t now_ms, bool *found);
SKP_MUST_CHECK skp_err pg_store_ebpf_list_processes(struct store *base, const char *service,
                                                    store_ebpf_process_cb cb, void *ud);
SKP_MUST_CHECK skp_err pg_store_ebpf_insert_stacks(struct store *base,
                                                   const struct store_ebpf_stack *v, size_t n,
                                                   int64_t now_ms);
SKP_MUST_CHECK skp_err pg_store_ebpf_scan_task(struct store *base, const char *task_id,
                                               const char *process_id, int64_t from_ms,
                                               int64_t to_ms, store_ebpf_stack_cb cb, void *ud);

/* store_pg_cluster.c: the collectors' shared state of continuous profiling */
SKP_MUST_CHECK skp_err pg_store_cont_put_slots(struct store *base, const struct store_cont_slot *v,
                                               size_t n);
SKP_MUST_CHECK skp_err pg_store_cont_list_slots(struct store *base, int64_t from_ms, int64_t to_ms,
                                                store_cont_slot_cb cb, void *ud);
SKP_MUST_CHECK skp_err pg_store_cont_lease(struct store *base, const char *name, int64_t holder,
                                           int64_t ttl_ms, bool *held);
SKP_MUST_CHECK skp_err pg_store_cont_claim_firing(struct store *base, const char *service,
                                                  const char *target, int64_t window_ms,
                                                  bool *claimed);
SKP_MUST_CHECK skp_err pg_store_cont_purge_cluster(struct store *base, int64_t before_ms,
                                                   int64_t claims_before_ms);

#endif
