/* native.c - native stacks of another process merged with its Python stacks (see native.h).
 *
 * Design: one sample = read every thread's name and state (before the stop: a stopped thread
 * reads as 't'), stop every thread (stopper.c), read the Python stacks, unwind every thread with
 * libdw, resume; symbolize and merge after the threads run again, so the stop lasts only the
 * reads. libdw is attached with assume_ptrace_stopped: the threads are ours (seized and
 * interrupted) and libdw reads their registers (PTRACE_GETREGS) and memory itself. Symbols are
 * cached per address; the module list is re-read (a new Dwfl) when an address falls outside
 * every known module, at most once a second (a library dlopen()ed since). No separate debug
 * info is searched over the network: with DEBUGINFOD_URLS set only the modules' own symbol
 * tables are used. */
#include "attach/native.h"

#include <dirent.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attach/stopper.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/procfs.h"

#define REREPORT_NS 1000000000LL

struct sym_entry {
    uint64_t pc;
    bool valid, is_eval, is_interp;
    char name[ATTACH_NATIVE_SYM_MAX];
    char module[ATTACH_NATIVE_MODULE_MAX];
};

struct pre_thread {
    pid_t tid;
    char name[16];
    bool running;
};

struct attach_native {
    pid_t pid;
    struct attach_target *py;                   /* borrowed, may be NULL */
    char interp_base[ATTACH_NATIVE_MODULE_MAX]; /* file name of the interpreter's image */
    Dwfl *dwfl;
    int64_t reported_ns;
    struct sym_entry *syms; /* ATTACH_NATIVE_SYM_CACHE */
    struct attach_sample *py_sample;
    uint64_t *pcs; /* ATTACH_NATIVE_MAX_DEPTH per stopped thread */
    size_t *n_pcs;
    bool *pcs_truncated;
    struct attach_stopper stop;
    struct pre_thread pre[ATTACH_MAX_THREADS];
    size_t n_pre;
    char *text; /* ATTACH_NATIVE_TEXT_BYTES, names of the current sample */
    size_t text_used;
    struct attach_frame tmp_native[ATTACH_NATIVE_MAX_DEPTH];
    bool tmp_eval[ATTACH_NATIVE_MAX_DEPTH], tmp_interp[ATTACH_NATIVE_MAX_DEPTH];
    struct attach_native_stats st;
};

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                          const char *file_name, const char *debuglink_file,
                          GElf_Word debuglink_crc, char **debuginfo_file_name)
{
    /* the standard search may ask debuginfod servers (network, long waits) when this is set */
    const char *urls = getenv("DEBUGINFOD_URLS");
    if (urls && *urls)
        return -1;
    return dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
                                        debuglink_crc, debuginfo_file_name);
}

static const Dwfl_Callbacks g_callbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = find_debuginfo,
};

/* A new Dwfl for the process's current modules, attached for unwinding. */
static skp_err report(struct attach_native *n, char *why, size_t why_cap)
{
    if (n->dwfl)
        dwfl_end(n->dwfl);
    n->dwfl = dwfl_begin(&g_callbacks);
    n->reported_ns = skpx_mono_ns();
    if (!n->dwfl) {
        if (why)
            snprintf(why, why_cap, "libdw: %s", dwfl_errmsg(-1));
        return SKP_ENOMEM;
    }
    int rc = dwfl_linux_proc_report(n->dwfl, n->pid);
    if (dwfl_report_end(n->dwfl, NULL, NULL) != 0 || rc != 0) {
        if (why)
            snprintf(why, why_cap, "cannot read the modules of process %d: %s", (int)n->pid,
                     rc > 0 ? strerror(rc) : dwfl_errmsg(-1));
        return rc == ENOENT || rc == ESRCH ? SKP_ENOTFOUND : SKP_EIO;
    }
    int arc = dwfl_linux_proc_attach(n->dwfl, n->pid, true);
    if (arc != 0) {
        if (why)
            snprintf(why, why_cap, "libdw cannot attach to process %d for unwinding: %s",
                     (int)n->pid, arc > 0 ? strerror(arc) : dwfl_errmsg(-1));
        return arc == ESRCH ? SKP_ENOTFOUND : SKP_EIO;
    }
    /* the modules changed: cached symbols may be stale */
    memset(n->syms, 0, ATTACH_NATIVE_SYM_CACHE * sizeof(*n->syms));
    return SKP_OK;
}

