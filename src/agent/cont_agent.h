/* cont_agent.h - threshold-triggered ("continuous") profiling in the agent, on the channel
 * thread (no thread of its own):
 *   - queries the service's policy (ContinuousProfilingService.queryPolicies, uuid cursor) on
 *     the task-poll schedule;
 *   - while a policy exists, closes one evaluation slot per second (cont_eval.h): process CPU
 *     from CLOCK_PROCESS_CPUTIME_ID, the thread count from one /proc/self/stat read, the load
 *     from sysinfo(2), the HTTP checks from the request-path counters (cont_http.h);
 *   - when a target fires and no task of ours runs or is in its silence: reportProfilingTask
 *     with the causes, EBPFProcessService.reportProcesses for this process (then keepAlive with
 *     each heartbeat), and the target run by the process profiler (proc_task.h: ON_CPU = a cpu
 *     profile, OFF_CPU = a wall profile) for the execute duration;
 *   - uploads the result through EBPFProfilingService.collectProfilingData as rover does: one
 *     message per stack, stackSymbols innermost first, dumpCount (ON_CPU) or switchCount +
 *     duration in ns (OFF_CPU); then stays silent for the silence duration.
 * Defaults are rover's (execute 10 min, silence 20 min); the policy's ExecuteDuration /
 * SilenceDuration and the test settings SKYPROF_CONT_EXECUTE_S, SKYPROF_CONT_SILENCE_S and
 * SKYPROF_CONT_SLOT_MS (slot length, default 1000) override them. */
#ifndef SKP_AGENT_CONT_AGENT_H
#define SKP_AGENT_CONT_AGENT_H

#include <stdbool.h>
#include <stdint.h>

#include "agent/agent_limits.h"
#include "agent/cont_eval.h"

#define SKP_CONT_COMMAND_POLICY "ContinuousProfilingPolicyQuery"
#define SKP_CONT_COMMAND_TASK "ContinuousProfilingReportTask"
#define SKP_CONT_PROCESS_ID_MAX 80
#define SKP_CONT_DEFAULT_EXECUTE_S 600
#define SKP_CONT_DEFAULT_SILENCE_S 1200

enum skp__cont_state {
    SKP_CONT_IDLE = 0,
    SKP_CONT_RUNNING = 1, /* our task runs in the process profiler, or waits for its upload */
};

struct skp__cont_stats {
    uint64_t policy_updates;
    uint64_t policy_errors;
    uint64_t slots;
    uint64_t triggers;         /* reportProfilingTask answered with a task */
    uint64_t trigger_failures; /* report refused / no task id / profiler busy */
    uint64_t uploads;
    uint64_t upload_failures;
    uint64_t stacks_sent;
};

struct skp__cont_agent {
    struct skp__cont_eval eval;
    char uuid[SKP_CONT_UUID_MAX]; /* the policy we hold ("" none) */
    bool has_policy;
    int execute_s, silence_s;         /* in effect */
    int env_execute_s, env_silence_s; /* test settings, 0 = none */
    int64_t slot_ns;
    int64_t next_slot_ns;              /* monotonic; 0 = no slot scheduled */
    int64_t last_cpu_ns, last_wall_ns; /* previous slot's readings */
    int state;                         /* enum skp__cont_state */
    int64_t silent_until_ms;           /* wall time */
    char task_id[SKP_TASK_ID_MAX];
    int task_target;
    char process_id[SKP_CONT_PROCESS_ID_MAX]; /* "" until reportProcesses answered */
    int64_t next_ping_ns;
    int upload_failures;
    struct skp__cont_stats stats;
};

struct skyprof_agent;
struct skp__proc_upload;

/* Sets up an agent's continuous-profiling state (no policy, nothing allocated). */
void skp__cont_agent_init(struct skp__cont_agent *c);
/* Frees it and switches the request-path counters off. */
void skp__cont_agent_cleanup(struct skp__cont_agent *c);
/* queryPolicies (channel thread, on the poll schedule). Errors: the transport's. */
SKP_MUST_CHECK skp_err skp__cont_poll(struct skyprof_agent *a, int timeout_ms);
/* Slots, triggers and keepAlive when due. Returns the monotonic time it wants to run again
 * (INT64_MAX when nothing is scheduled). */
int64_t skp__cont_step(struct skyprof_agent *a, int64_t now_ns, int timeout_ms);
/* Uploads a continuous task's result `u` (from skp__proc_upload_peek). Returns true when it is
 * done with (sent, or failed for good), false to retry later. */
bool skp__cont_upload(struct skyprof_agent *a, const struct skp__proc_upload *u, int timeout_ms);

#endif
