/* rawload.h - reading fields out of bytes copied from another thread's or process's memory:
 * unaligned loads at an offset, and the cheap "could this be a heap/data pointer" check every
 * pointer taken from such bytes passes before it is followed. Shared by the out-of-process
 * readers (src/attach: pyreader.c, pydict.c, pytasks.c) and the in-process stack reader
 * (src/python: pystack.c, pyasync_rule.c). The caller sizes its copy to cover base + off plus
 * the loaded type; header-only, pure. */
#ifndef SKP_COMMON_RAWLOAD_H
#define SKP_COMMON_RAWLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uintptr_t skpx_load_ptr(const uint8_t *base, size_t off)
{
    uintptr_t v;
    memcpy(&v, base + off, sizeof(v));
    return v;
}

static inline int skpx_load_int(const uint8_t *base, size_t off)
{
    int v;
    memcpy(&v, base + off, sizeof(v));
    return v;
}

static inline int64_t skpx_load_i64(const uint8_t *base, size_t off)
{
    int64_t v;
    memcpy(&v, base + off, sizeof(v));
    return v;
}

static inline unsigned long skpx_load_ulong(const uint8_t *base, size_t off)
{
    unsigned long v;
    memcpy(&v, base + off, sizeof(v));
    return v;
}

/* Whether p could point at an object worth reading: non-null past the first page, inside the
 * user half of a 47-bit address space, pointer-aligned (every object CPython allocates is).
 * Filters garbage before a read is spent on it. */
static inline bool skpx_plausible_ptr(uintptr_t p)
{
    return p >= 4096 && p < ((uintptr_t)1 << 47) && (p & (sizeof(void *) - 1)) == 0;
}

#endif
