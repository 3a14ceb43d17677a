/* default_source.h - the stack source skyprof_agent_start uses when its caller passes none. The
 * build links exactly one definition: native/default_source.c (libskyprof: the native source)
 * or no_default_source.c (the Python extension: none). */
#ifndef SKP_AGENT_DEFAULT_SOURCE_H
#define SKP_AGENT_DEFAULT_SOURCE_H

#include "skyprof/skyprof.h"

/* The default source (static storage, borrowed), or NULL when this build has none.
 * Thread-safe. */
const struct skyprof_stack_source *skp__default_stack_source(void);

#endif
