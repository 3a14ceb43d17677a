/* store_continuous.h - storage of continuous-profiling policies (one per service: its uuid and
 * canonical JSON, continuous_policy.h) and of triggers (when, which target, the task created,
 * and each cause: monitor type, URI, threshold, current value, window). Plain C rows in and out
 * (no JSON objects, no protobuf types): the policy JSON is an opaque text here.
 * Implemented in store_sqlite_continuous.c (schema step 5).
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

#endif
