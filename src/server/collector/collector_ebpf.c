#include "common/clock.h"
/* collector_ebpf.c - SkyWalking's eBPF services as skyprof's agents (and rover) call them:
 *   EBPFProcessService.reportProcesses  registers host processes; answers each one's id,
 *                                       sha256(processName + "_" + instanceId) in hex, where
 *                                       instanceId = base64(service) + ".1_" + base64(instance)
 *                                       (OAP's IDManager), so ids match the ones OAP gives;
 *   EBPFProcessService.keepAlive        refreshes them (an unknown one is registered again);
 *   EBPFProfilingService.queryTasks     an empty Commands (skyprofd creates no eBPF tasks);
 *   EBPFProfilingService.collectProfilingData
 *                                       the stacks of a triggered task's process, buffered per
 *                                       stream (bounded) and stored when the client
 *                                       half-closes, COLLECTOR_EBPF_STORE_BATCH rows per
 *                                       transaction and loop turn; answered after the last
 *                                       commit.
 * Runs on the server's event loop only. */
#include "server/collector/collector_ebpf.h"

#include <openssl/sha.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/log.h"
#include "ebpf/profiling/Process.pb-c.h"
#include "ebpf/profiling/Profile.pb-c.h"
#include "server/collector/collector.h"
#include "server/collector/collector_turns.h"
#include "server/store/store_ebpf.h"

#define PROC_PATHS(m) "/skywalking.v3.EBPFProcessService/" m, "/EBPFProcessService/" m
#define PROF_PATHS(m) "/skywalking.v3.EBPFProfilingService/" m, "/EBPFProfilingService/" m

/* Processes per report and labels/properties kept per process. */
#define MAX_PROCESSES 1024
#define MAX_PROPS 64
/* Text kept per label/property list. */
#define PROPS_TEXT_MAX 8192

/* ---- ids ------------------------------------------------------------------------------------ */
static size_t base64(const char *s, char *out, size_t cap)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = strlen(s), o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)(uint8_t)s[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)(uint8_t)s[i + 1] << 8;
        if (i + 2 < n)
            v |= (uint8_t)s[i + 2];
        if (o + 4 >= cap)
            break;
        out[o++] = tab[(v >> 18) & 63];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? tab[v & 63] : '=';
    }
    out[o] = '\0';
    return o;
}

bool collector_ebpf_process_id(const char *service, const char *instance, const char *process,
                               char out[COLLECTOR_EBPF_ID_HEX])
{
    /* names are capped by the caller's validation (COLLECTOR_EBPF_NAME_MAX) */
    char buf[3 * COLLECTOR_EBPF_NAME_MAX + 16];
    char b_svc[2 * COLLECTOR_EBPF_NAME_MAX], b_inst[2 * COLLECTOR_EBPF_NAME_MAX];
    if (strlen(service) > COLLECTOR_EBPF_NAME_MAX || strlen(instance) > COLLECTOR_EBPF_NAME_MAX ||
        strlen(process) > COLLECTOR_EBPF_NAME_MAX)
        return false;
    base64(service, b_svc, sizeof(b_svc));
    base64(instance, b_inst, sizeof(b_inst));
    int n = snprintf(buf, sizeof(buf), "%s_%s.1_%s", process, b_svc, b_inst);
    if (n < 0 || (size_t)n >= sizeof(buf))
        return false;
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)buf, (size_t)n, md);
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof(md); i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[2 * SHA256_DIGEST_LENGTH] = '\0';
    return true;
}

/* ---- processes ------------------------------------------------------------------------------ */
static bool entity_ok(const Skywalking__V3__EBPFProcessEntityMetadata *e)
{
    return e && e->servicename && e->servicename[0] && e->instancename && e->instancename[0] &&
           e->processname && e->processname[0];
}

