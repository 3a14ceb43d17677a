/* no_default_source.c - the default stack source of builds without the native one (the Python
 * extension, which always passes its own source): none. Linked instead of
 * native/default_source.c; CMake and python/setup.py choose the file. */
#include "agent/default_source.h"

const struct skyprof_stack_source *skp__default_stack_source(void)
{
    return NULL;
}

const struct skyprof_proc_source *skp__default_proc_source(const struct skyprof_stack_source *src)
{
    (void)src;
    return NULL;
}
