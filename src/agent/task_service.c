/* task_service.c - task list, validation and scheduling decisions (see task_service.h).
 * Differences from SkyWalking, on purpose: overlap is the interval test [s1,e1) x [s2,e2)
 * (Python compares the new task with itself; Java misses a new task that encloses an old one);
 * a task is removed once stopped so it never blocks later tasks. */
#include "agent/task_service.h"

#include <stdio.h>
#include <string.h>

#include "common/log.h"

void skp__task_service_init(struct skp__task_service *ts, int64_t min_dump_period_ms)
{
    memset(ts, 0, sizeof(*ts));
    ts->active = -1;
    ts->last_command_time = -1;
    ts->min_dump_period_ms = min_dump_period_ms > 0 ? min_dump_period_ms : 10;
}

static int64_t task_end(const struct skp__task *t)
{
    return t->start_time_ms + (int64_t)t->duration_min * 60000;
}

skp_err skp__task_validate(const struct skp__task_service *ts, const struct skp__task *t,
                           char *reason, size_t cap)
{
    if (t->endpoint[0] == '\0') {
        snprintf(reason, cap, "endpoint name cannot be empty");
        return SKP_EINVAL;
    }
    if (t->duration_min < SKP_TASK_DURATION_MIN_MINUTE ||
        t->duration_min > SKP_TASK_DURATION_MAX_MINUTE) {
        snprintf(reason, cap, "monitor duration must be between %d and %d minutes",
                 SKP_TASK_DURATION_MIN_MINUTE, SKP_TASK_DURATION_MAX_MINUTE);
        return SKP_EINVAL;
    }
    if (t->min_duration_threshold_ms < 0) {
        snprintf(reason, cap, "min duration threshold must be greater than or equal to 0");
        return SKP_EINVAL;
    }
    if (t->dump_period_ms < ts->min_dump_period_ms) {
        snprintf(reason, cap, "dump period must be greater than or equal to %lld milliseconds",
                 (long long)ts->min_dump_period_ms);
        return SKP_EINVAL;
    }
    if (t->max_sampling_count <= 0 || t->max_sampling_count >= SKP_TASK_MAX_SAMPLING_COUNT) {
        snprintf(reason, cap, "max sampling count must be greater than 0 and less than %d",
                 SKP_TASK_MAX_SAMPLING_COUNT);
        return SKP_EINVAL;
    }
    int64_t s = t->start_time_ms;
    int64_t e = task_end(t);
    for (int i = 0; i < ts->n_tasks; i++) {
        const struct skp__task *o = &ts->tasks[i];
        if (s < task_end(o) && o->start_time_ms < e) {
            snprintf(reason, cap, "task time overlaps with task %.60s", o->task_id);
            return SKP_EINVAL;
        }
    }
    return SKP_OK;
}

skp_err skp__task_service_add(struct skp__task_service *ts, const struct skp__task *t)
{
    if (t->create_time_ms > ts->last_command_time)
        ts->last_command_time = t->create_time_ms;
    char reason[sizeof(ts->last_reject_reason)];
    skp_err err = skp__task_validate(ts, t, reason, sizeof(reason));
    if (!err && ts->n_tasks >= SKP_TASK_LIST_MAX) {
        snprintf(reason, sizeof(reason), "too many scheduled tasks");
        err = SKP_EFULL;
    }
    if (err) {
        ts->n_rejected++;
        memcpy(ts->last_reject_reason, reason, sizeof(reason));
        SKPX_WARN("skyprof: profile task %.100s rejected: %s", t->task_id, reason);
        return err;
    }
    ts->tasks[ts->n_tasks] = *t;
    ts->started[ts->n_tasks] = false;
    ts->n_tasks++;
    ts->n_accepted++;
    SKPX_INFO("skyprof: profile task %.100s accepted (endpoint %.200s, start %lld)", t->task_id,
              t->endpoint, (long long)t->start_time_ms);
    return SKP_OK;
}

static void remove_at(struct skp__task_service *ts, int i)
{
    for (int j = i; j + 1 < ts->n_tasks; j++) {
        ts->tasks[j] = ts->tasks[j + 1];
        ts->started[j] = ts->started[j + 1];
    }
    ts->n_tasks--;
    if (ts->active > i)
        ts->active--;
    else if (ts->active == i)
        ts->active = -1;
}

static void take_stop(struct skp__task_service *ts, struct skp__task_action *act, bool preempted)
{
    act->kind = SKP_TASK_ACTION_STOP;
    act->task = ts->tasks[ts->active];
    act->preempted = preempted;
    act->stop_at_ms = ts->active_stop_ms;
    ts->n_finished++;
    remove_at(ts, ts->active); /* a stopped task is gone: finish is reported exactly once */
}

enum skp__task_action_kind skp__task_service_next(struct skp__task_service *ts, int64_t now_ms,
                                                  struct skp__task_action *act, int64_t *next_ms)
{
    memset(act, 0, sizeof(*act));
    /* earliest not-started task */
    int due = -1;
    for (int i = 0; i < ts->n_tasks; i++) {
        if (ts->started[i])
            continue;
        if (due < 0 || ts->tasks[i].start_time_ms < ts->tasks[due].start_time_ms)
            due = i;
    }
    bool due_now = due >= 0 && ts->tasks[due].start_time_ms <= now_ms;
    if (ts->active >= 0 && (now_ms >= ts->active_stop_ms || due_now)) {
        take_stop(ts, act, now_ms < ts->active_stop_ms);
    } else if (due_now && task_end(&ts->tasks[due]) <= now_ms) {
        /* Its whole window is in the past (delivered late, e.g. to an agent that joined after the
         * task ended): never started, so no finish report. */
        SKPX_INFO("skyprof: profile task %.100s expired before it could start",
                  ts->tasks[due].task_id);
        remove_at(ts, due);
        return skp__task_service_next(ts, now_ms, act, next_ms);
    } else if (due_now) {
        ts->started[due] = true;
        ts->active = due;
        /* The window is [StartTime, StartTime + Duration) on the agent clock: an agent that gets
         * the task late (joined late, or the poll came after StartTime) samples only what is left
         * of it, so all instances stop together. */
        ts->active_stop_ms = task_end(&ts->tasks[due]);
        act->kind = SKP_TASK_ACTION_START;
        act->task = ts->tasks[due];
        act->stop_at_ms = ts->active_stop_ms;
    }
    /* next future event */
    int64_t next = INT64_MAX;
    if (ts->active >= 0 && ts->active_stop_ms < next)
        next = ts->active_stop_ms;
    for (int i = 0; i < ts->n_tasks; i++)
        if (!ts->started[i] && ts->tasks[i].start_time_ms < next)
            next = ts->tasks[i].start_time_ms;
    if (next_ms)
        *next_ms = next;
    return act->kind;
}

bool skp__task_service_stop_active(struct skp__task_service *ts, struct skp__task_action *act)
{
    memset(act, 0, sizeof(*act));
    if (ts->active < 0)
        return false;
    take_stop(ts, act, true);
    return true;
}
