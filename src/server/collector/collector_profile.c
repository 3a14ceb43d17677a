/* collector_profile.c - the ProfileTask service (spec §1.2, §3.3, §5.2, §5.3).
 *
 * Design: collectSnapshot copies each decoded ThreadSnapshot into a per-stream batch (an arena
 * for the strings) and writes the batch with store_insert_snapshots every
 * COLLECTOR_SNAPSHOT_BATCH messages and at the end of the stream. The agent gets its (empty)
 * Commands only after the last batch committed, so an OK answer means every snapshot of the
 * stream is durable; on a store failure the stream ends with UNAVAILABLE and the agent knows
 * it was not (fully) stored. A client that vanishes mid-stream loses its unflushed tail, which
 * was never acknowledged. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "profile/Profile.pb-c.h"
#include "server/collector/collector.h"
#include "server/tasks/task_service.h"

#define PATHS(method) "/skywalking.v3.ProfileTask/" method, "/ProfileTask/" method
/* Arena chunk size for copied snapshot strings. */
#define ARENA_CHUNK (256u << 10)

/* ---------------- getProfileTaskCommands ---------------- */

struct task_cmds {
    Skywalking__V3__Commands resp;
    Skywalking__V3__Command **cmdp;
    struct task_command *cmds;
    struct store_task *tasks;
    size_t n;
};

static void task_cmds_free(struct collector_unary *u)
{
    struct task_cmds *tc = u->owned;
    if (!tc)
        return;
    for (size_t i = 0; i < tc->n; i++)
        store_task_cleanup(&tc->tasks[i]);
    SKPX_FREE_ALL(tc->tasks, tc->cmds, tc->cmdp, tc);
    u->owned = NULL;
}

static int query(struct collector *c, struct collector_unary *u, const ProtobufCMessage *msg)
{
    const Skywalking__V3__ProfileTaskCommandQuery *q = (const void *)msg;
    c->metrics->task_queries++;
    if (!q->service || !q->service[0]) {
        return collector_unary_fail(u, SKPX_GRPC_INVALID_ARGUMENT, "service is empty");
    }
    int64_t now = collector_now(c);
    struct store_task *tasks = NULL;
    size_t n = 0;
    skp_err err = store_tasks_for_agent(c->store, q->service, q->lastcommandtime, now, &tasks, &n);
    if (err)
        return collector_unary_store_failed(u, err, "task lookup failed");
    if (n == 0) {
        skpx_free(tasks);
        return SKPX_GRPC_OK;
    }
    struct task_cmds *tc = skpx_calloc(1, sizeof(*tc));
    if (tc) {
        tc->cmds = skpx_calloc(n, sizeof(*tc->cmds));
        tc->cmdp = skpx_calloc(n, sizeof(*tc->cmdp));
    }
    if (!tc || !tc->cmds || !tc->cmdp) {
        for (size_t i = 0; i < n; i++)
            store_task_cleanup(&tasks[i]);
        skpx_free(tasks);
        if (tc) {
            SKPX_FREE_ALL(tc->cmds, tc->cmdp, tc);
        }
        u->status = SKPX_GRPC_RESOURCE_EXHAUSTED;
        return SKPX_GRPC_OK;
    }
    tc->tasks = tasks;
    tc->n = n;
    u->owned = tc;
    u->free_fn = task_cmds_free;
    skywalking__v3__commands__init(&tc->resp);
    const char *instance = q->serviceinstance ? q->serviceinstance : "";
    for (size_t i = 0; i < n; i++) {
        /* The NOTIFIED log records that the task was handed to this instance (OAP writes it
         * even though the agent may still reject the task). A failed log write is not worth
         * withholding the task from the agent. */
        err = store_add_task_log(c->store, tasks[i].id, q->service, instance, STORE_TASK_NOTIFIED,
                                 now);
        static struct skpx_log_limit lim;
        if (err)
            skpx_log_limited(&lim, SKPX_LOG_WARN, "task %s: NOTIFIED log for %s/%s not written: %s",
                             tasks[i].id, q->service, instance, skp_strerror(err));
        task_command_build(&tc->cmds[i], &tasks[i]);
        tc->cmdp[i] = &tc->cmds[i].cmd;
    }
    tc->resp.n_commands = n;
    tc->resp.commands = tc->cmdp;
    u->resp = &tc->resp.base;
    c->metrics->task_commands_sent += n;
    SKPX_DEBUG("task query %s/%s last=%" PRId64 ": %zu command(s)", q->service, instance,
               q->lastcommandtime, n);
    return SKPX_GRPC_OK;
}

