/* default_source.c - the default stack source of libskyprof (skyprof_agent_start with a NULL
 * source): the native one. Linked instead of ../no_default_source.c in the builds that carry
 * the native source (skyprof_agent, libskyprof.so). */
#include "agent/default_source.h"

#include "skyprof/skyprof_native.h"

const struct skyprof_stack_source *skp__default_stack_source(void)
{
    return skyprof_native_stack_source();
}

const struct skyprof_proc_source *skp__default_proc_source(const struct skyprof_stack_source *src)
{
    /* A native service gets whole-process profiling through the same signal machinery. */
    if (src && src->capture == skyprof_native_stack_source()->capture)
        return skyprof_native_proc_source();
    return NULL;
}
