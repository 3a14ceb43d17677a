/* proctree.c - descendant discovery by one pass over /proc: collect (pid, ppid) pairs, then
 * close the set under "parent is in the set", which handles any depth in a few passes. */
#include "attach/proctree.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/grow.h"
#include "common/procfs.h"

pid_t attach_proc_stat_ppid(const char *stat, size_t len)
{
    /* "pid (comm) S ppid ...": comm may contain ')' and spaces; the last ')' ends it */
    const char *rp = NULL;
    for (size_t i = 0; i < len; i++)
        if (stat[i] == ')')
            rp = stat + i;
    if (!rp)
        return -1;
    const char *p = rp + 1;
    const char *end = stat + len;
    if (end - p < 4 || p[0] != ' ' || p[2] != ' ')
        return -1;
    p += 3;
    long v = 0;
    int digits = 0;
    while (p < end && *p >= '0' && *p <= '9' && digits < 10) {
        v = v * 10 + (*p - '0');
        p++;
        digits++;
    }
    if (!digits)
        return -1;
    return (pid_t)v;
}

struct pair {
    pid_t pid, ppid;
};

size_t attach_proc_descendants(pid_t root, pid_t *out, size_t cap)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    size_t pcap = 1024;
    size_t n = 0;
    struct pair *pairs = skpx_malloc(pcap * sizeof(*pairs));
    struct dirent *de;
    while (pairs && (de = readdir(d)) != NULL && n < ATTACH_PROC_SCAN_MAX) {
        if (de->d_name[0] < '1' || de->d_name[0] > '9')
            continue;
        char path[64];
        char buf[512];
        long pid = strtol(de->d_name, NULL, 10);
        snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
        ssize_t k = skpx_procfs_read(path, buf, sizeof(buf));
        if (k <= 0)
            continue;
        pid_t ppid = attach_proc_stat_ppid(buf, (size_t)k);
        if (ppid < 0)
            continue;
        if (skpx_grow(&pairs, &pcap, n + 1, sizeof(*pairs), 0) != SKP_OK)
            break;
        pairs[n].pid = (pid_t)pid;
        pairs[n].ppid = ppid;
        n++;
    }
    closedir(d);
    size_t found = 0;
    bool grew = true;
    while (grew && pairs) {
        grew = false;
        for (size_t i = 0; i < n && found < cap; i++) {
            bool parent_in = pairs[i].ppid == root;
            for (size_t k = 0; k < found && !parent_in; k++)
                parent_in = out[k] == pairs[i].ppid;
            if (!parent_in)
                continue;
            bool known = false;
            for (size_t k = 0; k < found && !known; k++)
                known = out[k] == pairs[i].pid;
            if (!known) {
                out[found++] = pairs[i].pid;
                grew = true;
            }
        }
    }
    skpx_free(pairs);
    return found;
}
