/* agent.c - agent lifecycle (start, stop, fork), task execution, stats and the public glue.
 * The process has at most one current agent; request threads reach it only through the tracer
 * hub (tracer.h), never through this object, so stop can free it while requests run.
 * fork: the prepare handler waits until the agent threads are idle (the fork gate,
 * agent_thread.h); the child handler switches the inherited agent off (its threads do not exist
 * in the child, its socket belongs to the parent) and, when configured, starts a fresh one. */
#include "agent/agent_int.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent_thread.h"
#include "agent/config.h"
#include "agent/default_source.h"
#include "common/alloc.h"
#include "common/log.h"

static _Atomic(skyprof_agent *) g_current;
static skyprof_agent *g_forked; /* child only: the parent's agent, inherited, switched off */
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;
static _Atomic uint64_t g_epoch;
static int g_local_task_seq;

/* The user's sink, copied out of the agent: a log line formatted on another thread may still be
 * delivered just after stop freed the agent, so the adapter must not read the agent. */
static _Atomic(skyprof_log_cb) g_log_cb;
static _Atomic(void *) g_log_ud;

static void log_adapter(void *ud, enum skpx_log_level level, const char *line)
{
    (void)ud;
    skyprof_log_cb cb = atomic_load(&g_log_cb);
    if (cb)
        cb(atomic_load(&g_log_ud), (enum skyprof_log_level)level, line);
}

/* --- tasks ---------------------------------------------------------------------------------- */
static void queue_finish(skyprof_agent *a, const char *task_id)
{
    if (a->n_finish >= SKP_FINISH_QUEUE_MAX) {
        SKPX_WARN("skyprof: finish report queue full, dropping report of task %.100s", task_id);
        return;
    }
    snprintf(a->finish_q[a->n_finish++], SKP_TASK_ID_MAX, "%s", task_id);
}

/* Ends sampling of the task the task service let go and queues its finish report. */
static void end_task(skyprof_agent *a, const char *task_id)
{
    skp__sampler_stop(&a->sampler);
    skp__task_ctx_stop(&a->hub->ctx);
    atomic_store(&a->task_active, false);
    queue_finish(a, task_id);
}

void skp__agent_stop_task_locked(skyprof_agent *a)
{
    struct skp__task_action act;
    if (!skp__task_service_stop_active(&a->ts, &act))
        return;
    end_task(a, act.task.task_id);
    SKPX_INFO("skyprof: profile task %.100s stopped", act.task.task_id);
}

int64_t skp__agent_run_tasks_locked(skyprof_agent *a, int64_t now_ms)
{
    struct skp__task_action act;
    int64_t next = INT64_MAX;
    for (;;) {
        enum skp__task_action_kind k = skp__task_service_next(&a->ts, now_ms, &act, &next);
        if (k == SKP_TASK_ACTION_NONE)
            break;
        if (k == SKP_TASK_ACTION_STOP) {
            end_task(a, act.task.task_id);
            SKPX_INFO("skyprof: profile task %.100s %s", act.task.task_id,
                      act.preempted ? "preempted" : "finished");
            continue;
        }
        skp__task_ctx_start(&a->hub->ctx, &act.task, a->cfg.max_parallel,
                            a->source.capture ? &a->source : NULL);
        skp_err err = skp__sampler_start(&a->sampler, act.task.dump_period_ms, act.stop_at_ms);
        if (err) {
            /* No sampler thread: the task still runs its window (requests take slots, nothing
             * is captured) and is reported finished at its end. */
            SKPX_ERROR("skyprof: cannot start the sampler: %s", skp_strerror(err));
        }
        atomic_store(&a->task_active, true);
        SKPX_INFO("skyprof: profile task %.100s started (endpoint %.200s, period %d ms)",
                  act.task.task_id, act.task.endpoint, act.task.dump_period_ms);
    }
    return next;
}

