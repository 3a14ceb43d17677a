/* pyreader.c - the stack walk over another process's CPython structures.
 *
 * Design. A sample reads, per thread: the thread state (one read), then in one batched call the
 * _PyCFrame (3.11/3.12) and the used part of the thread's frame data stack (the "window", where
 * almost every frame lives), then walks frames on the copy, reading any frame outside the window
 * (generators, other chunks) on its own. The code objects of the walk are read in one batched
 * call and checked against the code cache (address + the pointers to name, file and location
 * table + first line): a hit costs no further read; a miss reads the strings and the table once.
 * Everything read is validated before use: pointers must be plausible user-space addresses,
 * objects must have the expected type, owners must be in range, and a walk ends within
 * ATTACH_MAX_DEPTH. A thread whose walk fails is left out of the sample (a torn read: the target
 * kept running while we read) and counted. */
#include "attach/pyreader.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "attach/pyreader_int.h"
#include "common/rawload.h"
#include "attach/stopper.h"
#include "common/alloc.h"
#include "common/procfs.h"
#include "common/py_linetable.h"
#include "common/utf8.h"

/* ---------------------------------------------------------------------------------------------
 * lifecycle
 * ------------------------------------------------------------------------------------------- */

skp_err attach__target_alloc(struct attach_target **out)
{
    *out = NULL;
    struct attach_target *t = skpx_calloc(1, sizeof(*t));
    if (!t)
        return SKP_ENOMEM;
    t->codes = skpx_calloc(ATTACH_CODE_CACHE_CAP, sizeof(*t->codes));
    t->window = skpx_malloc(ATTACH_WINDOW_MAX);
    if (!t->codes || !t->window) {
        attach_target_close(t);
        return SKP_ENOMEM;
    }
    *out = t;
    return SKP_OK;
}

static void cache_clear(struct attach_target *t)
{
    for (size_t i = 0; i < ATTACH_CODE_CACHE_CAP; i++) {
        struct code_entry *e = &t->codes[i];
        if (!e->used)
            continue;
        SKPX_FREE_ALL(e->qualname, e->file, e->table);
        memset(e, 0, sizeof(*e));
    }
    t->n_codes = 0;
}

void attach_target_close(struct attach_target *t)
{
    if (!t)
        return;
    if (t->codes)
        cache_clear(t);
    SKPX_FREE_ALL(t->codes, t->window, t);
}

const char *attach_target_version(const struct attach_target *t)
{
    return t->version;
}

const char *attach_target_image(const struct attach_target *t)
{
    return t->image;
}

pid_t attach_target_pid(const struct attach_target *t)
{
    return t->pid;
}

void attach_target_stats(const struct attach_target *t, struct attach_stats *out)
{
    *out = t->stats;
    out->syscalls = t->mem.n_syscalls;
    out->bytes = t->mem.n_bytes;
    out->faults = t->mem.n_faults;
}

skp_err attach_target_open_at(pid_t pid, uintptr_t runtime, const struct attach_pylayout *layout,
                              struct attach_target **out, char *why, size_t why_cap)
{
    *out = NULL;
    struct attach_target *t = NULL;
    skp_err err = attach__target_alloc(&t);
    if (err)
        return err;
    t->pid = pid;
    t->runtime = runtime;
    err = attach_remote_init(&t->mem, pid, runtime, why, why_cap);
    if (!err && layout) {
        t->layout = *layout;
    } else if (!err) {
        err = attach__layout_from_runtime(t, why, why_cap);
    }
    if (!err) {
        snprintf(t->version, sizeof(t->version), "%s", t->layout.name);
        err = attach__target_validate(t, why, why_cap);
    }
    if (err) {
        attach_target_close(t);
        return err;
    }
    *out = t;
    return SKP_OK;
}

/* Writes why the target is refused into why (when given; cap bytes) and returns err. */
static skp_err refuse(skp_err err, char *why, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static skp_err refuse(skp_err err, char *why, size_t cap, const char *fmt, ...)
{
    if (why) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, cap, fmt, ap);
        va_end(ap);
    }
    return err;
}

static skp_err runtime_unreadable(const struct attach_target *t, char *why, size_t cap)
{
    return refuse(SKP_EIO, why, cap, "cannot read _PyRuntime at 0x%lx in process %d",
                  (unsigned long)t->runtime, (int)t->pid);
}

