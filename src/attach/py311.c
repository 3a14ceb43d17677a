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

#include "internal/pycore_frame.h"
#include "internal/pycore_interp.h"
#include "internal/pycore_runtime.h"

static struct attach_pylayout g_py311;

const struct attach_pylayout *attach_pylayout_py311(void)
{
    struct attach_pylayout *l = &g_py311;
    if (l->major)
        return l;
    snprintf(l->name, sizeof(l->name), "3.11");
    l->minor = 11;
    l->version_hex = 0;

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
    l->ts_interp = offsetof(PyThreadState, interp);
    l->ts_thread_id = offsetof(PyThreadState, thread_id);
    l->ts_native_thread_id = offsetof(PyThreadState, native_thread_id);
    l->ts_cframe = offsetof(PyThreadState, cframe);
    l->ts_current_frame = ATTACH_NO_FIELD;
    l->cf_current_frame = offsetof(_PyCFrame, current_frame);
    l->ts_datastack_chunk = offsetof(PyThreadState, datastack_chunk);
    l->ts_datastack_top = offsetof(PyThreadState, datastack_top);
    l->chunk_header = offsetof(_PyStackChunk, data);

    l->fr_copy = offsetof(_PyInterpreterFrame, localsplus);
    l->fr_code = offsetof(_PyInterpreterFrame, f_code);
    l->fr_previous = offsetof(_PyInterpreterFrame, previous);
    l->fr_instr = offsetof(_PyInterpreterFrame, prev_instr);
    l->fr_owner = offsetof(_PyInterpreterFrame, owner);
    l->fr_is_entry = offsetof(_PyInterpreterFrame, is_entry);
    l->fr_instr_is_prev = true;
    l->fr_code_tagged = false;
    l->owner_generator = FRAME_OWNED_BY_GENERATOR;
    l->owner_cstack = -1;
    l->owner_max = FRAME_OWNED_BY_FRAME_OBJECT;

    l->co_copy = offsetof(PyCodeObject, co_code_adaptive);
    l->co_filename = offsetof(PyCodeObject, co_filename);
    l->co_name = offsetof(PyCodeObject, co_name);
    l->co_qualname = offsetof(PyCodeObject, co_qualname);
    l->co_linetable = offsetof(PyCodeObject, co_linetable);
    l->co_firstlineno = offsetof(PyCodeObject, co_firstlineno);
    l->co_firsttraceable = offsetof(PyCodeObject, _co_firsttraceable);
    l->co_code_start = offsetof(PyCodeObject, co_code_adaptive);

    l->obj_type = offsetof(PyObject, ob_type);
    l->var_size = offsetof(PyVarObject, ob_size);
    l->str_length = offsetof(PyASCIIObject, length);
    l->str_state = offsetof(PyASCIIObject, state);
    l->str_ascii_size = sizeof(PyASCIIObject);
    l->str_compact_size = sizeof(PyCompactUnicodeObject);
    l->str_ready_bit = 7;  /* interned:2, kind:3, compact:1, ascii:1, ready:1 */
    l->bytes_data = offsetof(PyBytesObject, ob_sval);
    l->free_threaded = false;
    l->major = 3;
    return l;
}

#else

const struct attach_pylayout *attach_pylayout_py311(void)
{
    return NULL;
}

#endif
