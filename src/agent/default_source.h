/* default_source.h - the stack source skyprof_agent_start uses when its caller passes none. The
 * build links exactly one definition: native/default_source.c (libskyprof: the native source)
 * or no_default_source.c (the Python extension: none). */
#ifndef SKP_AGENT_DEFAULT_SOURCE_H
#define SKP_AGENT_DEFAULT_SOURCE_H

#include "skyprof/skyprof.h"

/* The default source (static storage, borrowed), or NULL when this build has none.
 * Thread-safe. */
const struct skyprof_stack_source *skp__default_stack_source(void);

/* The process source (PprofTask) that goes with stack source `src` in this build: the native
 * process source for the native stack source, else NULL (static storage, borrowed). */
const struct skyprof_proc_source *skp__default_proc_source(const struct skyprof_stack_source *src);

#endif
