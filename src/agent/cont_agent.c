/* cont_agent.c - continuous profiling on the channel thread (see cont_agent.h).
 *
 * Design: everything here runs on skp-channel between its other duties, so a slot costs one
 * wake-up a second only while a policy exists; with no policy the only work is the policy query
 * on the task-poll schedule. The trigger's RPCs (reportProfilingTask, reportProcesses) are made
 * inline like every other channel RPC; the profile itself is taken by the process-profiling
 * runner's thread (skp-proc), which exists only while a task runs. The result stays a pprof
 * builder (proc_task.h, spec.continuous) and is streamed from it here, one message per distinct
 * stack, without copying the profile. */
#include "agent/cont_agent.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent_int.h"
#include "agent/command_dispatch.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/log.h"
#include "common/procfs.h"
#include "ebpf/profiling/ContinuousProfiling.pb-c.h"
#include "ebpf/profiling/Process.pb-c.h"
#include "ebpf/profiling/Profile.pb-c.h"
#include "wire/pprof_encode.h"

#define SKP_PATH_CONT_POLICIES "/skywalking.v3.ContinuousProfilingService/queryPolicies"
#define SKP_PATH_CONT_REPORT "/skywalking.v3.ContinuousProfilingService/reportProfilingTask"
#define SKP_PATH_EBPF_PROCESSES "/skywalking.v3.EBPFProcessService/reportProcesses"
#define SKP_PATH_EBPF_KEEPALIVE "/skywalking.v3.EBPFProcessService/keepAlive"
#define SKP_PATH_EBPF_COLLECT "/skywalking.v3.EBPFProfilingService/collectProfilingData"

#define MS (1000000LL)
/* A finished task's upload is dropped after this many failed attempts. */
#define UPLOAD_ATTEMPTS_MAX 5
/* Text of one stack's symbols (SKPX_PPROF_MAX_FRAMES frames of at most SKP_SYMBOL_MAX). */
#define SYMBOL_TEXT_MAX ((size_t)SKPX_PPROF_MAX_FRAMES * 96)
#define LAYER "GENERAL"
/* The profiler's sampling period for these tasks (spec.sampling_hz 0 = its default rate). */
#define SKP_CONT_PERIOD_NS (1000000000LL / SKP_PROC_DEFAULT_HZ)

void skp__cont_agent_init(struct skp__cont_agent *c)
{
    memset(c, 0, sizeof(*c));
    skp__cont_eval_init(&c->eval);
    c->env_execute_s = (int)skpx_env_int("SKYPROF_CONT_EXECUTE_S", 1, 86400);
    c->env_silence_s = (int)skpx_env_int("SKYPROF_CONT_SILENCE_S", 1, 86400);
    int slot_ms = (int)skpx_env_int("SKYPROF_CONT_SLOT_MS", 10, 60000);
    c->slot_ns = (slot_ms ? slot_ms : 1000) * MS;
}

void skp__cont_agent_cleanup(struct skp__cont_agent *c)
{
    if (c->has_policy && skp__cont_policy_has_http(c->eval.pol))
        skp__cont_http_enable(false);
    skp__cont_eval_cleanup(&c->eval);
    c->has_policy = false;
}

static const char *process_name(void)
{
    return program_invocation_short_name && program_invocation_short_name[0]
               ? program_invocation_short_name
               : "process";
}

