/* channel.c - the agent's one permanent thread, skp-channel. It owns the backend connection
 * (through the transport) and does, each when due: task start/stop decisions; heartbeat
 * (reportInstanceProperties at the first successful beat and every 10th, then keepAlive in
 * every beat, as SkyWalking's Python agent does); getProfileTaskCommands with the lastCommandTime
 * cursor; one collectSnapshot stream
 * every 500 ms when snapshots are queued; one TraceSegmentReportService/collect stream every
 * second when segments are queued; reportTaskFinish for stopped tasks (kept and retried while the
 * backend is down). When the backend is down the transport fails fast during its capped
 * exponential backoff, and polls back off too; the host never waits on any of it.
 * Design: one thread, woken by a monotonic condition variable (deadline, stop, or add_task). */
#include "agent/agent_int.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent_thread.h"
#include "agent/reporter.h"
#include "common/clock.h"
#include "common/log.h"
#include "management/Management.pb-c.h"
#include "profile/Pprof.pb-c.h"

#define MS (1000000LL)
#define POLL_RETRY_MIN_MS 1000
#define BEAT_RETRY_MS 1000
#define CHANNEL_MAX_SLEEP_MS 1000 /* bounds the effect of wall-clock jumps on task times */

static void note_connects(skyprof_agent *a)
{
    if (!a->tr.connects)
        return;
    uint64_t c = a->tr.connects(a->tr.ud);
    if (c > 1)
        atomic_store(&a->reconnects, c - 1);
}

static void handle_commands(skyprof_agent *a, ProtobufCMessage *resp)
{
    if (!resp)
        return;
    pthread_mutex_lock(&a->lock);
    skp__command_service_receive(&a->cs, (Skywalking__V3__Commands *)resp);
    (void)skp__agent_run_tasks_locked(a, skp__now_ms(a->clock));
    pthread_mutex_unlock(&a->lock);
    protobuf_c_message_free_unpacked(resp, NULL);
}

skp_err skp__agent_unary_commands(skyprof_agent *a, const char *path, const ProtobufCMessage *req,
                                  ProtobufCMessage **resp, int timeout_ms)
{
    return a->tr.unary(a->tr.ud, path, req, &skywalking__v3__commands__descriptor, resp,
                       timeout_ms);
}

/* --- heartbeat ------------------------------------------------------------------------------ */
static bool has_property(const skyprof_agent *a, const char *key)
{
    for (size_t i = 0; i < a->cfg.n_properties; i++)
        if (strcmp(a->props[i].key, key) == 0)
            return true;
    return false;
}

static skp_err send_properties(skyprof_agent *a, int timeout_ms)
{
    ProtobufCMessage *resp = NULL;
    Skywalking__V3__InstanceProperties p = SKYWALKING__V3__INSTANCE_PROPERTIES__INIT;
    Skywalking__V3__KeyStringValuePair kv[SKP_PROPERTIES_MAX];
    Skywalking__V3__KeyStringValuePair *pk[SKP_PROPERTIES_MAX];
    char pid[24];
    char host[128];
    snprintf(pid, sizeof(pid), "%d", (int)getpid());
    if (gethostname(host, sizeof(host)) != 0)
        snprintf(host, sizeof(host), "localhost");
    host[sizeof(host) - 1] = '\0';
    /* Our defaults; a caller's property of the same key (e.g. the Python agent's "OS Name" =
     * "posix", as SkyWalking's Python agent reports it) replaces the default. */
    const char *fixed[][2] = {
        {"language", a->cfg.language},
        {"OS Name", "Linux"},
        {"hostname", host},
        {"Process No.", pid},
        {"agent", "skyprof " SKP_VERSION},
    };
    size_t n = 0;
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
        if (has_property(a, fixed[i][0]))
            continue;
        skywalking__v3__key_string_value_pair__init(&kv[n]);
        kv[n].key = (char *)fixed[i][0];
        kv[n].value = (char *)fixed[i][1];
        pk[n] = &kv[n];
        n++;
    }
    for (size_t i = 0; i < a->cfg.n_properties && n < SKP_PROPERTIES_MAX; i++) {
        skywalking__v3__key_string_value_pair__init(&kv[n]);
        kv[n].key = (char *)a->props[i].key;
        kv[n].value = (char *)a->props[i].value;
        pk[n] = &kv[n];
        n++;
    }
    p.service = a->cfg.service;
    p.serviceinstance = a->cfg.instance;
    p.n_properties = n;
    p.properties = pk;
    skp_err err = skp__agent_unary_commands(a, SKP_PATH_PROPERTIES, &p.base, &resp, timeout_ms);
    if (err)
        return err;
    handle_commands(a, resp);
    return SKP_OK;
}

