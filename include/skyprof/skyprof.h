/* skyprof.h - public API of libskyprof, the in-process agent: on-demand, trace-aware profiling
 * speaking Apache SkyWalking's v3 agent protocol (ProfileTask, Management, TraceSegmentReport).
 *
 * A host process starts one agent (skyprof_agent_start). The agent polls the backend for profile
 * tasks; while a task is active, requests (segments) whose first entry span names the task's
 * endpoint take one of a few slots, and a sampler thread captures the stack of each slotted
 * request's thread every dump period through a pluggable *stack source* (native C/C++ or Python).
 * Snapshots and finished segments are streamed to the backend by the agent's single channel
 * thread. With no active task the agent runs exactly one thread (skp-channel) and sends no signals.
 *
 * Guest rules: nothing here crashes, blocks or reconfigures the host. Queues are bounded (drop and
 * count), logging is off unless a sink is configured, no signal disposition, environment or stdio
 * is changed. After fork() the child's copy of the agent is off (see
 * skyprof_agent_restart_after_fork).
 *
 * Threading: the config functions are plain functions on caller storage. The tracer functions
 * (skyprof_entry_begin ... skyprof_sw8_inject) act on the calling thread's own segment and are
 * thread-safe with respect to each other and to the agent threads; they are the hot path: with no
 * task active they take no lock and make no syscall beyond clock reads. The agent lifecycle
 * functions (start/stop/restart) must not race with each other. */
#ifndef SKYPROF_SKYPROF_H
#define SKYPROF_SKYPROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "skyprof/skp_err.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SKYPROF_API __attribute__((visibility("default")))
#else
#define SKYPROF_API
#endif

/* ------------------------------------------------------------------------------------------------
 * Limits and defaults (SkyWalking's values unless noted).
 * ---------------------------------------------------------------------------------------------- */
#define SKYPROF_STR_MAX 256 /* capacity (incl. NUL) of the config's string fields */
#define SKYPROF_LANG_MAX 32
#define SKYPROF_DEFAULT_BACKEND "127.0.0.1:11800"
#define SKYPROF_DEFAULT_POLL_INTERVAL_MS 20000 /* collector.get_profile_task_interval */
#define SKYPROF_DEFAULT_HEARTBEAT_MS 30000     /* collector.heartbeat_period */
#define SKYPROF_DEFAULT_MAX_PARALLEL 5         /* profile.max_parallel */
#define SKYPROF_MAX_PARALLEL_CAP 64            /* our hard cap on max_parallel */
#define SKYPROF_DEFAULT_MAX_STACK_DEPTH 500    /* profile.dump_max_stack_depth */
#define SKYPROF_MAX_STACK_DEPTH_CAP 4096
/* Java's shipped agent.config default. Python's 50 is too small for its own sampler (it blocks
 * when full) and for us (5 slots x 100 Hz x 0.5 s send period = 250 snapshots between sends). */
#define SKYPROF_DEFAULT_SNAPSHOT_BUFFER 4500    /* profile.snapshot_transport_buffer_size */
#define SKYPROF_DEFAULT_SEGMENT_BUFFER 1000     /* finished segments waiting to be sent */
#define SKYPROF_DEFAULT_MAX_PROFILING_MS 600000 /* profile.duration: 10 min per request */
#define SKYPROF_DEFAULT_MIN_DUMP_PERIOD_MS 10   /* TASK_DUMP_PERIOD_MIN_MILLIS */

/* ------------------------------------------------------------------------------------------------
 * Configuration
 * ---------------------------------------------------------------------------------------------- */
enum skyprof_log_level {
    SKYPROF_LOG_ERROR = 0,
    SKYPROF_LOG_WARN = 1,
    SKYPROF_LOG_INFO = 2,
    SKYPROF_LOG_DEBUG = 3,
};

/* Receives one formatted log line (no newline). Called from agent threads and from the thread
 * calling the API; must be thread-safe and must not call back into skyprof. */
typedef void (*skyprof_log_cb)(void *ud, enum skyprof_log_level level, const char *line);

struct skyprof_kv {
    const char *key;
    const char *value;
};

/* Caller-allocated; fill with skyprof_config_init_defaults() then override fields. String fields
 * are NUL-terminated arrays (longer values are rejected by start with SKP_EINVAL). */
