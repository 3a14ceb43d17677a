/* pyproc.c - the Python PROCESS source (struct skyprof_proc_source) for PprofTask: every Python
 * thread of the interpreter, sampled like the request sampler does it (direct mode: frames read
 * WITHOUT the GIL), plus the events that need Python itself (heap/allocs from tracemalloc, the
 * creation stacks of threadcreate, and the asyncio tasks of a thread dump, in
 * python/skyprof/process_profile.py) and the lock-wait
 * events `block`/`mutex`: every period, each thread that sleeps in a futex wait outside the GIL
 * (pywait.h: waiting to acquire a lock) is captured without the GIL and weighted by the time
 * since the previous round; `mutex` leaves out the waits for events (Condition.wait, join, an
 * idle pool worker), which `block` keeps.
 *
 * Threading: every callback runs on skp-proc. list_threads runs at every sampling round: in
 * direct mode it walks the interpreter's thread-state list WITHOUT the GIL (one safe read per
 * thread state, torn reads end the walk, thread states that have not run Python yet are left
 * out), so a thread that lives a few milliseconds is found by the next round; about once a
 * second it takes the GIL briefly instead, for the names (threading._active). A thread keeps its
 * handle (and the reader's speculation hints) from one listing to the next. capture never takes
 * the GIL in direct mode. run_event takes the GIL only to start and to finish the Python side
 * and waits for the window WITHOUT it. The reader is created at the first listing of a task and
 * freed at its end, so an idle agent holds none of its memory. Refuses to touch the interpreter
 * while it is finalizing. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "python/pyproc.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/err.h"
#include "python/pylayout.h"
#include "python/pystack.h"
#include "python/pywait.h"
#include "python/safe_read.h"

/* Stacks a heap/allocs event reports at most (largest first, chosen by the Python side), and
 * asyncio tasks a thread dump reports at most (process_profile.MAX_TASKS is lower). */
#define PYPROC_EVENT_STACKS_MAX 4000
/* Frames per event stack. */
#define PYPROC_EVENT_FRAMES_MAX 64
/* Text of one event stack's frames. */
#define PYPROC_EVENT_TEXT_BYTES (32u << 10)
/* Lock-wait sampling (block, mutex): rate, frames per capture, text room per capture. */
#define PYPROC_LOCK_HZ 100
#define PYPROC_LOCK_FRAMES 256
#define PYPROC_LOCK_SCRATCH (64u << 10)
/* A round's weight is the time since the previous one, at most this (a stalled sampler does not
 * turn one sample into seconds of waiting). */
#define PYPROC_LOCK_MAX_WEIGHT_NS (1000LL * 1000 * 1000)

/* How often the listing takes the GIL for the threads' names (the other listings walk the
 * thread states without it). */
#define PYPROC_NAMES_NS (1000LL * 1000 * 1000)

/* A listed thread: its target (the handle) and name, kept across listings. */
struct pyslot {
    struct skp__pytarget t;
    char name[48];
    uint32_t round; /* the listing that last saw it; 0 = free */
};

/* A thread state read by one listing. */
struct pyts {
    uintptr_t tstate, interp;
    unsigned long ident, native;
};

struct pyproc {
    bool force_portable;
    struct skp__pyreader *reader; /* per task */
    struct pyslot *slots;         /* SKP_PYPROC_THREADS_MAX, per task */
    struct pyts *seen;            /* SKP_PYPROC_THREADS_MAX, scratch of one listing */
    PyInterpreterState *interp;   /* the main interpreter, set by the first listing */
    int64_t names_at;             /* monotonic ns of the last listing with the GIL */
    uint32_t round;
};

static bool interpreter_usable(void)
{
    return Py_IsInitialized() && !_Py_IsFinalizing();
}

/* A free slot (cleared) for the new thread state `s`, or NULL when every slot is taken. */
static struct pyslot *slot_for(struct pyproc *pp, const struct pyts *s)
{
    for (int i = 0; i < SKP_PYPROC_THREADS_MAX; i++) {
        struct pyslot *sl = &pp->slots[i];
        if (sl->round)
            continue;
        memset(sl, 0, sizeof(*sl));
        sl->t.tstate = s->tstate;
        sl->t.interp = s->interp;
        sl->t.thread_id = s->ident;
        sl->t.native_tid = s->native;
        snprintf(sl->name, sizeof(sl->name), "Thread-%lu", s->ident);
        return sl;
    }
    return NULL;
}

