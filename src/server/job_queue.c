/* job_queue.c - the loop's worker thread and its two lists (see job_queue.h).
 * Lock order: only `mu`; no callback and no libevent call runs while holding it. */
#include "server/job_queue.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/log.h"

struct job_list {
    struct job_queue_item *head, *tail;
};

struct job_queue {
    struct job_queue_ops ops;
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct job_list todo; /* loop -> worker, under mu */
    struct job_list done; /* worker -> loop, under mu */
    bool stopping;
    int wake[2]; /* the worker writes a byte, the loop reads */
    struct event *wake_ev;
};

static void list_push(struct job_list *l, struct job_queue_item *it)
{
    it->next = NULL;
    if (l->tail)
        l->tail->next = it;
    else
        l->head = it;
    l->tail = it;
}

static struct job_queue_item *list_take_all(struct job_list *l)
{
    struct job_queue_item *it = l->head;
    l->head = NULL;
    l->tail = NULL;
    return it;
}

static void *worker_main(void *ud)
{
    struct job_queue *q = ud;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->todo.head && !q->stopping)
            pthread_cond_wait(&q->cv, &q->mu);
        if (q->stopping)
            break;
        struct job_queue_item *it = q->todo.head;
        q->todo.head = it->next;
        if (!q->todo.head)
            q->todo.tail = NULL;
        pthread_mutex_unlock(&q->mu);

        q->ops.run(it, q->ops.ud);

        pthread_mutex_lock(&q->mu);
        list_push(&q->done, it);
        char b = 1;
        ssize_t n = write(q->wake[1], &b, 1); /* non-blocking: a full pipe is already awake */
        (void)n;
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* Loop thread: hands the finished jobs back. */
static void on_wake(evutil_socket_t fd, short what, void *ud)
{
    (void)what;
    struct job_queue *q = ud;
    char buf[256];
    while (read(fd, buf, sizeof(buf)) > 0) {
    }
    pthread_mutex_lock(&q->mu);
    struct job_queue_item *it = list_take_all(&q->done);
    pthread_mutex_unlock(&q->mu);
    while (it) {
        struct job_queue_item *next = it->next;
        q->ops.done(it, q->ops.ud);
        it = next;
    }
}

skp_err job_queue_start(struct event_base *base, const struct job_queue_ops *ops,
                        struct job_queue **out)
{
    *out = NULL;
    struct job_queue *q = skpx_calloc(1, sizeof(*q));
    if (!q)
        return SKP_ENOMEM;
    q->ops = *ops;
    q->wake[0] = q->wake[1] = -1;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    if (pipe2(q->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        SKPX_ERROR("%s: pipe: %s", ops->name, strerror(errno));
        job_queue_stop(q);
        return SKP_EIO;
    }
    q->wake_ev = event_new(base, q->wake[0], EV_READ | EV_PERSIST, on_wake, q);
    if (!q->wake_ev || event_add(q->wake_ev, NULL) != 0) {
        job_queue_stop(q);
        return SKP_ENOMEM;
    }
    int rc = pthread_create(&q->thread, NULL, worker_main, q);
    if (rc != 0) {
        SKPX_ERROR("%s: pthread_create: %s", ops->name, strerror(rc));
        job_queue_stop(q);
        return SKP_EIO;
    }
    q->thread_started = true;
    *out = q;
    return SKP_OK;
}

skp_err job_queue_submit(struct job_queue *q, struct job_queue_item *it)
{
    skp_err err = SKP_OK;
    pthread_mutex_lock(&q->mu);
    if (q->stopping) {
        err = SKP_ESTATE;
    } else {
        list_push(&q->todo, it);
        pthread_cond_signal(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return err;
}

static void drop_list(struct job_queue *q, struct job_queue_item *it)
{
    while (it) {
        struct job_queue_item *next = it->next;
        q->ops.drop(it, q->ops.ud);
        it = next;
    }
}

void job_queue_stop(struct job_queue *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->mu);
    q->stopping = true;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    if (q->thread_started)
        pthread_join(q->thread, NULL); /* finishes the job it is running, if any */
    drop_list(q, list_take_all(&q->todo));
    drop_list(q, list_take_all(&q->done));
    if (q->wake_ev)
        event_free(q->wake_ev);
    if (q->wake[0] >= 0)
        close(q->wake[0]);
    if (q->wake[1] >= 0)
        close(q->wake[1]);
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    skpx_free(q);
}
