/* compat/py311.c - CPython 3.11 frame, code and str layouts as data for the stack reader, and
 * the 3.11 location-table decoder (Objects/locations.md in CPython 3.11).
 * Compiled with Py_BUILD_CORE_MODULE so the internal frame struct is visible; the offsets are
 * taken with offsetof on the real headers, never hand-written. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "python/pylayout.h"

#include "common/py311_fields.h"
#include "common/py_linetable.h"

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000

#include "internal/pycore_frame.h"
#include "internal/pycore_runtime.h"

/* Fills the member of `l` from a row of common/py311_fields.h. */
#define PY311_SET(member, value) l->member = (value);

/* The location table format is the same from 3.11 on: decoded by the shared reader in
 * src/common (also used by the out-of-process reader, src/attach). */
static int py311_addr2line(const uint8_t *table, size_t len, int firstlineno, int addr)
{
    return skpx_py_linetable_line(table, len, firstlineno, addr);
}

static void py311_str_decode(const void *hdr, struct skp__pystr_info *out)
{
    const PyASCIIObject *a = hdr;
    out->ok = false;
    if (!a->state.compact || !a->state.ready)
        return;
    out->length = (size_t)a->length;
    out->kind = (int)a->state.kind;
    if (out->kind != 1 && out->kind != 2 && out->kind != 4)
        return;
    out->data_offset = a->state.ascii ? sizeof(PyASCIIObject) : sizeof(PyCompactUnicodeObject);
    out->ok = true;
}

/* Most frames looked at per thread by find_live_codes (a bound, not a limit users hit). */
#define PY311_LIVE_SCAN_MAX 100000

/* Marks the queries whose code object is `co` (alive: a frame holds it; GIL held, so its fields
 * are safe to read) and still has the queried fields. Returns the number still not found. */
static size_t py311_match_code(PyCodeObject *co, const struct skp__pylive_query *q, size_t n,
                               bool *found, size_t left)
{
    for (size_t i = 0; i < n; i++) {
        if (found[i] || q[i].code != (uintptr_t)co)
            continue;
        found[i] =
            (uintptr_t)co->co_filename == q[i].filename && (uintptr_t)co->co_name == q[i].name &&
            (uintptr_t)co->co_linetable == q[i].linetable && co->co_firstlineno == q[i].firstlineno;
        if (found[i])
            left--;
    }
    return left;
}

/* Most asyncio tasks, and coroutines per await chain, looked at by one find_live_codes. */
#define PY311_LIVE_TASKS_MAX 10000
#define PY311_LIVE_AWAIT_MAX 64

/* The frames of suspended coroutines are on no thread's frame chain: looks at the await chains
 * of the asyncio tasks (asyncio's registry, asyncio.tasks._all_tasks) for the codes not found
 * yet, so the code objects of await chains get watches too. GIL held; errors are cleared. */
static size_t py311_find_in_tasks(const struct skp__pylive_query *q, size_t n, bool *found,
                                  size_t left)
{
    PyObject *name = PyUnicode_FromString("asyncio.tasks");
    PyObject *mod = name ? PyImport_GetModule(name) : NULL;
    Py_XDECREF(name);
    PyObject *all = mod ? PyObject_GetAttrString(mod, "_all_tasks") : NULL;
    Py_XDECREF(mod);
    PyObject *tasks = all ? PySequence_List(all) : NULL; /* a WeakSet: iterate a copy */
    Py_XDECREF(all);
    if (!tasks) {
        PyErr_Clear();
        return left;
    }
    Py_ssize_t nt = PyList_GET_SIZE(tasks);
    for (Py_ssize_t t = 0; t < nt && t < PY311_LIVE_TASKS_MAX && left > 0; t++) {
        PyObject *coro = PyObject_CallMethod(PyList_GET_ITEM(tasks, t), "get_coro", NULL);
        for (int depth = 0; coro && depth < PY311_LIVE_AWAIT_MAX && left > 0; depth++) {
            if (!PyCoro_CheckExact(coro) && !PyGen_CheckExact(coro))
                break;
            PyGenObject *g = (PyGenObject *)coro;
            if (g->gi_frame_state >= FRAME_CLEARED)
                break;
            _PyInterpreterFrame *f = (_PyInterpreterFrame *)g->gi_iframe;
            left = py311_match_code(f->f_code, q, n, found, left);
            PyObject *next =
                PyObject_GetAttrString(coro, PyCoro_CheckExact(coro) ? "cr_await" : "gi_yieldfrom");
            Py_DECREF(coro);
            coro = next;
            if (coro == Py_None) {
                Py_DECREF(coro);
                coro = NULL;
            }
        }
        Py_XDECREF(coro);
        PyErr_Clear();
    }
    Py_DECREF(tasks);
    return left;
}

