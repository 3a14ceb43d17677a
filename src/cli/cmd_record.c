/* cmd_record.c - `skyprof record --pid P ...`: samples a running process from outside (src/attach)
 * at a fixed rate for a duration, aggregates the stacks into a call tree, and writes it with the
 * same exporters skyprofd uses (server/export*.c are format-only: they render a hand-built
 * struct analysis). Optionally follows the process's descendants (--subprocesses).
 * Single-threaded: one loop sleeps to absolute deadlines and reads every followed process. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attach/native.h"
#include "attach/profile.h"
#include "attach/proctree.h"
#include "attach/pyreader.h"
#include "attach/pytasks.h"
#include "cli/cli.h"
#include "cli/cli_pid.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/cpu_acct.h"
#include "common/procfs.h"
#include "server/analysis/analyzer.h"
#include "server/export/export.h"

static const char g_usage[] =
    "Usage: skyprof record --pid PID -o FILE [--duration S] [--rate HZ] [--idle]\n"
    "                      [--subprocesses] [--format pprof|collapsed|speedscope|html]\n"
    "                      [--blocking] [--native] [--asyncio]\n"
    "Samples every Python thread of process PID RATE times a second (default 100) for S seconds\n"
    "(default 10; Ctrl-C stops early) and writes the profile to FILE. The format defaults to the\n"
    "file's extension (.pb.gz/.pprof, .txt/.collapsed, .json/.speedscope, .html), else pprof.\n"
    "  --idle           a wall-clock profile: every thread at every tick, running or not\n"
    "                   (sleeping, waiting on I/O or a lock); by default the profile is the\n"
    "                   CPU each thread used (its CPU clock), on the stacks it used it in,\n"
    "                   threads that lived between two ticks included\n"
    "  --subprocesses   also sample the process's descendants, including those that start\n"
    "                   during the recording (gunicorn/uWSGI workers, multiprocessing); each\n"
    "                   process's stacks sit under a 'process PID' root frame\n"
    "  --blocking       stop the threads (ptrace) during each read: exact stacks, slower target\n"
    "  --native         native (C/C++) frames too, merged with the Python frames (a C\n"
    "                   extension's frames under their Python caller; also for processes\n"
    "                   without Python); implies --blocking: every sample stops the threads\n"
    "  --asyncio        also each suspended asyncio task's await chain (CPython 3.11), under\n"
    "                   an '(asyncio task)' root frame and over a '(waiting)' leaf (it waits\n"
    "                   for I/O, a timer, another task) or a '(ready, loop busy)' leaf (it\n"
    "                   could run, the event loop runs other code); a running task is on its\n"
    "                   thread's stack already\n"
    "Frames read 'function (file:line)'. Needs ptrace access to the process; see\n"
    "docs/out-of-process.md.\n";

/* Most processes followed at once with --subprocesses. */
#define RECORD_MAX_TARGETS 256
/* How often the descendant list is refreshed (ns). */
#define RECORD_RESCAN_NS 500000000LL
/* Longest frame label ("name (file:line)"). */
#define RECORD_LABEL_MAX (ATTACH_NAME_MAX + ATTACH_FILE_MAX + 32)
/* The frames of CPU no Python stack carries: threads that ended before the recording read a
 * stack of them; threads without Python frames (a C library's, a runtime's). */
#define RECORD_ENDED_FRAME "(threads ended between samples)"
#define RECORD_UNSAMPLED_FRAME "(thread without Python frames)"
/* How many ticks old a thread's last stack may be to take the CPU it used while no tick saw it
 * running. */
#define RECORD_LAST_STACK_TICKS 2
/* The leaf of a suspended task's stack (as the Python agent marks a waiting request), and of a
 * task that is ready to run while the loop runs other code (pytasks.h: the rule). */
#define RECORD_WAITING_LEAF "(waiting)"
#define RECORD_READY_LEAF "(ready, loop busy)"

struct record_opts {
    long pid;
    double duration_s;
    long long rate_hz;
    bool idle, subprocesses, blocking, native, asyncio;
    const char *out;
    const char *format;
};

