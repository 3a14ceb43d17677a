/* stopper.h - --blocking: stops every thread of a process for the duration of one read
 * (PTRACE_SEIZE + PTRACE_INTERRUPT per thread, PTRACE_DETACH to resume), so a sample is exact
 * instead of possibly torn. The target pays a stop of about the read's length per sample.
 * Single-threaded: the same thread must stop and resume (ptrace ties tracees to it). */
#ifndef SKP_ATTACH_STOPPER_H
#define SKP_ATTACH_STOPPER_H

#include <stddef.h>
#include <sys/types.h>

#include "skyprof/skp_err.h"

/* Most threads one stop handles (more keep running: their reads may be torn). */
#define ATTACH_STOP_MAX_THREADS 1024

struct attach_stopper {
    pid_t tids[ATTACH_STOP_MAX_THREADS]; /* threads seized */
    size_t n;
};

/* Seizes and interrupts every thread of `pid` and waits until each has stopped. Threads that
 * cannot be seized (exited meanwhile) are skipped. Errors: SKP_EIO (the first seize failed, e.g.
 * EPERM), SKP_ENOTFOUND. On error nothing stays stopped. */
SKP_MUST_CHECK skp_err attach_stopper_stop(struct attach_stopper *s, pid_t pid);
/* Detaches from every seized thread (they run again). */
void attach_stopper_resume(struct attach_stopper *s);

#endif
