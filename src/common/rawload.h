/* rawmem.h - reading fields out of bytes copied from a target process: unaligned loads at an
 * offset, and the cheap "could this be a heap/data pointer" check every pointer taken from the
 * target passes before it is followed. Shared by the attach readers (pyreader.c, pydict.c,
 * pytasks.c). */
#ifndef SKP_ATTACH_RAWMEM_H
#define SKP_ATTACH_RAWMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uintptr_t attach_load_ptr(const uint8_t *base, size_t off)
{
    uintptr_t v;
    memcpy(&v, base + off, sizeof(v));
    return v;
}

static inline int attach_load_int(const uint8_t *base, size_t off)
{
    int v;
    memcpy(&v, base + off, sizeof(v));
    return v;
}

static inline int64_t attach_load_i64(const uint8_t *base, size_t off)
{
    int64_t v;
    memcpy(&v, base + off, sizeof(v));
    return v;
}

/* Non-null past the first page, inside the user half of a 47-bit address space, 8-aligned (every
 * object CPython allocates is). */
static inline bool attach_plausible(uintptr_t p)
{
    return p >= 4096 && p < ((uintptr_t)1 << 47) && (p & 7) == 0;
}

#endif
