/* safe_read.c - fault-free copies of our own memory: process_vm_writev on our own pid into one
 * contiguous destination (process_vm_readv where that is refused). See safe_read.h. */
#include "python/safe_read.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

enum copy_mode {
    MODE_NONE = 0,
    MODE_WRITEV = 1, /* process_vm_writev: pins the destination only */
    MODE_READV = 2,  /* process_vm_readv: pins every source page */
};

static _Atomic pid_t g_pid;
static _Atomic int g_mode = MODE_WRITEV; /* until the probe says otherwise */
static _Atomic uint64_t g_calls;
static _Atomic uint64_t g_bounce_calls;

/* The destination of batches whose buffers are not adjacent (see safe_read.h). Page-aligned: the
 * kernel pins the pages the batch's bytes land on, from the first. */
static struct {
    pthread_mutex_t mu; /* held from the syscall to the end of the copy out */
    _Alignas(4096) uint8_t buf[SKP_PY_SAFE_READ_BOUNCE_BYTES];
} g_bounce = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* process_vm_readv / process_vm_writev (nr) on our own pid, as raw syscalls: a sanitizer's
 * interceptor would check the bytes we read as if they were a buffer of ours (they are any
 * object's, read past its end at times). Both take the calling side's iovecs first. */
static ssize_t vm_self(long nr, const struct iovec *mine, size_t n_mine, const struct iovec *other,
                       size_t n_other)
{
    atomic_fetch_add_explicit(&g_calls, 1, memory_order_relaxed);
    ssize_t got;
    do {
        got = syscall(nr, atomic_load_explicit(&g_pid, memory_order_relaxed), mine,
                      (unsigned long)n_mine, other, (unsigned long)n_other, 0UL);
    } while (got < 0 && errno == EINTR);
    return got;
}

/* Copies the memory of `src` (the memory to read) into `dst` (ours): only dst's pages pinned. */
static ssize_t writev_self(const struct iovec *src, size_t n_src, const struct iovec *dst,
                           size_t n_dst)
{
    return vm_self(SYS_process_vm_writev, src, n_src, dst, n_dst);
}

/* Copies `remote` (the memory to read) into `local`: every source page pinned. */
static ssize_t readv_self(const struct iovec *local, const struct iovec *remote, size_t n)
{
    return vm_self(SYS_process_vm_readv, local, n, remote, n);
}

bool skp__safe_read_init(void)
{
    atomic_store(&g_pid, getpid());
    /* Probed with the calls themselves: the mode in use changes only once the probe is done. */
    uint64_t src = 0x5350u;
    uint64_t dst = 0;
    struct iovec s = {.iov_base = &src, .iov_len = sizeof(src)};
    struct iovec d = {.iov_base = &dst, .iov_len = sizeof(dst)};
    int saved_errno = errno;
    int mode = MODE_NONE;
    if (writev_self(&s, 1, &d, 1) == (ssize_t)sizeof(dst) && dst == src)
        mode = MODE_WRITEV;
    else if (readv_self(&d, &s, 1) == (ssize_t)sizeof(dst) && dst == src)
        mode = MODE_READV;
    errno = saved_errno;
    atomic_store(&g_mode, mode);
    return mode != MODE_NONE;
}

void skp__safe_read_after_fork_child(void)
{
    /* Only this thread exists: the mutex may have been held by a thread that is gone. */
    pthread_mutex_init(&g_bounce.mu, NULL);
    (void)skp__safe_read_init();
}

void skp__safe_read_check_pid(void)
{
    if (getpid() != atomic_load(&g_pid))
        (void)skp__safe_read_init();
}

/* Copies the pairs through the bounce buffer. Returns the bytes copied (a prefix of the pairs, in
 * order), or -2 when the buffer is busy. */
static ssize_t bounce_readv(const struct iovec *local, const struct iovec *remote, size_t n,
                            size_t total)
{
    if (pthread_mutex_trylock(&g_bounce.mu) != 0)
        return -2;
    atomic_fetch_add_explicit(&g_bounce_calls, 1, memory_order_relaxed);
    struct iovec dst = {.iov_base = g_bounce.buf, .iov_len = total};
    ssize_t got = writev_self(remote, n, &dst, 1);
    size_t left = got > 0 ? (size_t)got : 0;
    size_t off = 0;
    for (size_t i = 0; i < n && left > 0; i++) {
        size_t k = local[i].iov_len < left ? local[i].iov_len : left;
        memcpy(local[i].iov_base, g_bounce.buf + off, k);
        off += k;
        left -= k;
    }
    pthread_mutex_unlock(&g_bounce.mu);
    return got;
}

/* One process_vm_writev batch into as few destination iovecs as possible. */
static ssize_t writev_batch(const struct iovec *local, const struct iovec *remote, size_t n)
{
    size_t total = 0;
    bool adjacent = true;
    for (size_t i = 0; i < n; i++) {
        if (total + local[i].iov_len < total) {
            errno = EINVAL;
            return -1;
        }
        total += local[i].iov_len;
        if (i > 0 && (const uint8_t *)local[i - 1].iov_base + local[i - 1].iov_len !=
                         (const uint8_t *)local[i].iov_base)
            adjacent = false;
    }
    if (adjacent) {
        struct iovec dst = {.iov_base = local[0].iov_base, .iov_len = total};
        return writev_self(remote, n, &dst, 1);
    }
    if (total <= SKP_PY_SAFE_READ_BOUNCE_BYTES) {
        ssize_t got = bounce_readv(local, remote, n, total);
        if (got != -2)
            return got;
    }
    return writev_self(remote, n, local, n); /* one pinned destination per pair */
}

/* A seccomp filter installed after our probe may refuse process_vm_writev (EPERM, or ENOSYS as
 * some filters answer): the batch is retried with process_vm_readv, and when that works it is
 * used from then on. */
static ssize_t readv_once(const struct iovec *local, const struct iovec *remote, size_t n)
{
    int mode = atomic_load_explicit(&g_mode, memory_order_relaxed);
    if (mode == MODE_READV)
        return readv_self(local, remote, n);
    if (mode != MODE_WRITEV) {
        errno = ENOSYS;
        return -1;
    }
    ssize_t got = writev_batch(local, remote, n);
    if (got >= 0 || (errno != EPERM && errno != ENOSYS))
        return got;
    got = readv_self(local, remote, n);
    if (got >= 0 || errno == EFAULT)
        atomic_store(&g_mode, MODE_READV);
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
    /* Every path stops at the first pair that faults and reports the bytes copied before it. */
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

uint64_t skp__safe_read_bounce_calls(void)
{
    return atomic_load_explicit(&g_bounce_calls, memory_order_relaxed);
}
