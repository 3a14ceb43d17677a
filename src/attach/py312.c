/* py312.c - the CPython 3.12 layout (x86-64 / aarch64 LP64, default build) as a table. No 3.12
 * headers exist on the build machines, so the numbers were taken from 3.12.0's internal headers
 * (pycore_runtime.h, pycore_interp.h, cpython/pystate.h, pycore_frame.h, cpython/code.h,
 * cpython/unicodeobject.h) and cross-checked by computing the same fields of 3.11 the same way
 * and comparing them with py311.c's offsetof values. Shim frames (owner FRAME_OWNED_BY_CSTACK,
 * new in 3.12) are skipped by the walker. */
#include "attach/pylayout.h"

static const struct attach_pylayout g_py312 = {
    .name = "3.12",
    .major = 3,
    .minor = 12,

    .rt_interp_head = 40, /* _PyRuntimeState.interpreters.head */
    .rt_gil_tstate = ATTACH_NO_FIELD,

    .is_next = 0,
    .is_threads_head = 72, /* PyInterpreterState.threads.head */
    .is_gil_ptr = 384,     /* PyInterpreterState.ceval.gil */
    .is_gil_inline = ATTACH_NO_FIELD,
    .gil_locked = 16, /* struct _gil_runtime_state.locked */
    .gil_holder = 8,  /* struct _gil_runtime_state.last_holder */

    .ts_copy = 288, /* sizeof(PyThreadState) */
    .ts_next = 8,
    .ts_interp = 16,
    .ts_thread_id = 136,
    .ts_native_thread_id = 144,
    .ts_cframe = 56,
    .ts_current_frame = ATTACH_NO_FIELD,
    .cf_current_frame = 0,
    .ts_datastack_chunk = 232,
    .ts_datastack_top = 240,
    .chunk_header = 24, /* _PyStackChunk: previous, size, top */

    .fr_copy = 72, /* offsetof(_PyInterpreterFrame, localsplus) */
    .fr_code = 0,  /* f_code */
    .fr_previous = 8,
    .fr_instr = 56, /* prev_instr */
    .fr_owner = 70,
    .fr_is_entry = ATTACH_NO_FIELD, /* entry frames follow a shim frame */
    .fr_instr_is_prev = true,
    .fr_code_tagged = false,
    .owner_generator = 1,
    .owner_cstack = 3, /* FRAME_OWNED_BY_CSTACK */
    .owner_max = 3,

    .co_copy = 192, /* up to co_code_adaptive */
    .co_filename = 112,
    .co_name = 120,
    .co_qualname = 128,
    .co_linetable = 136,
    .co_firstlineno = 68,
    .co_firsttraceable = 176,
    .co_code_start = 192,

    .obj_type = 8,
    .var_size = 16,
    .str_length = 16,
    .str_state = 32,
    .str_ascii_size = 40, /* sizeof(PyASCIIObject): no wstr since 3.12 */
    .str_compact_size = 56,
    .str_ready_bit = -1, /* every str is "ready" since 3.12 */
    .bytes_data = 32,
    .free_threaded = false,
};

const struct attach_pylayout *attach_pylayout_py312(void)
{
    return &g_py312;
}
