/* collector_async.c - skywalking.v10.AsyncProfilerTask on the gRPC port (spec §2), the Java
 * agent's async-profiler service: getAsyncProfilerTaskCommands hands the calling instance the
 * earliest async-profiler task created after its cursor that lists it (and logs NOTIFIED), and
 * collect takes the JFR file through the shared upload collector with the --jfr-max-bytes limit
 * and the JFR_UPLOAD_FILE_TOO_LARGE_ERROR log. This file only describes the service's messages
 * to the shared process-profiling service (collector_proc.h, collector_proc_service.c). Runs on
 * the server loop. */
#include "profile/AsyncProfiler.pb-c.h"
#include "server/collector/collector.h"
#include "server/collector/collector_proc.h"
#include "server/tasks/proc_task_async.h"

PROC_SERVICE_READERS(Skywalking__V10__AsyncProfilerTaskCommandQuery,
                     Skywalking__V10__AsyncProfilerData,
                     SKYWALKING__V10__ASYNC_PROFILER_DATA__RESULT_ERROR_MESSAGE,
                     SKYWALKING__V10__ASYNC_PROFILER_DATA__RESULT_CONTENT)

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
    .poll_paths = {"/skywalking.v10.AsyncProfilerTask/getAsyncProfilerTaskCommands",
                   "/AsyncProfilerTask/getAsyncProfilerTaskCommands"},
    .collect_paths = {"/skywalking.v10.AsyncProfilerTask/collect", "/AsyncProfilerTask/collect"},
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