skp_err attach_native_open(pid_t pid, struct attach_target *py, struct attach_native **out,
                           char *why, size_t why_cap)
{
    *out = NULL;
    if (why && why_cap)
        why[0] = 0;
    if (kill(pid, 0) != 0 && errno == ESRCH) {
        if (why)
            snprintf(why, why_cap, "no process %d", (int)pid);
        return SKP_ENOTFOUND;
    }
    struct attach_native *n = skpx_calloc(1, sizeof(*n));
    if (!n)
        return SKP_ENOMEM;
    n->pid = pid;
    n->py = py;
    if (py)
        snprintf(n->interp_base, sizeof(n->interp_base), "%s", base_name(attach_target_image(py)));
    n->syms = skpx_calloc(ATTACH_NATIVE_SYM_CACHE, sizeof(*n->syms));
    n->py_sample = py ? skpx_malloc(sizeof(*n->py_sample)) : NULL;
    n->pcs =
        skpx_malloc((size_t)ATTACH_STOP_MAX_THREADS * ATTACH_NATIVE_MAX_DEPTH * sizeof(*n->pcs));
    n->n_pcs = skpx_calloc(ATTACH_STOP_MAX_THREADS, sizeof(*n->n_pcs));
    n->pcs_truncated = skpx_calloc(ATTACH_STOP_MAX_THREADS, sizeof(*n->pcs_truncated));
    n->text = skpx_malloc(ATTACH_NATIVE_TEXT_BYTES);
    if (!n->syms || (py && !n->py_sample) || !n->pcs || !n->n_pcs || !n->pcs_truncated ||
        !n->text) {
        attach_native_close(n);
        return SKP_ENOMEM;
    }
    skp_err err = report(n, why, why_cap);
    if (err) {
        attach_native_close(n);
        return err;
    }
    *out = n;
    return SKP_OK;
}

void attach_native_close(struct attach_native *n)
{
    if (!n)
        return;
    if (n->dwfl)
        dwfl_end(n->dwfl);
    SKPX_FREE_ALL(n->syms, n->py_sample, n->pcs, n->n_pcs, n->pcs_truncated, n->text, n);
}

void attach_native_get_stats(const struct attach_native *n, struct attach_native_stats *out)
{
    *out = n->st;
}

bool attach_native_is_eval(const char *sym)
{
    static const char name[] = "_PyEval_EvalFrameDefault";
    size_t len = sizeof(name) - 1;
    return strncmp(sym, name, len) == 0 && (sym[len] == 0 || strcmp(sym + len, ".cold") == 0);
}

/* ---- threads before the stop --------------------------------------------------------------- */
static void read_threads(struct attach_native *n)
{
    n->n_pre = 0;
    char path[96];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)n->pid);
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && n->n_pre < ATTACH_MAX_THREADS) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        struct pre_thread *p = &n->pre[n->n_pre++];
        p->tid = (pid_t)strtol(de->d_name, NULL, 10);
        skpx_procfs_task_comm(n->pid, p->tid, p->name, sizeof(p->name));
        char buf[512];
        (void)skpx_procfs_read_task(n->pid, p->tid, "stat", buf, sizeof(buf));
        p->running = skpx_procfs_stat_state(buf) == 'R';
    }
    closedir(d);
}

/* ---- unwinding ----------------------------------------------------------------------------- */
struct unwind_ctx {
    uint64_t *pcs;
    size_t n;
    bool truncated;
};

static int frame_cb(Dwfl_Frame *state, void *arg)
{
    struct unwind_ctx *u = arg;
    Dwarf_Addr pc = 0;
    bool activation = false;
    if (!dwfl_frame_pc(state, &pc, &activation) || pc == 0)
        return DWARF_CB_ABORT;
    if (u->n >= ATTACH_NATIVE_MAX_DEPTH) {
        u->truncated = true;
        return DWARF_CB_ABORT;
    }
    /* a return address points after the call: look the caller up by the call itself */
    u->pcs[u->n++] = activation ? pc : pc - 1;
    return DWARF_CB_OK;
}

