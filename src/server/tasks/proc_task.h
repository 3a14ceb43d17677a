/* proc_task.h - process-profiling tasks: one task model for SkyWalking's pprof tasks
 * (skywalking.v10.PprofTask, spec §1) and async-profiler tasks (AsyncProfilerTask, spec §2).
 * A task profiles whole processes (instances of a service) for a while; each instance's agent
 * polls for it, runs it and uploads one file (pprof or JFR) through a metadata-first chunked
 * stream (collector_proc.h). This module holds the lifecycle rules: validation with OAP's texts
 * (and our extensions), "all live instances" resolution, ids, the overlap rule, the command an
 * agent receives and the per-instance progress derived from the logs. Storage: store_proc.h.
 *
 * How the async-profiler tasks plug in (issue 13): create with kind PROC_KIND_ASYNC_PROFILER
 * through proc_task_create after validating with a proc_task_validate_async (its own rule list:
 * spec §2 texts, duration in seconds, events CPU/WALL/LOCK/ALLOC/CTIMER/ITIMER joined by ','),
 * serve getAsyncProfilerTaskCommands with store_proc_next_task(kind = ASYNC_PROFILER) + a
 * command builder beside proc_command_pprof, and answer `collect` with the generic upload
 * collector (collector_proc.h: give it the kind, the too-large log op
 * JFR_UPLOAD_FILE_TOO_LARGE_ERROR and a function packing AsyncProfilerCollectionResponse). The
 * progress, logs, file storage, retention and HTTP listing below work unchanged.
 *
 * Single-threaded (the server loop) except the pure functions. */
#ifndef SKP_SERVER_PROC_TASK_H
#define SKP_SERVER_PROC_TASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/Command.pb-c.h"
#include "server/store/store_proc.h"
#include "skyprof/skp_err.h"

/* OAP's pprof limit on sampling durations. */
#define PROC_PPROF_DURATION_MAX_MIN 15
/* Instances a request may name. */
#define PROC_MAX_INSTANCES 1000
/* Longest instance or service name accepted. */
#define PROC_NAME_MAX 1024
/* An instance counts as live when it reported (heartbeat, segments) within this window. */
#define PROC_LIVE_WINDOW_MS (3 * 60 * 1000)
/* Our sampling-rate extension: samples per second an agent may be asked for. */
#define PROC_SAMPLING_HZ_MAX 1000
/* A task is still handed to agents until create time + duration + this grace (an agent that
 * polls every 20 s and starts late still takes an instant task such as a heap dump). */
#define PROC_POLL_GRACE_MS (5 * 60 * 1000)
/* Log operations (SkyWalking's names, plus UPLOAD_INCOMPLETE: ours). */
#define PROC_LOG_NOTIFIED "NOTIFIED"
#define PROC_LOG_FINISHED "EXECUTION_FINISHED"
#define PROC_LOG_TASK_ERROR "EXECUTION_TASK_ERROR"
#define PROC_LOG_PPROF_TOO_LARGE "PPROF_UPLOAD_FILE_TOO_LARGE_ERROR"
#define PROC_LOG_JFR_TOO_LARGE "JFR_UPLOAD_FILE_TOO_LARGE_ERROR"
#define PROC_LOG_INCOMPLETE "UPLOAD_INCOMPLETE"

/* A creation request as the API received it (all borrowed; NULL = missing). */
struct proc_request {
    const char *service;
    const char *const *instances; /* n_instances = 0: every live instance of the service */
    size_t n_instances;
    const char *const *events;
    size_t n_events;
    int64_t duration; /* pprof: minutes */
    int64_t dump_period;
    int64_t sampling_hz;   /* 0 = the agent's default */
    const char *exec_args; /* async-profiler only */
};

/* Why a request was refused (static strings): the errorReason text and its field. */
struct proc_error {
    const char *reason;
    const char *field;
};