/* One heartbeat, as SkyWalking's agents do it: reportInstanceProperties at the first beat and
 * every 10th, then keepAlive in every beat (so the first keepAlive goes out at once). */
static skp_err send_beat(skyprof_agent *a, int timeout_ms)
{
    if (a->n_beats_ok % SKP_PROPERTIES_EVERY_N_BEATS == 0) {
        skp_err err = send_properties(a, timeout_ms);
        if (err)
            return err;
    }
    ProtobufCMessage *resp = NULL;
    Skywalking__V3__InstancePingPkg ping = SKYWALKING__V3__INSTANCE_PING_PKG__INIT;
    ping.service = a->cfg.service;
    ping.serviceinstance = a->cfg.instance;
    skp_err err = skp__agent_unary_commands(a, SKP_PATH_KEEPALIVE, &ping.base, &resp, timeout_ms);
    if (err)
        return err;
    a->n_beats_ok++;
    atomic_fetch_add(&a->heartbeats_sent, 1);
    /* The OAP puts no commands into heartbeat answers; if a backend does, honour them. */
    handle_commands(a, resp);
    return SKP_OK;
}

/* --- task poll ------------------------------------------------------------------------------ */
static skp_err send_poll(skyprof_agent *a, int timeout_ms)
{
    Skywalking__V3__ProfileTaskCommandQuery q = SKYWALKING__V3__PROFILE_TASK_COMMAND_QUERY__INIT;
    q.service = a->cfg.service;
    q.serviceinstance = a->cfg.instance;
    pthread_mutex_lock(&a->lock);
    q.lastcommandtime = a->ts.last_command_time;
    pthread_mutex_unlock(&a->lock);
    ProtobufCMessage *resp = NULL;
    skp_err err = skp__agent_unary_commands(a, SKP_PATH_GET_TASKS, &q.base, &resp, timeout_ms);
    if (err)
        return err;
    atomic_fetch_add(&a->polls_sent, 1);
    handle_commands(a, resp);
    return SKP_OK;
}

/* --- process profiling: poll and upload ----------------------------------------------------- */
static skp_err send_pprof_poll(skyprof_agent *a, int timeout_ms)
{
    Skywalking__V10__PprofTaskCommandQuery q = SKYWALKING__V10__PPROF_TASK_COMMAND_QUERY__INIT;
    q.service = a->cfg.service;
    q.serviceinstance = a->cfg.instance;
    q.lastcommandtime = skp__proc_runner_cursor(&a->proc);
    ProtobufCMessage *resp = NULL;
    skp_err err = skp__agent_unary_commands(a, SKP_PATH_PPROF_TASKS, &q.base, &resp, timeout_ms);
    if (err)
        return err;
    handle_commands(a, resp);
    return SKP_OK;
}

/* Drops an answer after this many failed attempts (the backend refuses it for good). */
#define PROC_UPLOAD_ATTEMPTS_MAX 5

struct proc_feed {
    const struct skp__proc_upload *u;
    skyprof_agent *a;
    int stage; /* 0 metadata, 1 waiting for the answer, 2 content */
    size_t off;
    int status; /* the server's answer, -1 = none yet */
    Skywalking__V10__PprofData msg;
    Skywalking__V10__PprofMetaData meta;
};

