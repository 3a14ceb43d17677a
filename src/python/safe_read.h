/* safe_read.h - copies of this process's own memory that cannot fault.
 * The Python stack source reads frames of threads that keep running (no GIL): any pointer may be
 * stale, its memory freed or unmapped. Every dereference of such memory goes through
 * process_vm_readv(2) on our own pid, which returns EFAULT instead of raising SIGSEGV.
 * Syscalls cost about 1-2.5 us on the VMs we measured, so callers batch reads into one call.
 * Thread-safe, never allocates. */
#ifndef SKP_PYTHON_SAFE_READ_H
#define SKP_PYTHON_SAFE_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Most iovecs one batch call takes (below the kernel's IOV_MAX of 1024). */
#define SKP_PY_SAFE_READ_IOV_MAX 256

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

/* Number of syscalls made so far by this module (for benchmarks and tests). */
uint64_t skp__safe_read_calls(void);

#endif