/* Fills out[] from the thread states of this listing (pp->seen[0..n)): a thread keeps its slot,
 * new ones take the slots no longer seen. Returns the number listed. */
static int publish(struct pyproc *pp, int n, struct skyprof_proc_thread *out, int cap)
{
    struct pyslot *got[SKP_PYPROC_THREADS_MAX];
    for (int i = 0; i < n; i++) { /* first keep the known threads' slots */
        got[i] = NULL;
        for (int k = 0; k < SKP_PYPROC_THREADS_MAX; k++) {
            struct pyslot *sl = &pp->slots[k];
            if (sl->round && sl->t.tstate == pp->seen[i].tstate &&
                sl->t.thread_id == pp->seen[i].ident && sl->t.native_tid == pp->seen[i].native) {
                sl->round = pp->round;
                got[i] = sl;
                break;
            }
        }
    }
    for (int k = 0; k < SKP_PYPROC_THREADS_MAX; k++) /* the others have ended */
        if (pp->slots[k].round != pp->round)
            pp->slots[k].round = 0;
    int m = 0;
    for (int i = 0; i < n && m < cap; i++) {
        struct pyslot *sl = got[i] ? got[i] : slot_for(pp, &pp->seen[i]);
        if (!sl)
            continue;
        sl->round = pp->round;
        out[m].tid = (int)sl->t.native_tid;
        out[m].handle = &sl->t;
        snprintf(out[m].name, sizeof(out[m].name), "%s", sl->name);
        m++;
    }
    return m;
}

/* Bytes of a PyThreadState the walk copies: up to its last field it reads. */
#define TS_FIELD_END(f) (offsetof(PyThreadState, f) + sizeof(((PyThreadState *)0)->f))
#define TS_MAX2(a, b) ((a) > (b) ? (a) : (b))
#define TS_COPY                                                                                    \
    TS_MAX2(TS_MAX2(TS_FIELD_END(next), TS_FIELD_END(interp)),                                     \
            TS_MAX2(TS_MAX2(TS_FIELD_END(thread_id), TS_FIELD_END(native_thread_id)),              \
                    TS_FIELD_END(datastack_chunk)))

/* Lists the thread states WITHOUT the GIL into pp->seen (direct mode only: safe reads). A torn
 * list (a thread state freed under us) ends the walk: the next round sees the rest. */
static int walk_nogil(struct pyproc *pp)
{
    unsigned long me = (unsigned long)syscall(SYS_gettid);
    uintptr_t ts = (uintptr_t)PyInterpreterState_ThreadHead(pp->interp); /* a plain load */
    int n = 0;
    for (int k = 0; ts && k < 4 * SKP_PYPROC_THREADS_MAX && n < SKP_PYPROC_THREADS_MAX; k++) {
        union {
            PyThreadState ts;
            unsigned char raw[TS_COPY];
        } c;
        if ((ts & (sizeof(void *) - 1)) || !skp__safe_read(ts, &c, TS_COPY) ||
            c.ts.interp != pp->interp)
            break;
        /* No data stack yet: a thread state made for a thread that has not started (it still
         * carries its parent's ids) or that never ran Python: nothing to capture. */
        if (c.ts.datastack_chunk && c.ts.native_thread_id != me)
            pp->seen[n++] =
                (struct pyts){ts, (uintptr_t)pp->interp, c.ts.thread_id, c.ts.native_thread_id};
        ts = (uintptr_t)c.ts.next;
    }
    return n;
}