static void py311_find_live_codes(const struct skp__pylive_query *q, size_t n, bool *found)
{
    for (size_t i = 0; i < n; i++)
        found[i] = false;
    size_t left = n;
    PyInterpreterState *interp = PyInterpreterState_Main();
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(interp); ts && left > 0;
         ts = PyThreadState_Next(ts)) {
        _PyInterpreterFrame *f = ts->cframe ? ts->cframe->current_frame : NULL;
        for (size_t k = 0; f && k < PY311_LIVE_SCAN_MAX && left > 0; k++, f = f->previous)
            left = py311_match_code(f->f_code, q, n, found, left);
    }
    if (left > 0)
        (void)py311_find_in_tasks(q, n, found, left);
}

static struct skp__pylayout g_py311;

const struct skp__pylayout *skp__pylayout_py311(void)
{
    struct skp__pylayout *l = &g_py311;
    if (l->name)
        return l;
    l->major = 3;
    l->minor = 11;
    SKPX_PY311_FRAME_FIELDS(PY311_SET)
    SKPX_PY311_CORO_FIELDS(PY311_SET)

    l->ts_copy = offsetof(PyThreadState, datastack_limit) + sizeof(void *);
    l->ts_datastack_limit = offsetof(PyThreadState, datastack_limit);

    l->cf_size = sizeof(_PyCFrame);

    l->fr_size = offsetof(_PyInterpreterFrame, localsplus);
    l->fr_prev_instr = offsetof(_PyInterpreterFrame, prev_instr);
    l->fr_owner_max = FRAME_OWNED_BY_FRAME_OBJECT;
    l->fr_owner_generator = FRAME_OWNED_BY_GENERATOR;

    l->gen_copy = l->gen_iframe + l->fr_size;
    l->coro_type = (uintptr_t)&PyCoro_Type;
    l->gen_type = (uintptr_t)&PyGen_Type;
    static_assert(offsetof(PyCoroObject, cr_iframe) == offsetof(PyGenObject, gi_iframe),
                  "coroutine and generator heads differ");
    static_assert(offsetof(PyCoroObject, cr_frame_state) == offsetof(PyGenObject, gi_frame_state),
                  "coroutine and generator heads differ");

    l->co_copy = offsetof(PyCodeObject, _co_firsttraceable) + sizeof(int);
    l->co_type = offsetof(PyObject, ob_type);
    l->co_nunits = offsetof(PyVarObject, ob_size);
    static_assert(offsetof(PyCodeObject, co_qualname) < offsetof(PyCodeObject, _co_firsttraceable),
                  "co_qualname within the copied header");
    l->code_unit_bytes = sizeof(_Py_CODEUNIT);

    l->str_header_copy = sizeof(PyCompactUnicodeObject);
    l->bytes_size = offsetof(PyVarObject, ob_size);

    l->gil_lo = (uintptr_t)&_PyRuntime.ceval.gil;
    l->gil_size = sizeof(_PyRuntime.ceval.gil);

    l->code_type = (uintptr_t)&PyCode_Type;
    l->str_type = (uintptr_t)&PyUnicode_Type;
    l->bytes_type = (uintptr_t)&PyBytes_Type;

    l->str_decode = py311_str_decode;
    l->addr2line = py311_addr2line;
    l->find_live_codes = py311_find_live_codes;
    l->name = "3.11";
    return l;
}

#else

const struct skp__pylayout *skp__pylayout_py311(void)
{
    return NULL;
}

#endif
