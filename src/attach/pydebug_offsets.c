/* pydebug_offsets.c - a layout from the target's own _Py_DebugOffsets (3.13+). The table is data
 * from another process: every offset we use is bounded before it reaches the layout, and the
 * version picks the table's shape before any field past the header is read. */
#include "attach/pylayout.h"

#include <stdio.h>
#include <string.h>

#include "attach/pydebug_offsets.h"

/* Frame owners: 3.13 has THREAD, GENERATOR, FRAME_OBJECT, CSTACK (3); 3.14 inserts INTERPRETER
 * before CSTACK (4). */
#define OWNER_CSTACK_313 3
#define OWNER_CSTACK_314 4
#define OWNER_GENERATOR 1
/* _PyStackChunk header: previous, size, top. */
#define CHUNK_HEADER 24
/* PyCompactUnicodeObject adds utf8_length and utf8 to PyASCIIObject (3.12+). */
#define COMPACT_EXTRA 16

static void say(char *why, size_t cap, const char *msg, unsigned long long v)
{
    if (why && cap)
        snprintf(why, cap, msg, v);
}

/* The fields both shapes share, copied out of either struct. */
struct common_fields {
    uint64_t interp_head;
    uint64_t is_next, is_threads_head, gil_inline, gil_locked, gil_holder;
    struct attach_dbg_thread thread;
    uint64_t fr_size, fr_previous, fr_executable, fr_instr, fr_owner, fr_localsplus;
    uint64_t co_filename, co_name, co_qualname, co_linetable, co_firstlineno, co_code_adaptive;
    uint64_t ob_type, bytes_size, bytes_sval, str_state, str_length, str_ascii_size;
};

static uint64_t max_of(const uint64_t *v, size_t n)
{
    uint64_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i] > m)
            m = v[i];
    return m;
}

skp_err attach_pylayout_from_debug_offsets(const uint8_t *rt, size_t len,
                                           struct attach_pylayout *out, char *why, size_t why_cap)
{
    memset(out, 0, sizeof(*out));
    struct attach_dbg_head head;
    if (len < sizeof(head)) {
        say(why, why_cap, "_PyRuntime copy too short (%llu bytes)", (unsigned long long)len);
        return SKP_EINVAL;
    }
    memcpy(&head, rt, sizeof(head));
    if (memcmp(head.cookie, ATTACH_DEBUG_COOKIE, 8) != 0) {
        if (why && why_cap)
            snprintf(why, why_cap,
                     "_PyRuntime does not start with the _Py_DebugOffsets cookie \"xdebugpy\": "
                     "not a CPython 3.13+ runtime, or a corrupt one");
        return SKP_EINVAL;
    }
    unsigned major = (unsigned)((head.version >> 24) & 0xff);
    unsigned minor = (unsigned)((head.version >> 16) & 0xff);
    unsigned micro = (unsigned)((head.version >> 8) & 0xff);
    if (major != 3 || minor < 13 || minor > 14) {
        if (why && why_cap)
            snprintf(why, why_cap,
                     "_Py_DebugOffsets of CPython %u.%u (version 0x%llx): this reader knows the "
                     "tables of 3.13 and 3.14 only",
                     major, minor, (unsigned long long)head.version);
        return SKP_ENOTSUP;
    }
    if (head.free_threaded) {
        if (why && why_cap)
            snprintf(why, why_cap,
                     "the target runs a free-threaded CPython %u.%u build (Py_GIL_DISABLED): its "
                     "thread-local bytecode and object layout are not supported; use a default "
                     "(GIL) build",
                     major, minor);
        return SKP_ENOTSUP;
    }
    struct common_fields f;
    memset(&f, 0, sizeof(f));
    int owner_cstack;
    /* 3.13's and 3.14's structs place the fields differently but name them alike: one copy of
     * the field list serves both layouts. */
#define READ_COMMON_FIELDS(dbg_struct)                                                             \
    do {                                                                                           \
        struct dbg_struct d;                                                                       \
        if (len < sizeof(d)) {                                                                     \
            say(why, why_cap, "_Py_DebugOffsets copy too short (%llu bytes)",                      \
                (unsigned long long)len);                                                          \
            return SKP_EINVAL;                                                                     \
        }                                                                                          \
        memcpy(&d, rt, sizeof(d));                                                                 \
        f.interp_head = d.runtime.interpreters_head;                                               \
        f.is_next = d.interp.next;                                                                 \
        f.is_threads_head = d.interp.threads_head;                                                 \
        f.gil_inline = d.interp.gil_runtime_state;                                                 \
        f.gil_locked = d.interp.gil_runtime_state_locked;                                          \
        f.gil_holder = d.interp.gil_runtime_state_holder;                                          \
        f.thread = d.thread;                                                                       \
        f.fr_size = d.frame.size;                                                                  \
        f.fr_previous = d.frame.previous;                                                          \
        f.fr_executable = d.frame.executable;                                                      \
        f.fr_instr = d.frame.instr_ptr;                                                            \
        f.fr_owner = d.frame.owner;                                                                \
        f.fr_localsplus = d.frame.localsplus;                                                      \
        f.co_filename = d.code.filename;                                                           \
        f.co_name = d.code.name;                                                                   \
        f.co_qualname = d.code.qualname;                                                           \
        f.co_linetable = d.code.linetable;                                                         \
        f.co_firstlineno = d.code.firstlineno;                                                     \
        f.co_code_adaptive = d.code.co_code_adaptive;                                              \
        f.ob_type = d.pyobject.a;                                                                  \
        f.bytes_size = d.bytes.a;                                                                  \
        f.bytes_sval = d.bytes.b;                                                                  \
        f.str_state = d.unicode.a;                                                                 \
        f.str_length = d.unicode.b;                                                                \
        f.str_ascii_size = d.unicode.c;                                                            \
    } while (0)
    if (minor == 13) {
        READ_COMMON_FIELDS(attach_dbg_313);
        owner_cstack = OWNER_CSTACK_313;
    } else {
        READ_COMMON_FIELDS(attach_dbg_314);
        owner_cstack = OWNER_CSTACK_314;
    }
#undef READ_COMMON_FIELDS

