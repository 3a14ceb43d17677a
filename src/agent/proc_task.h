/* proc_task.h - process profiling (SkyWalking's skywalking.v10.PprofTask) in the agent: the
 * PprofTaskQuery executor, the runner of at most one process task at a time, and what the
 * channel thread needs to poll for tasks and upload the result.
 *
 * Threads: the executor and the channel functions run on skp-channel (the executor under the
 * agent lock, as every command). A task runs on its own thread, skp-proc, alive only while a
 * process task runs: it samples through the language's process source (include/skyprof/
 * skyprof.h, struct skyprof_proc_source) into a pprof builder with a byte budget, encodes the
 * file (gzip) and exits. The channel then uploads it (metadata first, honouring the server's
 * TERMINATED_BY_OVERSIZE, 1 MiB chunks) and joins the thread. `mu` guards the runner's state;
 * it is never held during sampling, source callbacks or RPCs. Lock order: agent->lock, then mu. */
#ifndef SKP_AGENT_PROC_TASK_H
#define SKP_AGENT_PROC_TASK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/agent_limits.h"
#include "common/Command.pb-c.h"
#include "skyprof/skyprof.h"
#include "wire/pprof_encode.h"

#define SKP_PPROF_TASK_COMMAND "PprofTaskQuery"
/* Threads sampled per task at most (a listing beyond this keeps the first ones). */
#define SKP_PROC_THREADS_MAX 256
/* Memory budget of one task's profile (distinct stacks, names): a 10-minute task on 50 threads
 * stays far below it unless the program has very many distinct stacks; beyond it new stacks
 * are dropped and counted (the file says so in a comment). */
#define SKP_PROC_PROFILE_BYTES_MAX (3u << 20)
/* Upload chunk size (what the Go agent uses). */
#define SKP_PROC_CHUNK_BYTES (1u << 20)
/* Error answers for tasks refused without running, waiting to be uploaded. */
#define SKP_PROC_ERRORS_MAX 4
/* Default sampling rate of cpu/wall tasks (Go's CPU profiler rate). */
#define SKP_PROC_DEFAULT_HZ 100
#define SKP_PROC_MAX_HZ 1000
/* How long an instant-by-Go's-rules event runs when it needs a window here (Python heap/allocs
 * from tracemalloc see only what is allocated while they run). */
#define SKP_PROC_WINDOW_DEFAULT_MS 10000
/* Synthetic frames of cpu profiles (CPU no captured stack carries; proc_task.c): the agent's
 * own threads; threads the source has no stack for; a thread that ended before any sample of it;
 * CPU of threads that ended between rounds that no thread could be given. */
#define SKP_PROC_FRAME_AGENT "(skyprof agent)"
#define SKP_PROC_FRAME_UNSAMPLED "(thread not sampled)"
#define SKP_PROC_FRAME_UNSEEN "(thread ended before its first sample)"
#define SKP_PROC_FRAME_ENDED "(threads ended between samples)"
#define SKP_PROC_EVENT_MAX 24

struct skp__proc_spec {
    char task_id[SKP_TASK_ID_MAX];
    char event[SKP_PROC_EVENT_MAX];
    int64_t duration_ms; /* Duration (minutes) x 60000, capped by the runner's max */
    int64_t dump_period; /* DumpPeriod as sent */
    int64_t sampling_hz; /* SamplingRate (ours), 0 = default */
    int64_t create_time_ms;
    /* A threshold-triggered task (cont_agent.c): the result stays a pprof builder (no file, no
     * PprofTask answer) for the channel to upload through collectProfilingData. */
    bool continuous;
};

enum skp__proc_state {
    SKP_PROC_IDLE = 0,
    SKP_PROC_RUNNING = 1, /* skp-proc samples */
    SKP_PROC_DONE = 2,    /* result ready for the channel; the thread is exiting */
};

struct skp__proc_stats {
    uint64_t tasks_received;
    uint64_t tasks_run;
    uint64_t tasks_refused;
    uint64_t uploads_ok;
    uint64_t uploads_failed;
    uint64_t uploads_oversize;
    uint64_t samples;         /* samples added to profiles */
    uint64_t samples_dropped; /* profile budget full */
    uint64_t captures_lost;
    int64_t last_file_bytes;
    int64_t last_builder_bytes;
};