struct skyprof_config {
    char service[SKYPROF_STR_MAX];        /* SW_AGENT_NAME; default "skyprof-service" */
    char instance[SKYPROF_STR_MAX];       /* SW_AGENT_INSTANCE_NAME; "" = generated at start as
                                             "<32 hex uuid>@<hostname>" (new one after fork) */
    char backend[SKYPROF_STR_MAX];        /* SW_AGENT_COLLECTOR_BACKEND_SERVICES "host:port" or a
                                             comma list of up to 8: one is used, the next when
                                             it is down (docs/deploy.md) */
    char authentication[SKYPROF_STR_MAX]; /* SW_AGENT_AUTHENTICATION; "" = none */
    char language[SKYPROF_LANG_MAX];      /* reported as instance property "language"; "C" */
    int64_t poll_interval_ms;    /* SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL (seconds) */
    int64_t heartbeat_period_ms; /* SW_AGENT_COLLECTOR_HEARTBEAT_PERIOD (seconds) */
    int max_parallel;            /* SW_AGENT_PROFILE_MAX_PARALLEL, 1..SKYPROF_MAX_PARALLEL_CAP */
    /* SW_AGENT_PROFILE_DUMP_MAX_STACK_DEPTH, 1..CAP; innermost kept */
    int max_stack_depth;
    int snapshot_buffer_size;   /* SW_AGENT_PROFILE_SNAPSHOT_TRANSPORT_BUFFER_SIZE, >= 1 */
    int segment_buffer_size;    /* SKYPROF_SEGMENT_BUFFER_SIZE, >= 1 */
    int64_t max_profiling_ms;   /* SKYPROF_MAX_PROFILING_MS: sampling of one request stops after
                                   this long (SkyWalking profile.duration) */
    int64_t min_dump_period_ms; /* SKYPROF_MIN_DUMP_PERIOD_MS: lowest accepted DumpPeriod
                                   (SkyWalking: 10; lower it only for benchmarks), >= 1 */
    bool profile_active;        /* SW_AGENT_PROFILE_ACTIVE ("false"/"0"/"no"/"off" = false) */
    bool report_segments;       /* SKYPROF_REPORT_SEGMENTS; send finished segments (default on) */
    bool restart_in_child;      /* SKYPROF_RESTART_IN_CHILD; start a fresh agent (new instance
                                   name, new connection) in a fork()ed child (default off) */
    const struct skyprof_kv *properties; /* extra instance properties (borrowed; copied by start) */
    size_t n_properties;
    skyprof_log_cb log_sink; /* NULL = logging off (default) */
    void *log_ud;
    enum skyprof_log_level log_level; /* SKYPROF_LOG_LEVEL error|warn|info|debug; default warn */
};

/* Fills *cfg with the defaults above (instance left empty: generated at start). Never fails.
 * Thread-safe (touches only *cfg). */
SKYPROF_API void skyprof_config_init_defaults(struct skyprof_config *cfg);

/* Overrides fields of *cfg from the environment variables named above; unset variables leave
 * fields untouched; durations in SW_* variables are seconds as in SkyWalking. Never writes the
 * environment. Errors: SKP_EINVAL when a variable is set but malformed or too long (the field is
 * left unchanged, the remaining variables are still applied). Not thread-safe against setenv. */
SKYPROF_API SKP_MUST_CHECK skp_err skyprof_config_from_env(struct skyprof_config *cfg);

/* Checks ranges and lengths. Errors: SKP_EINVAL. */
SKYPROF_API SKP_MUST_CHECK skp_err skyprof_config_validate(const struct skyprof_config *cfg);