static void unwind_all(struct attach_native *n)
{
    for (size_t i = 0; i < n->stop.n; i++) {
        struct unwind_ctx u = {n->pcs + i * ATTACH_NATIVE_MAX_DEPTH, 0, false};
        int rc = dwfl_getthread_frames(n->dwfl, n->stop.tids[i], frame_cb, &u);
        /* the outermost frame usually ends the walk with an error (no CFI for _start / clone's
         * caller): what was collected stands */
        if (rc != 0 && !u.truncated && u.n < 2)
            n->st.unwind_errors++;
        n->n_pcs[i] = u.n;
        n->pcs_truncated[i] = u.truncated;
        n->st.threads++;
        n->st.frames += u.n;
    }
}

/* ---- symbols ------------------------------------------------------------------------------- */
static const struct sym_entry *symbolize(struct attach_native *n, uint64_t pc)
{
    struct sym_entry *e = &n->syms[(pc >> 1) % ATTACH_NATIVE_SYM_CACHE];
    if (e->valid && e->pc == pc)
        return e;
    Dwfl_Module *mod = dwfl_addrmodule(n->dwfl, pc);
    if (!mod && skpx_mono_ns() - n->reported_ns > REREPORT_NS && report(n, NULL, 0) == SKP_OK)
        mod = dwfl_addrmodule(n->dwfl, pc); /* a module loaded since */
    e->pc = pc;
    e->valid = true;
    e->is_eval = false;
    e->is_interp = false;
    const char *sym = mod ? dwfl_module_addrname(mod, pc) : NULL;
    Dwarf_Addr low = 0;
    const char *modname =
        mod ? dwfl_module_info(mod, NULL, &low, NULL, NULL, NULL, NULL, NULL) : NULL;
    if (sym)
        snprintf(e->name, sizeof(e->name), "%s", sym);
    else if (mod && pc >= low) /* no symbol: the offset in its module, the same in every run */
        snprintf(e->name, sizeof(e->name), "0x%" PRIx64, (uint64_t)(pc - low));
    else
        snprintf(e->name, sizeof(e->name), "0x%" PRIx64, pc);
    snprintf(e->module, sizeof(e->module), "%s", modname ? base_name(modname) : "?");
    e->is_eval = sym && attach_native_is_eval(sym);
    e->is_interp = n->interp_base[0] && strcmp(e->module, n->interp_base) == 0;
    return e;
}

static const char *keep_text(struct attach_native *n, const char *s)
{
    size_t len = strlen(s) + 1;
    if (ATTACH_NATIVE_TEXT_BYTES - n->text_used < len)
        return "?";
    char *dst = n->text + n->text_used;
    memcpy(dst, s, len);
    n->text_used += len;
    return dst;
}

/* ---- merge --------------------------------------------------------------------------------- */
size_t attach_native_merge(const struct attach_frame *native_frames, const bool *is_eval,
                           const bool *is_interp, size_t n_native, const struct attach_frame *py,
                           size_t n_py, struct attach_frame *out, size_t cap, bool *truncated)
{
    size_t n = 0;
    size_t p = 0;
    *truncated = false;
#define PUT(f)                                                                                     \
    do {                                                                                           \
        if (n >= cap) {                                                                            \
            *truncated = true;                                                                     \
            return n;                                                                              \
        }                                                                                          \
        out[n++] = (f);                                                                            \
    } while (0)
    for (size_t i = 0; i < n_native; i++) {
        if (is_eval[i]) {
            /* this evaluation's Python frames: up to and including its entry frame */
            while (p < n_py) {
                bool last = py[p].entry;
                PUT(py[p]);
                p++;
                if (last)
                    break;
            }
            continue;
        }
        if (is_interp[i])
            continue; /* the interpreter's own call machinery */
        PUT(native_frames[i]);
    }
    for (; p < n_py; p++)
        PUT(py[p]); /* the unwind stopped early: the rest of the Python stack still shows */
#undef PUT
    return n;
}