static int proc_next(void *ud, const ProtobufCMessage *resp, const ProtobufCMessage **out)
{
    struct proc_feed *f = ud;
    skywalking__v10__pprof_data__init(&f->msg);
    if (f->stage == 0) {
        skywalking__v10__pprof_meta_data__init(&f->meta);
        f->meta.service = f->a->cfg.service;
        f->meta.serviceinstance = f->a->cfg.instance;
        f->meta.taskid = (char *)f->u->task_id;
        if (f->u->error[0]) {
            f->meta.type = SKYWALKING__V10__PPROF_PROFILING_STATUS__PPROF_EXECUTION_TASK_ERROR;
            f->msg.result_case = SKYWALKING__V10__PPROF_DATA__RESULT_ERROR_MESSAGE;
            f->msg.errormessage = (char *)f->u->error;
        } else {
            f->meta.type = SKYWALKING__V10__PPROF_PROFILING_STATUS__PPROF_PROFILING_SUCCESS;
            f->meta.contentsize = (int32_t)f->u->file_len;
        }
        f->msg.metadata = &f->meta;
        f->stage = 1;
        *out = &f->msg.base;
        return 1;
    }
    if (f->stage == 1) {
        if (f->u->error[0])
            return 0; /* an error answer is the metadata alone */
        if (!resp)
            return 2; /* metadata first: wait for SUCCESS or TERMINATED_BY_OVERSIZE */
        f->status = (int)((const Skywalking__V10__PprofCollectionResponse *)resp)->status;
        if (f->status != SKYWALKING__V10__PPROF_PROFILING_STATUS__PPROF_PROFILING_SUCCESS)
            return 0; /* refused: send nothing more */
        f->stage = 2;
    }
    if (f->off >= f->u->file_len)
        return 0;
    size_t n = f->u->file_len - f->off;
    if (n > SKP_PROC_CHUNK_BYTES)
        n = SKP_PROC_CHUNK_BYTES;
    f->msg.result_case = SKYWALKING__V10__PPROF_DATA__RESULT_CONTENT;
    f->msg.content.data = (uint8_t *)f->u->file + f->off;
    f->msg.content.len = n;
    f->off += n;
    *out = &f->msg.base;
    return 1;
}

static void send_proc_upload(skyprof_agent *a, int timeout_ms)
{
    struct skp__proc_upload u;
    if (!skp__proc_upload_peek(&a->proc, &u))
        return;
    if (u.continuous) {
        /* a threshold-triggered task: its stacks go to collectProfilingData (cont_agent.c) */
        if (skp__cont_upload(a, &u, timeout_ms * 6))
            skp__proc_upload_done(&a->proc, &u, true, false);
        return;
    }
    if (!a->tr.stream_gated)
        return;
    struct proc_feed f = {.u = &u, .a = a, .status = -1};
    ProtobufCMessage *resp = NULL;
    /* A 30 MiB file at a slow link needs more than the unary deadline; the Go agent uses 60 s. */
    skp_err err = a->tr.stream_gated(a->tr.ud, SKP_PATH_PPROF_COLLECT, proc_next, &f,
                                     &skywalking__v10__pprof_collection_response__descriptor, &resp,
                                     timeout_ms * 6);
    int status = f.status;
    if (!err && resp)
        status = (int)((Skywalking__V10__PprofCollectionResponse *)resp)->status;
    if (resp)
        protobuf_c_message_free_unpacked(resp, NULL);
    bool oversize = status == SKYWALKING__V10__PPROF_PROFILING_STATUS__PPROF_TERMINATED_BY_OVERSIZE;
    if (err) {
        a->proc_upload_failures++;
        SKPX_DEBUG("skyprof: process profile upload of task %.80s failed: %s", u.task_id,
                   skp_strerror(err));
        if (a->proc_upload_failures < PROC_UPLOAD_ATTEMPTS_MAX) {
            skp__proc_upload_done(&a->proc, &u, false, false);
            return;
        }
        SKPX_WARN("skyprof: dropping the process profile of task %.80s after %d failed uploads",
                  u.task_id, a->proc_upload_failures);
    }
    a->proc_upload_failures = 0;
    if (oversize)
        SKPX_WARN("skyprof: backend refused the %zu-byte profile of task %.80s as too large",
                  u.file_len, u.task_id);
    /* The failed-for-good case counts as done too: the answer is dropped. */
    skp__proc_upload_done(&a->proc, &u, true, oversize);
}

/* The end of a stream that carried `pulled` messages: counted as sent and the answer's commands
 * run, or, when the stream failed, counted as dropped (what was pulled into it is lost). Returns
 * err. */
