/* Fuzz target: /proc/PID/maps parsing and the CPython image-name check (src/attach/procmaps.c). */
#include <stdint.h>
#include <string.h>

#include "attach/procmaps.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct attach_maps m;
    if (attach_maps_parse((const char *)data, size, &m) != SKP_OK)
        return 0;
    for (size_t i = 0; i < m.n; i++) {
        unsigned minor;
        (void)attach_maps_python_kind(m.maps[i].path, &minor);
        (void)attach_maps_readable(&m, m.maps[i].start, 8);
    }
    attach_maps_cleanup(&m);
    return 0;
}
