/* task_service.h - the profile tasks an agent knows: validation (SkyWalking's rules with a correct
 * overlap test), the lastCommandTime cursor, and scheduling decisions (start at StartTime on the
 * agent clock, stop after Duration, one active task, a task whose start arrives preempts the
 * running one, a finish report exactly once per started task).
 * Pure logic with the time passed in: the caller (the channel thread, under the agent lock)
 * executes the actions. Not thread-safe; the owner serializes calls. */
#ifndef SKP_AGENT_TASK_SERVICE_H
#define SKP_AGENT_TASK_SERVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/agent_limits.h"
#include "skyprof/skp_err.h"

/* SkyWalking ProfileConstants */
#define SKP_TASK_DURATION_MIN_MINUTE 1
#define SKP_TASK_DURATION_MAX_MINUTE 15
#define SKP_TASK_MAX_SAMPLING_COUNT 10 /* exclusive */

struct skp__task {
    char task_id[SKP_TASK_ID_MAX];
    char endpoint[SKP_ENDPOINT_MAX];
    int duration_min;
    int min_duration_threshold_ms;
    int dump_period_ms;
    int max_sampling_count;
    int64_t start_time_ms;  /* agent clock */
    int64_t create_time_ms; /* cursor value; -1 when unknown (local task) */
};

enum skp__task_action_kind {
    SKP_TASK_ACTION_NONE = 0,
    SKP_TASK_ACTION_START = 1, /* start sampling `task` now; it stops at stop_at_ms */
    SKP_TASK_ACTION_STOP = 2,  /* stop the active `task` and send its finish report */
};

struct skp__task_action {
    enum skp__task_action_kind kind;
    struct skp__task task;
    int64_t stop_at_ms; /* START: when the task ends */
    bool preempted;     /* STOP: ended early because a newer task started */
};

struct skp__task_service {
    struct skp__task tasks[SKP_TASK_LIST_MAX]; /* scheduled or active, in insertion order */
    bool started[SKP_TASK_LIST_MAX];
    int n_tasks;
    int active; /* index of the running task, -1 when none */
    int64_t active_stop_ms;
    int64_t last_command_time; /* max CreateTime seen, -1 initially */
    int64_t min_dump_period_ms;
    uint64_t n_accepted;
    uint64_t n_rejected;
    uint64_t n_finished;
    char last_reject_reason[128];
};

void skp__task_service_init(struct skp__task_service *ts, int64_t min_dump_period_ms);

/* Validates `t` against SkyWalking's rules: endpoint non-empty; 1 <= duration <= 15 min;
 * threshold >= 0; dump period >= min_dump_period_ms; 0 < max sampling < 10; and no overlap of
 * [start, start + duration) with a task already known. Writes the reason into reason (cap bytes)
 * on failure. Errors: SKP_EINVAL. Pure. */
SKP_MUST_CHECK skp_err skp__task_validate(const struct skp__task_service *ts,
                                          const struct skp__task *t, char *reason, size_t cap);

/* Adds a task received at now_ms: first raises the cursor to t->create_time_ms (even when the task
 * is then rejected, as SkyWalking does, so a refused task is not offered again), then validates
 * and appends. Errors: SKP_EINVAL (rejected: counted, reason in last_reject_reason), SKP_EFULL
 * (too many known tasks). */
SKP_MUST_CHECK skp_err skp__task_service_add(struct skp__task_service *ts,
                                             const struct skp__task *t);

/* Returns the next due action at now_ms (call until it returns NONE): STOP of the active task when
 * its time is up or when another task's start time has come (preemption), else START of the
 * earliest due task. *next_ms receives the time of the next future action (INT64_MAX if none). */
enum skp__task_action_kind skp__task_service_next(struct skp__task_service *ts, int64_t now_ms,
                                                  struct skp__task_action *act, int64_t *next_ms);

/* Stops the active task now (agent stop, source change): returns true and fills act (STOP) if one
 * was active. Scheduled tasks that never started are dropped without a report. */
bool skp__task_service_stop_active(struct skp__task_service *ts, struct skp__task_action *act);

#endif