/* The listing with the GIL: thread states, names (threading._active). */
static int list_with_gil(struct pyproc *pp, struct skyprof_proc_thread *out, int cap)
{
    PyGILState_STATE g = PyGILState_Ensure();
    int n = 0;
    PyThreadState *me = PyThreadState_Get();
    PyObject *active = NULL;
    PyObject *name_key = PyUnicode_FromString("threading");
    PyObject *threading = name_key ? PyImport_GetModule(name_key) : NULL;
    Py_XDECREF(name_key);
    if (threading)
        active = PyObject_GetAttrString(threading, "_active");
    if (!active)
        PyErr_Clear();
    PyInterpreterState *interp = PyThreadState_GetInterpreter(me);
    pp->interp = interp;
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(interp);
         ts && n < SKP_PYPROC_THREADS_MAX; ts = PyThreadState_Next(ts)) {
        if (ts == me || !ts->datastack_chunk)
            continue; /* skp-proc's own temporary thread state; one that never ran Python */
        pp->seen[n++] =
            (struct pyts){(uintptr_t)ts, (uintptr_t)interp, ts->thread_id, ts->native_thread_id};
    }
    n = publish(pp, n, out, cap);
    for (int i = 0; i < n && active && PyDict_Check(active); i++) {
        struct pyslot *sl = SKP_CONTAINER_OF(out[i].handle, struct pyslot, t);
        PyObject *key = PyLong_FromUnsignedLong(sl->t.thread_id);
        PyObject *th = key ? PyDict_GetItemWithError(active, key) : NULL; /* borrowed */
        Py_XDECREF(key);
        PyObject *nm = th ? PyObject_GetAttrString(th, "name") : NULL;
        const char *s = nm && PyUnicode_Check(nm) ? PyUnicode_AsUTF8(nm) : NULL;
        if (s) {
            snprintf(sl->name, sizeof(sl->name), "%s", s);
            snprintf(out[i].name, sizeof(out[i].name), "%s", s);
        }
        Py_XDECREF(nm);
        PyErr_Clear();
    }
    Py_XDECREF(active);
    Py_XDECREF(threading);
    PyErr_Clear();
    PyGILState_Release(g);
    return n;
}

static int pp_list(void *ud, struct skyprof_proc_thread *out, int cap)
{
    struct pyproc *pp = ud;
    if (!interpreter_usable())
        return -1;
    if (cap > SKP_PYPROC_THREADS_MAX)
        cap = SKP_PYPROC_THREADS_MAX;
    if (!pp->slots)
        pp->slots = skpx_calloc(SKP_PYPROC_THREADS_MAX, sizeof(*pp->slots));
    if (!pp->seen)
        pp->seen = skpx_calloc(SKP_PYPROC_THREADS_MAX, sizeof(*pp->seen));
    if (!pp->slots || !pp->seen)
        return 0;
    if (++pp->round == 0)
        pp->round = 1;
    int64_t now = skpx_mono_ns();
    if (pp->reader && pp->interp && skp__pyreader_is_direct(pp->reader) &&
        now - pp->names_at < PYPROC_NAMES_NS)
        return publish(pp, walk_nogil(pp), out, cap);
    if (!pp->reader) {
        PyGILState_STATE g = PyGILState_Ensure();
        if (skp__pyreader_new(pp->force_portable, &pp->reader) != SKP_OK)
            pp->reader = NULL;
        if (pp->reader)
            skp__pyreader_set_qualified(pp->reader); /* pprof functions: co_qualname */
        PyGILState_Release(g);
        if (!pp->reader)
            return 0;
    }
    pp->names_at = now;
    return list_with_gil(pp, out, cap);
}

static int pp_capture(void *ud, void *handle, int tid, struct skyprof_capture *out)
{
    struct pyproc *pp = ud;
    (void)tid;
    if (!pp->reader || !handle)
        return -1;
    return skp__pyreader_capture(pp->reader, handle, false, out);
}

static int pp_event_types(void *ud, const char *event, int64_t dump_period,
                          struct skyprof_event_types *out)
{
    (void)ud;
    (void)dump_period;
    memset(out, 0, sizeof(*out));
    if (strcmp(event, "heap") == 0) {
        out->type[0] = "inuse_objects";
        out->unit[0] = "count";
        out->type[1] = "inuse_space";
        out->unit[1] = "bytes";
    } else if (strcmp(event, "allocs") == 0) {
        out->type[0] = "alloc_objects";
        out->unit[0] = "count";
        out->type[1] = "alloc_space";
        out->unit[1] = "bytes";
    } else if (strcmp(event, "threadcreate") == 0) {
        /* the stacks that started threads during the window (process_profile.py) */
        out->type[0] = "threadcreate";
        out->unit[0] = "count";
        out->n = 1;
        return 0;
    } else if (strcmp(event, "block") == 0 || strcmp(event, "mutex") == 0) {
        /* as Go's block and mutex profiles */
        out->type[0] = "contentions";
        out->unit[0] = "count";
        out->type[1] = "delay";
        out->unit[1] = "nanoseconds";
        out->n = 2;
        out->period_type = out->type[0];
        out->period_unit = "count";
        out->period = 1;
        return 0;
    } else {
        return SKYPROF_EVENT_UNSUPPORTED;
    }
    out->n = 2;
    out->period_type = out->type[1];
    out->period_unit = "bytes";
    out->period = 1;
    return 0;
}

