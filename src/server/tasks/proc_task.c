/* proc_task.c - process-profiling task rules (see proc_task.h). */
#include "server/tasks/proc_task.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/log.h"
#include "server/tasks/proc_task_async.h"
#include "server/tasks/task_service.h"

/* OAP's texts (PprofMutationService), verbatim so users find SkyWalking's documentation. */
#define R_SERVICE "service cannot be null"
#define R_EVENTS "events cannot be empty"
#define R_DURATION_NEG "duration cannot be negative"
#define R_DURATION_MAX "duration cannot be greater than 15 minutes"
#define R_DUMP_NEG "dumpPeriod cannot be negative"
#define R_INSTANCES "serviceInstanceIds cannot be empty"
#define R_OVERLAP "current service already has monitor pprof task execute at this time"
#define R_OVERLAP_ASYNC                                                                            \
    "current service already has monitor async profiler task execute at this time"
/* Ours. */
#define R_EVENT_UNKNOWN                                                                            \
    "unknown event (one of cpu, wall, heap, allocs, block, mutex, goroutine, threadcreate)"
#define R_EVENT_ONE "a pprof task takes exactly one event"
#define R_SERVICE_LONG "service name cannot be longer than 1024 bytes"
#define R_INSTANCE_BAD "serviceInstanceIds must be non-empty names of at most 1024 bytes"
#define R_INSTANCES_MANY "serviceInstanceIds cannot name more than 1000 instances"
#define R_NO_LIVE "the service has no live instance (none reported in the last 3 minutes)"
#define R_HZ "samplingRate must be between 1 and 1000 samples per second"
#define R_RANGE "value out of range"

#define MS_PER_MIN 60000
#define ID_ATTEMPTS 16

static const char *const k_events[] = {"cpu",   "wall",  "heap",      "allocs",
                                       "block", "mutex", "goroutine", "threadcreate"};

bool proc_pprof_event_known(const char *ev)
{
    for (size_t i = 0; ev && i < sizeof(k_events) / sizeof(k_events[0]); i++)
        if (strcmp(ev, k_events[i]) == 0)
            return true;
    return false;
}

bool proc_pprof_event_timed(const char *ev)
{
    return ev && (strcmp(ev, "cpu") == 0 || strcmp(ev, "wall") == 0 || strcmp(ev, "block") == 0 ||
                  strcmp(ev, "mutex") == 0);
}

bool proc_task_refuse(struct proc_error *e, const char *reason, const char *field)
{
    e->reason = reason;
    e->field = field;
    return false;
}

bool proc_task_service_given(const struct proc_request *r, struct proc_error *e)
{
    e->reason = NULL;
    e->field = NULL;
    if (!r->service || !r->service[0])
        return proc_task_refuse(e, R_SERVICE, "service");
    return true;
}

bool proc_task_names_ok(const struct proc_request *r, struct proc_error *e)
{
    if (strlen(r->service) > PROC_NAME_MAX)
        return proc_task_refuse(e, R_SERVICE_LONG, "service");
    if (r->n_instances > PROC_MAX_INSTANCES)
        return proc_task_refuse(e, R_INSTANCES_MANY, "serviceInstanceIds");
    for (size_t i = 0; i < r->n_instances; i++)
        if (!r->instances[i] || !r->instances[i][0] || strlen(r->instances[i]) > PROC_NAME_MAX)
            return proc_task_refuse(e, R_INSTANCE_BAD, "serviceInstanceIds");
    return true;
}

