/* cpu_acct.c - CPU accounting of a process task (see cpu_acct.h). The table is open addressing
 * over 2 x SKPX_ACCT_MAX slots with linear probing by tid; a forgotten thread's slot is
 * emptied by backward shift, so no tombstones pile up over a long task of short threads. */
#include "common/cpu_acct.h"

#include <string.h>

#include "common/alloc.h"

#define ACCT_SLOTS (2 * SKPX_ACCT_MAX)

static size_t home_of(int tid)
{
    uint32_t h = (uint32_t)tid * 2654435761u;
    return (size_t)(h >> 16) % ACCT_SLOTS;
}

skp_err skpx_acct_init(struct skpx_acct *a)
{
    memset(a, 0, sizeof(*a));
    a->proc_ns = -1;
    a->slot = skpx_calloc(ACCT_SLOTS, sizeof(*a->slot));
    return a->slot ? SKP_OK : SKP_ENOMEM;
}

void skpx_acct_cleanup(struct skpx_acct *a)
{
    if (a->slot)
        for (size_t i = 0; i < ACCT_SLOTS; i++)
            skpx_free(a->slot[i].ids);
    skpx_free(a->slot);
    memset(a, 0, sizeof(*a));
}

void skpx_acct_round_begin(struct skpx_acct *a, int64_t now_ns, int64_t proc_ns)
{
    a->round++;
    a->n_seen = 0;
    a->now_ns = now_ns;
    a->seen_sum = 0;
    a->proc_delta = -1;
    if (proc_ns >= 0 && a->proc_ns >= 0)
        a->proc_delta = proc_ns - a->proc_ns;
    a->proc_ns = proc_ns;
}

static struct skpx_acct_thread *find(struct skpx_acct *a, int tid, bool *found)
{
    size_t i = home_of(tid);
    for (size_t k = 0; k < ACCT_SLOTS; k++, i = (i + 1) % ACCT_SLOTS) {
        if (a->slot[i].tid == tid) {
            *found = true;
            return &a->slot[i];
        }
        if (a->slot[i].tid == 0) {
            *found = false;
            return &a->slot[i];
        }
    }
    *found = false;
    return NULL;
}

static void forget_ids(struct skpx_acct_thread *t)
{
    skpx_free(t->ids);
    t->ids = NULL;
    t->n_ids = t->cap_ids = 0;
}

struct skpx_acct_thread *skpx_acct_observe(struct skpx_acct *a, int tid, int64_t cpu_ns,
                                           bool listed)
{
    if (tid <= 0 || cpu_ns < 0)
        return NULL;
    bool found = false;
    struct skpx_acct_thread *t = find(a, tid, &found);
    if (!t || (!found && a->n_used >= SKPX_ACCT_MAX)) {
        a->untracked++;
        return NULL;
    }
    if (found && t->round == a->round) { /* seen twice in one round: update, count once */
        int64_t more = cpu_ns > t->seen_ns ? cpu_ns - t->seen_ns : 0;
        t->seen_ns += more;
        t->delta_ns += more;
        a->seen_sum += more;
        t->listed = t->listed || listed;
        return t;
    }
    if (found && cpu_ns < t->seen_ns) { /* the tid was reused by a new thread */
        forget_ids(t);
        found = false;
    }
    if (!found) {
        if (t->tid == 0)
            a->n_used++;
        *t = (struct skpx_acct_thread){.tid = tid};
        /* The first round's threads are the baseline: their CPU before the window is not ours.
         * A thread created later counts from 0, where its clock started. */
        t->done_ns = t->seen_ns = a->round <= 1 ? cpu_ns : 0;
        t->is_new = true;
    } else {
        t->is_new = false;
    }
    t->delta_ns = cpu_ns - t->seen_ns;
    a->seen_sum += t->delta_ns;
    t->seen_ns = cpu_ns;
    t->seen_at = a->now_ns;
    t->round = a->round;
    a->n_seen++;
    t->listed = t->listed || listed; /* a thread once listed stays so (see the header) */
    return t;
}

