/* ring.c - bounded MPSC pointer queue (see ring.h). Each cell carries a sequence number: a
 * producer may fill cell i when seq == pos, the consumer may take it when seq == pos + 1, and
 * gives it back for the next lap by setting seq = pos + cap. The soft `limit` lets callers bound
 * the queue below the power-of-two capacity. */
#include "agent/ring.h"

#include "common/alloc.h"

struct skp__ring_cell {
    _Atomic size_t seq;
    void *item;
};

#define RING_MAX_CAP ((size_t)1 << 24)

skp_err skp__ring_init(struct skp__ring *r, size_t limit)
{
    r->cells = NULL;
    if (limit == 0 || limit > RING_MAX_CAP)
        return SKP_EINVAL;
    size_t cap = 2;
    while (cap < limit)
        cap <<= 1;
    r->cells = skpx_calloc(cap, sizeof(*r->cells));
    if (!r->cells)
        return SKP_ENOMEM;
    for (size_t i = 0; i < cap; i++)
        atomic_init(&r->cells[i].seq, i);
    r->mask = cap - 1;
    r->limit = limit;
    atomic_init(&r->head, 0);
    atomic_init(&r->tail, 0);
    atomic_init(&r->pushed, 0);
    atomic_init(&r->dropped, 0);
    return SKP_OK;
}

void skp__ring_cleanup(struct skp__ring *r)
{
    if (!r)
        return;
    skpx_free(r->cells);
    r->cells = NULL;
}

bool skp__ring_push(struct skp__ring *r, void *item)
{
    size_t pos = atomic_load_explicit(&r->head, memory_order_relaxed);
    for (;;) {
        size_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (pos - tail >= r->limit)
            goto full;
        struct skp__ring_cell *c = &r->cells[pos & r->mask];
        size_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        intptr_t dif = (intptr_t)seq - (intptr_t)pos;
        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&r->head, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                c->item = item;
                atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
                atomic_fetch_add_explicit(&r->pushed, 1, memory_order_relaxed);
                return true;
            }
        } else if (dif < 0) {
            goto full; /* the consumer has not freed this cell yet */
        } else {
            pos = atomic_load_explicit(&r->head, memory_order_relaxed);
        }
    }
full:
    atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
    return false;
}

void *skp__ring_pop(struct skp__ring *r)
{
    size_t pos = atomic_load_explicit(&r->tail, memory_order_relaxed);
    struct skp__ring_cell *c = &r->cells[pos & r->mask];
    size_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
    if ((intptr_t)seq - (intptr_t)(pos + 1) < 0)
        return NULL; /* empty, or a producer claimed the cell but has not stored yet */
    void *item = c->item;
    c->item = NULL;
    atomic_store_explicit(&c->seq, pos + r->mask + 1, memory_order_release);
    atomic_store_explicit(&r->tail, pos + 1, memory_order_release);
    return item;
}

size_t skp__ring_size(const struct skp__ring *r)
{
    size_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    size_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    return h >= t ? h - t : 0;
}