bool proc_task_validate_pprof(const struct proc_request *r, struct proc_error *e)
{
    if (!proc_task_service_given(r, e))
        return false;
    if (r->n_events == 0 || !r->events[0] || !r->events[0][0])
        return proc_task_refuse(e, R_EVENTS, "events");
    const char *ev = r->events[0];
    bool timed = proc_pprof_event_timed(ev);
    bool lock = strcmp(ev, "block") == 0 || strcmp(ev, "mutex") == 0;
    if (timed && r->duration <= 0)
        return proc_task_refuse(e, R_DURATION_NEG, "duration");
    if (timed && r->duration > PROC_PPROF_DURATION_MAX_MIN)
        return proc_task_refuse(e, R_DURATION_MAX, "duration");
    if (lock && r->dump_period <= 0)
        return proc_task_refuse(e, R_DUMP_NEG, "dumpPeriod");
    /* Ours, after OAP's so its message wins whenever both apply. */
    if (r->n_events > 1)
        return proc_task_refuse(e, R_EVENT_ONE, "events");
    if (!proc_pprof_event_known(ev))
        return proc_task_refuse(e, R_EVENT_UNKNOWN, "events");
    if (!proc_task_names_ok(r, e))
        return false;
    if (r->sampling_hz < 0 || r->sampling_hz > PROC_SAMPLING_HZ_MAX)
        return proc_task_refuse(e, R_HZ, "samplingRate");
    if (r->duration < 0 || r->duration > PROC_PPROF_DURATION_MAX_MIN)
        return proc_task_refuse(e, R_RANGE, "duration");
    if (r->dump_period < 0 || r->dump_period > INT64_C(1) << 40)
        return proc_task_refuse(e, R_RANGE, "dumpPeriod");
    return true;
}

skp_err proc_task_create(struct store *st, enum proc_kind kind, const struct proc_request *r,
                         int64_t now_ms, struct proc_error *e, char **id_out)
{
    *id_out = NULL;
    bool is_async = kind == PROC_KIND_ASYNC_PROFILER;
    if (is_async ? !proc_task_validate_async(r, e)
                 : kind != PROC_KIND_PPROF || !proc_task_validate_pprof(r, e))
        return SKP_EINVAL;
    const char *ev = r->events[0];
    int64_t duration_s = proc_pprof_event_timed(ev) ? r->duration * 60 : 0;
    char async_events[PROC_ASYNC_EVENTS_MAX];
    if (is_async) {
        /* Seconds; the events stored upper case and comma-joined. */
        proc_async_events(r, async_events, sizeof(async_events));
        ev = async_events;
        duration_s = r->duration;
    }

    /* Overlap: pprof tasks clash per (service, event); async-profiler tasks per service, as in
     * OAP (one JFR recording per JVM at a time). */
    struct proc_task prev = {0};
    struct proc_task *prevs = NULL;
    size_t n_prev = 0;
    skp_err err;
    if (is_async) {
        err = store_proc_list_tasks(st, kind, r->service, 1, &prevs, &n_prev);
        if (!err && n_prev == 0)
            err = SKP_ENOTFOUND;
    } else {
        err = store_proc_latest_task(st, kind, r->service, ev, &prev);
    }
    if (err == SKP_OK) {
        const struct proc_task *pt = is_async ? &prevs[0] : &prev;
        /* a cancelled task no longer holds the service and event */
        bool clash = pt->create_time + pt->duration_s * 1000 >= now_ms && !pt->cancelled_ms;
        store_proc_task_cleanup(&prev);
        store_proc_tasks_free(prevs, n_prev);
        if (clash) {
            proc_task_refuse(e, is_async ? R_OVERLAP_ASYNC : R_OVERLAP, "events");
            return SKP_EEXIST;
        }
    } else if (err != SKP_ENOTFOUND) {
        store_proc_tasks_free(prevs, n_prev);
        return err;
    }

    char **live = NULL;
    size_t n_live = 0;
    struct proc_task t = {
        .kind = kind,
        .service = (char *)r->service,
        .instances = (char **)r->instances,
        .n_instances = r->n_instances,
        .events = (char *)ev,
        .duration_s = duration_s,
        .dump_period = r->dump_period,
        .sampling_hz = r->sampling_hz,
        .exec_args = is_async && r->exec_args && r->exec_args[0] ? (char *)r->exec_args : NULL,
    };
    if (r->n_instances == 0) {
        err =
            store_proc_live_instances(st, r->service, now_ms - PROC_LIVE_WINDOW_MS, &live, &n_live);
        if (err)
            return err;
        if (n_live == 0) {
            proc_task_refuse(e, R_INSTANCES, "serviceInstanceIds");
            /* OAP's text first; say why in the log for the operator. */
            SKPX_INFO("%s task for %s refused: %s", is_async ? "async-profiler" : "pprof",
                      r->service, R_NO_LIVE);
            return SKP_EINVAL;
        }
        t.instances = live;
        t.n_instances = n_live;
        t.all_live = true;
    }
    /* Ids are "<createTime>_<service id>" as OAP builds them; two tasks of one service in the
     * same millisecond (different events) take the next free millisecond. */
    for (int attempt = 0; attempt < ID_ATTEMPTS; attempt++) {
        char id[TASK_ID_MAX];
        if (!task_make_id(now_ms + attempt, r->service, id, sizeof(id))) {
            err = SKP_EINVAL;
            break;
        }
        t.id = id;
        t.create_time = now_ms + attempt;
        err = store_proc_insert_task(st, &t);
        if (err == SKP_OK) {
            *id_out = skpx_strdup(id);
            if (!*id_out)
                err = SKP_ENOMEM;
            break;
        }
        if (err != SKP_EEXIST)
            break;
    }
    store_proc_names_free(live, n_live);
    return err;
}

