/* job_queue.h - a worker thread fed by the event loop: the loop submits jobs, the thread runs
 * them one at a time in submission order, and each finished job is handed back to the loop,
 * which a pipe wakes (libevent needs no threading support). The HTTP API's analyses and
 * exports (http/http_worker.c) and the goProfileReport decoder (collector/collector_goprofile.c)
 * each run one; a job is a struct with a `struct job_queue_item` inside it, recovered with
 * SKP_CONTAINER_OF. The queue itself is unbounded: its users count their jobs and refuse more
 * (each has its own limit and its own refusal).
 *
 * Threading: start, submit and stop on the loop thread; `run` on the worker thread; `done` and
 * `drop` on the loop thread. */
#ifndef SKP_SERVER_JOB_QUEUE_H
#define SKP_SERVER_JOB_QUEUE_H

#include "skyprof/skp_err.h"

struct event_base;
struct job_queue;

/* The link a job carries while the queue holds it. */
struct job_queue_item {
    struct job_queue_item *next;
};

typedef void (*job_queue_cb)(struct job_queue_item *it, void *ud);

struct job_queue_ops {
    const char *name;  /* for log lines, e.g. "http worker" (static) */
    job_queue_cb run;  /* worker thread: does the job's work */
    job_queue_cb done; /* loop thread: the job came back from run, in the order run finished */
    /* Loop thread, from job_queue_stop: a job that was never run, or ran and did not come back
     * through done, in that order. */
    job_queue_cb drop;
    void *ud; /* passed to the three callbacks (borrowed) */
};

/* Starts the worker thread; its wakeups are events of `base` (borrowed). `ops` is copied.
 * Errors: SKP_ENOMEM, SKP_EIO (pipe or thread creation failed, logged with ops->name). */
SKP_MUST_CHECK skp_err job_queue_start(struct event_base *base, const struct job_queue_ops *ops,
                                       struct job_queue **out);
/* Queues `it` behind the jobs submitted before it; the queue holds it until `done` or `drop`.
 * Errors: SKP_ESTATE (stopping). */
SKP_MUST_CHECK skp_err job_queue_submit(struct job_queue *q, struct job_queue_item *it);
/* Lets the job being run finish, joins the thread, hands every job still held to `drop`, then
 * frees the queue. NULL ok. */
void job_queue_stop(struct job_queue *q);

#endif
