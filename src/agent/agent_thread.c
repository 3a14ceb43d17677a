/* agent_thread.c - agent thread creation with signals blocked, monotonic condition waits. */
#include "agent/agent_thread.h"

#include <signal.h>
#include <time.h>

skp_err skp__thread_start(pthread_t *t, const char *name, void *(*fn)(void *), void *arg)
{
    sigset_t all;
    sigset_t old;
    sigfillset(&all);
    /* The new thread inherits this mask; restore ours right after. */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return SKP_EIO;
    pthread_setname_np(*t, name);
    return SKP_OK;
}

skp_err skp__cond_init_mono(pthread_cond_t *cv)
{
    pthread_condattr_t a;
    if (pthread_condattr_init(&a) != 0)
        return SKP_EIO;
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
    return rc ? SKP_EIO : SKP_OK;
}

void skp__cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ns)
{
    struct timespec ts;
    if (deadline_ns < 0)
        deadline_ns = 0;
    ts.tv_sec = (time_t)(deadline_ns / 1000000000);
    ts.tv_nsec = (long)(deadline_ns % 1000000000);
    pthread_cond_timedwait(cv, mu, &ts);
}
