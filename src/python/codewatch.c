/* codewatch.c - see codewatch.h.
 * Word of a slot: bits 0..47 the watched code's address (0 = not armed), bits 48..63 the
 * generation, bumped by the code's death. Token stored in co_extra: (gen << 16) | (slot + 1).
 * Lock order: g_lock only; never held across a Python call that could run arbitrary code. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "python/codewatch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"

#define ADDR_MASK ((UINT64_C(1) << 48) - 1)
/* A request not armed within this time frees its slot for others. */
#define REQUEST_TIMEOUT_NS (2LL * 1000 * 1000 * 1000)

struct request {
    struct skp__pylive_query q;
    int slot;
    uint16_t gen;
};

static _Atomic uint64_t g_watch[SKP_PY_WATCH_SLOTS];
static int64_t g_requested_ns[SKP_PY_WATCH_SLOTS]; /* under g_lock; 0 = not requested */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct request g_queue[SKP_PY_WATCH_QUEUE]; /* under g_lock */
static size_t g_n_queue;                           /* under g_lock */
static unsigned g_cursor;                          /* under g_lock */
static _Atomic bool g_scheduled;
static _Atomic Py_ssize_t g_index = -1; /* co_extra index, -1 = off */
static const struct skp__pylayout *g_layout;

/* co_extra free function: CPython calls it (GIL held) when the code object is deallocated or
 * its extra value is replaced. */
static void watch_free(void *token)
{
    uintptr_t t = (uintptr_t)token;
    int slot = (int)(t & 0xffff) - 1;
    uint16_t gen = (uint16_t)(t >> 16);
    if (slot < 0 || slot >= SKP_PY_WATCH_SLOTS)
        return;
    uint64_t w = atomic_load(&g_watch[slot]);
    if ((uint16_t)(w >> 48) == gen && (w & ADDR_MASK) != 0) {
        uint64_t dead = (uint64_t)(uint16_t)(gen + 1) << 48;
        atomic_compare_exchange_strong(&g_watch[slot], &w, dead);
    }
}

bool skp__codewatch_armed(int slot, uint16_t gen, uintptr_t code)
{
    if (slot < 0 || slot >= SKP_PY_WATCH_SLOTS || code == 0)
        return false;
    uint64_t w = atomic_load_explicit(&g_watch[slot], memory_order_acquire);
    return (w & ADDR_MASK) == (uint64_t)code && (uint16_t)(w >> 48) == gen;
}

/* Pending call (main thread, GIL held): arms the queued watches whose code is on a live frame. */
static int arm_pending(void *unused)
{
    (void)unused;
    struct request batch[SKP_PY_WATCH_QUEUE];
    size_t n;
    pthread_mutex_lock(&g_lock);
    n = g_n_queue;
    memcpy(batch, g_queue, n * sizeof(batch[0]));
    g_n_queue = 0;
    atomic_store(&g_scheduled, false);
    pthread_mutex_unlock(&g_lock);
    Py_ssize_t index = atomic_load(&g_index);
    if (index < 0 || n == 0 || !g_layout || !g_layout->find_live_codes)
        return 0;
    struct skp__pylive_query want[SKP_PY_WATCH_QUEUE];
    bool found[SKP_PY_WATCH_QUEUE];
    for (size_t i = 0; i < n; i++)
        want[i] = batch[i].q;
    g_layout->find_live_codes(want, n, found);
    for (size_t i = 0; i < n; i++) {
        if (!found[i])
            continue; /* not on a live frame now: its liveness is unknown, leave it unarmed */
        uintptr_t token = ((uintptr_t)batch[i].gen << 16) | (uintptr_t)(batch[i].slot + 1);
        /* the object is alive (a live frame holds a reference) and the GIL is held */
        if (_PyCode_SetExtra((PyObject *)batch[i].q.code, index, (void *)token) < 0) {
            PyErr_Clear();
            continue;
        }
        atomic_store_explicit(&g_watch[batch[i].slot],
                              ((uint64_t)batch[i].gen << 48) |
                                  ((uint64_t)batch[i].q.code & ADDR_MASK),
                              memory_order_release);
    }
    return 0;
}

bool skp__codewatch_init(const struct skp__pylayout *l)
{
    if (atomic_load(&g_index) >= 0)
        return true;
    if (!l || !l->find_live_codes)
        return false;
    if (PyInterpreterState_Get() != PyInterpreterState_Main())
        return false;
    Py_ssize_t index = _PyEval_RequestCodeExtraIndex(watch_free);
    if (index < 0) {
        PyErr_Clear();
        return false;
    }
    g_layout = l;
    atomic_store(&g_index, index);
    return true;
}

void skp__codewatch_request(const struct skp__pylive_query *q, int *slot, uint16_t *gen)
{
    uintptr_t code = q->code;
    *slot = -1;
    *gen = 0;
    if (atomic_load(&g_index) < 0 || code == 0 || (code & ~ADDR_MASK) != 0)
        return;
    bool schedule = false;
    int64_t now = skpx_mono_ns();
    pthread_mutex_lock(&g_lock);
    if (g_n_queue < SKP_PY_WATCH_QUEUE) {
        for (unsigned probe = 0; probe < SKP_PY_WATCH_SLOTS; probe++) {
            unsigned s = (g_cursor + probe) % SKP_PY_WATCH_SLOTS;
            uint64_t w = atomic_load(&g_watch[s]);
            if ((w & ADDR_MASK) != 0)
                continue; /* armed for a live code */
            if (g_requested_ns[s] && now - g_requested_ns[s] < REQUEST_TIMEOUT_NS)
                continue; /* a request in flight */
            g_requested_ns[s] = now;
            g_cursor = s + 1;
            *slot = (int)s;
            *gen = (uint16_t)(w >> 48);
            g_queue[g_n_queue++] = (struct request){.q = *q, .slot = (int)s, .gen = *gen};
            bool expected = false;
            schedule = atomic_compare_exchange_strong(&g_scheduled, &expected, true);
            break;
        }
    }
    pthread_mutex_unlock(&g_lock);
    /* Py_AddPendingCall needs neither the GIL nor a thread state; refused calls (its queue is
     * full) are retried by the next request. Never during finalization. */
    if (schedule && (_Py_IsFinalizing() || Py_AddPendingCall(arm_pending, NULL) < 0))
        atomic_store(&g_scheduled, false);
}

void skp__codewatch_after_fork_child(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    memcpy(&g_lock, &fresh, sizeof(fresh));
    g_n_queue = 0;
    memset(g_requested_ns, 0, sizeof(g_requested_ns));
    atomic_store(&g_scheduled, false);
}
