/* pyreader.h - reads the Python threads and stacks of another process without stopping it.
 *
 * attach_target_open finds the interpreter of a PID (libpython or the python executable in its
 * maps, _PyRuntime / Py_Version from ELF symbols, the .PyRuntime section, else a validated scan
 * of .data/.bss), picks the layout for its version and validates the runtime -> interpreter ->
 * thread state chain. attach_target_sample then copies every thread's stack with batched
 * process_vm_readv calls. The target keeps running (unless ATTACH_SAMPLE_BLOCKING), so a read can
 * be torn: every pointer is checked (alignment, range, object type) and a thread whose walk fails
 * validation is left out of that sample and counted in n_torn.
 * One target is used by one thread at a time. */
#ifndef SKP_ATTACH_PYREADER_H
#define SKP_ATTACH_PYREADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "attach/pylayout.h"
#include "skyprof/skp_err.h"

/* Most Python threads read per sample (more are left out and counted). */
#define ATTACH_MAX_THREADS 256
/* Deepest Python stack kept per thread (CPython's default recursion limit is 1000). */
#define ATTACH_MAX_DEPTH 1024
/* Most frames kept per sample, all threads together. */
#define ATTACH_MAX_FRAMES 16384
/* Longest function / file name kept (longer ones are truncated). */
#define ATTACH_NAME_MAX 256
#define ATTACH_FILE_MAX 512
/* Largest co_linetable copied (bigger tables report the function's first line). */
#define ATTACH_LINETABLE_MAX (64 * 1024)
/* Bytes of a thread's frame data stack copied in one read (frames beyond are read one by one). */
#define ATTACH_WINDOW_MAX (64 * 1024)
/* Code objects remembered (name, file, location table); the cache is emptied when full. */
#define ATTACH_CODE_CACHE_CAP 8192
/* Longest explanation attach_target_open leaves in `why`. */
#define ATTACH_WHY_MAX 1024

struct attach_target;

/* A frame of a sample: strings borrowed from the target's code cache, valid until the next
 * attach_target_sample on the same target. */
struct attach_frame {
    const char *name; /* co_qualname (NUL-terminated) */
    const char *file; /* co_filename */
    int line;         /* -1 when unknown */
    bool native;      /* a C frame (--native): name is the symbol, file the module */
    bool entry;       /* Python: the outermost frame of one C-level evaluation (one
                         _PyEval_EvalFrameDefault call); a thread's outermost frame
                         always is one. --native splices each evaluation's frames in
                         at its native eval frame. */
};

struct attach_thread {
    pid_t tid;          /* native thread id (Linux TID), 0 when unknown */
    uint64_t thread_id; /* Python's threading.get_ident() */
    char name[16];      /* /proc/PID/task/TID/comm */
    bool running;       /* state R in /proc/PID/task/TID/stat */
    bool holds_gil;
    size_t first_frame; /* index into the sample's frames, innermost first */
    size_t n_frames;
    bool truncated; /* deeper than ATTACH_MAX_DEPTH or the frame budget */
};

struct attach_sample {
    struct attach_thread threads[ATTACH_MAX_THREADS];
    size_t n_threads;
    struct attach_frame frames[ATTACH_MAX_FRAMES];
    size_t n_frames;
    uint32_t n_torn; /* threads left out because a read was torn */
};

enum {
    ATTACH_SAMPLE_BLOCKING = 1, /* stop every thread (PTRACE_SEIZE/INTERRUPT) while reading */
};

struct attach_stats {
    uint64_t samples, torn_threads, syscalls, bytes, faults;
    uint64_t code_hits, code_misses;
};

/* Finds and validates the interpreter of `pid`. On success *out owns the target; release it with
 * attach_target_close. On failure *out is NULL and `why` (why_cap bytes, may be NULL) says what
 * is missing in one or two sentences (EPERM: how to grant ptrace access).
 * Errors: SKP_ENOTFOUND (no such process, or no CPython in it), SKP_EIO (permission, I/O),
 * SKP_ENOTSUP (a CPython version or build this reader does not support, free-threaded),
 * SKP_EINVAL (the interpreter's structures do not validate), SKP_ENOMEM. */
SKP_MUST_CHECK skp_err attach_target_open(pid_t pid, struct attach_target **out, char *why,
                                          size_t why_cap);

/* Like attach_target_open, for a runtime at a known address (fixture tests of other CPython
 * versions, whose runtime lives in a child process of the test). `layout` is copied; NULL means
 * "read the runtime's _Py_DebugOffsets" (3.13+). Same errors. */
SKP_MUST_CHECK skp_err attach_target_open_at(pid_t pid, uintptr_t runtime,
                                             const struct attach_pylayout *layout,
                                             struct attach_target **out, char *why, size_t why_cap);

/* Releases the target. NULL ok. */
void attach_target_close(struct attach_target *t);

/* "3.11.2" (or "3.11" when the micro version is unknown); the layout's name. Borrowed. */
const char *attach_target_version(const struct attach_target *t);
/* Path of the image that holds the runtime ("" for open_at). Borrowed. */
const char *attach_target_image(const struct attach_target *t);
pid_t attach_target_pid(const struct attach_target *t);

/* Copies every Python thread's stack into *s (caller-provided; big: allocate it). Threads whose
 * walk was torn are left out and counted. Errors: SKP_ENOTFOUND (the process exited), SKP_EIO
 * (the runtime itself cannot be read), SKP_ENOMEM (the code cache could not grow). */
SKP_MUST_CHECK skp_err attach_target_sample(struct attach_target *t, struct attach_sample *s,
                                            unsigned flags);

void attach_target_stats(const struct attach_target *t, struct attach_stats *out);

#endif
