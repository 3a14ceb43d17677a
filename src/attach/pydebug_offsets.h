/* pydebug_offsets.h - the shape of CPython's _Py_DebugOffsets table (the start of _PyRuntime since
 * 3.13), written from the field lists of 3.13 and 3.14: every field is a uint64_t offset or size,
 * grouped per structure. Only the reader (pydebug_offsets.c) and fixture tests use these. */
#ifndef SKP_ATTACH_PYDEBUG_OFFSETS_H
#define SKP_ATTACH_PYDEBUG_OFFSETS_H

#include <stdint.h>

struct attach_dbg_head {
    char cookie[8];   /* "xdebugpy" */
    uint64_t version; /* PY_VERSION_HEX */
    uint64_t free_threaded;
};

struct attach_dbg_runtime {
    uint64_t size, finalizing, interpreters_head;
};

struct attach_dbg_thread {
    uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id, datastack_chunk,
        status;
};

struct attach_dbg_pair {
    uint64_t size, a;
};
struct attach_dbg_triple {
    uint64_t size, a, b;
};
struct attach_dbg_quad {
    uint64_t size, a, b, c;
};

/* 3.13 */
struct attach_dbg_313 {
    struct attach_dbg_head head;
    struct attach_dbg_runtime runtime;
    struct {
        uint64_t size, id, next, threads_head, gc, imports_modules, sysdict, builtins, ceval_gil,
            gil_runtime_state, gil_runtime_state_enabled, gil_runtime_state_locked,
            gil_runtime_state_holder;
    } interp;
    struct attach_dbg_thread thread;
    struct {
        uint64_t size, previous, executable, instr_ptr, localsplus, owner;
    } frame;
    struct {
        uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames,
            localspluskinds, co_code_adaptive;
    } code;
    struct attach_dbg_pair pyobject;  /* ob_type */
    struct attach_dbg_quad type;      /* tp_name, tp_repr, tp_flags */
    struct attach_dbg_triple tuple;   /* ob_item, ob_size */
    struct attach_dbg_triple list;    /* ob_item, ob_size */
    struct attach_dbg_triple dict;    /* ma_keys, ma_values */
    struct attach_dbg_pair floatobj;  /* ob_fval */
    struct attach_dbg_triple longobj; /* lv_tag, ob_digit */
    struct attach_dbg_triple bytes;   /* ob_size, ob_sval */
    struct attach_dbg_quad unicode;   /* state, length, asciiobject_size */
    struct attach_dbg_pair gc;        /* collecting */
};

/* 3.14: the interpreter gains threads_main, code_object_generation and tlbc_generation, frames
 * stackpointer and tlbc_index, code objects co_tlbc; a set table comes before dict; generator,
 * list-node and debugger-support tables follow gc. */
struct attach_dbg_314 {
    struct attach_dbg_head head;
    struct attach_dbg_runtime runtime;
    struct {
        uint64_t size, id, next, threads_head, threads_main, gc, imports_modules, sysdict, builtins,
            ceval_gil, gil_runtime_state, gil_runtime_state_enabled, gil_runtime_state_locked,
            gil_runtime_state_holder, code_object_generation, tlbc_generation;
    } interp;
    struct attach_dbg_thread thread;
    struct {
        uint64_t size, previous, executable, instr_ptr, localsplus, owner, stackpointer, tlbc_index;
    } frame;
    struct {
        uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames,
            localspluskinds, co_code_adaptive, co_tlbc;
    } code;
    struct attach_dbg_pair pyobject;
    struct attach_dbg_quad type;
    struct attach_dbg_triple tuple;
    struct attach_dbg_triple list;
    struct attach_dbg_quad set; /* used, table, mask */
    struct attach_dbg_triple dict;
    struct attach_dbg_pair floatobj;
    struct attach_dbg_triple longobj;
    struct attach_dbg_triple bytes;
    struct attach_dbg_quad unicode;
    struct attach_dbg_pair gc;
    struct attach_dbg_quad gen; /* gi_name, gi_iframe, gi_frame_state */
    struct {
        uint64_t next, prev;
    } llist_node;
    struct {
        uint64_t eval_breaker, remote_debugger_support, remote_debugging_enabled,
            debugger_pending_call, debugger_script_path, debugger_script_path_size;
    } debugger;
};

#endif
