/* stack_native_walk.c - frame-pointer walk, loader text range, handler-frame skipping.
 * Everything but skp__native_loader_text is pure and async-signal-safe (see the header). */
#include "agent/stack_native_walk.h"

#include <elf.h>
#include <link.h>
#include <sys/auxv.h>

/* The walk reads raw stack words of another frame; under ASan those words may sit next to
 * poisoned redzones of instrumented frames, which would be reported although the read is
 * deliberate and bounded. */
#if defined(__SANITIZE_ADDRESS__)
#define SKP_NO_ASAN __attribute__((no_sanitize_address))
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SKP_NO_ASAN __attribute__((no_sanitize_address))
#endif
#endif
#ifndef SKP_NO_ASAN
#define SKP_NO_ASAN
#endif

/* Smallest plausible code address: the first page is never mapped. */
#define SKP_MIN_CODE_ADDR 4096u

SKP_NO_ASAN size_t skp__native_fp_walk(uintptr_t pc, uintptr_t fp, uintptr_t stack_lo,
                                       uintptr_t stack_hi, uintptr_t *pcs, size_t cap)
{
    size_t n = 0;
    const uintptr_t record = 2 * sizeof(uintptr_t); /* saved fp, return address */

    if (cap == 0)
        return 0;
    pcs[n++] = pc;
    while (n < cap) {
        if (stack_hi < record || fp < stack_lo || fp > stack_hi - record)
            break;
        if (fp & (sizeof(uintptr_t) - 1))
            break;
        const volatile uintptr_t *frame = (const volatile uintptr_t *)fp;
        uintptr_t next = frame[0];
        uintptr_t ra = frame[1];
        if (ra < SKP_MIN_CODE_ADDR)
            break;
        pcs[n++] = ra;
        if (next <= fp)
            break;
        fp = next;
    }
    return n;
}

struct loader_search {
    uintptr_t base;
    struct skp__addr_range found;
};

static int find_loader_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct loader_search *s = arg;

    (void)size;
    if ((uintptr_t)info->dlpi_addr != s->base)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uintptr_t lo = (uintptr_t)info->dlpi_addr + ph->p_vaddr;
        uintptr_t hi = lo + ph->p_memsz;
        /* ld.so has one executable segment; if a future one has more, cover them all. */
        if (s->found.lo == 0 || lo < s->found.lo)
            s->found.lo = lo;
        if (hi > s->found.hi)
            s->found.hi = hi;
    }
    return 1;
}

void skp__native_loader_text(struct skp__addr_range *out)
{
    struct loader_search s = {.base = (uintptr_t)getauxval(AT_BASE)};

    out->lo = out->hi = 0;
    if (s.base == 0)
        return;
    dl_iterate_phdr(find_loader_cb, &s);
    *out = s.found;
}

size_t skp__native_skip_count(const uintptr_t *pcs, size_t n, uintptr_t interrupted_pc,
                              size_t max_skip, size_t fallback_skip)
{
    size_t lim = n < max_skip ? n : max_skip;
    for (size_t i = 0; i < lim; i++) {
        if (pcs[i] == interrupted_pc)
            return i;
    }
    return fallback_skip < n ? fallback_skip : n;
}
