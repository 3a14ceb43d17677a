/* http_worker.c - the HTTP API's worker thread for analyses and exports (see http_worker.h).
 * Lock order: only `mu`; no libevent or store call is made while holding it. The worker wakes
 * the loop through a pipe, so libevent needs no threading support. */
#include "server/http/http_worker.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/log.h"
#include "server/http/http_int.h"

struct http_worker {
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct http_job *todo_head, *todo_tail; /* loop -> worker */
    struct http_job *done_head, *done_tail; /* worker -> loop */
    size_t n_queued;                        /* todo + running + done */
    bool stopping;
    int wake[2]; /* worker writes a byte, loop reads */
    struct event *wake_ev;
    char *db_path;
};

static void push(struct http_job **head, struct http_job **tail, struct http_job *j)
{
    j->next = NULL;
    if (*tail)
        (*tail)->next = j;
    else
        *head = j;
    *tail = j;
}

static struct http_job *pop_all(struct http_job **head, struct http_job **tail)
{
    struct http_job *j = *head;
    *head = NULL;
    *tail = NULL;
    return j;
}

void http_job_set_json(struct http_job *j, int code, void *json)
{
    http_response_json(&j->res, code, json);
}

void http_job_set_error(struct http_job *j, int code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    http_response_json(&j->res, code, json_pack("{s:s}", "error", msg));
}

void http_job_set_store_error(struct http_job *j, skp_err err, const char *what)
{
    http_response_store_error(&j->res, j->req_id, err, what);
}

static void *worker_main(void *ud)
{
    struct http_worker *w = ud;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->todo_head && !w->stopping)
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->stopping)
            break;
        struct http_job *j = w->todo_head;
        w->todo_head = j->next;
        if (!w->todo_head)
            w->todo_tail = NULL;
        pthread_mutex_unlock(&w->mu);

        /* A fresh read-only connection per job: it sees every committed batch and never keeps
         * a cache across a retention purge. */
        struct store_opts o = {.read_only = true};
        struct store *st = NULL;
        skp_err err = store_open(w->db_path, &o, &st);
        if (err)
            http_job_set_store_error(j, err, "database");
        else
            j->run(j, st);
        store_close(st);

        pthread_mutex_lock(&w->mu);
        push(&w->done_head, &w->done_tail, j);
        char b = 1;
        ssize_t n = write(w->wake[1], &b, 1); /* pipe full = a wakeup is pending anyway */
        (void)n;
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Loop thread: sends the finished responses. */
static void on_wake(evutil_socket_t fd, short what, void *ud)
{
    (void)what;
    struct http_worker *w = ud;
    char buf[256];
    while (read(fd, buf, sizeof(buf)) > 0) {
    }
    pthread_mutex_lock(&w->mu);
    struct http_job *j = pop_all(&w->done_head, &w->done_tail);
    pthread_mutex_unlock(&w->mu);
    while (j) {
        struct http_job *next = j->next;
        struct http_ctx cx = {.api = j->api, .req = j->req, .raw_path = "", .req_id = j->req_id};
        http_send(&cx, &j->res);
        j->destroy(j);
        pthread_mutex_lock(&w->mu);
        w->n_queued--;
        pthread_mutex_unlock(&w->mu);
        j = next;
    }
}

skp_err http_worker_start(struct event_base *base, const char *db_path, struct http_worker **out)
{
    *out = NULL;
    struct http_worker *w = skpx_calloc(1, sizeof(*w));
    if (!w)
        return SKP_ENOMEM;
    w->wake[0] = w->wake[1] = -1;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->db_path = skpx_strdup(db_path);
    if (!w->db_path) {
        http_worker_stop(w);
        return SKP_ENOMEM;
    }
    if (pipe2(w->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        SKPX_ERROR("http worker: pipe: %s", strerror(errno));
        http_worker_stop(w);
        return SKP_EIO;
    }
    w->wake_ev = event_new(base, w->wake[0], EV_READ | EV_PERSIST, on_wake, w);
    if (!w->wake_ev || event_add(w->wake_ev, NULL) != 0) {
        http_worker_stop(w);
        return SKP_ENOMEM;
    }
    int rc = pthread_create(&w->thread, NULL, worker_main, w);
    if (rc != 0) {
        SKPX_ERROR("http worker: pthread_create: %s", strerror(rc));
        http_worker_stop(w);
        return SKP_EIO;
    }
    w->thread_started = true;
    *out = w;
    return SKP_OK;
}

skp_err http_worker_submit(struct http_worker *w, struct http_job *j)
{
    pthread_mutex_lock(&w->mu);
    skp_err err = SKP_OK;
    if (w->stopping)
        err = SKP_ESTATE;
    else if (w->n_queued >= HTTP_WORKER_QUEUE_MAX)
        err = SKP_EFULL;
    if (!err) {
        push(&w->todo_head, &w->todo_tail, j);
        w->n_queued++;
        pthread_cond_signal(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return err;
}

static void destroy_list(struct http_job *j)
{
    while (j) {
        struct http_job *next = j->next;
        http_response_cleanup(&j->res);
        j->destroy(j);
        j = next;
    }
}

void http_worker_stop(struct http_worker *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stopping = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    if (w->thread_started)
        pthread_join(w->thread, NULL); /* finishes the job it is running, if any */
    destroy_list(pop_all(&w->todo_head, &w->todo_tail));
    destroy_list(pop_all(&w->done_head, &w->done_tail));
    if (w->wake_ev)
        event_free(w->wake_ev);
    if (w->wake[0] >= 0)
        close(w->wake[0]);
    if (w->wake[1] >= 0)
        close(w->wake[1]);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    skpx_free(w->db_path);
    skpx_free(w);
}
