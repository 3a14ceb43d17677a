/* snapshot.h - one thread dump of a profiled request, as queued between the sampler and the
 * channel thread: one contiguous allocation (header, frames root-first, text), immutable after
 * creation. Address frames carry the raw address; they are symbolized when sent.
 * The snapshot queue bounds both the count (ring) and the bytes queued; a hold keeps the dumps of
 * a request under a task's threshold until it is known whether they are sent. */
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

/* The held dumps of one request that runs under its task's min-duration threshold (sampler.h):
 * kept in capture order until the request passes the threshold (then queued, in order, each with
 * its own time and sequence number) or ends under it (then freed, nothing sent). Bounded by a
 * count (`cap`, the entries of the array given at init) and by bytes (`max_bytes`). When full,
 * the earliest dumps (up to half the count and half the bytes, and always the first) stay, and
 * the rest of the budget is a ring of the latest: the request's beginning and the dumps just
 * before the threshold survive, the middle is dropped (counted here; the sequence numbers the
 * dropped dumps took leave a gap the backend sees). Sampler thread only; never allocates. */
struct skp__snapshot_hold {
    struct skp__snapshot **ents; /* borrowed, cap entries */
    uint32_t cap;
    size_t max_bytes;
    uint32_t n_head;     /* ents[0..n_head): the earliest dumps */
    bool ringing;        /* the head is closed: later dumps go to the ring */
    uint32_t ring_first; /* ring entry k is ents[n_head + (ring_first + k) % ring_cap] */
    uint32_t ring_n;
    size_t bytes;   /* bytes of the snapshots held */
    uint64_t owner; /* the holder's tag (the sampler: the slot's claim sequence; 0 = none) */
};

/* An empty hold over ents[0..cap) (cap >= 2) and a budget of max_bytes. */
void skp__snapshot_hold_init(struct skp__snapshot_hold *h, struct skp__snapshot **ents,
                             uint32_t cap, size_t max_bytes);
/* Number of snapshots held. */
uint32_t skp__snapshot_hold_count(const struct skp__snapshot_hold *h);
/* Takes ownership of s. Returns the number of snapshots dropped to respect the budget (older
 * ring entries, or s itself when it cannot fit). */
uint32_t skp__snapshot_hold_add(struct skp__snapshot_hold *h, struct skp__snapshot *s);
/* Moves every held snapshot, in capture order, into q (a full queue drops and counts as
 * skp__snapshot_queue_push does); the hold is empty afterwards, owner kept. Returns the number
 * moved. */
uint32_t skp__snapshot_hold_flush(struct skp__snapshot_hold *h, struct skp__snapshot_queue *q);
/* Frees every held snapshot; the hold is empty afterwards with owner 0. Returns the number
 * freed. */
uint32_t skp__snapshot_hold_discard(struct skp__snapshot_hold *h);

#endif
