/* collector.h - skyprofd's gRPC handlers for the SkyWalking v3 agent protocol (spec §1, §3,
 * §5.3): ProfileTask (task polling with NOTIFIED logs, snapshot streams with a durable ack,
 * finish reports), ManagementService, TraceSegmentReportService, and the services a real
 * agent calls that we accept and drop (logs, meters, JVM/CLR metrics, events, configuration
 * discovery). Every method is registered under `/skywalking.v3.<Service>/<method>` and the
 * package-less compat path `/<Service>/<method>`. Runs on the server's event loop only. */
#ifndef SKP_SERVER_COLLECTOR_H
#define SKP_SERVER_COLLECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/stats/metrics.h"
#include "server/store/store.h"
#include "skyprof/skp_err.h"
#include "wire/grpc_server.h"

/* Snapshots buffered per stream before they are written in one transaction. */
#define COLLECTOR_SNAPSHOT_BATCH 1000
/* ...or once their copied strings take this many bytes. */
#define COLLECTOR_SNAPSHOT_BATCH_BYTES (8u << 20)
/* Bytes all open snapshot streams together may hold in their batch buffers. Above it, a
 * stream writes its batch at once and gives its buffer back, so many concurrent streams
 * cannot grow memory without bound (each stream alone is bounded by the two limits above). */
#define COLLECTOR_BUFFER_BUDGET_BYTES (128u << 20)
/* Trace segments buffered per stream before they are written. */
#define COLLECTOR_SEGMENT_BATCH 256
/* ...or once their encoded size reaches this (decoded they take a few times more). */
#define COLLECTOR_SEGMENT_BATCH_BYTES (4u << 20)

struct endpoint_stats;
struct segment_keep;
struct keep_policy;
struct event_base;
struct collector_segs;
struct collector_cont;
struct cont_eval;
struct proc_service;
struct goprof_worker;
struct collector_turns;

/* The ud of a process-profiling service's methods (collector_proc_service.c). */
struct collector_proc_ud {
    struct collector *c;
    const struct proc_service *svc;
};

struct collector {
    struct store *store;        /* borrowed */
    struct metrics *metrics;    /* borrowed */
    const char *auth_token;     /* borrowed; NULL = no agent authentication */
    size_t buffered_bytes;      /* snapshot batch buffers of all streams (internal) */
    uint64_t pprof_max_bytes;   /* largest pprof upload (0 = 30 MiB) */
    uint64_t jfr_max_bytes;     /* largest JFR upload of an async-profiler task (0 = 30 MiB) */
    uint64_t max_segment_spans; /* segments with more spans are refused (0 = no limit) */
    uint64_t max_decoded_bytes; /* memory one segment may decode into (0 = no limit) */
    size_t max_policies; /* continuous-profiling policies held (0 = CONT_EVAL_MAX_POLICIES) */
    size_t max_endpoints_per_service; /* endpoint statistics kept per service (0 = default) */
    /* A database shared by several collectors (PostgreSQL): the endpoint statistics' minutes,
     * the current one included, are written every second for the others to merge
     * (stats/endpoint_partials.h). */
    bool shared_stats;
    size_t upload_bytes; /* process-profile upload buffers of all streams (internal) */
    /* Wall clock (ms); tests may replace it. NULL = skpx_now_ms. */
    int64_t (*now_ms)(void);
    /* Segment ingest (collector_tracing.c), set by collector_segments_start. Before it (or
     * without it) every segment is stored and no statistics are kept. */
    struct endpoint_stats *stats;
    struct segment_keep *keep;
    struct collector_segs *segs;
    /* Continuous profiling (collector_continuous.c), set by collector_continuous_start. */
    struct collector_cont *cont;
    /* goProfileReport's decode worker (collector_goprofile_start; NULL = inline). */
    struct goprof_worker *goprof;
    /* Long store writes, a step per loop turn (collector_turns.h; NULL = at once). */
    struct collector_turns *turns;
    /* Process-profiling services by enum proc_kind (internal). */
    struct collector_proc_ud proc_ud[2];
};

/* Registers every handler on `srv`; `c` is borrowed and must outlive the server.
 * Errors: SKP_EEXIST (a path is taken), SKP_ENOMEM. */
SKP_MUST_CHECK skp_err collector_register(struct collector *c, struct skpx_grpc_server *srv);

/* ---- shared by the collector_*.c files ---- */

/* on_start of every method: checks the `authentication` metadata when a token is set. */
int collector_on_start(struct skpx_grpc_call *call, void *ud);
/* Registers `m` under both the packaged and the compat path (`service`, `method` static). */
SKP_MUST_CHECK skp_err collector_add(struct skpx_grpc_server *srv, const char *packaged_path,
                                     const char *compat_path, struct skpx_grpc_method m);