skp_err attach__layout_from_runtime(struct attach_target *t, char *why, size_t cap)
{
    uint8_t buf[ATTACH_DEBUG_OFFSETS_COPY];
    if (!attach_remote_read(&t->mem, t->runtime, buf, sizeof(buf)))
        return runtime_unreadable(t, why, cap);
    return attach_pylayout_from_debug_offsets(buf, sizeof(buf), &t->layout, why, cap);
}

/* ---------------------------------------------------------------------------------------------
 * str objects
 * ------------------------------------------------------------------------------------------- */

/* Reads the str object at `addr` as UTF-8 into a new NUL-terminated string of at most max bytes
 * (caller frees with skpx_free). NULL when it is not a compact str or cannot be read. */
char *attach__read_str(struct attach_target *t, uintptr_t addr, size_t max)
{
    const struct attach_pylayout *l = &t->layout;
    uint8_t hdr[128];
    size_t hdr_len = l->str_compact_size;
    if (!skpx_plausible_ptr(addr) || hdr_len > sizeof(hdr) ||
        !attach_remote_read(&t->mem, addr, hdr, hdr_len))
        return NULL;
    if (t->str_type && skpx_load_ptr(hdr, l->obj_type) != t->str_type)
        return NULL;
    int64_t length;
    memcpy(&length, hdr + l->str_length, sizeof(length));
    uint32_t state;
    memcpy(&state, hdr + l->str_state, sizeof(state));
    unsigned kind = (state >> 2) & 7;
    bool compact = (state >> 5) & 1;
    bool ascii = (state >> 6) & 1;
    if (!compact || (l->str_ready_bit >= 0 && !((state >> l->str_ready_bit) & 1)))
        return NULL;
    if ((kind != 1 && kind != 2 && kind != 4) || length < 0 || length > (int64_t)max)
        return NULL;
    size_t data_off = ascii ? l->str_ascii_size : l->str_compact_size;
    size_t n_bytes = (size_t)length * kind;
    uint8_t *raw = skpx_malloc(n_bytes ? n_bytes : 1);
    char *out = skpx_malloc(max * 4 + 1);
    if (!raw || !out || !attach_remote_read(&t->mem, addr + data_off, raw, n_bytes)) {
        skpx_free(raw);
        skpx_free(out);
        return NULL;
    }
    size_t len = 0;
    for (size_t i = 0; i < (size_t)length; i++) {
        uint32_t cp = skpx_ucs_at(raw, kind, i);
        if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
            cp = '?';
        len += skpx_utf8_put(cp, out + len);
    }
    out[len] = 0;
    skpx_free(raw);
    return out;
}

/* Copies the bytes object at `addr` (its ob_size and data) into a new buffer. */
static uint8_t *read_bytes(struct attach_target *t, uintptr_t addr, uint32_t *len_out)
{
    const struct attach_pylayout *l = &t->layout;
    *len_out = 0;
    uint8_t hdr[64];
    if (!skpx_plausible_ptr(addr) || l->bytes_data > sizeof(hdr) ||
        !attach_remote_read(&t->mem, addr, hdr, l->bytes_data))
        return NULL;
    if (t->bytes_type && skpx_load_ptr(hdr, l->obj_type) != t->bytes_type)
        return NULL;
    int64_t size;
    memcpy(&size, hdr + l->var_size, sizeof(size));
    if (size < 0 || size > ATTACH_LINETABLE_MAX)
        return NULL;
    uint8_t *buf = skpx_malloc(size ? (size_t)size : 1);
    if (!buf)
        return NULL;
    if (!attach_remote_read(&t->mem, addr + l->bytes_data, buf, (size_t)size)) {
        skpx_free(buf);
        return NULL;
    }
    *len_out = (uint32_t)size;
    return buf;
}

/* ---------------------------------------------------------------------------------------------
 * code cache
 * ------------------------------------------------------------------------------------------- */

static size_t code_hash(uintptr_t code)
{
    uint64_t h = (uint64_t)code * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 32) % ATTACH_CODE_CACHE_CAP;
}

/* The entry for the code object whose header copy is `hdr`, reading its strings on a miss.
 * NULL when the header does not describe a readable code object (torn or freed). */