/* Calls skyprof.process_profile.<fn>(event) with the GIL held; new reference or NULL. */
static PyObject *call_side(const char *fn, const char *event, char *err, size_t err_cap)
{
    PyObject *mod = PyImport_ImportModule("skyprof.process_profile");
    PyObject *res = mod ? PyObject_CallMethod(mod, fn, "s", event) : NULL;
    if (!res) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *s = value ? PyObject_Str(value) : NULL;
        const char *txt = s && PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : NULL;
        snprintf(err, err_cap, "python %s %s failed: %s", event, fn, txt ? txt : "error");
        Py_XDECREF(s);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        PyErr_Clear();
    }
    Py_XDECREF(mod);
    return res;
}

/* Emits finish()'s list of (frames, count, bytes); frames = [(qualname, file, line)], innermost
 * first. With `tasks`: asyncio_tasks()'s list of (frames, task name, state, thread name, thread
 * id), one goroutine/count each, labelled. GIL held. Returns 0 or -1 with err set. */
static int emit_all(PyObject *list, bool tasks, skyprof_emit_cb emit, void *emit_ud, char *err,
                    size_t cap)
{
    if (!PyList_Check(list)) {
        snprintf(err, cap, "python heap side returned no list");
        return -1;
    }
    struct skyprof_frame frames[PYPROC_EVENT_FRAMES_MAX];
    char *text = skpx_malloc(PYPROC_EVENT_TEXT_BYTES);
    if (!text) {
        snprintf(err, cap, "out of memory");
        return -1;
    }
    Py_ssize_t n = PyList_GET_SIZE(list);
    if (n > PYPROC_EVENT_STACKS_MAX)
        n = PYPROC_EVENT_STACKS_MAX;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(list, i);
        PyObject *fr = NULL;
        long long count = 0, size = 0;
        const char *task = NULL, *state = NULL, *thread_name = NULL;
        int tid = 0;
        struct skyprof_proc_thread th;
        memset(&th, 0, sizeof(th));
        bool ok = tasks ? PyArg_ParseTuple(item, "Osssi", &fr, &task, &state, &thread_name, &tid)
                        : PyArg_ParseTuple(item, "OLL", &fr, &count, &size);
        if (!ok || !PyList_Check(fr)) {
            PyErr_Clear();
            continue;
        }
        if (tasks) {
            th.tid = tid;
            snprintf(th.name, sizeof(th.name), "%s", thread_name);
            th.task = task;
            th.task_state = state;
            count = 1;
        }
        struct skyprof_capture c = {.frames = frames, .cap = PYPROC_EVENT_FRAMES_MAX};
        size_t used = 0;
        Py_ssize_t nf = PyList_GET_SIZE(fr);
        for (Py_ssize_t k = 0; k < nf && c.n < PYPROC_EVENT_FRAMES_MAX; k++) {
            const char *fn = NULL, *file = NULL;
            long line = 0;
            if (!PyArg_ParseTuple(PyList_GET_ITEM(fr, k), "ssl", &fn, &file, &line)) {
                PyErr_Clear();
                break;
            }
            /* "function (file:line)": the native layout, which keeps dots in qualified names;
             * no file: the bare text (the "(waiting)" mark of a suspended task) */
            int w = *file ? snprintf(text + used, PYPROC_EVENT_TEXT_BYTES - used, "%s (%s:%ld)", fn,
                                     file, line)
                          : snprintf(text + used, PYPROC_EVENT_TEXT_BYTES - used, "%s", fn);
            if (w < 0 || (size_t)w >= PYPROC_EVENT_TEXT_BYTES - used)
                break;
            frames[c.n].kind = SKYPROF_FRAME_STR;
            frames[c.n].str = text + used;
            frames[c.n].len = (uint32_t)w;
            frames[c.n].addr = 0;
            c.n++;
            used += (size_t)w + 1;
        }
        int64_t v[2] = {count, size};
        (void)emit(emit_ud, &c, v, tasks ? &th : NULL);
    }
    skpx_free(text);
    return 0;
}

/* Per listed thread: was it waiting for a lock at the previous round, and on which futex word
 * (a new wait, or a wait on another word, counts one contention). */
struct lock_state {
    int tid;
    bool waiting;
    uint64_t word;
};

