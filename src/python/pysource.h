/* pysource.h - the Python stack source plugged into libskyprof (struct skyprof_stack_source).
 * thread_attach runs on the request thread inside skyprof_entry_begin (GIL held) and records the
 * thread's PyThreadState; capture runs on the agent's sampler thread without the GIL (direct
 * mode) and reads that thread's frames; thread_release frees the handle (any thread, no GIL). */
#ifndef SKP_PYTHON_PYSOURCE_H
#define SKP_PYTHON_PYSOURCE_H

#include <stdbool.h>

#include "skyprof/skyprof.h"

/* Fills *src with a new Python source (its ud owns a reader; src->destroy frees it). GIL held.
 * `force_portable` selects the GIL-taking reader. Errors: SKP_ENOMEM. */
SKP_MUST_CHECK skp_err skp__pysource_init(struct skyprof_stack_source *src, bool force_portable);

/* True when the source's reader samples without the GIL. */
bool skp__pysource_is_direct(const struct skyprof_stack_source *src);

#endif