/* ------------------------------------------------------------------------------------------------
 * Stack sources: how a language plugs its stack capture into the sampler.
 *
 * Lifecycle of one profiled request (slot):
 *   1. thread_attach(ud) runs ON THE REQUEST THREAD when the request takes a slot (inside
 *      skyprof_entry_begin, only while a matching task is active). It returns an opaque per-thread
 *      handle (e.g. a PyThreadState*, or the native source's per-thread buffer) or NULL to refuse
 *      (the request is then not profiled). It may allocate and take locks (not a signal context).
 *   2. capture(ud, handle, tid, out) runs on the SAMPLER THREAD (skp-sampler), once per dump
 *      period, while the request runs. Never concurrently with itself (one sampler thread). It
 *      fills out->frames[0 .. out->cap) INNERMOST FIRST (index 0 = the frame executing now) and
 *      sets out->n. If the stack is deeper than out->cap, it stores the innermost out->cap frames
 *      and sets out->truncated (the core keeps the innermost frames, like Java). The core reverses
 *      them to root-first. Returns 0 on success; SKYPROF_CAPTURE_LOST when this one sample could
 *      not be taken but the thread lives (timeout, busy): the core skips this dump and samples the
 *      request again next period (no sequence number is used); any other value < 0 when the thread
 *      cannot be captured any more (thread gone): the core stops sampling that request. Frames are
 *      either strings (kind SKYPROF_FRAME_STR: `str`/`len`, e.g. Python's "<file>.<function>:
 *      <line>") or addresses (SKYPROF_FRAME_ADDR: `addr`, resolved later by symbolize). String
 *      bytes are BORROWED: they must stay valid until capture returns to the core and the core
 *      calls the source again; the core copies them before that. A source may also copy text into
 *      out->scratch (out->scratch_cap bytes, bump out->scratch_len). out->frames and out->scratch
 *      belong to the core and are valid only during the call: a native source that captures in a
 *      signal handler must not let the handler write to them after capture returned (use its own
 *      per-thread buffer and copy).
 *   3. thread_release(ud, handle) runs exactly once per successful thread_attach, when the slot
 *      stops referencing the handle: normally on the request thread inside skyprof_entry_end, but
 *      it MAY run on an agent thread (task stopped, request sampled while it ended). Optional.
 *   symbolize(ud, addr, buf, cap) runs on the agent's channel thread (never in a signal handler,
 *   never on the sampler's period): writes "function (file:line)" (NUL-terminated, truncated to
 *   cap) and returns its length, or < 0 if unknown (the core then sends "0x<hex>"). The core
 *   caches results per address (bounded). Optional (required when capture yields addresses).
 *   destroy(ud) runs once when the agent stops or replaces the source. Optional.
 *   capture_prepare(ud, handles, n) runs on the sampler thread at the start of one dump period,
 *     before the captures of that period, with the handles it is about to capture in that order:
 *     a source may read all of them in one batch then (e.g. Python's await chains). A hint only:
 *     capture must also work without it, and a prepared handle may not be captured (its request
 *     ended). The handles stay valid until the last capture of the period returns. Optional.
 * ---------------------------------------------------------------------------------------------- */
/* capture() result: this sample was lost, the request stays sampled. */
#define SKYPROF_CAPTURE_LOST (-2)

enum skyprof_frame_kind {
    SKYPROF_FRAME_STR = 0,
    SKYPROF_FRAME_ADDR = 1,
};

struct skyprof_frame {
    uint64_t addr;   /* SKYPROF_FRAME_ADDR: instruction address (as the source wants it
                        symbolized, e.g. return address - 1 for callers) */
    const char *str; /* SKYPROF_FRAME_STR: bytes (not necessarily NUL-terminated), borrowed */
    uint32_t len;    /* SKYPROF_FRAME_STR: length of str */
    uint32_t kind;   /* enum skyprof_frame_kind */
};

struct skyprof_capture {
    struct skyprof_frame *frames; /* core-owned array of `cap` entries */
    uint32_t cap;                 /* = config max_stack_depth */
    uint32_t n;                   /* set by the source: frames filled, innermost first */
    bool truncated;               /* set by the source: the stack had more than cap frames */
    char *scratch;                /* core-owned text buffer for string frames, may be used */
    size_t scratch_cap;
    size_t scratch_len; /* bytes of scratch used; the source advances it */
};

struct skyprof_stack_source {
    const char *name; /* e.g. "native", "python"; static storage */
    void *ud;
    void *(*thread_attach)(void *ud);
    int (*capture)(void *ud, void *thread_handle, int tid, struct skyprof_capture *out);
    void (*thread_release)(void *ud, void *thread_handle);
    int (*symbolize)(void *ud, uint64_t addr, char *buf, size_t cap);
    void (*destroy)(void *ud);
    void (*capture_prepare)(void *ud, void *const *thread_handles, size_t n);
};

