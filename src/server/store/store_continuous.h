/* store_continuous.h - storage of continuous-profiling policies (one per service: its uuid and
 * canonical JSON, continuous_policy.h) and of triggers (when, which target, the task created,
 * and each cause: monitor type, URI, threshold, current value, window). Plain C rows in and out
 * (no JSON objects, no protobuf types): the policy JSON is an opaque text here.
 * Implemented in store_cont_policies.c (policies, both backends), sqlite/store_sqlite_continuous.c
 * and postgres/store_pg_continuous.c (triggers), postgres/store_pg_cluster.c (cluster state).
 *
 * Threading: like every store function, on the thread that owns `st`. */
#ifndef SKP_SERVER_STORE_CONTINUOUS_H
#define SKP_SERVER_STORE_CONTINUOUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/store/store.h"
#include "skyprof/skp_err.h"

/* A policy row (strings borrowed from the store during the callback). */
struct store_cont_policy_row {
    const char *service;
    const char *uuid;
    const char *json;
    int64_t updated_ms;
};
typedef skp_err (*store_cont_policy_cb)(void *ud, const struct store_cont_policy_row *r);

/* Inserts or replaces the policy of `service`. Errors: SKP_EIO, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err store_cont_put_policy(struct store *st, const char *service,
                                             const char *uuid, const char *json, int64_t now_ms);
/* Errors: SKP_ENOTFOUND (no policy), SKP_EIO. */
SKP_MUST_CHECK skp_err store_cont_delete_policy(struct store *st, const char *service);
/* Visits the policies (of `service` only unless NULL) by service name. Errors: SKP_EIO,
 * SKP_ENOMEM, or the callback's. */
SKP_MUST_CHECK skp_err store_cont_list_policies(struct store *st, const char *service,
                                                store_cont_policy_cb cb, void *ud);

/* One cause of a trigger. */
struct store_cont_cause {
    const char *type; /* monitor type name, e.g. ENDPOINT_P99_RESPONSE_TIME */
    const char *uri;  /* NULL for single-value causes */
    bool uri_is_regex;
    double threshold;
    double current;
    int64_t window_s; /* the window judged (0 when the agent did not say) */
    int64_t hits;     /* slots of the window at or above the threshold (0 = unknown) */
};

/* One trigger (strings borrowed). */
struct store_cont_trigger {
    int64_t id; /* set by the store */
    const char *service;
    const char *instance; /* NULL when not one instance */
    const char *process;  /* agent-side triggers: the process name, else NULL */
    int64_t time_ms;
    const char *target;    /* target type name */
    const char *source;    /* "server" (skyprofd's evaluator) or "agent" */
    const char *task_kind; /* "trace", "pprof", "ebpf" or NULL (no task) */
    const char *task_id;   /* NULL when no task was created */
    const char *note;      /* why no task, or NULL */
    const struct store_cont_cause *causes;
    size_t n_causes;
};
typedef skp_err (*store_cont_trigger_cb)(void *ud, const struct store_cont_trigger *t);

/* Stores a trigger and its causes in one transaction; *id_out (may be NULL) gets its id.
 * Errors: SKP_EIO, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err store_cont_insert_trigger(struct store *st,
                                                 const struct store_cont_trigger *t,
                                                 int64_t *id_out);
/* Visits triggers newest first, of `service` (NULL = all) and of `task_id` (NULL = any), at most
 * `limit` (0 = 1000), with their causes. Errors: SKP_EIO, SKP_ENOMEM, or the callback's. */
SKP_MUST_CHECK skp_err store_cont_list_triggers(struct store *st, const char *service,
                                                const char *task_id, size_t limit,
                                                store_cont_trigger_cb cb, void *ud);

/* ---- several collectors on one database (PostgreSQL; SQLite answers SKP_ENOTSUP) ---- */

/* One collector's share of one endpoint's requests in one evaluator slot (borrowed strings and
 * bytes). `hist` is endpoint_stats' histogram encoding (es_hist_encode), so the shares of all
 * collectors merge exactly; `instances` the instances that served it, '\n'-separated. */
struct store_cont_slot {
    const char *service;
    const char *endpoint;
    int64_t slot_ms; /* the slot's start */
    int64_t writer;  /* the collector's id for this run */
    int64_t count, errors;
    double sum_ms;
    const uint8_t *hist;
    size_t hist_len;
    const char *instances;
};
typedef skp_err (*store_cont_slot_cb)(void *ud, const struct store_cont_slot *s);

/* Inserts or replaces (same service, endpoint, slot, writer) n slot shares in one statement.
 * Errors: SKP_ENOTSUP (a single-collector backend), SKP_EIO, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err store_cont_put_slots(struct store *st, const struct store_cont_slot *v,
                                            size_t n);
/* Visits every writer's shares of the slots starting in [from_ms, to_ms), ordered by service,
 * endpoint, slot and writer (one statement). Errors: SKP_ENOTSUP, SKP_EIO, SKP_ENOMEM, or the
 * callback's. */
SKP_MUST_CHECK skp_err store_cont_list_slots(struct store *st, int64_t from_ms, int64_t to_ms,
                                             store_cont_slot_cb cb, void *ud);
/* Takes or renews the lease `name` for `holder` for ttl_ms of the database's clock: granted
 * when it is free, expired or already the holder's (one statement). *held says whether it was
 * granted. ttl_ms == 0 gives it up (when it is the holder's). Errors: SKP_ENOTSUP, SKP_EIO. */
SKP_MUST_CHECK skp_err store_cont_lease(struct store *st, const char *name, int64_t holder,
                                        int64_t ttl_ms, bool *held);
/* Claims the firing of (service, target, window_ms) - the end of the window judged - once
 * across the collectors: *claimed is true for the first claim only. Errors: SKP_ENOTSUP,
 * SKP_EIO. */
SKP_MUST_CHECK skp_err store_cont_claim_firing(struct store *st, const char *service,
                                               const char *target, int64_t window_ms,
                                               bool *claimed);
/* Deletes slot shares older than before_ms and firing claims older than claims_before_ms.
 * Errors: SKP_ENOTSUP, SKP_EIO. */
SKP_MUST_CHECK skp_err store_cont_purge_cluster(struct store *st, int64_t before_ms,
                                                int64_t claims_before_ms);

#endif