static skp_err stream_end(skyprof_agent *a, skp_err err, int pulled, _Atomic uint64_t *sent,
                          _Atomic uint64_t *dropped, ProtobufCMessage *resp)
{
    if (err) {
        atomic_fetch_add(dropped, (uint64_t)pulled);
        return err;
    }
    atomic_fetch_add(sent, (uint64_t)pulled);
    handle_commands(a, resp);
    return SKP_OK;
}

/* --- snapshot stream ------------------------------------------------------------------------ */
struct snap_feed {
    skyprof_agent *a;
    struct skp__snapshot *cur;
    struct skp__pb_snapshot pb;
    int pulled;
};

static void snap_feed_release(struct snap_feed *f)
{
    skp__pb_snapshot_cleanup(&f->pb);
    skp__snapshot_free(f->cur);
    f->cur = NULL;
}

static int snap_next(void *ud, const ProtobufCMessage **msg)
{
    struct snap_feed *f = ud;
    snap_feed_release(f);
    while (f->pulled < SKP_STREAM_BATCH_MAX) {
        struct skp__snapshot *s = skp__snapshot_queue_pop(&f->a->snaps);
        if (!s)
            return 0;
        if (skp__reporter_snapshot_pb(s, &f->a->sym, &f->a->source, &f->pb)) {
            skp__pb_snapshot_cleanup(&f->pb);
            skp__snapshot_free(s);
            atomic_fetch_add(&f->a->snapshots_send_dropped, 1);
            continue;
        }
        f->cur = s;
        f->pulled++;
        *msg = &f->pb.msg.base;
        return 1;
    }
    return 0;
}

static skp_err send_snapshots(skyprof_agent *a, int timeout_ms)
{
    if (skp__ring_size(&a->snaps.ring) == 0)
        return SKP_OK;
    struct snap_feed f = {.a = a};
    ProtobufCMessage *resp = NULL;
    pthread_mutex_lock(&a->src_lock);
    skp_err err = a->tr.stream(a->tr.ud, SKP_PATH_COLLECT_SNAPSHOT, snap_next, &f,
                               &skywalking__v3__commands__descriptor, &resp, timeout_ms);
    snap_feed_release(&f);
    pthread_mutex_unlock(&a->src_lock);
    return stream_end(a, err, f.pulled, &a->snapshots_sent, &a->snapshots_send_dropped, resp);
}

/* --- segment stream ------------------------------------------------------------------------- */
struct seg_feed {
    skyprof_agent *a;
    struct skp__finished_segment *cur;
    struct skp__pb_segment pb;
    int pulled;
};

static void seg_feed_release(struct seg_feed *f)
{
    skp__pb_segment_cleanup(&f->pb);
    skp__finished_segment_free(f->cur);
    f->cur = NULL;
}

static int seg_next(void *ud, const ProtobufCMessage **msg)
{
    struct seg_feed *f = ud;
    seg_feed_release(f);
    const struct skp__tracer_conf *conf = atomic_load(&f->a->hub->conf);
    while (f->pulled < SKP_STREAM_BATCH_MAX) {
        struct skp__finished_segment *fs = skp__ring_pop(&f->a->hub->segments);
        if (!fs)
            return 0;
        if (!conf || fs->epoch != conf->epoch ||
            skp__reporter_segment_pb(fs, f->a->cfg.service, f->a->cfg.instance, &f->pb)) {
            skp__pb_segment_cleanup(&f->pb);
            skp__finished_segment_free(fs); /* from an earlier agent, or no memory */
            continue;
        }
        f->cur = fs;
        f->pulled++;
        *msg = &f->pb.msg.base;
        return 1;
    }
    return 0;
}

static skp_err send_segments(skyprof_agent *a, int timeout_ms)
{
    if (!a->hub->segments_ready || skp__ring_size(&a->hub->segments) == 0)
        return SKP_OK;
    struct seg_feed f = {.a = a};
    ProtobufCMessage *resp = NULL;
    skp_err err = a->tr.stream(a->tr.ud, SKP_PATH_SEGMENTS, seg_next, &f,
                               &skywalking__v3__commands__descriptor, &resp, timeout_ms);
    seg_feed_release(&f);
    return stream_end(a, err, f.pulled, &a->segments_sent, &a->segments_send_dropped, resp);
}

