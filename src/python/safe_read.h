/* safe_read.h - copies of this process's own memory that cannot fault.
 * The Python stack source reads frames of threads that keep running (no GIL): any pointer may be
 * stale, its memory freed or unmapped. Every dereference of such memory goes through the kernel,
 * which returns EFAULT instead of raising SIGSEGV.
 * The copy is process_vm_writev(2) on our own pid, with the memory to read as the "local" side
 * and our destination buffer as the "remote" side: the kernel reads the sources with
 * copy_from_user (a fault stops the copy) and pins only the destination's pages, once per
 * destination iovec (about 0.5 us each on our VM). So a batch is written into ONE contiguous
 * destination: the callers' buffers when they are adjacent, else a bounce buffer the bytes are
 * copied out of. (process_vm_readv, the obvious call, pins every SOURCE page instead: 0.6 us per
 * scattered object read.) Where process_vm_writev is refused (a seccomp profile) and
 * process_vm_readv is not, that is used.
 * Thread-safe; never allocates memory, holds no fd. */
#ifndef SKP_PYTHON_SAFE_READ_H
#define SKP_PYTHON_SAFE_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Most iovecs one batch call takes (below the kernel's IOV_MAX of 1024). */
#define SKP_PY_SAFE_READ_IOV_MAX 256
/* The bounce buffer for batches whose destinations are not adjacent: its size (a larger batch
 * is written into the callers' buffers one destination iovec each). One user at a time; another
 * thread meanwhile does the same as for a larger batch. */
#define SKP_PY_SAFE_READ_BOUNCE_BYTES (128 * 1024)

/* Caches the pid and probes which call works on ourselves (a seccomp profile may deny them).
 * Returns false when none does; callers then use the portable GIL-holding path. Call again after
 * fork (the pid changed). Thread-safe. */
bool skp__safe_read_init(void);

/* Copies n bytes at `addr` into dst. Returns true only when all n bytes were read. */
bool skp__safe_read(uintptr_t addr, void *dst, size_t n);

/* Reads `n` (local, remote) iovec pairs, remote = the memory to read, local = where it goes, in
 * one syscall. Returns the number of leading pairs that were read completely; a pair that faulted
 * and every pair after it are not filled (the kernel stops at the first fault).
 * n <= SKP_PY_SAFE_READ_IOV_MAX. Fastest when the local buffers are adjacent, in order. */
size_t skp__safe_readv(const struct iovec *local, const struct iovec *remote, size_t n);

/* Child side of fork(), before anything samples: takes the child's pid and frees the bounce
 * buffer's lock (its holder may have been a thread that is gone). */
void skp__safe_read_after_fork_child(void);

/* Re-takes the pid when it changed (getpid: one syscall). For callers on host threads, which may
 * run in a child made without fork()'s handlers: with a stale pid a batch would write into the
 * parent's memory. */
void skp__safe_read_check_pid(void);

/* Number of copying syscalls made so far by this module (for benchmarks and tests). */
uint64_t skp__safe_read_calls(void);
/* How many of them wrote into the bounce buffer. */
uint64_t skp__safe_read_bounce_calls(void);

#endif
