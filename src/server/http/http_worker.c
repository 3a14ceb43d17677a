/* http_worker.c - the HTTP API's worker thread for analyses and exports (see http_worker.h):
 * a job queue (server/job_queue.h) whose jobs each open a read-only store connection and whose
 * answers the loop sends. The queue's bound and the count it checks live here, on the loop. */
#include "server/http/http_worker.h"

#include <stdarg.h>

#include "common/alloc.h"
#include "common/err.h"
#include "server/http/http_int.h"

struct http_worker {
    struct job_queue *q;
    size_t n_queued; /* submitted and not yet answered (loop thread only) */
    char *db_path;
};

void http_job_set_json(struct http_job *j, int code, void *json)
{
    http_response_json(&j->res, code, json);
}

void http_job_set_error(struct http_job *j, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    http_response_verror(&j->res, code, fmt, ap);
    va_end(ap);
}

void http_job_set_store_error(struct http_job *j, skp_err err, const char *what)
{
    http_response_store_error(&j->res, j->req_id, err, what);
}

/* Worker thread. A fresh read-only connection per job: it sees every committed batch and never
 * keeps a cache across a retention purge. */
static void job_run(struct job_queue_item *it, void *ud)
{
    struct http_worker *w = ud;
    struct http_job *j = SKP_CONTAINER_OF(it, struct http_job, qi);
    struct store_opts o = {.read_only = true};
    struct store *st = NULL;
    skp_err err = store_open(w->db_path, &o, &st);
    if (err)
        http_job_set_store_error(j, err, "database");
    else
        j->run(j, st);
    store_close(st);
}

/* Loop thread: sends the finished response. */
static void job_done(struct job_queue_item *it, void *ud)
{
    struct http_worker *w = ud;
    struct http_job *j = SKP_CONTAINER_OF(it, struct http_job, qi);
    struct http_ctx cx = {.api = j->api, .req = j->req, .raw_path = "", .req_id = j->req_id};
    http_send(&cx, &j->res);
    j->destroy(j);
    w->n_queued--;
}

/* Loop thread, at stop: a job not answered is destroyed without a reply. */
static void job_drop(struct job_queue_item *it, void *ud)
{
    (void)ud;
    struct http_job *j = SKP_CONTAINER_OF(it, struct http_job, qi);
    http_response_cleanup(&j->res);
    j->destroy(j);
}

skp_err http_worker_start(struct event_base *base, const char *db_path, struct http_worker **out)
{
    *out = NULL;
    struct http_worker *w = skpx_calloc(1, sizeof(*w));
    if (!w)
        return SKP_ENOMEM;
    w->db_path = skpx_strdup(db_path);
    if (!w->db_path) {
        http_worker_stop(w);
        return SKP_ENOMEM;
    }
    struct job_queue_ops ops = {
        .name = "http worker", .run = job_run, .done = job_done, .drop = job_drop, .ud = w};
    skp_err err = job_queue_start(base, &ops, &w->q);
    if (err) {
        http_worker_stop(w);
        return err;
    }
    *out = w;
    return SKP_OK;
}

skp_err http_worker_submit(struct http_worker *w, struct http_job *j)
{
    if (w->n_queued >= HTTP_WORKER_QUEUE_MAX)
        return SKP_EFULL;
    skp_err err = job_queue_submit(w->q, &j->qi);
    if (!err)
        w->n_queued++;
    return err;
}

void http_worker_stop(struct http_worker *w)
{
    if (!w)
        return;
    job_queue_stop(w->q);
    SKPX_FREE_ALL(w->db_path, w);
}
