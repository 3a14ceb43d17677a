/* py311_fields.h - where CPython 3.11 keeps the fields that both Python stack readers locate:
 * the in-process one (src/python/compat/py311.c) and the out-of-process one (src/attach/py311.c).
 * One row per value: X(member, value), where member is the name both readers' layout structs give
 * it and value is taken with offsetof (or is a constant) from 3.11's own internal headers. Only a
 * file compiled with those headers (Py_BUILD_CORE) expands these lists; each reader fills its own
 * struct from them and adds what only it needs. */
#ifndef SKPX_PY311_FIELDS_H
#define SKPX_PY311_FIELDS_H

/* The frame walk: thread state, frame chain, code objects, str and bytes objects. */
#define SKPX_PY311_FRAME_FIELDS(X)                                                                 \
    X(ts_interp, offsetof(PyThreadState, interp))                                                  \
    X(ts_cframe, offsetof(PyThreadState, cframe))                                                  \
    X(ts_thread_id, offsetof(PyThreadState, thread_id))                                            \
    X(ts_native_thread_id, offsetof(PyThreadState, native_thread_id))                              \
    X(ts_datastack_chunk, offsetof(PyThreadState, datastack_chunk))                                \
    X(ts_datastack_top, offsetof(PyThreadState, datastack_top))                                    \
    X(cf_current_frame, offsetof(_PyCFrame, current_frame))                                        \
    X(fr_code, offsetof(_PyInterpreterFrame, f_code))                                              \
    X(fr_previous, offsetof(_PyInterpreterFrame, previous))                                        \
    X(fr_owner, offsetof(_PyInterpreterFrame, owner))                                              \
    X(co_filename, offsetof(PyCodeObject, co_filename))                                            \
    X(co_name, offsetof(PyCodeObject, co_name))                                                    \
    X(co_qualname, offsetof(PyCodeObject, co_qualname))                                            \
    X(co_linetable, offsetof(PyCodeObject, co_linetable))                                          \
    X(co_firstlineno, offsetof(PyCodeObject, co_firstlineno))                                      \
    X(co_firsttraceable, offsetof(PyCodeObject, _co_firsttraceable))                               \
    X(co_code_start, offsetof(PyCodeObject, co_code_adaptive))                                     \
    X(obj_type, offsetof(PyObject, ob_type))                                                       \
    X(bytes_data, offsetof(PyBytesObject, ob_sval))

/* Suspended coroutines and generators: the frame inside the object, its state, its value stack
 * (an awaiting coroutine's awaitable is on its top). */
#define SKPX_PY311_CORO_FIELDS(X)                                                                  \
    X(gen_frame_state, offsetof(PyGenObject, gi_frame_state))                                      \
    X(gen_iframe, offsetof(PyGenObject, gi_iframe))                                                \
    X(gen_state_executing, FRAME_EXECUTING)                                                        \
    X(gen_state_suspended, FRAME_SUSPENDED)                                                        \
    X(fr_stacktop, offsetof(_PyInterpreterFrame, stacktop))                                        \
    X(fr_localsplus, offsetof(_PyInterpreterFrame, localsplus))

#endif
