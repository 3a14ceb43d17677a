/* module.c - the CPython extension `skyprof._skyprof`: a thin binding over libskyprof (agent,
 * tracer) and the Python stack reader (dump_stack).
 * Multi-phase init with per-module state. The agent itself is process-wide (libskyprof's current
 * agent); the module only keeps the pointer it started. The GIL is released around everything
 * that may block (start, stop, capture of another agent's thread); the tracer calls (entry_begin
 * and friends) are the host's hot path and keep it. Errors map to exceptions in one helper. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "python/codewatch.h"
#include "python/pylayout.h"
#include "python/pystack.h"
#include "python/safe_read.h"
#include "python/pyproc.h"
#include "python/pyasync.h"
#include "python/pysource.h"
#include "skyprof/skyprof.h"

/* Text room per frame for dump_stack (label + line); the core has its own scratch. */
#define SKP_PY_DUMP_BYTES_PER_FRAME 320
/* Threads whose read hints dump_stack remembers (so repeated dumps cost what the sampler's do). */
#define SKP_PY_DUMP_TARGETS 16
#define SKP_PY_PROPERTIES_MAX 32 /* extra instance properties passed to start() */

struct pymod_state {
    PyObject *error;                     /* skyprof._skyprof.Error */
    struct skp__pyreader *dump_reader;   /* direct (or portable when no layout) */
    struct skp__pyreader *dump_portable; /* always portable, for comparisons */
    struct skp__pytarget dump_targets[SKP_PY_DUMP_TARGETS];
    /* The test/benchmark hooks capture with the GIL released: they use their own reader,
     * serialized by hook_lock (taken only while the GIL is released, never the other way). */
    struct skp__pyreader *hook_reader;
    pthread_mutex_t hook_lock;
    unsigned dump_next;   /* round-robin replacement */
    skyprof_agent *agent; /* the agent this module started, or NULL */
    bool source_direct;
};

static struct pymod_state *state_of(PyObject *module)
{
    return PyModule_GetState(module);
}

/* The module's readers are created on first use (GIL held): most hosts never call dump_stack,
 * and each reader's code cache and buffers cost a few hundred KB. NULL with an exception set
 * on failure. */
static struct skp__pyreader *lazy_reader(struct skp__pyreader **slot, bool portable)
{
    /* A host thread may run in a child made without fork()'s handlers (a raw clone): a batch
     * must never write into the parent (safe_read.h). Agent threads need no check: they start
     * after the handlers ran. */
    skp__safe_read_check_pid();
    if (!*slot && skp__pyreader_new(portable, slot) != SKP_OK) {
        *slot = NULL;
        PyErr_NoMemory();
    }
    return *slot;
}

/* The one place that turns skp_err into a Python exception. Returns NULL. */
static PyObject *raise_err(struct pymod_state *st, skp_err err, const char *what)
{
    if (err == SKP_ENOMEM)
        return PyErr_NoMemory();
    PyErr_Format(st->error, "%s: %s", what, skp_strerror(err));
    return NULL;
}

/* ---------------------------------------------------------------------------------------------
 * capture buffers shared by dump_stack and the hooks
 * ------------------------------------------------------------------------------------------- */
/* Sizes `cap` for max_depth frames with SKP_PY_DUMP_BYTES_PER_FRAME of text each. 0 on success;
 * -1 with MemoryError set on failure (cap is then still safe to pass to capture_buf_free). */
