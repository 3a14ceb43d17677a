/* remote.c - process_vm_readv with batching and fault recovery. The kernel stops a vectored
 * read at the first remote iovec it cannot read and returns the bytes copied so far; we map that
 * count back to pairs, mark the faulting pair, and resume with the pair after it, so a torn or
 * freed object costs one extra syscall, not the whole batch. */
#include "attach/remote.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void attach_remote_eperm_hint(pid_t pid, char *buf, size_t cap)
{
    if (!buf || !cap)
        return;
    char scope[16] = "unknown";
    int fd = open("/proc/sys/kernel/yama/ptrace_scope", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t k = read(fd, scope, sizeof(scope) - 1);
        close(fd);
        if (k > 0) {
            scope[k] = 0;
            scope[strcspn(scope, "\n")] = 0;
        } else {
            snprintf(scope, sizeof(scope), "unknown");
        }
    } else {
        snprintf(scope, sizeof(scope), "absent");
    }
    snprintf(buf, cap,
             "cannot read the memory of process %d: permission denied (EPERM). Reading another "
             "process needs ptrace access: run as root, or give the tool CAP_SYS_PTRACE "
             "(sudo setcap cap_sys_ptrace+ep $(command -v skyprof)), or run as the target's "
             "user with Yama ptrace_scope 0 (sysctl kernel.yama.ptrace_scope=0; it is %s here). "
             "In a container add the capability: docker run --cap-add SYS_PTRACE "
             "(Kubernetes: securityContext.capabilities.add: [SYS_PTRACE]).",
             (int)pid, scope);
}

skp_err attach_remote_init(struct attach_remote *r, pid_t pid, uintptr_t probe_addr, char *why,
                           size_t why_cap)
{
    memset(r, 0, sizeof(*r));
    r->pid = pid;
    if (why && why_cap)
        why[0] = 0;
    if (pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH)) {
        if (why)
            snprintf(why, why_cap, "no process with pid %d", (int)pid);
        return SKP_ENOTFOUND;
    }
    if (!probe_addr)
        return SKP_OK;
    uint8_t b;
    struct iovec l = {&b, 1};
    struct iovec rm = {(void *)probe_addr, 1};
    ssize_t k = process_vm_readv(pid, &l, 1, &rm, 1, 0);
    r->n_syscalls++;
    if (k == 1)
        return SKP_OK;
    int e = errno;
    if (e == EPERM) {
        attach_remote_eperm_hint(pid, why, why_cap);
        return SKP_EIO;
    }
    if (e == ESRCH) {
        if (why)
            snprintf(why, why_cap, "process %d exited", (int)pid);
        return SKP_ENOTFOUND;
    }
    if (why)
        snprintf(why, why_cap, "cannot read the memory of process %d: %s", (int)pid, strerror(e));
    return SKP_EIO;
}

bool attach_remote_read(struct attach_remote *r, uintptr_t addr, void *dst, size_t n)
{
    if (n == 0)
        return true;
    struct iovec l = {dst, n};
    struct iovec rm = {(void *)addr, n};
    ssize_t k = process_vm_readv(r->pid, &l, 1, &rm, 1, 0);
    r->n_syscalls++;
    if (k > 0)
        r->n_bytes += (uint64_t)k;
    if (k == (ssize_t)n)
        return true;
    r->n_faults++;
    return false;
}

size_t attach_remote_readv(struct attach_remote *r, const struct iovec *local,
                           const struct iovec *remote, size_t n, bool *ok)
{
    size_t done = 0;
    size_t i = 0;
    for (size_t k = 0; k < n; k++)
        ok[k] = false;
    if (n > ATTACH_READV_MAX)
        n = ATTACH_READV_MAX;
    while (i < n) {
        /* the local and remote lists pair up one to one, so both start at i */
        ssize_t got = process_vm_readv(r->pid, local + i, (unsigned long)(n - i), remote + i,
                                       (unsigned long)(n - i), 0);
        r->n_syscalls++;
        size_t left = got > 0 ? (size_t)got : 0;
        r->n_bytes += left;
        while (i < n && left >= remote[i].iov_len) {
            left -= remote[i].iov_len;
            ok[i] = true;
            done++;
            i++;
        }
        if (i >= n)
            break;
        /* pair i faulted (or was partly read): skip it and go on with the rest */
        r->n_faults++;
        i++;
        if (got < 0 && (errno == ESRCH || errno == EPERM))
            break; /* the process is gone or access was revoked: nothing else will read */
    }
    return done;
}
