/* collector_proc_service.c - a process-profiling gRPC service (collector_proc.h): the command
 * poll, unary, and `collect` on the shared upload collector, for whatever `struct proc_service`
 * describes. Each method's ud is the service's slot in struct collector (c->proc_ud[kind]).
 * Runs on the server loop. */
#include "server/collector/collector_proc.h"

#include <assert.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>

#include "common/alloc.h"
#include "common/log.h"
#include "server/tasks/proc_task.h"

static_assert(PROC_KIND_PPROF < 2 && PROC_KIND_ASYNC_PROFILER < 2,
              "struct collector's proc_ud holds one slot per enum proc_kind");

/* ---------------- the command poll ---------------- */

/* A poll's answer: the Commands message with the task's command (the service's command
 * storage follows the struct). */
struct poll_answer {
    Skywalking__V3__Commands resp;
    Skywalking__V3__Command *cmdp[1];
    struct proc_task task;
    max_align_t command[];
};

static void poll_answer_free(struct collector_unary *u)
{
    struct poll_answer *a = u->owned;
    if (!a)
        return;
    store_proc_task_cleanup(&a->task);
    skpx_free(a);
    u->owned = NULL;
}

static int poll_on_message(struct skpx_grpc_call *call, void *ud, const ProtobufCMessage *msg,
                           const uint8_t *raw, size_t raw_len)
{
    (void)raw;
    (void)raw_len;
    const struct collector_proc_ud *pu = ud;
    struct collector *c = pu->c;
    const struct proc_service *svc = pu->svc;
    struct proc_poll_query q = {0};
    svc->read_query(msg, &q);
    struct collector_unary *u = collector_unary_attach(call);
    if (!u)
        return SKPX_GRPC_RESOURCE_EXHAUSTED;
    if (!q.service || !q.service[0] || !q.instance || !q.instance[0]) {
        return collector_unary_fail(u, SKPX_GRPC_INVALID_ARGUMENT,
                                    "service and serviceInstance are required");
    }
    struct poll_answer *a =
        collector_unary_own(u, sizeof(*a) + svc->command_size, poll_answer_free);
    if (!a)
        return SKPX_GRPC_RESOURCE_EXHAUSTED;
    int64_t now = collector_now(c);
    skp_err err = store_proc_next_task(c->store, svc->upload.kind, q.service, q.instance,
                                       q.last_command_time, now, PROC_POLL_GRACE_MS, &a->task);
    if (err == SKP_ENOTFOUND)
        return SKPX_GRPC_OK; /* empty Commands */
    if (err)
        return collector_unary_store_failed(u, err, "task lookup failed");
    /* As OAP: NOTIFIED when the task is handed out (the agent may still refuse it). A failed
     * log write is not worth withholding the task. */
    err = store_proc_add_log(c->store, a->task.id, q.instance, PROC_LOG_NOTIFIED, now, NULL);
    static struct skpx_log_limit lim;
    if (err)
        skpx_log_limited(&lim, SKPX_LOG_WARN, "%s task %s: NOTIFIED log for %s not written: %s",
                         svc->name, a->task.id, q.instance, skp_strerror(err));
    skywalking__v3__commands__init(&a->resp);
    a->cmdp[0] = svc->build_command(a->command, &a->task);
    a->resp.commands = a->cmdp;
    a->resp.n_commands = 1;
    u->resp = &a->resp.base;
    SKPX_DEBUG("%s query %s/%s last=%" PRId64 ": task %s", svc->name, q.service, q.instance,
               q.last_command_time, a->task.id);
    return SKPX_GRPC_OK;
}

/* ---------------- collect ---------------- */

static int collect_on_message(struct skpx_grpc_call *call, void *ud, const ProtobufCMessage *msg,
                              const uint8_t *raw, size_t raw_len)
{
    (void)raw;
    (void)raw_len;
    const struct collector_proc_ud *pu = ud;
    struct proc_upload_msg m = {0};
    pu->svc->read_data(msg, &m);
    return proc_upload_on_message(call, pu->c, &pu->svc->upload, &m);
}

static void collect_on_end(struct skpx_grpc_call *call, void *ud)
{
    const struct collector_proc_ud *pu = ud;
    proc_upload_on_end(call, pu->c);
}

static void collect_on_close(struct skpx_grpc_call *call, void *ud, int status)
{
    const struct collector_proc_ud *pu = ud;
    proc_upload_on_close(call, pu->c, status);
}

/* collector_on_start reads the collector from ud. */
static int proc_on_start(struct skpx_grpc_call *call, void *ud)
{
    const struct collector_proc_ud *pu = ud;
    return collector_on_start(call, pu->c);
}

skp_err proc_service_register(struct collector *c, struct skpx_grpc_server *srv,
                              const struct proc_service *svc)
{
    struct collector_proc_ud *pu = &c->proc_ud[svc->upload.kind];
    pu->c = c;
    pu->svc = svc;
    struct skpx_grpc_method q = collector_unary_method(svc->query_desc, poll_on_message, pu);
    q.on_start = proc_on_start; /* the token check with the collector behind pu */
    skp_err err = collector_add(srv, svc->poll_paths[0], svc->poll_paths[1], q);
    if (err)
        return err;
    struct skpx_grpc_method s = {
        .client_streaming = true,
        .request_desc = svc->data_desc,
        .on_start = proc_on_start,
        .on_message = collect_on_message,
        .on_end = collect_on_end,
        .on_close = collect_on_close,
        .ud = pu,
    };
    return collector_add(srv, svc->collect_paths[0], svc->collect_paths[1], s);
}