/* True when `ev` is a pprof event we accept (cpu, wall, heap, allocs, block, mutex, goroutine,
 * threadcreate; lower case). Pure. */
bool proc_pprof_event_known(const char *ev);
/* True for the events sampled over Duration (cpu, wall, block, mutex); the others are dumps
 * taken at once. Pure. */
bool proc_pprof_event_timed(const char *ev);

/* Checks a pprof request's fields in OAP's order (spec §1), then ours; true if valid, else *e
 * names the first violated rule. Does not check instances (creation resolves them). Pure. */
bool proc_task_validate_pprof(const struct proc_request *r, struct proc_error *e);
/* Sets *e to the refusal (`reason`, `field`) and returns false: a validation's return. */
bool proc_task_refuse(struct proc_error *e, const char *reason, const char *field);
/* The first check of both kinds, OAP's: clears *e, then refuses a request without a service.
 * False with *e set when it has none. */
bool proc_task_service_given(const struct proc_request *r, struct proc_error *e);
/* The checks pprof and async-profiler tasks share on the names of r: the service's length, the
 * number of instances, each instance's name. False with *e set when one fails. */
bool proc_task_names_ok(const struct proc_request *r, struct proc_error *e);

/* Validates (pprof, or async-profiler: proc_task_async.h), resolves "all live instances"
 * (PROC_LIVE_WINDOW_MS before now_ms), applies the overlap rule (same service and event, create +
 * duration reaching now) and stores the task. On success *id_out is the new id (caller frees with
 * skpx_free). Errors: SKP_EINVAL (refused: *e says why), SKP_EEXIST (overlap: *e says so), SKP_EIO,
 * SKP_ENOMEM. */
SKP_MUST_CHECK skp_err proc_task_create(struct store *st, enum proc_kind kind,
                                        const struct proc_request *r, int64_t now_ms,
                                        struct proc_error *e, char **id_out);

/* "running" while now < create + duration (at least 1 minute for dump events), then
 * "finished"; "cancelled" once cancelled. */
const char *proc_task_status(const struct proc_task *t, int64_t now_ms);

/* Per-instance progress derived from the logs (borrowed strings point into the logs and the
 * task). */
struct proc_progress {
    const char *instance;
    int64_t notified_ms;       /* 0 = not yet */
    int64_t uploaded_ms;       /* EXECUTION_FINISHED time, 0 = not yet */
    int64_t failed_ms;         /* 0 = no failure */
    const char *failed_op;     /* log op of the failure, NULL if none */
    const char *failed_reason; /* its message, NULL if none */
};
/* Fills out[0..*n) with one entry per instance of `t`, plus any instance that logged without
 * being listed; cap entries at most (entries past cap are dropped). Pure. */
void proc_task_progress(const struct proc_task *t, const struct proc_log *logs, size_t n_logs,
                        struct proc_progress *out, size_t cap, size_t *n);

/* Arguments of a PprofTaskQuery command. */
#define PROC_PPROF_N_ARGS 7
/* A PprofTaskQuery command with its storage (no allocation): args SerialNumber, TaskId,
 * Events, Duration (minutes), CreateTime (ms), DumpPeriod, and SamplingRate (ours, only when
 * the task sets one). `cmd` borrows the task's strings. */
struct proc_command {
    Skywalking__V3__Command cmd;
    Skywalking__V3__KeyStringValuePair kv[PROC_PPROF_N_ARGS];
    Skywalking__V3__KeyStringValuePair *kvp[PROC_PPROF_N_ARGS];
    char serial[37];
    char nums[4][24];
};
void proc_command_pprof(struct proc_command *pc, const struct proc_task *t);
/* Sets argument i of a command being built: kv[i] = {k, v} (both borrowed: static or in the
 * command's storage) and kvp[i] = &kv[i]. */
void proc_command_arg(Skywalking__V3__KeyStringValuePair *kv,
                      Skywalking__V3__KeyStringValuePair **kvp, size_t i, const char *k,
                      const char *v);

#endif
