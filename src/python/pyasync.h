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

/* The addresses the previous capture of one task found behind its chain's end (the future of
 * the FutureIter, the float of the timer's `_when`): read speculatively in the same batch as the
 * chain's end, so a capture whose chain still ends on them costs one syscall. Per task,
 * caller-owned; zero for a new task. A stale guess only costs a second read. */
struct skp__pyasync_memo {
    uintptr_t future;
    uintptr_t when_obj;
};

/* True when the chain's task is ready to run (the rule above). `now_s` = CLOCK_MONOTONIC in
 * seconds. Reads through the safe read only (an object freed meanwhile gives "waiting"; at most
 * two batched reads, one when *memo guessed right), updates *memo. Sampler thread, no GIL, hot
 * path. NULL `a` gives false. */
bool skp__pyasync_is_ready(const struct skp__pyasync *a, const struct skp__pyasync_chain *c,
                           struct skp__pyasync_memo *memo, double now_s);

#endif
