/* pyasync.c - ready or waiting, for a suspended asyncio task (pyasync.h).
 *
 * Design. The private layouts involved (_asyncio's FutureObj and FutureIter, asyncio.sleep's
 * frame, TimerHandle's slots) are not in any header, so they are found on live objects once, with
 * the GIL: the state word of a future is the int that reads 0 on a pending future, 2 on a finished
 * one and 1 on a cancelled one (fut_state's PENDING, CANCELLED, FINISHED); the FutureIter's future
 * is the pointer field that holds the future it was made from; the `_when` slot's offset comes
 * from its member descriptor. A probe that does not find all of them leaves readiness off. The
 * sampler's side, which needs no interpreter, is pyasync_rule.c. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "python/pyasync.h"

#include <structmember.h>

#include <stdatomic.h>
#include <string.h>

static struct skp__pyasync g_async;
static _Atomic(const struct skp__pyasync *) g_published;
static bool g_tried; /* GIL-protected: the probe runs once */

const struct skp__pyasync *skp__pyasync_get(void)
{
    return atomic_load_explicit(&g_published, memory_order_acquire);
}

/* The attribute `name` of the already imported module `mod` (new reference), or NULL. */
static PyObject *module_attr(const char *mod, const char *name)
{
    PyObject *mname = PyUnicode_FromString(mod);
    if (!mname)
        return NULL;
    PyObject *m = PyImport_GetModule(mname); /* no import: asyncio is loaded by the caller */
    Py_DECREF(mname);
    if (!m)
        return NULL;
    PyObject *v = PyObject_GetAttrString(m, name);
    Py_DECREF(m);
    return v;
}

static int int_at(PyObject *o, size_t off)
{
    int v;
    memcpy(&v, (const char *)o + off, sizeof(v));
    return v;
}

/* A new _asyncio.Future of `loop` (new reference), finished when `how` is 2, cancelled when 1. */
static PyObject *probe_future(PyObject *future_type, PyObject *loop, int how)
{
    PyObject *kw = Py_BuildValue("{sO}", "loop", loop);
    if (!kw)
        return NULL;
    PyObject *args = PyTuple_New(0);
    PyObject *f = args ? PyObject_Call(future_type, args, kw) : NULL;
    Py_XDECREF(args);
    Py_DECREF(kw);
    if (!f || how == 0)
        return f;
    PyObject *r = how == 2 ? PyObject_CallMethod(f, "set_result", "O", Py_None)
                           : PyObject_CallMethod(f, "cancel", NULL);
    if (!r) {
        Py_DECREF(f);
        return NULL;
    }
    Py_DECREF(r);
    return f;
}

/* The futures' state word and the FutureIter's future field, on live objects. */
static bool probe_futures(struct skp__pyasync *a)
{
    bool ok = false;
    PyObject *future_type = module_attr("_asyncio", "Future");
    PyObject *get_loop = module_attr("_asyncio", "_get_running_loop");
    PyObject *loop = get_loop ? PyObject_CallNoArgs(get_loop) : NULL;
    PyObject *f[3] = {NULL, NULL, NULL};
    PyObject *it = NULL;
    if (!future_type || !PyType_Check(future_type) || !loop || loop == Py_None)
        goto out;
    for (int how = 0; how < 3; how++) {
        f[how] = probe_future(future_type, loop, how);
        if (!f[how])
            goto out;
    }
    size_t size = (size_t)((PyTypeObject *)future_type)->tp_basicsize;
    for (size_t off = sizeof(PyObject); off + sizeof(int) <= size; off += sizeof(int)) {
        if (int_at(f[0], off) == 0 && int_at(f[1], off) == 1 && int_at(f[2], off) == 2) {
            a->fut_state = off;
            a->fut_pending = 0;
            break;
        }
    }
    it = PyObject_CallMethod(f[0], "__await__", NULL);
    if (!a->fut_state || !it)
        goto out;
    size_t it_size = (size_t)Py_TYPE(it)->tp_basicsize;
    for (size_t off = sizeof(PyObject); off + sizeof(void *) <= it_size; off += sizeof(void *)) {
        uintptr_t p;
        memcpy(&p, (const char *)it + off, sizeof(p));
        if (p == (uintptr_t)f[0]) {
            a->futiter_future = off;
            a->futiter_type = (uintptr_t)Py_TYPE(it);
            ok = true;
            break;
        }
    }
out:
    Py_XDECREF(it);
    for (int i = 0; i < 3; i++)
        Py_XDECREF(f[i]);
    Py_XDECREF(loop);
    Py_XDECREF(get_loop);
    Py_XDECREF(future_type);
    return ok;
}

