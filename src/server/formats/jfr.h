/* jfr.h - a JDK Flight Recorder (JFR) file parser: chunk by chunk, driven by each chunk's own
 * metadata event, it hands every sample-like event (execution and native samples, allocations,
 * monitor enter / thread park, async-profiler's own event types) to a callback with its stack
 * resolved into frame names `package.Class.method[:line]` (root first).
 *
 * Memory: the per-chunk state (metadata, constant-pool index, resolved stacks) is dropped when
 * the next chunk starts; only the interned strings (frame, class and thread names) live for the
 * whole parse. jfr_parser_parse_file reads one chunk at a time, so a file is never held whole.
 * Bad input (truncated, bit-flipped, hostile) ends the parse with SKP_EINVAL and a message
 * naming the chunk and byte offset. Format notes: docs/internals/jfr.md. Single-threaded;
 * independent parsers may run on different threads. */
#ifndef SKP_SERVER_JFR_H
#define SKP_SERVER_JFR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "skyprof/skp_err.h"

/* The trees a recording yields (SkyWalking OAP's JFR event types). */
enum jfr_kind {
    JFR_KIND_EXECUTION = 0, /* jdk.ExecutionSample, profiler.WallClockSample (CPU/WALL/...) */
    JFR_KIND_NATIVE = 1,    /* jdk.NativeMethodSample */
    JFR_KIND_ALLOC = 2,     /* jdk.ObjectAllocation{InNewTLAB,OutsideTLAB,Sample}, bytes */
    JFR_KIND_LOCK = 3,      /* jdk.JavaMonitorEnter, jdk.ThreadPark, nanoseconds */
    JFR_KIND_LIVE = 4,      /* profiler.LiveObject, bytes */
    JFR_KIND_COUNT
};

#define JFR_DEFAULT_MAX_CHUNK_BYTES (256u << 20)
#define JFR_MAX_STACK_FRAMES 4096u /* deeper stacks keep their root-most frames */

/* A readable reason for a failed parse. */
struct jfr_error {
    char msg[240];
    uint32_t chunk;  /* 0-based chunk ordinal */
    uint64_t offset; /* byte offset in the file */
};

/* One sample handed to the callback. Every pointer is borrowed and, for strings, interned:
 * equal strings have equal pointers, valid until jfr_parser_free. */
struct jfr_sample {
    enum jfr_kind kind;
    const char *event_type;    /* "jdk.ExecutionSample", ... */
    uint64_t weight;           /* 1 per sample (or async-profiler's `samples`), bytes, ns */
    const char *thread;        /* Java thread name (else OS name), NULL when absent */
    const char *const *frames; /* root first */
    uint32_t n_frames;
    const char *object_class; /* allocated class (ALLOC, LIVE), else NULL */
    bool is_tlab;             /* jdk.ObjectAllocationInNewTLAB / OutsideTLAB */
    uint64_t stack_id;        /* equal ids ⇔ equal frames, within one parser */
    int64_t time_ms;          /* the event's start, ms since the epoch; 0 = unknown */
};

/* Returning an error from the callback stops the parse with that error. */
typedef skp_err (*jfr_sample_cb)(void *ctx, const struct jfr_sample *s);

struct jfr_parse_opts {
    bool with_lines;        /* append ":line" to frames that have a line number */
    size_t max_chunk_bytes; /* 0 = JFR_DEFAULT_MAX_CHUNK_BYTES */
};

struct jfr_parser;

/* Creates a parser calling cb(ctx, sample) for each sample; opts NULL = defaults (with lines).
 * Caller frees *out with jfr_parser_free. Errors: SKP_ENOMEM. */
SKP_MUST_CHECK skp_err jfr_parser_new(const struct jfr_parse_opts *opts, jfr_sample_cb cb,
                                      void *ctx, struct jfr_parser **out);
/* Parses a whole recording held in memory (borrowed). err may be NULL.
 * Errors: SKP_EINVAL (malformed: err says where and why), SKP_ETOOBIG (a chunk larger than the
 * limit), SKP_ENOMEM, or the callback's error. */
SKP_MUST_CHECK skp_err jfr_parser_parse_mem(struct jfr_parser *p, const uint8_t *buf, size_t len,
                                            struct jfr_error *err);
/* Same, reading `f` (borrowed) one chunk at a time. Errors as above plus SKP_EIO. */
SKP_MUST_CHECK skp_err jfr_parser_parse_file(struct jfr_parser *p, FILE *f, struct jfr_error *err);
/* Chunks parsed so far. */
uint32_t jfr_parser_chunks(const struct jfr_parser *p);
/* NULL ok. Invalidates every string handed to the callback. */
void jfr_parser_free(struct jfr_parser *p);

/* "execution", "native", "alloc", "lock", "live" (static strings). */
const char *jfr_kind_name(enum jfr_kind k);
/* Accepts the kind names above, OAP's names (EXECUTION_SAMPLE, OBJECT_ALLOCATION_IN_NEW_TLAB,
 * OBJECT_ALLOCATION_OUTSIDE_TLAB, THREAD_PARK, JAVA_MONITOR_ENTER, LIVE_OBJECT) and the task
 * events (CPU, WALL, CTIMER, ITIMER → execution; ALLOC; LOCK), case-insensitively.
 * Errors: SKP_EINVAL. */
SKP_MUST_CHECK skp_err jfr_kind_parse(const char *s, enum jfr_kind *out);

#endif
