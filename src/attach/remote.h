/* remote.h - reading another process's memory with process_vm_readv(2): batched (many
 * (local, remote) pairs per syscall), never faulting, counted. The target keeps running, so
 * any read may be torn; callers validate what they read. Permission failures carry a message
 * naming what grants ptrace access (CAP_SYS_PTRACE, Yama ptrace_scope, the container flag).
 * Single-threaded: one reader per handle. */
#ifndef SKP_ATTACH_REMOTE_H
#define SKP_ATTACH_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "skyprof/skp_err.h"

/* Most pairs one batch takes (below the kernel's IOV_MAX of 1024). */
#define ATTACH_READV_MAX 256
/* Longest error message kept. */
#define ATTACH_ERRMSG_MAX 512

struct attach_remote {
    pid_t pid;
    uint64_t n_syscalls; /* process_vm_readv calls made */
    uint64_t n_bytes;    /* bytes read */
    uint64_t n_faults;   /* reads that came back short (unmapped, torn, freed) */
};

/* Sets up `r` for `pid` and probes one read of `probe_addr` (any mapped address of the target,
 * 0 = skip). Errors: SKP_ENOTFOUND (no such process), SKP_EIO (EPERM: `why` then explains how to
 * grant access; other errors: the errno text). `why` (why_cap bytes) may be NULL. */
SKP_MUST_CHECK skp_err attach_remote_init(struct attach_remote *r, pid_t pid, uintptr_t probe_addr,
                                          char *why, size_t why_cap);

/* Copies n bytes at remote `addr` into dst. True only when all n bytes were read. */
bool attach_remote_read(struct attach_remote *r, uintptr_t addr, void *dst, size_t n);

/* Reads n pairs (n <= ATTACH_READV_MAX) in as few syscalls as possible and sets ok[i] for every
 * pair read completely. A pair that faults does not stop the others (the batch resumes after
 * it). Returns the number of pairs read. */
size_t attach_remote_readv(struct attach_remote *r, const struct iovec *local,
                           const struct iovec *remote, size_t n, bool *ok);

/* The explanation printed for EPERM (static text, names CAP_SYS_PTRACE, Yama ptrace_scope and
 * the container flag), with the current ptrace_scope value when readable. */
void attach_remote_eperm_hint(pid_t pid, char *buf, size_t cap);

#endif