static int capture_buf_init(struct skyprof_capture *cap, int max_depth)
{
    *cap = (struct skyprof_capture){0};
    cap->cap = (uint32_t)max_depth;
    cap->frames = skpx_calloc((size_t)max_depth, sizeof(*cap->frames));
    cap->scratch_cap = (size_t)max_depth * SKP_PY_DUMP_BYTES_PER_FRAME;
    cap->scratch = skpx_malloc(cap->scratch_cap);
    if (!cap->frames || !cap->scratch) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* Frees what capture_buf_init allocated. */
static void capture_buf_free(struct skyprof_capture *cap)
{
    skpx_free(cap->frames);
    skpx_free(cap->scratch);
    cap->frames = NULL;
    cap->scratch = NULL;
}

/* The reader for a capture: the shared portable one when asked, else the one in `slot` (both
 * created on first use). NULL with an exception set on failure. */
static struct skp__pyreader *pick_reader(struct pymod_state *st, bool portable,
                                         struct skp__pyreader **slot)
{
    return portable ? lazy_reader(&st->dump_portable, true) : lazy_reader(slot, false);
}

/* A new list of the captured frames' text, root first (the reader fills innermost first;
 * Python's traceback order is root first). NULL with an exception set on failure. */
static PyObject *frames_to_list(const struct skyprof_capture *cap)
{
    PyObject *result = PyList_New(cap->n);
    if (!result)
        return NULL;
    for (uint32_t i = 0; i < cap->n; i++) {
        const struct skyprof_frame *f = &cap->frames[cap->n - 1 - i];
        PyObject *s = PyUnicode_DecodeUTF8(f->str, f->len, "replace");
        if (!s) {
            Py_DECREF(result);
            return NULL;
        }
        PyList_SET_ITEM(result, i, s);
    }
    return result;
}

/* ---------------------------------------------------------------------------------------------
 * dump_stack
 * ------------------------------------------------------------------------------------------- */
static PyObject *py_dump_stack(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"thread_id", "max_depth", "portable", NULL};
    PyObject *tid_obj = Py_None;
    int max_depth = SKYPROF_DEFAULT_MAX_STACK_DEPTH;
    int portable = 0;
    struct pymod_state *st = state_of(module);
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|Oip:dump_stack", kwlist, &tid_obj, &max_depth,
                                     &portable))
        return NULL;
    if (max_depth < 1 || max_depth > SKYPROF_MAX_STACK_DEPTH_CAP) {
        PyErr_SetString(PyExc_ValueError, "max_depth out of range");
        return NULL;
    }
    struct skp__pytarget target;
    skp_err err;
    if (tid_obj == Py_None) {
        err = skp__pytarget_init_current(&target);
    } else {
        unsigned long ident = PyLong_AsUnsignedLong(tid_obj);
        if (ident == (unsigned long)-1 && PyErr_Occurred())
            return NULL;
        err = skp__pytarget_init_ident(&target, ident);
    }
    if (err == SKP_ENOTFOUND) {
        PyErr_SetString(PyExc_ValueError, "no such thread");
        return NULL;
    }
    if (err)
        return raise_err(st, err, "dump_stack");

    /* Reuse the hints of an earlier dump of the same thread (same state, same thread id). */
    struct skp__pytarget *t = NULL;
    for (unsigned i = 0; i < SKP_PY_DUMP_TARGETS; i++) {
        struct skp__pytarget *c = &st->dump_targets[i];
        if (c->tstate == target.tstate && c->thread_id == target.thread_id &&
            c->native_tid == target.native_tid && c->interp == target.interp) {
            t = c;
            break;
        }
    }
    if (!t) {
        t = &st->dump_targets[st->dump_next++ % SKP_PY_DUMP_TARGETS];
        *t = target;
    }

    struct skyprof_capture cap;
    PyObject *result = NULL;
    if (capture_buf_init(&cap, max_depth) < 0)
        goto out;
    struct skp__pyreader *r = pick_reader(st, portable, &st->dump_reader);
    if (!r)
        goto out;
    /* The GIL stays held: the reader never takes it (portable mode is told it holds it), and
     * keeping it makes concurrent dump_stack calls on the module's reader serialized. */
    int rc = skp__pyreader_capture(r, t, true, &cap);
    if (rc < 0) {
        PyErr_SetString(st->error, "dump_stack: the thread could not be read");
        goto out;
    }
    result = frames_to_list(&cap);
out:
    capture_buf_free(&cap);
    return result;
}

static PyObject *reader_stats_dict(const struct skp__pyreader *r)
{
    struct skp__pyreader_stats s;
    skp__pyreader_get_stats(r, &s);
    return Py_BuildValue(
        "{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:O,s:s}", "watched_hits",
        (unsigned long long)s.watched_hits, "captures", (unsigned long long)s.captures, "failures",
        (unsigned long long)s.failures, "frames", (unsigned long long)s.frames, "code_hits",
        (unsigned long long)s.code_hits, "code_misses", (unsigned long long)s.code_misses,
        "syscalls", (unsigned long long)s.syscalls, "bounce_syscalls",
        (unsigned long long)s.bounce_syscalls, "direct", s.direct ? Py_True : Py_False, "layout",
        s.layout);
}

static PyObject *py_reader_info(PyObject *module, PyObject *unused)
{
    (void)unused;
    struct skp__pyreader *r = lazy_reader(&state_of(module)->dump_reader, false);
    return r ? reader_stats_dict(r) : NULL;
}

/* ---------------------------------------------------------------------------------------------
 * test hooks: the sampler's path (heap target, capture without the GIL) driven from Python, and
 * the location-table decoder on its own.
 * ------------------------------------------------------------------------------------------- */
static PyObject *py_addr2line(PyObject *module, PyObject *args)
{
    (void)module;
    Py_buffer table;
    int firstlineno = 0;
    int addr = 0;
    if (!PyArg_ParseTuple(args, "y*ii:_addr2line", &table, &firstlineno, &addr))
        return NULL;
    const struct skp__pylayout *l = skp__pylayout_select();
    if (!l) {
        PyBuffer_Release(&table);
        Py_RETURN_NONE;
    }
    int line = l->addr2line(table.buf, (size_t)table.len, firstlineno, addr);
    PyBuffer_Release(&table);
    return PyLong_FromLong(line);
}

static PyObject *py_attach_current(PyObject *module, PyObject *unused)
{
    (void)unused;
    struct skp__pytarget *t = skpx_malloc(sizeof(*t));
    if (!t)
        return PyErr_NoMemory();
    skp_err err = skp__pytarget_init_current(t);
    if (err) {
        skpx_free(t);
        return raise_err(state_of(module), err, "_attach_current");
    }
    return PyLong_FromVoidPtr(t);
}

static PyObject *py_release_handle(PyObject *module, PyObject *arg)
{
    (void)module;
    void *p = PyLong_AsVoidPtr(arg);
    if (!p && PyErr_Occurred())
        return NULL;
    skpx_free(p);
    Py_RETURN_NONE;
}

/* _capture_handle(handle, max_depth=500, portable=False, repeat=1) -> list[str] | None
 * Captures `repeat` times with the GIL released (as the sampler does); returns the last capture
 * root first, or None when the last capture failed (thread gone). */
