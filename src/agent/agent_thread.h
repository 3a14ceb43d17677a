/* agent_thread.h - how the agent creates its threads: all signals blocked from the first
 * instruction (so process signals reach host threads) and a name visible in /proc. */
#ifndef SKP_AGENT_THREAD_H
#define SKP_AGENT_THREAD_H

#include <pthread.h>
#include <stdint.h>

#include "skyprof/skp_err.h"

/* Starts a joinable thread named `name` (<= 15 chars) running fn(arg) with every signal blocked.
 * The calling thread's mask is unchanged on return. Errors: SKP_EIO. */
SKP_MUST_CHECK skp_err skp__thread_start(pthread_t *t, const char *name, void *(*fn)(void *),
                                         void *arg);

/* Initializes a condition variable on CLOCK_MONOTONIC. Errors: SKP_EIO. */
SKP_MUST_CHECK skp_err skp__cond_init_mono(pthread_cond_t *cv);
/* Waits on cv (mutex held) until the monotonic time deadline_ns or a signal. */
void skp__cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ns);

#endif