static struct code_entry *code_resolve(struct attach_target *t, uintptr_t code, const uint8_t *hdr)
{
    const struct attach_pylayout *l = &t->layout;
    if (t->code_type && skpx_load_ptr(hdr, l->obj_type) != t->code_type)
        return NULL;
    uintptr_t filename = skpx_load_ptr(hdr, l->co_filename);
    uintptr_t name =
        skpx_load_ptr(hdr, l->co_qualname != ATTACH_NO_FIELD ? l->co_qualname : l->co_name);
    uintptr_t linetable = skpx_load_ptr(hdr, l->co_linetable);
    int firstlineno = skpx_load_int(hdr, l->co_firstlineno);
    if (!skpx_plausible_ptr(filename) || !skpx_plausible_ptr(name) ||
        !skpx_plausible_ptr(linetable) || firstlineno < 0)
        return NULL;
    size_t i = code_hash(code);
    for (size_t probe = 0; probe < ATTACH_CODE_CACHE_CAP; probe++) {
        struct code_entry *e = &t->codes[(i + probe) % ATTACH_CODE_CACHE_CAP];
        if (!e->used)
            break;
        if (e->code == code && e->filename == filename && e->name == name &&
            e->linetable == linetable && e->firstlineno == firstlineno) {
            t->stats.code_hits++;
            return e;
        }
    }
    t->stats.code_misses++;
    /* The caller empties a full cache between samples; a sample adds at most ATTACH_MAX_FRAMES
     * entries, and the cache is emptied when fewer than that many slots are left. */
    if (t->n_codes >= ATTACH_CODE_CACHE_CAP - 1)
        return NULL;
    char *qual = attach__read_str(t, name, ATTACH_NAME_MAX);
    char *file = attach__read_str(t, filename, ATTACH_FILE_MAX);
    if (!qual || !file) {
        skpx_free(qual);
        skpx_free(file);
        return NULL;
    }
    uint32_t table_len = 0;
    uint8_t *table = read_bytes(t, linetable, &table_len);
    struct code_entry *e = NULL;
    for (size_t probe = 0; probe < ATTACH_CODE_CACHE_CAP; probe++) {
        e = &t->codes[(i + probe) % ATTACH_CODE_CACHE_CAP];
        if (!e->used)
            break;
    }
    e->used = true;
    e->code = code;
    e->filename = filename;
    e->name = name;
    e->linetable = linetable;
    e->firstlineno = firstlineno;
    e->firsttraceable =
        l->co_firsttraceable != ATTACH_NO_FIELD ? skpx_load_int(hdr, l->co_firsttraceable) : 0;
    e->qualname = qual;
    e->file = file;
    e->table = table;
    e->table_len = table_len;
    t->n_codes++;
    return e;
}

bool attach__code_frame(struct attach_target *t, uintptr_t code, uintptr_t instr,
                        struct attach_frame *out)
{
    const struct attach_pylayout *l = &t->layout;
    uint8_t hdr[ATTACH_COPY_MAX];
    if (!skpx_plausible_ptr(code) || l->co_copy > sizeof(hdr) ||
        !attach_remote_read(&t->mem, code, hdr, l->co_copy))
        return false;
    struct code_entry *e = code_resolve(t, code, hdr);
    if (!e)
        return false;
    long long addr = (long long)instr - (long long)(code + l->co_code_start);
    if (addr < -2 || addr > (1LL << 30))
        addr = -1;
    if (addr >= 0)
        addr &= ~1LL;
    out->name = e->qualname;
    out->file = e->file;
    out->native = false;
    out->entry = false;
    out->line =
        skpx_py_linetable_line(e->table, e->table_len, e->firstlineno, addr < 0 ? -1 : (int)addr);
    return true;
}

/* ---------------------------------------------------------------------------------------------
 * validation at open
 * ------------------------------------------------------------------------------------------- */

