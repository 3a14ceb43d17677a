/* stack_native_proc.c - the native PROCESS source (skyprof_native_proc_source): whole-process
 * sampling for PprofTask's cpu, wall and thread-dump events in C/C++ services. Threads come from
 * /proc/self/task at every sampling round (agent threads, named "skp-*", are left out; names are
 * read once per new thread and again about once a second); each is captured with the native
 * stack source's signal engine through one engine slot held for the task. A thread that does not
 * answer in PROC_CAPTURE_TIMEOUT_NS PROC_MUTE_STRIKES times in a row (it blocks the signal, or is
 * stopped) is not signalled again during that task; one late answer (a loaded machine that did not
 * schedule the thread in time) only loses that sample. Heap and allocation events are not
 * offered: a sampled allocation hook would replace the process's malloc, which is process-wide
 * state the host relies on (the task answers EXECUTION_TASK_ERROR). Runs only on skp-proc (never
 * concurrently with itself). */
#include "skyprof/skyprof_native.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/native/stack_native_capture.h"
#include "common/alloc.h"
#include "common/procfs.h"

/* Per-capture deadline: shorter than the trace sampler's, a process task visits every thread. */
#define PROC_CAPTURE_TIMEOUT_NS (50 * 1000 * 1000)
/* Threads remembered as having timed out, per task. */
#define PROC_MUTE_MAX 64
/* Timeouts in a row after which a thread is not signalled again during the task. */
#define PROC_MUTE_STRIKES 3

/* Thread names remembered between listings (the listing runs at every round). */
#define PROC_NAMES_MAX 256
/* How often every remembered name is read again (a thread may rename itself after it starts). */
#define PROC_NAMES_REFRESH 100

struct proc_strike {
    int tid;
    int strikes; /* timeouts in a row; PROC_MUTE_STRIKES = muted */
};

struct proc_name {
    int tid;
    char name[48];
};

static struct {
    int slot;       /* engine slot, -1 = none */
    uintptr_t *pcs; /* SKP_NATIVE_MAX_FRAMES */
    struct proc_strike strike[PROC_MUTE_MAX];
    int n_strike;
    DIR *task_dir;           /* /proc/self/task while a task runs */
    struct proc_name *names; /* PROC_NAMES_MAX, the last listing's threads */
    int n_names;
    unsigned listings;
} g_proc = {.slot = -1};

static struct proc_strike *find_strike(int tid)
{
    for (int i = 0; i < g_proc.n_strike; i++)
        if (g_proc.strike[i].tid == tid)
            return &g_proc.strike[i];
    return NULL;
}

static bool is_muted(int tid)
{
    const struct proc_strike *s = find_strike(tid);
    return s && s->strikes >= PROC_MUTE_STRIKES;
}

/* One more timeout for tid. When the table is full the thread is simply signalled again. */
static void add_strike(int tid)
{
    struct proc_strike *s = find_strike(tid);
    if (!s && g_proc.n_strike < PROC_MUTE_MAX) {
        s = &g_proc.strike[g_proc.n_strike++];
        *s = (struct proc_strike){.tid = tid, .strikes = 0};
    }
    if (s)
        s->strikes++;
}

static void clear_strikes(int tid)
{
    struct proc_strike *s = find_strike(tid);
    if (s)
        s->strikes = 0;
}

/* The name of tid from the previous listing (prev[0..n_prev), sorted by tid as readdir gives
 * them, *at advancing), or NULL. */
static const char *known_name(const struct proc_name *prev, int n_prev, int *at, int tid)
{
    while (*at < n_prev && prev[*at].tid < tid)
        (*at)++;
    return *at < n_prev && prev[*at].tid == tid ? prev[*at].name : NULL;
}