struct skp__proc_runner {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* monotonic; wakes skp-proc early on stop */
    struct skyprof_proc_source src;
    bool has_src;
    uint32_t max_depth;
    int64_t max_duration_ms;  /* SKYPROF_PROC_MAX_DURATION_MS (tests), else 15 min */
    int64_t last_create_time; /* cursor for getPprofTaskCommands, -1 at first */
    int state;                /* enum skp__proc_state */
    struct skp__proc_spec cur;
    pthread_t thread;
    bool thread_started;
    volatile int stop;  /* set with __atomic builtins; read by source run_event */
    int64_t started_ms; /* wall time the current task started */
    /* result of the current task (state DONE), owned by the runner */
    struct skpx_pprof *prof; /* continuous tasks: the samples (file stays NULL) */
    uint8_t *file;
    size_t file_len;
    char error[256]; /* non-empty: upload EXECUTION_TASK_ERROR with it */
    struct {
        char task_id[SKP_TASK_ID_MAX];
        char msg[160];
    } errs[SKP_PROC_ERRORS_MAX];
    int n_errs;
    struct skp__proc_stats stats;
};

/* One upload the channel performs: a file (error == "") or an error answer. Borrowed from the
 * runner until skp__proc_upload_done. */
struct skp__proc_upload {
    char task_id[SKP_TASK_ID_MAX];
    const uint8_t *file;
    size_t file_len;
    char error[256];
    bool is_task;    /* the current task's result (else a queued refusal) */
    bool continuous; /* a continuous task's result: prof, not file */
    const struct skpx_pprof *prof;
    char event[SKP_PROC_EVENT_MAX];
    int64_t started_ms;
};

/* Initializes an idle runner without a source. Errors: SKP_EIO (condvar). */
SKP_MUST_CHECK skp_err skp__proc_runner_init(struct skp__proc_runner *r, uint32_t max_depth);
/* Stops and joins a running task, frees results, runs the source's destroy. */
void skp__proc_runner_cleanup(struct skp__proc_runner *r);
/* Replaces the source (copied; NULL = none). Errors: SKP_ESTATE (a task runs), SKP_EINVAL. */
SKP_MUST_CHECK skp_err skp__proc_runner_set_source(struct skp__proc_runner *r,
                                                   const struct skyprof_proc_source *src);
/* Asks a running task to end now (it still produces its file). Does not wait. */
void skp__proc_runner_request_stop(struct skp__proc_runner *r);

/* Parses a PprofTaskQuery (Events lower case, Duration minutes, CreateTime ms, DumpPeriod,
 * optional SamplingRate Hz). Errors: SKP_EINVAL with a reason; out->create_time_ms is set when
 * CreateTime parsed (else -1). Pure. */
SKP_MUST_CHECK skp_err skp__pprof_command_parse(const Skywalking__V3__Command *cmd,
                                                struct skp__proc_spec *out, char *reason,
                                                size_t cap);
/* The PprofTaskQuery executor (ud = struct skp__proc_runner *): advances the cursor, starts the
 * task, or queues an EXECUTION_TASK_ERROR answer when it cannot run (busy, no source). */
skp_err skp__pprof_command_exec(void *ud, const Skywalking__V3__Command *cmd, char *reason,
                                size_t cap);

/* Starts `spec` (copied) on skp-proc. Errors: SKP_ENOTSUP (no process source), SKP_ESTATE
 * (a task runs or waits for its upload), SKP_EIO (no thread); `reason` says which. Thread-safe;
 * takes mu (callers may hold agent->lock). */
SKP_MUST_CHECK skp_err skp__proc_runner_start(struct skp__proc_runner *r,
                                              const struct skp__proc_spec *spec, char *reason,
                                              size_t cap);

/* The cursor to send as lastCommandTime. Thread-safe. */
int64_t skp__proc_runner_cursor(struct skp__proc_runner *r);
/* True and *u filled when something is ready to upload. Thread-safe. */
bool skp__proc_upload_peek(struct skp__proc_runner *r, struct skp__proc_upload *u);
/* The upload of *u ended (ok = accepted or refused for good: it is dropped; !ok = kept and
 * retried later). For the task's result, joins skp-proc and returns the runner to idle. */
void skp__proc_upload_done(struct skp__proc_runner *r, const struct skp__proc_upload *u, bool ok,
                           bool oversize);
/* True while a process task runs or waits for its upload. Thread-safe. */
bool skp__proc_runner_busy(struct skp__proc_runner *r);
void skp__proc_runner_get_stats(struct skp__proc_runner *r, struct skp__proc_stats *out);

/* Splits a frame's text into function, file and line: "<file>.<function>: <line>" (Python,
 * SkyWalking's code signature) or "<function> (<file>:<line>)" (native symbolizer); anything
 * else is a function name alone. Pure. */
void skp__proc_split_frame(const char *s, size_t n, const char **func, size_t *func_len,
                           const char **file, size_t *file_len, int64_t *line);

#endif
