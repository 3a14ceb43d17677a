/* continuous_trigger.c - a firing policy becomes a task and a stored trigger (see
 * continuous_trigger.h). */
#include "server/continuous/continuous_trigger.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/log.h"
#include "server/tasks/proc_task.h"
#include "server/tasks/task_service.h"

#define TRACE_DUMP_PERIOD_MS 10
#define TRACE_MAX_SAMPLING 5

static int64_t minutes_of(int64_t s)
{
    int64_t m = (s + 59) / 60;
    return m < 1 ? 1 : m > 15 ? 15 : m;
}

/* The created task of kind `kind` (its id, owned, is freed here) and its end into `out`; or,
 * when err, why it was not created (`reason` from the task service, else err's text). */
static void task_outcome(struct cont_trigger_result *out, const char *kind, const char *event,
                         skp_err err, const char *reason, char *id, int64_t end_ms)
{
    if (err) {
        snprintf(out->note, sizeof(out->note), "%s%s%s task not created: %s", kind,
                 event ? " " : "", event ? event : "", reason ? reason : skp_strerror(err));
        return;
    }
    snprintf(out->task_id, sizeof(out->task_id), "%s", id);
    skpx_free(id);
    out->task_kind = kind;
    out->task_end_ms = end_ms;
}

static void create_trace(struct store *st, const struct cont_trigger_req *r, int64_t now_ms,
                         struct cont_trigger_result *out)
{
    struct task_request tr = {
        .service = r->service,
        .endpoint = r->endpoint,
        .start_time = now_ms,
        .duration_min = minutes_of(r->duration_s),
        .min_duration_threshold = r->min_duration_ms,
        .dump_period = TRACE_DUMP_PERIOD_MS,
        .max_sampling_count = TRACE_MAX_SAMPLING,
    };
    struct task_error te = {0};
    char *id = NULL;
    skp_err err = task_create(st, &tr, now_ms, &te, &id);
    task_outcome(out, "trace", NULL, err, te.reason, id, now_ms + tr.duration_min * 60000);
}

static void create_pprof(struct store *st, const struct cont_trigger_req *r, const char *event,
                         int64_t now_ms, struct cont_trigger_result *out)
{
    const char *events[1] = {event};
    struct proc_request pr = {
        .service = r->service,
        .instances = r->instances,
        .n_instances = r->n_instances,
        .events = events,
        .n_events = 1,
        .duration = minutes_of(r->duration_s),
    };
    struct proc_error pe = {0};
    char *id = NULL;
    skp_err err = proc_task_create(st, PROC_KIND_PPROF, &pr, now_ms, &pe, &id);
    task_outcome(out, "pprof", event, err, pe.reason, id, now_ms + pr.duration * 60000);
}

skp_err continuous_trigger_record(struct store *st, const struct cont_trigger_req *r,
                                  int64_t now_ms, struct cont_trigger_result *out)
{
    memset(out, 0, sizeof(*out));
    if (r->from_agent) {
        /* the agent runs it and uploads through EBPFProfilingService under this id */
        char uuid[37];
        task_uuid(uuid);
        snprintf(out->task_id, sizeof(out->task_id), "ct-%s", uuid);
        out->task_kind = "ebpf";
        out->task_end_ms = now_ms + (r->duration_s > 0 ? r->duration_s : 0) * 1000;
    } else {
        switch (r->target) {
        case CONT_TARGET_TRACE:
            create_trace(st, r, now_ms, out);
            break;
        case CONT_TARGET_PPROF_CPU:
        case CONT_TARGET_ON_CPU:
            create_pprof(st, r, "cpu", now_ms, out);
            break;
        case CONT_TARGET_PPROF_WALL:
        case CONT_TARGET_OFF_CPU:
            create_pprof(st, r, "wall", now_ms, out);
            break;
        default:
            snprintf(out->note, sizeof(out->note), "%s is run by eBPF agents only: no task",
                     cont_target_name(r->target));
            break;
        }
    }
    struct store_cont_trigger t = {
        .service = r->service,
        .instance = r->instance,
        .process = r->process,
        .time_ms = now_ms,
        .target = cont_target_name(r->target),
        .source = r->from_agent ? "agent" : "server",
        .task_kind = out->task_kind,
        .task_id = out->task_id[0] ? out->task_id : NULL,
        .note = out->note[0] ? out->note : NULL,
        .causes = r->causes,
        .n_causes = r->n_causes,
    };
    skp_err err = store_cont_insert_trigger(st, &t, &out->trigger_id);
    if (err)
        return err;
    char first[256] = "";
    if (r->n_causes)
        continuous_cause_text(&r->causes[0], first, sizeof(first));
    SKPX_INFO("continuous: %s trigger %" PRId64 " of %s (%s): %s%s%s", t.source, out->trigger_id,
              r->service, t.target, first, out->task_id[0] ? " -> task " : "",
              out->task_id[0] ? out->task_id : out->note);
    return SKP_OK;
}

static const char *unit_of(const char *type)
{
    enum cont_monitor m;
    if (!cont_monitor_parse(type, &m))
        return "";
    return cont_monitor_unit(m);
}

static void num(double v, char *out, size_t cap)
{
    if (v == floor(v) && fabs(v) < 1e15)
        snprintf(out, cap, "%.0f", v);
    else
        snprintf(out, cap, "%.2f", v);
}

void continuous_cause_text(const struct store_cont_cause *c, char *out, size_t cap)
{
    char cur[48], thr[48];
    num(c->current >= 100 || c->current == floor(c->current) ? round(c->current) : c->current, cur,
        sizeof(cur));
    num(c->threshold, thr, sizeof(thr));
    const char *u = unit_of(c->type);
    const char *sp = strcmp(u, "ms") == 0 ? " " : "";
    int n = snprintf(out, cap, "%s%s%s: %s%s%s \u2265 %s%s%s", c->type, c->uri ? " of " : "",
                     c->uri ? c->uri : "", cur, sp, u, thr, sp, u);
    if (n > 0 && (size_t)n < cap && c->window_s > 0)
        snprintf(out + n, cap - (size_t)n, " (%" PRId64 " of %" PRId64 " s)", c->hits, c->window_s);
}