/* --- finish reports ------------------------------------------------------------------------- */
static void send_finishes(skyprof_agent *a, int timeout_ms)
{
    for (;;) {
        char id[SKP_TASK_ID_MAX];
        pthread_mutex_lock(&a->lock);
        if (a->n_finish == 0) {
            pthread_mutex_unlock(&a->lock);
            return;
        }
        memcpy(id, a->finish_q[0], sizeof(id));
        pthread_mutex_unlock(&a->lock);
        Skywalking__V3__ProfileTaskFinishReport r =
            SKYWALKING__V3__PROFILE_TASK_FINISH_REPORT__INIT;
        r.service = a->cfg.service;
        r.serviceinstance = a->cfg.instance;
        r.taskid = id;
        ProtobufCMessage *resp = NULL;
        skp_err err =
            skp__agent_unary_commands(a, SKP_PATH_TASK_FINISH, &r.base, &resp, timeout_ms);
        if (err)
            return; /* kept; retried at the next step */
        atomic_fetch_add(&a->finish_sent, 1);
        if (resp)
            protobuf_c_message_free_unpacked(resp, NULL);
        pthread_mutex_lock(&a->lock);
        if (a->n_finish > 0 && strcmp(a->finish_q[0], id) == 0) {
            memmove(a->finish_q[0], a->finish_q[1], (size_t)(a->n_finish - 1) * SKP_TASK_ID_MAX);
            a->n_finish--;
        }
        pthread_mutex_unlock(&a->lock);
    }
}

/* --- the step ------------------------------------------------------------------------------- */
static int64_t min64(int64_t x, int64_t y)
{
    return x < y ? x : y;
}

int64_t skp__channel_step(skyprof_agent *a, int64_t now_ns, bool flush, int timeout_ms)
{
    pthread_mutex_lock(&a->lock);
    int64_t now_ms = skp__now_ms(a->clock);
    int64_t next_task_ms = skp__agent_run_tasks_locked(a, now_ms);
    pthread_mutex_unlock(&a->lock);

    if (!flush && now_ns >= a->next_beat_ns) {
        skp_err err = send_beat(a, timeout_ms);
        a->next_beat_ns = now_ns + (err ? BEAT_RETRY_MS * MS : a->cfg.heartbeat_period_ms * MS);
        /* Logged on transitions only, so a long outage is one line, not one per second. */
        if (err && a->backend_state != 2) {
            SKPX_WARN("skyprof: backend %.100s unreachable (%s); retrying with backoff",
                      a->tr.current ? a->tr.current(a->tr.ud) : a->cfg.backend, skp_strerror(err));
            a->backend_state = 2;
        } else if (!err && a->backend_state != 1) {
            SKPX_INFO("skyprof: connected to backend %.100s",
                      a->tr.current ? a->tr.current(a->tr.ud) : a->cfg.backend);
            a->backend_state = 1;
        }
    }
    if (a->cfg.profile_active && !flush && now_ns >= a->next_poll_ns) {
        skp_err err = send_poll(a, timeout_ms);
        if (err) {
            int64_t d = POLL_RETRY_MIN_MS << (a->poll_failures < 8 ? a->poll_failures : 8);
            a->poll_failures++;
            a->next_poll_ns = now_ns + min64(d, a->cfg.poll_interval_ms) * MS;
            SKPX_DEBUG("skyprof: task poll failed: %s", skp_strerror(err));
        } else {
            a->poll_failures = 0;
            a->next_poll_ns = now_ns + a->cfg.poll_interval_ms * MS;
        }
        /* Process tasks are polled beside trace tasks, on the same schedule (a backend without
         * one of the two services still serves the other). */
        if (a->tr.stream_gated && (!err || err == SKP_EGRPC)) {
            skp_err perr = send_pprof_poll(a, timeout_ms);
            if (perr)
                SKPX_DEBUG("skyprof: pprof task poll failed: %s", skp_strerror(perr));
        }
        /* Continuous-profiling policies, on the same schedule (cont_agent.h). */
        if (!err || err == SKP_EGRPC) {
            skp_err cerr = skp__cont_poll(a, timeout_ms);
            if (cerr)
                SKPX_DEBUG("skyprof: continuous policy query failed: %s", skp_strerror(cerr));
        }
    }
    int64_t next_cont = flush ? INT64_MAX : skp__cont_step(a, now_ns, timeout_ms);
    send_proc_upload(a, timeout_ms);
    if (flush || now_ns >= a->next_snap_ns) {
        (void)send_snapshots(a, timeout_ms);
        a->next_snap_ns = now_ns + SKP_SNAPSHOT_SEND_PERIOD_MS * MS;
    }
    if (flush || now_ns >= a->next_seg_ns) {
        (void)send_segments(a, timeout_ms);
        a->next_seg_ns = now_ns + SKP_SEGMENT_SEND_PERIOD_MS * MS;
    }
    send_finishes(a, timeout_ms);
    note_connects(a);

    int64_t next = min64(a->next_beat_ns, a->next_snap_ns);
    next = min64(next, a->next_seg_ns);
    if (a->cfg.profile_active)
        next = min64(next, a->next_poll_ns);
    next = min64(next, next_cont);
    int64_t after = skp__now_ms(a->clock);
    if (next_task_ms != INT64_MAX)
        next = min64(next, now_ns + (next_task_ms - after) * MS);
    next = min64(next, now_ns + CHANNEL_MAX_SLEEP_MS * MS);
    pthread_mutex_lock(&a->lock);
    int n_finish = a->n_finish;
    pthread_mutex_unlock(&a->lock);
    if (n_finish)
        next = min64(next, now_ns + BEAT_RETRY_MS * MS);
    return next;
}