    /* every offset used must be small: the copies made from them are bounded by ATTACH_COPY_MAX
     * (checked again when the target is validated) */
    const uint64_t used[] = {
        f.interp_head,
        f.is_next,
        f.is_threads_head,
        f.gil_inline,
        f.gil_locked,
        f.gil_holder,
        f.thread.next,
        f.thread.interp,
        f.thread.current_frame,
        f.thread.thread_id,
        f.thread.native_thread_id,
        f.thread.datastack_chunk,
        f.fr_previous,
        f.fr_executable,
        f.fr_instr,
        f.fr_owner,
        f.fr_localsplus,
        f.co_filename,
        f.co_name,
        f.co_qualname,
        f.co_linetable,
        f.co_firstlineno,
        f.co_code_adaptive,
        f.ob_type,
        f.bytes_size,
        f.bytes_sval,
        f.str_state,
        f.str_length,
        f.str_ascii_size,
    };
    for (size_t i = 0; i < sizeof(used) / sizeof(used[0]); i++) {
        if (used[i] > ATTACH_DEBUG_OFFSET_MAX) {
            say(why, why_cap, "_Py_DebugOffsets holds an implausible offset (%llu): corrupt table",
                (unsigned long long)used[i]);
            return SKP_EINVAL;
        }
    }

    struct attach_pylayout *l = out;
    snprintf(l->name, sizeof(l->name), "%u.%u", major, minor);
    l->major = major;
    l->minor = minor;
    l->version_hex = (uint32_t)head.version;
    (void)micro;
    l->rt_interp_head = (size_t)f.interp_head;
    l->rt_gil_tstate = ATTACH_NO_FIELD;
    l->is_next = (size_t)f.is_next;
    l->is_threads_head = (size_t)f.is_threads_head;
    l->is_gil_ptr = ATTACH_NO_FIELD;
    /* locked/holder are given from the interpreter's start (offsetof(PyInterpreterState,
     * _gil.locked)), so the "GIL state" is the interpreter itself */
    l->is_gil_inline = 0;
    l->gil_locked = (size_t)f.gil_locked;
    l->gil_holder = (size_t)f.gil_holder;

    const uint64_t ts_fields[] = {
        f.thread.next,      f.thread.interp,           f.thread.current_frame,
        f.thread.thread_id, f.thread.native_thread_id, f.thread.datastack_chunk};
    l->ts_copy = (size_t)max_of(ts_fields, 6) + 8;
    l->ts_next = (size_t)f.thread.next;
    l->ts_interp = (size_t)f.thread.interp;
    l->ts_thread_id = (size_t)f.thread.thread_id;
    l->ts_native_thread_id = (size_t)f.thread.native_thread_id;
    l->ts_cframe = ATTACH_NO_FIELD;
    l->ts_current_frame = (size_t)f.thread.current_frame;
    l->cf_current_frame = ATTACH_NO_FIELD;
    l->ts_datastack_chunk = (size_t)f.thread.datastack_chunk;
    l->ts_datastack_top = ATTACH_NO_FIELD;
    l->chunk_header = CHUNK_HEADER;

    const uint64_t fr_fields[] = {f.fr_previous, f.fr_executable, f.fr_instr, f.fr_owner};
    l->fr_copy = (size_t)max_of(fr_fields, 4) + 8;
    l->fr_code = (size_t)f.fr_executable;
    l->fr_previous = (size_t)f.fr_previous;
    l->fr_instr = (size_t)f.fr_instr;
    l->fr_owner = (size_t)f.fr_owner;
    l->fr_is_entry = ATTACH_NO_FIELD; /* entry frames follow a shim frame */
    l->fr_instr_is_prev = false;
    l->fr_code_tagged = minor >= 14;
    l->owner_generator = OWNER_GENERATOR;
    l->owner_cstack = owner_cstack;
    l->owner_max = owner_cstack;

    const uint64_t co_fields[] = {f.co_filename, f.co_name, f.co_qualname, f.co_linetable,
                                  f.co_firstlineno};
    l->co_copy = (size_t)max_of(co_fields, 5) + 8;
    l->co_filename = (size_t)f.co_filename;
    l->co_name = (size_t)f.co_name;
    l->co_qualname = (size_t)f.co_qualname;
    l->co_linetable = (size_t)f.co_linetable;
    l->co_firstlineno = (size_t)f.co_firstlineno;
    l->co_firsttraceable = ATTACH_NO_FIELD;
    l->co_code_start = (size_t)f.co_code_adaptive;

    l->obj_type = (size_t)f.ob_type;
    l->var_size = (size_t)f.bytes_size;
    l->str_length = (size_t)f.str_length;
    l->str_state = (size_t)f.str_state;
    l->str_ascii_size = (size_t)f.str_ascii_size;
    l->str_compact_size = (size_t)f.str_ascii_size + COMPACT_EXTRA;
    l->str_ready_bit = -1;
    l->bytes_data = (size_t)f.bytes_sval;
    l->free_threaded = false;
    return SKP_OK;
}