/* Appends `a` and `b` ("a\tb\n", or "a\n" when b is NULL) to buf within PROPS_TEXT_MAX. */
static void text_add(char *buf, size_t *len, const char *a, const char *b)
{
    int n = snprintf(buf + *len, PROPS_TEXT_MAX - *len, b ? "%s\t%s\n" : "%s\n", a, b ? b : "");
    if (n > 0 && *len + (size_t)n < PROPS_TEXT_MAX)
        *len += (size_t)n;
    else
        buf[*len] = '\0';
}

struct report_answer {
    Skywalking__V3__EBPFReportProcessDownstream msg;
    Skywalking__V3__EBPFProcessDownstream *items;
    Skywalking__V3__EBPFProcessDownstream **ptrs;
    Skywalking__V3__EBPFHostProcessDownstream *hosts;
    char (*ids)[COLLECTOR_EBPF_ID_HEX];
};

static void report_free(struct collector_unary *u)
{
    struct report_answer *a = u->owned;
    if (!a)
        return;
    SKPX_FREE_ALL(a->items, a->ptrs, a->hosts, a->ids, a);
    u->owned = NULL;
}

static skp_err register_one(struct collector *c, const Skywalking__V3__EBPFHostProcessMetadata *h,
                            const Skywalking__V3__KeyStringValuePair *const *props, size_t n_props,
                            const char *agent_id, char id[COLLECTOR_EBPF_ID_HEX])
{
    const Skywalking__V3__EBPFProcessEntityMetadata *e = h->entity;
    if (!collector_ebpf_process_id(e->servicename, e->instancename, e->processname, id))
        return SKP_EINVAL;
    char *labels = skpx_malloc(PROPS_TEXT_MAX), *ptext = skpx_malloc(PROPS_TEXT_MAX);
    if (!labels || !ptext) {
        skpx_free(labels);
        skpx_free(ptext);
        return SKP_ENOMEM;
    }
    size_t ll = 0, pl = 0;
    labels[0] = ptext[0] = '\0';
    for (size_t i = 0; i < e->n_labels && i < MAX_PROPS; i++)
        if (e->labels[i])
            text_add(labels, &ll, e->labels[i], NULL);
    for (size_t i = 0; i < n_props && i < MAX_PROPS; i++)
        if (props[i] && props[i]->key)
            text_add(ptext, &pl, props[i]->key, props[i]->value ? props[i]->value : "");
    struct store_ebpf_process p = {
        .id = id,
        .service = e->servicename,
        .instance = e->instancename,
        .process_name = e->processname,
        .layer = e->layer ? e->layer : "",
        .pid = h->pid,
        .labels = labels,
        .properties = ptext,
        .agent_id = agent_id ? agent_id : "",
    };
    skp_err err = store_ebpf_upsert_process(c->store, &p, collector_now(c));
    skpx_free(labels);
    skpx_free(ptext);
    return err;
}