/* ---- policy --------------------------------------------------------------------------------- */
static void apply_policy(skyprof_agent *a, const struct skp__cont_policy *p)
{
    struct skp__cont_agent *c = &a->cont;
    bool had_http = c->has_policy && c->eval.pol && skp__cont_policy_has_http(c->eval.pol);
    snprintf(c->uuid, sizeof(c->uuid), "%s", p ? p->uuid : "");
    bool active = p && skp__cont_policy_active(p);
    skp_err err = skp__cont_eval_set_policy(&c->eval, active ? p : NULL);
    if (err) {
        active = false;
        c->uuid[0] = '\0'; /* asked again at the next poll */
    }
    c->has_policy = active;
    bool http = active && skp__cont_policy_has_http(p);
    if (http != had_http)
        skp__cont_http_enable(http);
    c->execute_s = active && p->execute_s ? p->execute_s : SKP_CONT_DEFAULT_EXECUTE_S;
    c->silence_s = active && p->silence_s ? p->silence_s : SKP_CONT_DEFAULT_SILENCE_S;
    if (c->env_execute_s)
        c->execute_s = c->env_execute_s;
    if (c->env_silence_s)
        c->silence_s = c->env_silence_s;
    c->next_slot_ns = active ? skpx_mono_ns() + c->slot_ns : 0;
    c->last_cpu_ns = c->last_wall_ns = 0;
    c->stats.policy_updates++;
    if (active)
        SKPX_INFO("skyprof: continuous profiling policy %.16s... in effect (execute %d s, "
                  "silence %d s)",
                  c->uuid, c->execute_s, c->silence_s);
    else
        SKPX_INFO("skyprof: no continuous profiling policy for this service");
}

skp_err skp__cont_poll(skyprof_agent *a, int timeout_ms)
{
    struct skp__cont_agent *c = &a->cont;
    Skywalking__V3__ContinuousProfilingServicePolicyQuery sq =
        SKYWALKING__V3__CONTINUOUS_PROFILING_SERVICE_POLICY_QUERY__INIT;
    sq.servicename = a->cfg.service;
    sq.uuid = c->uuid;
    Skywalking__V3__ContinuousProfilingServicePolicyQuery *sqp = &sq;
    Skywalking__V3__ContinuousProfilingPolicyQuery q =
        SKYWALKING__V3__CONTINUOUS_PROFILING_POLICY_QUERY__INIT;
    q.n_policies = 1;
    q.policies = &sqp;
    ProtobufCMessage *resp = NULL;
    skp_err err = skp__agent_unary_commands(a, SKP_PATH_CONT_POLICIES, &q.base, &resp, timeout_ms);
    if (err)
        return err;
    const Skywalking__V3__Commands *cmds = (const void *)resp;
    for (size_t i = 0; cmds && i < cmds->n_commands; i++) {
        const Skywalking__V3__Command *cmd = cmds->commands[i];
        if (!cmd || !cmd->command || strcmp(cmd->command, SKP_CONT_COMMAND_POLICY) != 0)
            continue;
        const char *json = skp__command_arg(cmd, "ServiceWithPolicyJSON");
        if (!json)
            continue;
        struct skp__cont_policy *p = skpx_malloc(sizeof(*p));
        if (!p)
            break;
        bool found = false;
        char reason[160];
        skp_err perr = skp__cont_policy_parse(json, strlen(json), a->cfg.service, p, &found, reason,
                                              sizeof(reason));
        if (perr) {
            c->stats.policy_errors++;
            SKPX_WARN("skyprof: continuous profiling policy not understood: %s", reason);
        } else if (found && strcmp(p->uuid, c->uuid) != 0) {
            apply_policy(a, p->uuid[0] ? p : NULL);
        }
        skpx_free(p);
    }
    if (resp)
        protobuf_c_message_free_unpacked(resp, NULL);
    return SKP_OK;
}

/* ---- readings ------------------------------------------------------------------------------- */
/* Threads of this process: field 20 of /proc/self/stat (the one /proc read of a slot). */
static bool read_threads(double *out)
{
    char buf[1024];
    if (skpx_procfs_read("/proc/self/stat", buf, sizeof(buf)) <= 0)
        return false;
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    if (!p)
        return false;
    /* after ") " come fields 3.. ; num_threads is field 20 */
    for (int field = 2; field < 20 && p; field++)
        p = strchr(p + 1, ' ');
    if (!p)
        return false;
    char *e = NULL;
    long v = strtol(p + 1, &e, 10);
    if (e == p + 1 || v <= 0)
        return false;
    *out = (double)v;
    return true;
}

static void http_feed(void *ud, const struct skp__cont_http_delta *d)
{
    skp__cont_eval_http(ud, d->index, d->name, d->count, d->errors, d->sum_ms);
}

