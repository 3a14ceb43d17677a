/* pylayout.h - CPython's private struct layouts as data (one table per minor version, austin's
 * approach). The stack reader (pystack.c) walks frames using only these offsets, so supporting a
 * new CPython minor version means one file in compat/ and one entry in pylayout.c.
 * A table is usable only when the running interpreter is the minor version it was compiled for
 * (checked at init against Py_Version); otherwise the reader uses the portable C-API path. */
#ifndef SKP_PYTHON_PYLAYOUT_H
#define SKP_PYTHON_PYLAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Decoded header of a str object, from a copied prefix of the object. */
struct skp__pystr_info {
    size_t length;      /* code points */
    size_t data_offset; /* where the characters start, from the object's address */
    int kind;           /* 1, 2 or 4 bytes per code point */
    bool ok;            /* false: not a compact ready str (we do not read those) */
};

/* A code object looked for on live frames, with the fields it must still have (codewatch). */
struct skp__pylive_query {
    uintptr_t code;
    uintptr_t filename, name, linetable;
    int firstlineno;
};

struct skp__pylayout {
    const char *name; /* "3.11" */
    unsigned major, minor;

    /* PyThreadState: bytes to copy from its start, and the fields the walker needs */
    size_t ts_copy;
    size_t ts_interp, ts_cframe, ts_thread_id, ts_native_thread_id;
    size_t ts_datastack_chunk, ts_datastack_top, ts_datastack_limit;

    /* _PyCFrame */
    size_t cf_size, cf_current_frame;

    /* _PyInterpreterFrame: header bytes (up to localsplus) and fields */
    size_t fr_size, fr_code, fr_previous, fr_prev_instr, fr_owner;
    int fr_owner_max;       /* owners are 0..max */
    int fr_owner_generator; /* generator frames are never "incomplete" */

    /* _PyInterpreterFrame: the value stack (an awaiting coroutine's awaitable is on its top) */
    size_t fr_stacktop, fr_localsplus;

    /* PyGenObject / PyCoroObject (same head): the frame lives inside the object */
    size_t gen_copy; /* bytes to copy: the head up to and with the frame header */
    size_t gen_frame_state, gen_iframe;
    int gen_state_executing, gen_state_suspended;
    uintptr_t coro_type, gen_type;

    /* PyCodeObject: header bytes copied per code object, and fields */
    size_t co_copy;
    size_t co_type, co_nunits, co_filename, co_name, co_qualname, co_linetable, co_firstlineno;
    size_t co_firsttraceable, co_code_start;
    size_t code_unit_bytes;

    /* str and bytes objects */
    size_t str_header_copy; /* bytes to copy to decode a str header */
    size_t obj_type;        /* offset of ob_type in any object */
    size_t bytes_size, bytes_data;

    /* type objects of this process (same address space) */
    uintptr_t code_type, str_type, bytes_type;

    /* the interpreter's GIL state (its mutex and condition variables): a thread in a futex wait
     * on a word in [gil_lo, gil_lo + gil_size) waits for the GIL, not for a lock (pywait.h) */
    uintptr_t gil_lo;
    size_t gil_size;

    /* Decodes a str header copied into `hdr` (str_header_copy bytes). */
    void (*str_decode)(const void *hdr, struct skp__pystr_info *out);
    /* Line of the instruction at byte offset `addr` from the code's location table (copied), or
     * -1 when the table says "no line". Pure function over the copy. */
    int (*addr2line)(const uint8_t *table, size_t len, int firstlineno, int addr);
    /* GIL held: sets found[i] when code object q[i].code is the code of a frame currently on
     * the stack of some thread of the main interpreter (hence alive) AND still has the fields of
     * q[i] (so it is the object the query was made for, not a successor at the same address).
     * NULL = not supported. */
    void (*find_live_codes)(const struct skp__pylive_query *q, size_t n, bool *found);
};

/* The layout table for the running interpreter, or NULL when there is none (then the portable
 * path is used). Must be called with the GIL held (reads type object addresses). */
const struct skp__pylayout *skp__pylayout_select(void);

/* The 3.11 table (compat/py311.c); NULL when this build has no 3.11 headers. */
const struct skp__pylayout *skp__pylayout_py311(void);

#endif