static int report_processes(struct collector *c, struct collector_unary *u,
                            const ProtobufCMessage *msg)
{
    const Skywalking__V3__EBPFProcessReportList *r = (const void *)msg;
    size_t n = r->n_processes;
    if (n > MAX_PROCESSES) {
        return collector_unary_fail(u, SKPX_GRPC_INVALID_ARGUMENT,
                                    "at most %d processes per report", MAX_PROCESSES);
    }
    struct report_answer *a = collector_unary_own(u, sizeof(*a), report_free);
    if (!a)
        return SKPX_GRPC_RESOURCE_EXHAUSTED;
    skywalking__v3__ebpfreport_process_downstream__init(&a->msg);
    if (n) {
        a->items = skpx_calloc(n, sizeof(*a->items));
        a->ptrs = skpx_calloc(n, sizeof(*a->ptrs));
        a->hosts = skpx_calloc(n, sizeof(*a->hosts));
        a->ids = skpx_calloc(n, sizeof(*a->ids));
        if (!a->items || !a->ptrs || !a->hosts || !a->ids)
            return SKPX_GRPC_RESOURCE_EXHAUSTED;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const Skywalking__V3__EBPFProcessProperties *pp = r->processes[i];
        if (!pp ||
            pp->metadata_case != SKYWALKING__V3__EBPFPROCESS_PROPERTIES__METADATA_HOST_PROCESS ||
            !pp->hostprocess || !entity_ok(pp->hostprocess->entity))
            continue; /* Kubernetes processes and incomplete entries are not ours to keep */
        const Skywalking__V3__EBPFHostProcessMetadata *h = pp->hostprocess;
        skp_err err =
            register_one(c, h, (const Skywalking__V3__KeyStringValuePair *const *)h->properties,
                         h->n_properties, r->ebpfagentid, a->ids[k]);
        if (err == SKP_EINVAL)
            continue; /* a name over the cap: not registered, not answered */
        if (err)
            return collector_unary_store_failed(u, err, "process not stored");
        skywalking__v3__ebpfprocess_downstream__init(&a->items[k]);
        skywalking__v3__ebpfhost_process_downstream__init(&a->hosts[k]);
        a->hosts[k].pid = h->pid;
        a->hosts[k].entitymetadata = h->entity; /* borrowed from the request, alive until on_end */
        a->items[k].processid = a->ids[k];
        a->items[k].process_case = SKYWALKING__V3__EBPFPROCESS_DOWNSTREAM__PROCESS_HOST_PROCESS;
        a->items[k].hostprocess = &a->hosts[k];
        a->ptrs[k] = &a->items[k];
        k++;
    }
    a->msg.n_processes = k;
    a->msg.processes = a->ptrs;
    u->resp = &a->msg.base;
    return SKPX_GRPC_OK;
}

static int keep_alive(struct collector *c, struct collector_unary *u, const ProtobufCMessage *msg)
{
    const Skywalking__V3__EBPFProcessPingPkgList *r = (const void *)msg;
    for (size_t i = 0; i < r->n_processes && i < MAX_PROCESSES; i++) {
        const Skywalking__V3__EBPFProcessPingPkg *p = r->processes[i];
        if (!p || !entity_ok(p->entitymetadata))
            continue;
        const Skywalking__V3__EBPFProcessEntityMetadata *e = p->entitymetadata;
        char id[COLLECTOR_EBPF_ID_HEX];
        if (!collector_ebpf_process_id(e->servicename, e->instancename, e->processname, id))
            continue;
        bool found = false;
        skp_err err = store_ebpf_touch_process(c->store, id, collector_now(c), &found);
        if (!err && !found) {
            /* OAP keeps a process alive from its pings alone: register it (pid unknown) */
            Skywalking__V3__EBPFHostProcessMetadata h =
                SKYWALKING__V3__EBPFHOST_PROCESS_METADATA__INIT;
            h.entity = (Skywalking__V3__EBPFProcessEntityMetadata *)e;
            err = register_one(c, &h,
                               (const Skywalking__V3__KeyStringValuePair *const *)p->properties,
                               p->n_properties, r->ebpfagentid, id);
        }
        if (err && err != SKP_EINVAL)
            return collector_unary_store_failed(u, err, "process not stored");
    }
    return SKPX_GRPC_OK;
}

static int query_tasks(struct collector *c, struct collector_unary *u, const ProtobufCMessage *m)
{
    (void)c;
    (void)u;
    (void)m;
    return SKPX_GRPC_OK;
}

COLLECTOR_UNARY_ON_MESSAGE(on_report, report_processes)
COLLECTOR_UNARY_ON_MESSAGE(on_keepalive, keep_alive)
COLLECTOR_UNARY_ON_MESSAGE(on_query_tasks, query_tasks)

/* ---- profile data --------------------------------------------------------------------------- */
struct data_call {
    struct store_ebpf_stack *rows;
    size_t n, cap;
    size_t bytes; /* copied strings */
    int status;   /* first refusal (kept to answer at the end) */
    char message[160];
    /* Being stored a batch per loop turn (collector_turns.h): rows [0, stored) are committed;
     * call is NULL once the call closed (the rows are stored all the same: the stream was
     * whole, and the job frees them). */
    struct turn_job job;
    bool queued;
    size_t stored;
    int64_t now_ms;
    struct collector *c;
    struct skpx_grpc_call *call;
};

