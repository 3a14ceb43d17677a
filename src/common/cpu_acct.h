/* cpu_acct.h - CPU accounting of a whole-process CPU profile (the agents' process `cpu` tasks,
 * src/agent/proc_task.c; `skyprof record`, src/cli/cmd_record.c): which part of the CPU the
 * process used in the window each sample carries, so that the profile holds all of it (threads
 * that lived between two sampling rounds included) and each part sits under the stack it was
 * spent in.
 *
 * Model. Every round the runner reads the process's CPU clock and the CPU clock of every thread it
 * can see, and tells the accounting about each thread (listed = the source can capture it). A
 * thread's CPU is "seen" up to its clock at the round that last saw it and "done" up to the part
 * already put into samples; seen - done is its pending CPU, put into a sample when the runner
 * captures the thread (or adds it to the thread's last stack). A thread that first appears after
 * the first round counts from 0: its clock started when it was created. The process clock also
 * counts the threads that ended, after their last round: each round, the process's CPU delta minus
 * the deltas seen on live threads goes to a balance, which is handed to the threads that vanished
 * in that round with a stack (each at most the wall time since it was last seen), the rest kept
 * for later rounds; a listed thread that vanished before any stack of it was read adds its own
 * pending CPU to the balance; what is left at the end is reported apart. Pure bookkeeping: no
 * clock, no syscall, no lock; one thread at a time. Bounded: SKPX_ACCT_MAX threads tracked at
 * once (others are not tracked: their CPU ends in the balance). */
#ifndef SKP_COMMON_CPU_ACCT_H
#define SKP_COMMON_CPU_ACCT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "skyprof/skp_err.h"

/* Threads tracked at once (all threads of the process, listed or not). A process with more keeps
 * the first ones; the CPU of the others is counted in the balance. */
#define SKPX_ACCT_MAX 1024
/* Frames of a thread's last stack kept for the CPU it spends after that sample (its innermost
 * ones when deeper). */
#define SKPX_ACCT_IDS_MAX 512

struct skpx_acct_thread {
    int tid;          /* 0 = free slot */
    bool listed;      /* listed by the source in some round: a thread missing from one
                         listing (a torn read, or its thread state already freed while the
                         kernel thread ends) keeps its stack and its pending CPU */
    bool is_new;      /* first seen in the current round */
    uint32_t round;   /* the round that last saw it */
    int64_t seen_ns;  /* its CPU clock at that round */
    int64_t done_ns;  /* the part of it already in samples */
    int64_t seen_at;  /* monotonic time of that round */
    int64_t delta_ns; /* CPU it used since the previous round (this round's observation) */
    char name[48];    /* thread name for labels (the runner fills it) */
    uint64_t *ids;    /* its last sample's stack as the caller names it (pprof location ids,
                         leaf first; a call-tree node), NULL = none yet */
    uint32_t n_ids, cap_ids;
    uint32_t ids_round; /* the round that set them */
};

struct skpx_acct {
    struct skpx_acct_thread *slot; /* SKPX_ACCT_MAX * 2 slots (open addressing by tid) */
    size_t n_used;
    size_t n_seen;    /* threads observed in the current round */
    uint32_t round;   /* current round, 1 = the first (its threads are the baseline) */
    int64_t now_ns;   /* monotonic time of the current round */
    int64_t proc_ns;  /* process CPU clock at the previous round, -1 = unknown */
    int64_t seen_sum; /* sum of the deltas observed in the current round */
    int64_t proc_delta;
    int64_t balance;     /* process CPU no live thread's clock accounts for (may be < 0) */
    uint64_t untracked;  /* observations dropped because the table was full */
    int64_t pending_end; /* CPU left pending on live threads at the end (not in samples) */
};

/* Called for each part of CPU handed to a vanished thread, or (t NULL) the CPU no thread could
 * be given at the end. `ns` > 0. */
typedef void (*skpx_acct_give_cb)(void *ud, struct skpx_acct_thread *t, int64_t ns);

/* Allocates the table. Errors: SKP_ENOMEM. */
SKP_MUST_CHECK skp_err skpx_acct_init(struct skpx_acct *a);
/* Frees the table and every thread's ids. Safe on a zeroed or failed struct. */
void skpx_acct_cleanup(struct skpx_acct *a);

/* Starts a round at monotonic time now_ns with the process CPU clock proc_ns (< 0: unknown; then
 * no balance is computed this round). */
void skpx_acct_round_begin(struct skpx_acct *a, int64_t now_ns, int64_t proc_ns);
/* Records thread `tid` with CPU clock cpu_ns in this round; returns its entry (pending CPU =
 * seen_ns - done_ns) or NULL when the table is full. Observe every thread the kernel still has
 * (listed or not): a thread not observed in a round has ended. A thread already seen in this
 * round is updated, not counted twice. In the first round the thread's CPU so far is the
 * baseline (not pending). A clock lower than last time (the tid was reused) starts a new
 * thread. */
struct skpx_acct_thread *skpx_acct_observe(struct skpx_acct *a, int tid, int64_t cpu_ns,
                                           bool listed);
/* The pending CPU of t is in a sample now. */
static inline int64_t skpx_acct_take(struct skpx_acct_thread *t)
{
    int64_t ns = t->seen_ns - t->done_ns;
    t->done_ns = t->seen_ns;
    return ns;
}
/* Remembers the stack (location ids, leaf first) of t's latest sample, read in the round that
 * last observed t. Errors: SKP_ENOMEM (the previous stack is forgotten). */
SKP_MUST_CHECK skp_err skpx_acct_set_ids(struct skpx_acct_thread *t, const uint64_t *ids, size_t n);
/* Ends the round: threads not seen in it have ended; each gets, through `give`, its pending CPU
 * plus its part of the balance, then is forgotten. */
void skpx_acct_round_end(struct skpx_acct *a, skpx_acct_give_cb give, void *ud);
/* End of the task: each live thread with pending CPU and a last stack gets it through `give`
 * (the rest is counted in pending_end); a positive balance goes to give(ud, NULL, balance). */
void skpx_acct_finish(struct skpx_acct *a, skpx_acct_give_cb give, void *ud);

#endif
