/* pytasks.h - the unfinished asyncio tasks of another process and each one's await chain, read
 * from raw memory like the rest of src/attach (CPython 3.11 for now).
 *
 * The tasks are found the way asyncio itself lists them: sys.modules (the interpreter's
 * `modules` dict) -> the `_asyncio` and `asyncio.tasks` modules -> their `_all_tasks` WeakSet ->
 * its `data` set of weak references -> the Task objects, plus the values of `_current_tasks`
 * (the running task of each loop). A task's chain starts at its coroutine and follows what each
 * suspended coroutine awaits (the top of its frame's value stack) down to the innermost one and
 * the object that one awaits (a future, another task). Everything is validated and bounded
 * (ATTACH_MAX_TASKS tasks, ATTACH_TASK_DEPTH coroutines per chain); a task whose read does not
 * validate is left out and counted in n_torn. Used by one thread at a time with its target. */
#ifndef SKP_ATTACH_PYTASKS_H
#define SKP_ATTACH_PYTASKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attach/pyreader.h"
#include "skyprof/skp_err.h"

/* Most tasks listed (more are counted in n_dropped). */
#define ATTACH_MAX_TASKS 512
/* Most coroutines followed down one await chain (deeper ones set `truncated`). */
#define ATTACH_TASK_DEPTH 64
/* Most frames kept for all tasks together. */
#define ATTACH_TASK_FRAMES_MAX 8192
/* Longest task name kept (longer ones are truncated), and the "awaiting" text. */
#define ATTACH_TASK_NAME_MAX 96
#define ATTACH_TASK_AWAIT_MAX 128

/* Offsets asyncio's objects live at in one CPython minor version (3.11: py311.c). */
struct attach_pytask_layout {
    /* PyGenObject / PyCoroObject: the frame state and the embedded _PyInterpreterFrame */
    size_t gen_frame_state, gen_iframe;
    int gen_state_created, gen_state_suspended, gen_state_executing;
    /* _PyInterpreterFrame: the value stack (a suspended coroutine's awaitable is its top) */
    size_t fr_stacktop, fr_localsplus;
    /* _asyncio.Task (Modules/_asynciomodule.c; in no header) */
    size_t task_copy, task_state, task_coro, task_name, task_fut_waiter;
    int fut_state_pending;
    /* _asyncio.FutureIter (what `await future` suspends on): the future */
    size_t futiter_future;
    /* ready vs waiting (asyncio.sleep's timer): a code object's local names, a tuple's items,
     * a type's dict, a member descriptor's PyMemberDef and its offset, a float's value */
    size_t co_localsplusnames, tuple_items, tp_dict, memberdescr_member, memberdef_offset;
    size_t float_value;
};

/* The 3.11 layout; NULL when the build had no 3.11 headers. */
const struct attach_pytask_layout *attach_pytask_layout_py311(void);

struct attach_task {
    char name[ATTACH_TASK_NAME_MAX]; /* Task.get_name() */
    bool running;                    /* its coroutine is executing now (see its thread's stack) */
    bool not_started;                /* created, its coroutine has not run yet */
    bool ready;         /* not running but ready to run: the loop is busy elsewhere (see below) */
    size_t first_frame; /* into attach_tasks.frames: the chain, innermost first */
    size_t n_frames;
    char awaiting[ATTACH_TASK_AWAIT_MAX]; /* what the innermost coroutine awaits: "Task NAME",
                                               a type name ("_asyncio.Future"), or "" */
    bool truncated;                       /* deeper than ATTACH_TASK_DEPTH or the frame budget */
};

struct attach_tasks {
    bool supported;   /* this CPython version's asyncio layout is known */
    bool has_asyncio; /* asyncio's task set was found (asyncio imported) */
    struct attach_task tasks[ATTACH_MAX_TASKS];
    size_t n_tasks;
    struct attach_frame frames[ATTACH_TASK_FRAMES_MAX]; /* strings borrowed as in a sample */
    size_t n_frames;
    uint32_t n_torn;    /* tasks left out: a read did not validate */
    uint32_t n_dropped; /* tasks beyond ATTACH_MAX_TASKS */
};

/* A task is READY (its next step is due, only the event loop has not got to it: it runs other
 * code) when it has not started (its first step is queued), or it is suspended with no future
 * to wait for (a bare yield: `asyncio.sleep(0)` queued its step), or the future it waits for
 * (Task._fut_waiter) is done (its callbacks queued the step), or it waits in asyncio.sleep whose
 * timer's deadline (TimerHandle._when, the loop's CLOCK_MONOTONIC) has passed. Otherwise it is
 * WAITING. The in-process agent applies the same rule (src/python/pyasync.h). */

/* Lists the unfinished asyncio tasks of the target's main interpreter into *out
 * (caller-provided; big: allocate it), each with its await chain. A process that never imported
 * asyncio, or a version whose layout is unknown, gives no task and no error (has_asyncio or
 * supported false). Frame strings are borrowed from the target's code cache: valid until the
 * next attach_target_sample. Errors: SKP_ENOTFOUND (the process exited), SKP_EIO (the runtime
 * cannot be read), SKP_ENOMEM. */
SKP_MUST_CHECK skp_err attach_target_tasks(struct attach_target *t, struct attach_tasks *out);

#endif
