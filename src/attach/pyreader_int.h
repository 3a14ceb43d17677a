/* pyreader_int.h - shared by pyreader.c, pyfind.c and pytasks.c only: the target's private
 * state. */
#ifndef SKP_ATTACH_PYREADER_INT_H
#define SKP_ATTACH_PYREADER_INT_H

#include "attach/pyreader.h"
#include "attach/remote.h"

struct code_entry {
    uintptr_t code, filename, name, linetable;
    int firstlineno;
    int firsttraceable; /* code units; 0 when the version has no such field */
    char *qualname;     /* owned, NUL-terminated */
    char *file;         /* owned */
    uint8_t *table;     /* owned copy of co_linetable, NULL when unreadable/too big */
    uint32_t table_len;
    bool used; /* slot taken */
};

struct attach_target {
    pid_t pid;
    struct attach_remote mem;
    struct attach_pylayout layout;
    uintptr_t runtime;                         /* address of _PyRuntime in the target */
    uintptr_t code_type, str_type, bytes_type; /* 0 = unknown (not checked) */
    char version[32];
    char image[512];

    struct code_entry *codes; /* ATTACH_CODE_CACHE_CAP slots, open addressing */
    size_t n_codes;
    uint8_t *window; /* ATTACH_WINDOW_MAX */
    struct attach_stats stats;
};

/* Validates the runtime -> interpreter -> thread state chain of a target whose runtime and layout
 * are set. Errors as attach_target_open. */
SKP_MUST_CHECK skp_err attach__target_validate(struct attach_target *t, char *why, size_t cap);
/* Sets t->layout from the _Py_DebugOffsets at t->runtime (3.13+). Errors as
 * attach_pylayout_from_debug_offsets, SKP_EIO when the runtime cannot be read. */
SKP_MUST_CHECK skp_err attach__layout_from_runtime(struct attach_target *t, char *why, size_t cap);
/* Reads the str object at `addr` as UTF-8 into a new NUL-terminated string of at most `max`
 * characters (caller frees with skpx_free). NULL when it is not a compact str or cannot be
 * read. */
char *attach__read_str(struct attach_target *t, uintptr_t addr, size_t max);
/* Fills *out (strings borrowed from the code cache, valid until the next attach_target_sample)
 * for the code object at `code` executing at `instr` (its frame's prev_instr / instr_ptr).
 * False when the code object does not validate or the cache is full. */
bool attach__code_frame(struct attach_target *t, uintptr_t code, uintptr_t instr,
                        struct attach_frame *out);

/* Reads the address of the target's main interpreter (_PyRuntime.interpreters.head) into *out:
 * not checked (0 while the runtime starts or ends; see skpx_plausible_ptr). Errors: SKP_ENOTFOUND
 * (the process exited), SKP_EIO (the runtime cannot be read). */
SKP_MUST_CHECK skp_err attach__main_interp(struct attach_target *t, uintptr_t *out);
/* Allocates the caches of a target. Errors: SKP_ENOMEM. */
SKP_MUST_CHECK skp_err attach__target_alloc(struct attach_target **out);

#endif
