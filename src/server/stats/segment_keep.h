/* segment_keep.h - which reported trace segments are stored (--keep-segments).
 *
 *   all          every segment;
 *   sampled:N    profiled ones, plus one in N others (chosen by a hash of the segment id, so
 *                every collector keeps the same ones);
 *   profiled     (default) only segments that have snapshots: snapshots and segments arrive
 *                in either order, so a segment whose endpoint is under an active profile task
 *                and has no snapshot yet is held in memory for a grace period, stored as soon
 *                as a snapshot of it is stored, and dropped (counted) when the grace ends and
 *                the store has no snapshot of it either;
 *   none         no segment (statistics only).
 * Held segments are bounded in bytes; the oldest is decided early (store lookup) when full.
 * Single-threaded (the server's event loop). */
#ifndef SKP_SERVER_SEGMENT_KEEP_H
#define SKP_SERVER_SEGMENT_KEEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "skyprof/skp_err.h"

enum keep_mode {
    KEEP_PROFILED = 0,
    KEEP_NONE,
    KEEP_SAMPLED,
    KEEP_ALL,
};

struct keep_policy {
    enum keep_mode mode;
    uint32_t sample_n;     /* KEEP_SAMPLED: keep 1 in sample_n unprofiled segments */
    int64_t grace_ms;      /* how long a candidate is held; 0 = KEEP_DEFAULT_GRACE_MS */
    size_t max_held_bytes; /* 0 = KEEP_DEFAULT_HELD_BYTES */
};

#define KEEP_DEFAULT_GRACE_MS 30000
/* Held candidates: segments of endpoints under an active task waiting for their snapshots.
 * 64 MB hold about 30 s of a 2,000 requests/s endpoint at 1 KB per segment. */
#define KEEP_DEFAULT_HELD_BYTES (64u << 20)

/* Parses "none" | "profiled" | "all" | "sampled:N" (N in 1..1000000). */
SKP_MUST_CHECK skp_err keep_policy_parse(const char *text, struct keep_policy *out);

enum keep_decision {
    KEEP_STORE, /* store it now */
    KEEP_HOLD,  /* held (copied) until its snapshots come or the grace ends */
    KEEP_DROP,  /* not stored */
};

struct segment_keep;

struct segment_keep_counters {
    uint64_t stored_now;       /* decided KEEP_STORE on arrival */
    uint64_t held;             /* decided KEEP_HOLD */
    uint64_t released;         /* held, then stored because a snapshot came */
    uint64_t expired_profiled; /* held to the end of the grace, the store had its snapshots */
    uint64_t dropped;          /* not stored (unprofiled) */
    uint64_t evicted;          /* held ones decided early because the bound was reached */
    size_t held_now;
    size_t held_bytes;
};

SKP_MUST_CHECK skp_err segment_keep_new(const struct keep_policy *p, struct segment_keep **out);
void segment_keep_free(struct segment_keep *sk);
const struct keep_policy *segment_keep_policy(const struct segment_keep *sk);

/* Decides for one arriving segment. `under_task`: its endpoint is under an active profile task
 * of its service; `has_snapshots`: the caller knows the store has snapshots of it (may be
 * false when unknown). On KEEP_HOLD the raw bytes are copied. Errors: SKP_ENOMEM (then it is
 * KEEP_STORE: better stored than lost). */
enum keep_decision segment_keep_decide(struct segment_keep *sk, const char *segment_id,
                                       size_t id_len, bool under_task, bool has_snapshots,
                                       const uint8_t *raw, size_t raw_len, int64_t now_ms);
/* A snapshot of segment_id was stored: remembers it (for segments arriving later within the
 * grace) and moves a held copy to the ready list. */
void segment_keep_mark_profiled(struct segment_keep *sk, const char *segment_id, int64_t now_ms);

/* Held segments to look at now: ready ones (a snapshot came) and, with `expired_too`, those
 * whose grace ended at now_ms or that the byte bound evicts. For each, cb(ud, raw, len, ready)
 * runs once and the copy is freed after it; cb returns whether it stored the segment. */
typedef bool (*segment_keep_cb)(void *ud, const char *segment_id, const uint8_t *raw, size_t len,
                                bool ready);
void segment_keep_drain(struct segment_keep *sk, int64_t now_ms, bool expired_too,
                        segment_keep_cb cb, void *ud);
bool segment_keep_has_ready(const struct segment_keep *sk);

void segment_keep_counters(const struct segment_keep *sk, struct segment_keep_counters *out);

#endif