/* ------------------------------------------------------------------------------------------------
 * Process sources: how a language plugs WHOLE-PROCESS profiling (SkyWalking's PprofTask: events
 * cpu, wall, goroutine = thread dump, heap, allocs, block, mutex, threadcreate) into the agent.
 * Every callback runs on the agent's process-profiling thread (skp-proc, alive only while a
 * process task runs), never on a host thread and never concurrently with itself.
 *   list_threads(ud, out, cap): fills out[0..cap) with the threads to sample (agent threads
 *     excluded) and returns their number (< 0: cannot list). `handle` is the source's; it stays
 *     valid until the next list_threads or end call. Called at every sampling round of cpu and
 *     wall events (so threads that live between two rounds are found): keep it cheap.
 *   capture(ud, handle, tid, out): the stack of one listed thread, with the stack source's
 *     contract (innermost first; string frames "<file>.<function>: <line>" or "<function> (<file>:
 *     <line>)", or addresses resolved with symbolize). Returns 0, SKYPROF_CAPTURE_LOST (skip this
 *     sample) or another value < 0 (thread gone).
 *   symbolize(ud, addr, buf, cap): as in the stack source; optional.
 *   run_event(ud, event, duration_ms, dump_period, stop, emit, emit_ud, err, err_cap): optional;
 *     runs a language-specific event (e.g. Python's heap from tracemalloc) for at most
 *     duration_ms, returning early when *stop becomes true, and reports its samples through emit
 *     (frames innermost first, values per the sample types it declared in *types). Returns 0, or
 *     < 0 with a message in err (the task answers EXECUTION_TASK_ERROR with it); returns
 *     SKYPROF_EVENT_UNSUPPORTED for an event it does not handle. For `goroutine` the core dumps
 *     the listed threads itself and then calls run_event(..., "goroutine", 0, ...) for the
 *     source's extra "goroutines" (Python: asyncio tasks), one `goroutine/count` value each; a
 *     failure there keeps the thread dump.
 *   end(ud): the task is over: release handles. Optional.
 *   thread_cpu, process_usage: see the fields below; both optional (a remote process's source).
 * ---------------------------------------------------------------------------------------------- */
#define SKYPROF_EVENT_UNSUPPORTED (-3)

struct skyprof_proc_thread {
    int tid;       /* kernel thread id */
    char name[48]; /* thread name (NUL-terminated) */
    void *handle;
    /* Only in samples a language event emits (list_threads leaves them NULL): an asyncio task
     * (Python thread dump) adds the labels `task` (its name) and `task_state`. Borrowed. */
    const char *task;
    const char *task_state;
};

/* One sample of a language event: frames innermost first (strings, as capture's), values per
 * the sample types the event declared. Returns 0, or < 0 when the sample was dropped (full). */
typedef int (*skyprof_emit_cb)(void *emit_ud, const struct skyprof_capture *stack,
                               const int64_t *values, const struct skyprof_proc_thread *thread);

/* Sample types of a language event: up to 4 {type, unit} pairs (static strings). */
struct skyprof_event_types {
    const char *type[4];
    const char *unit[4];
    int n;
    const char *period_type; /* NULL = none */
    const char *period_unit;
    int64_t period;
};

