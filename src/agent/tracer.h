/* tracer.h - segments and spans of the calling thread, and the process-wide tracer hub.
 *
 * Each thread owns one working segment (heap, allocated at its first entry_begin, freed by a
 * thread-exit destructor); spans, tags and text live in fixed arrays inside it, so the request
 * path never allocates except one block per finished segment (the copy queued for reporting).
 * The hub is static and never freed: it holds what request threads touch without a lock (the
 * current tracer config, the task context with its slots, the finished-segment queue), so a
 * request in flight while an agent stops or restarts never touches freed memory; segments of an
 * older agent (epoch) are dropped by the consumer. */
#ifndef SKP_AGENT_TRACER_H
#define SKP_AGENT_TRACER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/agent_limits.h"
#include "agent/ring.h"
#include "agent/task_context.h"
#include "skyprof/skyprof.h"

/* Finished segments the hub queue can hold at most. The queue is sized once, by the first agent's
 * segment_buffer_size (16 bytes per entry); later agents' limits apply below that size. */
#define SKP_SEGMENT_RING_MAX 1000000

/* Immutable per agent start; never freed while the process lives (request threads may hold it). */
struct skp__tracer_conf {
    uint64_t epoch;
    char service[SKYPROF_STR_MAX];
    char instance[SKYPROF_STR_MAX];
    char id_prefix[40];
    bool profile_active;
    bool report_segments;
    size_t segment_limit;
    struct skp__tracer_conf *next_retired;
};

struct skp__span_rec {
    int32_t id;
    int32_t parent;
    int64_t start_ms;
    int64_t end_ms;
    int32_t component;
    uint8_t kind;  /* enum skyprof_span_kind */
    uint8_t layer; /* enum skyprof_span_layer */
    bool is_error;
    bool ended;
    uint32_t name_off, name_len;
    uint32_t peer_off, peer_len;
};

struct skp__tag_rec {
    int32_t span;
    uint32_t key_off, key_len;
    uint32_t val_off, val_len;
};

/* The incoming cross-process ref (sw8) of the first span. Offsets into the text. */
struct skp__ref_rec {
    bool present;
    int32_t parent_span_id;
    uint32_t off[6]; /* trace id, parent segment, service, instance, endpoint, peer */
    uint32_t len[6];
};

/* A finished segment as queued: one allocation; spans/tags/text point inside it. */
struct skp__finished_segment {
    uint64_t epoch;
    char trace_id[SKP_ID_MAX];
    char segment_id[SKP_ID_MAX];
    bool size_limited;
    struct skp__ref_rec ref;
    int32_t n_spans;
    int32_t n_tags;
    uint32_t text_len;
    struct skp__span_rec *spans;
    struct skp__tag_rec *tags;
    char *text;
};

struct skp__hub {
    _Atomic(struct skp__tracer_conf *) conf; /* NULL = tracing off */
    struct skp__task_ctx ctx;
    struct skp__ring segments; /* struct skp__finished_segment * */
    bool segments_ready;
    _Atomic uint64_t segments_dropped;
    _Atomic uint32_t next_thread_idx;
    struct skp__tracer_conf *retired; /* lifecycle thread only */
};

/* The process's hub (static storage). Thread-safe. */
struct skp__hub *skp__hub(void);

/* Lifecycle (start/stop; not concurrent with each other): publishes a new tracer config (takes
 * ownership; kept until exit) or NULL to switch tracing off. Allocates the segment queue on first
 * use (capacity from conf->segment_limit). Errors: SKP_ENOMEM. */
SKP_MUST_CHECK skp_err skp__hub_publish(struct skp__tracer_conf *conf);

/* Frees a popped finished segment. NULL ok. */
void skp__finished_segment_free(struct skp__finished_segment *fs);

/* Child side of fork: tracing off, slots reset without touching the parent's threads. */
void skp__hub_after_fork_child(void);

/* Kernel thread id of the calling thread (cached per thread). */
int skp__gettid_cached(void);

#endif
