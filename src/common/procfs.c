/* procfs.c - small reads of /proc files (see procfs.h). */
#include "common/procfs.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

ssize_t skpx_procfs_read(const char *path, char *buf, size_t cap)
{
    buf[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return n;
}

ssize_t skpx_procfs_read_task(pid_t pid, pid_t tid, const char *what, char *buf, size_t cap)
{
    char path[96];
    if (pid)
        snprintf(path, sizeof(path), "/proc/%d/task/%d/%s", (int)pid, (int)tid, what);
    else
        snprintf(path, sizeof(path), "/proc/self/task/%d/%s", (int)tid, what);
    return skpx_procfs_read(path, buf, cap);
}

void skpx_procfs_task_comm(pid_t pid, pid_t tid, char *out, size_t cap)
{
    (void)skpx_procfs_read_task(pid, tid, "comm", out, cap);
    out[strcspn(out, "\n")] = '\0';
}

char skpx_procfs_stat_state(const char *stat)
{
    const char *rp = strrchr(stat, ')');
    return rp && rp[1] == ' ' && rp[2] ? rp[2] : '?';
}
