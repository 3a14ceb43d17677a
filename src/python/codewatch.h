/* codewatch.h - knowing, without reading it, that a cached code object is still the same live
 * object. The stack reader re-reads a code object's header on every sample only to detect that
 * the code died and another one took its address; each such read is one more remote page in the
 * sample's process_vm_readv (about 0.2 us on our VM). A watch replaces it:
 *   - the reader asks for a watch when it caches a code object (any thread, no GIL);
 *   - a pending call on the main thread (GIL) arms it, only for a code object it finds on a live
 *     frame (so it is alive), by storing a token in the code's co_extra slot whose free function
 *     CPython calls when the code object is deallocated;
 *   - that free function bumps the watch's generation, so a code that died is never "armed".
 * An armed watch (same address, same generation) proves the code object seen in a frame copy is
 * the object the cache entry was built from. Lock-free for readers; watch requests and arming
 * take one mutex (never held while calling into Python). */
#ifndef SKP_PYTHON_CODEWATCH_H
#define SKP_PYTHON_CODEWATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "python/pylayout.h"

/* Watches in the process (each costs 8 bytes; a service's hot code is a few hundred objects). */
#define SKP_PY_WATCH_SLOTS 4096
/* Arming requests queued between two pending calls. */
#define SKP_PY_WATCH_QUEUE 256

/* Enables watching for the main interpreter (GIL held, main interpreter only; idempotent).
 * Returns false when watching is unavailable (then readers simply keep validating). */
bool skp__codewatch_init(const struct skp__pylayout *l);

/* True when watch (slot, gen) is armed for `code`: the code object at that address is alive and
 * is the one the watch was requested for. Any thread, lock-free, async-signal-safe. */
bool skp__codewatch_armed(int slot, uint16_t gen, uintptr_t code);

/* Requests a watch for the code object q->code (just validated by a safe read; q holds the
 * fields it had, re-checked when arming). Sets *slot
 * (-1 when no slot is free or watching is off) and *gen; the watch is armed later by the main
 * thread if the code is still on a live frame then. Any thread, no GIL; takes the watch mutex. */
void skp__codewatch_request(const struct skp__pylive_query *q, int *slot, uint16_t *gen);

/* Child side of fork(): resets the mutex and the queue (the parent's threads are gone). */
void skp__codewatch_after_fork_child(void);

#endif