/* The code object of function `name` of asyncio.tasks (borrowed from the live function, which
 * the module keeps), or 0. */
static uintptr_t tasks_code(const char *name, PyCodeObject **code_out)
{
    PyObject *fn = module_attr("asyncio.tasks", name);
    uintptr_t code = 0;
    if (fn && PyFunction_Check(fn)) {
        *code_out = (PyCodeObject *)PyFunction_GetCode(fn);
        code = (uintptr_t)*code_out;
    }
    Py_XDECREF(fn);
    return code;
}

/* asyncio.sleep's code, where its local `h` lives, and TimerHandle's `_when` slot. */
static bool probe_sleep(struct skp__pyasync *a)
{
    PyCodeObject *sleep = NULL;
    PyCodeObject *sleep0 = NULL;
    a->sleep_code = tasks_code("sleep", &sleep);
    a->sleep0_code = tasks_code("__sleep0", &sleep0);
    if (!a->sleep_code || !a->sleep0_code)
        return false;
    /* locals come first in localsplus; with no cell or free variable, a local's index there is
     * its index in co_varnames */
    PyObject *varnames = PyCode_GetVarnames(sleep);
    PyObject *cells = PyCode_GetCellvars(sleep);
    PyObject *frees = PyCode_GetFreevars(sleep);
    bool ok = varnames && cells && frees && PyTuple_Check(cells) && PyTuple_Check(frees) &&
              PyTuple_GET_SIZE(cells) == 0 && PyTuple_GET_SIZE(frees) == 0;
    Py_ssize_t h = -1;
    for (Py_ssize_t i = 0; ok && i < PyTuple_GET_SIZE(varnames); i++) {
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(varnames, i), "h") == 0)
            h = i;
    }
    Py_XDECREF(varnames);
    Py_XDECREF(cells);
    Py_XDECREF(frees);
    if (!ok || h < 0)
        return false;
    a->sleep_h_slot = (size_t)h;
    PyObject *timer = module_attr("asyncio.events", "TimerHandle");
    PyObject *when = timer ? PyObject_GetAttrString(timer, "_when") : NULL;
    ok = timer && PyType_Check(timer) && when && Py_IS_TYPE(when, &PyMemberDescr_Type);
    if (ok) {
        PyMemberDef *m = ((PyMemberDescrObject *)when)->d_member;
        Py_ssize_t size = ((PyTypeObject *)timer)->tp_basicsize;
        ok = m && m->offset >= (Py_ssize_t)sizeof(PyObject) &&
             m->offset + (Py_ssize_t)sizeof(void *) <= size;
        if (ok) {
            a->timer_type = (uintptr_t)timer;
            a->timer_when = (size_t)m->offset;
        }
    }
    Py_XDECREF(when);
    Py_XDECREF(timer); /* the module keeps the class */
    return ok;
}

void skp__pyasync_init(void)
{
    if (g_tried)
        return;
    g_tried = true;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    struct skp__pyasync a = {
        .obj_type = offsetof(PyObject, ob_type),
        .float_type = (uintptr_t)&PyFloat_Type,
        .float_value = offsetof(PyFloatObject, ob_fval),
    };
    bool ok = probe_futures(&a) && probe_sleep(&a);
    PyErr_Clear();
    PyErr_Restore(et, ev, tb);
    if (!ok)
        return;
    g_async = a;
    atomic_store_explicit(&g_published, &g_async, memory_order_release);
}
