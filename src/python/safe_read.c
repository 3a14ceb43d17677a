/* safe_read.c - process_vm_readv on our own pid. See safe_read.h. */
#include "python/safe_read.h"

#include <errno.h>
#include <stdatomic.h>
#include <sys/types.h>
#include <unistd.h>

static _Atomic pid_t g_pid;
static _Atomic uint64_t g_calls;

bool skp__safe_read_init(void)
{
    atomic_store(&g_pid, getpid());
    uint64_t probe_src = 0x5350u;
    uint64_t probe_dst = 0;
    if (!skp__safe_read((uintptr_t)&probe_src, &probe_dst, sizeof(probe_dst)))
        return false;
    return probe_dst == probe_src;
}

static ssize_t readv_once(const struct iovec *local, const struct iovec *remote, size_t n)
{
    atomic_fetch_add_explicit(&g_calls, 1, memory_order_relaxed);
    ssize_t got;
    do {
        got = process_vm_readv(atomic_load_explicit(&g_pid, memory_order_relaxed), local,
                               (unsigned long)n, remote, (unsigned long)n, 0);
    } while (got < 0 && errno == EINTR);
    return got;
}

bool skp__safe_read(uintptr_t addr, void *dst, size_t n)
{
    if (n == 0)
        return true;
    if (addr == 0 || addr + n < addr)
        return false;
    struct iovec l = {.iov_base = dst, .iov_len = n};
    struct iovec r = {.iov_base = (void *)addr, .iov_len = n};
    int saved_errno = errno;
    ssize_t got = readv_once(&l, &r, 1);
    errno = saved_errno;
    return got == (ssize_t)n;
}

size_t skp__safe_readv(const struct iovec *local, const struct iovec *remote, size_t n)
{
    if (n > SKP_PY_SAFE_READ_IOV_MAX)
        n = SKP_PY_SAFE_READ_IOV_MAX;
    if (n == 0)
        return 0;
    int saved_errno = errno;
    ssize_t got = readv_once(local, remote, n);
    errno = saved_errno;
    /* The kernel stops at the first pair that faults and reports the bytes copied before it. */
    size_t left = got > 0 ? (size_t)got : 0;
    size_t full = 0;
    while (full < n && left >= remote[full].iov_len) {
        left -= remote[full].iov_len;
        full++;
    }
    return full;
}

uint64_t skp__safe_read_calls(void)
{
    return atomic_load_explicit(&g_calls, memory_order_relaxed);
}
