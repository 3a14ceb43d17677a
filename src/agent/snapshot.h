/* snapshot.h - one thread dump of a profiled request, as queued between the sampler and the
 * channel thread: one contiguous allocation (header, frames root-first, text), immutable after
 * creation. Address frames carry the raw address; they are symbolized when sent.
 * The snapshot queue bounds both the count (ring) and the bytes queued. */
#ifndef SKP_AGENT_SNAPSHOT_H
#define SKP_AGENT_SNAPSHOT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/ring.h"
#include "skyprof/skyprof.h"

struct skp__snap_frame {
    uint64_t addr; /* SKYPROF_FRAME_ADDR */
    uint32_t off;  /* SKYPROF_FRAME_STR: offset of the text in the snapshot's text area */
    uint32_t len;
    uint32_t kind; /* enum skyprof_frame_kind */
};

struct skp__snapshot {
    const char *task_id;    /* points into text */
    const char *segment_id; /* points into text */
    int64_t time_ms;
    int32_t sequence;
    uint32_t n_frames; /* root-first */
    size_t bytes;      /* size of the allocation */
    const char *text;
    struct skp__snap_frame frames[];
};

/* Builds a snapshot from a capture (frames innermost first, as sources fill them): keeps the
 * innermost `max_depth` frames and stores them root-first. Returns NULL on ENOMEM or when the
 * capture is empty. Caller frees with skp__snapshot_free. Sampler thread. */
struct skp__snapshot *skp__snapshot_new(const char *task_id, const char *segment_id,
                                        int64_t time_ms, int32_t sequence,
                                        const struct skyprof_capture *cap, uint32_t max_depth);
void skp__snapshot_free(struct skp__snapshot *s);

struct skp__snapshot_queue {
    struct skp__ring ring;
    _Atomic size_t bytes; /* bytes of queued snapshots */
    size_t max_bytes;
    _Atomic uint64_t dropped;
};

SKP_MUST_CHECK skp_err skp__snapshot_queue_init(struct skp__snapshot_queue *q, size_t limit,
                                                size_t max_bytes);
/* Frees queued snapshots and the ring. Safe after a failed init. */
void skp__snapshot_queue_cleanup(struct skp__snapshot_queue *q);
/* Takes ownership of s. Never blocks; when the queue is full (count or bytes) s is freed and the
 * drop counted; returns false then. Any thread. */
bool skp__snapshot_queue_push(struct skp__snapshot_queue *q, struct skp__snapshot *s);
/* Single consumer. Returns the oldest snapshot (caller frees) or NULL. */
struct skp__snapshot *skp__snapshot_queue_pop(struct skp__snapshot_queue *q);

#endif
