/* collector_turns.c - the per-turn job queue (see collector_turns.h): a 0 s timer runs one
 * step of the first job per turn. A timer and not event_active: libevent runs events activated
 * from an active callback in the same pass, so the steps would run back to back without the
 * loop polling its sockets in between. */
#include "server/collector/collector_turns.h"

#include <event2/event.h>

#include "common/alloc.h"
#include "server/collector/collector.h"

struct collector_turns {
    struct event *ev;
    struct turn_job *head, *tail;
};

static void later(struct collector_turns *q)
{
    static const struct timeval now = {0, 0};
    if (!evtimer_pending(q->ev, NULL))
        evtimer_add(q->ev, &now);
}

static void pop(struct collector_turns *q)
{
    struct turn_job *j = q->head;
    q->head = j->next;
    if (!q->head)
        q->tail = NULL;
    j->next = NULL;
}

static void on_turn(evutil_socket_t fd, short what, void *ud)
{
    (void)fd;
    (void)what;
    struct collector_turns *q = ud;
    struct turn_job *j = q->head;
    if (!j)
        return;
    pop(q); /* a finished step may free j */
    if (!j->step(j)) {
        j->next = q->head; /* not finished: it stays first */
        q->head = j;
        if (!q->tail)
            q->tail = j;
    }
    if (q->head)
        later(q);
}

skp_err collector_turns_start(struct collector *c, struct event_base *base)
{
    struct collector_turns *q = skpx_calloc(1, sizeof(*q));
    if (!q)
        return SKP_ENOMEM;
    q->ev = evtimer_new(base, on_turn, q);
    if (!q->ev) {
        skpx_free(q);
        return SKP_ENOMEM;
    }
    c->turns = q;
    return SKP_OK;
}

void collector_turns_stop(struct collector *c)
{
    struct collector_turns *q = c->turns;
    if (!q)
        return;
    c->turns = NULL;
    while (q->head) {
        struct turn_job *j = q->head;
        pop(q);
        while (!j->step(j)) {
        }
    }
    event_free(q->ev);
    skpx_free(q);
}

void collector_turns_push(struct collector *c, struct turn_job *j)
{
    struct collector_turns *q = c->turns;
    j->next = NULL;
    if (!q) {
        while (!j->step(j)) {
        }
        return;
    }
    if (q->tail)
        q->tail->next = j;
    else
        q->head = j;
    q->tail = j;
    later(q);
}