/* ---------------- reportTaskFinish ---------------- */

static int finish(struct collector *c, struct collector_unary *u, const ProtobufCMessage *msg)
{
    const Skywalking__V3__ProfileTaskFinishReport *r = (const void *)msg;
    c->metrics->task_finish_reports++;
    if (!r->taskid || !r->taskid[0])
        return SKPX_GRPC_OK;
    /* As OAP: the log is written only for a task we know. */
    struct store_task t = {0};
    skp_err err = store_get_task(c->store, r->taskid, &t);
    if (err == SKP_ENOTFOUND) {
        static struct skpx_log_limit lim;
        skpx_log_limited(
            &lim, SKPX_LOG_INFO, "finish report for unknown task %s from %s/%s ignored", r->taskid,
            r->service ? r->service : "", r->serviceinstance ? r->serviceinstance : "");
        return SKPX_GRPC_OK;
    }
    if (err)
        return collector_unary_store_failed(u, err, "task lookup failed");
    store_task_cleanup(&t);
    err = store_add_task_log(c->store, r->taskid, r->service ? r->service : "",
                             r->serviceinstance ? r->serviceinstance : "",
                             STORE_TASK_EXECUTION_FINISHED, collector_now(c));
    if (err)
        return collector_unary_store_failed(u, err, "task log failed");
    return SKPX_GRPC_OK;
}

/* ---------------- collectSnapshot ---------------- */

struct arena_chunk {
    struct arena_chunk *next;
    size_t used;
    size_t cap;
    size_t hw; /* most bytes ever used: what is charged to the gRPC memory budget */
    char data[];
};

struct snap_call {
    struct collector *c;
    struct skpx_grpc_call *call; /* its buffers are charged to the gRPC memory budget */
    size_t batch_charged;        /* pages of `batch` used so far (charged) */
    struct arena_chunk *chunks;  /* newest first */
    size_t arena_bytes;
    struct store_snapshot *batch; /* COLLECTOR_SNAPSHOT_BATCH entries */
    size_t n;
    char *known_task; /* last task id looked up, and whether it exists */
    bool known_task_exists;
    bool failed;
};

static void *arena_alloc(struct snap_call *s, size_t n, size_t align)
{
    struct arena_chunk *ch = s->chunks;
    if (ch) {
        size_t off = (ch->used + align - 1) & ~(align - 1);
        if (off + n <= ch->cap) {
            ch->used = off + n;
            if (ch->used > ch->hw) {
                skpx_grpc_call_charge(s->call, (int64_t)(ch->used - ch->hw));
                ch->hw = ch->used;
            }
            return ch->data + off;
        }
    }
    size_t cap = n + align > ARENA_CHUNK ? n + align : ARENA_CHUNK;
    ch = skpx_malloc(sizeof(*ch) + cap);
    if (!ch)
        return NULL;
    ch->next = s->chunks;
    ch->cap = cap;
    s->chunks = ch;
    s->arena_bytes += cap;
    s->c->buffered_bytes += cap;
    s->c->metrics->snapshot_buffer_bytes = s->c->buffered_bytes;
    size_t off = ((uintptr_t)ch->data % align) ? align - (uintptr_t)ch->data % align : 0;
    ch->used = off + n;
    ch->hw = ch->used;
    skpx_grpc_call_charge(s->call, (int64_t)ch->hw);
    return ch->data + off;
}

/* Frees all chunks but the newest one, which is emptied for reuse. */
static void arena_reset(struct snap_call *s, bool keep_one)
{
    struct arena_chunk *ch = s->chunks;
    struct arena_chunk *keep = keep_one && ch && ch->cap == ARENA_CHUNK ? ch : NULL;
    if (keep)
        ch = ch->next;
    while (ch) {
        struct arena_chunk *next = ch->next;
        skpx_grpc_call_charge(s->call, -(int64_t)ch->hw);
        skpx_free(ch);
        ch = next;
    }
    s->chunks = keep;
    s->c->buffered_bytes -= s->arena_bytes - (keep ? keep->cap : 0);
    s->arena_bytes = keep ? keep->cap : 0;
    s->c->metrics->snapshot_buffer_bytes = s->c->buffered_bytes;
    if (keep) {
        keep->next = NULL;
        keep->used = 0;
    }
}