/* Every field the reader loads lies inside the bytes it copies for that structure. */
static bool layout_fits(const struct attach_pylayout *l)
{
    const size_t p = sizeof(uintptr_t);
    if (l->ts_copy > ATTACH_COPY_MAX || l->co_copy > ATTACH_COPY_MAX ||
        l->fr_copy > ATTACH_COPY_MAX || l->str_compact_size > 128 || l->bytes_data > 64)
        return false;
    const size_t ts[] = {
        l->ts_next,   l->ts_interp,        l->ts_thread_id,       l->ts_native_thread_id,
        l->ts_cframe, l->ts_current_frame, l->ts_datastack_chunk, l->ts_datastack_top};
    for (size_t i = 0; i < sizeof(ts) / sizeof(ts[0]); i++)
        if (ts[i] != ATTACH_NO_FIELD && ts[i] + p > l->ts_copy)
            return false;
    if (l->fr_code + p > l->fr_copy || l->fr_previous + p > l->fr_copy ||
        l->fr_instr + p > l->fr_copy || l->fr_owner + 1 > l->fr_copy ||
        (l->fr_is_entry != ATTACH_NO_FIELD && l->fr_is_entry + 1 > l->fr_copy))
        return false;
    const size_t co[] = {l->co_filename, l->co_name, l->co_qualname, l->co_linetable, l->obj_type};
    for (size_t i = 0; i < sizeof(co) / sizeof(co[0]); i++)
        if (co[i] != ATTACH_NO_FIELD && co[i] + p > l->co_copy)
            return false;
    if (l->co_firstlineno + sizeof(int) > l->co_copy ||
        (l->co_firsttraceable != ATTACH_NO_FIELD &&
         l->co_firsttraceable + sizeof(int) > l->co_copy))
        return false;
    if (l->str_length + 8 > l->str_compact_size || l->str_state + 4 > l->str_compact_size ||
        l->obj_type + p > l->str_compact_size || l->str_ascii_size > l->str_compact_size)
        return false;
    if (l->var_size + 8 > l->bytes_data || l->obj_type + p > l->bytes_data)
        return false;
    return l->chunk_header < 4096;
}

skp_err attach__main_interp(struct attach_target *t, uintptr_t *out)
{
    *out = 0;
    if (attach_remote_read(&t->mem, t->runtime + t->layout.rt_interp_head, out, sizeof(*out)))
        return SKP_OK;
    *out = 0;
    return kill(t->pid, 0) != 0 && errno == ESRCH ? SKP_ENOTFOUND : SKP_EIO;
}

skp_err attach__target_validate(struct attach_target *t, char *why, size_t cap)
{
    const struct attach_pylayout *l = &t->layout;
    if (l->free_threaded)
        return refuse(SKP_ENOTSUP, why, cap,
                      "process %d runs a free-threaded CPython build (%s): its per-thread frame "
                      "and object layout is not supported by this reader",
                      (int)t->pid, t->version);
    if (!layout_fits(l))
        return refuse(SKP_ENOTSUP, why, cap,
                      "CPython %s: the layout's offsets do not fit the structure sizes this reader "
                      "copies (corrupt _Py_DebugOffsets or an unknown build)",
                      t->version);
    uintptr_t interp = 0;
    if (attach__main_interp(t, &interp) != SKP_OK)
        return runtime_unreadable(t, why, cap);
    if (!skpx_plausible_ptr(interp))
        return refuse(SKP_EINVAL, why, cap,
                      "process %d: _PyRuntime has no interpreter (not initialised yet, finalizing, "
                      "or not CPython %s)",
                      (int)t->pid, t->version);
    uintptr_t ts = 0;
    if (!attach_remote_read(&t->mem, interp + l->is_threads_head, &ts, sizeof(ts)) ||
        !skpx_plausible_ptr(ts))
        return refuse(SKP_EINVAL, why, cap,
                      "process %d: the interpreter at 0x%lx has no thread state", (int)t->pid,
                      (unsigned long)interp);
    uintptr_t back = 0;
    if (!attach_remote_read(&t->mem, ts + l->ts_interp, &back, sizeof(back)) || back != interp)
        return refuse(SKP_EINVAL, why, cap,
                      "process %d: the thread state at 0x%lx does not point back to its "
                      "interpreter (layout mismatch for CPython %s)",
                      (int)t->pid, (unsigned long)ts, t->version);
    return SKP_OK;
}

/* ---------------------------------------------------------------------------------------------
 * threads: name and state from /proc
 * ------------------------------------------------------------------------------------------- */

static void thread_proc_info(pid_t pid, struct attach_thread *th)
{
    if (th->tid <= 0)
        return;
    skpx_procfs_task_comm(pid, th->tid, th->name, sizeof(th->name));
    char buf[512];
    (void)skpx_procfs_read_task(pid, th->tid, "stat", buf, sizeof(buf));
    th->running = skpx_procfs_stat_state(buf) == 'R';
}