struct skyprof_proc_source {
    const char *name; /* "native", "python"; static storage */
    void *ud;
    int (*list_threads)(void *ud, struct skyprof_proc_thread *out, int cap);
    int (*capture)(void *ud, void *handle, int tid, struct skyprof_capture *out);
    int (*symbolize)(void *ud, uint64_t addr, char *buf, size_t cap);
    int (*event_types)(void *ud, const char *event, int64_t dump_period,
                       struct skyprof_event_types *out);
    int (*run_event)(void *ud, const char *event, int64_t duration_ms, int64_t dump_period,
                     const volatile int *stop, skyprof_emit_cb emit, void *emit_ud, char *err,
                     size_t err_cap);
    void (*end)(void *ud);
    void (*destroy)(void *ud);
    /* Optional, for a source whose threads live in ANOTHER process (`skyprof attach`): the
     * consumed CPU time of thread `tid` in ns (*cpu_ns) and its kernel state letter (*state:
     * 'R' running or runnable, 'S', 'D', ...). Returns 0, or < 0 when the thread is gone. NULL =
     * the agent reads them itself for a thread of its own process (the thread's CPU clock and
     * /proc/self/task/TID/stat). Runs on skp-proc like the others. */
    int (*thread_cpu)(void *ud, int tid, int64_t *cpu_ns, char *state);
    /* Optional, likewise: the whole process's consumed CPU time in ns and its thread count, for
     * the continuous-profiling process checks (PROCESS_CPU, PROCESS_THREAD_COUNT); NULL = this
     * process. Runs on the channel thread, possibly while another callback runs on skp-proc:
     * it must touch no state the others use. Returns 0, or < 0 when unreadable. */
    int (*process_usage)(void *ud, int64_t *cpu_ns, int *n_threads);
    /* true when capture never disturbs the thread (it reads memory, sends no signal): cpu events
     * may then capture a thread that ran during the round although it sleeps now (a Python
     * thread waiting for the GIL is still where it ran). false: only threads in state R are
     * captured (a sleeping one is never signalled). */
    bool capture_any_state;
};

/* ------------------------------------------------------------------------------------------------
 * Agent lifecycle
 * ---------------------------------------------------------------------------------------------- */
typedef struct skyprof_agent skyprof_agent;

/* Validates and copies *cfg, installs the log sink, starts the channel thread (skp-channel) and
 * makes the agent the process's current agent (used by the tracer functions). Does not wait for
 * the backend: connecting happens in the background with capped exponential backoff.
 * `src` is the stack source (copied; NULL = the native source when the library was built with it,
 * i.e. `const struct skyprof_stack_source *skyprof_native_stack_source(void)` declared in
 * skyprof/skyprof_native.h, else no source: tasks are accepted but nothing is captured).
 * *out is NULL on failure.
 * Errors: SKP_EINVAL (bad config), SKP_EEXIST (another agent is current), SKP_ENOMEM, SKP_EIO
 * (thread creation failed), SKP_ESTATE (called in a forked child whose parent agent is still
 * current; use skyprof_agent_restart_after_fork). Not thread-safe against stop/restart. */
SKYPROF_API SKP_MUST_CHECK skp_err skyprof_agent_start(const struct skyprof_config *cfg,
                                                       const struct skyprof_stack_source *src,
                                                       skyprof_agent **out);

/* Stops the active task (its finish report is queued), stops sampling, then lets the channel
 * thread flush queued snapshots, segments and finish reports for at most `flush_deadline_ms`
 * (0 = drop them), joins the agent threads and frees the agent. If the channel thread is inside
 * an RPC to a hung backend, stop first waits for that RPC's deadline (at most 10 s). Requests
 * still in flight on other threads are safe: their segments are dropped when they end. NULL ok.
 * In a forked child it only releases the memory of the inherited agent (no thread, socket or I/O
 * of the parent is touched). Not thread-safe against start/restart. */
SKYPROF_API void skyprof_agent_stop(skyprof_agent *agent, int flush_deadline_ms);

/* The current agent, or NULL (none started, stopped, or inherited across fork and not
 * restarted). Thread-safe. */
SKYPROF_API skyprof_agent *skyprof_agent_current(void);

/* In a forked child: frees what the child inherited of the parent's agent (never writing to the
 * parent's socket; the parent's threads do not exist in the child) and starts a fresh agent with
 * the same config but a new generated instance name (unless the config named one explicitly) and
 * a new connection. Called automatically in the child when config.restart_in_child is set.
 * Errors: SKP_ESTATE (not in a forked child of a running agent), start's errors. */
SKYPROF_API SKP_MUST_CHECK skp_err skyprof_agent_restart_after_fork(skyprof_agent **out);

/* Replaces the stack source (copied). The old source's destroy runs after the sampler stopped
 * using it. Errors: SKP_EINVAL (src NULL or no capture), SKP_ESTATE (a task is active). */
SKYPROF_API SKP_MUST_CHECK skp_err
skyprof_agent_set_stack_source(skyprof_agent *agent, const struct skyprof_stack_source *src);