/* Frees the rows a stream holds (a refused stream keeps reading but holds nothing). */
static void data_drop_rows(struct data_call *d)
{
    for (size_t i = 0; i < d->n; i++) {
        SKPX_FREE_ALL((char *)d->rows[i].task_id, (char *)d->rows[i].process_id,
                      (char *)d->rows[i].symbols);
    }
    skpx_free(d->rows);
    d->rows = NULL;
    d->n = d->cap = 0;
}

static void data_free(struct data_call *d)
{
    if (!d)
        return;
    data_drop_rows(d);
    skpx_free(d);
}

/* Joins a stack's symbols into "a\nb\n..." (newlines inside a symbol become spaces). */
static char *join_symbols(const Skywalking__V3__EBPFProfilingStackMetadata *const *stacks,
                          size_t n_stacks, size_t *len_out)
{
    size_t total = 1;
    size_t n_sym = 0;
    for (size_t i = 0; i < n_stacks; i++) {
        if (!stacks[i])
            continue;
        for (size_t k = 0; k < stacks[i]->n_stacksymbols; k++) {
            const char *s = stacks[i]->stacksymbols[k];
            size_t l = s ? strnlen(s, COLLECTOR_EBPF_SYMBOL_MAX) : 0;
            total += l + 1;
            n_sym++;
        }
    }
    if (n_sym > COLLECTOR_EBPF_FRAMES_MAX)
        return NULL;
    char *out = skpx_malloc(total);
    if (!out)
        return NULL;
    size_t o = 0;
    /* Kernel frames are innermost: the kernel stack goes first, then the user stack, as OAP
     * joins them. */
    for (int want = 0; want < 2; want++) {
        for (size_t i = 0; i < n_stacks; i++) {
            const Skywalking__V3__EBPFProfilingStackMetadata *st = stacks[i];
            bool kernel = st && st->stacktype ==
                                    SKYWALKING__V3__EBPFPROFILING_STACK_TYPE__PROCESS_KERNEL_SPACE;
            if (!st || kernel != (want == 0))
                continue;
            for (size_t k = 0; k < st->n_stacksymbols; k++) {
                const char *s = st->stacksymbols[k] ? st->stacksymbols[k] : "";
                size_t l = strnlen(s, COLLECTOR_EBPF_SYMBOL_MAX);
                for (size_t j = 0; j < l; j++)
                    out[o++] = s[j] == '\n' || s[j] == '\r' ? ' ' : s[j];
                out[o++] = '\n';
            }
        }
    }
    out[o] = '\0';
    *len_out = o;
    return out;
}

static int refuse(struct data_call *d, int status, const char *what)
{
    if (d->status == SKPX_GRPC_OK) {
        d->status = status;
        snprintf(d->message, sizeof(d->message), "%s", what);
    }
    return SKPX_GRPC_OK;
}

