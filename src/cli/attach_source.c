/* attach_source.c - libskyprof process source over src/attach (see attach_source.h).
 *
 * Design: src/attach reads every Python thread of the target in one pass (one thread-state walk,
 * batched reads), while the agent asks for one thread at a time (capture per listed thread, each
 * sampling round). So one read serves a round: capture(tid) uses the last read when it is recent
 * (ROUND_NS) and that thread has not been handed out from it yet, else it reads the process
 * again. A thread missing from a fresh read (its walk was torn, or it runs no Python now) is a
 * lost sample, or gone when its /proc entry disappeared. CPU time and state come from
 * /proc/PID/task/TID/schedstat (ns) and stat, because the agent's own thread CPU clocks only
 * cover its own process. */
#include "cli/attach_source.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attach/pyreader.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/procfs.h"

/* A read older than this is not reused for another thread of the same round (a round's
 * captures follow each other within microseconds; the next round is >= 1 ms away). */
#define ROUND_NS 500000LL
/* Reads tried when listing, while threads come back torn. */
#define LIST_TRIES 5

struct asrc {
    struct attach_target *t;
    pid_t pid;
    struct attach_sample *s; /* last read */
    bool have;
    int64_t taken_ns;
    bool used[ATTACH_MAX_THREADS]; /* handed out from the last read */
    struct attach_source_stats st;
};

/* Start of field `field` (1-based, field 3 = state) of a stat line, or NULL. */
static const char *stat_field(const char *stat, size_t len, int field)
{
    /* "pid (comm) S ...": comm may hold blanks and ')'; the last ')' ends it */
    const char *rp = NULL;
    for (size_t i = 0; i < len; i++)
        if (stat[i] == ')')
            rp = stat + i;
    if (!rp || (size_t)(rp - stat) + 2 >= len || rp[1] != ' ')
        return NULL;
    const char *p = rp + 2; /* field 3 */
    const char *end = stat + len;
    for (int f = 3; f < field; f++) {
        while (p < end && *p != ' ')
            p++;
        if (p >= end)
            return NULL;
        p++;
    }
    return p < end ? p : NULL;
}

