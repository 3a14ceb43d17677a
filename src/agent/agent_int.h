/* agent_int.h - the agent object shared by agent.c (lifecycle, public glue) and channel.c (the
 * skp-channel thread). Lock order: agent->lock, then src_lock, then sampler->run_lock; the
 * channel thread never holds agent->lock during an RPC. Stack source callbacks
 * may run under agent->lock (task start/stop); host callbacks (log sink) never take our locks. */
#ifndef SKP_AGENT_AGENT_INT_H
#define SKP_AGENT_AGENT_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/types.h>

#include "agent/agent_clock.h"
#include "agent/command_dispatch.h"
#include "agent/command_service.h"
#include "agent/cont_agent.h"
#include "agent/proc_task.h"
#include "agent/sampler.h"
#include "agent/snapshot.h"
#include "agent/symcache.h"
#include "agent/task_service.h"
#include "agent/tracer.h"
#include "agent/transport.h"
#include "skyprof/skyprof.h"

struct skyprof_agent {
    struct skyprof_config cfg; /* copy; cfg.instance is the name in use */
    struct skyprof_kv *props;  /* owned copies of cfg.properties */
    char *props_mem;
    bool instance_generated;
    size_t instance_base_len; /* fixed name: its length before a forked child's "-<pid>" suffix */
    struct skyprof_stack_source source; /* copy; capture == NULL means none; changed under
                                           lock + src_lock, symbolize used under src_lock */
    pthread_mutex_t src_lock;
    const struct skp__clock *clock;
    struct skp__transport tr;
    struct skp__hub *hub;
    pid_t pid; /* process that started it */

    pthread_mutex_t lock; /* everything below up to the channel thread */
    struct skp__task_service ts;
    struct skp__command_dispatch disp;
    struct skp__command_service cs;
    char finish_q[SKP_FINISH_QUEUE_MAX][SKP_TASK_ID_MAX];
    int n_finish;
    _Atomic bool task_active;

    struct skp__snapshot_queue snaps;
    struct skp__sampler sampler;
    struct skp__symcache sym;     /* channel thread only */
    struct skp__proc_runner proc; /* process profiling (PprofTask); own lock */
    struct skp__cont_agent cont;  /* continuous profiling; channel thread only */

    /* channel thread */
    pthread_t thread;
    bool thread_running;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop_requested;       /* under mu */
    bool wake;                 /* under mu: re-evaluate tasks now */
    int64_t flush_deadline_ns; /* under mu */

    /* channel schedule (channel thread only; monotonic ns) */
    int64_t next_beat_ns;
    int64_t next_poll_ns;
    int64_t next_snap_ns;
    int64_t next_seg_ns;
    int poll_failures;
    int proc_upload_failures; /* consecutive failed uploads of the pending answer */
    int backend_state;        /* 0 unknown, 1 reachable, 2 unreachable (for logs) */
    uint64_t n_beats_ok;
    uint64_t first_connects;

    /* stats */
    _Atomic uint64_t snapshots_sent;
    _Atomic uint64_t snapshots_send_dropped;
    _Atomic uint64_t segments_sent;
    _Atomic uint64_t segments_send_dropped;
    _Atomic uint64_t finish_sent;
    _Atomic uint64_t heartbeats_sent;
    _Atomic uint64_t polls_sent;
    _Atomic uint64_t reconnects;
    uint64_t hub_dropped_base;
    uint64_t slots_taken_base;
};

/* Creates an agent without threads (unit tests drive it with skp__channel_step and a fake
 * transport and clock; takes ownership of *tr). Errors: SKP_EINVAL, SKP_ENOMEM, SKP_EEXIST. */
SKP_MUST_CHECK skp_err skp__agent_new(const struct skyprof_config *cfg,
                                      const struct skyprof_stack_source *src,
                                      const struct skp__transport *tr,
                                      const struct skp__clock *clock, skyprof_agent **out);
/* Stops the active task, frees everything (threads must be stopped). */
void skp__agent_free(skyprof_agent *a);

/* Channel thread body, one iteration at monotonic time now_ns: runs due task actions, heartbeat,
 * poll, snapshot and segment sends, finish reports. Returns the monotonic time it wants to run
 * again. `flush` forces sends of everything queued. */
int64_t skp__channel_step(skyprof_agent *a, int64_t now_ns, bool flush, int timeout_ms);
/* Runs due task actions now (agent->lock held by the caller). Returns the wall time of the next
 * task event. */
int64_t skp__agent_run_tasks_locked(skyprof_agent *a, int64_t now_ms);
/* Stops the active task if any (agent->lock held): sampler joined, slots freed, finish queued. */
void skp__agent_stop_task_locked(skyprof_agent *a);
/* a->tr.unary for a call answered with a Commands message (every unary call of the agent but the
 * eBPF process registration); *resp as the transport's unary leaves it, the caller frees it. */
SKP_MUST_CHECK skp_err skp__agent_unary_commands(skyprof_agent *a, const char *path,
                                                 const ProtobufCMessage *req,
                                                 ProtobufCMessage **resp, int timeout_ms);
/* Starts / stops the skp-channel thread. */
SKP_MUST_CHECK skp_err skp__channel_start(skyprof_agent *a);
void skp__channel_stop(skyprof_agent *a, int flush_deadline_ms);

#define SKP_PATH_GET_TASKS "/skywalking.v3.ProfileTask/getProfileTaskCommands"
#define SKP_PATH_COLLECT_SNAPSHOT "/skywalking.v3.ProfileTask/collectSnapshot"
#define SKP_PATH_TASK_FINISH "/skywalking.v3.ProfileTask/reportTaskFinish"
#define SKP_PATH_KEEPALIVE "/skywalking.v3.ManagementService/keepAlive"
#define SKP_PATH_PROPERTIES "/skywalking.v3.ManagementService/reportInstanceProperties"
#define SKP_PATH_PPROF_TASKS "/skywalking.v10.PprofTask/getPprofTaskCommands"
#define SKP_PATH_PPROF_COLLECT "/skywalking.v10.PprofTask/collect"
#define SKP_PATH_SEGMENTS "/skywalking.v3.TraceSegmentReportService/collect"

#endif
