/* pyasync.h - is a suspended asyncio task READY to run (its wakeup is due, only the event loop is
 * busy elsewhere) or WAITING (for I/O, a timer, another task)? For the await chains the sampler
 * reads without the GIL (pystack.c): a ready request is shown under a "(ready, loop busy)" leaf,
 * a waiting one under "(waiting)".
 *
 * The rule (asyncio of CPython's Lib/asyncio and Modules/_asynciomodule.c), on the innermost
 * suspended coroutine of the chain and the object it awaits:
 *  - it is asyncio's `__sleep0` (a bare yield: `await asyncio.sleep(0)`): the task rescheduled
 *    its own step with call_soon: ready;
 *  - it awaits a C future or task (through its `_asyncio.FutureIter`) that is done: the future's
 *    callbacks queued the task's wakeup in the loop's ready queue: ready;
 *  - it is `asyncio.sleep` and the deadline of its TimerHandle (its local `h`, `_when` in the
 *    loop's clock, CLOCK_MONOTONIC for asyncio's loops) has passed: the loop has not run the
 *    timer yet because it is busy (a loop that is not busy runs it within its clock resolution):
 *    ready;
 *  - anything else: waiting. An I/O readiness the loop has not polled yet is not visible in
 *    memory: it counts as waiting until the loop polls.
 * The offsets are found once with the GIL (skp__pyasync_init, from live objects: a future made,
 * finished and cancelled to locate its state word; asyncio.sleep's code and its local `h`; the
 * TimerHandle `_when` slot's member descriptor) and published; the sampler only reads them. */
#ifndef SKP_PYTHON_PYASYNC_H
#define SKP_PYTHON_PYASYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* The leaf frame text of a suspended task that is ready to run (pystack.h has "(waiting)"). */
#define SKP_PY_READY_MARK "(ready, loop busy)"

/* Where asyncio's objects keep what the rule reads, in this process. Plain data. */
struct skp__pyasync {
    size_t obj_type;        /* ob_type in any object */
    uintptr_t futiter_type; /* _asyncio.FutureIter */
    size_t futiter_future;  /* its future pointer */
    size_t fut_state;       /* the fut_state word of _asyncio.Future and Task (and subclasses) */
    int fut_pending;        /* its PENDING value */
    uintptr_t sleep_code;   /* asyncio.tasks.sleep.__code__ */
    uintptr_t sleep0_code;  /* asyncio.tasks.__sleep0.__code__ */
    size_t sleep_h_slot;    /* index of sleep's local `h` in its frame's localsplus */
    uintptr_t timer_type;   /* asyncio.events.TimerHandle */
    size_t timer_when;      /* its `_when` slot */
    uintptr_t float_type;
    size_t float_value;
};

/* Finds the offsets (once per process; later calls return at once). GIL held, called from code
 * running in an asyncio task (a running loop is needed to make the probe futures). Never raises:
 * a failure leaves readiness off (every suspended task reads as waiting). */
void skp__pyasync_init(void);

/* The published offsets, or NULL while none are (not initialised, or the probe failed).
 * Any thread, no GIL. */
const struct skp__pyasync *skp__pyasync_get(void);

/* What the sampler saw at the end of a suspended task's await chain. */
struct skp__pyasync_chain {
    uintptr_t innermost_code; /* code object of the innermost suspended coroutine */
    uintptr_t awaited;        /* the object it awaits (0: none, e.g. a bare yield) */
    uintptr_t timer;          /* asyncio.sleep's local `h` when innermost is sleep, else 0 */
};

/* What the previous test of one task found: the chain's end (the awaited object, the sleep's
 * timer) and behind it (the future of the FutureIter, the float of the timer's `_when`). The next
 * test reads its words at these addresses speculatively: ahead of the capture, in the sampler's
 * batch of await chains (skp__pyasync_plan: no syscall of its own), or in its own first batch.
 * Per task, caller-owned; zero for a new task. A stale guess only costs another read. */
struct skp__pyasync_memo {
    uintptr_t awaited, timer;
    uintptr_t future, when_obj;
};

/* The words of a test read ahead (skp__pyasync_plan), at the addresses of `at`. */
#define SKP_PYASYNC_WORDS 7
struct skp__pyasync_ahead {
    struct skp__pyasync_memo at;
    const uint8_t *v;              /* the words (8 bytes each, any alignment), in plan order */
    int8_t idx[SKP_PYASYNC_WORDS]; /* each word's index in v, -1 = not planned */
    size_t n_read;                 /* leading words of v read completely (set by the caller) */
};

/* Plans the reads of the next test of the task whose memo is `memo`: at most SKP_PYASYNC_WORDS
 * (local, remote) pairs of one 8-byte word each into loc/rem, their destinations `words`
 * (adjacent). Fills *ah but n_read (0 until the caller's batch ran). Returns the pairs planned
 * (0: nothing worth reading ahead). Sampler thread. */
size_t skp__pyasync_plan(const struct skp__pyasync *a, const struct skp__pyasync_memo *memo,
                         uint8_t *words, struct iovec *loc, struct iovec *rem,
                         struct skp__pyasync_ahead *ah);

/* True when the chain's task is ready to run (the rule above). `now_s` = CLOCK_MONOTONIC in
 * seconds. `ah` (NULL ok): the words read ahead for it; when the chain still ends where they
 * were read, the test makes no read. Otherwise it reads through the safe read only (an object
 * freed meanwhile gives "waiting"; at most two batched reads, one when *memo guessed right).
 * Updates *memo. Sampler thread, no GIL, hot path. NULL `a` gives false. */
bool skp__pyasync_is_ready(const struct skp__pyasync *a, const struct skp__pyasync_chain *c,
                           struct skp__pyasync_memo *memo, const struct skp__pyasync_ahead *ah,
                           double now_s);

#endif
