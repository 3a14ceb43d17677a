/* http_cancel.c - POST …/tasks/{id}/cancel for trace profiling tasks and process (pprof,
 * async-profiler) tasks. A cancelled task ends its window at the cancel time: no agent is
 * handed it any more (not even one polling with lastCommandTime=0 or restarting), its status
 * is "cancelled", and the service is free for a new task at once. SkyWalking's protocols have
 * no stop command: an agent that already runs the task samples until its own end and what it
 * sends is still stored (docs/api.md). Mutating routes: token, Content-Type and Origin are
 * checked before these run (http_api.c, http_routes.c). */
#include <inttypes.h>

#include "common/log.h"
#include "server/http/http_int.h"
#include "server/http/http_pprof.h"
#include "server/tasks/proc_task.h"
#include "server/store/store_proc.h"

static void reply_cancelled(struct http_ctx *cx, const char *kind, const char *id, skp_err err,
                            int64_t now)
{
    if (err == SKP_ESTATE) {
        http_reply_error(cx, 409, "%s task %s has already ended or was cancelled", kind, id);
        return;
    }
    if (err) {
        http_reply_store_error(cx, err, "task");
        return;
    }
    cx->api->metrics->tasks_cancelled++;
    HTTP_LOG(SKPX_LOG_INFO, cx->req_id, "%s task %s cancelled", kind, id);
    http_reply_json(cx, 200,
                    json_pack("{s:s, s:s, s:I}", "id", id, "status", "cancelled", "cancelledTime",
                              (json_int_t)now));
}

void http_tasks_cancel(struct http_ctx *cx, const char *id)
{
    int64_t now = http_now(cx->api);
    reply_cancelled(cx, "profile", id, store_cancel_task(cx->api->store, id, now), now);
}

static void proc_cancel(struct http_ctx *cx, const char *id, enum proc_kind kind)
{
    int64_t now = http_now(cx->api);
    struct proc_task t;
    skp_err err = store_proc_get_task(cx->api->store, id, &t);
    bool same_kind = !err && t.kind == kind;
    store_proc_task_cleanup(&t);
    if (!err && !same_kind)
        err = SKP_ENOTFOUND; /* a pprof id under the async-profiler path, or the reverse */
    if (!err)
        err = store_proc_cancel_task(cx->api->store, id, now, PROC_POLL_GRACE_MS);
    reply_cancelled(cx, kind == PROC_KIND_PPROF ? "pprof" : "async-profiler", id, err, now);
}

void http_pprof_cancel(struct http_ctx *cx, const char *id)
{
    proc_cancel(cx, id, PROC_KIND_PPROF);
}

void http_async_cancel(struct http_ctx *cx, const char *id)
{
    proc_cancel(cx, id, PROC_KIND_ASYNC_PROFILER);
}