static int proc_list(void *ud, struct skyprof_proc_thread *out, int cap)
{
    (void)ud;
    /* kept open for the task (O_CLOEXEC): a listing per round is one getdents, not four calls */
    if (!g_proc.task_dir)
        g_proc.task_dir = opendir("/proc/self/task");
    DIR *d = g_proc.task_dir;
    if (!d)
        return -1;
    rewinddir(d);
    if (!g_proc.names)
        g_proc.names = skpx_calloc(2 * PROC_NAMES_MAX, sizeof(*g_proc.names));
    /* names[0..MAX) hold the previous listing, names[MAX..2 MAX) the new one */
    struct proc_name *prev = g_proc.names;
    struct proc_name *cur = g_proc.names ? g_proc.names + PROC_NAMES_MAX : NULL;
    bool refresh = g_proc.listings++ % PROC_NAMES_REFRESH == 0;
    int n = 0, n_cur = 0, at = 0;
    bool sorted = true;
    int last_tid = 0;
    struct dirent *e;
    while (n < cap && (e = readdir(d)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        int tid = (int)strtol(e->d_name, NULL, 10);
        if (tid <= 0 || is_muted(tid))
            continue;
        sorted = sorted && tid > last_tid;
        last_tid = tid;
        const char *known =
            prev && !refresh && sorted ? known_name(prev, g_proc.n_names, &at, tid) : NULL;
        if (known)
            snprintf(out[n].name, sizeof(out[n].name), "%s", known);
        else
            skpx_procfs_task_comm(0, tid, out[n].name, sizeof(out[n].name));
        if (cur && n_cur < PROC_NAMES_MAX && sorted) {
            cur[n_cur].tid = tid;
            snprintf(cur[n_cur].name, sizeof(cur[n_cur].name), "%s", out[n].name);
            n_cur++;
        }
        if (strncmp(out[n].name, "skp-", 4) == 0)
            continue; /* the agent's own threads */
        out[n].tid = tid;
        out[n].handle = NULL;
        n++;
    }
    if (cur) {
        memcpy(prev, cur, sizeof(*cur) * (size_t)n_cur);
        g_proc.n_names = n_cur;
    }
    return n;
}

static int proc_capture(void *ud, void *handle, int tid, struct skyprof_capture *out)
{
    (void)ud;
    (void)handle;
    out->n = 0;
    out->truncated = false;
    if (is_muted(tid))
        return -1;
    if (!skp__native_source_ensure_installed())
        return -3;
    if (g_proc.slot < 0 && skp__native_slot_acquire(&g_proc.slot) != SKP_OK) {
        g_proc.slot = -1;
        return SKYPROF_CAPTURE_LOST; /* every slot busy with request threads: try later */
    }
    if (!g_proc.pcs)
        g_proc.pcs = skpx_malloc(SKP_NATIVE_MAX_FRAMES * sizeof(uintptr_t));
    if (!g_proc.pcs)
        return SKYPROF_CAPTURE_LOST;
    struct skp__native_target t = {.tid = tid, .stack_lo = 0, .stack_hi = 0};
    struct skp__native_sample s = {.pcs = g_proc.pcs};
    s.cap = out->cap < SKP_NATIVE_MAX_FRAMES ? out->cap : SKP_NATIVE_MAX_FRAMES;
    skp_err err = skp__native_capture(g_proc.slot, &t, &s, PROC_CAPTURE_TIMEOUT_NS);
    if (err == SKP_ETIMEDOUT || err == SKP_EFULL) {
        if (err == SKP_ETIMEDOUT)
            add_strike(tid);
        /* The abandoned request keeps the slot's buffer: use a fresh slot next time. */
        skp__native_slot_release(g_proc.slot);
        g_proc.slot = -1;
        return SKYPROF_CAPTURE_LOST;
    }
    if (err == SKP_ENOTFOUND)
        return -1;
    if (err)
        return -3;
    clear_strikes(tid);
    skp__native_sample_to_capture(&s, out);
    return 0;
}

static int proc_symbolize(void *ud, uint64_t addr, char *buf, size_t cap)
{
    (void)ud;
    return skyprof_native_stack_source()->symbolize(NULL, addr, buf, cap);
}

static void proc_end(void *ud)
{
    (void)ud;
    if (g_proc.slot >= 0)
        skp__native_slot_release(g_proc.slot);
    g_proc.slot = -1;
    skpx_free(g_proc.pcs);
    g_proc.pcs = NULL;
    g_proc.n_strike = 0;
    skpx_free(g_proc.names);
    g_proc.names = NULL;
    if (g_proc.task_dir)
        closedir(g_proc.task_dir);
    g_proc.task_dir = NULL;
    g_proc.n_names = 0;
    g_proc.listings = 0;
}

static const struct skyprof_proc_source g_native_proc = {
    .name = "native",
    .list_threads = proc_list,
    .capture = proc_capture,
    .symbolize = proc_symbolize,
    .end = proc_end,
};

SKYPROF_API const struct skyprof_proc_source *skyprof_native_proc_source(void)
{
    return &g_native_proc;
}