/* A unary method decoding `request_desc` with `on_message` (a COLLECTOR_UNARY_ON_MESSAGE), the
 * token check of collector_on_start, and the shared collector_unary_on_end/on_close; `ud` is
 * the collector (borrowed). A caller with its own on_start replaces it in the result. */
struct skpx_grpc_method collector_unary_method(
    const ProtobufCMessageDescriptor *request_desc,
    int (*on_message)(struct skpx_grpc_call *call, void *ud, const ProtobufCMessage *msg,
                      const uint8_t *raw, size_t raw_len),
    void *ud);
/* One unary method of a service, as collector_unary_method makes it from `request_desc` and
 * `on_message`, under `packaged_path` and `compat_path` (NULL: none). */
struct collector_unary_route {
    const char *packaged_path;
    const char *compat_path;
    const ProtobufCMessageDescriptor *request_desc;
    int (*on_message)(struct skpx_grpc_call *call, void *ud, const ProtobufCMessage *msg,
                      const uint8_t *raw, size_t raw_len);
};
/* Registers routes[0..n) in order, each with the collector `c` as ud; the first failure stops
 * the rest. Errors: those of collector_add. */
SKP_MUST_CHECK skp_err collector_add_unary(struct collector *c, struct skpx_grpc_server *srv,
                                           const struct collector_unary_route *routes, size_t n);
/* The empty Commands answer. */
const ProtobufCMessage *collector_empty_commands(void);
/* Protobuf allocator backed by skpx_malloc. */
extern ProtobufCAllocator collector_pb_alloc;
int64_t collector_now(const struct collector *c);

SKP_MUST_CHECK skp_err collector_profile_register(struct collector *c,
                                                  struct skpx_grpc_server *srv);
SKP_MUST_CHECK skp_err collector_management_register(struct collector *c,
                                                     struct skpx_grpc_server *srv);
SKP_MUST_CHECK skp_err collector_tracing_register(struct collector *c,
                                                  struct skpx_grpc_server *srv);
SKP_MUST_CHECK skp_err collector_drop_register(struct collector *c, struct skpx_grpc_server *srv);
SKP_MUST_CHECK skp_err collector_pprof_register(struct collector *c, struct skpx_grpc_server *srv);
/* ProfileTask.goProfileReport handlers (collector_goprofile.c), registered by
 * collector_profile_register. Limits of one uploaded file: */
#define GOPROFILE_MAX_DECODED ((size_t)64 << 20)        /* decompressed bytes */
#define GOPROFILE_MAX_DECODE_MEMORY ((size_t)128 << 20) /* decoder memory (pprof_limits) */
#define GOPROFILE_MAX_ROWS 200000                       /* snapshot rows (and samples) */
#define GOPROFILE_MAX_FRAME_BYTES (64u << 20)           /* frame strings of those rows */
#define GOPROFILE_MAX_SEGMENTS 65536                    /* segments (more are skipped) */
#define GOPROFILE_MAX_WEIGHT 1000000 /* a sample's count: its row's weight (larger: clamped) */
#define GOPROFILE_QUEUE_MAX 8        /* files waiting for or in the decode worker */
/* Starts the decode worker thread of goProfileReport on `base` (without it files are decoded
 * inline). Errors: SKP_ENOMEM, SKP_EIO. */
SKP_MUST_CHECK skp_err collector_goprofile_start(struct collector *c, struct event_base *base);
/* Stops the worker; files not yet stored are dropped (their calls fail). NULL-safe. */
void collector_goprofile_stop(struct collector *c);
int collector_goprofile_on_message(struct skpx_grpc_call *call, void *ud,
                                   const ProtobufCMessage *msg, const uint8_t *raw, size_t raw_len);
void collector_goprofile_on_end(struct skpx_grpc_call *call, void *ud);
void collector_goprofile_on_close(struct skpx_grpc_call *call, void *ud, int status);

/* Segment ingest split (issue 18): every segment's entry span feeds c->stats; the segment is
 * stored per policy `p` (segment_keep.h). Starts a 1-s timer on `base` (may be NULL: then the
 * caller calls collector_segments_tick) that rolls finished minutes up into the store and
 * decides held segments whose grace ended. Errors: SKP_ENOMEM. */
SKP_MUST_CHECK skp_err collector_segments_start(struct collector *c, struct event_base *base,
                                                const struct keep_policy *p);
