/* continuous_trigger.h - what happens when a continuous-profiling policy fires (issue 11): the
 * task is created for the target and the trigger is stored with its causes. Used by skyprofd's
 * evaluator (collector_continuous.c, source "server") and by ContinuousProfilingService's
 * reportProfilingTask (an agent's local checks fired, source "agent").
 *
 * For other modules (EBPFProfilingService, helper `contagent`): an agent-side trigger of
 * ON_CPU / OFF_CPU / NETWORK creates no skyprofd task row; its task id (task_kind "ebpf", made
 * by continuous_trigger_record and answered as the TaskId arg of ContinuousProfilingReportTask)
 * names the profile the agent then uploads with EBPFProfilingService.collectProfilingData. To
 * find the trigger (service, instance, process, target, causes, time) of such a task id:
 * store_cont_list_triggers(st, NULL, task_id, 1, cb, ud) (store_continuous.h). The task's
 * profiling duration is the trigger's `duration_s` (the report's `duration`).
 *
 * Targets → tasks:
 *   TRACE                 a trace-profiling task (task_service.h) for the endpoint that crossed,
 *                         min-duration threshold = floor(threshold) for the *_RESPONSE_TIME items
 *                         (requests slower than the policy's threshold get sampled), 0 for
 *                         ENDPOINT_ERROR_RATE; duration = executeDuration rounded up to minutes
 *                         (1-15); dump period 10 ms; 5 samplings;
 *   PPROF_CPU, ON_CPU     server side: a pprof "cpu" process task (proc_task.h) on the instances
 *   PPROF_WALL, OFF_CPU   ("wall") that served the endpoint lately; agent side: "ebpf" (above);
 *   NETWORK               server side: recorded with a note, no task; agent side: "ebpf".
 * Loop thread only. */
#ifndef SKP_SERVER_CONTINUOUS_TRIGGER_H
#define SKP_SERVER_CONTINUOUS_TRIGGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/continuous/continuous_policy.h"
#include "server/store/store_continuous.h"
#include "skyprof/skp_err.h"

struct cont_trigger_req {
    const char *service;
    const char *instance; /* the reporting instance (agent) or NULL */
    const char *process;  /* agent side: the process name, else NULL */
    enum cont_target target;
    bool from_agent; /* reportProfilingTask (else skyprofd's evaluator) */
    const struct store_cont_cause *causes;
    size_t n_causes;
    int64_t duration_s;           /* the task's profiling time (s) */
    const char *endpoint;         /* TRACE: the endpoint to profile */
    int64_t min_duration_ms;      /* TRACE: the task's min-duration threshold */
    const char *const *instances; /* PPROF_*: the instances to profile (none: all live) */
    size_t n_instances;
};

struct cont_trigger_result {
    int64_t trigger_id;
    char task_id[160];     /* "" when no task was created */
    const char *task_kind; /* "trace", "pprof", "ebpf" or NULL (static) */
    int64_t task_end_ms;   /* when the created task ends (0 = none) */
    char note[160];        /* why no task, "" otherwise */
};

/* Creates the target's task (a refusal, e.g. another trace task of the service running, is
 * noted on the trigger, not an error) and stores the trigger with its causes at now_ms.
 * Errors: SKP_EIO, SKP_ENOMEM (the trigger could not be stored). */
SKP_MUST_CHECK skp_err continuous_trigger_record(struct store *st, const struct cont_trigger_req *r,
                                                 int64_t now_ms, struct cont_trigger_result *out);

/* "ENDPOINT_P99_RESPONSE_TIME of /checkout: 812 ms ≥ 500 ms (4 of 10 s)" into out. */
void continuous_cause_text(const struct store_cont_cause *c, char *out, size_t cap);

#endif