static int data_on_message(struct skpx_grpc_call *call, void *ud, const ProtobufCMessage *msg,
                           const uint8_t *raw, size_t raw_len)
{
    (void)raw;
    (void)raw_len;
    struct data_call *d = collector_call_state(call, sizeof(*d), NULL);
    if (!d)
        return SKPX_GRPC_RESOURCE_EXHAUSTED;
    if (d->status != SKPX_GRPC_OK)
        return SKPX_GRPC_OK; /* refused already: read the rest, store nothing */
    const Skywalking__V3__EBPFProfilingData *m = (const void *)msg;
    const Skywalking__V3__EBPFProfilingTaskMetadata *t = m->task;
    if (!t || !t->taskid || !t->taskid[0] || !t->processid || !t->processid[0])
        return refuse(d, SKPX_GRPC_INVALID_ARGUMENT, "task.taskId and task.processId are required");
    if (strlen(t->taskid) > COLLECTOR_EBPF_NAME_MAX || strlen(t->processid) > 128)
        return refuse(d, SKPX_GRPC_INVALID_ARGUMENT, "task.taskId or task.processId too long");
    struct store_ebpf_stack row = {.time_ms = t->currenttime};
    Skywalking__V3__EBPFProfilingStackMetadata **stacks = NULL;
    size_t n_stacks = 0;
    if (m->profiling_case == SKYWALKING__V3__EBPFPROFILING_DATA__PROFILING_ON_CPU && m->oncpu) {
        row.kind = STORE_EBPF_ON_CPU;
        row.count = m->oncpu->dumpcount;
        stacks = m->oncpu->stacks;
        n_stacks = m->oncpu->n_stacks;
    } else if (m->profiling_case == SKYWALKING__V3__EBPFPROFILING_DATA__PROFILING_OFF_CPU &&
               m->offcpu) {
        row.kind = STORE_EBPF_OFF_CPU;
        row.count = m->offcpu->switchcount;
        row.duration_ns = m->offcpu->duration;
        stacks = m->offcpu->stacks;
        n_stacks = m->offcpu->n_stacks;
    } else {
        return refuse(d, SKPX_GRPC_INVALID_ARGUMENT, "onCPU or offCPU is required");
    }
    if (row.count < 0 || row.duration_ns < 0)
        return refuse(d, SKPX_GRPC_INVALID_ARGUMENT, "negative dumpCount, switchCount or duration");
    if (d->n >= COLLECTOR_EBPF_STACKS_MAX)
        return refuse(d, SKPX_GRPC_RESOURCE_EXHAUSTED, "too many stacks in one stream");
    size_t sl = 0;
    char *sym = join_symbols((const Skywalking__V3__EBPFProfilingStackMetadata *const *)stacks,
                             n_stacks, &sl);
    if (!sym)
        return refuse(d, SKPX_GRPC_INVALID_ARGUMENT, "a stack has too many symbols");
    if (d->bytes + sl > COLLECTOR_EBPF_STREAM_BYTES) {
        skpx_free(sym);
        return refuse(d, SKPX_GRPC_RESOURCE_EXHAUSTED, "stream over its byte budget");
    }
    if (d->n == d->cap) {
        size_t ncap = d->cap ? d->cap * 2 : 64;
        struct store_ebpf_stack *nr = skpx_realloc(d->rows, ncap * sizeof(*nr));
        if (!nr) {
            skpx_free(sym);
            return SKPX_GRPC_RESOURCE_EXHAUSTED;
        }
        d->rows = nr;
        /* The row array counts in the server-wide gRPC budget like the strings below. */
        skpx_grpc_call_charge(call, (int64_t)((ncap - d->cap) * sizeof(*nr)));
        d->cap = ncap;
    }
    row.task_id = skpx_strdup(t->taskid);
    row.process_id = skpx_strdup(t->processid);
    row.symbols = sym;
    if (!row.task_id || !row.process_id) {
        SKPX_FREE_ALL((char *)row.task_id, (char *)row.process_id, sym);
        return SKPX_GRPC_RESOURCE_EXHAUSTED;
    }
    d->rows[d->n++] = row;
    size_t held = sl + strlen(t->taskid) + strlen(t->processid) + 3;
    d->bytes += held;
    /* What a stream holds until its end is charged to the server's gRPC memory budget (released
     * when the call is freed): many streams together cannot pass it, each alone is also capped
     * by COLLECTOR_EBPF_STREAM_BYTES. */
    if (!skpx_grpc_call_charge(call, (int64_t)held)) {
        struct collector *c = ud;
        c->metrics->ebpf_refused++;
        skpx_grpc_call_charge(call, -(int64_t)(d->bytes + d->cap * sizeof(*d->rows)));
        data_drop_rows(d);
        return refuse(d, SKPX_GRPC_RESOURCE_EXHAUSTED, "server gRPC memory budget reached");
    }
    return SKPX_GRPC_OK;
}