/* ---------------------------------------------------------------------------------------------
 * the walk
 * ------------------------------------------------------------------------------------------- */

struct raw_frame {
    uintptr_t code;
    uintptr_t instr;
    int owner;
    bool entry; /* first frame of a C-level evaluation */
};

/* Walks one thread's frames from `frame` into raw[] (innermost first); returns the count, or -1
 * when the walk is torn. Sets *truncated when it stopped at the depth bound. */
static int walk_frames(struct attach_target *t, uintptr_t frame, uintptr_t win_addr, size_t win_len,
                       struct raw_frame *raw, size_t max, bool *truncated)
{
    const struct attach_pylayout *l = &t->layout;
    uint8_t one[ATTACH_COPY_MAX];
    size_t n = 0;
    size_t steps = 0;
    while (frame) {
        if (!skpx_plausible_ptr(frame) || ++steps > ATTACH_MAX_DEPTH * 2)
            return -1;
        const uint8_t *f;
        if (frame >= win_addr && frame + l->fr_copy <= win_addr + win_len) {
            f = t->window + (frame - win_addr);
        } else {
            if (!attach_remote_read(&t->mem, frame, one, l->fr_copy))
                return -1;
            f = one;
        }
        uintptr_t code = skpx_load_ptr(f, l->fr_code);
        if (l->fr_code_tagged)
            code &= ~(uintptr_t)3;
        uintptr_t instr = skpx_load_ptr(f, l->fr_instr);
        int owner = (int)(int8_t)f[l->fr_owner];
        uintptr_t prev = skpx_load_ptr(f, l->fr_previous);
        if (owner < 0 || owner > l->owner_max)
            return -1;
        if (owner != l->owner_cstack) {
            if (!skpx_plausible_ptr(code))
                return -1;
            if (n == max) {
                *truncated = true;
                break;
            }
            raw[n].code = code;
            raw[n].instr = instr;
            raw[n].owner = owner;
            raw[n].entry = l->fr_is_entry != ATTACH_NO_FIELD && f[l->fr_is_entry] != 0;
            n++;
        } else if (n > 0) {
            raw[n - 1].entry = true; /* 3.12+: the frame a shim (entry) frame calls */
        }
        frame = prev;
    }
    if (n > 0 && !*truncated)
        raw[n - 1].entry = true; /* the thread's first evaluation */
    return (int)n;
}

/* One Python thread state: appends its thread and frames to *s and sets *next_out to the next
 * thread state (0 at the end). Returns false when this thread's read was torn (it is left out;
 * *next_out still says where to go on when the thread state itself could be read). */
static bool sample_thread(struct attach_target *t, uintptr_t ts_addr, uintptr_t gil_tstate,
                          struct attach_sample *s, uintptr_t *next_out, struct raw_frame *raw)
{
    const struct attach_pylayout *l = &t->layout;
    uint8_t ts[ATTACH_COPY_MAX];
    *next_out = 0;
    if (!attach_remote_read(&t->mem, ts_addr, ts, l->ts_copy))
        return false;
    *next_out = skpx_load_ptr(ts, l->ts_next);
    if (s->n_threads >= ATTACH_MAX_THREADS)
        return true;