/* Sets the process source (copied) used by process-profiling tasks (PprofTaskQuery). NULL
 * removes it: tasks then answer EXECUTION_TASK_ERROR. The old source's destroy runs once no task
 * uses it. A C service started with the native stack source gets the native process source.
 * Errors: SKP_EINVAL (agent NULL, or src without list_threads/capture), SKP_ESTATE (a process
 * task is running). */
SKYPROF_API SKP_MUST_CHECK skp_err
skyprof_agent_set_proc_source(skyprof_agent *agent, const struct skyprof_proc_source *src);

/* The instance name in use (generated or configured); borrowed, valid until stop. */
SKYPROF_API const char *skyprof_agent_instance(const skyprof_agent *agent);

/* ------------------------------------------------------------------------------------------------
 * Tasks: normally received from the backend; can also be added locally (tests, benchmarks,
 * tools that drive the sampler without a backend). Snapshots of local tasks are queued and sent
 * like the others (with the given task_id).
 * ---------------------------------------------------------------------------------------------- */
struct skyprof_task_spec {
    const char *task_id;           /* copied; NULL = "local-<n>" */
    const char *endpoint;          /* first entry span name to match, exact */
    int duration_min;              /* 1..15 */
    int min_duration_threshold_ms; /* >= 0 */
    int dump_period_ms;            /* >= config.min_dump_period_ms */
    int max_sampling_count;        /* 1..9 */
    int64_t start_time_ms;         /* epoch ms; 0 = now */
};

/* Validates (SkyWalking's rules, overlap included) and schedules a task as if it came from the
 * backend. Errors: SKP_EINVAL (rejected; reason in stats.last_reject_reason), SKP_ESTATE. */
SKYPROF_API SKP_MUST_CHECK skp_err skyprof_agent_add_task(skyprof_agent *agent,
                                                          const struct skyprof_task_spec *spec);

/* True while a task is active (its sampler thread runs). Thread-safe. */
SKYPROF_API bool skyprof_agent_task_active(const skyprof_agent *agent);
/* Copies the endpoint name of the task accepting requests now into buf (NUL-terminated,
 * truncated to cap) and returns true; false when no task is live. Thread-safe, no lock. */
SKYPROF_API bool skyprof_agent_task_endpoint(const skyprof_agent *agent, char *buf, size_t cap);

/* ------------------------------------------------------------------------------------------------
 * Tracer (hot path). Spans belong to the calling thread's current segment; a handle must be ended
 * on the thread that began it. All functions accept a NULL handle (no-op), so callers need not
 * check whether an agent is running.
 * ---------------------------------------------------------------------------------------------- */
typedef struct skyprof_span skyprof_span;

enum skyprof_span_kind {
    SKYPROF_SPAN_ENTRY = 0, /* wire values of SkyWalking's SpanType */
    SKYPROF_SPAN_EXIT = 1,
    SKYPROF_SPAN_LOCAL = 2,
};

enum skyprof_span_layer {
    SKYPROF_LAYER_UNKNOWN = 0,
    SKYPROF_LAYER_DATABASE = 1,
    SKYPROF_LAYER_RPC = 2,
    SKYPROF_LAYER_HTTP = 3,
    SKYPROF_LAYER_MQ = 4,
    SKYPROF_LAYER_CACHE = 5,
    SKYPROF_LAYER_FAAS = 6,
};

#define SKYPROF_SW8_MAX 2048 /* capacity enough for any sw8 value we produce */
#define SKYPROF_MAX_SPANS 64 /* spans per segment; later spans are not recorded */

/* Opens a new segment on the calling thread with an entry span named `endpoint` (copied; the
 * first entry span's name is what profile tasks match). `sw8` is the incoming `sw8` header value
 * or NULL/""; a valid one makes the segment continue that trace (ref in the span's refs), a
 * malformed one is ignored (new trace). If this thread already has an open segment, a nested
 * entry span is opened in it instead (not matched against tasks). If a matching task is active
 * and a slot is free, the request's thread is registered for sampling (stack source
 * thread_attach). Returns NULL when no agent is current (never started, stopped, forked child),
 * `endpoint` is NULL, the thread's segment buffer cannot be allocated, or a nested span does not
 * fit. Hot path: no lock, no syscall besides clock reads when no task is active. */