/* --- lifecycle ------------------------------------------------------------------------------ */
static skp_err copy_props(skyprof_agent *a, const struct skyprof_config *cfg)
{
    size_t text = 0;
    for (size_t i = 0; i < cfg->n_properties; i++)
        text += strlen(cfg->properties[i].key) + strlen(cfg->properties[i].value) + 2;
    a->cfg.properties = NULL;
    a->cfg.n_properties = 0;
    if (cfg->n_properties == 0)
        return SKP_OK;
    a->props = skpx_calloc(cfg->n_properties, sizeof(*a->props));
    a->props_mem = skpx_malloc(text);
    if (!a->props || !a->props_mem)
        return SKP_ENOMEM;
    char *p = a->props_mem;
    for (size_t i = 0; i < cfg->n_properties; i++) {
        size_t k = strlen(cfg->properties[i].key) + 1;
        size_t v = strlen(cfg->properties[i].value) + 1;
        memcpy(p, cfg->properties[i].key, k);
        a->props[i].key = p;
        p += k;
        memcpy(p, cfg->properties[i].value, v);
        a->props[i].value = p;
        p += v;
    }
    a->cfg.properties = a->props;
    a->cfg.n_properties = cfg->n_properties;
    return SKP_OK;
}

static void free_memory(skyprof_agent *a)
{
    skp__sampler_cleanup(&a->sampler);
    skp__snapshot_queue_cleanup(&a->snaps);
    skp__symcache_cleanup(&a->sym);
    SKPX_FREE_ALL(a->props, a->props_mem, a);
}

skp_err skp__agent_new(const struct skyprof_config *cfg, const struct skyprof_stack_source *src,
                       const struct skp__transport *tr, const struct skp__clock *clock,
                       skyprof_agent **out)
{
    *out = NULL;
    skp_err err = skyprof_config_validate(cfg);
    if (err)
        return err;
    if (src && !src->capture)
        return SKP_EINVAL;
    skyprof_agent *a = skpx_calloc(1, sizeof(*a));
    if (!a)
        return SKP_ENOMEM;
    a->cfg = *cfg;
    a->clock = clock ? clock : &skp__clock_real;
    a->hub = skp__hub();
    a->pid = getpid();
    if (!a->cfg.instance[0]) {
        skp__config_gen_instance(a->cfg.instance, sizeof(a->cfg.instance));
        a->instance_generated = true;
    }
    if (src)
        a->source = *src;
    err = copy_props(a, cfg);
    if (!err)
        err = skp__snapshot_queue_init(&a->snaps, (size_t)cfg->snapshot_buffer_size,
                                       SKP_SNAPSHOT_QUEUE_BYTES_MAX);
    if (!err)
        err = skp__symcache_init(&a->sym);
    if (!err)
        err = skp__sampler_init(&a->sampler, &a->hub->ctx, &a->snaps, a->clock,
                                (uint32_t)cfg->max_stack_depth, cfg->max_profiling_ms);
    if (!err)
        err = skp__proc_runner_init(&a->proc, (uint32_t)cfg->max_stack_depth);
    if (err) {
        free_memory(a); /* also a sampler that started before the proc runner failed */
        return err;
    }
    pthread_mutex_init(&a->lock, NULL);
    pthread_mutex_init(&a->mu, NULL);
    pthread_mutex_init(&a->src_lock, NULL);
    if (skp__cond_init_mono(&a->cv)) {
        pthread_mutex_destroy(&a->lock);
        pthread_mutex_destroy(&a->mu);
        pthread_mutex_destroy(&a->src_lock);
        skp__proc_runner_cleanup(&a->proc);
        free_memory(a);
        return SKP_EIO;
    }
    skp__task_service_init(&a->ts, cfg->min_dump_period_ms);
    skp__command_dispatch_init(&a->disp);
    err = skp__command_dispatch_register(&a->disp, SKP_PROFILE_TASK_COMMAND,
                                         skp__profile_command_exec, &a->ts);
    (void)err; /* the table is empty here: cannot be full */
    err = skp__command_dispatch_register(&a->disp, SKP_PPROF_TASK_COMMAND, skp__pprof_command_exec,
                                         &a->proc);
    (void)err; /* second of SKP_COMMAND_EXECUTORS_MAX entries */
    skp__command_service_init(&a->cs, &a->disp);
    skp__cont_agent_init(&a->cont);
    a->tr = *tr;
    a->hub_dropped_base = atomic_load(&a->hub->segments_dropped);
    a->slots_taken_base = atomic_load(&a->hub->ctx.n_slots_taken);
    *out = a;
    return SKP_OK;
}

