/* proc_task.c - the process-profiling task runner (see proc_task.h for the threading model).
 *
 * Design. One task at a time: the executor starts skp-proc, which samples into one pprof
 * builder (src/wire/pprof_encode.h) whose byte budget bounds the task's memory whatever its
 * length, encodes the gzip file, marks the runner DONE and exits; the channel thread uploads and
 * joins. The source lists its threads at every round (cpu, wall), so a thread that lives shorter
 * than a second is found as soon as a round sees it. Events:
 *   cpu        every period, the CPU clock of every thread of the process (clock_gettime on the
 *              thread's CPU-time clock, no signal) and of the process go through the CPU
 *              accounting (cpu_acct.h): a listed thread whose pending CPU reached a quarter of
 *              the period (a whole period when it accrued slowly over many rounds) is captured
 *              and the sample carries that CPU (half of it on the thread's previous stack when
 *              that was read a round or two ago and differs: the thread moved from one to the
 *              other meanwhile); a thread not running now gives it to its recent last stack
 *              (its CPU came before it blocked), else it is captured when the source captures
 *              harmlessly (no signal: Python), else its CPU waits for a stack; a thread new
 *              since the last round is read at once. Threads that ended between rounds get the
 *              process CPU no live thread accounts for, on their last stack; unlisted threads
 *              (the agent's own, threads without frames of the source's language) count under
 *              one synthetic frame. So the profile holds the CPU the process used in the window,
 *              and sleeping threads are never signalled;
 *   wall       every period, every listed thread, weighted by the time since the previous round;
 *   goroutine  a thread dump: every thread once, at once, then the source's extra goroutines
 *              (its run_event for "goroutine": Python's asyncio tasks, labelled task/task_state);
 *   others     the source's run_event (Python: heap/allocs from tracemalloc), else an
 *              EXECUTION_TASK_ERROR naming the event and the language.
 * Samples carry the labels thread_name and thread_id. */
#include "agent/proc_task.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/agent_thread.h"
#include "agent/command_dispatch.h"
#include "agent/config.h"
#include "common/cpu_acct.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/log.h"
#include "common/procfs.h"
#include "wire/pprof_encode.h"

#define MS_NS (1000000LL)
/* Symbolized addresses remembered per task (direct-mapped; only for address frames). */
#define SYM_CACHE_ENTRIES 2048
#define SYM_TEXT_MAX 200
/* Text room for string frames of one capture. */
#define CAPTURE_SCRATCH_BYTES (64u << 10)
/* How many rounds old a thread's last stack may be to take the CPU it used while no round saw
 * it running (older: a thread that can be read without a signal is read again). */
#define SKP_PROC_LAST_STACK_ROUNDS 2
/* Symbolized text of one stack's address frames. */
#define SYMTEXT_BYTES (128u << 10)

/* ---- command ------------------------------------------------------------------------------- */
static bool num(const Skywalking__V3__Command *cmd, const char *key, bool required, long long lo,
                long long hi, long long *out, char *reason, size_t cap)
{
    const char *v = skp__command_arg(cmd, key);
    *out = 0;
    if (!v || !*v) {
        if (required)
            snprintf(reason, cap, "malformed command: %s missing", key);
        return !required;
    }
    long long n = 0;
    if (!skp__config_parse_i64(v, &n) || n < lo || n > hi) {
        snprintf(reason, cap, "malformed command: %s is not a number in range", key);
        return false;
    }
    *out = n;
    return true;
}

skp_err skp__pprof_command_parse(const Skywalking__V3__Command *cmd, struct skp__proc_spec *out,
                                 char *reason, size_t cap)
{
    memset(out, 0, sizeof(*out));
    out->create_time_ms = -1;
    long long ct, dur, dp, hz;
    if (!num(cmd, "CreateTime", true, 0, INT64_MAX, &ct, reason, cap))
        return SKP_EINVAL;
    out->create_time_ms = ct;
    const char *id = skp__command_arg(cmd, "TaskId");
    const char *ev = skp__command_arg(cmd, "Events");
    if (!id || !*id || strlen(id) >= sizeof(out->task_id)) {
        snprintf(reason, cap, "malformed command: TaskId missing or too long");
        return SKP_EINVAL;
    }
    memcpy(out->task_id, id, strlen(id) + 1);
    if (!ev || !*ev || strlen(ev) >= sizeof(out->event)) {
        snprintf(reason, cap, "malformed command: Events missing or too long");
        return SKP_EINVAL;
    }
    for (size_t i = 0; ev[i]; i++) /* lower case, as the Go agent compares */
        out->event[i] = (char)(ev[i] >= 'A' && ev[i] <= 'Z' ? ev[i] - 'A' + 'a' : ev[i]);
    if (!num(cmd, "Duration", false, 0, 24 * 60, &dur, reason, cap) ||
        !num(cmd, "DumpPeriod", false, INT64_MIN, INT64_MAX, &dp, reason, cap) ||
        !num(cmd, "SamplingRate", false, 0, INT32_MAX, &hz, reason, cap))
        return SKP_EINVAL;
    out->duration_ms = (int64_t)dur * 60000;
    out->dump_period = dp;
    out->sampling_hz = hz;
    return SKP_OK;
}

