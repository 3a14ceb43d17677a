/* procfs.h - small reads of /proc files: a thread's name (comm) and its state letter, for the
 * agent's thread listings (this process) and the out-of-process reader (another process), and
 * one-read reads of other small /proc files (stat, schedstat). Each read is one open, one read
 * and one close: no allocation, no lock, no stdio; safe on any thread (not in a signal handler:
 * snprintf builds the path). */
#ifndef SKP_COMMON_PROCFS_H
#define SKP_COMMON_PROCFS_H

#include <stddef.h>
#include <sys/types.h>

/* Reads the file at `path` with one read() into buf: at most cap - 1 bytes (cap >= 1), always
 * NUL-terminated ("" when it cannot be read). Returns the bytes read, or -1 when the file cannot
 * be opened or read. */
ssize_t skpx_procfs_read(const char *path, char *buf, size_t cap);

/* skpx_procfs_read of /proc/<pid>/task/<tid>/<what>; pid 0 reads this process's (/proc/self). */
ssize_t skpx_procfs_read_task(pid_t pid, pid_t tid, const char *what, char *buf, size_t cap);

/* The name of thread `tid` of process `pid` (0: this process), from its comm file without the
 * newline, cut to cap - 1 bytes; "" when it cannot be read. */
void skpx_procfs_task_comm(pid_t pid, pid_t tid, char *out, size_t cap);

/* The state letter of a NUL-terminated stat line "pid (comm) S ..." (comm may hold blanks and
 * ')': the last ')' ends it): 'R' running or runnable, 'S' sleeping, ...; '?' when it has none. */
char skpx_procfs_stat_state(const char *stat);

#endif