static const struct cli_stored_opt g_options[] = {
    CLI_PID_OPT("pid", 'p', struct record_opts, pid, "record: --pid wants a process id, got '%s'"),
    CLI_OWN_OPT("duration", 'd'),
    CLI_INT_OPT("rate", 'r', struct record_opts, rate_hz, 1, 10000,
                "record: --rate wants 1..10000 samples/s, got '%s'"),
    CLI_FLAG_OPT("idle", 'i', struct record_opts, idle),
    CLI_FLAG_OPT("subprocesses", 's', struct record_opts, subprocesses),
    CLI_FLAG_OPT("blocking", 'b', struct record_opts, blocking),
    CLI_FLAG_OPT("native", 'N', struct record_opts, native),
    CLI_FLAG_OPT("asyncio", 'A', struct record_opts, asyncio),
    CLI_STR_OPT("output", 'o', struct record_opts, out),
    CLI_STR_OPT("format", 'f', struct record_opts, format),
};

static int on_opt(void *ud, int opt, const char *arg)
{
    struct record_opts *o = ud;
    char *end = NULL;
    switch (opt) {
    case 'd':
        o->duration_s = strtod(arg, &end);
        if (!end || *end || !(o->duration_s > 0) || o->duration_s > 86400)
            return cli_usage_error("record: --duration wants seconds in (0, 86400], got '%s'", arg);
        return CLI_PARSE_NEXT;
    default:
        return CLI_PARSE_UNKNOWN;
    }
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s);
    size_t b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static const char *format_from_name(const char *path)
{
    if (ends_with(path, ".txt") || ends_with(path, ".collapsed") || ends_with(path, ".folded"))
        return "collapsed";
    if (ends_with(path, ".json") || ends_with(path, ".speedscope"))
        return "speedscope";
    if (ends_with(path, ".html") || ends_with(path, ".htm"))
        return "html";
    return "pprof";
}

struct followed {
    pid_t pid;
    struct attach_target *t;   /* NULL: not (yet) a readable CPython */
    struct attach_native *nat; /* --native: its unwinder (t may be NULL: no CPython) */
    int64_t retry_ns;          /* next attempt to open when t is NULL */
    bool gone;
    /* CPU accounting (without --idle): allocated at the process's first round */
    struct skpx_acct *acct;
    int64_t given_frac; /* CPU given to ended threads, not yet a whole period */
};

struct recorder {
    struct record_opts o;
    struct followed targets[RECORD_MAX_TARGETS];
    size_t n_targets;
    struct attach_profile prof;
    struct attach_sample *sample;
    struct attach_tasks *tasks; /* --asyncio */
    char *label_buf;            /* ATTACH_MAX_DEPTH labels of RECORD_LABEL_MAX */
    const char **labels;
    uint64_t ticks, missed_ticks, torn, thread_samples, task_samples, tasks_torn;
    int64_t cpu_sampled_ns, cpu_given_ns, cpu_left_ns; /* CPU accounting (without --idle) */
};

static struct followed *follow(struct recorder *r, pid_t pid)
{
    for (size_t i = 0; i < r->n_targets; i++)
        if (r->targets[i].pid == pid)
            return &r->targets[i];
    if (r->n_targets >= RECORD_MAX_TARGETS)
        return NULL;
    struct followed *f = &r->targets[r->n_targets++];
    memset(f, 0, sizeof(*f));
    f->pid = pid;
    return f;
}

/* Opens targets not open yet (a new worker may still be starting its interpreter). */
static void open_pending(struct recorder *r, int64_t now)
{
    for (size_t i = 0; i < r->n_targets; i++) {
        struct followed *f = &r->targets[i];
        if (f->t || f->gone || now < f->retry_ns)
            continue;
        char why[ATTACH_WHY_MAX];
        skp_err err = attach_target_open(f->pid, &f->t, why, sizeof(why));
        if (err == SKP_ENOTFOUND && kill(f->pid, 0) != 0)
            f->gone = true;
        if (!err && r->o.native && attach_native_open(f->pid, f->t, &f->nat, why, sizeof(why))) {
            attach_target_close(f->t);
            f->t = NULL;
        }
        f->retry_ns = now + RECORD_RESCAN_NS;
    }
}