static PyObject *py_capture_handle(PyObject *module, PyObject *args)
{
    PyObject *h = NULL;
    int max_depth = SKYPROF_DEFAULT_MAX_STACK_DEPTH;
    int portable = 0;
    int repeat = 1;
    struct pymod_state *st = state_of(module);
    if (!PyArg_ParseTuple(args, "O|ipi:_capture_handle", &h, &max_depth, &portable, &repeat))
        return NULL;
    struct skp__pytarget *t = PyLong_AsVoidPtr(h);
    if (!t) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "null handle");
        return NULL;
    }
    if (max_depth < 1 || max_depth > SKYPROF_MAX_STACK_DEPTH_CAP || repeat < 1) {
        PyErr_SetString(PyExc_ValueError, "bad max_depth/repeat");
        return NULL;
    }
    struct skyprof_capture cap;
    PyObject *result = NULL;
    if (capture_buf_init(&cap, max_depth) < 0)
        goto out;
    struct skp__pyreader *r = pick_reader(st, portable, &st->hook_reader);
    if (!r)
        goto out;
    int rc = -1;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&st->hook_lock);
    for (int i = 0; i < repeat; i++) {
        cap.scratch_len = 0;
        rc = skp__pyreader_capture(r, t, false, &cap);
    }
    pthread_mutex_unlock(&st->hook_lock);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        result = Py_NewRef(Py_None);
        goto out;
    }
    result = frames_to_list(&cap);
    if (result && cap.truncated && PyList_Append(result, Py_Ellipsis) < 0)
        Py_CLEAR(result);
out:
    capture_buf_free(&cap);
    return result;
}

/* _bench_capture(handle, n, max_depth=500) -> list[int]: nanoseconds of each of n captures made
 * back to back on this thread with the GIL released (the sampler's path), for benchmarks. */
static PyObject *py_bench_capture(PyObject *module, PyObject *args)
{
    PyObject *h = NULL;
    int n = 0;
    int max_depth = SKYPROF_DEFAULT_MAX_STACK_DEPTH;
    struct pymod_state *st = state_of(module);
    if (!PyArg_ParseTuple(args, "Oi|i:_bench_capture", &h, &n, &max_depth))
        return NULL;
    struct skp__pytarget *t = PyLong_AsVoidPtr(h);
    if (!t || n < 1 || n > 10000000 || max_depth < 1 || max_depth > SKYPROF_MAX_STACK_DEPTH_CAP) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "bad handle/n/max_depth");
        return NULL;
    }
    struct skyprof_capture cap;
    int64_t *ns = NULL;
    PyObject *result = NULL;
    if (capture_buf_init(&cap, max_depth) < 0)
        goto out;
    if (!lazy_reader(&st->hook_reader, false))
        goto out;
    ns = skpx_calloc((size_t)n, sizeof(*ns));
    if (!ns) {
        PyErr_NoMemory();
        goto out;
    }
    int failures = 0;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&st->hook_lock);
    for (int i = 0; i < n; i++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        cap.scratch_len = 0;
        if (skp__pyreader_capture(st->hook_reader, t, false, &cap) < 0)
            failures++;
        clock_gettime(CLOCK_MONOTONIC, &b);
        ns[i] = (int64_t)(b.tv_sec - a.tv_sec) * 1000000000 + (b.tv_nsec - a.tv_nsec);
    }
    pthread_mutex_unlock(&st->hook_lock);
    Py_END_ALLOW_THREADS
    if (failures) {
        PyErr_Format(st->error, "%d captures failed", failures);
        goto out;
    }
    result = PyList_New(n);
    for (int i = 0; result && i < n; i++) {
        PyObject *v = PyLong_FromLongLong(ns[i]);
        if (!v) {
            Py_CLEAR(result);
            break;
        }
        PyList_SET_ITEM(result, i, v);
    }
out:
    skpx_free(ns);
    capture_buf_free(&cap);
    return result;
}

/* ---------------------------------------------------------------------------------------------
 * agent
 * ------------------------------------------------------------------------------------------- */
static void stderr_sink(void *ud, enum skyprof_log_level level, const char *line)
{
    (void)ud;
    static const char *names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
    char buf[1200];
    int n = snprintf(buf, sizeof(buf), "skyprof %s %s\n", (unsigned)level < 4 ? names[level] : "?",
                     line);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof(buf))
        n = (int)sizeof(buf) - 1;
    ssize_t w = write(STDERR_FILENO, buf, (size_t)n);
    (void)w;
}

static int copy_field(char *dst, size_t cap, PyObject *v, const char *name)
{
    if (v == NULL || v == Py_None)
        return 0;
    Py_ssize_t len = 0;
    const char *s = PyUnicode_AsUTF8AndSize(v, &len);
    if (!s)
        return -1;
    if ((size_t)len >= cap) {
        PyErr_Format(PyExc_ValueError, "%s is too long (max %zu bytes)", name, cap - 1);
        return -1;
    }
    memcpy(dst, s, (size_t)len);
    dst[len] = '\0';
    return 0;
}

