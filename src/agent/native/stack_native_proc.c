/* stack_native_proc.c - the native PROCESS source (skyprof_native_proc_source): whole-process
 * sampling for PprofTask's cpu, wall and thread-dump events in C/C++ services. Threads come from
 * /proc/self/task (agent threads, named "skp-*", are left out); each is captured with the native
 * stack source's signal engine through one engine slot held for the task. A thread that does not
 * answer in PROC_CAPTURE_TIMEOUT_NS PROC_MUTE_STRIKES times in a row (it blocks the signal, or is
 * stopped) is not signalled again during that task; one late answer (a loaded machine that did not
 * schedule the thread in time) only loses that sample. Heap and allocation events are not
 * offered: a sampled allocation hook would replace the process's malloc, which is process-wide
 * state the host relies on (the task answers EXECUTION_TASK_ERROR). Runs only on skp-proc (never
 * concurrently with itself). */
#include "skyprof/skyprof_native.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/native/stack_native_capture.h"
#include "common/alloc.h"

/* Per-capture deadline: shorter than the trace sampler's, a process task visits every thread. */
#define PROC_CAPTURE_TIMEOUT_NS (50 * 1000 * 1000)
/* Threads remembered as having timed out, per task. */
#define PROC_MUTE_MAX 64
/* Timeouts in a row after which a thread is not signalled again during the task. */
#define PROC_MUTE_STRIKES 3

struct proc_strike {
    int tid;
    int strikes; /* timeouts in a row; PROC_MUTE_STRIKES = muted */
};

static struct {
    int slot;       /* engine slot, -1 = none */
    uintptr_t *pcs; /* SKP_NATIVE_MAX_FRAMES */
    struct proc_strike strike[PROC_MUTE_MAX];
    int n_strike;
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

static void read_comm(int tid, char *out, size_t cap)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/task/%d/comm", tid);
    out[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, out, cap - 1);
    close(fd);
    if (n <= 0) {
        out[0] = '\0';
        return;
    }
    out[n] = '\0';
    char *nl = strchr(out, '\n');
    if (nl)
        *nl = '\0';
}

static int proc_list(void *ud, struct skyprof_proc_thread *out, int cap)
{
    (void)ud;
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while (n < cap && (e = readdir(d)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        int tid = (int)strtol(e->d_name, NULL, 10);
        if (tid <= 0 || is_muted(tid))
            continue;
        read_comm(tid, out[n].name, sizeof(out[n].name));
        if (strncmp(out[n].name, "skp-", 4) == 0)
            continue; /* the agent's own threads */
        out[n].tid = tid;
        out[n].handle = NULL;
        n++;
    }
    closedir(d);
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
    for (uint32_t i = 0; i < s.n; i++) {
        out->frames[i].addr = i == 0 ? s.pcs[i] : s.pcs[i] - 1;
        out->frames[i].str = NULL;
        out->frames[i].len = 0;
        out->frames[i].kind = SKYPROF_FRAME_ADDR;
    }
    out->n = s.n;
    out->truncated = s.truncated;
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
