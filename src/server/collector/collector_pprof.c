/* collector_pprof.c - skywalking.v10.PprofTask on the gRPC port (spec §1): getPprofTaskCommands
 * hands the calling instance the earliest pprof task created after its cursor that lists it
 * (and logs NOTIFIED), and collect takes the file through the shared upload collector. This file
 * only describes the service's messages to the shared process-profiling service
 * (collector_proc.h, collector_proc_service.c). Runs on the server loop. */
#include "profile/Pprof.pb-c.h"
#include "server/collector/collector.h"
#include "server/collector/collector_proc.h"
#include "server/tasks/proc_task.h"

PROC_SERVICE_READERS(Skywalking__V10__PprofTaskCommandQuery, Skywalking__V10__PprofData,
                     SKYWALKING__V10__PPROF_DATA__RESULT_ERROR_MESSAGE,
                     SKYWALKING__V10__PPROF_DATA__RESULT_CONTENT)

static Skywalking__V3__Command *build_command(void *storage, const struct proc_task *t)
{
    struct proc_command *pc = storage;
    proc_command_pprof(pc, t);
    return &pc->cmd;
}

static skp_err send_status(struct skpx_grpc_call *call, int status)
{
    Skywalking__V10__PprofCollectionResponse r = SKYWALKING__V10__PPROF_COLLECTION_RESPONSE__INIT;
    r.status = (Skywalking__V10__PprofProfilingStatus)status;
    return skpx_grpc_call_send(call, &r.base);
}

static const struct proc_service k_pprof_service = {
    .name = "pprof",
    .poll_paths = {"/skywalking.v10.PprofTask/getPprofTaskCommands",
                   "/PprofTask/getPprofTaskCommands"},
    .collect_paths = {"/skywalking.v10.PprofTask/collect", "/PprofTask/collect"},
    .query_desc = &skywalking__v10__pprof_task_command_query__descriptor,
    .data_desc = &skywalking__v10__pprof_data__descriptor,
    .read_query = read_query,
    .read_data = read_data,
    .command_size = sizeof(struct proc_command),
    .build_command = build_command,
    .upload = {.kind = PROC_KIND_PPROF,
               .too_large_op = PROC_LOG_PPROF_TOO_LARGE,
               .send_status = send_status},
};

skp_err collector_pprof_register(struct collector *c, struct skpx_grpc_server *srv)
{
    return proc_service_register(c, srv, &k_pprof_service);
}
