/* stopper.c - stopping a process's threads with ptrace's seize/interrupt, which unlike
 * PTRACE_ATTACH does not send SIGSTOP and leaves no signal behind: detaching resumes the thread
 * exactly where it was. Threads created while we hold the others are not stopped. */
#include "attach/stopper.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

skp_err attach_stopper_stop(struct attach_stopper *s, pid_t pid)
{
    s->n = 0;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return errno == ENOENT ? SKP_ENOTFOUND : SKP_EIO;
    struct dirent *de;
    skp_err err = SKP_OK;
    while ((de = readdir(d)) != NULL && s->n < ATTACH_STOP_MAX_THREADS) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        pid_t tid = (pid_t)strtol(de->d_name, NULL, 10);
        if (ptrace(PTRACE_SEIZE, tid, NULL, NULL) != 0) {
            if (errno == ESRCH)
                continue; /* exited since readdir */
            if (s->n == 0) {
                err = SKP_EIO;
                break;
            }
            continue;
        }
        if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) != 0) {
            ptrace(PTRACE_DETACH, tid, NULL, NULL);
            continue;
        }
        s->tids[s->n++] = tid;
    }
    closedir(d);
    for (size_t i = 0; i < s->n; i++) {
        int status;
        while (waitpid(s->tids[i], &status, __WALL) < 0 && errno == EINTR) {
        }
    }
    if (err)
        attach_stopper_resume(s);
    return err;
}

void attach_stopper_resume(struct attach_stopper *s)
{
    for (size_t i = 0; i < s->n; i++)
        ptrace(PTRACE_DETACH, s->tids[i], NULL, NULL);
    s->n = 0;
}
