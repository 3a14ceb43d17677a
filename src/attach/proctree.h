/* proctree.h - the descendants of a process (children, grandchildren, ...), for --subprocesses:
 * gunicorn/uWSGI workers and multiprocessing children. Read from /proc/<pid>/stat of every
 * process (the parent pid field), so it needs no CONFIG_PROC_CHILDREN. Single-threaded. */
#ifndef SKP_ATTACH_PROCTREE_H
#define SKP_ATTACH_PROCTREE_H

#include <stddef.h>
#include <sys/types.h>

/* Most processes one scan looks at / descendants it returns. */
#define ATTACH_PROC_SCAN_MAX 65536
#define ATTACH_DESCENDANTS_MAX 1024

/* Writes the pids of root's descendants (not root itself) into out[0..cap) and returns how many
 * were found (at most cap). Thread-safe (no shared state). */
size_t attach_proc_descendants(pid_t root, pid_t *out, size_t cap);

/* Parent pid from a /proc/PID/stat line (len bytes, borrowed), or -1 when malformed. Pure. */
pid_t attach_proc_stat_ppid(const char *stat, size_t len);

#endif