skp_err skpx_acct_set_ids(struct skpx_acct_thread *t, const uint64_t *ids, size_t n)
{
    if (n > SKPX_ACCT_IDS_MAX)
        n = SKPX_ACCT_IDS_MAX; /* leaf first: the innermost frames */
    if (n > t->cap_ids) {
        uint32_t cap = t->cap_ids ? t->cap_ids : 16;
        while (cap < n)
            cap *= 2;
        uint64_t *grown = skpx_realloc(t->ids, cap * sizeof(*grown));
        if (!grown) {
            forget_ids(t);
            return SKP_ENOMEM;
        }
        t->ids = grown;
        t->cap_ids = cap;
    }
    memcpy(t->ids, ids, n * sizeof(*ids));
    t->n_ids = (uint32_t)n;
    t->ids_round = t->round;
    return SKP_OK;
}

/* Empties slot i and shifts the probe run after it back (linear probing deletion). */
static void remove_at(struct skpx_acct *a, size_t i)
{
    forget_ids(&a->slot[i]);
    a->slot[i].tid = 0;
    a->n_used--;
    size_t j = i;
    for (;;) {
        j = (j + 1) % ACCT_SLOTS;
        if (a->slot[j].tid == 0)
            return;
        size_t h = home_of(a->slot[j].tid);
        /* slot j may move to the hole at i when its home is not in (i, j] cyclically */
        bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
        if (stays)
            continue;
        a->slot[i] = a->slot[j];
        a->slot[j] = (struct skpx_acct_thread){0};
        i = j;
    }
}

void skpx_acct_round_end(struct skpx_acct *a, skpx_acct_give_cb give, void *ud)
{
    if (a->proc_delta >= 0)
        a->balance += a->proc_delta - a->seen_sum;
    if (a->n_seen == a->n_used)
        return; /* nobody vanished: the balance waits */
    /* A listed thread that ended before any stack of it was read is no different from one that
     * lived between two rounds: its CPU joins the balance, for the threads that ended with a
     * stack. The wall time those may have run after their last round bounds the share each
     * takes from the balance. */
    int64_t room = 0;
    for (size_t i = 0; i < ACCT_SLOTS; i++) {
        struct skpx_acct_thread *t = &a->slot[i];
        if (!t->tid || t->round == a->round)
            continue;
        if (t->listed && !t->n_ids) {
            a->balance += t->seen_ns - t->done_ns;
            t->done_ns = t->seen_ns;
            t->seen_at = a->now_ns; /* no room: it takes nothing back */
        } else if (a->now_ns > t->seen_at && t->n_ids) {
            room += a->now_ns - t->seen_at;
        }
    }
    int64_t share_total = a->balance > 0 ? (a->balance < room ? a->balance : room) : 0;
    int64_t given = 0;
    for (size_t i = 0; i < ACCT_SLOTS;) {
        struct skpx_acct_thread *t = &a->slot[i];
        if (!t->tid || t->round == a->round) {
            i++;
            continue;
        }
        int64_t ns = t->seen_ns - t->done_ns;
        if (share_total > 0 && room > 0 && t->n_ids && a->now_ns > t->seen_at) {
            int64_t part =
                (int64_t)((double)share_total * (double)(a->now_ns - t->seen_at) / (double)room);
            if (part > share_total - given)
                part = share_total - given;
            given += part;
            ns += part;
        }
        if (ns > 0)
            give(ud, t, ns);
        remove_at(a, i); /* slot i now holds a shifted entry (or is empty): look again */
    }
    a->balance -= given;
}

void skpx_acct_finish(struct skpx_acct *a, skpx_acct_give_cb give, void *ud)
{
    for (size_t i = 0; i < ACCT_SLOTS; i++) {
        struct skpx_acct_thread *t = &a->slot[i];
        int64_t ns = t->tid ? t->seen_ns - t->done_ns : 0;
        if (ns <= 0)
            continue;
        if (t->n_ids) {
            t->done_ns = t->seen_ns;
            give(ud, t, ns);
        } else {
            a->pending_end += ns;
        }
    }
    if (a->balance > 0)
        give(ud, NULL, a->balance);
    a->balance = 0;
}