static bool field_u64(const char *stat, size_t len, int field, uint64_t *out)
{
    const char *p = stat_field(stat, len, field);
    if (!p || *p < '0' || *p > '9')
        return false;
    uint64_t v = 0;
    const char *end = stat + len;
    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        if (v > (UINT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    *out = v;
    return true;
}

bool attach_stat_state(const char *stat, size_t len, char *state)
{
    const char *p = stat_field(stat, len, 3);
    if (!p || *p < 'A' || *p > 'z')
        return false;
    *state = *p;
    return true;
}

bool attach_stat_usage(const char *stat, size_t len, uint64_t *ticks, int *n_threads)
{
    uint64_t ut = 0;
    uint64_t stt = 0;
    uint64_t nt = 0;
    if (!field_u64(stat, len, 14, &ut) || !field_u64(stat, len, 15, &stt) ||
        !field_u64(stat, len, 20, &nt) || nt > 1000000)
        return false;
    *ticks = ut + stt;
    *n_threads = (int)nt;
    return true;
}

static int64_t ticks_to_ns(uint64_t ticks)
{
    long hz = sysconf(_SC_CLK_TCK);
    if (hz <= 0)
        hz = 100;
    return (int64_t)(ticks * (1000000000ULL / (uint64_t)hz));
}

static bool read_sample(struct asrc *a)
{
    skp_err err = attach_target_sample(a->t, a->s, 0);
    a->have = err == SKP_OK;
    a->taken_ns = skpx_mono_ns();
    memset(a->used, 0, sizeof(a->used));
    a->st.samples++;
    return a->have;
}

static int as_list(void *ud, struct skyprof_proc_thread *out, int cap)
{
    struct asrc *a = ud;
    /* torn threads are left out of a read: try a few reads to list every thread */
    for (int k = 0; k < LIST_TRIES; k++) {
        if (!read_sample(a))
            return -1;
        if (a->s->n_torn == 0)
            break;
    }
    int n = 0;
    for (size_t i = 0; i < a->s->n_threads && n < cap; i++) {
        const struct attach_thread *th = &a->s->threads[i];
        if (th->tid <= 0)
            continue;
        out[n].tid = (int)th->tid;
        snprintf(out[n].name, sizeof(out[n].name), "%s", th->name);
        out[n].handle = NULL;
        n++;
    }
    /* the listing's read is stale by the first capture: never reuse it */
    a->have = false;
    return n;
}

static const struct attach_thread *find_thread(struct asrc *a, int tid, size_t *index)
{
    for (size_t i = 0; i < a->s->n_threads; i++)
        if ((int)a->s->threads[i].tid == tid) {
            *index = i;
            return &a->s->threads[i];
        }
    return NULL;
}

static bool thread_exists(pid_t pid, int tid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task/%d", (int)pid, tid);
    return access(path, F_OK) == 0;
}

static int as_capture(void *ud, void *handle, int tid, struct skyprof_capture *out)
{
    (void)handle;
    struct asrc *a = ud;
    size_t idx = 0;
    const struct attach_thread *th = NULL;
    if (a->have && skpx_mono_ns() - a->taken_ns < ROUND_NS) {
        th = find_thread(a, tid, &idx);
        if (th && a->used[idx])
            th = NULL;
        if (th)
            a->st.reused++;
    }
    if (!th) {
        if (!read_sample(a))
            return thread_exists(a->pid, tid) ? SKYPROF_CAPTURE_LOST : -1;
        th = find_thread(a, tid, &idx);
    }
    if (!th) {
        a->st.lost++;
        return thread_exists(a->pid, tid) ? SKYPROF_CAPTURE_LOST : -1;
    }
    a->used[idx] = true;
    out->n = 0;
    out->truncated = th->truncated;
    for (size_t k = 0; k < th->n_frames; k++) {
        if (out->n >= out->cap) {
            out->truncated = true;
            break;
        }
        const struct attach_frame *f = &a->s->frames[th->first_frame + k];
        size_t room = out->scratch_cap - out->scratch_len;
        char *dst = out->scratch + out->scratch_len;
        int len = f->line >= 0 ? snprintf(dst, room, "%s (%s:%d)", f->name, f->file, f->line)
                               : snprintf(dst, room, "%s (%s)", f->name, f->file);
        if (len < 0 || (size_t)len >= room) {
            out->truncated = true; /* text room exhausted: keep the innermost frames */
            break;
        }
        out->scratch_len += (size_t)len + 1;
        struct skyprof_frame *o = &out->frames[out->n++];
        o->kind = SKYPROF_FRAME_STR;
        o->str = dst;
        o->len = (uint32_t)len;
        o->addr = 0;
    }
    if (out->n == 0) {
        a->st.lost++;
        return SKYPROF_CAPTURE_LOST; /* a Python thread between frames: nothing to weigh */
    }
    return 0;
}

static int as_thread_cpu(void *ud, int tid, int64_t *cpu_ns, char *state)
{
    struct asrc *a = ud;
    char path[96];
    char buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)a->pid, tid);
    ssize_t n = skpx_procfs_read(path, buf, sizeof(buf));
    if (n <= 0 || !attach_stat_state(buf, (size_t)n, state))
        return -1;
    /* schedstat's first field is the thread's time on CPU in ns (sum_exec_runtime); stat's
     * utime/stime only count whole clock ticks, too coarse for 10 ms periods */
    snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)a->pid, tid);
    char ss[128];
    ssize_t m = skpx_procfs_read(path, ss, sizeof(ss));
    if (m > 0) {
        char *end = NULL;
        unsigned long long v = strtoull(ss, &end, 10);
        if (end != ss) {
            *cpu_ns = (int64_t)v;
            return 0;
        }
    }
    uint64_t ticks = 0;
    int nt = 0;
    if (!attach_stat_usage(buf, (size_t)n, &ticks, &nt))
        return -1;
    *cpu_ns = ticks_to_ns(ticks);
    return 0;
}

static int as_process_usage(void *ud, int64_t *cpu_ns, int *n_threads)
{
    const struct asrc *a = ud;
    char path[64];
    char buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)a->pid);
    ssize_t n = skpx_procfs_read(path, buf, sizeof(buf));
    uint64_t ticks = 0;
    if (n <= 0 || !attach_stat_usage(buf, (size_t)n, &ticks, n_threads))
        return -1;
    *cpu_ns = ticks_to_ns(ticks);
    return 0;
}

static void as_destroy(void *ud)
{
    struct asrc *a = ud;
    if (!a)
        return;
    attach_target_close(a->t);
    skpx_free(a->s);
    skpx_free(a);
}

skp_err attach_source_init(struct attach_target *t, struct skyprof_proc_source *out)
{
    memset(out, 0, sizeof(*out));
    struct asrc *a = skpx_calloc(1, sizeof(*a));
    struct attach_sample *s = skpx_malloc(sizeof(*s));
    if (!a || !s) {
        skpx_free(a);
        skpx_free(s);
        attach_target_close(t);
        return SKP_ENOMEM;
    }
    a->t = t;
    a->pid = attach_target_pid(t);
    a->s = s;
    out->name = "python";
    out->ud = a;
    out->list_threads = as_list;
    out->capture = as_capture;
    out->thread_cpu = as_thread_cpu;
    out->process_usage = as_process_usage;
    out->destroy = as_destroy;
    return SKP_OK;
}

void attach_source_get_stats(void *ud, struct attach_source_stats *out)
{
    const struct asrc *a = ud;
    *out = a->st;
}