    /* the current frame, and the frame window, in one batch */
    uintptr_t chunk = skpx_load_ptr(ts, l->ts_datastack_chunk);
    uintptr_t top =
        l->ts_datastack_top != ATTACH_NO_FIELD ? skpx_load_ptr(ts, l->ts_datastack_top) : 0;
    uintptr_t win_addr = 0;
    size_t win_len = 0;
    if (skpx_plausible_ptr(chunk) && top > chunk + l->chunk_header) {
        win_addr = chunk + l->chunk_header;
        win_len = (size_t)(top - win_addr);
        if (win_len > ATTACH_WINDOW_MAX) {
            /* keep the innermost part: the walk starts at the top of the stack */
            win_addr = top - ATTACH_WINDOW_MAX;
            win_len = ATTACH_WINDOW_MAX;
        }
    }
    if (l->ts_datastack_top == ATTACH_NO_FIELD && l->ts_current_frame != ATTACH_NO_FIELD) {
        /* 3.13+ publish no datastack_top: the current frame is the top of the used part when it
         * lives in the current chunk (it nearly always does) */
        uintptr_t cur = skpx_load_ptr(ts, l->ts_current_frame);
        win_len = 0;
        if (skpx_plausible_ptr(chunk) && cur > chunk + l->chunk_header &&
            cur + l->fr_copy - (chunk + l->chunk_header) <= ATTACH_WINDOW_MAX) {
            win_addr = chunk + l->chunk_header;
            win_len = (size_t)(cur + l->fr_copy - win_addr);
        }
    }
    uintptr_t frame = 0;
    uintptr_t cframe_frame = 0;
    struct iovec loc[2];
    struct iovec rem[2];
    bool ok[2];
    size_t n_iov = 0;
    if (l->ts_current_frame != ATTACH_NO_FIELD) {
        frame = skpx_load_ptr(ts, l->ts_current_frame);
    } else {
        uintptr_t cframe = skpx_load_ptr(ts, l->ts_cframe);
        if (!cframe) {
            frame = 0;
        } else if (!skpx_plausible_ptr(cframe)) {
            return false;
        } else {
            loc[n_iov] = (struct iovec){&cframe_frame, sizeof(cframe_frame)};
            rem[n_iov] = (struct iovec){(void *)(cframe + l->cf_current_frame), sizeof(uintptr_t)};
            n_iov++;
        }
    }
    if (win_len) {
        loc[n_iov] = (struct iovec){t->window, win_len};
        rem[n_iov] = (struct iovec){(void *)win_addr, win_len};
        n_iov++;
    }
    if (n_iov) {
        attach_remote_readv(&t->mem, loc, rem, n_iov, ok);
        if (l->ts_current_frame == ATTACH_NO_FIELD && skpx_load_ptr(ts, l->ts_cframe)) {
            if (!ok[0])
                return false;
            frame = cframe_frame;
        }
        if (win_len && !ok[n_iov - 1])
            win_len = 0; /* chunk freed meanwhile: every frame is read on its own */
    }

    bool truncated = false;
    size_t budget = ATTACH_MAX_FRAMES - s->n_frames;
    if (budget > ATTACH_MAX_DEPTH)
        budget = ATTACH_MAX_DEPTH;
    int n = walk_frames(t, frame, win_addr, win_len, raw, budget, &truncated);
    if (n < 0)
        return false;

    /* code headers, batched */
    static const size_t batch = ATTACH_READV_MAX;
    uint8_t *hdrs = skpx_malloc(batch * l->co_copy);
    if (!hdrs)
        return false;
    size_t first = s->n_frames;
    bool good = true;
    for (int base = 0; base < n && good; base += (int)batch) {
        size_t m = (size_t)(n - base) < batch ? (size_t)(n - base) : batch;
        struct iovec cl[ATTACH_READV_MAX];
        struct iovec cr[ATTACH_READV_MAX];
        bool cok[ATTACH_READV_MAX];
        for (size_t k = 0; k < m; k++) {
            cl[k] = (struct iovec){hdrs + k * l->co_copy, l->co_copy};
            cr[k] = (struct iovec){(void *)raw[base + (int)k].code, l->co_copy};
        }
        attach_remote_readv(&t->mem, cl, cr, m, cok);
        for (size_t k = 0; k < m; k++) {
            if (!cok[k]) {
                good = false;
                break;
            }
            const struct raw_frame *rf = &raw[base + (int)k];
            struct code_entry *e = code_resolve(t, rf->code, hdrs + k * l->co_copy);
            if (!e) {
                good = false;
                break;
            }
            uintptr_t code_start = rf->code + l->co_code_start;
            long long addr = ((long long)rf->instr - (long long)code_start);
            /* prev_instr (3.11/3.12) is the last instruction started; instr_ptr (3.13+) the
             * one being executed: both index the instruction the frame is at */
            if (addr < -2 || addr > (1LL << 30))
                addr = -1; /* torn instr pointer: report the first line rather than drop */
            if (addr >= 0)
                addr &= ~1LL;
            /* an incomplete frame (still in its prologue, 3.11/3.12) is not on the stack Python
             * shows (traceback, sys._current_frames): leave it out the same way */
            if (e->firsttraceable > 0 && rf->owner != l->owner_generator &&
                addr < (long long)e->firsttraceable * 2) {
                if (rf->entry && s->n_frames > first)
                    s->frames[s->n_frames - 1].entry = true; /* its evaluation ends there */
                continue;
            }
            struct attach_frame *fr = &s->frames[s->n_frames++];
            fr->name = e->qualname;
            fr->file = e->file;
            fr->native = false;
            fr->entry = rf->entry;
            fr->line = skpx_py_linetable_line(e->table, e->table_len, e->firstlineno,
                                              addr < 0 ? -1 : (int)addr);
        }
    }
    skpx_free(hdrs);
    if (!good) {
        s->n_frames = first;
        return false;
    }
    struct attach_thread *th = &s->threads[s->n_threads++];
    memset(th, 0, sizeof(*th));
    th->tid = (pid_t)skpx_load_ptr(ts, l->ts_native_thread_id);
    th->thread_id = (uint64_t)skpx_load_ptr(ts, l->ts_thread_id);
    th->holds_gil = gil_tstate && gil_tstate == ts_addr;
    th->first_frame = first;
    th->n_frames = s->n_frames - first;
    th->truncated = truncated;
    thread_proc_info(t->pid, th);
    return true;
}

