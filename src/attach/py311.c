/* py311.c - the CPython 3.11 layout for the out-of-process reader, taken with offsetof from
 * 3.11's own internal headers at build time (this file alone is compiled with Python's include
 * directory and Py_BUILD_CORE; it references no Python symbol, so nothing links libpython). */
#include "attach/pylayout.h"

#include <stdio.h>
#include <string.h>

#ifndef ATTACH_NO_PY311_HEADERS
#define Py_BUILD_CORE 1
#include <Python.h>
#endif

#if defined(PY_VERSION_HEX) && PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000

#include "attach/pydict.h"
#include "attach/pytasks.h"
#include "common/py311_fields.h"
#include "internal/pycore_dict.h"
#include "internal/pycore_frame.h"
#include "internal/pycore_interp.h"
#include "internal/pycore_moduleobject.h"
#include "internal/pycore_object.h"
#include "internal/pycore_runtime.h"
#include "structmember.h"

/* Fills the member of `l` from a row of common/py311_fields.h. */
#define PY311_SET(member, value) l->member = (value);

static struct attach_pylayout g_py311;

const struct attach_pylayout *attach_pylayout_py311(void)
{
    struct attach_pylayout *l = &g_py311;
    if (l->major)
        return l;
    snprintf(l->name, sizeof(l->name), "3.11");
    l->minor = 11;
    l->version_hex = 0;
    SKPX_PY311_FRAME_FIELDS(PY311_SET)

    l->rt_interp_head = offsetof(_PyRuntimeState, interpreters.head);
    l->rt_gil_tstate = offsetof(_PyRuntimeState, gilstate.tstate_current);

    l->is_next = offsetof(PyInterpreterState, next);
    l->is_threads_head = offsetof(PyInterpreterState, threads.head);
    l->is_gil_ptr = ATTACH_NO_FIELD;
    l->is_gil_inline = ATTACH_NO_FIELD;
    l->gil_locked = ATTACH_NO_FIELD;
    l->gil_holder = ATTACH_NO_FIELD;

    l->ts_copy = sizeof(PyThreadState);
    l->ts_next = offsetof(PyThreadState, next);
    l->ts_current_frame = ATTACH_NO_FIELD;
    l->chunk_header = offsetof(_PyStackChunk, data);

    l->fr_copy = offsetof(_PyInterpreterFrame, localsplus);
    l->fr_instr = offsetof(_PyInterpreterFrame, prev_instr);
    l->fr_is_entry = offsetof(_PyInterpreterFrame, is_entry);
    l->fr_instr_is_prev = true;
    l->fr_code_tagged = false;
    l->owner_generator = FRAME_OWNED_BY_GENERATOR;
    l->owner_cstack = -1;
    l->owner_max = FRAME_OWNED_BY_FRAME_OBJECT;

    l->co_copy = offsetof(PyCodeObject, co_code_adaptive);

    l->var_size = offsetof(PyVarObject, ob_size);
    l->str_length = offsetof(PyASCIIObject, length);
    l->str_state = offsetof(PyASCIIObject, state);
    l->str_ascii_size = sizeof(PyASCIIObject);
    l->str_compact_size = sizeof(PyCompactUnicodeObject);
    l->str_ready_bit = 7; /* interned:2, kind:3, compact:1, ascii:1, ready:1 */
    l->free_threaded = false;
    l->major = 3;
    return l;
}

static struct attach_pyobj_layout g_py311_obj;

