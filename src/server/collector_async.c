/* collector_async.c - skywalking.v10.AsyncProfilerTask on the gRPC port (spec §2), the Java
 * agent's async-profiler service: getAsyncProfilerTaskCommands hands the calling instance the
 * earliest async-profiler task created after its cursor that lists it (and logs NOTIFIED), and
 * collect takes the JFR file through the shared upload collector (collector_proc.h) with the
 * --jfr-max-bytes limit and the JFR_UPLOAD_FILE_TOO_LARGE_ERROR log. Runs on the server loop. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/log.h"
#include "profile/AsyncProfiler.pb-c.h"
#include "server/collector.h"
#include "server/collector_proc.h"
#include "server/proc_task_async.h"

#define PATHS(method) "/skywalking.v10.AsyncProfilerTask/" method, "/AsyncProfilerTask/" method

/* ---------------- getAsyncProfilerTaskCommands ---------------- */

struct async_cmds {
    Skywalking__V3__Commands resp;
    Skywalking__V3__Command *cmdp[1];
    struct proc_async_command cmd;
    struct proc_task task;
};

static void async_cmds_free(struct collector_unary *u)
{
    struct async_cmds *ac = u->owned;
    if (!ac)
        return;
    store_proc_task_cleanup(&ac->task);
    skpx_free(ac);
    u->owned = NULL;
}

static int on_query(struct skpx_grpc_call *call, void *ud, const ProtobufCMessage *msg,
                    const uint8_t *raw, size_t raw_len)
{
    (void)raw;
    (void)raw_len;
    struct collector *c = ud;
    const Skywalking__V10__AsyncProfilerTaskCommandQuery *q = (const void *)msg;
    struct collector_unary *u = collector_unary_attach(call);
    if (!u)
        return SKPX_GRPC_RESOURCE_EXHAUSTED;
    if (!q->service || !q->service[0] || !q->serviceinstance || !q->serviceinstance[0]) {
        u->status = SKPX_GRPC_INVALID_ARGUMENT;
        snprintf(u->message, sizeof(u->message), "service and serviceInstance are required");
        return SKPX_GRPC_OK;
    }
    struct async_cmds *ac = skpx_calloc(1, sizeof(*ac));
    if (!ac)
        return SKPX_GRPC_RESOURCE_EXHAUSTED;
    u->owned = ac;
    u->free_fn = async_cmds_free;
    int64_t now = collector_now(c);
    skp_err err = store_proc_next_task(c->store, PROC_KIND_ASYNC_PROFILER, q->service,
                                       q->serviceinstance, q->lastcommandtime, now,
                                       PROC_POLL_GRACE_MS, &ac->task);
    if (err == SKP_ENOTFOUND)
        return SKPX_GRPC_OK; /* empty Commands */
    if (err) {
        u->status = err == SKP_ENOMEM ? SKPX_GRPC_RESOURCE_EXHAUSTED : SKPX_GRPC_UNAVAILABLE;
        snprintf(u->message, sizeof(u->message), "skyprofd: task lookup failed: %s",
                 skp_strerror(err));
        return SKPX_GRPC_OK;
    }
    /* As OAP: NOTIFIED when the task is handed out. A failed log write is not worth
     * withholding the task. */
    err = store_proc_add_log(c->store, ac->task.id, q->serviceinstance, PROC_LOG_NOTIFIED, now,
                             NULL);
    static struct skpx_log_limit lim;
    if (err)
        skpx_log_limited(&lim, SKPX_LOG_WARN,
                         "async-profiler task %s: NOTIFIED log for %s not written: %s",
                         ac->task.id, q->serviceinstance, skp_strerror(err));
    proc_command_async(&ac->cmd, &ac->task);
    skywalking__v3__commands__init(&ac->resp);
    ac->cmdp[0] = &ac->cmd.cmd;
    ac->resp.commands = ac->cmdp;
    ac->resp.n_commands = 1;
    u->resp = &ac->resp.base;
    SKPX_DEBUG("async-profiler query %s/%s last=%" PRId64 ": task %s", q->service,
               q->serviceinstance, q->lastcommandtime, ac->task.id);
    return SKPX_GRPC_OK;
}

/* ---------------- collect ---------------- */

static skp_err send_status(struct skpx_grpc_call *call, int status)
{
    Skywalking__V10__AsyncProfilerCollectionResponse r =
        SKYWALKING__V10__ASYNC_PROFILER_COLLECTION_RESPONSE__INIT;
    r.type = (Skywalking__V10__AsyncProfilingStatus)status;
    return skpx_grpc_call_send(call, &r.base);
}

static const struct proc_upload_ops k_async_ops = {
    .kind = PROC_KIND_ASYNC_PROFILER,
    .too_large_op = PROC_LOG_JFR_TOO_LARGE,
    .send_status = send_status,
};

static int collect_on_message(struct skpx_grpc_call *call, void *ud, const ProtobufCMessage *msg,
                              const uint8_t *raw, size_t raw_len)
{
    (void)raw;
    (void)raw_len;
    const Skywalking__V10__AsyncProfilerData *d = (const void *)msg;
    struct proc_upload_msg m = {0};
    if (d->metadata) {
        m.has_meta = true;
        m.service = d->metadata->service;
        m.instance = d->metadata->serviceinstance;
        m.task_id = d->metadata->taskid;
        m.type = (int)d->metadata->type;
        m.content_size = d->metadata->contentsize;
    }
    if (d->result_case == SKYWALKING__V10__ASYNC_PROFILER_DATA__RESULT_ERROR_MESSAGE)
        m.error_message = d->errormessage ? d->errormessage : "";
    if (d->result_case == SKYWALKING__V10__ASYNC_PROFILER_DATA__RESULT_CONTENT) {
        m.content = d->content.data ? d->content.data : (const uint8_t *)"";
        m.content_len = d->content.len;
    }
    return proc_upload_on_message(call, ud, &k_async_ops, &m);
}

static void collect_on_end(struct skpx_grpc_call *call, void *ud)
{
    proc_upload_on_end(call, ud);
}

static void collect_on_close(struct skpx_grpc_call *call, void *ud, int status)
{
    proc_upload_on_close(call, ud, status);
}

skp_err collector_async_register(struct collector *c, struct skpx_grpc_server *srv)
{
    struct skpx_grpc_method q = {
        .client_streaming = false,
        .request_desc = &skywalking__v10__async_profiler_task_command_query__descriptor,
        .on_start = collector_on_start,
        .on_message = on_query,
        .on_end = collector_unary_on_end,
        .on_close = collector_unary_on_close,
        .ud = c,
    };
    skp_err err = collector_add(srv, PATHS("getAsyncProfilerTaskCommands"), q);
    if (err)
        return err;
    struct skpx_grpc_method s = {
        .client_streaming = true,
        .request_desc = &skywalking__v10__async_profiler_data__descriptor,
        .on_start = collector_on_start,
        .on_message = collect_on_message,
        .on_end = collect_on_end,
        .on_close = collect_on_close,
        .ud = c,
    };
    return collector_add(srv, PATHS("collect"), s);
}