/* The process source's reading of ANOTHER process (skyprof attach), when it has one: the runner's
 * lock is held across the call so the source cannot be replaced (and destroyed) meanwhile; the
 * callback only reads /proc. False when the source has none (or it failed). */
static bool remote_usage(skyprof_agent *a, int64_t *cpu_ns, int *n_threads, bool *is_remote)
{
    struct skp__proc_runner *r = &a->proc;
    pthread_mutex_lock(&r->mu);
    *is_remote = r->has_src && r->src.process_usage;
    bool ok = *is_remote && r->src.process_usage(r->src.ud, cpu_ns, n_threads) == 0;
    pthread_mutex_unlock(&r->mu);
    return ok;
}

static void close_slot(skyprof_agent *a, int64_t now_ns)
{
    struct skp__cont_agent *c = &a->cont;
    struct skp__cont_sample s = {0};
    struct skp__cont_eval *e = &c->eval;
    int64_t rcpu = -1;
    int rthreads = 0;
    bool is_remote = false;
    bool remote_ok =
        (e->needs_cpu || e->needs_threads) && remote_usage(a, &rcpu, &rthreads, &is_remote);
    if (is_remote && e->needs_threads && remote_ok && rthreads > 0) {
        s.threads = rthreads;
        s.has_threads = true;
    }
    if (e->needs_cpu) {
        struct timespec ts = {0, 0};
        bool have = is_remote ? remote_ok : clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0;
        if (have) {
            int64_t cpu = is_remote ? rcpu : (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
            if (c->last_wall_ns && now_ns > c->last_wall_ns) {
                s.cpu_pct =
                    (double)(cpu - c->last_cpu_ns) * 100.0 / (double)(now_ns - c->last_wall_ns);
                s.has_cpu = true;
            }
            c->last_cpu_ns = cpu;
            c->last_wall_ns = now_ns;
        }
    }
    if (e->needs_threads && !is_remote)
        s.has_threads = read_threads(&s.threads);
    if (e->needs_load) {
        struct sysinfo si;
        if (sysinfo(&si) == 0) {
            s.load1 = (double)si.loads[0] / (double)(1u << SI_LOAD_SHIFT);
            s.has_load = true;
        }
    }
    if (e->needs_http)
        skp__cont_http_read(http_feed, e);
    skp__cont_eval_slot(e, &s);
    c->stats.slots++;
}

/* ---- trigger -------------------------------------------------------------------------------- */
static const char *task_id_of(const ProtobufCMessage *resp)
{
    const Skywalking__V3__Commands *cmds = (const void *)resp;
    for (size_t i = 0; cmds && i < cmds->n_commands; i++) {
        const Skywalking__V3__Command *cmd = cmds->commands[i];
        if (cmd && cmd->command && strcmp(cmd->command, SKP_CONT_COMMAND_TASK) == 0)
            return skp__command_arg(cmd, "TaskId");
    }
    return NULL;
}

static void entity_init(skyprof_agent *a, Skywalking__V3__EBPFProcessEntityMetadata *e)
{
    skywalking__v3__ebpfprocess_entity_metadata__init(e);
    e->layer = (char *)LAYER;
    e->servicename = a->cfg.service;
    e->instancename = a->cfg.instance;
    e->processname = (char *)process_name();
}

/* The pid reported for the process: the "Process No." instance property when the host set one
 * (`skyprof attach` profiles another process and names it there), else ours. */
static int32_t reported_pid(const skyprof_agent *a)
{
    for (size_t i = 0; i < a->cfg.n_properties; i++) {
        if (strcmp(a->props[i].key, "Process No.") != 0)
            continue;
        char *end = NULL;
        long v = strtol(a->props[i].value, &end, 10);
        if (end && end != a->props[i].value && !*end && v > 0 && v <= INT32_MAX)
            return (int32_t)v;
    }
    return (int32_t)getpid();
}

/* EBPFProcessService.reportProcesses for this process; keeps the id the server gives. */
static skp_err register_process(skyprof_agent *a, int timeout_ms)
{
    struct skp__cont_agent *c = &a->cont;
    Skywalking__V3__EBPFProcessEntityMetadata ent;
    entity_init(a, &ent);
    char *labels[1] = {(char *)"skyprof"};
    ent.n_labels = 1;
    ent.labels = labels;
    Skywalking__V3__KeyStringValuePair kv[2];
    Skywalking__V3__KeyStringValuePair *kvp[2] = {&kv[0], &kv[1]};
    skywalking__v3__key_string_value_pair__init(&kv[0]);
    skywalking__v3__key_string_value_pair__init(&kv[1]);
    kv[0].key = (char *)"language";
    kv[0].value = a->cfg.language;
    kv[1].key = (char *)"profiler";
    kv[1].value = (char *)"skyprof process profiler (no eBPF)";
    Skywalking__V3__EBPFHostProcessMetadata host = SKYWALKING__V3__EBPFHOST_PROCESS_METADATA__INIT;
    host.entity = &ent;
    host.pid = reported_pid(a);
    host.n_properties = 2;
    host.properties = kvp;
    Skywalking__V3__EBPFProcessProperties props = SKYWALKING__V3__EBPFPROCESS_PROPERTIES__INIT;
    props.metadata_case = SKYWALKING__V3__EBPFPROCESS_PROPERTIES__METADATA_HOST_PROCESS;
    props.hostprocess = &host;
    Skywalking__V3__EBPFProcessProperties *pp = &props;
    char agent_id[2 * SKYPROF_STR_MAX + 2];
    snprintf(agent_id, sizeof(agent_id), "%s/%s", a->cfg.service, a->cfg.instance);
    Skywalking__V3__EBPFProcessReportList list = SKYWALKING__V3__EBPFPROCESS_REPORT_LIST__INIT;
    list.n_processes = 1;
    list.processes = &pp;
    list.ebpfagentid = agent_id;
    ProtobufCMessage *resp = NULL;
    skp_err err =
        a->tr.unary(a->tr.ud, SKP_PATH_EBPF_PROCESSES, &list.base,
                    &skywalking__v3__ebpfreport_process_downstream__descriptor, &resp, timeout_ms);
    if (err)
        return err;
    const Skywalking__V3__EBPFReportProcessDownstream *d = (const void *)resp;
    if (d && d->n_processes > 0 && d->processes[0] && d->processes[0]->processid &&
        d->processes[0]->processid[0])
        snprintf(c->process_id, sizeof(c->process_id), "%s", d->processes[0]->processid);
    else
        err = SKP_EPROTO;
    if (resp)
        protobuf_c_message_free_unpacked(resp, NULL);
    return err;
}

static void keep_alive(skyprof_agent *a, int timeout_ms)
{
    Skywalking__V3__EBPFProcessEntityMetadata ent;
    entity_init(a, &ent);
    Skywalking__V3__EBPFProcessPingPkg ping = SKYWALKING__V3__EBPFPROCESS_PING_PKG__INIT;
    ping.entitymetadata = &ent;
    Skywalking__V3__EBPFProcessPingPkg *pp = &ping;
    Skywalking__V3__EBPFProcessPingPkgList list = SKYWALKING__V3__EBPFPROCESS_PING_PKG_LIST__INIT;
    list.n_processes = 1;
    list.processes = &pp;
    ProtobufCMessage *resp = NULL;
    skp_err err =
        skp__agent_unary_commands(a, SKP_PATH_EBPF_KEEPALIVE, &list.base, &resp, timeout_ms);
    if (err)
        SKPX_DEBUG("skyprof: eBPF process keepAlive failed: %s", skp_strerror(err));
    if (resp)
        protobuf_c_message_free_unpacked(resp, NULL);
}

/* reportProfilingTask with `causes`; *task_out gets the server's TaskId. */
static skp_err report_task(skyprof_agent *a, int target, const struct skp__cont_cause *causes,
                           int n, char task_out[SKP_TASK_ID_MAX], int timeout_ms)
{
    Skywalking__V3__ContinuousProfilingCause cs[SKP_CONT_CAUSES_MAX];
    Skywalking__V3__ContinuousProfilingCause *csp[SKP_CONT_CAUSES_MAX];
    Skywalking__V3__ContinuousProfilingSingleValueCause sv[SKP_CONT_CAUSES_MAX];
    Skywalking__V3__ContinuousProfilingURICause uv[SKP_CONT_CAUSES_MAX];
    for (int i = 0; i < n; i++) {
        skywalking__v3__continuous_profiling_cause__init(&cs[i]);
        cs[i].type = (Skywalking__V3__ContinuousProfilingTriggeredMonitorType)causes[i].monitor;
        if (causes[i].uri_kind) {
            skywalking__v3__continuous_profiling_uricause__init(&uv[i]);
            if (causes[i].uri_kind == 2) {
                uv[i].uri_case = SKYWALKING__V3__CONTINUOUS_PROFILING_URICAUSE__URI_REGEX;
                uv[i].regex = (char *)causes[i].uri;
            } else {
                uv[i].uri_case = SKYWALKING__V3__CONTINUOUS_PROFILING_URICAUSE__URI_PATH;
                uv[i].path = (char *)causes[i].uri;
            }
            uv[i].threshold = causes[i].threshold;
            uv[i].current = causes[i].current;
            cs[i].cause_case = SKYWALKING__V3__CONTINUOUS_PROFILING_CAUSE__CAUSE_URI;
            cs[i].uri = &uv[i];
        } else {
            skywalking__v3__continuous_profiling_single_value_cause__init(&sv[i]);
            sv[i].threshold = causes[i].threshold;
            sv[i].current = causes[i].current;
            cs[i].cause_case = SKYWALKING__V3__CONTINUOUS_PROFILING_CAUSE__CAUSE_SINGLE_VALUE;
            cs[i].singlevalue = &sv[i];
        }
        csp[i] = &cs[i];
    }
    Skywalking__V3__ContinuousProfilingReport r = SKYWALKING__V3__CONTINUOUS_PROFILING_REPORT__INIT;
    Skywalking__V3__ContinuousOnCPUProfilingTask on =
        SKYWALKING__V3__CONTINUOUS_ON_CPUPROFILING_TASK__INIT;
    Skywalking__V3__ContinuousOffCPUProfilingTask off =
        SKYWALKING__V3__CONTINUOUS_OFF_CPUPROFILING_TASK__INIT;
    r.layer = (char *)LAYER;
    r.servicename = a->cfg.service;
    r.instancename = a->cfg.instance;
    r.processname = (char *)process_name();
    r.n_causes = (size_t)n;
    r.causes = csp;
    r.duration = a->cont.execute_s;
    if (target == SKP_CONT_ON_CPU) {
        r.target_case = SKYWALKING__V3__CONTINUOUS_PROFILING_REPORT__TARGET_ON_CPU;
        r.oncpu = &on;
    } else {
        r.target_case = SKYWALKING__V3__CONTINUOUS_PROFILING_REPORT__TARGET_OFF_CPU;
        r.offcpu = &off;
    }
    ProtobufCMessage *resp = NULL;
    skp_err err = skp__agent_unary_commands(a, SKP_PATH_CONT_REPORT, &r.base, &resp, timeout_ms);
    if (err)
        return err;
    const char *id = task_id_of(resp);
    if (id && id[0] && strlen(id) < SKP_TASK_ID_MAX)
        snprintf(task_out, SKP_TASK_ID_MAX, "%s", id);
    else
        err = SKP_EPROTO;
    if (resp)
        protobuf_c_message_free_unpacked(resp, NULL);
    return err;
}

static void trigger(skyprof_agent *a, int target, const struct skp__cont_cause *causes, int n,
                    int timeout_ms)
{
    struct skp__cont_agent *c = &a->cont;
    char line[320];
    int off = snprintf(line, sizeof(line), "%s", skp__cont_target_name(target));
    for (int i = 0; i < n && off > 0 && (size_t)off < sizeof(line); i++)
        off += snprintf(line + off, sizeof(line) - (size_t)off,
                        "%s %s%s%.60s: %.2f >= %.2f (%d of %d)", i ? "," : ":",
                        skp__cont_monitor_name(causes[i].monitor), causes[i].uri_kind ? " of " : "",
                        causes[i].uri, causes[i].current, causes[i].threshold, causes[i].n_over,
                        causes[i].period);
    /* New evidence is needed for the next trigger, whatever happens to this one. */
    skp__cont_eval_clear(&c->eval);
    if (skp__proc_runner_busy(&a->proc)) {
        c->stats.trigger_failures++;
        SKPX_INFO("skyprof: continuous profiling fired (%s) while a process profiling task "
                  "runs; not reported",
                  line);
        return;
    }
    char task_id[SKP_TASK_ID_MAX] = "";
    skp_err err = report_task(a, target, causes, n, task_id, timeout_ms);
    if (err) {
        c->stats.trigger_failures++;
        SKPX_WARN("skyprof: continuous profiling fired (%s); reportProfilingTask failed: %s", line,
                  skp_strerror(err));
        return;
    }
    if (!c->process_id[0]) {
        err = register_process(a, timeout_ms);
        if (err)
            SKPX_WARN("skyprof: reportProcesses failed: %s (retried before the upload)",
                      skp_strerror(err));
    }
    struct skp__proc_spec spec;
    memset(&spec, 0, sizeof(spec));
    snprintf(spec.task_id, sizeof(spec.task_id), "%s", task_id);
    snprintf(spec.event, sizeof(spec.event), "%s", target == SKP_CONT_ON_CPU ? "cpu" : "wall");
    spec.duration_ms = (int64_t)c->execute_s * 1000;
    spec.create_time_ms = -1;
    spec.continuous = true;
    char reason[160];
    err = skp__proc_runner_start(&a->proc, &spec, reason, sizeof(reason));
    if (err) {
        c->stats.trigger_failures++;
        SKPX_WARN("skyprof: continuous profiling task %.80s not run: %s", task_id, reason);
        c->silent_until_ms = skpx_now_ms() + (int64_t)c->silence_s * 1000;
        return;
    }
    c->stats.triggers++;
    c->state = SKP_CONT_RUNNING;
    c->task_target = target;
    snprintf(c->task_id, sizeof(c->task_id), "%s", task_id);
    c->next_ping_ns = 0;
    SKPX_INFO("skyprof: continuous profiling task %.80s triggered by %s", task_id, line);
}

int64_t skp__cont_step(skyprof_agent *a, int64_t now_ns, int timeout_ms)
{
    struct skp__cont_agent *c = &a->cont;
    int64_t next = INT64_MAX;
    if (c->has_policy && c->next_slot_ns) {
        if (now_ns >= c->next_slot_ns) {
            close_slot(a, now_ns);
            c->next_slot_ns += c->slot_ns;
            if (c->next_slot_ns <= now_ns)
                c->next_slot_ns = now_ns + c->slot_ns; /* the channel was held up: no catch-up */
            if (c->state == SKP_CONT_IDLE && skpx_now_ms() >= c->silent_until_ms) {
                struct skp__cont_cause causes[SKP_CONT_CAUSES_MAX];
                int n = 0;
                for (int t = SKP_CONT_ON_CPU; t <= SKP_CONT_OFF_CPU; t++) {
                    if (skp__cont_eval_fired(&c->eval, t, causes, SKP_CONT_CAUSES_MAX, &n)) {
                        trigger(a, t, causes, n, timeout_ms);
                        break;
                    }
                }
            }
        }
        next = c->next_slot_ns;
    }
    if (c->process_id[0]) {
        if (now_ns >= c->next_ping_ns) {
            keep_alive(a, timeout_ms);
            c->next_ping_ns = now_ns + a->cfg.heartbeat_period_ms * MS;
        }
        if (c->next_ping_ns < next)
            next = c->next_ping_ns;
    }
    return next;
}

/* ---- upload --------------------------------------------------------------------------------- */
struct up_feed {
    skyprof_agent *a;
    const struct skp__proc_upload *u;
    size_t next_sample, end_sample;
    bool on_cpu;
    struct skpx_pprof_frame *frames;
    char *text;
    char **symbols;
    Skywalking__V3__EBPFProfilingData msg;
    Skywalking__V3__EBPFProfilingTaskMetadata meta;
    Skywalking__V3__EBPFProfilingStackMetadata stack;
    Skywalking__V3__EBPFProfilingStackMetadata *stackp;
    Skywalking__V3__EBPFOnCPUProfiling on;
    Skywalking__V3__EBPFOffCPUProfiling off;
    size_t sent;
};

/* "func (file:line)", "func (file)" or "func" into text at *off (bounded). */
static char *symbol(struct up_feed *f, size_t *off, const struct skpx_pprof_frame *fr)
{
    char *dst = f->text + *off;
    size_t room = SYMBOL_TEXT_MAX - *off;
    int fl = fr->func_len > SKP_SYMBOL_MAX ? SKP_SYMBOL_MAX : (int)fr->func_len;
    int il = fr->file_len > SKP_SYMBOL_MAX ? SKP_SYMBOL_MAX : (int)fr->file_len;
    int n;
    if (room < 2)
        return (char *)"";
    if (il && fr->line > 0)
        n = snprintf(dst, room, "%.*s (%.*s:%" PRId64 ")", fl, fr->func, il, fr->file, fr->line);
    else if (il)
        n = snprintf(dst, room, "%.*s (%.*s)", fl, fr->func, il, fr->file);
    else
        n = snprintf(dst, room, "%.*s", fl, fr->func);
    if (n < 0)
        n = 0;
    if ((size_t)n >= room)
        n = (int)room - 1;
    *off += (size_t)n + 1;
    return dst;
}

static int up_next(void *ud, const ProtobufCMessage **out)
{
    struct up_feed *f = ud;
    if (f->next_sample >= f->end_sample)
        return 0;
    size_t nf = 0;
    const int64_t *v = NULL;
    if (!skpx_pprof_sample(f->u->prof, f->next_sample, f->frames, &nf, &v))
        return 0;
    f->next_sample++;
    size_t off = 0;
    for (size_t i = 0; i < nf; i++)
        f->symbols[i] = symbol(f, &off, &f->frames[i]);
    skywalking__v3__ebpfprofiling_data__init(&f->msg);
    skywalking__v3__ebpfprofiling_task_metadata__init(&f->meta);
    skywalking__v3__ebpfprofiling_stack_metadata__init(&f->stack);
    f->meta.taskid = (char *)f->u->task_id;
    f->meta.processid = f->a->cont.process_id;
    f->meta.profilingstarttime = f->u->started_ms;
    f->meta.currenttime = skpx_now_ms();
    f->stack.stacktype = SKYWALKING__V3__EBPFPROFILING_STACK_TYPE__PROCESS_USER_SPACE;
    f->stack.stackid = (int32_t)f->next_sample;
    f->stack.n_stacksymbols = nf;
    f->stack.stacksymbols = f->symbols;
    f->stackp = &f->stack;
    f->msg.task = &f->meta;
    /* The runner's cpu/wall profiles have the types {samples, count}, {cpu|wall, ns}. */
    if (f->on_cpu) {
        skywalking__v3__ebpfon_cpuprofiling__init(&f->on);
        f->on.n_stacks = 1;
        f->on.stacks = &f->stackp;
        /* rover's dumpCount counts perf samples at a fixed rate, so it weighs a stack by its
         * CPU time; ours is the stack's CPU time in sampling periods (at least 1). */
        int64_t periods = (v[1] + SKP_CONT_PERIOD_NS / 2) / SKP_CONT_PERIOD_NS;
        if (periods < 1)
            periods = 1;
        f->on.dumpcount = (int32_t)(periods > INT32_MAX ? INT32_MAX : periods);
        f->msg.profiling_case = SKYWALKING__V3__EBPFPROFILING_DATA__PROFILING_ON_CPU;
        f->msg.oncpu = &f->on;
    } else {
        skywalking__v3__ebpfoff_cpuprofiling__init(&f->off);
        f->off.n_stacks = 1;
        f->off.stacks = &f->stackp;
        f->off.switchcount = (int32_t)(v[0] > INT32_MAX ? INT32_MAX : v[0]);
        f->off.duration = v[1];
        f->msg.profiling_case = SKYWALKING__V3__EBPFPROFILING_DATA__PROFILING_OFF_CPU;
        f->msg.offcpu = &f->off;
    }
    f->sent++;
    *out = &f->msg.base;
    return 1;
}

static void task_over(struct skp__cont_agent *c)
{
    c->state = SKP_CONT_IDLE;
    c->silent_until_ms = skpx_now_ms() + (int64_t)c->silence_s * 1000;
    c->upload_failures = 0;
    skp__cont_eval_clear(&c->eval);
}

bool skp__cont_upload(skyprof_agent *a, const struct skp__proc_upload *u, int timeout_ms)
{
    struct skp__cont_agent *c = &a->cont;
    if (u->error[0] || !u->prof) {
        SKPX_WARN("skyprof: continuous profiling task %.80s failed: %s", u->task_id,
                  u->error[0] ? u->error : "no profile");
        c->stats.upload_failures++;
        task_over(c);
        return true;
    }
    if (!c->process_id[0] && register_process(a, timeout_ms) != SKP_OK) {
        if (++c->upload_failures < UPLOAD_ATTEMPTS_MAX)
            return false;
        SKPX_WARN("skyprof: dropping the profile of continuous task %.80s: the process is not "
                  "registered",
                  u->task_id);
        c->stats.upload_failures++;
        task_over(c);
        return true;
    }
    struct up_feed f = {.a = a, .u = u, .on_cpu = strcmp(u->event, "cpu") == 0};
    f.frames = skpx_calloc(SKPX_PPROF_MAX_FRAMES, sizeof(*f.frames));
    f.symbols = skpx_calloc(SKPX_PPROF_MAX_FRAMES, sizeof(*f.symbols));
    f.text = skpx_malloc(SYMBOL_TEXT_MAX);
    bool ok = f.frames && f.symbols && f.text;
    size_t total = skpx_pprof_n_samples(u->prof);
    /* A stream per SKP_STREAM_BATCH_MAX stacks; the whole upload is redone if one fails
     * (the server sums uploads, so a retry after a half-stored upload would count twice:
     * a failed stream stores nothing, and streams before it are not sent again). */
    size_t start = 0;
    while (ok && start < total) {
        f.next_sample = start;
        f.end_sample = total - start > SKP_STREAM_BATCH_MAX ? start + SKP_STREAM_BATCH_MAX : total;
        ProtobufCMessage *resp = NULL;
        skp_err err = a->tr.stream(a->tr.ud, SKP_PATH_EBPF_COLLECT, up_next, &f,
                                   &skywalking__v3__commands__descriptor, &resp, timeout_ms);
        if (resp)
            protobuf_c_message_free_unpacked(resp, NULL);
        if (err) {
            SKPX_DEBUG("skyprof: collectProfilingData of %.80s failed: %s", u->task_id,
                       skp_strerror(err));
            ok = false;
            break;
        }
        c->stats.stacks_sent += f.end_sample - start;
        start = f.end_sample;
    }
    SKPX_FREE_ALL(f.frames, f.symbols, f.text);
    if (!ok && start == 0 && ++c->upload_failures < UPLOAD_ATTEMPTS_MAX)
        return false; /* nothing stored yet: try again later */
    if (ok)
        c->stats.uploads++;
    else
        c->stats.upload_failures++;
    SKPX_INFO("skyprof: continuous profiling task %.80s: %zu stacks %s", u->task_id, start,
              ok ? "uploaded" : "uploaded before the upload failed");
    task_over(c);
    return true;
}
