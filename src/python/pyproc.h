/* pyproc.h - the Python process source for PprofTask (whole-process cpu, wall, thread dumps,
 * heap/allocs from tracemalloc). See pyproc.c. */
#ifndef SKP_PYTHON_PYPROC_H
#define SKP_PYTHON_PYPROC_H

#include <stdbool.h>

#include "skyprof/skyprof.h"

/* Threads of the interpreter a task samples at most (the core's SKP_PROC_THREADS_MAX). */
#define SKP_PYPROC_THREADS_MAX 256

/* Fills *src with a new Python process source (its ud is owned: src->destroy frees it). No GIL
 * needed. `force_portable` selects the GIL-taking reader. Errors: SKP_ENOMEM. */
SKP_MUST_CHECK skp_err skp__pyproc_init(struct skyprof_proc_source *src, bool force_portable);

#endif