static PyObject *py_start(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"service",
                             "instance",
                             "backend",
                             "authentication",
                             "poll_interval_ms",
                             "heartbeat_period_ms",
                             "max_parallel",
                             "max_stack_depth",
                             "snapshot_buffer_size",
                             "profile_active",
                             "log_level",
                             "restart_in_child",
                             "min_dump_period_ms",
                             "report_segments",
                             "portable",
                             "max_profiling_ms",
                             "language",
                             "properties",
                             NULL};
    PyObject *service = NULL, *instance = NULL, *backend = NULL, *auth = NULL, *log_level = NULL;
    PyObject *language = NULL, *properties = NULL;
    long long poll_ms = -1, heartbeat_ms = -1, min_dump_ms = -1, max_prof_ms = -1;
    int max_parallel = -1, depth = -1, buffer = -1;
    int active = 1, restart_child = 1, report = 1, portable = 0;
    struct pymod_state *st = state_of(module);
    if (!PyArg_ParseTupleAndKeywords(
            args, kwargs, "|OOOOLLiiipOpLppLOO:start", kwlist, &service, &instance, &backend, &auth,
            &poll_ms, &heartbeat_ms, &max_parallel, &depth, &buffer, &active, &log_level,
            &restart_child, &min_dump_ms, &report, &portable, &max_prof_ms, &language, &properties))
        return NULL;
    if (st->agent) {
        PyErr_SetString(st->error, "start: the agent is already running");
        return NULL;
    }
    struct skyprof_config cfg;
    skyprof_config_init_defaults(&cfg);
    if (copy_field(cfg.service, sizeof(cfg.service), service, "service") ||
        copy_field(cfg.instance, sizeof(cfg.instance), instance, "instance") ||
        copy_field(cfg.backend, sizeof(cfg.backend), backend, "backend") ||
        copy_field(cfg.authentication, sizeof(cfg.authentication), auth, "authentication"))
        return NULL;
    snprintf(cfg.language, sizeof(cfg.language), "%s", "python");
    if (copy_field(cfg.language, sizeof(cfg.language), language, "language"))
        return NULL;
    /* Extra instance properties: a sequence of (key, value) str pairs; the agent copies them at
     * start, so the UTF-8 views borrowed from `props_seq` only need to live until then. */
    struct skyprof_kv kvs[SKP_PY_PROPERTIES_MAX];
    PyObject *props_seq = NULL;
    if (properties && properties != Py_None) {
        props_seq = PySequence_Fast(properties, "properties must be a sequence of (key, value)");
        if (!props_seq)
            return NULL;
        Py_ssize_t np = PySequence_Fast_GET_SIZE(props_seq);
        if (np > SKP_PY_PROPERTIES_MAX) {
            Py_DECREF(props_seq);
            PyErr_Format(PyExc_ValueError, "at most %d properties", SKP_PY_PROPERTIES_MAX);
            return NULL;
        }
        for (Py_ssize_t i = 0; i < np; i++) {
            PyObject *pair = PySequence_Fast_GET_ITEM(props_seq, i);
            if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 ||
                !(kvs[i].key = PyUnicode_AsUTF8(PyTuple_GET_ITEM(pair, 0))) ||
                !(kvs[i].value = PyUnicode_AsUTF8(PyTuple_GET_ITEM(pair, 1)))) {
                Py_DECREF(props_seq);
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "properties: (str, str) pairs");
                return NULL;
            }
        }
        cfg.properties = kvs;
        cfg.n_properties = (size_t)np;
    }
    if (poll_ms > 0)
        cfg.poll_interval_ms = poll_ms;
    if (heartbeat_ms > 0)
        cfg.heartbeat_period_ms = heartbeat_ms;
    if (min_dump_ms > 0)
        cfg.min_dump_period_ms = min_dump_ms;
    if (max_prof_ms > 0)
        cfg.max_profiling_ms = max_prof_ms;
    if (max_parallel > 0)
        cfg.max_parallel = max_parallel;
    if (depth > 0)
        cfg.max_stack_depth = depth;
    if (buffer > 0)
        cfg.snapshot_buffer_size = buffer;
    cfg.profile_active = active != 0;
    cfg.restart_in_child = restart_child != 0;
    cfg.report_segments = report != 0;
    if (log_level && log_level != Py_None) {
        const char *lv = PyUnicode_AsUTF8(log_level);
        if (!lv)
            return NULL;
        cfg.log_sink = stderr_sink;
        cfg.log_level = SKYPROF_LOG_WARN;
        if (!strcasecmp(lv, "debug"))
            cfg.log_level = SKYPROF_LOG_DEBUG;
        else if (!strcasecmp(lv, "info"))
            cfg.log_level = SKYPROF_LOG_INFO;
        else if (!strcasecmp(lv, "error") || !strcasecmp(lv, "critical"))
            cfg.log_level = SKYPROF_LOG_ERROR;
    }
    struct skyprof_stack_source src;
    skp_err err = skp__pysource_init(&src, portable != 0);
    if (err) {
        Py_XDECREF(props_seq);
        return raise_err(st, err, "start");
    }
    bool direct = skp__pysource_is_direct(&src);
    skyprof_agent *agent = NULL;
    Py_BEGIN_ALLOW_THREADS
    err = skyprof_agent_start(&cfg, &src, &agent);
    Py_END_ALLOW_THREADS
    Py_XDECREF(props_seq);
    if (err) {
        src.destroy(src.ud); /* start failed: the agent did not take the source */
        return raise_err(st, err, "start");
    }
    st->agent = agent;
    st->source_direct = direct;
    /* Whole-process profiling (PprofTask); without it tasks answer EXECUTION_TASK_ERROR. */
    struct skyprof_proc_source psrc;
    if (skp__pyproc_init(&psrc, portable != 0) == SKP_OK &&
        skyprof_agent_set_proc_source(agent, &psrc) != SKP_OK)
        psrc.destroy(psrc.ud);
    Py_RETURN_NONE;
}