void skp__agent_free(skyprof_agent *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->lock);
    skp__agent_stop_task_locked(a);
    pthread_mutex_unlock(&a->lock);
    skp__proc_runner_cleanup(&a->proc); /* joins skp-proc; before the stack source goes */
    skp__cont_agent_cleanup(&a->cont);
    if (a->tr.destroy)
        a->tr.destroy(a->tr.ud);
    if (a->source.destroy)
        a->source.destroy(a->source.ud);
    pthread_mutex_destroy(&a->lock);
    pthread_mutex_destroy(&a->mu);
    pthread_mutex_destroy(&a->src_lock);
    pthread_cond_destroy(&a->cv);
    free_memory(a);
}

static void atfork_child(void);

static void atfork_register(void)
{
    pthread_atfork(skp__fork_gate_prepare, skp__fork_gate_parent, atfork_child);
}

static skp_err start_with(const struct skyprof_config *cfg, const struct skyprof_stack_source *src,
                          skyprof_agent **out)
{
    *out = NULL;
    pthread_once(&g_atfork_once, atfork_register);
    if (g_forked)
        return SKP_ESTATE;
    if (atomic_load(&g_current))
        return SKP_EEXIST;
    skp_err err = skyprof_config_validate(cfg);
    if (err)
        return err;
    struct skyprof_stack_source dflt;
    if (!src) {
        const struct skyprof_stack_source *d = skp__default_stack_source();
        if (d) {
            dflt = *d;
            src = &dflt;
        }
    }
    struct skp__transport tr;
    err = skp__transport_grpc_new(cfg->backend, cfg->authentication, &tr);
    if (err)
        return err;
    skyprof_agent *a = NULL;
    err = skp__agent_new(cfg, src, &tr, NULL, &a);
    if (err) {
        tr.destroy(tr.ud);
        return err;
    }
    const struct skyprof_proc_source *psrc = skp__default_proc_source(src);
    if (psrc) {
        skp_err perr = skp__proc_runner_set_source(&a->proc, psrc);
        (void)perr; /* idle runner, valid source */
    }
    if (cfg->log_sink) {
        atomic_store(&g_log_ud, cfg->log_ud);
        atomic_store(&g_log_cb, cfg->log_sink);
        skpx_log_set_sink(log_adapter, NULL, (enum skpx_log_level)cfg->log_level);
    }
    struct skp__tracer_conf *conf = skpx_calloc(1, sizeof(*conf));
    if (!conf) {
        err = SKP_ENOMEM;
        goto fail;
    }
    conf->epoch = atomic_fetch_add(&g_epoch, 1) + 1;
    snprintf(conf->service, sizeof(conf->service), "%s", a->cfg.service);
    snprintf(conf->instance, sizeof(conf->instance), "%s", a->cfg.instance);
    skp__config_random_hex(conf->id_prefix, sizeof(conf->id_prefix));
    conf->profile_active = a->cfg.profile_active;
    conf->report_segments = a->cfg.report_segments;
    conf->segment_limit = (size_t)a->cfg.segment_buffer_size;
    err = skp__hub_publish(conf);
    if (err) {
        skpx_free(conf);
        goto fail;
    }
    err = skp__channel_start(a);
    if (err) {
        skp_err perr = skp__hub_publish(NULL); /* publishing NULL only swaps the pointer */
        (void)perr;
        goto fail;
    }
    atomic_store(&g_current, a);
    SKPX_INFO("skyprof: agent started (service %.100s, instance %.100s, backend %.100s)",
              a->cfg.service, a->cfg.instance, a->cfg.backend);
    *out = a;
    return SKP_OK;
fail:
    if (cfg->log_sink)
        skpx_log_set_sink(NULL, NULL, SKPX_LOG_ERROR);
    skp__agent_free(a);
    return err;
}

skp_err skyprof_agent_start(const struct skyprof_config *cfg,
                            const struct skyprof_stack_source *src, skyprof_agent **out)
{
    if (!out)
        return SKP_EINVAL;
    *out = NULL;
    if (!cfg)
        return SKP_EINVAL;
    return start_with(cfg, src, out);
}

/* Child side: the agent's threads are gone, its mutexes may be held by them forever, its socket
 * is the parent's. Release only memory (the wire client closes just its fd copy in a child). */