/* Lists the threads again, keeping the wait state of the ones still there. */
static int relist_locks(struct pyproc *pp, struct skyprof_proc_thread *th, struct lock_state *st,
                        struct lock_state *old, int n_old)
{
    memcpy(old, st, sizeof(*old) * (size_t)n_old);
    int n = pp_list(pp, th, SKP_PYPROC_THREADS_MAX);
    if (n < 0)
        n = 0;
    for (int i = 0; i < n; i++) {
        st[i] = (struct lock_state){.tid = th[i].tid};
        for (int j = 0; j < n_old; j++)
            if (old[j].tid == th[i].tid) {
                st[i] = old[j];
                break;
            }
    }
    return n;
}

/* block / mutex: lock-wait sampling (see the file comment) for duration_ms. */
static int run_lockwait(struct pyproc *pp, bool mutex, int64_t duration_ms,
                        const volatile int *stop, skyprof_emit_cb emit, void *emit_ud, char *err,
                        size_t err_cap)
{
    if (!interpreter_usable()) {
        snprintf(err, err_cap, "the interpreter is finalizing");
        return -1;
    }
    PyGILState_STATE g = PyGILState_Ensure();
    const struct skp__pylayout *l = skp__pylayout_select();
    PyGILState_Release(g);
    if (!l || !l->gil_size) {
        snprintf(err, err_cap,
                 "event %s needs the stack reader's layout of this CPython (%d.%d "
                 "has none): waits for the GIL could not be told from lock waits",
                 mutex ? "mutex" : "block", PY_MAJOR_VERSION, PY_MINOR_VERSION);
        return -1;
    }
    uintptr_t gil_lo = l->gil_lo, gil_hi = l->gil_lo + l->gil_size;
    struct skyprof_proc_thread *th = skpx_calloc(SKP_PYPROC_THREADS_MAX, sizeof(*th));
    struct lock_state *st = skpx_calloc(2 * SKP_PYPROC_THREADS_MAX, sizeof(*st));
    struct skyprof_frame *frames = skpx_calloc(PYPROC_LOCK_FRAMES, sizeof(*frames));
    char *scratch = skpx_malloc(PYPROC_LOCK_SCRATCH);
    int rc = 0;
    if (!th || !st || !frames || !scratch) {
        snprintf(err, err_cap, "out of memory");
        rc = -1;
        goto out;
    }
    const int64_t period = 1000000000LL / PYPROC_LOCK_HZ;
    int64_t start = skpx_mono_ns();
    int64_t end = start + duration_ms * 1000000LL;
    int64_t next_list = start + 1000000000LL;
    int64_t prev = start;
    int n = relist_locks(pp, th, st, st + SKP_PYPROC_THREADS_MAX, 0);
    int64_t next = start + period;
    uint64_t reads = 0, unreadable = 0; /* every read unreadable: no /proc/.../syscall here */
    for (;;) {
        int64_t now = skpx_mono_ns();
        while (now < next && now < end && !__atomic_load_n(stop, __ATOMIC_SEQ_CST)) {
            int64_t left = next - now;
            if (left > period)
                left = period;
            struct timespec d = {0, (long)left};
            nanosleep(&d, NULL);
            now = skpx_mono_ns();
        }
        if (now >= end || __atomic_load_n(stop, __ATOMIC_SEQ_CST))
            break;
        if (!interpreter_usable())
            break;
        if (now >= next_list) {
            n = relist_locks(pp, th, st, st + SKP_PYPROC_THREADS_MAX, n);
            next_list = now + 1000000000LL;
        }
        int64_t weight = now - prev;
        if (weight > PYPROC_LOCK_MAX_WEIGHT_NS)
            weight = PYPROC_LOCK_MAX_WEIGHT_NS;
        prev = now;
        for (int i = 0; i < n; i++) {
            uint64_t word = 0;
            bool was = st[i].waiting;
            uint64_t was_word = st[i].word;
            st[i].waiting = false;
            enum skp__pywait_state ws = skp__pywait_read(th[i].tid, gil_lo, gil_hi, &word);
            reads++;
            if (ws == SKP_PYWAIT_UNKNOWN)
                unreadable++;
            if (ws != SKP_PYWAIT_LOCK)
                continue;
            struct skyprof_capture c = {.frames = frames,
                                        .cap = PYPROC_LOCK_FRAMES,
                                        .scratch = scratch,
                                        .scratch_cap = PYPROC_LOCK_SCRATCH};
            if (pp_capture(pp, th[i].handle, th[i].tid, &c) != 0 || c.n == 0)
                continue;
            if (mutex && frames[0].kind == SKYPROF_FRAME_STR &&
                skp__pywait_is_event_wait(frames[0].str, frames[0].len))
                continue; /* waiting for an event, not for a contended lock */
            st[i].waiting = true;
            st[i].word = word;
            int64_t v[2] = {was && was_word == word ? 0 : 1, weight};
            (void)emit(emit_ud, &c, v, &th[i]);
        }
        next += period;
        if (next < now) /* after a stall: skip the missed rounds */
            next = now + period;
    }
    if (reads >= 10 && unreadable == reads) {
        snprintf(err, err_cap,
                 "event %s: no thread's /proc/self/task/TID/syscall could be read "
                 "(kernel without it, or /proc not mounted)",
                 mutex ? "mutex" : "block");
        rc = -1;
    }
out:
    SKPX_FREE_ALL(th, st, frames, scratch);
    return rc;
}

