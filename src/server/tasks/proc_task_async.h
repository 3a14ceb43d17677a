/* proc_task_async.h - the async-profiler side of process-profiling tasks (spec §2,
 * skywalking.v10.AsyncProfilerTask): request validation with OAP's texts, the events a task
 * stores ("CPU,ALLOC": upper case, comma-joined) and the AsyncProfilerTaskQuery command an agent
 * receives. The shared lifecycle (ids, instances, logs, files) is proc_task.h's. Pure functions. */
#ifndef SKP_SERVER_PROC_TASK_ASYNC_H
#define SKP_SERVER_PROC_TASK_ASYNC_H

#include <stdbool.h>
#include <stddef.h>

#include "common/Command.pb-c.h"
#include "server/tasks/proc_task.h"

/* Longest execArgs accepted (async-profiler options such as "interval=10ms,jstackdepth=2048"). */
#define PROC_ASYNC_EXEC_ARGS_MAX 512
/* Our limit on a task's sampling time (OAP has none): one hour. */
#define PROC_ASYNC_DURATION_MAX_S 3600
/* Room for the stored events ("CPU,WALL,LOCK,ALLOC,CTIMER,ITIMER" is 32 bytes). */
#define PROC_ASYNC_EVENTS_MAX 64

/* Checks an async-profiler request (duration in seconds) in OAP's order, then ours; true if
 * valid, else *e names the first violated rule. Pure. */
bool proc_task_validate_async(const struct proc_request *r, struct proc_error *e);
/* The events of a valid request as stored: upper case, comma-joined, in request order. */
void proc_async_events(const struct proc_request *r, char *out, size_t cap);

#define PROC_ASYNC_N_ARGS 5
/* An AsyncProfilerTaskQuery command with its storage: args SerialNumber, TaskId, Duration
 * (seconds), CreateTime (ms), ExecArgs ("event=" + lower-case events + "," + execArgs when the
 * task has them), as OAP builds them. `cmd` borrows the task's strings. */
struct proc_async_command {
    Skywalking__V3__Command cmd;
    Skywalking__V3__KeyStringValuePair kv[PROC_ASYNC_N_ARGS];
    Skywalking__V3__KeyStringValuePair *kvp[PROC_ASYNC_N_ARGS];
    char serial[37];
    char nums[2][24];
    char exec_args[PROC_ASYNC_EVENTS_MAX + PROC_ASYNC_EXEC_ARGS_MAX + 16];
};
void proc_command_async(struct proc_async_command *pc, const struct proc_task *t);

#endif
