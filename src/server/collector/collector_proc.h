/* collector_proc.h - what the process-profiling services (pprof, async-profiler) share: the
 * upload collector of their `collect` and, below, the service itself. The upload: a
 * bidirectional stream whose first message carries the metadata (task, instance, status, content
 * size), answered at once with one status message; after SUCCESS the agent streams the file in
 * chunks and half-closes.
 *
 * Rules: an unknown task ends the call with NOT_FOUND; an agent's error status is stored as an
 * EXECUTION_TASK_ERROR log with its message; a declared size above the limit (or a negative
 * one) is answered TERMINATED_BY_OVERSIZE and logged with the service's too-large op; chunks
 * beyond the declared size or the limit end the call with RESOURCE_EXHAUSTED and a log; a
 * complete file is stored with an EXECUTION_FINISHED log in one transaction before the call
 * ends OK; a stream that ends (or breaks) before the declared size stores nothing and logs
 * UPLOAD_INCOMPLETE. Upload buffers of all streams together are bounded
 * (COLLECTOR_UPLOAD_BUDGET_BYTES). Runs on the server loop. */
#ifndef SKP_SERVER_COLLECTOR_PROC_H
#define SKP_SERVER_COLLECTOR_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/Command.pb-c.h"
#include "server/collector/collector.h"
#include "server/store/store_proc.h"

/* All process-profile uploads in flight may hold this many bytes together; more are refused
 * with RESOURCE_EXHAUSTED (the agent retries later). */
#define COLLECTOR_UPLOAD_BUDGET_BYTES (256u * 1024 * 1024)

/* Status values, shared by both services' enums (same numbers). */
enum proc_upload_status {
    PROC_UPLOAD_SUCCESS = 0,
    PROC_UPLOAD_TASK_ERROR = 1,
    PROC_UPLOAD_OVERSIZE = 2,
};

/* One received message, as the service's decoded type presents it (all borrowed). */
struct proc_upload_msg {
    bool has_meta;
    const char *service, *instance, *task_id;
    int type; /* enum proc_upload_status */
    int64_t content_size;
    const char *error_message; /* NULL if absent */
    const uint8_t *content;    /* NULL if absent */
    size_t content_len;
};

/* What differs between the services. */
struct proc_upload_ops {
    enum proc_kind kind;
    const char *too_large_op; /* PROC_LOG_PPROF_TOO_LARGE / PROC_LOG_JFR_TOO_LARGE */
    /* Sends one response message carrying `status` (skpx_grpc_call_send). */
    skp_err (*send_status)(struct skpx_grpc_call *call, int status);
};

/* The calls' handlers. `ops` is borrowed and must outlive the call; on_message hands each
 * decoded message over as a proc_upload_msg. Returns a gRPC status (SKPX_GRPC_OK to go on). */
int proc_upload_on_message(struct skpx_grpc_call *call, struct collector *c,
                           const struct proc_upload_ops *ops, const struct proc_upload_msg *m);
void proc_upload_on_end(struct skpx_grpc_call *call, struct collector *c);
void proc_upload_on_close(struct skpx_grpc_call *call, struct collector *c, int status);

/* ---- one process-profiling service: command poll + upload (collector_proc_service.c) ----
 * The pprof and async-profiler services differ only in their message types, their command and
 * the numbers above; a service file describes those in a `struct proc_service` and registers it.
 * The command poll hands the calling instance the earliest task of the kind created after its
 * cursor that lists it and logs NOTIFIED (as OAP, when the task is handed out). */

/* A command poll's fields, as the service's query type presents them (borrowed). */
struct proc_poll_query {
    const char *service, *instance;
    int64_t last_command_time;
};

/* What differs between the services. Static storage: must outlive the server. */
struct proc_service {
    const char *name;             /* in log lines: "pprof", "async-profiler" */
    const char *poll_paths[2];    /* packaged and compat path of the command poll */
    const char *collect_paths[2]; /* packaged and compat path of collect */
    const ProtobufCMessageDescriptor *query_desc;
    const ProtobufCMessageDescriptor *data_desc;
    /* Reads a decoded query / data message of the service (borrowed) into *q / *m. */
    void (*read_query)(const ProtobufCMessage *msg, struct proc_poll_query *q);
    void (*read_data)(const ProtobufCMessage *msg, struct proc_upload_msg *m);
    /* Builds t's command in `storage` (command_size zeroed bytes that live as long as the
     * answer) and returns the Command inside it. */
    size_t command_size;
    Skywalking__V3__Command *(*build_command)(void *storage, const struct proc_task *t);
    struct proc_upload_ops upload; /* kind, too-large op, status packing */
};

/* Defines the service's read_query and read_data for its message types: both services' query
 * (service, serviceInstance, lastCommandTime) and data messages (metadata, oneof result
 * errorMessage / content) have the same fields under other type names. */
#define PROC_SERVICE_READERS(QueryType, DataType, RESULT_ERROR_MESSAGE, RESULT_CONTENT)            \
    static void read_query(const ProtobufCMessage *msg, struct proc_poll_query *q)                 \
    {                                                                                              \
        const QueryType *pq = (const void *)msg;                                                   \
        q->service = pq->service;                                                                  \
        q->instance = pq->serviceinstance;                                                         \
        q->last_command_time = pq->lastcommandtime;                                                \
    }                                                                                              \
    static void read_data(const ProtobufCMessage *msg, struct proc_upload_msg *m)                  \
    {                                                                                              \
        const DataType *d = (const void *)msg;                                                     \
        if (d->metadata) {                                                                         \
            m->has_meta = true;                                                                    \
            m->service = d->metadata->service;                                                     \
            m->instance = d->metadata->serviceinstance;                                            \
            m->task_id = d->metadata->taskid;                                                      \
            m->type = (int)d->metadata->type;                                                      \
            m->content_size = d->metadata->contentsize;                                            \
        }                                                                                          \
        if (d->result_case == RESULT_ERROR_MESSAGE)                                                \
            m->error_message = d->errormessage ? d->errormessage : "";                             \
        if (d->result_case == RESULT_CONTENT) {                                                    \
            m->content = d->content.data ? d->content.data : (const uint8_t *)"";                  \
            m->content_len = d->content.len;                                                       \
        }                                                                                          \
    }

/* Registers the command poll and collect of `svc` (borrowed, static) on srv; `c` is borrowed
 * and must outlive the server. Errors: SKP_EEXIST (a path is taken), SKP_ENOMEM. */
SKP_MUST_CHECK skp_err proc_service_register(struct collector *c, struct skpx_grpc_server *srv,
                                             const struct proc_service *svc);

#endif
