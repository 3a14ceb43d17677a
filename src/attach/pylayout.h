/* pylayout.h - where the out-of-process reader finds things in a CPython of a given minor
 * version: offsets of the runtime, interpreter, thread state, frame, code, str and bytes
 * structures, as plain data (no Python headers needed to use it).
 *   3.11: compiled from that version's internal headers at build time (py311.c, offsetof);
 *   3.12: a table written from 3.12's headers (py312.c);
 *   3.13, 3.14: read from the target's own _Py_DebugOffsets (pydebug_offsets.c), whose layout
 *   is picked by its `version` field before any offset is used.
 * A layout is immutable once built; single-threaded construction, then read-only. */
#ifndef SKP_ATTACH_PYLAYOUT_H
#define SKP_ATTACH_PYLAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "skyprof/skp_err.h"

/* Marks an offset the version does not have. */
#define ATTACH_NO_FIELD ((size_t)-1)
/* Largest structure prefix the reader copies (thread state, code header, frame header). */
#define ATTACH_COPY_MAX 1024

struct attach_pylayout {
    char name[16]; /* "3.11" */
    unsigned major, minor;
    uint32_t version_hex; /* PY_VERSION_HEX of the target when known, else 0 */

    /* _PyRuntimeState */
    size_t rt_interp_head; /* interpreters.head */
    size_t rt_gil_tstate;  /* 3.11: gilstate.tstate_current; else ATTACH_NO_FIELD */

    /* PyInterpreterState */
    size_t is_next, is_threads_head;
    size_t is_gil_ptr;             /* 3.12+: ceval.gil (pointer to the GIL state) */
    size_t is_gil_inline;          /* 3.13+: _gil (the GIL state inside the interpreter) */
    size_t gil_locked, gil_holder; /* in the GIL state */

    /* PyThreadState */
    size_t ts_copy; /* bytes copied from a thread state's start */
    size_t ts_next, ts_interp, ts_thread_id, ts_native_thread_id;
    size_t ts_cframe;        /* 3.11/3.12: cframe (then cf_current_frame) */
    size_t ts_current_frame; /* 3.13+: current_frame directly */
    size_t cf_current_frame;
    size_t ts_datastack_chunk, ts_datastack_top; /* frames' arena (window read) */
    size_t chunk_header; /* bytes before the first frame in a data stack chunk */

    /* _PyInterpreterFrame */
    size_t fr_copy; /* header bytes copied (up to localsplus) */
    size_t fr_code, fr_previous, fr_instr, fr_owner;
    size_t fr_is_entry;    /* 3.11: is_entry (first frame of a C-level evaluation); later
                              versions mark that with a shim frame: ATTACH_NO_FIELD */
    bool fr_instr_is_prev; /* 3.11/3.12: prev_instr (last executed); 3.13+: instr_ptr */
    bool fr_code_tagged;   /* 3.14: f_executable is a _PyStackRef, low bits are tags */
    int owner_generator;   /* generator frames are never "incomplete" */
    int owner_cstack;      /* shim frames to skip; -1 when the version has none */
    int owner_max;         /* owners are 0..owner_max */

    /* PyCodeObject */
    size_t co_copy;
    size_t co_filename, co_name, co_qualname, co_linetable, co_firstlineno;
    size_t co_firsttraceable; /* 3.11/3.12 _co_firsttraceable; else ATTACH_NO_FIELD */
    size_t co_code_start;     /* co_code_adaptive */

    /* any object, str and bytes */
    size_t obj_type; /* ob_type */
    size_t var_size; /* ob_size */
    size_t str_length, str_state;
    size_t str_ascii_size;   /* sizeof(PyASCIIObject): data of compact ASCII strs */
    size_t str_compact_size; /* sizeof(PyCompactUnicodeObject): other compact strs */
    int str_ready_bit;       /* 3.11: bit of `ready` in state; -1 when gone */
    size_t bytes_data;       /* ob_sval */

    bool free_threaded; /* a free-threaded build (refused by the reader) */
};

/* The 3.11 layout compiled from its headers; NULL when the build had no 3.11 headers. */
const struct attach_pylayout *attach_pylayout_py311(void);
/* The 3.12 layout (a table: 64-bit, default build). */
const struct attach_pylayout *attach_pylayout_py312(void);

/* _Py_DebugOffsets (3.13+), the table CPython puts at the start of _PyRuntime for tools like
 * this one. Its shape depends on the minor version: 3.13's and 3.14's are known here. */
#define ATTACH_DEBUG_COOKIE "xdebugpy"
/* Bytes of _PyRuntime copied to read the table (3.14's is about 600 bytes). */
#define ATTACH_DEBUG_OFFSETS_COPY 1024
/* Largest offset or size the table may give for a field we use (a bigger one is corrupt). */
#define ATTACH_DEBUG_OFFSET_MAX 65536

/* Builds the layout of a 3.13+ runtime from a copy of the start of its _PyRuntime (`len` bytes
 * of `rt`, borrowed). Checks the cookie, picks the table's shape by its `version` field, checks
 * every offset it uses against ATTACH_DEBUG_OFFSET_MAX and refuses free-threaded builds. On
 * failure writes a one-line reason into `why` (why_cap bytes; may be NULL).
 * Errors: SKP_EINVAL (no cookie or a corrupt table), SKP_ENOTSUP (a version this reader does not
 * know, or a free-threaded build). Pure function (fuzzed: tests/fuzz/attach/fuzz_debug_offsets). */
SKP_MUST_CHECK skp_err attach_pylayout_from_debug_offsets(const uint8_t *rt, size_t len,
                                                          struct attach_pylayout *out, char *why,
                                                          size_t why_cap);

#endif