static PyObject *py_stop(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"flush_ms", NULL};
    int flush_ms = 2000;
    struct pymod_state *st = state_of(module);
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|i:stop", kwlist, &flush_ms))
        return NULL;
    skyprof_agent *agent = st->agent;
    st->agent = NULL;
    if (!agent)
        Py_RETURN_NONE;
    /* Releasing the GIL matters: the portable sampler may be waiting for it while we join. */
    Py_BEGIN_ALLOW_THREADS
    skyprof_agent_stop(agent, flush_ms < 0 ? 0 : flush_ms);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *py_after_fork_child(PyObject *module, PyObject *unused)
{
    (void)unused;
    struct pymod_state *st = state_of(module);
    (void)skp__safe_read_init();
    if (!st->agent)
        Py_RETURN_NONE;
    skyprof_agent *cur = skyprof_agent_current();
    if (cur) {
        st->agent = cur; /* the core restarted it already (restart_in_child) */
        Py_RETURN_TRUE;
    }
    skyprof_agent *fresh = NULL;
    skp_err err;
    Py_BEGIN_ALLOW_THREADS
    err = skyprof_agent_restart_after_fork(&fresh);
    Py_END_ALLOW_THREADS
    st->agent = fresh;
    if (err)
        Py_RETURN_FALSE; /* the child runs without an agent; never raise into the host */
    Py_RETURN_TRUE;
}

static PyObject *py_is_running(PyObject *module, PyObject *unused)
{
    (void)unused;
    struct pymod_state *st = state_of(module);
    return PyBool_FromLong(st->agent != NULL && skyprof_agent_current() == st->agent);
}

static PyObject *py_instance(PyObject *module, PyObject *unused)
{
    (void)unused;
    struct pymod_state *st = state_of(module);
    if (!st->agent)
        Py_RETURN_NONE;
    return PyUnicode_FromString(skyprof_agent_instance(st->agent));
}

static PyObject *span_to_py(skyprof_span *s)
{
    if (!s)
        Py_RETURN_NONE;
    return PyLong_FromVoidPtr(s);
}

static int span_from_py(PyObject *o, void *out)
{
    skyprof_span **sp = out;
    if (o == Py_None) {
        *sp = NULL;
        return 1;
    }
    void *p = PyLong_AsVoidPtr(o);
    if (!p && PyErr_Occurred())
        return 0;
    *sp = p;
    return 1;
}

/* entry_begin(endpoint, sw8=None, coro=None): `coro` is the coroutine of the asyncio task the
 * request runs in (its samples then follow the task: pysource.h); take_handle() right after
 * returns the request's sampling handle when one was attached. */
static PyObject *py_entry_begin(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs < 1 || nargs > 3) {
        PyErr_SetString(PyExc_TypeError, "entry_begin(endpoint, sw8=None, coro=None)");
        return NULL;
    }
    const char *endpoint = PyUnicode_AsUTF8(args[0]);
    if (!endpoint)
        return NULL;
    const char *sw8 = NULL;
    if (nargs >= 2 && args[1] != Py_None) {
        sw8 = PyUnicode_AsUTF8(args[1]);
        if (!sw8)
            return NULL;
    }
    if (nargs == 3 && args[2] != Py_None) {
        if (!PyCoro_CheckExact(args[2]) && !PyGen_CheckExact(args[2])) {
            PyErr_SetString(PyExc_TypeError, "entry_begin: coro must be a coroutine");
            return NULL;
        }
        skp__pyasync_init(); /* once: asyncio's offsets, for ready vs waiting */
        skp__pysource_set_pending_coro((uintptr_t)args[2]);
        skyprof_span *span = skyprof_entry_begin(endpoint, sw8);
        skp__pysource_set_pending_coro(0);
        return span_to_py(span);
    }
    return span_to_py(skyprof_entry_begin(endpoint, sw8));
}

/* --- request contexts (asyncio): capsules over skyprof_context and the sampling handle ------- */
#define CTX_CAPSULE "skyprof._skyprof.context"
#define HANDLE_CAPSULE "skyprof._skyprof.handle"

static void ctx_capsule_free(PyObject *cap)
{
    skyprof_context_free(PyCapsule_GetPointer(cap, CTX_CAPSULE));
}

static void handle_capsule_free(PyObject *cap)
{
    /* the slot may still hold a reference: the handle is freed by whichever drops the last */
    skp__pyhandle_unref(PyCapsule_GetPointer(cap, HANDLE_CAPSULE));
}

static PyObject *py_context_new(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    skyprof_context *c = skyprof_context_new();
    if (!c)
        return PyErr_NoMemory();
    PyObject *cap = PyCapsule_New(c, CTX_CAPSULE, ctx_capsule_free);
    if (!cap)
        skyprof_context_free(c);
    return cap;
}

/* context_swap(ctx): ctx is a capsule from context_new, None (the thread's own state) or the int
 * an earlier swap returned. Returns the previous state as an int to swap back with. */
static PyObject *py_context_swap(PyObject *module, PyObject *arg)
{
    (void)module;
    skyprof_context *c = NULL;
    if (PyCapsule_CheckExact(arg)) {
        c = PyCapsule_GetPointer(arg, CTX_CAPSULE);
        if (!c)
            return NULL;
    } else if (arg != Py_None) {
        c = PyLong_AsVoidPtr(arg);
        if (!c && PyErr_Occurred())
            return NULL;
    }
    skyprof_context *prev = skyprof_context_swap(c);
    if (!prev)
        return PyErr_NoMemory();
    return PyLong_FromVoidPtr(prev);
}

