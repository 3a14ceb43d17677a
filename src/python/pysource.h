/* pysource.h - the Python stack source plugged into libskyprof (struct skyprof_stack_source).
 * thread_attach runs on the request thread inside skyprof_entry_begin (GIL held) and records the
 * thread's PyThreadState; capture runs on the agent's sampler thread without the GIL (direct
 * mode) and reads that thread's frames; thread_release frees the handle (any thread, no GIL). */
#ifndef SKP_PYTHON_PYSOURCE_H
#define SKP_PYTHON_PYSOURCE_H

#include <stdbool.h>
#include <stdint.h>

#include "skyprof/skyprof.h"

/* Fills *src with a new Python source (its ud owns a reader; src->destroy frees it). GIL held.
 * `force_portable` selects the GIL-taking reader. Errors: SKP_ENOMEM. */
SKP_MUST_CHECK skp_err skp__pysource_init(struct skyprof_stack_source *src, bool force_portable);

/* asyncio requests (see skp__pyreader_capture_task). The binding sets the coroutine of the
 * request's task (an address, 0 = none) before skyprof_entry_begin on this thread; a handle that
 * begin attached for it is then taken with skp__pysource_take_attached (a new reference, or NULL
 * when the request is not sampled), kept with the request and dropped with skp__pyhandle_unref
 * (any thread). GIL held for set and take. */
struct skp__pyhandle;
void skp__pysource_set_pending_coro(uintptr_t coro);
struct skp__pyhandle *skp__pysource_take_attached(void);
void skp__pyhandle_unref(struct skp__pyhandle *h);
/* On a worker thread (GIL held) running work the request handed over: while between begin and
 * end, the request's samples show this thread's stack on top of its await chain. NULL ok. */
void skp__pyhandle_delegate_begin(struct skp__pyhandle *h);
void skp__pyhandle_delegate_end(struct skp__pyhandle *h);

/* True when the source's reader samples without the GIL. */
bool skp__pysource_is_direct(const struct skyprof_stack_source *src);

#endif