/* Rolls up the statistics, stores held segments that have snapshots, frees. NULL-safe. */
void collector_segments_stop(struct collector *c);
/* What the timer does, at c's clock. */
void collector_segments_tick(struct collector *c);
/* Snapshots of these segments were stored: held segments among them are stored now. */
void collector_segments_profiled(struct collector *c, const struct store_snapshot *v, size_t n);

/* skywalking.v10.AsyncProfilerTask (collector_async.c). */
SKP_MUST_CHECK skp_err collector_async_register(struct collector *c, struct skpx_grpc_server *srv);

/* skywalking.v3.ContinuousProfilingService (collector_continuous.c). */
SKP_MUST_CHECK skp_err collector_continuous_register(struct collector *c,
                                                     struct skpx_grpc_server *srv);
/* Loads the stored policies into a new evaluator with slots of slot_ms (0 = 1 s) and, with a
 * base, evaluates every check_ms (0 = slot_ms) on a timer. Errors: SKP_EIO, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err collector_continuous_start(struct collector *c, struct event_base *base,
                                                  int64_t slot_ms, int64_t check_ms);
/* Frees the evaluator. NULL-safe. */
void collector_continuous_stop(struct collector *c);
/* What the timer does, at c's clock. */
void collector_continuous_tick(struct collector *c);
/* A finished request for the evaluator (called by the segment ingest). */
void collector_continuous_record(struct collector *c, const char *service, const char *instance,
                                 const char *endpoint, int64_t end_ms, int64_t latency_ms,
                                 bool is_error);
/* The evaluator (NULL before start), for the HTTP API's policy changes and live values. */
struct cont_eval *collector_continuous_eval(struct collector *c);

/* The state a streaming method keeps between the messages of one call: the one attached to
 * `call`, or else a new zeroed one of `size` bytes, attached now (then *fresh is true; `fresh`
 * may be NULL). NULL when out of memory. */
void *collector_call_state(struct skpx_grpc_call *call, size_t size, bool *fresh);
/* Detaches the state attached to `call` and returns it (NULL when there is none). */
void *collector_call_take(struct skpx_grpc_call *call);

/* Unary helper: per-call result computed in on_message, sent in on_end. */
struct collector_unary {
    int status; /* SKPX_GRPC_OK or the failure */
    char message[160];
    const ProtobufCMessage *resp;               /* NULL = empty Commands */
    void (*free_fn)(struct collector_unary *u); /* frees what resp refers to; may be NULL */
    void *owned;
};
/* Refuses the call: u's status and its message (printf-style) go out in on_end. Returns
 * SKPX_GRPC_OK, what a unary body returns then. */
int collector_unary_fail(struct collector_unary *u, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A store call failed: RESOURCE_EXHAUSTED for SKP_ENOMEM, else UNAVAILABLE, with the message
 * "skyprofd: <what>: <err's text>". Returns SKPX_GRPC_OK. */
int collector_unary_store_failed(struct collector_unary *u, skp_err err, const char *what);
/* A new zeroed answer of `size` bytes owned by u (u->owned), freed by free_fn when the call
 * closes. NULL when out of memory (u is left as it was). */
void *collector_unary_own(struct collector_unary *u, size_t size,
                          void (*free_fn)(struct collector_unary *u));
/* Allocates a unary result attached to `call` (freed by collector_unary_on_close).
 * Returns NULL on OOM. */
struct collector_unary *collector_unary_attach(struct skpx_grpc_call *call);
/* The body of a unary method: its decoded request, the collector and the call's result slot
 * (already attached). Returns SKPX_GRPC_OK (the result goes out in on_end) or a status that
 * ends the call at once. */
typedef int (*collector_unary_fn)(struct collector *c, struct collector_unary *u,
                                  const ProtobufCMessage *msg);
/* The preamble every unary on_message shares: attaches the result slot to `call`
 * (RESOURCE_EXHAUSTED when out of memory) and runs fn with the collector `ud`. */
int collector_unary_run(struct skpx_grpc_call *call, void *ud, const ProtobufCMessage *msg,
                        collector_unary_fn fn);
/* Defines `name`, the on_message callback of a unary method whose body is `fn`. */
#define COLLECTOR_UNARY_ON_MESSAGE(name, fn)                                                       \
    static int name(struct skpx_grpc_call *call, void *ud, const ProtobufCMessage *msg,            \
                    const uint8_t *raw, size_t raw_len)                                            \
    {                                                                                              \
        (void)raw;                                                                                 \
        (void)raw_len;                                                                             \
        return collector_unary_run(call, ud, msg, fn);                                             \
    }
void collector_unary_on_end(struct skpx_grpc_call *call, void *ud);
void collector_unary_on_close(struct skpx_grpc_call *call, void *ud, int status);

#endif