/* Appends the label of frame f to the stack being built (r->labels[*n]). */
static void put_frame(struct recorder *r, size_t *n, const struct attach_frame *f)
{
    char *b = r->label_buf + *n * RECORD_LABEL_MAX;
    if (f->line >= 0)
        snprintf(b, RECORD_LABEL_MAX, "%s (%s:%d)", f->name, f->file, f->line);
    else
        snprintf(b, RECORD_LABEL_MAX, "%s (%s)", f->name, f->file);
    r->labels[(*n)++] = b;
}

/* Appends a frame of plain text (a root or leaf marker). */
static void put_text(struct recorder *r, size_t *n, const char *text)
{
    char *b = r->label_buf + *n * RECORD_LABEL_MAX;
    snprintf(b, RECORD_LABEL_MAX, "%s", text);
    r->labels[(*n)++] = b;
}

/* Starts a stack: the 'process PID' root with --subprocesses. Returns the labels used. */
static size_t stack_begin(struct recorder *r, pid_t pid)
{
    size_t n = 0;
    if (r->o.subprocesses) {
        char root[32];
        snprintf(root, sizeof(root), "process %d", (int)pid);
        put_text(r, &n, root);
    }
    return n;
}

/* Adds `count` samples (0: only the nodes, for CPU the thread spends later) of the thread's
 * stack; returns its innermost node or ATTACH_PROFILE_NONE. */
static uint32_t add_thread(struct recorder *r, pid_t pid, const struct attach_sample *s,
                           const struct attach_thread *th, uint64_t count)
{
    size_t depth = th->n_frames < ATTACH_MAX_DEPTH ? th->n_frames : ATTACH_MAX_DEPTH - 1;
    size_t n = stack_begin(r, pid);
    /* frames are innermost first; the profile wants the outermost first */
    for (size_t k = depth; k-- > 0;)
        put_frame(r, &n, &s->frames[th->first_frame + k]);
    r->thread_samples++;
    return n ? attach_profile_add_n(&r->prof, r->labels, n, count) : ATTACH_PROFILE_NONE;
}

/* ---- CPU accounting (common/cpu_acct.h), the default without --idle --------------------------
 * Every tick each Python thread's CPU clock (/proc/PID/task/TID/schedstat, ns) and the
 * process's (/proc/PID/stat utime + stime, which counts ended threads too) go through the
 * accounting; a thread's CPU becomes samples in whole periods (a sample stands for one period of
 * CPU, so count x period is CPU time), the rest waiting for the next tick. Where they go: a
 * thread running now, to the stack read now (half to the stack a recent tick read when it
 * differs: it moved from one to the other meanwhile); a thread not running now, to the stack a
 * recent tick read (its CPU came before it blocked: a handler that burned, then waits in its
 * write), else to the stack read now (reading disturbs nothing). Threads that ended between
 * ticks get, on their last stack, the process CPU no live thread accounts for. */

/* utime + stime of a /proc .../stat line in ns, or -1. */
static int64_t stat_cpu_ns(const char *buf)
{
    const char *rp = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
    if (!rp)
        return -1;
    unsigned long long ut = 0, st = 0;
    /* after ") ": state(3) ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
     * utime(14) stime(15) */
    if (sscanf(rp + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    long hz = sysconf(_SC_CLK_TCK);
    return (int64_t)(ut + st) * (1000000000LL / (hz > 0 ? hz : 100));
}

static int64_t process_cpu_ns(pid_t pid)
{
    char path[64];
    char buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    return skpx_procfs_read(path, buf, sizeof(buf)) > 0 ? stat_cpu_ns(buf) : -1;
}

static int64_t thread_cpu_ns(pid_t pid, pid_t tid)
{
    char path[96];
    char buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)pid, (int)tid);
    unsigned long long ns = 0;
    if (skpx_procfs_read(path, buf, sizeof(buf)) > 0 && sscanf(buf, "%llu", &ns) == 1)
        return (int64_t)ns;
    /* no schedstat (a kernel without CONFIG_SCHED_INFO): clock ticks */
    snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    return skpx_procfs_read(path, buf, sizeof(buf)) > 0 ? stat_cpu_ns(buf) : -1;
}

