/* pywait.h - is a Python thread waiting to acquire a lock? The kernel's answer, for the
 * lock-wait events of process profiling (PprofTask `block` and `mutex`, see pyproc.c).
 *
 * A thread blocked in `threading.Lock.acquire` (and everything built on it: RLock, Condition,
 * Semaphore, Event, Queue, Thread.join, SimpleQueue) has released the GIL and sleeps in a futex
 * wait on its lock's semaphore; /proc/self/task/TID/syscall then names the futex syscall and the
 * futex word. A thread waiting for the GIL sleeps in a futex wait too, but on a word inside the
 * interpreter's GIL state, which the caller passes as [gil_lo, gil_hi) and which is excluded.
 * Sleeping (clock_nanosleep), I/O (read, epoll_wait, select) and running threads are not waiting
 * for a lock. Pure C: no Python API, no allocation. */
#ifndef SKP_PYTHON_PYWAIT_H
#define SKP_PYTHON_PYWAIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum skp__pywait_state {
    SKP_PYWAIT_UNKNOWN = -1, /* unreadable (thread gone, no /proc) or malformed */
    SKP_PYWAIT_NO = 0,       /* running, in another syscall, or waiting for the GIL */
    SKP_PYWAIT_LOCK = 1,     /* blocked in a futex wait outside the GIL */
};

/* Classifies the text of /proc/self/task/TID/syscall (`len` bytes, need not be NUL-terminated):
 * "running", "-1 SP PC" (blocked outside a syscall) or "NR ARG1 ... ARG6 SP PC" with numbers in
 * decimal or 0x-hex. `futex_nr` is the futex syscall number of the platform. On
 * SKP_PYWAIT_LOCK, *word = the futex word's address (one wait = one word). Never reads past len. */
enum skp__pywait_state skp__pywait_parse(const char *text, size_t len, long futex_nr,
                                         uintptr_t gil_lo, uintptr_t gil_hi, uint64_t *word);

/* Reads /proc/self/task/<tid>/syscall of a thread of this process and classifies it with the
 * platform's futex number. One open/read/close; no allocation. */
enum skp__pywait_state skp__pywait_read(int tid, uintptr_t gil_lo, uintptr_t gil_hi,
                                        uint64_t *word);

/* True when a frame "<qualname> (<file>:<line>)" (the reader's qualified text, `len` bytes) is a
 * place where a thread waits for an EVENT rather than for a contended lock: threading's
 * Condition.wait (so Event.wait, Semaphore.acquire's wait, Queue.get, Barrier.wait) and
 * Thread._wait_for_tstate_lock (join), and concurrent.futures' idle pool worker (SimpleQueue.get).
 * The `mutex` event leaves these out; `block` keeps them, like Go's block profile. */
bool skp__pywait_is_event_wait(const char *frame, size_t len);

#endif