static PyObject *py_take_handle(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    struct skp__pyhandle *h = skp__pysource_take_attached();
    if (!h)
        Py_RETURN_NONE;
    PyObject *cap = PyCapsule_New(h, HANDLE_CAPSULE, handle_capsule_free);
    if (!cap)
        skp__pyhandle_unref(h);
    return cap;
}

static PyObject *py_delegate(PyObject *arg, bool begin)
{
    struct skp__pyhandle *h = PyCapsule_GetPointer(arg, HANDLE_CAPSULE);
    if (!h)
        return NULL;
    if (begin)
        skp__pyhandle_delegate_begin(h);
    else
        skp__pyhandle_delegate_end(h);
    Py_RETURN_NONE;
}

static PyObject *py_delegate_begin(PyObject *module, PyObject *arg)
{
    (void)module;
    return py_delegate(arg, true);
}

static PyObject *py_delegate_end(PyObject *module, PyObject *arg)
{
    (void)module;
    return py_delegate(arg, false);
}

static PyObject *py_entry_end(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    skyprof_span *s = NULL;
    if (nargs != 1 || !span_from_py(args[0], &s)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "entry_end(span)");
        return NULL;
    }
    skyprof_entry_end(s);
    Py_RETURN_NONE;
}

static PyObject *py_span_begin(PyObject *module, PyObject *args)
{
    (void)module;
    int kind = 0;
    const char *name = NULL;
    const char *peer = NULL;
    if (!PyArg_ParseTuple(args, "is|z:span_begin", &kind, &name, &peer))
        return NULL;
    if (kind != SKYPROF_SPAN_EXIT && kind != SKYPROF_SPAN_LOCAL) {
        PyErr_SetString(PyExc_ValueError, "kind must be EXIT (1) or LOCAL (2)");
        return NULL;
    }
    return span_to_py(skyprof_span_begin((enum skyprof_span_kind)kind, name, peer));
}

static PyObject *py_span_end(PyObject *module, PyObject *args)
{
    (void)module;
    skyprof_span *s = NULL;
    if (!PyArg_ParseTuple(args, "O&:span_end", span_from_py, &s))
        return NULL;
    skyprof_span_end(s);
    Py_RETURN_NONE;
}

static PyObject *py_span_tag(PyObject *module, PyObject *args)
{
    (void)module;
    skyprof_span *s = NULL;
    const char *k = NULL;
    const char *v = NULL;
    if (!PyArg_ParseTuple(args, "O&ss:span_tag", span_from_py, &s, &k, &v))
        return NULL;
    skyprof_span_add_tag(s, k, v);
    Py_RETURN_NONE;
}

static PyObject *py_span_set_error(PyObject *module, PyObject *args)
{
    (void)module;
    skyprof_span *s = NULL;
    int e = 1;
    if (!PyArg_ParseTuple(args, "O&|p:span_set_error", span_from_py, &s, &e))
        return NULL;
    skyprof_span_set_error(s, e != 0);
    Py_RETURN_NONE;
}

static PyObject *py_span_set_component(PyObject *module, PyObject *args)
{
    (void)module;
    skyprof_span *s = NULL;
    int c = 0;
    int layer = -1;
    if (!PyArg_ParseTuple(args, "O&i|i:span_set_component", span_from_py, &s, &c, &layer))
        return NULL;
    skyprof_span_set_component(s, c);
    if (layer >= 0)
        skyprof_span_set_layer(s, (enum skyprof_span_layer)layer);
    Py_RETURN_NONE;
}

static PyObject *py_span_set_peer(PyObject *module, PyObject *args)
{
    (void)module;
    skyprof_span *s = NULL;
    const char *peer = NULL;
    if (!PyArg_ParseTuple(args, "O&s:span_set_peer", span_from_py, &s, &peer))
        return NULL;
    skyprof_span_set_peer(s, peer);
    Py_RETURN_NONE;
}

static PyObject *py_sw8_inject(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    char buf[SKYPROF_SW8_MAX];
    int n = skyprof_sw8_inject(buf, sizeof(buf));
    if (n < 0)
        Py_RETURN_NONE;
    return PyUnicode_FromStringAndSize(buf, n);
}

static PyObject *str_or_none(const char *s)
{
    if (!s)
        Py_RETURN_NONE;
    return PyUnicode_FromString(s);
}

static PyObject *py_trace_id(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return str_or_none(skyprof_current_trace_id());
}

static PyObject *py_segment_id(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return str_or_none(skyprof_current_segment_id());
}

/* segment_open(): whether the current context has an open segment (what current_segment_id tells
 * without making its string: asked by every entry of the Python tracer). */
static PyObject *py_segment_open(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyBool_FromLong(skyprof_current_segment_id() != NULL);
}

static PyObject *py_add_task(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"endpoint",
                             "duration_min",
                             "min_duration_threshold_ms",
                             "dump_period_ms",
                             "max_sampling_count",
                             "task_id",
                             NULL};
    struct skyprof_task_spec spec = {
        .duration_min = 1, .dump_period_ms = 10, .max_sampling_count = 5};
    struct pymod_state *st = state_of(module);
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "s|iiiiz:add_task", kwlist, &spec.endpoint,
                                     &spec.duration_min, &spec.min_duration_threshold_ms,
                                     &spec.dump_period_ms, &spec.max_sampling_count, &spec.task_id))
        return NULL;
    if (!st->agent)
        return raise_err(st, SKP_ESTATE, "add_task");
    skp_err err = skyprof_agent_add_task(st->agent, &spec);
    if (err == SKP_EINVAL) {
        struct skyprof_stats s;
        skyprof_agent_get_stats(st->agent, &s);
        PyErr_Format(PyExc_ValueError, "task rejected: %s", s.last_reject_reason);
        return NULL;
    }
    if (err)
        return raise_err(st, err, "add_task");
    Py_RETURN_NONE;
}

