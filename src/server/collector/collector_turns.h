/* collector_turns.h - long store writes done a step per turn of the event loop
 * (collector_turns.c). A step is one short transaction (an eBPF stream's next 250 stacks, an
 * uploaded file's next 256 KiB piece, a goProfileReport file's next 250 snapshots); between
 * two steps the loop polls its sockets, so /healthz, the API and the agents' calls are answered
 * while a 200,000-row stream or a 30 MiB file is written (issue 25: written at once, they held
 * the loop 0.3-0.9 s). Jobs run one at a time, first come first. Event loop only. */
#ifndef SKP_SERVER_COLLECTOR_TURNS_H
#define SKP_SERVER_COLLECTOR_TURNS_H

#include <stdbool.h>

#include "common/err.h"

struct collector;
struct event_base;

struct turn_job {
    struct turn_job *next; /* the queue's */
    /* One step; true when the job is finished (the step answered and freed what it owns). */
    bool (*step)(struct turn_job *j);
};

/* Starts the queue on `base` (c->turns). Errors: SKP_ENOMEM. */
SKP_MUST_CHECK skp_err collector_turns_start(struct collector *c, struct event_base *base);
/* Runs every queued job to its end (the loop has stopped), then frees the queue. NULL-safe. */
void collector_turns_stop(struct collector *c);
/* Queues j; its first step runs in a later turn. Without a queue (collector_turns_start not
 * called, as in unit tests) j runs to its end at once. */
void collector_turns_push(struct collector *c, struct turn_job *j);

#endif
