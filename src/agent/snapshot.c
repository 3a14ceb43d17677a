/* snapshot.c - snapshot blocks, their bounded queue and the holds of thresholded requests (see
 * snapshot.h). */
#include "agent/snapshot.h"

#include <string.h>

#include "common/alloc.h"

struct skp__snapshot *skp__snapshot_new(const char *task_id, const char *segment_id,
                                        int64_t time_ms, int32_t sequence,
                                        const struct skyprof_capture *cap, uint32_t max_depth)
{
    uint32_t n = cap->n < cap->cap ? cap->n : cap->cap;
    if (n > max_depth)
        n = max_depth; /* frames[0..n) are the innermost ones: the root side is dropped */
    if (n == 0)
        return NULL;
    size_t tlen = strlen(task_id) + 1 + strlen(segment_id) + 1;
    for (uint32_t i = 0; i < n; i++)
        if (cap->frames[i].kind == SKYPROF_FRAME_STR)
            tlen += cap->frames[i].len;
    size_t bytes = sizeof(struct skp__snapshot) + n * sizeof(struct skp__snap_frame) + tlen;
    struct skp__snapshot *s = skpx_malloc(bytes);
    if (!s)
        return NULL;
    char *text = (char *)&s->frames[n];
    size_t off = 0;
    size_t l = strlen(task_id) + 1;
    memcpy(text + off, task_id, l);
    s->task_id = text + off;
    off += l;
    l = strlen(segment_id) + 1;
    memcpy(text + off, segment_id, l);
    s->segment_id = text + off;
    off += l;
    for (uint32_t i = 0; i < n; i++) {
        const struct skyprof_frame *f = &cap->frames[i];
        struct skp__snap_frame *d = &s->frames[n - 1 - i]; /* innermost first -> root first */
        d->kind = f->kind;
        d->addr = f->addr;
        d->off = (uint32_t)off;
        d->len = 0;
        if (f->kind == SKYPROF_FRAME_STR && f->str && f->len) {
            memcpy(text + off, f->str, f->len);
            d->len = f->len;
            off += f->len;
        }
    }
    s->text = text;
    s->time_ms = time_ms;
    s->sequence = sequence;
    s->n_frames = n;
    s->bytes = bytes;
    return s;
}

void skp__snapshot_free(struct skp__snapshot *s)
{
    skpx_free(s);
}

skp_err skp__snapshot_queue_init(struct skp__snapshot_queue *q, size_t limit, size_t max_bytes)
{
    atomic_init(&q->bytes, 0);
    atomic_init(&q->dropped, 0);
    q->max_bytes = max_bytes;
    return skp__ring_init(&q->ring, limit);
}

void skp__snapshot_queue_cleanup(struct skp__snapshot_queue *q)
{
    if (!q || !q->ring.cells)
        return;
    struct skp__snapshot *s;
    while ((s = skp__snapshot_queue_pop(q)))
        skp__snapshot_free(s);
    skp__ring_cleanup(&q->ring);
}

bool skp__snapshot_queue_push(struct skp__snapshot_queue *q, struct skp__snapshot *s)
{
    size_t b = atomic_fetch_add(&q->bytes, s->bytes);
    if (b + s->bytes > q->max_bytes || !skp__ring_push(&q->ring, s)) {
        atomic_fetch_sub(&q->bytes, s->bytes);
        atomic_fetch_add(&q->dropped, 1);
        skp__snapshot_free(s);
        return false;
    }
    return true;
}

struct skp__snapshot *skp__snapshot_queue_pop(struct skp__snapshot_queue *q)
{
    struct skp__snapshot *s = skp__ring_pop(&q->ring);
    if (s)
        atomic_fetch_sub(&q->bytes, s->bytes);
    return s;
}

/* --- holds ----------------------------------------------------------------------------------- */
void skp__snapshot_hold_init(struct skp__snapshot_hold *h, struct skp__snapshot **ents,
                             uint32_t cap, size_t max_bytes)
{
    memset(h, 0, sizeof(*h));
    h->ents = ents;
    h->cap = cap < 2 ? 2 : cap;
    h->max_bytes = max_bytes;
}

uint32_t skp__snapshot_hold_count(const struct skp__snapshot_hold *h)
{
    return h->n_head + h->ring_n;
}

static struct skp__snapshot **ring_at(struct skp__snapshot_hold *h, uint32_t k)
{
    uint32_t ring_cap = h->cap - h->n_head;
    return &h->ents[h->n_head + (h->ring_first + k) % ring_cap];
}

uint32_t skp__snapshot_hold_add(struct skp__snapshot_hold *h, struct skp__snapshot *s)
{
    if (!h->ringing) {
        /* the first dump always stays (sequence 0 marks a profiled segment); then the head
         * takes up to half the count and half the bytes */
        bool fits = h->n_head == 0 ? s->bytes <= h->max_bytes
                                   : h->n_head < h->cap - h->cap / 2 &&
                                         h->bytes + s->bytes <= h->max_bytes / 2;
        if (fits) {
            h->ents[h->n_head++] = s;
            h->bytes += s->bytes;
            return 0;
        }
        h->ringing = true;
        h->ring_first = 0;
        h->ring_n = 0;
    }
    uint32_t ring_cap = h->cap - h->n_head;
    uint32_t dropped = 0;
    while (h->ring_n > 0 && (h->ring_n == ring_cap || h->bytes + s->bytes > h->max_bytes)) {
        struct skp__snapshot **oldest = ring_at(h, 0);
        h->bytes -= (*oldest)->bytes;
        skp__snapshot_free(*oldest);
        *oldest = NULL;
        h->ring_first = (h->ring_first + 1) % ring_cap;
        h->ring_n--;
        dropped++;
    }
    if (ring_cap == 0 || h->bytes + s->bytes > h->max_bytes) {
        skp__snapshot_free(s); /* larger than what the head leaves */
        return dropped + 1;
    }
    *ring_at(h, h->ring_n) = s;
    h->ring_n++;
    h->bytes += s->bytes;
    return dropped;
}

static void hold_reset(struct skp__snapshot_hold *h)
{
    h->n_head = 0;
    h->ringing = false;
    h->ring_first = 0;
    h->ring_n = 0;
    h->bytes = 0;
}

uint32_t skp__snapshot_hold_flush(struct skp__snapshot_hold *h, struct skp__snapshot_queue *q)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < h->n_head; i++, n++) {
        (void)skp__snapshot_queue_push(q, h->ents[i]);
        h->ents[i] = NULL;
    }
    for (uint32_t k = 0; k < h->ring_n; k++, n++) {
        struct skp__snapshot **e = ring_at(h, k);
        (void)skp__snapshot_queue_push(q, *e);
        *e = NULL;
    }
    hold_reset(h);
    return n;
}

uint32_t skp__snapshot_hold_discard(struct skp__snapshot_hold *h)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < h->n_head; i++, n++) {
        skp__snapshot_free(h->ents[i]);
        h->ents[i] = NULL;
    }
    for (uint32_t k = 0; k < h->ring_n; k++, n++) {
        struct skp__snapshot **e = ring_at(h, k);
        skp__snapshot_free(*e);
        *e = NULL;
    }
    hold_reset(h);
    h->owner = 0;
    return n;
}