const struct attach_pyobj_layout *attach_pyobj_layout_py311(void)
{
    struct attach_pyobj_layout *l = &g_py311_obj;
    if (l->dk_entry_unicode)
        return l;
    l->obj_type = offsetof(PyObject, ob_type);
    l->str_length = offsetof(PyASCIIObject, length);
    l->str_state = offsetof(PyASCIIObject, state);
    l->str_ascii_size = sizeof(PyASCIIObject);
    l->tp_name = offsetof(PyTypeObject, tp_name);
    l->tp_flags = offsetof(PyTypeObject, tp_flags);
    l->tp_base = offsetof(PyTypeObject, tp_base);
    l->ht_cached_keys = offsetof(PyHeapTypeObject, ht_cached_keys);
    l->tpflag_managed_dict = Py_TPFLAGS_MANAGED_DICT;
    /* pycore_object.h: _PyObject_ValuesPointer is obj - 4 pointers, the dict obj - 3 */
    l->managed_values = -4 * (ptrdiff_t)sizeof(PyObject *);
    l->managed_dict = MANAGED_DICT_OFFSET;
    l->dict_used = offsetof(PyDictObject, ma_used);
    l->dict_keys = offsetof(PyDictObject, ma_keys);
    l->dict_values = offsetof(PyDictObject, ma_values);
    l->dk_log2_size = offsetof(PyDictKeysObject, dk_log2_size);
    l->dk_log2_index_bytes = offsetof(PyDictKeysObject, dk_log2_index_bytes);
    l->dk_kind = offsetof(PyDictKeysObject, dk_kind);
    l->dk_nentries = offsetof(PyDictKeysObject, dk_nentries);
    l->dk_indices = offsetof(PyDictKeysObject, dk_indices);
    l->dk_kind_general = DICT_KEYS_GENERAL;
    l->dk_kind_split = DICT_KEYS_SPLIT;
    l->dk_entry_general = sizeof(PyDictKeyEntry);
    l->dke_general_key = offsetof(PyDictKeyEntry, me_key);
    l->dke_general_value = offsetof(PyDictKeyEntry, me_value);
    l->dk_entry_unicode = sizeof(PyDictUnicodeEntry);
    l->dke_unicode_key = offsetof(PyDictUnicodeEntry, me_key);
    l->dke_unicode_value = offsetof(PyDictUnicodeEntry, me_value);
    l->set_mask = offsetof(PySetObject, mask);
    l->set_table = offsetof(PySetObject, table);
    l->set_entry = sizeof(setentry);
    l->setentry_key = offsetof(setentry, key);
    l->setentry_hash = offsetof(setentry, hash);
    l->mod_dict = offsetof(PyModuleObject, md_dict);
    l->wr_object = offsetof(PyWeakReference, wr_object);
    l->var_size = offsetof(PyVarObject, ob_size);
    l->long_digits = offsetof(PyLongObject, ob_digit);
    l->long_shift = PyLong_SHIFT;
    l->long_digit_size = sizeof(digit);
    l->is_modules = offsetof(PyInterpreterState, modules);
    return l;
}

/* _asyncio's Task object as 3.11's Modules/_asynciomodule.c lays it out (FutureObj_HEAD then
 * the task's own fields); that struct is in no installed header, so its field order is written
 * here and checked against a live task by tests/attach (test_attach.py, asyncio_tasks). */
struct py311_task {
    PyObject ob_base; /* PyObject_HEAD */
    PyObject *loop, *callback0, *context0, *callbacks, *exception, *exception_tb, *result,
        *source_tb, *cancel_msg;
    int state; /* fut_state: PENDING 0, CANCELLED 1, FINISHED 2 */
    int log_tb, blocking;
    PyObject *dict, *weakreflist, *cancelled_exc;
    PyObject *fut_waiter, *coro, *name, *context;
    int must_cancel, log_destroy_pending, num_cancels_requested;
};

#if SIZEOF_VOID_P == 8
/* the offsets a live 3.11.2 task showed on x86-64 (tests/attach checks the reads end to end) */
static_assert(offsetof(struct py311_task, state) == 88, "3.11 Task layout");
static_assert(offsetof(struct py311_task, coro) == 136, "3.11 Task layout");
static_assert(sizeof(struct py311_task) == 176, "3.11 Task layout");
#endif

struct py311_future_iter {
    PyObject ob_base; /* PyObject_HEAD */
    PyObject *future;
};

static struct attach_pytask_layout g_py311_task;

const struct attach_pytask_layout *attach_pytask_layout_py311(void)
{
    struct attach_pytask_layout *l = &g_py311_task;
    if (l->gen_iframe)
        return l;
    SKPX_PY311_CORO_FIELDS(PY311_SET)
    l->gen_state_created = FRAME_CREATED;
    l->task_copy = sizeof(struct py311_task);
    l->task_state = offsetof(struct py311_task, state);
    l->task_coro = offsetof(struct py311_task, coro);
    l->task_name = offsetof(struct py311_task, name);
    l->task_fut_waiter = offsetof(struct py311_task, fut_waiter);
    l->fut_state_pending = 0;
    l->futiter_future = offsetof(struct py311_future_iter, future);
    l->co_localsplusnames = offsetof(PyCodeObject, co_localsplusnames);
    l->tuple_items = offsetof(PyTupleObject, ob_item);
    l->tp_dict = offsetof(PyTypeObject, tp_dict);
    l->memberdescr_member = offsetof(PyMemberDescrObject, d_member);
    l->memberdef_offset = offsetof(PyMemberDef, offset);
    l->float_value = offsetof(PyFloatObject, ob_fval);
    return l;
}

#else

const struct attach_pylayout *attach_pylayout_py311(void)
{
    return NULL;
}

const struct attach_pyobj_layout *attach_pyobj_layout_py311(void)
{
    return NULL;
}

const struct attach_pytask_layout *attach_pytask_layout_py311(void)
{
    return NULL;
}

#endif