static char *arena_strdup(struct snap_call *s, const char *str)
{
    size_t n = strlen(str) + 1;
    char *p = arena_alloc(s, n, 1);
    if (p)
        memcpy(p, str, n);
    return p;
}

static void snap_call_free(struct snap_call *s)
{
    if (!s)
        return;
    arena_reset(s, false);
    SKPX_FREE_ALL(s->batch, s->known_task, s);
}

/* Counts snapshots of task ids the server never created (OAP stores them too). One lookup per
 * distinct consecutive task id of a stream. */
static void check_task(struct snap_call *s, const char *task_id)
{
    if (!s->known_task || strcmp(s->known_task, task_id) != 0) {
        struct store_task t = {0};
        skp_err err = store_get_task(s->c->store, task_id, &t);
        if (err == SKP_OK)
            store_task_cleanup(&t);
        skpx_free(s->known_task);
        s->known_task = skpx_strdup(task_id);
        /* A lookup failure other than "not found" says nothing about the task: assume it. */
        s->known_task_exists = err != SKP_ENOTFOUND;
        static struct skpx_log_limit lim;
        if (err == SKP_ENOTFOUND)
            skpx_log_limited(&lim, SKPX_LOG_INFO, "snapshots for unknown task '%s' (stored anyway)",
                             task_id);
    }
    if (!s->known_task_exists)
        s->c->metrics->snapshots_unknown_task++;
}

/* Writes the buffered batch; returns SKPX_GRPC_OK or the status to end the stream with. */
static int snap_flush(struct snap_call *s)
{
    struct metrics *m = s->c->metrics;
    if (s->n == 0)
        return SKPX_GRPC_OK;
    size_t n_dup = 0;
    skp_err err = store_insert_snapshots(s->c->store, s->batch, s->n, &n_dup);
    m->snapshot_batches++;
    if (err) {
        m->snapshots_rejected += s->n;
        static struct skpx_log_limit lim;
        skpx_log_limited(&lim, SKPX_LOG_ERROR, "snapshot batch of %zu not stored: %s", s->n,
                         skp_strerror(err));
        s->n = 0;
        arena_reset(s, true);
        s->failed = true;
        return err == SKP_ENOMEM ? SKPX_GRPC_RESOURCE_EXHAUSTED : SKPX_GRPC_UNAVAILABLE;
    }
    m->snapshots_stored += s->n - n_dup;
    m->snapshots_duplicate += n_dup;
    collector_segments_profiled(s->c, s->batch, s->n);
    s->n = 0;
    arena_reset(s, s->c->buffered_bytes <= COLLECTOR_BUFFER_BUDGET_BYTES);
    return SKPX_GRPC_OK;
}

static struct snap_call *snap_call_get(struct skpx_grpc_call *call, struct collector *c)
{
    struct snap_call *s = skpx_grpc_call_get_data(call);
    if (s)
        return s;
    s = skpx_calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->c = c;
    s->batch = skpx_malloc(COLLECTOR_SNAPSHOT_BATCH * sizeof(*s->batch));
    if (!s->batch) {
        skpx_free(s);
        return NULL;
    }
    s->call = call;
    skpx_grpc_call_set_data(call, s);
    return s;
}

static int snap_on_start(struct skpx_grpc_call *call, void *ud)
{
    struct collector *c = ud;
    int st = collector_on_start(call, ud);
    if (st == SKPX_GRPC_OK)
        c->metrics->snapshot_streams++;
    return st;
}