struct give_ctx {
    struct recorder *r;
    struct followed *f;
    int64_t period_ns;
};

/* skpx_acct_give_cb: CPU of an ended thread (on its last stack) or of no thread. */
static void give_cpu(void *ud, struct skpx_acct_thread *t, int64_t ns)
{
    struct give_ctx *g = ud;
    g->f->given_frac += ns;
    uint64_t k = (uint64_t)(g->f->given_frac / g->period_ns);
    if (!k)
        return;
    g->f->given_frac -= (int64_t)k * g->period_ns;
    g->r->cpu_given_ns += (int64_t)k * g->period_ns;
    if (t && t->n_ids) {
        attach_profile_add_at(&g->r->prof, (uint32_t)t->ids[0], k);
        return;
    }
    size_t n = stack_begin(g->r, g->f->pid);
    put_text(g->r, &n, RECORD_ENDED_FRAME);
    (void)attach_profile_add_n(&g->r->prof, g->r->labels, n, k);
}

/* A thread's pending CPU as samples of its stack: the stack read now when it runs, else the
 * stack a recent tick read (its CPU came before it blocked; see above). */
static void account_thread(struct recorder *r, struct followed *f, const struct attach_sample *s,
                           const struct attach_thread *th, struct skpx_acct_thread *t,
                           int64_t period)
{
    int64_t pending = t->seen_ns - t->done_ns;
    if (t->delta_ns < period / 4 && pending < period && !(t->is_new && t->delta_ns > 0))
        return; /* off CPU since the last tick (a new thread that ran is read at once) */
    uint64_t count = (uint64_t)(pending / period);
    t->done_ns += (int64_t)count * period;
    r->cpu_sampled_ns += (int64_t)count * period;
    bool recent = t->n_ids && t->round - t->ids_round <= RECORD_LAST_STACK_TICKS;
    if (!th->running && recent) {
        attach_profile_add_at(&r->prof, (uint32_t)t->ids[0], count);
        return;
    }
    uint32_t leaf = add_thread(r, f->pid, s, th, 0);
    /* Running now at another stack than a recent tick read: the CPU in between was spent
     * somewhere on the way from one to the other; half of it goes to each (an odd sample to
     * either in turn). */
    uint64_t to_prev = 0;
    if (recent && leaf != (uint32_t)t->ids[0]) {
        to_prev = (count + (t->ids_round & 1)) / 2;
        attach_profile_add_at(&r->prof, (uint32_t)t->ids[0], to_prev);
    }
    attach_profile_add_at(&r->prof, leaf, count - to_prev);
    uint64_t id = leaf;
    if (leaf != ATTACH_PROFILE_NONE && skpx_acct_set_ids(t, &id, 1) != SKP_OK)
        t->n_ids = 0;
}

static void cpu_round(struct recorder *r, struct followed *f, const struct attach_sample *s)
{
    int64_t period = 1000000000LL / r->o.rate_hz;
    if (!f->acct) {
        f->acct = skpx_calloc(1, sizeof(*f->acct));
        if (f->acct && skpx_acct_init(f->acct) != SKP_OK) {
            skpx_free(f->acct);
            f->acct = NULL;
        }
        if (!f->acct)
            return;
    }
    skpx_acct_round_begin(f->acct, skpx_mono_ns(), process_cpu_ns(f->pid));
    for (size_t k = 0; k < s->n_threads; k++) {
        const struct attach_thread *th = &s->threads[k];
        /* a thread state without frames: one made for a thread that has not started (it carries
         * its parent's ids), or a thread between two evaluations; nothing to put CPU on */
        if (th->tid <= 0 || th->n_frames == 0)
            continue;
        int64_t ns = thread_cpu_ns(f->pid, th->tid);
        struct skpx_acct_thread *t = ns < 0 ? NULL : skpx_acct_observe(f->acct, th->tid, ns, true);
        if (t)
            account_thread(r, f, s, th, t, period);
    }
    /* Every other thread the kernel still has: not ended (a torn read, a thread state already
     * gone while its thread exits, a thread without Python frames). */
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)f->pid);
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        pid_t tid = (pid_t)strtol(e->d_name, NULL, 10);
        int64_t ns = thread_cpu_ns(f->pid, tid);
        struct skpx_acct_thread *t = ns < 0 ? NULL : skpx_acct_observe(f->acct, tid, ns, false);
        if (!t || t->listed || t->seen_ns - t->done_ns < period)
            continue; /* a Python thread's CPU waits for a stack of it */
        uint64_t count = (uint64_t)((t->seen_ns - t->done_ns) / period);
        t->done_ns += (int64_t)count * period;
        r->cpu_sampled_ns += (int64_t)count * period;
        size_t n = stack_begin(r, f->pid);
        put_text(r, &n, RECORD_UNSAMPLED_FRAME);
        (void)attach_profile_add_n(&r->prof, r->labels, n, count);
    }
    if (d)
        closedir(d);
    struct give_ctx g = {r, f, period};
    skpx_acct_round_end(f->acct, give_cpu, &g);
}

