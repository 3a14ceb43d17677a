/* safe_read.h - copies of this process's own memory that cannot fault.
 * The Python stack source reads frames of threads that keep running (no GIL): any pointer may be
 * stale, its memory freed or unmapped. Every dereference of such memory goes through the kernel,
 * which returns EFAULT instead of raising SIGSEGV: process_vm_readv(2) on our own pid, or, for a
 * batch spanning SKP_PY_SAFE_READ_REGION_MIN_PAGES pages or more, pwritev(2) into a private
 * memfd read back through its mapping (process_vm_readv pins every page it reads: about 0.8 us
 * a page on our VM; the memfd path costs two syscalls whatever the pages). Syscalls cost about
 * 0.5-2.5 us on the VMs we measured, so callers batch reads into one call.
 * Thread-safe; never allocates memory (the memfd, one fd and its 256 KiB mapping, is created once
 * per process by the first batch that uses it; see safe_read.c for how the fd is guarded). */
#ifndef SKP_PYTHON_SAFE_READ_H
#define SKP_PYTHON_SAFE_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Most iovecs one batch call takes (below the kernel's IOV_MAX of 1024). */
#define SKP_PY_SAFE_READ_IOV_MAX 256
/* The memfd copy region: size (a batch of more bytes uses process_vm_readv), and the pages a
 * batch must span to use it (below, process_vm_readv's one syscall is cheaper). */
#define SKP_PY_SAFE_READ_REGION_BYTES (256 * 1024)
#define SKP_PY_SAFE_READ_REGION_MIN_PAGES 3

/* Caches the pid and probes that process_vm_readv works on ourselves (a seccomp profile may deny
 * it). Returns false when it does not; callers then use the portable GIL-holding path. Call again
 * after fork (the pid changed). Thread-safe. */
bool skp__safe_read_init(void);

/* Copies n bytes at `addr` into dst. Returns true only when all n bytes were read. */
bool skp__safe_read(uintptr_t addr, void *dst, size_t n);

/* Reads `n` (local, remote) iovec pairs in as few syscalls as possible. Returns the number of
 * leading pairs that were read completely; a pair that faulted and every pair after it in the same
 * call are not filled (the kernel stops at the first fault). n <= SKP_PY_SAFE_READ_IOV_MAX. */
size_t skp__safe_readv(const struct iovec *local, const struct iovec *remote, size_t n);

/* Child side of fork(), before anything samples: drops the parent's memfd (a new one is made on
 * first use) and takes the child's pid (as skp__safe_read_init). */
void skp__safe_read_after_fork_child(void);

/* Number of copying syscalls made so far by this module, process_vm_readv or pwritev (for
 * benchmarks and tests; the fstat guarding each pwritev is not counted). */
uint64_t skp__safe_read_calls(void);
/* How many of them went through the memfd region. */
uint64_t skp__safe_read_region_calls(void);

#endif
