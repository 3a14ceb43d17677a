/* cont_http.c - the request-path counters of the HTTP continuous-profiling checks (see
 * cont_http.h).
 *
 * Design: a slot is claimed by CAS on its hash (0 = free), then its name is copied and the slot
 * published with a release store of `ready`; readers and other writers use a slot only once
 * ready (a writer that finds its hash claimed but not yet ready counts nothing for that
 * request rather than wait). Names are compared, so two endpoints whose hashes collide take
 * separate slots. */
#include "agent/cont_http.h"

#include <string.h>

#define PROBES 16

struct ep_slot {
    _Atomic uint64_t hash; /* 0 = free */
    _Atomic int ready;     /* name published */
    uint32_t name_len;
    char name[SKP_CONT_EP_NAME_MAX];
    _Atomic uint64_t count, errors, sum_ms;
    /* reader's last view (channel thread only) */
    uint64_t seen_count, seen_errors, seen_sum;
};

static struct ep_slot g_slots[SKP_CONT_EP_MAX];
static _Atomic bool g_on;
static _Atomic uint64_t g_dropped;

void skp__cont_http_enable(bool on)
{
    atomic_store_explicit(&g_on, on, memory_order_release);
}

bool skp__cont_http_enabled(void)
{
    return atomic_load_explicit(&g_on, memory_order_relaxed);
}

static uint64_t hash_name(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h ? h : 1;
}

void skp__cont_http_record(const char *name, size_t len, int64_t dur_ms, bool server_error)
{
    if (!name)
        return;
    if (len >= SKP_CONT_EP_NAME_MAX)
        len = SKP_CONT_EP_NAME_MAX - 1; /* longer names are counted by their first bytes */
    uint64_t h = hash_name(name, len);
    for (unsigned i = 0; i < PROBES; i++) {
        struct ep_slot *s = &g_slots[(h + i) & (SKP_CONT_EP_MAX - 1)];
        uint64_t cur = atomic_load_explicit(&s->hash, memory_order_acquire);
        if (cur == 0) {
            uint64_t zero = 0;
            if (atomic_compare_exchange_strong_explicit(&s->hash, &zero, h, memory_order_acq_rel,
                                                        memory_order_acquire)) {
                memcpy(s->name, name, len);
                s->name[len] = '\0';
                s->name_len = (uint32_t)len;
                atomic_store_explicit(&s->ready, 1, memory_order_release);
                cur = h;
            } else {
                cur = zero; /* another thread took it: look at what it holds */
            }
        }
        if (cur != h)
            continue;
        if (!atomic_load_explicit(&s->ready, memory_order_acquire))
            return; /* being published by another thread: this request is not counted */
        if (s->name_len != len || memcmp(s->name, name, len) != 0)
            continue; /* same hash, other name */
        atomic_fetch_add_explicit(&s->count, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&s->sum_ms, dur_ms > 0 ? (uint64_t)dur_ms : 0,
                                  memory_order_relaxed);
        if (server_error)
            atomic_fetch_add_explicit(&s->errors, 1, memory_order_relaxed);
        return;
    }
    atomic_fetch_add_explicit(&g_dropped, 1, memory_order_relaxed);
}

void skp__cont_http_read(skp__cont_http_cb cb, void *ud)
{
    for (int i = 0; i < SKP_CONT_EP_MAX; i++) {
        struct ep_slot *s = &g_slots[i];
        if (!atomic_load_explicit(&s->ready, memory_order_acquire))
            continue;
        uint64_t c = atomic_load_explicit(&s->count, memory_order_relaxed);
        uint64_t e = atomic_load_explicit(&s->errors, memory_order_relaxed);
        uint64_t m = atomic_load_explicit(&s->sum_ms, memory_order_relaxed);
        struct skp__cont_http_delta d = {
            .index = i,
            .name = s->name,
            .count = c - s->seen_count,
            .errors = e - s->seen_errors,
            .sum_ms = m - s->seen_sum,
        };
        s->seen_count = c;
        s->seen_errors = e;
        s->seen_sum = m;
        cb(ud, &d);
    }
}

uint64_t skp__cont_http_dropped(void)
{
    return atomic_load_explicit(&g_dropped, memory_order_relaxed);
}