/* Answers a stream once its rows are stored (or failed to be); `stored` of `n` were committed. */
static void data_answer(struct skpx_grpc_call *call, skp_err err, size_t stored, size_t n)
{
    if (!err) {
        skpx_grpc_call_finish(call, collector_empty_commands(), SKPX_GRPC_OK, NULL);
        return;
    }
    char msg[128];
    snprintf(msg, sizeof(msg), "skyprofd: profile data not stored (%zu of %zu stacks were)", stored,
             n);
    skpx_grpc_call_finish(
        call, NULL, err == SKP_ENOMEM ? SKPX_GRPC_RESOURCE_EXHAUSTED : SKPX_GRPC_UNAVAILABLE, msg);
}

/* Commits the next batch of d's rows; true when d is finished (all stored, or failed: answered,
 * and freed when its call is gone). */
static bool store_step(struct turn_job *j)
{
    struct data_call *d = (struct data_call *)((char *)j - offsetof(struct data_call, job));
    size_t k = d->n - d->stored;
    if (k > COLLECTOR_EBPF_STORE_BATCH)
        k = COLLECTOR_EBPF_STORE_BATCH;
    skp_err err = store_ebpf_insert_stacks(d->c->store, d->rows + d->stored, k, d->now_ms);
    d->c->metrics->ebpf_store_batches++;
    if (err)
        SKPX_ERROR("collectProfilingData: %zu of %zu stacks stored, then: %s", d->stored, d->n,
                   skp_strerror(err));
    else
        d->stored += k;
    if (!err && d->stored < d->n)
        return false;
    d->queued = false;
    if (d->call)
        data_answer(d->call, err, d->stored, d->n);
    else
        data_free(d);
    return true;
}

static void data_on_end(struct skpx_grpc_call *call, void *ud)
{
    struct collector *c = ud;
    struct data_call *d = skpx_grpc_call_get_data(call);
    if (d && d->status != SKPX_GRPC_OK) {
        SKPX_WARN("skyprofd: collectProfilingData refused: %s", d->message);
        skpx_grpc_call_finish(call, NULL, d->status, d->message);
        return;
    }
    if (!d || !d->n) {
        skpx_grpc_call_finish(call, collector_empty_commands(), SKPX_GRPC_OK, NULL);
        return;
    }
    d->c = c;
    d->call = call;
    d->now_ms = collector_now(c);
    if (d->n <= COLLECTOR_EBPF_STORE_BATCH) { /* one transaction: now */
        (void)store_step(&d->job);
        return;
    }
    d->queued = true;
    d->job.step = store_step;
    collector_turns_push(c, &d->job);
}

static void data_on_close(struct skpx_grpc_call *call, void *ud, int status)
{
    (void)ud;
    (void)status;
    struct data_call *d = collector_call_take(call);
    if (d && d->queued) {
        d->call = NULL; /* the job stores the rest and frees it */
        return;
    }
    data_free(d);
}

static const struct collector_unary_route routes[] = {
    {PROC_PATHS("reportProcesses"), &skywalking__v3__ebpfprocess_report_list__descriptor,
     on_report},
    {PROC_PATHS("keepAlive"), &skywalking__v3__ebpfprocess_ping_pkg_list__descriptor, on_keepalive},
    {PROF_PATHS("queryTasks"), &skywalking__v3__ebpfprofiling_task_query__descriptor,
     on_query_tasks},
};

skp_err collector_ebpf_register(struct collector *c, struct skpx_grpc_server *srv)
{
    skp_err err = collector_add_unary(c, srv, routes, sizeof(routes) / sizeof(routes[0]));
    if (err)
        return err;
    struct skpx_grpc_method d = {
        .client_streaming = true,
        .request_desc = &skywalking__v3__ebpfprofiling_data__descriptor,
        .on_start = collector_on_start,
        .on_message = data_on_message,
        .on_end = data_on_end,
        .on_close = data_on_close,
        .ud = c,
    };
    return collector_add(srv, PROF_PATHS("collectProfilingData"), d);
}
