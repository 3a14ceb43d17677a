/* pyproc.c - the Python PROCESS source (struct skyprof_proc_source) for PprofTask: every Python
 * thread of the interpreter, sampled like the request sampler does it (direct mode: frames read
 * WITHOUT the GIL), plus the events that need Python itself (heap/allocs from tracemalloc, in
 * python/skyprof/process_profile.py).
 *
 * Threading: every callback runs on skp-proc. list_threads takes the GIL briefly (about once a
 * second) to enumerate thread states, names (threading._active) and kernel ids; capture never
 * takes it in direct mode. run_event takes the GIL only to start and to finish the Python side
 * and waits for the window WITHOUT it. The reader is created at the first listing of a task and
 * freed at its end, so an idle agent holds none of its memory. Refuses to touch the interpreter
 * while it is finalizing. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "python/pyproc.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"
#include "python/pystack.h"

/* Stacks a heap/allocs event reports at most (largest first, chosen by the Python side). */
#define PYPROC_EVENT_STACKS_MAX 4000
/* Frames per event stack. */
#define PYPROC_EVENT_FRAMES_MAX 64
/* Text of one event stack's frames. */
#define PYPROC_EVENT_TEXT_BYTES (32u << 10)

struct pyproc {
    bool force_portable;
    struct skp__pyreader *reader;  /* per task */
    struct skp__pytarget *targets; /* SKP_PYPROC_THREADS_MAX, per task */
};

static bool interpreter_usable(void)
{
    return Py_IsInitialized() && !_Py_IsFinalizing();
}

static int pp_list(void *ud, struct skyprof_proc_thread *out, int cap)
{
    struct pyproc *pp = ud;
    if (!interpreter_usable())
        return -1;
    PyGILState_STATE g = PyGILState_Ensure();
    int n = 0;
    if (!pp->reader && skp__pyreader_new(pp->force_portable, &pp->reader) != SKP_OK)
        pp->reader = NULL;
    if (pp->reader)
        skp__pyreader_set_qualified(pp->reader); /* pprof functions: co_qualname */
    if (!pp->targets)
        pp->targets = skpx_calloc(SKP_PYPROC_THREADS_MAX, sizeof(*pp->targets));
    if (!pp->reader || !pp->targets)
        goto out;
    if (cap > SKP_PYPROC_THREADS_MAX)
        cap = SKP_PYPROC_THREADS_MAX;
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
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(interp); ts && n < cap;
         ts = PyThreadState_Next(ts)) {
        if (ts == me)
            continue; /* skp-proc's own temporary thread state */
        if (skp__pytarget_init_ident(&pp->targets[n], ts->thread_id) != SKP_OK)
            continue;
        out[n].tid = (int)ts->native_thread_id;
        out[n].handle = &pp->targets[n];
        snprintf(out[n].name, sizeof(out[n].name), "Thread-%lu", ts->thread_id);
        if (active && PyDict_Check(active)) {
            PyObject *key = PyLong_FromUnsignedLong(ts->thread_id);
            PyObject *th = key ? PyDict_GetItemWithError(active, key) : NULL; /* borrowed */
            Py_XDECREF(key);
            PyObject *nm = th ? PyObject_GetAttrString(th, "name") : NULL;
            const char *s = nm && PyUnicode_Check(nm) ? PyUnicode_AsUTF8(nm) : NULL;
            if (s)
                snprintf(out[n].name, sizeof(out[n].name), "%s", s);
            Py_XDECREF(nm);
            PyErr_Clear();
        }
        n++;
    }
    Py_XDECREF(active);
    Py_XDECREF(threading);
out:
    PyErr_Clear();
    PyGILState_Release(g);
    return n;
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
 * first. GIL held. Returns 0 or -1 with err set. */
static int emit_all(PyObject *list, skyprof_emit_cb emit, void *emit_ud, char *err, size_t cap)
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
        if (!PyArg_ParseTuple(item, "OLL", &fr, &count, &size) || !PyList_Check(fr)) {
            PyErr_Clear();
            continue;
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
            /* "function (file:line)": the native layout, which keeps dots in qualified names */
            int w = snprintf(text + used, PYPROC_EVENT_TEXT_BYTES - used, "%s (%s:%ld)", fn, file,
                             line);
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
        (void)emit(emit_ud, &c, v, NULL);
    }
    skpx_free(text);
    return 0;
}

static int pp_run_event(void *ud, const char *event, int64_t duration_ms, int64_t dump_period,
                        const volatile int *stop, skyprof_emit_cb emit, void *emit_ud, char *err,
                        size_t err_cap)
{
    (void)ud;
    (void)dump_period;
    if (strcmp(event, "heap") != 0 && strcmp(event, "allocs") != 0)
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
    int rc = res ? emit_all(res, emit, emit_ud, err, err_cap) : -1;
    Py_XDECREF(res);
    PyGILState_Release(g);
    return rc;
}

static void pp_end(void *ud)
{
    struct pyproc *pp = ud;
    skp__pyreader_free(pp->reader); /* no GIL needed */
    pp->reader = NULL;
    skpx_free(pp->targets);
    pp->targets = NULL;
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
    };
    return SKP_OK;
}
