/* ring.h - bounded lock-free multi-producer / single-consumer queue of pointers.
 * Producers (request threads pushing finished segments, the sampler pushing snapshots) never block
 * and never allocate: when the queue holds `limit` items the push fails and is counted as dropped.
 * One consumer (the channel thread) pops. Design: Vyukov's bounded queue (a sequence number per
 * cell), so a push is one CAS on the head plus two stores; no lock, no syscall. */
#ifndef SKP_AGENT_RING_H
#define SKP_AGENT_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "skyprof/skp_err.h"

struct skp__ring_cell;

struct skp__ring {
    struct skp__ring_cell *cells; /* owned; `mask + 1` cells */
    size_t mask;
    size_t limit; /* max items queued (<= mask + 1) */
    /* head and tail on different cache lines (padding, not _Alignas: rings are embedded in
     * heap objects that malloc aligns to 16 only) */
    char _pad0[64];
    _Atomic size_t head; /* next position producers claim */
    char _pad1[64 - sizeof(size_t)];
    _Atomic size_t tail; /* next position the consumer takes */
    char _pad2[64 - sizeof(size_t)];
    _Atomic uint64_t pushed;
    _Atomic uint64_t dropped;
};

/* Allocates room for `limit` items (capacity rounded up to a power of two). Not hot path.
 * Errors: SKP_EINVAL (limit 0 or huge), SKP_ENOMEM. */
SKP_MUST_CHECK skp_err skp__ring_init(struct skp__ring *r, size_t limit);
/* Frees the cells (items still queued are not freed: pop them first). Safe after a failed init. */
void skp__ring_cleanup(struct skp__ring *r);
/* Any thread. Hot path: lock-free, no allocation. Returns false (and counts a drop) when full. */
bool skp__ring_push(struct skp__ring *r, void *item);
/* Consumer thread only. Returns the oldest item or NULL when empty. */
void *skp__ring_pop(struct skp__ring *r);
/* Approximate number of queued items. Any thread. */
size_t skp__ring_size(const struct skp__ring *r);

#endif