const char *proc_task_status(const struct proc_task *t, int64_t now_ms)
{
    if (t->cancelled_ms)
        return "cancelled";
    int64_t span = t->duration_s * 1000;
    if (span < MS_PER_MIN)
        span = MS_PER_MIN;
    return now_ms < t->create_time + span ? "running" : "finished";
}

static struct proc_progress *progress_find(struct proc_progress *v, size_t n, const char *inst)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].instance, inst) == 0)
            return &v[i];
    return NULL;
}

void proc_task_progress(const struct proc_task *t, const struct proc_log *logs, size_t n_logs,
                        struct proc_progress *out, size_t cap, size_t *n)
{
    size_t k = 0;
    for (size_t i = 0; i < t->n_instances && k < cap; i++) {
        memset(&out[k], 0, sizeof(out[k]));
        out[k++].instance = t->instances[i];
    }
    for (size_t i = 0; i < n_logs; i++) {
        const struct proc_log *l = &logs[i];
        struct proc_progress *p = progress_find(out, k, l->instance);
        if (!p) {
            if (k == cap)
                continue;
            p = &out[k++];
            memset(p, 0, sizeof(*p));
            p->instance = l->instance;
        }
        if (strcmp(l->op, PROC_LOG_NOTIFIED) == 0) {
            if (!p->notified_ms)
                p->notified_ms = l->time_ms;
        } else if (strcmp(l->op, PROC_LOG_FINISHED) == 0) {
            p->uploaded_ms = l->time_ms;
        } else {
            p->failed_ms = l->time_ms;
            p->failed_op = l->op;
            p->failed_reason = l->message;
        }
    }
    *n = k;
}

void proc_command_arg(Skywalking__V3__KeyStringValuePair *kv,
                      Skywalking__V3__KeyStringValuePair **kvp, size_t i, const char *k,
                      const char *v)
{
    skywalking__v3__key_string_value_pair__init(&kv[i]);
    kv[i].key = (char *)k;
    kv[i].value = (char *)v;
    kvp[i] = &kv[i];
}

void proc_command_pprof(struct proc_command *pc, const struct proc_task *t)
{
    memset(pc, 0, sizeof(*pc));
    skywalking__v3__command__init(&pc->cmd);
    pc->cmd.command = "PprofTaskQuery";
    task_uuid(pc->serial);
    snprintf(pc->nums[0], sizeof(pc->nums[0]), "%" PRId64, t->duration_s / 60);
    snprintf(pc->nums[1], sizeof(pc->nums[1]), "%" PRId64, t->create_time);
    snprintf(pc->nums[2], sizeof(pc->nums[2]), "%" PRId64, t->dump_period);
    snprintf(pc->nums[3], sizeof(pc->nums[3]), "%" PRId64, t->sampling_hz);
    size_t n = 0;
    proc_command_arg(pc->kv, pc->kvp, n++, "SerialNumber", pc->serial);
    proc_command_arg(pc->kv, pc->kvp, n++, "TaskId", t->id);
    proc_command_arg(pc->kv, pc->kvp, n++, "Events", t->events);
    proc_command_arg(pc->kv, pc->kvp, n++, "Duration", pc->nums[0]);
    proc_command_arg(pc->kv, pc->kvp, n++, "CreateTime", pc->nums[1]);
    proc_command_arg(pc->kv, pc->kvp, n++, "DumpPeriod", pc->nums[2]);
    if (t->sampling_hz > 0)
        proc_command_arg(pc->kv, pc->kvp, n++, "SamplingRate", pc->nums[3]);
    pc->cmd.n_args = n;
    pc->cmd.args = pc->kvp;
}