static void forget_inherited(skyprof_agent *a)
{
    struct skp__snapshot *s;
    while ((s = skp__snapshot_queue_pop(&a->snaps)))
        skp__snapshot_free(s);
    if (a->tr.destroy)
        a->tr.destroy(a->tr.ud);
    skp__ring_cleanup(&a->snaps.ring);
    skp__sampler_forget(&a->sampler); /* frames, scratch, held dumps */
    skp__symcache_cleanup(&a->sym);
    skpx_free(a->proc.file); /* the parent's skp-proc does not exist here; its source moves on */
    SKPX_FREE_ALL(a->props, a->props_mem, a);
}

void skyprof_agent_stop(skyprof_agent *a, int flush_deadline_ms)
{
    if (!a)
        return;
    if (a == g_forked) {
        g_forked = NULL;
        forget_inherited(a);
        return;
    }
    skyprof_agent *expect = a;
    atomic_compare_exchange_strong(&g_current, &expect, NULL);
    skp__channel_stop(a, flush_deadline_ms); /* stops the task and flushes */
    skp_err perr = skp__hub_publish(NULL);   /* publishing NULL only swaps the pointer */
    (void)perr;
    if (a->cfg.log_sink)
        skpx_log_set_sink(NULL, NULL, SKPX_LOG_ERROR);
    skp__agent_free(a);
}

skyprof_agent *skyprof_agent_current(void)
{
    return atomic_load(&g_current);
}

static skp_err restart_child(skyprof_agent **out)
{
    skyprof_agent *old = g_forked;
    *out = NULL;
    if (!old)
        return SKP_ESTATE;
    struct skyprof_config cfg = old->cfg;
    size_t base_len = strlen(cfg.instance);
    if (old->instance_generated) {
        cfg.instance[0] = '\0'; /* a new generated name: the child is another instance */
    } else {
        /* A fixed name shared by forked workers gets a per-process suffix "<name>-<pid>" (the
         * parent's own suffix replaced), so workers never merge into one instance. */
        if (old->instance_base_len > 0 && old->instance_base_len < base_len)
            base_len = old->instance_base_len;
        cfg.instance[base_len] = '\0';
        size_t room = sizeof(cfg.instance) - base_len;
        int n = snprintf(cfg.instance + base_len, room, "-%d", (int)getpid());
        if (n < 0 || (size_t)n >= room)
            cfg.instance[base_len] = '\0'; /* no room: keep the plain name */
    }
    struct skyprof_stack_source src = old->source;
    bool has_src = src.capture != NULL;
    /* properties: the old agent's copies stay valid until it is forgotten below, and start
     * copies them */
    struct skyprof_proc_source psrc = old->proc.src;
    bool has_psrc = old->proc.has_src;
    g_forked = NULL;
    skp_err err = start_with(&cfg, has_src ? &src : NULL, out);
    if (!err && !old->instance_generated)
        (*out)->instance_base_len = base_len;
    if (!err && has_psrc) {
        skp_err perr = skp__proc_runner_set_source(&(*out)->proc, &psrc);
        (void)perr; /* idle runner of a new agent; the source was valid in the parent */
    }
    forget_inherited(old);
    return err;
}

skp_err skyprof_agent_restart_after_fork(skyprof_agent **out)
{
    if (!out)
        return SKP_EINVAL;
    return restart_child(out);
}

static void atfork_child(void)
{
    skp__fork_gate_child(); /* before a restart starts threads */
    skyprof_agent *a = atomic_load(&g_current);
    if (!a)
        return;
    atomic_store(&g_current, NULL);
    skp__hub_after_fork_child();
    if (a->cfg.log_sink)
        skpx_log_set_sink(NULL, NULL, SKPX_LOG_ERROR);
    g_forked = a;
    if (a->cfg.restart_in_child) {
        skyprof_agent *n = NULL;
        (void)restart_child(&n);
    }
}