static PyObject *py_task_active(PyObject *module, PyObject *unused)
{
    (void)unused;
    struct pymod_state *st = state_of(module);
    return PyBool_FromLong(st->agent && skyprof_agent_task_active(st->agent));
}

static PyObject *py_task_endpoint(PyObject *module, PyObject *unused)
{
    (void)unused;
    struct pymod_state *st = state_of(module);
    char buf[1024];
    if (!st->agent || !skyprof_agent_task_endpoint(st->agent, buf, sizeof(buf)))
        Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(buf, (Py_ssize_t)strlen(buf), "replace");
}

static PyObject *py_sample_now(PyObject *module, PyObject *unused)
{
    (void)unused;
    struct pymod_state *st = state_of(module);
    if (!st->agent)
        return raise_err(st, SKP_ESTATE, "sample_now");
    skp_err err;
    /* In portable mode the capture takes the GIL itself. */
    Py_BEGIN_ALLOW_THREADS
    err = skyprof_agent_sample_now(st->agent);
    Py_END_ALLOW_THREADS
    if (err)
        return raise_err(st, err, "sample_now");
    Py_RETURN_NONE;
}

static PyObject *py_stats(PyObject *module, PyObject *unused)
{
    (void)unused;
    struct pymod_state *st = state_of(module);
    if (!st->agent)
        Py_RETURN_NONE;
    struct skyprof_stats s;
    skyprof_agent_get_stats(st->agent, &s);
    return Py_BuildValue(
        "{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:L,s:d,s:s,"
        "s:O}",
        "snapshots_captured", (unsigned long long)s.snapshots_captured, "snapshots_dropped",
        (unsigned long long)s.snapshots_dropped, "snapshots_sent",
        (unsigned long long)s.snapshots_sent, "capture_failures",
        (unsigned long long)s.capture_failures, "segments_sent",
        (unsigned long long)s.segments_sent, "segments_dropped",
        (unsigned long long)s.segments_dropped, "commands_received",
        (unsigned long long)s.commands_received, "commands_ignored",
        (unsigned long long)s.commands_ignored, "commands_duplicate",
        (unsigned long long)s.commands_duplicate, "tasks_accepted",
        (unsigned long long)s.tasks_accepted, "tasks_rejected",
        (unsigned long long)s.tasks_rejected, "tasks_finished",
        (unsigned long long)s.tasks_finished, "finish_reports_sent",
        (unsigned long long)s.finish_reports_sent, "reconnects", (unsigned long long)s.reconnects,
        "heartbeats_sent", (unsigned long long)s.heartbeats_sent, "polls_sent",
        (unsigned long long)s.polls_sent, "sampler_runs", (unsigned long long)s.sampler_runs,
        "slots_taken", (unsigned long long)s.slots_taken, "last_command_time",
        (long long)s.last_command_time, "achieved_dump_rate_hz", s.achieved_dump_rate_hz,
        "last_reject_reason", s.last_reject_reason, "source_direct",
        st->source_direct ? Py_True : Py_False);
}

static PyObject *py_has_agent(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    Py_RETURN_TRUE;
}

/* ---------------------------------------------------------------------------------------------
 * module
 * ------------------------------------------------------------------------------------------- */