SKYPROF_API skyprof_span *skyprof_entry_begin(const char *endpoint, const char *sw8);

/* Ends the entry span; when it is the segment's first span, ends the segment: releases its
 * profiling slot at once (the thread is no longer sampled), closes spans left open and queues the
 * segment for reporting (dropped and counted when the queue is full). Hot path. NULL ok. */
SKYPROF_API void skyprof_entry_end(skyprof_span *span);

/* Opens an exit or local span (child of the innermost open span) in the current segment.
 * `name` and `peer` (NULL ok; meaningful for exit spans, e.g. "db:5432") are copied. Returns NULL
 * when the thread has no open segment or the segment is full. Hot path. */
SKYPROF_API skyprof_span *skyprof_span_begin(enum skyprof_span_kind kind, const char *name,
                                             const char *peer);
/* Ends a span opened by skyprof_span_begin (for entry spans use skyprof_entry_end). NULL ok. */
SKYPROF_API void skyprof_span_end(skyprof_span *span);

SKYPROF_API void skyprof_span_set_error(skyprof_span *span, bool is_error);
/* Adds a tag (key and value copied; dropped when the segment's text space is exhausted). */
SKYPROF_API void skyprof_span_add_tag(skyprof_span *span, const char *key, const char *value);
SKYPROF_API void skyprof_span_set_component(skyprof_span *span, int component_id);
SKYPROF_API void skyprof_span_set_layer(skyprof_span *span, enum skyprof_span_layer layer);
/* Sets the span's peer (copied), e.g. the client "ip:port" of an entry span as SkyWalking's
 * Python plugins report it. A peer that does not fit the segment's text space is dropped. */
SKYPROF_API void skyprof_span_set_peer(skyprof_span *span, const char *peer);

/* Writes the outgoing `sw8` header value for a call made from the calling thread's innermost open
 * span (use it inside an exit span; `peer` of that span is sent as addressUsedAtClient) into buf
 * (NUL-terminated). Returns the length, or -1 when there is no open segment or cap is too small
 * (SKYPROF_SW8_MAX always suffices). Hot path (no allocation). */
SKYPROF_API int skyprof_sw8_inject(char *buf, size_t cap);

/* The trace id / segment id of the calling thread's open segment, or NULL. Borrowed until the
 * segment ends. */
SKYPROF_API const char *skyprof_current_trace_id(void);
SKYPROF_API const char *skyprof_current_segment_id(void);

/* Request contexts, for hosts that interleave several requests on one thread (an asyncio loop).
 * A context is a segment state of its own, owned by the caller (e.g. one per request task); the
 * tracer calls above act on the calling thread's current state, which is the thread's own unless
 * a context was swapped in. Pattern: prev = swap(ctx); begin/tag/end; swap(prev). A context's
 * profiling slot stays registered while it is swapped out, so a suspended request keeps being
 * sampled (through the handle its stack source's thread_attach made).
 * skyprof_context_new: NULL when out of memory. */
typedef struct skyprof_context skyprof_context;
SKYPROF_API skyprof_context *skyprof_context_new(void);
/* Makes `ctx` (NULL = the thread's own state) the calling thread's current state and returns the
 * previous one, to be passed back to restore it. NULL when the thread's own state cannot be
 * allocated (nothing changed then). Hot path: no lock, no syscall. */
SKYPROF_API skyprof_context *skyprof_context_swap(skyprof_context *ctx);
/* Frees a context from skyprof_context_new (an open segment in it is dropped, its profiling slot
 * released). It must not be current on any thread. NULL ok. */
SKYPROF_API void skyprof_context_free(skyprof_context *ctx);

/* Decoded sw8 header. Strings point into caller-provided storage (see skyprof_sw8_parse). */
struct skyprof_sw8 {
    int sample; /* the leading flag, 0 or 1 */
    const char *trace_id;
    const char *parent_segment_id;
    int parent_span_id;
    const char *parent_service;
    const char *parent_instance;
    const char *parent_endpoint;
    const char *peer; /* addressUsedAtClient */
};

