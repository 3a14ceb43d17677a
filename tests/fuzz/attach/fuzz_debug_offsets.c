/* Fuzz target: building a layout from a _Py_DebugOffsets table copied out of a target
 * (src/attach/pydebug_offsets.c), then checking that every offset it produced is bounded. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attach/pylayout.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct attach_pylayout l;
    char why[256];
    if (attach_pylayout_from_debug_offsets(data, size, &l, why, sizeof(why)) != SKP_OK)
        return 0;
    /* an accepted table never yields an offset past the bound the reader relies on */
    if (l.rt_interp_head > ATTACH_DEBUG_OFFSET_MAX || l.ts_copy > ATTACH_DEBUG_OFFSET_MAX + 8 ||
        l.fr_copy > ATTACH_DEBUG_OFFSET_MAX + 8 || l.co_copy > ATTACH_DEBUG_OFFSET_MAX + 8 ||
        l.free_threaded || strnlen(why, sizeof(why)) == sizeof(why))
        abort();
    return 0;
}