skp_err skyprof_agent_set_stack_source(skyprof_agent *a, const struct skyprof_stack_source *src)
{
    if (!a || !src || !src->capture)
        return SKP_EINVAL;
    pthread_mutex_lock(&a->lock);
    if (atomic_load(&a->task_active)) {
        pthread_mutex_unlock(&a->lock);
        return SKP_ESTATE;
    }
    /* src_lock: the channel thread symbolizes through the source while it streams snapshots */
    pthread_mutex_lock(&a->src_lock);
    struct skyprof_stack_source old = a->source;
    a->source = *src;
    if (old.destroy)
        old.destroy(old.ud);
    pthread_mutex_unlock(&a->src_lock);
    pthread_mutex_unlock(&a->lock);
    return SKP_OK;
}

skp_err skyprof_agent_set_proc_source(skyprof_agent *a, const struct skyprof_proc_source *src)
{
    if (!a)
        return SKP_EINVAL;
    return skp__proc_runner_set_source(&a->proc, src);
}

const char *skyprof_agent_instance(const skyprof_agent *a)
{
    return a ? a->cfg.instance : NULL;
}

skp_err skyprof_agent_add_task(skyprof_agent *a, const struct skyprof_task_spec *spec)
{
    if (!a || !spec || !spec->endpoint)
        return SKP_EINVAL;
    struct skp__task t;
    memset(&t, 0, sizeof(t));
    pthread_mutex_lock(&a->lock);
    if (spec->task_id)
        snprintf(t.task_id, sizeof(t.task_id), "%s", spec->task_id);
    else
        snprintf(t.task_id, sizeof(t.task_id), "local-%d", ++g_local_task_seq);
    snprintf(t.endpoint, sizeof(t.endpoint), "%s", spec->endpoint);
    t.duration_min = spec->duration_min;
    t.min_duration_threshold_ms = spec->min_duration_threshold_ms;
    t.dump_period_ms = spec->dump_period_ms;
    t.max_sampling_count = spec->max_sampling_count;
    int64_t now = skp__now_ms(a->clock);
    t.start_time_ms = spec->start_time_ms ? spec->start_time_ms : now;
    t.create_time_ms = -1; /* local: does not move the backend cursor */
    skp_err err = skp__task_service_add(&a->ts, &t);
    if (!err)
        (void)skp__agent_run_tasks_locked(a, now);
    pthread_mutex_unlock(&a->lock);
    if (err)
        return SKP_EINVAL;
    pthread_mutex_lock(&a->mu);
    a->wake = true;
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
    return SKP_OK;
}

bool skyprof_agent_task_active(const skyprof_agent *a)
{
    return a && atomic_load(&((skyprof_agent *)a)->task_active);
}

bool skyprof_agent_task_endpoint(const skyprof_agent *ca, char *buf, size_t cap)
{
    skyprof_agent *a = (skyprof_agent *)ca;
    if (!a || !buf || cap == 0)
        return false;
    struct skp__task_ctx *ctx = &a->hub->ctx;
    if (!atomic_load_explicit(&ctx->live, memory_order_relaxed))
        return false;
    /* the attempt() protocol: the task struct is stable while we are a user and it is live */
    atomic_fetch_add(&ctx->users, 1);
    bool ok = atomic_load(&ctx->live) != 0;
    if (ok)
        snprintf(buf, cap, "%s", ctx->task.endpoint);
    atomic_fetch_sub(&ctx->users, 1);
    return ok;
}

void skyprof_agent_get_stats(const skyprof_agent *ca, struct skyprof_stats *out)
{
    memset(out, 0, sizeof(*out));
    skyprof_agent *a = (skyprof_agent *)ca;
    if (!a)
        return;
    out->snapshots_captured = atomic_load(&a->sampler.captured);
    out->snapshots_dropped =
        atomic_load(&a->snaps.dropped) + atomic_load(&a->snapshots_send_dropped);
    out->snapshots_sent = atomic_load(&a->snapshots_sent);
    out->capture_failures = atomic_load(&a->sampler.capture_failures);
    out->captures_lost = atomic_load(&a->sampler.capture_lost);
    out->segments_sent = atomic_load(&a->segments_sent);
    out->segments_dropped = atomic_load(&a->hub->segments_dropped) - a->hub_dropped_base +
                            atomic_load(&a->segments_send_dropped);
    out->finish_reports_sent = atomic_load(&a->finish_sent);
    out->reconnects = atomic_load(&a->reconnects);
    out->heartbeats_sent = atomic_load(&a->heartbeats_sent);
    out->polls_sent = atomic_load(&a->polls_sent);
    out->sampler_runs = atomic_load(&a->sampler.runs);
    out->slots_taken = atomic_load(&a->hub->ctx.n_slots_taken) - a->slots_taken_base;
    out->achieved_dump_rate_hz = skp__sampler_rate_hz(&a->sampler);
    pthread_mutex_lock(&a->lock);
    out->commands_received = a->cs.n_received;
    out->commands_ignored = a->cs.n_ignored;
    out->commands_duplicate = a->cs.n_duplicate;
    out->tasks_accepted = a->ts.n_accepted;
    out->tasks_rejected = a->ts.n_rejected;
    out->tasks_finished = a->ts.n_finished;
    out->last_command_time = a->ts.last_command_time;
    snprintf(out->last_reject_reason, sizeof(out->last_reject_reason), "%s",
             a->ts.last_reject_reason);
    pthread_mutex_unlock(&a->lock);
}