/* The end of the recording: what the accounting still holds goes into the profile. */
static void cpu_finish(struct recorder *r)
{
    for (size_t i = 0; i < r->n_targets; i++) {
        struct followed *f = &r->targets[i];
        if (!f->acct)
            continue;
        struct give_ctx g = {r, f, 1000000000LL / r->o.rate_hz};
        skpx_acct_finish(f->acct, give_cpu, &g);
        r->cpu_left_ns += f->acct->pending_end + f->given_frac;
        skpx_acct_cleanup(f->acct);
        skpx_free(f->acct);
        f->acct = NULL;
    }
}

/* --asyncio: one stack per suspended task, its await chain outermost first between an
 * '(asyncio task)' root and a '(waiting)' or '(ready, loop busy)' leaf (the shape the in-process
 * agent gives a suspended request). Running tasks are left out: their frames are on their
 * thread's stack. */
static void add_tasks(struct recorder *r, pid_t pid, const struct attach_tasks *tk)
{
    r->tasks_torn += tk->n_torn;
    for (size_t i = 0; i < tk->n_tasks; i++) {
        const struct attach_task *t = &tk->tasks[i];
        if (t->running || t->n_frames == 0)
            continue;
        size_t n = stack_begin(r, pid);
        put_text(r, &n, "(asyncio task)");
        size_t room = ATTACH_MAX_DEPTH - n - 1;
        size_t depth = t->n_frames < room ? t->n_frames : room;
        for (size_t k = depth; k-- > 0;)
            put_frame(r, &n, &tk->frames[t->first_frame + k]);
        put_text(r, &n, t->ready ? RECORD_READY_LEAF : RECORD_WAITING_LEAF);
        attach_profile_add(&r->prof, r->labels, n);
        r->task_samples++;
    }
}

static void sample_all(struct recorder *r)
{
    for (size_t i = 0; i < r->n_targets; i++) {
        struct followed *f = &r->targets[i];
        if (!f->t && !f->nat)
            continue;
        skp_err err = f->nat ? attach_native_sample(f->nat, r->sample)
                             : attach_target_sample(f->t, r->sample,
                                                    r->o.blocking ? ATTACH_SAMPLE_BLOCKING : 0);
        if (err == SKP_ENOTFOUND) {
            attach_native_close(f->nat);
            f->nat = NULL;
            attach_target_close(f->t);
            f->t = NULL;
            f->gone = true;
            continue;
        }
        if (err)
            continue;
        r->torn += r->sample->n_torn;
        if (r->o.idle) {
            for (size_t k = 0; k < r->sample->n_threads; k++)
                (void)add_thread(r, f->pid, r->sample, &r->sample->threads[k], 1);
        } else {
            cpu_round(r, f, r->sample);
        }
        /* right after the sample: the tasks' frame strings share its code cache */
        if (r->tasks && f->t && attach_target_tasks(f->t, r->tasks) == SKP_OK)
            add_tasks(r, f->pid, r->tasks);
    }
}

/* The first sibling from c on (c included) that holds samples: nodes with none were made for the
 * CPU a thread might spend later (cpu_round) and are left out of the output. */