/* The thread state holding the GIL, 0 when none or unknown. */
static uintptr_t gil_holder(struct attach_target *t, uintptr_t interp)
{
    const struct attach_pylayout *l = &t->layout;
    uintptr_t holder = 0;
    if (l->rt_gil_tstate != ATTACH_NO_FIELD) {
        if (!attach_remote_read(&t->mem, t->runtime + l->rt_gil_tstate, &holder, sizeof(holder)))
            return 0;
        return holder;
    }
    uintptr_t gil = 0;
    if (l->is_gil_inline != ATTACH_NO_FIELD) {
        gil = interp + l->is_gil_inline;
    } else if (l->is_gil_ptr != ATTACH_NO_FIELD) {
        if (!attach_remote_read(&t->mem, interp + l->is_gil_ptr, &gil, sizeof(gil)) ||
            !skpx_plausible_ptr(gil))
            return 0;
    } else {
        return 0;
    }
    int locked = 0;
    struct iovec loc[2] = {{&locked, sizeof(locked)}, {&holder, sizeof(holder)}};
    struct iovec rem[2] = {{(void *)(gil + l->gil_locked), sizeof(locked)},
                           {(void *)(gil + l->gil_holder), sizeof(holder)}};
    bool ok[2];
    if (attach_remote_readv(&t->mem, loc, rem, 2, ok) != 2 || !locked)
        return 0;
    return holder;
}

skp_err attach_target_sample(struct attach_target *t, struct attach_sample *s, unsigned flags)
{
    const struct attach_pylayout *l = &t->layout;
    s->n_threads = 0;
    s->n_frames = 0;
    s->n_torn = 0;
    if (t->n_codes + ATTACH_MAX_DEPTH * 4 > ATTACH_CODE_CACHE_CAP)
        cache_clear(t); /* between samples only: frames never point at a freed entry */
    struct attach_stopper stop;
    bool stopped = false;
    if (flags & ATTACH_SAMPLE_BLOCKING)
        stopped = attach_stopper_stop(&stop, t->pid) == SKP_OK;

    skp_err err = SKP_OK;
    struct raw_frame *raw = skpx_malloc(ATTACH_MAX_DEPTH * sizeof(*raw));
    if (!raw) {
        err = SKP_ENOMEM;
        goto out;
    }
    uintptr_t interp = 0;
    err = attach__main_interp(t, &interp);
    if (err)
        goto out;
    /* the main interpreter only: subinterpreters are rare and share no thread with it */
    uintptr_t ts = 0;
    if (!skpx_plausible_ptr(interp) ||
        !attach_remote_read(&t->mem, interp + l->is_threads_head, &ts, sizeof(ts))) {
        s->n_torn++;
        t->stats.torn_threads++;
        goto out;
    }
    uintptr_t gil = gil_holder(t, interp);
    for (size_t k = 0; ts && k < ATTACH_MAX_THREADS * 4; k++) {
        if (!skpx_plausible_ptr(ts)) {
            s->n_torn++;
            t->stats.torn_threads++;
            break;
        }
        uintptr_t next = 0;
        if (!sample_thread(t, ts, gil, s, &next, raw)) {
            s->n_torn++;
            t->stats.torn_threads++;
        }
        ts = next;
    }
    t->stats.samples++;
out:
    if (stopped)
        attach_stopper_resume(&stop);
    skpx_free(raw);
    return err;
}
