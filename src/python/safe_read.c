/* safe_read.c - fault-free copies of our own memory: process_vm_readv on our own pid, or, for
 * batches spanning several pages, pwritev into a private memfd read back through its mapping.
 * See safe_read.h. */
#include "python/safe_read.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

static _Atomic pid_t g_pid;
static _Atomic uint64_t g_calls;

/* The copy region: a memfd of SKP_PY_SAFE_READ_REGION_BYTES (size sealed), mapped read-only.
 * pwritev(fd, remote iovecs, 0) makes the kernel copy our memory with copy_from_user, which
 * returns a short count at the first fault instead of raising SIGSEGV, like process_vm_readv;
 * but it pins no pages, so its cost hardly grows with the pages a batch touches (process_vm_readv
 * pays about 0.8 us per page on our VM). The bytes are then read from the mapping.
 * The fd is the host's resource too: a host may close it (closerange after fork, daemonizing) and
 * reuse the number for its own file, so every write is preceded by an fstat proving the number
 * still names our memfd (same device and inode); a mismatch switches the region off for good
 * (the fd is no longer ours: never touched again). Created lazily by the first batch worth it; not
 * inherited across fork (MADV_DONTFORK; the child drops the fd and makes its own). One user at a
 * time: a thread that finds it busy uses process_vm_readv. */
static struct {
    pthread_mutex_t mu; /* held across fstat, pwritev and the copy out */
    int fd;             /* -1: none */
    dev_t dev;
    ino_t ino;
    const uint8_t *map; /* SKP_PY_SAFE_READ_REGION_BYTES, PROT_READ, MAP_SHARED */
    bool off;           /* creation failed or the fd was taken from us: never again */
} g_region = {.mu = PTHREAD_MUTEX_INITIALIZER, .fd = -1};

static _Atomic uint64_t g_region_calls;

bool skp__safe_read_init(void)
{
    atomic_store(&g_pid, getpid());
    uint64_t probe_src = 0x5350u;
    uint64_t probe_dst = 0;
    if (!skp__safe_read((uintptr_t)&probe_src, &probe_dst, sizeof(probe_dst)))
        return false;
    return probe_dst == probe_src;
}

void skp__safe_read_after_fork_child(void)
{
    /* Only this thread exists: the mutex may have been held by a thread that is gone. The
     * mapping was not inherited (MADV_DONTFORK); the fd is the parent's memfd, still ours here
     * (no host code ran in the child yet). */
    pthread_mutex_init(&g_region.mu, NULL);
    if (g_region.fd >= 0)
        (void)close(g_region.fd);
    g_region.fd = -1;
    g_region.map = NULL;
    (void)skp__safe_read_init();
}

/* Creates the region (g_region.mu held). False when it cannot be made (then switched off). */
static bool region_open(void)
{
    int fd = memfd_create("skyprof-safe-read", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        goto fail;
    struct stat st;
    void *map = MAP_FAILED;
    if (ftruncate(fd, SKP_PY_SAFE_READ_REGION_BYTES) != 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0 ||
        fstat(fd, &st) != 0)
        goto fail_fd;
    map = mmap(NULL, SKP_PY_SAFE_READ_REGION_BYTES, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        goto fail_fd;
    if (madvise(map, SKP_PY_SAFE_READ_REGION_BYTES, MADV_DONTFORK) != 0) {
        munmap(map, SKP_PY_SAFE_READ_REGION_BYTES);
        goto fail_fd;
    }
    g_region.fd = fd;
    g_region.dev = st.st_dev;
    g_region.ino = st.st_ino;
    g_region.map = map;
    return true;
fail_fd:
    (void)close(fd);
fail:
    g_region.off = true;
    return false;
}

/* Whether g_region.fd still names our memfd (g_region.mu held). */
static bool region_fd_ours(void)
{
    struct stat st;
    return fstat(g_region.fd, &st) == 0 && st.st_dev == g_region.dev && st.st_ino == g_region.ino;
}

/* Switches the region off for good, forgetting the fd without closing it: it may name a file of
 * the host's by now (g_region.mu held). */
static void region_forget(void)
{
    munmap((void *)g_region.map, SKP_PY_SAFE_READ_REGION_BYTES);
    g_region.map = NULL;
    g_region.fd = -1;
    g_region.off = true;
}

/* Copies the pairs through the region. Returns the bytes copied (a prefix of the pairs, in
 * order), or -1 when the region cannot be used now (the caller uses process_vm_readv). */
static ssize_t region_readv(const struct iovec *local, const struct iovec *remote, size_t n)
{
    if (pthread_mutex_trylock(&g_region.mu) != 0)
        return -1;
    ssize_t got = -1;
    if (g_region.off || (g_region.fd < 0 && !region_open()))
        goto out;
    if (!region_fd_ours()) {
        region_forget(); /* closed by the host (and maybe reused): not ours any more */
        goto out;
    }
    atomic_fetch_add_explicit(&g_calls, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&g_region_calls, 1, memory_order_relaxed);
    do {
        /* the raw syscall: a sanitizer's pwritev interceptor would check the bytes we read as if
         * they were a buffer of ours (they are any object's, read past its end at times) */
        got = syscall(SYS_pwritev, g_region.fd, remote, (unsigned long)n, 0UL, 0UL);
    } while (got < 0 && errno == EINTR);
    if (got < 0) {
        if (errno == EFAULT) {
            got = 0; /* the first pair faulted */
        } else {
            region_forget(); /* unexpected: do not insist */
            goto out;
        }
    }
    size_t left = (size_t)got;
    size_t off = 0;
    for (size_t i = 0; i < n && left > 0; i++) {
        size_t k = local[i].iov_len < left ? local[i].iov_len : left;
        memcpy(local[i].iov_base, g_region.map + off, k);
        off += k;
        left -= k;
    }
out:
    pthread_mutex_unlock(&g_region.mu);
    return got;
}

/* Pages the remote side of the pairs spans (a page shared by two pairs counts twice), or
 * SIZE_MAX when their bytes do not fit in the region. */
static size_t batch_pages(const struct iovec *remote, size_t n)
{
    size_t pages = 0;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        uintptr_t a = (uintptr_t)remote[i].iov_base;
        size_t len = remote[i].iov_len;
        if (len == 0)
            continue;
        if (len > SKP_PY_SAFE_READ_REGION_BYTES || a + len < a)
            return SIZE_MAX;
        total += len;
        if (total > SKP_PY_SAFE_READ_REGION_BYTES)
            return SIZE_MAX;
        pages += ((a + len - 1) >> 12) - (a >> 12) + 1;
    }
    return pages;
}

static ssize_t readv_once(const struct iovec *local, const struct iovec *remote, size_t n)
{
    size_t pages = batch_pages(remote, n);
    if (pages != SIZE_MAX && pages >= SKP_PY_SAFE_READ_REGION_MIN_PAGES) {
        ssize_t got = region_readv(local, remote, n);
        if (got >= 0)
            return got;
    }
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
    /* Both paths stop at the first pair that faults and report the bytes copied before it. */
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

uint64_t skp__safe_read_region_calls(void)
{
    return atomic_load_explicit(&g_region_calls, memory_order_relaxed);
}