/* ---- one sample ---------------------------------------------------------------------------- */
static const struct attach_thread *py_thread_of(const struct attach_sample *ps, pid_t tid)
{
    for (size_t i = 0; ps && i < ps->n_threads; i++)
        if (ps->threads[i].tid == tid)
            return &ps->threads[i];
    return NULL;
}

static const struct pre_thread *pre_of(const struct attach_native *n, pid_t tid)
{
    for (size_t i = 0; i < n->n_pre; i++)
        if (n->pre[i].tid == tid)
            return &n->pre[i];
    return NULL;
}

skp_err attach_native_sample(struct attach_native *n, struct attach_sample *s)
{
    s->n_threads = 0;
    s->n_frames = 0;
    s->n_torn = 0;
    n->text_used = 0;
    read_threads(n);
    if (n->n_pre == 0)
        return kill(n->pid, 0) != 0 && errno == ESRCH ? SKP_ENOTFOUND : SKP_EIO;
    int64_t t0 = skpx_mono_ns();
    skp_err err = attach_stopper_stop(&n->stop, n->pid);
    if (err)
        return err;
    int64_t t1 = skpx_mono_ns();
    n->st.stop_wait_ns += (uint64_t)(t1 - t0);
    skp_err perr = SKP_OK;
    if (n->py)
        perr = attach_target_sample(n->py, n->py_sample, 0);
    unwind_all(n);
    size_t n_stopped = n->stop.n;
    pid_t tids[ATTACH_STOP_MAX_THREADS];
    memcpy(tids, n->stop.tids, n_stopped * sizeof(tids[0]));
    attach_stopper_resume(&n->stop);
    n->st.stop_ns += (uint64_t)(skpx_mono_ns() - t1);
    n->st.samples++;
    if (perr == SKP_ENOTFOUND)
        return perr;
    const struct attach_sample *ps = n->py && perr == SKP_OK ? n->py_sample : NULL;
    if (ps)
        s->n_torn = ps->n_torn;

    for (size_t i = 0; i < n_stopped && s->n_threads < ATTACH_MAX_THREADS; i++) {
        const uint64_t *pcs = n->pcs + i * ATTACH_NATIVE_MAX_DEPTH;
        size_t n_native = n->n_pcs[i];
        for (size_t k = 0; k < n_native; k++) {
            const struct sym_entry *e = symbolize(n, pcs[k]);
            struct attach_frame *f = &n->tmp_native[k];
            f->name = keep_text(n, e->name);
            f->file = keep_text(n, e->module);
            f->line = -1;
            f->native = true;
            f->entry = false;
            n->tmp_eval[k] = e->is_eval;
            n->tmp_interp[k] = e->is_interp;
        }
        const struct attach_thread *pt = py_thread_of(ps, tids[i]);
        const struct attach_frame *py = pt ? &ps->frames[pt->first_frame] : NULL;
        size_t n_py = pt ? pt->n_frames : 0;
        bool trunc = false;
        size_t room = ATTACH_MAX_FRAMES - s->n_frames;
        size_t got = attach_native_merge(n->tmp_native, n->tmp_eval, n->tmp_interp, n_native, py,
                                         n_py, &s->frames[s->n_frames], room, &trunc);
        struct attach_thread *th = &s->threads[s->n_threads++];
        memset(th, 0, sizeof(*th));
        th->tid = tids[i];
        const struct pre_thread *pre = pre_of(n, tids[i]);
        if (pre) {
            memcpy(th->name, pre->name, sizeof(th->name));
            th->running = pre->running;
        }
        if (pt) {
            th->thread_id = pt->thread_id;
            th->holds_gil = pt->holds_gil;
        }
        th->first_frame = s->n_frames;
        th->n_frames = got;
        th->truncated = trunc || n->pcs_truncated[i] || (pt && pt->truncated);
        s->n_frames += got;
    }
    return SKP_OK;
}