static uint32_t live_from(const struct attach_profile *p, uint32_t c)
{
    while (c != ATTACH_PROFILE_NONE && p->nodes[c].count == 0)
        c = p->nodes[c].next_sibling;
    return c;
}

/* Call tree -> struct analysis (one tree per outermost frame with samples, nodes in BFS order). */
static struct analysis *to_analysis(const struct attach_profile *p, int period_ms)
{
    struct analysis *a = skpx_xcalloc(1, sizeof(*a));
    size_t n_roots = 0;
    for (uint32_t c = live_from(p, p->nodes[0].first_child); c != ATTACH_PROFILE_NONE;
         c = live_from(p, p->nodes[c].next_sibling))
        n_roots++;
    a->trees = skpx_xcalloc(n_roots ? n_roots : 1, sizeof(*a->trees));
    a->n_snapshots = p->n_samples;
    uint32_t *queue = skpx_xmalloc(p->n_nodes * sizeof(uint32_t));
    uint32_t *index_of = skpx_xmalloc(p->n_nodes * sizeof(uint32_t));
    for (uint32_t root = live_from(p, p->nodes[0].first_child); root != ATTACH_PROFILE_NONE;
         root = live_from(p, p->nodes[root].next_sibling)) {
        size_t head = 0;
        size_t tail = 0;
        queue[tail++] = root;
        while (head < tail) {
            uint32_t v = queue[head++];
            for (uint32_t c = live_from(p, p->nodes[v].first_child); c != ATTACH_PROFILE_NONE;
                 c = live_from(p, p->nodes[c].next_sibling))
                queue[tail++] = c;
        }
        struct analysis_tree *t = &a->trees[a->n_trees++];
        t->nodes = skpx_xcalloc(tail, sizeof(*t->nodes));
        t->n_nodes = tail;
        for (size_t i = 0; i < tail; i++)
            index_of[queue[i]] = (uint32_t)i;
        for (size_t i = 0; i < tail; i++) {
            const struct attach_pnode *pn = &p->nodes[queue[i]];
            struct analysis_node *n = &t->nodes[i];
            uint64_t child_sum = 0;
            for (uint32_t c = pn->first_child; c != ATTACH_PROFILE_NONE;
                 c = p->nodes[c].next_sibling)
                child_sum += p->nodes[c].count;
            uint32_t first = live_from(p, pn->first_child);
            uint32_t next = live_from(p, pn->next_sibling);
            n->id = (uint32_t)i + 1;
            n->parent_id = i == 0 ? 0 : index_of[pn->parent] + 1;
            n->code_signature = p->labels[pn->label];
            n->count = pn->count;
            n->duration = (int64_t)pn->count * period_ms;
            n->duration_child_excluded =
                (int64_t)(pn->count > child_sum ? pn->count - child_sum : 0) * period_ms;
            n->first_child = first == ATTACH_PROFILE_NONE ? UINT32_MAX : index_of[first];
            n->next_sibling = (i == 0 || next == ATTACH_PROFILE_NONE) ? UINT32_MAX : index_of[next];
        }
    }
    skpx_free(queue);
    skpx_free(index_of);
    return a;
}