/* ---- runner lifecycle ---------------------------------------------------------------------- */
skp_err skp__proc_runner_init(struct skp__proc_runner *r, uint32_t max_depth)
{
    memset(r, 0, sizeof(*r));
    r->max_depth = max_depth ? max_depth : 500;
    r->last_create_time = -1;
    r->max_duration_ms = 15 * 60000;
    /* Test and benchmark knob: shortens every timed task (never lengthens one). */
    long long v = skpx_env_int("SKYPROF_PROC_MAX_DURATION_MS", 1, r->max_duration_ms - 1);
    if (v)
        r->max_duration_ms = v;
    if (pthread_mutex_init(&r->mu, NULL) != 0)
        return SKP_EIO;
    if (skp__cond_init_mono(&r->cv) != SKP_OK) {
        pthread_mutex_destroy(&r->mu);
        return SKP_EIO;
    }
    return SKP_OK;
}

static void join_task(struct skp__proc_runner *r)
{
    if (r->thread_started) {
        pthread_join(r->thread, NULL);
        r->thread_started = false;
    }
}

void skp__proc_runner_request_stop(struct skp__proc_runner *r)
{
    pthread_mutex_lock(&r->mu);
    __atomic_store_n(&r->stop, 1, __ATOMIC_SEQ_CST);
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

void skp__proc_runner_cleanup(struct skp__proc_runner *r)
{
    skp__proc_runner_request_stop(r);
    join_task(r);
    skpx_free(r->file);
    r->file = NULL;
    skpx_pprof_free(r->prof);
    r->prof = NULL;
    if (r->has_src && r->src.destroy)
        r->src.destroy(r->src.ud);
    r->has_src = false;
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
}

skp_err skp__proc_runner_set_source(struct skp__proc_runner *r,
                                    const struct skyprof_proc_source *src)
{
    if (src && (!src->list_threads || !src->capture))
        return SKP_EINVAL;
    pthread_mutex_lock(&r->mu);
    if (r->state == SKP_PROC_RUNNING) {
        pthread_mutex_unlock(&r->mu);
        return SKP_ESTATE;
    }
    struct skyprof_proc_source old = r->src;
    bool had = r->has_src;
    if (src)
        r->src = *src;
    r->has_src = src != NULL;
    pthread_mutex_unlock(&r->mu);
    if (had && old.destroy)
        old.destroy(old.ud);
    return SKP_OK;
}

int64_t skp__proc_runner_cursor(struct skp__proc_runner *r)
{
    pthread_mutex_lock(&r->mu);
    int64_t c = r->last_create_time;
    pthread_mutex_unlock(&r->mu);
    return c;
}

bool skp__proc_runner_busy(struct skp__proc_runner *r)
{
    pthread_mutex_lock(&r->mu);
    bool b = r->state != SKP_PROC_IDLE;
    pthread_mutex_unlock(&r->mu);
    return b;
}

void skp__proc_runner_get_stats(struct skp__proc_runner *r, struct skp__proc_stats *out)
{
    pthread_mutex_lock(&r->mu);
    *out = r->stats;
    pthread_mutex_unlock(&r->mu);
}

/* ---- frames -------------------------------------------------------------------------------- */
static int64_t parse_line(const char *s, size_t n)
{
    int64_t v = 0;
    if (n == 0 || n > 10)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

void skp__proc_split_frame(const char *s, size_t n, const char **func, size_t *func_len,
                           const char **file, size_t *file_len, int64_t *line)
{
    *func = s;
    *func_len = n;
    *file = "";
    *file_len = 0;
    *line = 0;
    /* Native: "function (file:line)" */
    if (n >= 5 && s[n - 1] == ')') {
        size_t open = n;
        while (open > 0 && s[open - 1] != '(')
            open--;
        if (open >= 2 && s[open - 2] == ' ') {
            const char *in = s + open;
            size_t in_len = n - 1 - open;
            size_t colon = in_len;
            while (colon > 0 && in[colon - 1] != ':')
                colon--;
            int64_t ln = colon ? parse_line(in + colon, in_len - colon) : -1;
            if (ln >= 0) {
                *func_len = open - 2;
                *file = in;
                *file_len = colon - 1;
                *line = ln;
                return;
            }
        }
    }
    /* Python: "<file>.<function>: <line>"; a function name never contains '.' */
    for (size_t i = n; i >= 2; i--) {
        if (s[i - 2] == ':' && s[i - 1] == ' ') {
            int64_t ln = parse_line(s + i, n - i);
            if (ln < 0)
                return;
            size_t head = i - 2;
            size_t dot = head;
            while (dot > 0 && s[dot - 1] != '.')
                dot--;
            if (dot == 0)
                return;
            *func = s + dot;
            *func_len = head - dot;
            *file = s;
            *file_len = dot - 1;
            *line = ln;
            return;
        }
    }
}

/* ---- sampling ------------------------------------------------------------------------------ */
struct sym_entry {
    uint64_t addr;
    bool valid;
    char text[SYM_TEXT_MAX];
};

struct proc_run {
    struct skp__proc_runner *r;
    struct skyprof_proc_source src;
    struct skp__proc_spec spec;
    struct skpx_pprof *prof;
    struct skyprof_frame *frames;
    char *scratch;
    struct skpx_pprof_frame *pf;
    struct sym_entry *sym; /* lazily, address frames only */
    char *symtext;         /* SYMTEXT_BYTES, address frames only */
    uint64_t *ids;         /* SKPX_PPROF_MAX_FRAMES location ids of the stack being added */
    struct skyprof_proc_thread threads[SKP_PROC_THREADS_MAX];
    int n_threads;
    struct listed_tid {
        int tid;
        int idx;
    } by_tid[SKP_PROC_THREADS_MAX]; /* the listed threads sorted by tid */
    struct skpx_acct acct;          /* cpu: the CPU accounting */
    DIR *task_dir;                  /* cpu, threads of this process: /proc/self/task */
    uint64_t samples, dropped, lost;
    uint64_t ticks, ticks_expected; /* sampling rounds done / asked for (cpu, wall) */
    int64_t carried_ns;             /* cpu: CPU put on a thread's last stack */
    int64_t synthetic_ns;           /* cpu: CPU under a synthetic frame */
    int64_t pending_end_ns;         /* cpu: CPU left out (pending on live threads at the end) */
    uint64_t untracked;             /* cpu: threads beyond the accounting's table */
    bool budget_noted;
};

/* Text of an address frame, from the per-task cache or the source's symbolize. */
static void sym_text(struct proc_run *p, uint64_t addr, char *dst, size_t cap)
{
    struct sym_entry *e = p->sym ? &p->sym[(addr >> 2) % SYM_CACHE_ENTRIES] : NULL;
    if (e && e->valid && e->addr == addr) {
        snprintf(dst, cap, "%s", e->text);
        return;
    }
    if (!p->src.symbolize || p->src.symbolize(p->src.ud, addr, dst, cap) < 0)
        snprintf(dst, cap, "0x%" PRIx64, addr);
    if (e) {
        snprintf(e->text, sizeof(e->text), "%s", dst);
        e->addr = addr;
        e->valid = true;
    }
}

/* Counts the result of one add into the profile. */
static void count_add(struct proc_run *p, skp_err err)
{
    if (err) {
        p->dropped++;
        if (err == SKP_EFULL && !p->budget_noted) {
            p->budget_noted = true;
            SKPX_WARN("skyprof: process profile of task %.80s reached its %u-byte budget; new "
                      "stacks are dropped",
                      p->spec.task_id, SKP_PROC_PROFILE_BYTES_MAX);
        }
    } else {
        p->samples++;
    }
}

/* Resolves a captured stack (innermost first) into location ids in p->ids; returns how many.
 * Address frames are symbolized into p->symtext. *err is set when the budget is full. */
static size_t stack_ids(struct proc_run *p, const struct skyprof_capture *c, skp_err *err)
{
    size_t n = c->n < SKPX_PPROF_MAX_FRAMES ? c->n : SKPX_PPROF_MAX_FRAMES;
    size_t used = 0;
    *err = SKP_OK;
    for (size_t i = 0; i < n; i++) {
        const struct skyprof_frame *f = &c->frames[i];
        const char *s;
        size_t len;
        if (f->kind == SKYPROF_FRAME_ADDR) {
            if (!p->sym)
                p->sym = skpx_calloc(SYM_CACHE_ENTRIES, sizeof(*p->sym));
            if (!p->symtext)
                p->symtext = skpx_malloc(SYMTEXT_BYTES);
            if (!p->symtext || SYMTEXT_BYTES - used < SYM_TEXT_MAX)
                return i; /* no room: keep the innermost frames */
            char *dst = p->symtext + used;
            sym_text(p, f->addr, dst, SYM_TEXT_MAX);
            s = dst;
            len = strlen(dst);
            used += len + 1;
        } else {
            s = f->str ? f->str : "";
            len = f->str ? f->len : 0;
        }
        struct skpx_pprof_frame o;
        skp__proc_split_frame(s, len, &o.func, &o.func_len, &o.file, &o.file_len, &o.line);
        *err = skpx_pprof_location(p->prof, &o, &p->ids[i]);
        if (*err)
            return 0;
    }
    return n;
}

/* Adds a sample of stack ids[0..n) for thread t (labels thread_name, thread_id, and an emitted
 * goroutine's task labels); counts drops. */
static void add_ids(struct proc_run *p, const uint64_t *ids, size_t n, const int64_t *values,
                    const struct skyprof_proc_thread *t, bool emitted)
{
    struct skpx_pprof_label lab[4] = {{.key = "thread_name", .str = t ? t->name : "?"},
                                      {.key = "thread_id", .num = t ? t->tid : 0}};
    size_t n_lab = 2;
    if (emitted && t && t->task) { /* a source's extra goroutine (asyncio task) */
        lab[n_lab++] = (struct skpx_pprof_label){.key = "task", .str = t->task};
        if (t->task_state)
            lab[n_lab++] = (struct skpx_pprof_label){.key = "task_state", .str = t->task_state};
    }
    count_add(p, skpx_pprof_add_ids(p->prof, ids, n, values, lab, n_lab));
}

/* Adds one captured stack (innermost first) with values; counts drops. Returns the number of
 * location ids of the stack left in p->ids (0 when it was dropped). */
static size_t add_stack(struct proc_run *p, const struct skyprof_capture *c, const int64_t *values,
                        const struct skyprof_proc_thread *t, bool emitted)
{
    skp_err err;
    size_t n = stack_ids(p, c, &err);
    if (err) {
        count_add(p, err);
        return 0;
    }
    uint64_t before = p->dropped;
    add_ids(p, p->ids, n, values, t, emitted);
    return p->dropped == before ? n : 0;
}

static int capture_one(struct proc_run *p, const struct skyprof_proc_thread *t,
                       struct skyprof_capture *c)
{
    c->frames = p->frames;
    c->cap = p->r->max_depth;
    c->n = 0;
    c->truncated = false;
    c->scratch = p->scratch;
    c->scratch_cap = CAPTURE_SCRATCH_BYTES;
    c->scratch_len = 0;
    return p->src.capture(p->src.ud, t->handle, t->tid, c);
}

static int64_t thread_cpu_ns(int tid)
{
    /* The kernel's per-thread CPU-time clock id: MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED). */
    clockid_t id = (clockid_t)((~(unsigned)tid << 3) | 6u);
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0)
        return -1;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The kernel state letter of a thread of this process ('R' running or runnable, 'S' sleeping,
 * 'D' uninterruptible...), or '?' when it cannot be read. */
static char thread_state(int tid)
{
    char buf[512];
    (void)skpx_procfs_read_task(0, tid, "stat", buf, sizeof(buf));
    return skpx_procfs_stat_state(buf);
}

/* CPU time and state of a listed thread: the source's when its threads are another process's
 * (skyprof attach), else this process's clock and /proc/self. */
static int64_t listed_cpu_ns(struct proc_run *p, int tid, char *state)
{
    if (p->src.thread_cpu) {
        int64_t ns = -1;
        char st = '?';
        if (p->src.thread_cpu(p->src.ud, tid, &ns, &st) < 0)
            return -1;
        if (state)
            *state = st;
        return ns;
    }
    if (state)
        *state = thread_state(tid);
    return thread_cpu_ns(tid);
}

static int by_tid_cmp(const void *x, const void *y)
{
    int a = ((const struct listed_tid *)x)->tid;
    int b = ((const struct listed_tid *)y)->tid;
    return (a > b) - (a < b);
}

/* Lists the source's threads (every round: a thread that lives between two listings would never
 * be sampled otherwise) and indexes them by tid. */
static void relist(struct proc_run *p)
{
    int n = p->src.list_threads(p->src.ud, p->threads, SKP_PROC_THREADS_MAX);
    p->n_threads = n < 0 ? 0 : (n > SKP_PROC_THREADS_MAX ? SKP_PROC_THREADS_MAX : n);
    for (int i = 0; i < p->n_threads; i++) {
        p->threads[i].name[sizeof(p->threads[i].name) - 1] = '\0';
        p->by_tid[i] = (struct listed_tid){p->threads[i].tid, i};
    }
    qsort(p->by_tid, (size_t)p->n_threads, sizeof(p->by_tid[0]), by_tid_cmp);
}

/* Index in p->threads of the listed thread `tid`, or -1. */
static int listed_index(const struct proc_run *p, int tid)
{
    struct listed_tid key = {tid, 0};
    const struct listed_tid *hit =
        bsearch(&key, p->by_tid, (size_t)p->n_threads, sizeof(key), by_tid_cmp);
    return hit ? hit->idx : -1;
}

/* Waits until deadline_ns or stop. Returns true when asked to stop. */
static bool wait_until(struct skp__proc_runner *r, int64_t deadline_ns)
{
    pthread_mutex_lock(&r->mu);
    while (!__atomic_load_n(&r->stop, __ATOMIC_SEQ_CST) && skpx_mono_ns() < deadline_ns)
        skp__cond_wait_until(&r->cv, &r->mu, deadline_ns);
    bool s = __atomic_load_n(&r->stop, __ATOMIC_SEQ_CST) != 0;
    pthread_mutex_unlock(&r->mu);
    return s;
}

/* ---- cpu: accounting ----------------------------------------------------------------------- */
/* The process's consumed CPU time: the source's (another process) or this process's clock. */
static int64_t process_cpu_ns(struct proc_run *p)
{
    if (p->src.process_usage) {
        int64_t ns = -1;
        int n = 0;
        return p->src.process_usage(p->src.ud, &ns, &n) == 0 ? ns : -1;
    }
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
        return -1;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* A sample of one synthetic frame (CPU no captured stack can carry), labelled with the thread
 * when there is one. */
static void add_synthetic(struct proc_run *p, const char *frame, int64_t ns,
                          const struct skpx_acct_thread *t)
{
    struct skpx_pprof_frame f = {
        .func = frame, .func_len = strlen(frame), .file = "", .file_len = 0, .line = 0};
    uint64_t id = 0;
    skp_err err = skpx_pprof_location(p->prof, &f, &id);
    if (err) {
        count_add(p, err);
        return;
    }
    struct skyprof_proc_thread th = {.tid = t ? t->tid : 0};
    snprintf(th.name, sizeof(th.name), "%s", t ? t->name : "?");
    int64_t v[2] = {0, ns};
    add_ids(p, &id, 1, v, &th, false);
    p->synthetic_ns += ns;
}

/* CPU of an unlisted thread: the agent's own threads, or threads the source has no stack for. */
static void add_unlisted(struct proc_run *p, struct skpx_acct_thread *t, int64_t ns)
{
    bool agent = strncmp(t->name, "skp-", 4) == 0;
    add_synthetic(p, agent ? SKP_PROC_FRAME_AGENT : SKP_PROC_FRAME_UNSAMPLED, ns, t);
}

/* CPU on the last stack of a listed thread (labels as its samples). */
static void add_to_last(struct proc_run *p, struct skpx_acct_thread *t, int64_t ns)
{
    struct skyprof_proc_thread th = {.tid = t->tid};
    snprintf(th.name, sizeof(th.name), "%s", t->name);
    int64_t v[2] = {0, ns};
    add_ids(p, t->ids, t->n_ids, v, &th, false);
    p->carried_ns += ns;
}

/* skpx_acct_give_cb: CPU of a thread that ended (t) or that no thread could be given (t NULL). */
static void give_cpu(void *ud, struct skpx_acct_thread *t, int64_t ns)
{
    struct proc_run *p = ud;
    if (!t)
        add_synthetic(p, SKP_PROC_FRAME_ENDED, ns, NULL);
    else if (!t->listed)
        add_unlisted(p, t, ns);
    else if (t->n_ids)
        add_to_last(p, t, ns);
    else
        add_synthetic(p, SKP_PROC_FRAME_UNSEEN, ns, t);
}

/* Captures listed thread t (index i) for its pending CPU when it is due (see the file comment). */
static void account_listed(struct proc_run *p, struct skpx_acct_thread *t, int i, char state,
                           int64_t period_ns, int64_t min_cpu)
{
    struct skyprof_proc_thread *th = &p->threads[i];
    snprintf(t->name, sizeof(t->name), "%s", th->name);
    int64_t pending = t->seen_ns - t->done_ns;
    /* CPU that accrued slowly over many rounds (a mostly idle thread waking up) waits for a
     * whole period: a thread that merely woke up is not "on CPU". A thread new since the last
     * round that ran is read at once: it may end before the next round, and the CPU it spends
     * until then needs a stack. */
    bool fresh = t->is_new && t->delta_ns > 0;
    if (pending < (t->delta_ns >= min_cpu ? min_cpu : period_ns) && !fresh)
        return;
    if (!p->src.thread_cpu)
        state = thread_state(t->tid);
    /* Not running now: the CPU it used since the last round came before it blocked, where it
     * ran then (a thread that burned, then wrote its answer and waits for the GIL or the
     * socket): its last stack, when a recent round read one. */
    bool recent = t->n_ids && t->round - t->ids_round <= SKP_PROC_LAST_STACK_ROUNDS;
    if (state != 'R' && (recent || (t->n_ids && !p->src.capture_any_state))) {
        add_to_last(p, t, skpx_acct_take(t));
        return;
    }
    if (state != 'R' && !p->src.capture_any_state)
        return; /* never signal a sleeping thread: the CPU waits for a stack */
    struct skyprof_capture c;
    if (capture_one(p, th, &c) != 0) {
        p->lost++;
        return;
    }
    skp_err err;
    size_t n = stack_ids(p, &c, &err);
    (void)skpx_acct_take(t); /* in the profile, or counted as dropped */
    if (err) {
        count_add(p, err);
        return;
    }
    /* Running now at another stack than a recent round read: the CPU in between was spent on
     * the way from one to the other; half of it goes to each. */
    int64_t to_last = 0;
    if (recent && (t->n_ids != n || memcmp(t->ids, p->ids, n * sizeof(*p->ids)) != 0)) {
        to_last = pending / 2;
        add_to_last(p, t, to_last);
    }
    int64_t v[2] = {1, pending - to_last};
    add_ids(p, p->ids, n, v, th, false);
    if (skpx_acct_set_ids(t, p->ids, n) != SKP_OK)
        p->lost++;
}

/* One cpu round: every thread's clock, the listed ones captured when due, the ended ones given
 * their CPU. */
static void round_cpu(struct proc_run *p, int64_t now, int64_t period_ns, int64_t min_cpu)
{
    skpx_acct_round_begin(&p->acct, now, process_cpu_ns(p));
    relist(p);
    int n_all = 0;
    struct dirent *e = NULL;
    if (p->task_dir)
        rewinddir(p->task_dir);
    for (;;) {
        int tid;
        if (p->task_dir) { /* every thread of this process, listed or not */
            e = readdir(p->task_dir);
            if (!e)
                break;
            if (e->d_name[0] < '0' || e->d_name[0] > '9')
                continue;
            tid = (int)strtol(e->d_name, NULL, 10);
        } else { /* another process's source: its listed threads */
            if (n_all >= p->n_threads)
                break;
            tid = p->threads[n_all].tid;
        }
        n_all++;
        int i = listed_index(p, tid);
        char state = '?';
        int64_t ns = listed_cpu_ns(p, tid, p->src.thread_cpu ? &state : NULL);
        struct skpx_acct_thread *t = ns < 0 ? NULL : skpx_acct_observe(&p->acct, tid, ns, i >= 0);
        if (!t)
            continue; /* gone, or not tracked (its CPU ends in the balance) */
        if (i >= 0) {
            account_listed(p, t, i, state, period_ns, min_cpu);
            continue;
        }
        if (t->listed)
            continue; /* listed before, missing from this listing: its CPU waits */
        if (t->is_new)
            skpx_procfs_task_comm(0, tid, t->name, sizeof(t->name));
        if (t->seen_ns - t->done_ns >= period_ns)
            add_unlisted(p, t, skpx_acct_take(t));
    }
    skpx_acct_round_end(&p->acct, give_cpu, p);
}

static void round_wall(struct proc_run *p, int64_t weight)
{
    struct skyprof_capture c;
    relist(p);
    for (int i = 0; i < p->n_threads; i++) {
        if (capture_one(p, &p->threads[i], &c) != 0) {
            p->lost++;
            continue;
        }
        int64_t v[2] = {1, weight};
        (void)add_stack(p, &c, v, &p->threads[i], false);
    }
}

static void run_sampling(struct proc_run *p, bool cpu, int64_t period_ns, int64_t duration_ms)
{
    int64_t start = skpx_mono_ns();
    int64_t end = start + duration_ms * MS_NS;
    /* A thread that merely woke up (a few hundred us of CPU) is not "on CPU". */
    int64_t min_cpu = period_ns / 4;
    if (cpu) {
        if (skpx_acct_init(&p->acct) != SKP_OK) {
            p->lost++;
            return;
        }
        if (!p->src.thread_cpu)
            p->task_dir = opendir("/proc/self/task");
        round_cpu(p, start, period_ns, min_cpu); /* the baseline */
    }
    p->ticks_expected = (uint64_t)(duration_ms * MS_NS / period_ns);
    int64_t next = start + period_ns;
    int64_t prev = start;
    while (!wait_until(p->r, next)) {
        int64_t now = skpx_mono_ns();
        if (now >= end)
            break;
        p->ticks++;
        if (cpu)
            round_cpu(p, now, period_ns, min_cpu);
        else
            round_wall(p, now - prev < 4 * period_ns ? now - prev : 4 * period_ns);
        prev = now;
        /* Fixed-rate schedule; after a long stall skip the missed ticks instead of bursting. */
        next += period_ns;
        if (next < now)
            next = now + period_ns;
    }
    if (cpu) {
        /* A last round at the window's end: the CPU used since the previous round (all of it
         * after a stall, e.g. a slow first symbolization) is in the window too. */
        round_cpu(p, skpx_mono_ns(), period_ns, min_cpu);
        skpx_acct_finish(&p->acct, give_cpu, p);
        p->pending_end_ns = p->acct.pending_end;
        p->untracked = p->acct.untracked;
        skpx_acct_cleanup(&p->acct);
        if (p->task_dir)
            closedir(p->task_dir);
        p->task_dir = NULL;
    }
}

static void run_dump(struct proc_run *p)
{
    struct skyprof_capture c;
    relist(p);
    for (int i = 0; i < p->n_threads; i++) {
        int rc = capture_one(p, &p->threads[i], &c);
        if (rc != 0) {
            p->lost++;
            continue;
        }
        int64_t v[1] = {1};
        add_stack(p, &c, v, &p->threads[i], false);
    }
}

static int emit_cb(void *ud, const struct skyprof_capture *stack, const int64_t *values,
                   const struct skyprof_proc_thread *thread)
{
    struct proc_run *p = ud;
    uint64_t before = p->dropped;
    add_stack(p, stack, values, thread, true);
    return p->dropped == before ? 0 : -1;
}

/* Builds the profile of the task; returns false with p->r->error set on failure. */
static bool run_task(struct proc_run *p, char *error, size_t ecap)
{
    const char *ev = p->spec.event;
    bool cpu = strcmp(ev, "cpu") == 0;
    bool wall = strcmp(ev, "wall") == 0;
    bool dump = strcmp(ev, "goroutine") == 0;
    int64_t hz = p->spec.sampling_hz > 0 ? p->spec.sampling_hz : SKP_PROC_DEFAULT_HZ;
    if (hz > SKP_PROC_MAX_HZ)
        hz = SKP_PROC_MAX_HZ;
    int64_t period_ns = 1000000000LL / hz;
    int64_t duration_ms = p->spec.duration_ms;
    if (duration_ms <= 0)
        duration_ms = SKP_PROC_WINDOW_DEFAULT_MS;
    if (duration_ms > p->r->max_duration_ms)
        duration_ms = p->r->max_duration_ms;

    struct skpx_pprof_type types[SKPX_PPROF_MAX_TYPES];
    size_t n_types = 0;
    struct skpx_pprof_type period_type = {NULL, NULL};
    int64_t period = 0;
    struct skyprof_event_types et;
    memset(&et, 0, sizeof(et));
    if (cpu || wall) {
        types[0] = (struct skpx_pprof_type){"samples", "count"};
        types[1] = (struct skpx_pprof_type){cpu ? "cpu" : "wall", "nanoseconds"};
        n_types = 2;
        period_type = types[1];
        period = period_ns;
    } else if (dump) {
        types[0] = (struct skpx_pprof_type){"goroutine", "count"};
        n_types = 1;
        period_type = types[0];
        period = 1;
    } else {
        int rc = p->src.event_types ? p->src.event_types(p->src.ud, ev, p->spec.dump_period, &et)
                                    : SKYPROF_EVENT_UNSUPPORTED;
        if (rc != 0 || et.n < 1 || et.n > SKPX_PPROF_MAX_TYPES || !p->src.run_event) {
            snprintf(error, ecap, "event %s is not supported by the %s agent", ev,
                     p->src.name ? p->src.name : "skyprof");
            return false;
        }
        for (int i = 0; i < et.n; i++)
            types[i] = (struct skpx_pprof_type){et.type[i], et.unit[i]};
        n_types = (size_t)et.n;
        if (et.period_type)
            period_type = (struct skpx_pprof_type){et.period_type, et.period_unit};
        period = et.period;
    }
    skp_err err = skpx_pprof_new(types, n_types, SKP_PROC_PROFILE_BYTES_MAX, &p->prof);
    if (!err && period_type.type)
        err = skpx_pprof_set_period(p->prof, &period_type, period);
    if (err) {
        snprintf(error, ecap, "cannot create the profile: %s", skp_strerror(err));
        return false;
    }
    int64_t t0 = skpx_now_ms() * MS_NS;
    int64_t m0 = skpx_mono_ns();
    if (cpu || wall) {
        run_sampling(p, cpu, period_ns, duration_ms);
    } else if (dump) {
        run_dump(p);
        if (p->src.run_event) { /* the source's extra goroutines (Python: asyncio tasks) */
            char why[200] = "";
            int rc = p->src.run_event(p->src.ud, ev, 0, p->spec.dump_period, &p->r->stop, emit_cb,
                                      p, why, sizeof(why));
            if (rc != 0 && rc != SKYPROF_EVENT_UNSUPPORTED)
                SKPX_WARN("skyprof: thread dump of task %.80s without the %s agent's extra "
                          "goroutines: %s",
                          p->spec.task_id, p->src.name ? p->src.name : "", why);
        }
    } else {
        int rc = p->src.run_event(p->src.ud, ev, duration_ms, p->spec.dump_period, &p->r->stop,
                                  emit_cb, p, error, ecap);
        if (rc != 0) {
            if (!error[0])
                snprintf(error, ecap, "event %s failed in the %s agent", ev,
                         p->src.name ? p->src.name : "skyprof");
            return false;
        }
    }
    skpx_pprof_set_time(p->prof, t0, skpx_mono_ns() - m0);
    char note[200];
    snprintf(note, sizeof(note),
             "skyprof %s agent, event %s, %" PRIu64 " samples, %" PRIu64
             " dropped (budget), %" PRIu64 " captures lost, %" PRIu64 " of %" PRIu64 " rounds",
             p->src.name ? p->src.name : "", ev, p->samples, p->dropped, p->lost, p->ticks,
             p->ticks_expected);
    err = skpx_pprof_add_comment(p->prof, note);
    if (cpu && !err) {
        snprintf(note, sizeof(note),
                 "cpu accounting: %.3f s on a thread's last stack, %.3f s under synthetic "
                 "frames, %.3f s left out (pending at the end), %" PRIu64 " threads untracked",
                 (double)p->carried_ns / 1e9, (double)p->synthetic_ns / 1e9,
                 (double)p->pending_end_ns / 1e9, p->untracked);
        err = skpx_pprof_add_comment(p->prof, note);
    }
    (void)err; /* a full budget only loses the comment */
    return true;
}

static void *proc_main(void *arg)
{
    struct skp__proc_runner *r = arg;
    struct proc_run *p = skpx_calloc(1, sizeof(*p));
    char error[256] = "";
    uint8_t *file = NULL;
    size_t file_len = 0;
    size_t builder_bytes = 0;
    struct skpx_pprof *kept = NULL;
    if (p) {
        p->r = r;
        pthread_mutex_lock(&r->mu);
        p->src = r->src;
        p->spec = r->cur;
        pthread_mutex_unlock(&r->mu);
        p->frames = skpx_calloc(r->max_depth, sizeof(*p->frames));
        p->scratch = skpx_malloc(CAPTURE_SCRATCH_BYTES);
        p->pf = skpx_calloc(SKPX_PPROF_MAX_FRAMES, sizeof(*p->pf));
        p->ids = skpx_calloc(SKPX_PPROF_MAX_FRAMES, sizeof(*p->ids));
    }
    if (!p || !p->frames || !p->scratch || !p->pf || !p->ids) {
        snprintf(error, sizeof(error), "out of memory starting the task");
    } else if (run_task(p, error, sizeof(error))) {
        builder_bytes = skpx_pprof_bytes(p->prof);
        if (p->spec.continuous) {
            kept = p->prof; /* uploaded as stacks by the channel (cont_agent.c) */
            p->prof = NULL;
        } else {
            skp_err err = skpx_pprof_encode(p->prof, true, &file, &file_len);
            if (err)
                snprintf(error, sizeof(error), "cannot encode the profile: %s", skp_strerror(err));
        }
    }
    if (p) {
        if (p->src.end)
            p->src.end(p->src.ud);
        skpx_pprof_free(p->prof);
        SKPX_FREE_ALL(p->frames, p->scratch, p->pf, p->ids, p->sym, p->symtext);
    }
    pthread_mutex_lock(&r->mu);
    if (p) {
        r->stats.samples += p->samples;
        r->stats.samples_dropped += p->dropped;
        r->stats.captures_lost += p->lost;
    }
    r->stats.last_builder_bytes = (int64_t)builder_bytes;
    r->stats.last_file_bytes = (int64_t)file_len;
    if (error[0]) {
        skpx_pprof_free(kept);
        kept = NULL;
    }
    r->prof = kept;
    r->file = error[0] ? NULL : file;
    r->file_len = error[0] ? 0 : file_len;
    if (error[0])
        skpx_free(file);
    snprintf(r->error, sizeof(r->error), "%s", error);
    r->state = SKP_PROC_DONE;
    pthread_mutex_unlock(&r->mu);
    skpx_free(p);
    return NULL;
}

static void queue_error(struct skp__proc_runner *r, const char *task_id, const char *msg)
{
    if (r->n_errs >= SKP_PROC_ERRORS_MAX)
        return; /* bounded: the server's log shows NOTIFIED without an answer */
    snprintf(r->errs[r->n_errs].task_id, sizeof(r->errs[0].task_id), "%s", task_id);
    snprintf(r->errs[r->n_errs].msg, sizeof(r->errs[0].msg), "%s", msg);
    r->n_errs++;
}

skp_err skp__pprof_command_exec(void *ud, const Skywalking__V3__Command *cmd, char *reason,
                                size_t cap)
{
    struct skp__proc_runner *r = ud;
    struct skp__proc_spec spec;
    skp_err err = skp__pprof_command_parse(cmd, &spec, reason, cap);
    pthread_mutex_lock(&r->mu);
    r->stats.tasks_received++;
    if (spec.create_time_ms > r->last_create_time)
        r->last_create_time = spec.create_time_ms;
    if (err) {
        if (spec.task_id[0])
            queue_error(r, spec.task_id, reason);
        r->stats.tasks_refused++;
        pthread_mutex_unlock(&r->mu);
        return err;
    }
    pthread_mutex_unlock(&r->mu);
    err = skp__proc_runner_start(r, &spec, reason, cap);
    if (err) {
        pthread_mutex_lock(&r->mu);
        queue_error(r, spec.task_id, reason);
        pthread_mutex_unlock(&r->mu);
    }
    return SKP_OK; /* a refusal is answered with an error upload */
}

skp_err skp__proc_runner_start(struct skp__proc_runner *r, const struct skp__proc_spec *spec,
                               char *reason, size_t cap)
{
    pthread_mutex_lock(&r->mu);
    skp_err err = SKP_OK;
    if (!r->has_src) {
        err = SKP_ENOTSUP;
        snprintf(reason, cap,
                 "process profiling is not available in this agent (no process "
                 "source)");
    } else if (r->state != SKP_PROC_IDLE) {
        err = SKP_ESTATE;
        snprintf(reason, cap, "another process profiling task is running in this process");
    }
    if (err) {
        r->stats.tasks_refused++;
        pthread_mutex_unlock(&r->mu);
        return err;
    }
    r->cur = *spec;
    __atomic_store_n(&r->stop, 0, __ATOMIC_SEQ_CST);
    r->state = SKP_PROC_RUNNING;
    r->error[0] = '\0';
    r->started_ms = skpx_now_ms();
    r->stats.tasks_run++;
    err = skp__thread_start(&r->thread, "skp-proc", proc_main, r);
    if (err) {
        r->state = SKP_PROC_IDLE;
        r->stats.tasks_run--;
        r->stats.tasks_refused++;
        snprintf(reason, cap, "cannot start the profiling thread");
        err = SKP_EIO;
    } else {
        r->thread_started = true;
    }
    pthread_mutex_unlock(&r->mu);
    SKPX_INFO("skyprof: process profiling task %.80s (%s%s) %s", spec->task_id, spec->event,
              spec->continuous ? ", triggered" : "", err ? "refused: no thread" : "started");
    return err;
}

bool skp__proc_upload_peek(struct skp__proc_runner *r, struct skp__proc_upload *u)
{
    memset(u, 0, sizeof(*u));
    pthread_mutex_lock(&r->mu);
    bool ready = false;
    if (r->n_errs > 0) {
        snprintf(u->task_id, sizeof(u->task_id), "%s", r->errs[0].task_id);
        snprintf(u->error, sizeof(u->error), "%s", r->errs[0].msg);
        ready = true;
    } else if (r->state == SKP_PROC_DONE) {
        snprintf(u->task_id, sizeof(u->task_id), "%s", r->cur.task_id);
        snprintf(u->error, sizeof(u->error), "%s", r->error);
        u->file = r->file;
        u->file_len = r->file_len;
        u->is_task = true;
        u->continuous = r->cur.continuous;
        u->prof = r->prof;
        snprintf(u->event, sizeof(u->event), "%s", r->cur.event);
        u->started_ms = r->started_ms;
        ready = true;
    }
    pthread_mutex_unlock(&r->mu);
    return ready;
}

void skp__proc_upload_done(struct skp__proc_runner *r, const struct skp__proc_upload *u, bool ok,
                           bool oversize)
{
    pthread_mutex_lock(&r->mu);
    if (ok)
        r->stats.uploads_ok++;
    else
        r->stats.uploads_failed++;
    if (oversize)
        r->stats.uploads_oversize++;
    if (!ok) {
        pthread_mutex_unlock(&r->mu);
        return;
    }
    if (!u->is_task) {
        if (r->n_errs > 0) {
            memmove(&r->errs[0], &r->errs[1], sizeof(r->errs[0]) * (size_t)(r->n_errs - 1));
            r->n_errs--;
        }
        pthread_mutex_unlock(&r->mu);
        return;
    }
    skpx_free(r->file);
    r->file = NULL;
    r->file_len = 0;
    skpx_pprof_free(r->prof);
    r->prof = NULL;
    pthread_mutex_unlock(&r->mu);
    join_task(r); /* the thread has set DONE and is returning */
    pthread_mutex_lock(&r->mu);
    r->state = SKP_PROC_IDLE;
    pthread_mutex_unlock(&r->mu);
}