/* Parses `1-base64(traceId)-base64(parentSegmentId)-parentSpanId-base64(parentService)-
 * base64(parentInstance)-base64(parentEndpoint)-base64(addressUsedAtClient)` (optional fields
 * after these are ignored). Decoded strings are written NUL-terminated into `store` (store_cap
 * bytes) and referenced by *out. Errors: SKP_EINVAL (malformed), SKP_ETOOBIG (store too small).
 * Thread-safe, no allocation. */
SKYPROF_API SKP_MUST_CHECK skp_err skyprof_sw8_parse(const char *header, struct skyprof_sw8 *out,
                                                     char *store, size_t store_cap);
/* Formats *in as an sw8 value into buf. Returns the length or -1 if cap is too small. */
SKYPROF_API int skyprof_sw8_format(const struct skyprof_sw8 *in, char *buf, size_t cap);

/* ------------------------------------------------------------------------------------------------
 * Statistics (counters since start). Thread-safe.
 * ---------------------------------------------------------------------------------------------- */
struct skyprof_stats {
    uint64_t snapshots_captured; /* snapshots built by the sampler */
    uint64_t snapshots_dropped;  /* ring full / budget exceeded / send failed */
    uint64_t snapshots_sent;
    /* capture() < 0 other than SKYPROF_CAPTURE_LOST: sampling stopped */
    uint64_t capture_failures;
    uint64_t segments_sent;
    uint64_t segments_dropped;
    uint64_t commands_received;
    uint64_t commands_ignored;   /* unknown command name or malformed */
    uint64_t commands_duplicate; /* serial number seen */
    uint64_t tasks_accepted;
    uint64_t tasks_rejected;
    uint64_t tasks_finished; /* finish reports queued */
    uint64_t finish_reports_sent;
    uint64_t reconnects; /* successful connections after the first */
    uint64_t heartbeats_sent;
    uint64_t polls_sent;
    uint64_t sampler_runs;        /* sampler iterations (one per dump period) */
    uint64_t slots_taken;         /* requests that got a profiling slot */
    int64_t last_command_time;    /* the getProfileTaskCommands cursor */
    double achieved_dump_rate_hz; /* sampler iterations per second over the current/last task */
    char last_reject_reason[128];
    uint64_t captures_lost; /* capture() == SKYPROF_CAPTURE_LOST: that dump skipped */
};

SKYPROF_API void skyprof_agent_get_stats(const skyprof_agent *agent, struct skyprof_stats *out);

/* ------------------------------------------------------------------------------------------------
 * Test and benchmark hooks (stable, but not needed by normal hosts).
 * ---------------------------------------------------------------------------------------------- */

/* Registers the calling thread with the agent's stack source (thread_attach) and returns the
 * handle and the kernel thread id through *handle / *tid. Errors: SKP_ESTATE (no source),
 * SKP_EUNAVAILABLE (source refused). */
SKYPROF_API SKP_MUST_CHECK skp_err skyprof_thread_attach(skyprof_agent *agent, void **handle,
                                                         int *tid);
/* Releases a handle from skyprof_thread_attach. */
SKYPROF_API void skyprof_thread_release(skyprof_agent *agent, void *handle);

/* Captures the stack of the thread (handle, tid from skyprof_thread_attach) through the installed
 * source, from the calling thread (which must not be that thread for signal-based sources unless
 * the source says otherwise), and writes the code signatures root-first, one per line, into buf
 * (NUL-terminated, truncated to cap), symbolizing addresses. *n_frames (NULL ok) receives the
 * frame count. Must not run concurrently with an active task's sampler.
 * Errors: SKP_ESTATE (no source / task active), SKP_EIO (capture failed), SKP_ENOMEM. */
SKYPROF_API SKP_MUST_CHECK skp_err skyprof_capture_thread(skyprof_agent *agent, void *handle,
                                                          int tid, char *buf, size_t cap,
                                                          int *n_frames);

/* Runs one sampler iteration now on the calling thread (captures every eligible slot of the
 * active task) as the sampler thread would, serialized with it; for benchmarks measuring the
 * capture cost per period. Errors: SKP_ESTATE (no task active). */
SKYPROF_API SKP_MUST_CHECK skp_err skyprof_agent_sample_now(skyprof_agent *agent);

#ifdef __cplusplus
}
#endif
#endif