static bool queues_empty(skyprof_agent *a)
{
    pthread_mutex_lock(&a->lock);
    int nf = a->n_finish;
    pthread_mutex_unlock(&a->lock);
    struct skp__proc_upload u;
    if (a->tr.stream_gated && skp__proc_upload_peek(&a->proc, &u))
        return false;
    return nf == 0 && skp__ring_size(&a->snaps.ring) == 0 &&
           (!a->hub->segments_ready || skp__ring_size(&a->hub->segments) == 0);
}

static void *channel_main(void *arg)
{
    skyprof_agent *a = arg;
    pthread_mutex_lock(&a->mu);
    while (!a->stop_requested) {
        a->wake = false;
        pthread_mutex_unlock(&a->mu);
        int64_t next = skp__channel_step(a, skpx_mono_ns(), false, SKP_RPC_TIMEOUT_MS);
        pthread_mutex_lock(&a->mu);
        while (!a->stop_requested && !a->wake && skpx_mono_ns() < next)
            skp__cond_wait_until(&a->cv, &a->mu, next);
    }
    int64_t deadline = a->flush_deadline_ns;
    pthread_mutex_unlock(&a->mu);

    /* Stop: end the task (its finish report is queued), then flush within the deadline. */
    pthread_mutex_lock(&a->lock);
    skp__agent_stop_task_locked(a);
    pthread_mutex_unlock(&a->lock);
    /* A running process task ends now and its (shorter) profile is flushed like the rest. */
    skp__proc_runner_request_stop(&a->proc);
    for (int round = 0; round < 4; round++) {
        int64_t left_ms = (deadline - skpx_mono_ns()) / MS;
        while (left_ms > 0 && skp__proc_runner_busy(&a->proc) &&
               !skp__proc_upload_peek(&a->proc, &(struct skp__proc_upload){0})) {
            skpx_sleep_ns(MS); /* skp-proc is encoding its file: bounded by the deadline */
            left_ms = (deadline - skpx_mono_ns()) / MS;
        }
        if (left_ms <= 0 || queues_empty(a))
            break;
        (void)skp__channel_step(a, skpx_mono_ns(), true, (int)min64(left_ms, SKP_RPC_TIMEOUT_MS));
    }
    return NULL;
}

skp_err skp__channel_start(skyprof_agent *a)
{
    a->stop_requested = false;
    skp_err err = skp__thread_start(&a->thread, "skp-channel", channel_main, a);
    if (!err)
        a->thread_running = true;
    return err;
}

void skp__channel_stop(skyprof_agent *a, int flush_deadline_ms)
{
    if (!a->thread_running)
        return;
    pthread_mutex_lock(&a->mu);
    a->stop_requested = true;
    int64_t flush_ms = flush_deadline_ms > 0 ? flush_deadline_ms : 0;
    a->flush_deadline_ns = skpx_mono_ns() + flush_ms * MS;
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
    pthread_join(a->thread, NULL);
    a->thread_running = false;
}