static int write_file(const char *path, const uint8_t *data, size_t len)
{
    FILE *fp = strcmp(path, "-") == 0 ? stdout : fopen(path, "wb");
    if (!fp) {
        fprintf(stderr, "skyprof record: cannot write %s: %s\n", path, strerror(errno));
        return CLI_EXIT_USAGE;
    }
    size_t w = fwrite(data, 1, len, fp);
    int bad = fp == stdout ? fflush(fp) : fclose(fp);
    if (w != len || bad) {
        fprintf(stderr, "skyprof record: cannot write %s\n", path);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

int cmd_record(struct cli *c, int argc, char **argv)
{
    struct recorder *r = skpx_xcalloc(1, sizeof(*r));
    r->o.duration_s = 10;
    r->o.rate_hz = 100;
    int rc = cli_parse_pid_table(c, argc, argv, ":hp:d:r:o:f:", g_options, CLI_ROWS(g_options),
                                 g_usage, "record", on_opt, &r->o, &r->o.pid);
    if (rc != CLI_PARSE_NEXT)
        goto done;
    rc = CLI_EXIT_USAGE;
    if (!r->o.out) {
        cli_usage_error("record: -o FILE is required (see skyprof record --help)");
        goto done;
    }
    if (optind < argc) {
        cli_usage_error("record: unexpected argument '%s'", argv[optind]);
        goto done;
    }
    enum export_format fmt;
    const char *fmt_name = r->o.format ? r->o.format : format_from_name(r->o.out);
    if (export_format_parse(fmt_name, &fmt) != SKP_OK || fmt == EXPORT_JSON) {
        cli_usage_error("record: --format wants pprof, collapsed, speedscope or html, got '%s'",
                        fmt_name);
        goto done;
    }

    char why[ATTACH_WHY_MAX];
    struct followed *root = follow(r, (pid_t)r->o.pid);
    skp_err err = attach_target_open(root->pid, &root->t, why, sizeof(why));
    /* --native also records processes that run no CPython (a C/C++ service) */
    bool native_only = r->o.native && err == SKP_ENOTFOUND && kill(root->pid, 0) == 0;
    if (err && !native_only) {
        fprintf(stderr, "skyprof record: %s\n", cli_safe(why));
        rc = cli_attach_exit(err);
        goto done;
    }
    if (r->o.native) {
        err = attach_native_open(root->pid, root->t, &root->nat, why, sizeof(why));
        if (err) {
            fprintf(stderr, "skyprof record: %s\n", cli_safe(why));
            rc = cli_attach_exit(err);
            goto done;
        }
    }
    if (attach_profile_init(&r->prof) != SKP_OK) {
        fprintf(stderr, "skyprof record: out of memory\n");
        rc = CLI_EXIT_ATTACH;
        goto done;
    }
    r->sample = skpx_xmalloc(sizeof(*r->sample));
    r->label_buf = skpx_xmalloc((size_t)ATTACH_MAX_DEPTH * RECORD_LABEL_MAX);
    r->labels = skpx_xmalloc(ATTACH_MAX_DEPTH * sizeof(*r->labels));
    if (r->o.asyncio)
        r->tasks = skpx_xmalloc(sizeof(*r->tasks));

    cli_catch_stop_signals(false);

    fprintf(stderr, "skyprof record: process %ld, %s%s, %lld Hz for %g s%s\n", r->o.pid,
            root->t ? "Python " : "no CPython", root->t ? attach_target_version(root->t) : "",
            r->o.rate_hz, r->o.duration_s, r->o.subprocesses ? ", following subprocesses" : "");
    int64_t period_ns = 1000000000LL / r->o.rate_hz;
    int64_t start = skpx_mono_ns();
    int64_t end = start + (int64_t)(r->o.duration_s * 1e9);
    int64_t next = start;
    int64_t next_scan = start;
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    while (!cli_stop_requested()) {
        int64_t now = skpx_mono_ns();
        if (now >= end)
            break;
        if (r->o.subprocesses && now >= next_scan) {
            pid_t kids[ATTACH_DESCENDANTS_MAX];
            size_t n = attach_proc_descendants(root->pid, kids, ATTACH_DESCENDANTS_MAX);
            for (size_t i = 0; i < n; i++)
                (void)follow(r, kids[i]);
            open_pending(r, now);
            next_scan = now + RECORD_RESCAN_NS;
        }
        sample_all(r);
        r->ticks++;
        cli_wait_tick(&next, period_ns, &r->missed_ticks);
    }
    if (!r->o.idle) { /* a last tick at the window's end: the CPU since the previous one */
        sample_all(r);
        r->ticks++;
    }
    struct timespec stop_wall;
    clock_gettime(CLOCK_REALTIME, &stop_wall);
    int64_t stop_wall_ms = (int64_t)stop_wall.tv_sec * 1000 + stop_wall.tv_nsec / 1000000;
    cpu_finish(r);
    double secs = (double)(skpx_mono_ns() - start) / 1e9;
    size_t n_python = 0;
    for (size_t i = 0; i < r->n_targets; i++)
        n_python += r->targets[i].t != NULL || r->targets[i].nat != NULL || r->targets[i].gone;
    fprintf(stderr,
            "skyprof record: %llu samples in %.2f s (%.1f Hz), %llu thread stacks from %zu "
            "process(es), %llu torn reads skipped, %llu ticks missed, %llu stacks dropped\n",
            (unsigned long long)r->ticks, secs, secs > 0 ? (double)r->ticks / secs : 0.0,
            (unsigned long long)r->thread_samples, n_python, (unsigned long long)r->torn,
            (unsigned long long)r->missed_ticks, (unsigned long long)r->prof.n_dropped);
    if (!r->o.idle)
        fprintf(stderr,
                "skyprof record: CPU %.3f s from %lld to %lld (epoch ms): %.3f s on thread "
                "stacks read at ticks, %.3f s of threads that ended between ticks, %.3f s left "
                "out (less than a period per thread)\n",
                (double)(r->cpu_sampled_ns + r->cpu_given_ns) / 1e9,
                (long long)((int64_t)wall.tv_sec * 1000 + wall.tv_nsec / 1000000),
                (long long)stop_wall_ms, (double)r->cpu_sampled_ns / 1e9,
                (double)r->cpu_given_ns / 1e9, (double)r->cpu_left_ns / 1e9);
    if (r->tasks)
        fprintf(stderr,
                "skyprof record: --asyncio: %llu stacks of suspended tasks, %llu torn task reads "
                "skipped\n",
                (unsigned long long)r->task_samples, (unsigned long long)r->tasks_torn);

    if (r->o.native) {
        struct attach_native_stats total = {0};
        for (size_t i = 0; i < r->n_targets; i++) {
            if (!r->targets[i].nat)
                continue;
            struct attach_native_stats ns;
            attach_native_get_stats(r->targets[i].nat, &ns);
            total.samples += ns.samples;
            total.stop_ns += ns.stop_ns;
            total.stop_wait_ns += ns.stop_wait_ns;
            total.threads += ns.threads;
        }
        if (total.samples)
            fprintf(stderr,
                    "skyprof record: --native stopped the target %llu times: held stopped "
                    "%.2f ms on average (%.1f%% of the recording) after %.2f ms waiting for the "
                    "stop; %.1f threads unwound per stop\n",
                    (unsigned long long)total.samples,
                    (double)total.stop_ns / 1e6 / (double)total.samples,
                    secs > 0 ? (double)total.stop_ns / 1e7 / secs : 0.0,
                    (double)total.stop_wait_ns / 1e6 / (double)total.samples,
                    (double)total.threads / (double)total.samples);
    }
    int period_ms = (int)(1000 / r->o.rate_hz);
    if (period_ms < 1)
        period_ms = 1;
    struct analysis *a = to_analysis(&r->prof, period_ms);
    char title[96];
    snprintf(title, sizeof(title), "skyprof record: process %ld", r->o.pid);
    struct export_meta meta = {
        .title = title,
        .dump_period_ms = period_ms,
        .time_ms = (int64_t)wall.tv_sec * 1000 + wall.tv_nsec / 1000000,
    };
    uint8_t *buf = NULL;
    size_t len = 0;
    err = export_render(a, fmt, &meta, &buf, &len);
    analysis_free(a);
    if (err) {
        fprintf(stderr, "skyprof record: cannot render %s: %s\n", fmt_name, skp_strerror(err));
        rc = CLI_EXIT_ATTACH;
        goto done;
    }
    rc = write_file(r->o.out, buf, len);
    skpx_free(buf);
    if (rc == CLI_EXIT_OK && strcmp(r->o.out, "-") != 0)
        fprintf(stderr, "skyprof record: wrote %s (%s, %zu bytes)\n", r->o.out, fmt_name, len);
done:
    for (size_t i = 0; i < r->n_targets; i++) {
        if (r->targets[i].acct)
            skpx_acct_cleanup(r->targets[i].acct);
        skpx_free(r->targets[i].acct);
        attach_native_close(r->targets[i].nat);
        attach_target_close(r->targets[i].t);
    }
    attach_profile_cleanup(&r->prof);
    SKPX_FREE_ALL(r->sample, r->tasks, r->label_buf, r->labels, r);
    return rc;
}
