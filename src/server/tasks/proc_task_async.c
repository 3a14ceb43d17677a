/* proc_task_async.c - async-profiler task rules (see proc_task_async.h). */
#include "server/tasks/proc_task_async.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "server/tasks/task_service.h"

/* OAP's texts (AsyncProfilerMutationService), verbatim. */
#define R_DURATION_NEG "duration cannot be negative"
#define R_EVENTS "events cannot be empty"
/* Ours. */
#define R_EVENT_UNKNOWN "unknown event (one of CPU, WALL, LOCK, ALLOC, CTIMER, ITIMER)"
#define R_EVENT_TWICE "events cannot repeat"
#define R_DURATION_MAX "duration cannot be greater than 3600 seconds"
#define R_EXEC_ARGS                                                                                \
    "execArgs must be at most 512 characters among letters, digits and = , . _ : / + % -"

static const char *const k_events[] = {"CPU", "WALL", "LOCK", "ALLOC", "CTIMER", "ITIMER"};
#define N_EVENTS (sizeof(k_events) / sizeof(k_events[0]))

static int event_index(const char *ev)
{
    for (size_t i = 0; ev && i < N_EVENTS; i++)
        if (strcasecmp(ev, k_events[i]) == 0)
            return (int)i;
    return -1;
}

static bool exec_args_ok(const char *s)
{
    if (strlen(s) > PROC_ASYNC_EXEC_ARGS_MAX)
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("=,._:/+%-", *s))
            return false;
    return true;
}

bool proc_task_validate_async(const struct proc_request *r, struct proc_error *e)
{
    if (!proc_task_service_given(r, e))
        return false;
    if (r->duration <= 0)
        return proc_task_refuse(e, R_DURATION_NEG, "duration");
    if (r->n_events == 0)
        return proc_task_refuse(e, R_EVENTS, "events");
    /* Ours, after OAP's so its message wins whenever both apply. (OAP also refuses an empty
     * instance list; we take it as "every live instance", like the pprof tasks, and answer
     * OAP's text when there is none.) */
    bool seen[N_EVENTS] = {false};
    for (size_t i = 0; i < r->n_events; i++) {
        int k = event_index(r->events[i]);
        if (k < 0)
            return proc_task_refuse(e, R_EVENT_UNKNOWN, "events");
        if (seen[k])
            return proc_task_refuse(e, R_EVENT_TWICE, "events");
        seen[k] = true;
    }
    if (r->duration > PROC_ASYNC_DURATION_MAX_S)
        return proc_task_refuse(e, R_DURATION_MAX, "duration");
    if (r->exec_args && !exec_args_ok(r->exec_args))
        return proc_task_refuse(e, R_EXEC_ARGS, "execArgs");
    if (!proc_task_names_ok(r, e))
        return false;
    return true;
}

void proc_async_events(const struct proc_request *r, char *out, size_t cap)
{
    size_t k = 0;
    out[0] = '\0';
    for (size_t i = 0; i < r->n_events; i++) {
        int idx = event_index(r->events[i]);
        if (idx < 0)
            continue;
        int n = snprintf(out + k, cap - k, "%s%s", k ? "," : "", k_events[idx]);
        if (n < 0 || (size_t)n >= cap - k)
            break;
        k += (size_t)n;
    }
}

void proc_command_async(struct proc_async_command *pc, const struct proc_task *t)
{
    memset(pc, 0, sizeof(*pc));
    skywalking__v3__command__init(&pc->cmd);
    pc->cmd.command = "AsyncProfilerTaskQuery";
    task_uuid(pc->serial);
    snprintf(pc->nums[0], sizeof(pc->nums[0]), "%" PRId64, t->duration_s);
    snprintf(pc->nums[1], sizeof(pc->nums[1]), "%" PRId64, t->create_time);
    /* "event=" + the events in lower case, as OAP's AsyncProfilerTaskCommand builds it. */
    size_t k = (size_t)snprintf(pc->exec_args, sizeof(pc->exec_args), "event=");
    for (const char *p = t->events ? t->events : ""; *p && k + 1 < PROC_ASYNC_EVENTS_MAX + 6; p++)
        pc->exec_args[k++] = (char)tolower((unsigned char)*p);
    pc->exec_args[k] = '\0';
    if (t->exec_args && t->exec_args[0])
        snprintf(pc->exec_args + k, sizeof(pc->exec_args) - k, ",%s", t->exec_args);
    size_t n = 0;
    proc_command_arg(pc->kv, pc->kvp, n++, "SerialNumber", pc->serial);
    proc_command_arg(pc->kv, pc->kvp, n++, "TaskId", t->id);
    proc_command_arg(pc->kv, pc->kvp, n++, "Duration", pc->nums[0]);
    proc_command_arg(pc->kv, pc->kvp, n++, "CreateTime", pc->nums[1]);
    proc_command_arg(pc->kv, pc->kvp, n++, "ExecArgs", pc->exec_args);
    pc->cmd.n_args = n;
    pc->cmd.args = pc->kvp;
}