static PyMethodDef methods[] = {
    {"dump_stack", (PyCFunction)(void (*)(void))py_dump_stack, METH_VARARGS | METH_KEYWORDS,
     "dump_stack(thread_id=None, max_depth=500, portable=False) -> list[str]\n"
     "Frames of a thread, root first, as '<file>.<function>: <line>'."},
    {"reader_info", py_reader_info, METH_NOARGS, "Stack reader mode and counters."},
    {"has_agent", py_has_agent, METH_NOARGS, "True when built with libskyprof."},
    {"_addr2line", py_addr2line, METH_VARARGS, "Test hook: location table decoder."},
    {"_attach_current", py_attach_current, METH_NOARGS, "Test hook: heap target of this thread."},
    {"_release_handle", py_release_handle, METH_O, "Test hook: free a target."},
    {"_capture_handle", py_capture_handle, METH_VARARGS, "Test hook: capture without the GIL."},
    {"_bench_capture", py_bench_capture, METH_VARARGS, "Benchmark hook: timed captures."},
    {"start", (PyCFunction)(void (*)(void))py_start, METH_VARARGS | METH_KEYWORDS, "Start."},
    {"stop", (PyCFunction)(void (*)(void))py_stop, METH_VARARGS | METH_KEYWORDS, "Stop."},
    {"after_fork_child", py_after_fork_child, METH_NOARGS, "Fork child hook."},
    {"is_running", py_is_running, METH_NOARGS, "Agent running."},
    {"instance", py_instance, METH_NOARGS, "Instance name."},
    {"entry_begin", (PyCFunction)(void (*)(void))py_entry_begin, METH_FASTCALL,
     "Entry span (optionally of an asyncio task's coroutine)."},
    {"entry_end", (PyCFunction)(void (*)(void))py_entry_end, METH_FASTCALL, "End entry span."},
    {"context_new", py_context_new, METH_NOARGS, "A request context (asyncio)."},
    {"context_swap", py_context_swap, METH_O, "Swap the thread's current request context."},
    {"take_handle", py_take_handle, METH_NOARGS, "Sampling handle of the last task entry."},
    {"delegate_begin", py_delegate_begin, METH_O, "Worker thread runs the request's work."},
    {"delegate_end", py_delegate_end, METH_O, "Worker thread done with the request's work."},
    {"span_begin", py_span_begin, METH_VARARGS, "Exit/local span."},
    {"span_end", py_span_end, METH_VARARGS, "End span."},
    {"span_tag", py_span_tag, METH_VARARGS, "Add a tag."},
    {"span_set_error", py_span_set_error, METH_VARARGS, "Mark error."},
    {"span_set_component", py_span_set_component, METH_VARARGS, "Component id and layer."},
    {"span_set_peer", py_span_set_peer, METH_VARARGS, "Peer address of a span."},
    {"sw8_inject", py_sw8_inject, METH_NOARGS, "Outgoing sw8 header value."},
    {"current_trace_id", py_trace_id, METH_NOARGS, "Trace id of the open segment."},
    {"current_segment_id", py_segment_id, METH_NOARGS, "Segment id of the open segment."},
    {"segment_open", py_segment_open, METH_NOARGS, "Whether a segment is open."},
    {"add_task", (PyCFunction)(void (*)(void))py_add_task, METH_VARARGS | METH_KEYWORDS,
     "Add a local profile task."},
    {"task_active", py_task_active, METH_NOARGS, "A task is active."},
    {"task_endpoint", py_task_endpoint, METH_NOARGS, "Endpoint of the live task, or None."},
    {"sample_now", py_sample_now, METH_NOARGS, "Run one sampler iteration."},
    {"stats", py_stats, METH_NOARGS, "Agent counters."},
    {NULL, NULL, 0, NULL},
};

static void on_fork_child(void)
{
    /* safe reads must target the child's own memory from now on, before anything samples. */
    skp__safe_read_after_fork_child();
    skp__codewatch_after_fork_child();
}

static int mod_exec(PyObject *m)
{
    struct pymod_state *st = state_of(m);
    st->error = PyErr_NewException("skyprof._skyprof.Error", PyExc_RuntimeError, NULL);
    if (!st->error)
        return -1;
    if (PyModule_AddObjectRef(m, "Error", st->error) < 0)
        return -1;
    if (pthread_mutex_init(&st->hook_lock, NULL) != 0) {
        PyErr_SetString(PyExc_OSError, "pthread_mutex_init failed");
        return -1;
    }
    static int atfork_done; /* module init runs with the GIL: no race */
    if (!atfork_done) {
        atfork_done = 1;
        (void)pthread_atfork(NULL, NULL, on_fork_child);
    }
    if (PyModule_AddIntConstant(m, "SPAN_EXIT", SKYPROF_SPAN_EXIT) < 0 ||
        PyModule_AddIntConstant(m, "SPAN_LOCAL", SKYPROF_SPAN_LOCAL) < 0 ||
        PyModule_AddIntConstant(m, "LAYER_HTTP", SKYPROF_LAYER_HTTP) < 0 ||
        PyModule_AddIntConstant(m, "LAYER_RPC", SKYPROF_LAYER_RPC) < 0 ||
        PyModule_AddIntConstant(m, "LAYER_DATABASE", SKYPROF_LAYER_DATABASE) < 0 ||
        PyModule_AddIntConstant(m, "LAYER_UNKNOWN", SKYPROF_LAYER_UNKNOWN) < 0 ||
        PyModule_AddIntConstant(m, "MAX_STACK_DEPTH_CAP", SKYPROF_MAX_STACK_DEPTH_CAP) < 0)
        return -1;
    return 0;
}

static int mod_traverse(PyObject *m, visitproc visit, void *arg)
{
    struct pymod_state *st = state_of(m);
    Py_VISIT(st->error);
    return 0;
}

static int mod_clear(PyObject *m)
{
    struct pymod_state *st = state_of(m);
    Py_CLEAR(st->error);
    return 0;
}

static void mod_free(void *m)
{
    struct pymod_state *st = state_of(m);
    mod_clear(m);
    skp__pyreader_free(st->dump_reader);
    skp__pyreader_free(st->dump_portable);
    skp__pyreader_free(st->hook_reader);
    st->dump_reader = NULL;
    st->dump_portable = NULL;
    st->hook_reader = NULL;
    /* A still-running agent is left to atexit/stop: stopping it here could join threads during
     * interpreter teardown. */
}

static PyModuleDef_Slot slots[] = {
    {Py_mod_exec, mod_exec},
    {0, NULL},
};

static struct PyModuleDef moddef = {
    PyModuleDef_HEAD_INIT,
    .m_name = "skyprof._skyprof",
    .m_doc = "skyprof native agent binding and Python stack reader.",
    .m_size = sizeof(struct pymod_state),
    .m_methods = methods,
    .m_slots = slots,
    .m_traverse = mod_traverse,
    .m_clear = mod_clear,
    .m_free = mod_free,
};

PyMODINIT_FUNC PyInit__skyprof(void)
{
    return PyModuleDef_Init(&moddef);
}
