/* pylayout.c - chooses the layout table matching the running interpreter. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "python/pylayout.h"

const struct skp__pylayout *skp__pylayout_select(void)
{
    /* Py_Version is the runtime's version; PY_VERSION_HEX the headers we were built with. A
     * module built for one minor version is never loaded by another (ABI tag), but the check
     * costs nothing and keeps a mismatched layout from ever being used. */
    unsigned long rt = Py_Version;
    unsigned major = (unsigned)((rt >> 24) & 0xff);
    unsigned minor = (unsigned)((rt >> 16) & 0xff);
    const struct skp__pylayout *candidates[] = {skp__pylayout_py311()};
    for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
        const struct skp__pylayout *l = candidates[i];
        if (l && l->major == major && l->minor == minor)
            return l;
    }
    return NULL;
}
