/* collector_async.c - skywalking.v10.AsyncProfilerTask on the gRPC port (spec §2), the Java
 * agent's async-profiler service: getAsyncProfilerTaskCommands hands the calling instance the
 * earliest async-profiler task created after its cursor that lists it (and logs NOTIFIED), and
 * collect takes the JFR file through the shared upload collector with the --jfr-max-bytes limit
 * and the JFR_UPLOAD_FILE_TOO_LARGE_ERROR log. This file only describes the service's messages
 * to the shared process-profiling service (collector_proc.h, collector_proc_service.c). Runs on
 * the server loop. */
#include "profile/AsyncProfiler.pb-c.h"
#include "server/collector.h"
#include "server/collector_proc.h"
#include "server/proc_task_async.h"

#define PATHS(method) {"/skywalking.v10.AsyncProfilerTask/" method, "/AsyncProfilerTask/" method}

static void read_query(const ProtobufCMessage *msg, struct proc_poll_query *q)
{
    const Skywalking__V10__AsyncProfilerTaskCommandQuery *aq = (const void *)msg;
    q->service = aq->service;
    q->instance = aq->serviceinstance;
    q->last_command_time = aq->lastcommandtime;
}

static void read_data(const ProtobufCMessage *msg, struct proc_upload_msg *m)
{
    const Skywalking__V10__AsyncProfilerData *d = (const void *)msg;
    if (d->metadata) {
        m->has_meta = true;
        m->service = d->metadata->service;
        m->instance = d->metadata->serviceinstance;
        m->task_id = d->metadata->taskid;
        m->type = (int)d->metadata->type;
        m->content_size = d->metadata->contentsize;
    }
    if (d->result_case == SKYWALKING__V10__ASYNC_PROFILER_DATA__RESULT_ERROR_MESSAGE)
        m->error_message = d->errormessage ? d->errormessage : "";
    if (d->result_case == SKYWALKING__V10__ASYNC_PROFILER_DATA__RESULT_CONTENT) {
        m->content = d->content.data ? d->content.data : (const uint8_t *)"";
        m->content_len = d->content.len;
    }
}

static Skywalking__V3__Command *build_command(void *storage, const struct proc_task *t)
{
    struct proc_async_command *ac = storage;
    proc_command_async(ac, t);
    return &ac->cmd;
}

static skp_err send_status(struct skpx_grpc_call *call, int status)
{
    Skywalking__V10__AsyncProfilerCollectionResponse r =
        SKYWALKING__V10__ASYNC_PROFILER_COLLECTION_RESPONSE__INIT;
    r.type = (Skywalking__V10__AsyncProfilingStatus)status;
    return skpx_grpc_call_send(call, &r.base);
}

static const struct proc_service k_async_service = {
    .name = "async-profiler",
    .poll_paths = PATHS("getAsyncProfilerTaskCommands"),
    .collect_paths = PATHS("collect"),
    .query_desc = &skywalking__v10__async_profiler_task_command_query__descriptor,
    .data_desc = &skywalking__v10__async_profiler_data__descriptor,
    .read_query = read_query,
    .read_data = read_data,
    .command_size = sizeof(struct proc_async_command),
    .build_command = build_command,
    .upload = {.kind = PROC_KIND_ASYNC_PROFILER,
               .too_large_op = PROC_LOG_JFR_TOO_LARGE,
               .send_status = send_status},
};

skp_err collector_async_register(struct collector *c, struct skpx_grpc_server *srv)
{
    return proc_service_register(c, srv, &k_async_service);
}