/* --- test / bench hooks --------------------------------------------------------------------- */
skp_err skyprof_thread_attach(skyprof_agent *a, void **handle, int *tid)
{
    if (!a || !handle || !tid)
        return SKP_EINVAL;
    *handle = NULL;
    *tid = skp__gettid_cached();
    if (!a->source.capture)
        return SKP_ESTATE;
    if (a->source.thread_attach) {
        *handle = a->source.thread_attach(a->source.ud);
        if (!*handle)
            return SKP_EUNAVAILABLE;
    }
    return SKP_OK;
}

void skyprof_thread_release(skyprof_agent *a, void *handle)
{
    if (a && handle && a->source.thread_release)
        a->source.thread_release(a->source.ud, handle);
}

skp_err skyprof_capture_thread(skyprof_agent *a, void *handle, int tid, char *buf, size_t cap,
                               int *n_frames)
{
    if (!a || !buf || cap == 0)
        return SKP_EINVAL;
    buf[0] = '\0';
    if (n_frames)
        *n_frames = 0;
    if (!a->source.capture || atomic_load(&a->task_active))
        return SKP_ESTATE;
    skp_err err = SKP_OK;
    pthread_mutex_lock(&a->sampler.run_lock);
    struct skyprof_capture c = {
        .frames = a->sampler.frames,
        .cap = a->sampler.max_depth,
        .scratch = a->sampler.scratch,
        .scratch_cap = SKP_CAPTURE_SCRATCH_BYTES,
    };
    struct skp__snapshot *s = NULL;
    if (a->source.capture(a->source.ud, handle, tid, &c) < 0 || c.n == 0)
        err = SKP_EIO;
    else if (!(s = skp__snapshot_new("-", "-", 0, 0, &c, a->sampler.max_depth)))
        err = SKP_ENOMEM;
    pthread_mutex_unlock(&a->sampler.run_lock);
    if (err)
        return err;
    /* symbolize with a private cache: the agent's belongs to the channel thread */
    struct skp__symcache cache;
    err = skp__symcache_init(&cache);
    if (err) {
        skp__snapshot_free(s);
        return err;
    }
    size_t used = 0;
    for (uint32_t i = 0; i < s->n_frames; i++) {
        const struct skp__snap_frame *f = &s->frames[i];
        const char *txt;
        size_t len;
        if (f->kind == SKYPROF_FRAME_ADDR) {
            txt = skp__symcache_get(&cache, &a->source, f->addr);
            len = strlen(txt);
        } else {
            txt = s->text + f->off;
            len = f->len;
        }
        if (used + len + 2 > cap)
            break;
        memcpy(buf + used, txt, len);
        used += len;
        buf[used++] = '\n';
        buf[used] = '\0';
    }
    if (n_frames)
        *n_frames = (int)s->n_frames;
    skp__symcache_cleanup(&cache);
    skp__snapshot_free(s);
    return SKP_OK;
}

skp_err skyprof_agent_sample_now(skyprof_agent *a)
{
    if (!a)
        return SKP_EINVAL;
    pthread_mutex_lock(&a->lock);
    if (!atomic_load(&a->task_active)) {
        pthread_mutex_unlock(&a->lock);
        return SKP_ESTATE;
    }
    skp__sampler_run_once(&a->sampler, skp__now_ms(a->clock));
    pthread_mutex_unlock(&a->lock);
    return SKP_OK;
}
