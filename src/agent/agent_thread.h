/* agent_thread.h - how the agent creates its threads: all signals blocked from the first
 * instruction (so process signals reach host threads) and a name visible in /proc.
 *
 * Fork gate. An agent thread counts as busy from its creation to its return, except while it
 * waits (skp__cond_wait_until, the gRPC client's poll through skp__fork_idle_hook). fork()'s
 * prepare handler closes the gate and waits (at most SKP_FORK_GATE_WAIT_MS) until no agent thread
 * is busy, so the child inherits no lock an agent thread held mid-work: ours (the log mutex the
 * child handler takes) and the allocator's (ASan's gcc-12 runtime does not lock its size-class
 * regions around fork: a child could deadlock in its first malloc of a class). A thread leaving
 * a wait while the gate is closed parks until the parent handler reopens it; the child has none
 * of these threads and starts with the gate open and no busy thread. */
#ifndef SKP_AGENT_THREAD_H
#define SKP_AGENT_THREAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "skyprof/skp_err.h"

/* Starts a joinable thread named `name` (<= 15 chars) running fn(arg) with every signal blocked.
 * The calling thread's mask is unchanged on return. Errors: SKP_EIO, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err skp__thread_start(pthread_t *t, const char *name, void *(*fn)(void *),
                                         void *arg);

/* Initializes a condition variable on CLOCK_MONOTONIC. Errors: SKP_EIO. */
SKP_MUST_CHECK skp_err skp__cond_init_mono(pthread_cond_t *cv);
/* Waits on cv (mutex held) until the monotonic time deadline_ns or a signal. */
void skp__cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ns);

/* Longest fork() waits for busy agent threads before it proceeds anyway. */
#define SKP_FORK_GATE_WAIT_MS 250

/* Marks the calling agent thread as waiting (entering = true) or working again (false; may park
 * while a fork is in progress). No effect on threads the agent did not start. Async-signal-safe
 * in the sense that it allocates nothing and takes no lock. */
void skp__fork_idle_hook(bool entering);

/* pthread_atfork handlers of the gate, registered once by the agent (agent.c). The child handler
 * must run before anything in the child starts agent threads. */
void skp__fork_gate_prepare(void);
void skp__fork_gate_parent(void);
void skp__fork_gate_child(void);

/* Counters for tests: forks that found every agent thread idle within the wait, and forks that
 * proceeded after SKP_FORK_GATE_WAIT_MS with some still busy. */
void skp__fork_gate_stats(uint64_t *n_clean, uint64_t *n_timed_out);

#endif
