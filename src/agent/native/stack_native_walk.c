/* stack_native_walk.c - frame-pointer walk, loader text range, handler-frame skipping.
 * Everything but skp__native_loader_text is pure and async-signal-safe (see the header). */
#include "agent/native/stack_native_walk.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <sys/auxv.h>
#include <unistd.h>

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

#if defined(__GLIBC__)
/* Recursive mutexes found owned by the calling thread inside the callback. */
#define LOADER_LOCK_CANDIDATES 4

struct lock_probe {
    const unsigned char *base;
    size_t size;
    pid_t tid;
    const pthread_mutex_t *found[LOADER_LOCK_CANDIDATES];
    int n_found;
};

/* Reads ld.so's own data (no ASan shadow there, but the scan strides through the whole object). */
SKP_NO_ASAN static void scan_owned_mutexes(struct lock_probe *p)
{
    const size_t step = _Alignof(pthread_mutex_t);
    for (size_t off = 0; off + sizeof(pthread_mutex_t) <= p->size; off += step) {
        const pthread_mutex_t *m = (const pthread_mutex_t *)(const void *)(p->base + off);
        if (m->__data.__owner == p->tid && m->__data.__lock != 0 && m->__data.__count >= 1 &&
            (m->__data.__kind & 3) == PTHREAD_MUTEX_RECURSIVE_NP) {
            if (p->n_found < LOADER_LOCK_CANDIDATES)
                p->found[p->n_found] = m;
            p->n_found++;
        }
    }
}

static int lock_probe_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)info;
    (void)size;
    scan_owned_mutexes(arg);
    return 1;
}

SKP_NO_ASAN static bool still_owned(const pthread_mutex_t *m, pid_t tid)
{
    return m->__data.__owner == tid;
}

void skp__native_loader_lock(const int **out)
{
    struct lock_probe p = {.tid = gettid()};
    Dl_info info;
    const ElfW(Sym) *sym = NULL;

    *out = NULL;
    void *g = dlsym(RTLD_DEFAULT, "_rtld_global");
    if (!g || !dladdr1(g, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym || sym->st_size == 0)
        return;
    p.base = g;
    p.size = sym->st_size;
    dl_iterate_phdr(lock_probe_cb, &p);
    /* Exactly one, and released again once the callback returned: that is the lock. */
    if (p.n_found != 1 || still_owned(p.found[0], p.tid))
        return;
    *out = &p.found[0]->__data.__lock;
}
#else
void skp__native_loader_lock(const int **out)
{
    *out = NULL;
}
#endif