/* goroutine: the asyncio tasks of every event loop, after the threads (the core dumped those). */
static int run_tasks(skyprof_emit_cb emit, void *emit_ud, char *err, size_t err_cap)
{
    if (!interpreter_usable()) {
        snprintf(err, err_cap, "the interpreter is finalizing");
        return -1;
    }
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *res = call_side("asyncio_tasks", "goroutine", err, err_cap);
    int rc = res ? emit_all(res, true, emit, emit_ud, err, err_cap) : -1;
    Py_XDECREF(res);
    PyGILState_Release(g);
    return rc;
}

static int pp_run_event(void *ud, const char *event, int64_t duration_ms, int64_t dump_period,
                        const volatile int *stop, skyprof_emit_cb emit, void *emit_ud, char *err,
                        size_t err_cap)
{
    (void)dump_period;
    if (strcmp(event, "block") == 0 || strcmp(event, "mutex") == 0)
        return run_lockwait(ud, event[0] == 'm', duration_ms, stop, emit, emit_ud, err, err_cap);
    if (strcmp(event, "goroutine") == 0)
        return run_tasks(emit, emit_ud, err, err_cap);
    /* heap, allocs (tracemalloc) and threadcreate (Thread.start wrapped): a window of the
     * Python side's start .. finish */
    if (strcmp(event, "heap") != 0 && strcmp(event, "allocs") != 0 &&
        strcmp(event, "threadcreate") != 0)
        return SKYPROF_EVENT_UNSUPPORTED;
    if (!interpreter_usable()) {
        snprintf(err, err_cap, "the interpreter is finalizing");
        return -1;
    }
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *r = call_side("start", event, err, err_cap);
    PyGILState_Release(g);
    if (!r)
        return -1;
    g = PyGILState_Ensure();
    Py_DECREF(r);
    PyGILState_Release(g);
    /* The window, without the GIL: wake every 50 ms to honour stop. */
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        int64_t ms = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
        if (ms >= duration_ms || __atomic_load_n(stop, __ATOMIC_SEQ_CST))
            break;
        struct timespec d = {0, 50 * 1000 * 1000};
        nanosleep(&d, NULL);
    }
    if (!interpreter_usable()) {
        snprintf(err, err_cap, "the interpreter is finalizing");
        return -1;
    }
    g = PyGILState_Ensure();
    PyObject *res = call_side("finish", event, err, err_cap);
    int rc = res ? emit_all(res, false, emit, emit_ud, err, err_cap) : -1;
    Py_XDECREF(res);
    PyGILState_Release(g);
    return rc;
}

static void pp_end(void *ud)
{
    struct pyproc *pp = ud;
    skp__pyreader_free(pp->reader); /* no GIL needed */
    pp->reader = NULL;
    skpx_free(pp->slots);
    pp->slots = NULL;
    skpx_free(pp->seen);
    pp->seen = NULL;
    pp->interp = NULL;
    pp->names_at = 0;
}

static void pp_destroy(void *ud)
{
    pp_end(ud);
    skpx_free(ud);
}

skp_err skp__pyproc_init(struct skyprof_proc_source *src, bool force_portable)
{
    struct pyproc *pp = skpx_calloc(1, sizeof(*pp));
    if (!pp)
        return SKP_ENOMEM;
    pp->force_portable = force_portable;
    *src = (struct skyprof_proc_source){
        .name = "python",
        .ud = pp,
        .list_threads = pp_list,
        .capture = pp_capture,
        .event_types = pp_event_types,
        .run_event = pp_run_event,
        .end = pp_end,
        .destroy = pp_destroy,
        .capture_any_state = true, /* direct or portable, a capture only reads */
    };
    return SKP_OK;
}