static int snap_on_message(struct skpx_grpc_call *call, void *ud, const ProtobufCMessage *msg,
                           const uint8_t *raw, size_t raw_len)
{
    (void)raw;
    (void)raw_len;
    struct collector *c = ud;
    const Skywalking__V3__ThreadSnapshot *ts = (const void *)msg;
    c->metrics->snapshots_received++;
    struct snap_call *s = snap_call_get(call, c);
    if (!s) {
        c->metrics->snapshots_rejected++;
        return SKPX_GRPC_RESOURCE_EXHAUSTED;
    }
    const char *task_id = ts->taskid ? ts->taskid : "";
    const char *seg_id = ts->tracesegmentid ? ts->tracesegmentid : "";
    if (!seg_id[0]) {
        /* Nothing can ever find a snapshot without a segment: count and skip it. */
        c->metrics->snapshots_rejected++;
        return SKPX_GRPC_OK;
    }
    check_task(s, task_id);
    struct store_snapshot *sn = &s->batch[s->n];
    size_t n_frames = ts->stack ? ts->stack->n_codesignatures : 0;
    char **frames = n_frames ? arena_alloc(s, n_frames * sizeof(char *), sizeof(char *)) : NULL;
    char *tid = arena_strdup(s, task_id);
    char *sid = arena_strdup(s, seg_id);
    bool ok = tid && sid && (n_frames == 0 || frames);
    for (size_t i = 0; ok && i < n_frames; i++) {
        frames[i] =
            arena_strdup(s, ts->stack->codesignatures[i] ? ts->stack->codesignatures[i] : "");
        ok = frames[i] != NULL;
    }
    if (!ok) {
        c->metrics->snapshots_rejected += s->n + 1;
        s->n = 0;
        s->failed = true;
        return SKPX_GRPC_RESOURCE_EXHAUSTED;
    }
    sn->task_id = tid;
    sn->segment_id = sid;
    sn->time_ms = ts->time;
    sn->received_ms = collector_now(c);
    sn->sequence = ts->sequence;
    sn->frames = frames;
    sn->n_frames = n_frames;
    sn->weight = 1; /* one dump */
    s->n++;
    size_t used = (s->n * sizeof(*s->batch) + 4095) & ~(size_t)4095; /* pages touched */
    if (used > s->batch_charged) {
        skpx_grpc_call_charge(s->call, (int64_t)(used - s->batch_charged));
        s->batch_charged = used;
    }
    if (s->n >= COLLECTOR_SNAPSHOT_BATCH || s->arena_bytes >= COLLECTOR_SNAPSHOT_BATCH_BYTES ||
        c->buffered_bytes > COLLECTOR_BUFFER_BUDGET_BYTES)
        return snap_flush(s);
    return SKPX_GRPC_OK;
}

static void snap_on_end(struct skpx_grpc_call *call, void *ud)
{
    struct collector *c = ud;
    struct snap_call *s = skpx_grpc_call_get_data(call);
    int st = s ? snap_flush(s) : SKPX_GRPC_OK; /* no data = empty stream: nothing to store */
    (void)c;
    if (st != SKPX_GRPC_OK) {
        skpx_grpc_call_finish(call, NULL, st, "skyprofd: snapshots not stored (storage failure)");
        return;
    }
    skpx_grpc_call_finish(call, collector_empty_commands(), SKPX_GRPC_OK, NULL);
}

static void snap_on_close(struct skpx_grpc_call *call, void *ud, int status)
{
    struct collector *c = ud;
    struct snap_call *s = collector_call_take(call);
    if (status != SKPX_GRPC_OK)
        c->metrics->snapshot_streams_failed++;
    if (s) {
        /* Buffered but never acknowledged (client vanished or the call failed). */
        c->metrics->snapshots_rejected += s->n;
        snap_call_free(s);
    }
}

COLLECTOR_UNARY_ON_MESSAGE(on_query, query)
COLLECTOR_UNARY_ON_MESSAGE(on_finish, finish)

static const struct collector_unary_route routes[] = {
    {PATHS("getProfileTaskCommands"), &skywalking__v3__profile_task_command_query__descriptor,
     on_query},
    {PATHS("reportTaskFinish"), &skywalking__v3__profile_task_finish_report__descriptor, on_finish},
};

skp_err collector_profile_register(struct collector *c, struct skpx_grpc_server *srv)
{
    skp_err err = collector_add_unary(c, srv, routes, sizeof(routes) / sizeof(routes[0]));
    if (err)
        return err;
    struct skpx_grpc_method s = {
        .client_streaming = true,
        .request_desc = &skywalking__v3__thread_snapshot__descriptor,
        .on_start = snap_on_start,
        .on_message = snap_on_message,
        .on_end = snap_on_end,
        .on_close = snap_on_close,
        .ud = c,
    };
    err = collector_add(srv, PATHS("collectSnapshot"), s);
    if (err)
        return err;
    struct skpx_grpc_method g = {
        .client_streaming = true,
        .request_desc = &skywalking__v3__go_profile_data__descriptor,
        .on_start = collector_on_start,
        .on_message = collector_goprofile_on_message, /* collector_goprofile.c */
        .on_end = collector_goprofile_on_end,
        .on_close = collector_goprofile_on_close,
        .ud = c,
    };
    /* goProfileReport has no compat path (spec §1.2). */
    return collector_add(srv, "/skywalking.v3.ProfileTask/goProfileReport", NULL, g);
}
