/* pystack.c - Python stack capture: direct (no GIL, safe reads) and portable (C API, GIL).
 *
 * Design (direct mode). A sample of one thread costs few syscalls because reads are batched and
 * speculative: the first process_vm_readv copies, in one call, the thread state, the _PyCFrame,
 * the slice of the thread's frame data stack and the headers of the code objects seen in the
 * previous sample of that thread (all addresses remembered in skp__pytarget). Then the walk runs
 * on the copies; anything the guess missed (the stack moved to another chunk, new code objects,
 * generator frames living outside the data stack) is read in further batched calls. Code objects
 * resolve through codecache.c to "<filename>.<name>" plus the location table, re-validated
 * against the freshly read header every sample. Nothing here follows a pointer into live memory
 * directly, so a thread that returns, frees its frames or exits while being read yields a shorter
 * or failed capture, never a fault. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "python/pystack.h"

#include <limits.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/rawload.h"
#include "common/utf8.h"
#include "python/codecache.h"
#include "python/codewatch.h"
#include "python/pyasync.h"
#include "python/pylayout.h"
#include "python/safe_read.h"

/* Bytes of a PyThreadState / code header / frame header we ever copy (checked at init). */
#define TS_COPY_MAX 512
#define CODE_COPY_MAX 256
#define FRAME_COPY_MAX 128
#define STR_HEADER_MAX 128
#define GEN_COPY_MAX 256
/* Coroutines followed down one await chain at most. */
#define AWAIT_DEPTH_MAX 64
/* Bytes of a coroutine's locals and value stack read with its head (the awaited object is on
 * the top of the value stack, usually within the first few dozen slots). */
#define AWAIT_PEEK_BYTES 256
/* Await chains remembered (direct-mapped by the task's coroutine address), and coroutines per
 * remembered chain: the next capture of that task reads the whole chain it had last time in one
 * batched read, then checks every link (a changed chain falls back to one read per link). */
#define AWAIT_HINTS 256
#define AWAIT_HINT_DEPTH 8
#define AWAIT_SLOT_BYTES (GEN_COPY_MAX + AWAIT_PEEK_BYTES)

struct raw_frame {
    uintptr_t code;
    uintptr_t prev_instr;
    int owner;
    int code_slot; /* index into the capture's code list, -1 = unresolved */
};

struct code_slot {
    uintptr_t addr;
    bool have_header;
    bool used;                       /* referenced by a frame of this capture */
    bool watched;                    /* entry proven current by its codewatch */
    struct skp__pycode_entry *entry; /* NULL: invalid code object */
};

/* The coroutines of a task's await chain at its last capture, outermost (the task's) first, and
 * the object the innermost one awaited (a future: read too, so its type check needs no read). */
struct await_hint {
    uintptr_t coro;
    uint32_t n;
    uintptr_t chain[AWAIT_HINT_DEPTH];
    /* the value stack depth (stacktop) link k had: its next read takes the head and the locals
     * and stack up to there, not a fixed peek (fewer cold cache lines of the host's objects) */
    uint16_t top[AWAIT_HINT_DEPTH];
    /* the innermost coroutine's last instruction and the non-coroutine object it awaited there
     * (0: none): while it still awaits that object at that instruction, its stack holds the
     * object alive, so it is the same object, still no coroutine, and is not read again */
    uintptr_t term_instr;
    uintptr_t term;
    /* what the last readiness test of this task found behind the chain's end (pyasync.h) */
    struct skp__pyasync_memo memo;
};

/* Tasks and chain links one prepare reads in its batch (the links of the tasks after those fill
 * it are read by their own captures). */
#define PREP_TASKS_MAX SKYPROF_MAX_PARALLEL_CAP
#define PREP_LINKS_MAX SKP_PY_SAFE_READ_IOV_MAX

/* What a capture_task prefetched, or a prepare for it: chain link k (address addr[k]) was read
 * into at[k], got[k] bytes. The links of one batch are adjacent in memory: one destination. */
struct await_prefetch {
    size_t n;
    uintptr_t addr[AWAIT_HINT_DEPTH];
    const uint8_t *at[AWAIT_HINT_DEPTH];
    size_t got[AWAIT_HINT_DEPTH];
};

/* One task's share of a prepare's batch. */
struct prepared_task {
    uintptr_t coro;
    bool taken;              /* used by its capture already */
    struct await_prefetch p; /* p.buf points into r->prep_buf */
    bool has_ready;          /* `ready` holds the words of its readiness test, read ahead */
    struct skp__pyasync_ahead ready;
};

struct skp__pyreader {
    const struct skp__pylayout *layout; /* NULL: portable mode */
    struct await_hint *await_hints;     /* AWAIT_HINTS */
    uint8_t *await_buf;                 /* AWAIT_HINT_DEPTH * AWAIT_SLOT_BYTES */
    struct prepared_task *prep;         /* PREP_TASKS_MAX: the last prepare's tasks */
    uint8_t *prep_buf;                  /* PREP_LINKS_MAX * AWAIT_SLOT_BYTES */
    size_t n_prep;
    size_t prep_left; /* captures the prepared batch still serves */
    struct skp__pycode_cache cache;
    uint8_t *window;         /* SKP_PY_WINDOW_MAX bytes */
    uint8_t *code_headers;   /* SKP_PY_MAX_CODES * CODE_COPY_MAX */
    struct code_slot *codes; /* SKP_PY_MAX_CODES */
    struct raw_frame *raw;   /* SKP_PY_MAX_WALK */
    uint16_t *code_index;    /* open addressing over codes, SKP_PY_MAX_CODES*2 */
    uint64_t captures, failures, frames;
    uint64_t watched_hits; /* code objects proven current without a read */
    bool watch;            /* codewatch enabled */
    bool qualified;        /* frames as "<co_qualname> (<file>:<line>)" */
};

/* ---------------------------------------------------------------------------------------------
 * small helpers
 * ------------------------------------------------------------------------------------------- */
/* Writes ": <line>" (or ": None" for -1, as Python prints a missing line) into buf; returns its
 * length. Hand-rolled: snprintf was a measurable part of a 50-frame capture. */
static size_t format_line(char *buf, int line)
{
    buf[0] = ':';
    buf[1] = ' ';
    if (line < 0) {
        memcpy(buf + 2, "None", 4);
        return 6;
    }
    char tmp[12];
    size_t n = 0;
    unsigned v = (unsigned)line;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        buf[2 + i] = tmp[n - 1 - i];
    return 2 + n;
}

/* Takes `len` bytes of out->scratch for a frame's text and appends a frame pointing at them;
 * returns where to write the text, or NULL (nothing taken) when the frames or the scratch are
 * full. */
static char *push_str_frame(struct skyprof_capture *out, size_t len)
{
    if (out->n >= out->cap || !out->scratch || out->scratch_len + len > out->scratch_cap)
        return NULL;
    char *dst = out->scratch + out->scratch_len;
    out->scratch_len += len;
    struct skyprof_frame *f = &out->frames[out->n++];
    f->addr = 0;
    f->str = dst;
    f->len = (uint32_t)len;
    f->kind = SKYPROF_FRAME_STR;
    return dst;
}

/* Writes a, then sep, then b into label[0..SKP_PY_LABEL_MAX) (a cut to leave room for sep, b
 * to what is left; not NUL-terminated) and returns the length: the portable reader's frame
 * labels, "<qualname> (<file>" or "<file>.<name>". */
static size_t join_label(char *label, const char *a, size_t a_len, const char *sep, const char *b,
                         size_t b_len)
{
    size_t sep_len = strlen(sep);
    size_t len = a_len < SKP_PY_LABEL_MAX - sep_len ? a_len : SKP_PY_LABEL_MAX - sep_len;
    memcpy(label, a, len);
    memcpy(label + len, sep, sep_len);
    len += sep_len;
    size_t rest = b_len < SKP_PY_LABEL_MAX - len ? b_len : SKP_PY_LABEL_MAX - len;
    memcpy(label + len, b, rest);
    return len + rest;
}

/* Appends "<label>: <line>" (or, `qualified`, "<label>:<line>)" where the label is
 * "<qualname> (<file>") to out->scratch and a frame pointing at it. False when full. */
static bool emit_frame(struct skyprof_capture *out, const char *label, size_t label_len, int line,
                       bool qualified)
{
    if (out->n >= out->cap)
        return false;
    char num[16];
    size_t num_len = format_line(num, line);
    if (qualified) { /* ": 12" -> ":12)"; no line -> ":0)" */
        if (line < 0) {
            memcpy(num, ":0", 2);
            num_len = 2;
        } else {
            memmove(num + 1, num + 2, num_len - 2);
            num_len--;
        }
        num[num_len++] = ')';
    }
    char *dst = push_str_frame(out, label_len + num_len);
    if (!dst)
        return false;
    memcpy(dst, label, label_len);
    memcpy(dst + label_len, num, num_len);
    return true;
}

/* Appends a frame of plain text (no line), e.g. the "(waiting)" mark. False when full. */
static bool emit_text(struct skyprof_capture *out, const char *text, size_t len)
{
    char *dst = push_str_frame(out, len);
    if (!dst)
        return false;
    memcpy(dst, text, len);
    return true;
}

/* ---------------------------------------------------------------------------------------------
 * str and bytes objects through safe reads
 * ------------------------------------------------------------------------------------------- */

/* Appends the UTF-8 form of the str object at `addr` to buf[*len..cap). */
static bool read_str_utf8(const struct skp__pylayout *l, uintptr_t addr, char *buf, size_t *len,
                          size_t cap)
{
    uint8_t hdr[STR_HEADER_MAX];
    if (!skpx_plausible_ptr(addr) || !skp__safe_read(addr, hdr, l->str_header_copy))
        return false;
    if (skpx_load_ptr(hdr, l->obj_type) != l->str_type)
        return false;
    struct skp__pystr_info si;
    l->str_decode(hdr, &si);
    if (!si.ok || si.length > SKP_PY_LABEL_MAX)
        return false;
    size_t n_bytes = si.length * (size_t)si.kind;
    uint8_t raw[SKP_PY_LABEL_MAX * 4];
    if (!skp__safe_read(addr + si.data_offset, raw, n_bytes))
        return false;
    for (size_t i = 0; i < si.length; i++) {
        uint32_t cp = skpx_ucs_at(raw, (size_t)si.kind, i);
        if (cp > 0x10FFFF)
            return false;
        if (cp >= 0xD800 && cp <= 0xDFFF)
            cp = '?'; /* lone surrogate (surrogateescape'd bytes): not encodable */
        char enc[4];
        size_t k = skpx_utf8_put(cp, enc);
        if (*len + k > cap)
            return true; /* truncated label, still usable */
        memcpy(buf + *len, enc, k);
        *len += k;
    }
    return true;
}

/* Copies the bytes object at `addr` into a new buffer (caller frees). */
static uint8_t *read_bytes_copy(const struct skp__pylayout *l, uintptr_t addr, uint32_t *len)
{
    *len = 0;
    uint8_t hdr[64];
    if (!skpx_plausible_ptr(addr) || !skp__safe_read(addr, hdr, l->bytes_data))
        return NULL;
    if (skpx_load_ptr(hdr, l->obj_type) != l->bytes_type)
        return NULL;
    intptr_t size = (intptr_t)skpx_load_ptr(hdr, l->bytes_size);
    if (size <= 0 || size > SKP_PY_LINETABLE_MAX)
        return NULL;
    uint8_t *copy = skpx_malloc((size_t)size);
    if (!copy)
        return NULL;
    if (!skp__safe_read(addr + l->bytes_data, copy, (size_t)size)) {
        skpx_free(copy);
        return NULL;
    }
    *len = (uint32_t)size;
    return copy;
}

/* ---------------------------------------------------------------------------------------------
 * reader lifecycle
 * ------------------------------------------------------------------------------------------- */
skp_err skp__pyreader_new(bool force_portable, struct skp__pyreader **out)
{
    *out = NULL;
    struct skp__pyreader *r = skpx_calloc(1, sizeof(*r));
    if (!r)
        return SKP_ENOMEM;
    const struct skp__pylayout *l = force_portable ? NULL : skp__pylayout_select();
    if (l &&
        (l->ts_copy > TS_COPY_MAX || l->co_copy > CODE_COPY_MAX || l->fr_size > FRAME_COPY_MAX ||
         l->str_header_copy > STR_HEADER_MAX || l->gen_copy > GEN_COPY_MAX))
        l = NULL; /* a table bigger than our buffers: never guess, use the portable path */
    if (l && !skp__safe_read_init())
        l = NULL;
    r->layout = l;
    r->watch = l && !force_portable && skp__codewatch_init(l);
    skp_err err = SKP_OK;
    if (l) {
        err = skp__pycode_cache_init(&r->cache);
        r->window = skpx_malloc(SKP_PY_WINDOW_MAX);
        r->code_headers = skpx_malloc((size_t)SKP_PY_MAX_CODES * CODE_COPY_MAX);
        r->codes = skpx_calloc(SKP_PY_MAX_CODES, sizeof(*r->codes));
        r->raw = skpx_calloc(SKP_PY_MAX_WALK, sizeof(*r->raw));
        r->code_index = skpx_calloc(SKP_PY_MAX_CODES * 2, sizeof(*r->code_index));
        r->await_hints = skpx_calloc(AWAIT_HINTS, sizeof(*r->await_hints));
        r->await_buf = skpx_malloc((size_t)AWAIT_HINT_DEPTH * AWAIT_SLOT_BYTES);
        r->prep = skpx_calloc(PREP_TASKS_MAX, sizeof(*r->prep));
        r->prep_buf = skpx_malloc((size_t)PREP_LINKS_MAX * AWAIT_SLOT_BYTES);
        if (!err && (!r->window || !r->code_headers || !r->codes || !r->raw || !r->code_index ||
                     !r->await_hints || !r->await_buf || !r->prep || !r->prep_buf))
            err = SKP_ENOMEM;
    }
    if (err) {
        skp__pyreader_free(r);
        return err;
    }
    *out = r;
    return SKP_OK;
}

void skp__pyreader_free(struct skp__pyreader *r)
{
    if (!r)
        return;
    skp__pycode_cache_cleanup(&r->cache);
    SKPX_FREE_ALL(r->window, r->code_headers, r->codes, r->raw, r->code_index, r->await_hints,
                  r->await_buf, r->prep, r->prep_buf, r);
}

void skp__pyreader_set_qualified(struct skp__pyreader *r)
{
    r->qualified = true;
    r->watch = false; /* watches match co_name; this reader's cache is keyed by co_qualname */
}

bool skp__pyreader_is_direct(const struct skp__pyreader *r)
{
    return r && r->layout != NULL;
}

void skp__pyreader_get_stats(const struct skp__pyreader *r, struct skp__pyreader_stats *out)
{
    memset(out, 0, sizeof(*out));
    out->captures = r->captures;
    out->failures = r->failures;
    out->frames = r->frames;
    out->code_hits = r->cache.hits;
    out->watched_hits = r->watched_hits;
    out->code_misses = r->cache.misses;
    out->syscalls = skp__safe_read_calls();
    out->bounce_syscalls = skp__safe_read_bounce_calls();
    out->direct = r->layout != NULL;
    out->layout = r->layout ? r->layout->name : "portable";
}

/* ---------------------------------------------------------------------------------------------
 * targets
 * ------------------------------------------------------------------------------------------- */
static void target_fill(struct skp__pytarget *t, PyThreadState *ts)
{
    memset(t, 0, sizeof(*t));
    t->tstate = (uintptr_t)ts;
    t->interp = (uintptr_t)PyThreadState_GetInterpreter(ts);
    t->thread_id = ts->thread_id;
    t->native_tid = ts->native_thread_id;
}

skp_err skp__pytarget_init_current(struct skp__pytarget *t)
{
    PyThreadState *ts = _PyThreadState_UncheckedGet();
    if (!ts)
        return SKP_ESTATE;
    target_fill(t, ts);
    return SKP_OK;
}

skp_err skp__pytarget_init_ident(struct skp__pytarget *t, unsigned long ident)
{
    PyThreadState *me = _PyThreadState_UncheckedGet();
    if (!me)
        return SKP_ESTATE;
    PyInterpreterState *interp = PyThreadState_GetInterpreter(me);
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(interp); ts;
         ts = PyThreadState_Next(ts)) {
        if (ts->thread_id == ident) {
            target_fill(t, ts);
            return SKP_OK;
        }
    }
    return SKP_ENOTFOUND;
}

/* ---------------------------------------------------------------------------------------------
 * direct mode
 * ------------------------------------------------------------------------------------------- */

/* Index of `addr` in r->codes (adding it), or -1 when the per-capture table is full. */
static int code_slot_of(struct skp__pyreader *r, size_t *n_codes, uintptr_t addr)
{
    const size_t mask = SKP_PY_MAX_CODES * 2 - 1;
    size_t h = (size_t)(((uint64_t)(addr >> 4) * 0x9E3779B97F4A7C15ull) >> 40) & mask;
    for (size_t probe = 0; probe <= mask; probe++) {
        size_t i = (h + probe) & mask;
        uint16_t v = r->code_index[i];
        if (v == 0) {
            if (*n_codes >= SKP_PY_MAX_CODES)
                return -1;
            int slot = (int)(*n_codes)++;
            r->codes[slot].addr = addr;
            r->codes[slot].have_header = false;
            r->codes[slot].used = false;
            r->codes[slot].watched = false;
            r->codes[slot].entry = NULL;
            r->code_index[i] = (uint16_t)(slot + 1);
            return slot;
        }
        if (r->codes[v - 1].addr == addr)
            return v - 1;
    }
    return -1;
}

/* The cache entry of `addr` when a watch proves the object there is the one it was built from
 * (no read needed), else NULL. */
static struct skp__pycode_entry *watched_entry(struct skp__pyreader *r, uintptr_t addr)
{
    if (!r->watch)
        return NULL;
    struct skp__pycode_entry *e = skp__pycode_cache_find_addr(&r->cache, addr);
    if (e && e->watch_slot >= 0 && skp__codewatch_armed(e->watch_slot, e->watch_gen, addr)) {
        r->watched_hits++;
        return e;
    }
    return NULL;
}

/* Asks for a watch on a freshly validated entry (again after a while if never armed). */
static void maybe_request_watch(struct skp__pyreader *r, struct skp__pycode_entry *e)
{
    if (!r->watch)
        return;
    if (e->watch_slot >= 0 && skp__codewatch_armed(e->watch_slot, e->watch_gen, e->key.code))
        return;
    int64_t now = skpx_mono_ns();
    if (e->watch_slot >= 0 && now - e->watch_requested_ns < 2000000000LL)
        return;
    struct skp__pylive_query q = {.code = e->key.code,
                                  .filename = e->key.filename,
                                  .name = e->key.name,
                                  .linetable = e->key.linetable,
                                  .firstlineno = e->key.firstlineno};
    skp__codewatch_request(&q, &e->watch_slot, &e->watch_gen);
    e->watch_requested_ns = now;
}

/* Resolves one code object whose header was copied: validates it and finds or builds its
 * cache entry. NULL when the header is not a code object (stale pointer, torn read). */
static struct skp__pycode_entry *resolve_code(struct skp__pyreader *r, uintptr_t addr,
                                              const uint8_t *hdr)
{
    const struct skp__pylayout *l = r->layout;
    if (skpx_load_ptr(hdr, l->co_type) != l->code_type)
        return NULL;
    struct skp__pycode_key key = {
        .code = addr,
        .filename = skpx_load_ptr(hdr, l->co_filename),
        .name = skpx_load_ptr(hdr, r->qualified ? l->co_qualname : l->co_name),
        .linetable = skpx_load_ptr(hdr, l->co_linetable),
        .firstlineno = skpx_load_int(hdr, l->co_firstlineno),
    };
    struct skp__pycode_entry *e = skp__pycode_cache_find(&r->cache, &key);
    if (e)
        return e;
    char *label = skpx_malloc(SKP_PY_LABEL_MAX);
    if (!label)
        return NULL;
    size_t len = 0;
    bool ok;
    if (r->qualified) { /* "<qualname> (<file>" */
        ok = read_str_utf8(l, key.name, label, &len, SKP_PY_LABEL_MAX - 2);
        if (ok) {
            label[len++] = ' ';
            label[len++] = '(';
            ok = read_str_utf8(l, key.filename, label, &len, SKP_PY_LABEL_MAX);
        }
    } else { /* "<file>.<name>" */
        ok = read_str_utf8(l, key.filename, label, &len, SKP_PY_LABEL_MAX - 1);
        if (ok) {
            label[len++] = '.';
            ok = read_str_utf8(l, key.name, label, &len, SKP_PY_LABEL_MAX);
        }
    }
    if (!ok) {
        skpx_free(label);
        return NULL;
    }
    char *shrunk = skpx_realloc(label, len ? len : 1);
    if (shrunk)
        label = shrunk;
    uint32_t table_len = 0;
    uint8_t *table = read_bytes_copy(l, key.linetable, &table_len);
    return skp__pycode_cache_insert(&r->cache, &key, skpx_load_int(hdr, l->co_firsttraceable),
                                    label, (uint32_t)len, table, table_len);
}

static int entry_line(const struct skp__pylayout *l, struct skp__pycode_entry *e, int addr)
{
    if (!e->table)
        return e->key.firstlineno;
    if (e->memo_addr == addr)
        return e->memo_line;
    int line = l->addr2line(e->table, e->table_len, e->key.firstlineno, addr);
    e->memo_addr = addr;
    e->memo_line = line;
    return line;
}

/* A direct capture runs five steps, one function each:
 *   1. read_speculative  - one batched read of the thread state and of what the previous sample
 *                          of this thread used (cframe, data-stack window, code headers);
 *   2. read_stack_copies - checks the thread state, then reads what the guess missed;
 *   3. walk_frames       - follows the frame chain over the copies, innermost first;
 *   4. resolve_codes     - reads the code headers still missing and resolves them (codecache);
 *   5. format_frames     - writes the frames into the caller's capture.
 * collect_thread runs steps 1-3 for one thread, finish_capture steps 4-5. */

/* A copied slice [lo, lo + len) of a thread's frame data stack; len 0 = none. */
struct stack_window {
    uintptr_t lo;
    size_t len;
};

/* What step 1 asked for and got: `got` iovecs were read in full, in order; the cframe and the
 * window were iovecs number iov_cframe / iov_window (-1 = not asked). */
struct spec_read {
    size_t got;
    int iov_cframe;
    int iov_window;
};

static bool window_has(struct stack_window w, uintptr_t addr)
{
    return addr >= w.lo && addr < w.lo + w.len;
}

/* Appends one frame (code object, last instruction, owner kind) to r->raw[*n_raw_io], registering
 * its code object in r->codes. The caller checks the room in r->raw. */
static void add_raw_frame(struct skp__pyreader *r, size_t *n_raw_io, size_t *n_codes_io,
                          uintptr_t code, uintptr_t prev_instr, int owner)
{
    struct raw_frame *rf = &r->raw[(*n_raw_io)++];
    rf->code = code;
    rf->prev_instr = prev_instr;
    rf->owner = owner;
    rf->code_slot = code_slot_of(r, n_codes_io, code);
    if (rf->code_slot >= 0)
        r->codes[rf->code_slot].used = true;
}

/* Step 1: one speculative batch into ts / cf / r->window / r->code_headers: the thread state, and
 * the cframe, window and code headers of the previous sample of t (hinted code objects a watch
 * proves current need no read). Registers the hinted codes in r->codes (*n_codes_io). */
static struct spec_read read_speculative(struct skp__pyreader *r, struct skp__pytarget *t,
                                         uint8_t *ts, uint8_t *cf, size_t *n_codes_io)
{
    const struct skp__pylayout *l = r->layout;
    struct iovec loc[SKP_PY_SAFE_READ_IOV_MAX];
    struct iovec rem[SKP_PY_SAFE_READ_IOV_MAX];
    size_t n_iov = 0;
    struct spec_read spec = {.got = 0, .iov_cframe = -1, .iov_window = -1};

    loc[n_iov] = (struct iovec){ts, l->ts_copy};
    rem[n_iov++] = (struct iovec){(void *)t->tstate, l->ts_copy};
    if (t->hint_cframe) {
        spec.iov_cframe = (int)n_iov;
        loc[n_iov] = (struct iovec){cf, l->cf_size};
        rem[n_iov++] = (struct iovec){(void *)t->hint_cframe, l->cf_size};
    }
    if (t->hint_win_len) {
        spec.iov_window = (int)n_iov;
        loc[n_iov] = (struct iovec){r->window, t->hint_win_len};
        rem[n_iov++] = (struct iovec){(void *)t->hint_win_lo, t->hint_win_len};
    }
    size_t iov_codes = n_iov;
    int hint_slot[SKP_PY_HINT_CODES];
    for (size_t i = 0; i < t->n_hint_codes && n_iov < SKP_PY_SAFE_READ_IOV_MAX; i++) {
        size_t before = *n_codes_io;
        int slot = code_slot_of(r, n_codes_io, t->hint_codes[i]);
        if (slot < 0 || *n_codes_io == before)
            continue; /* table full or duplicate hint */
        struct skp__pycode_entry *we = watched_entry(r, t->hint_codes[i]);
        if (we) {
            r->codes[slot].have_header = true; /* proven current: nothing to read */
            r->codes[slot].entry = we;
            r->codes[slot].watched = true;
            continue;
        }
        hint_slot[n_iov - iov_codes] = slot;
        loc[n_iov] = (struct iovec){r->code_headers + (size_t)slot * CODE_COPY_MAX, l->co_copy};
        rem[n_iov++] = (struct iovec){(void *)t->hint_codes[i], l->co_copy};
    }
    spec.got = skp__safe_readv(loc, rem, n_iov);
    for (size_t i = iov_codes; i < spec.got; i++)
        r->codes[hint_slot[i - iov_codes]].have_header = true;
    return spec;
}

/* Step 2a: whether the copied thread state is still the target's: same interpreter and thread as
 * at attach. A thread that ended freed its state: the data stack chunk pointer was cleared before
 * the free, and a reused allocation fails the interpreter / thread id / kernel tid comparison. */
static bool thread_state_current(const struct skp__pylayout *l, const struct skp__pytarget *t,
                                 const uint8_t *ts)
{
    return skpx_load_ptr(ts, l->ts_interp) == t->interp &&
           skpx_load_ulong(ts, l->ts_thread_id) == t->thread_id &&
           skpx_load_ulong(ts, l->ts_native_thread_id) == t->native_tid &&
           skpx_load_ptr(ts, l->ts_datastack_chunk) != 0;
}

/* Step 2b: the window worth copying: the used part of the current chunk (plus slack), at most
 * SKP_PY_WINDOW_MAX, ending at the top (the innermost frames are the ones we keep). None when the
 * chunk pointers look torn. */
static struct stack_window wanted_window(const struct skp__pylayout *l, const uint8_t *ts)
{
    uintptr_t chunk = skpx_load_ptr(ts, l->ts_datastack_chunk);
    uintptr_t top = skpx_load_ptr(ts, l->ts_datastack_top);
    uintptr_t limit = skpx_load_ptr(ts, l->ts_datastack_limit);
    struct stack_window w = {0, 0};
    if (skpx_plausible_ptr(chunk) && top > chunk && limit >= top &&
        limit - chunk <= ((size_t)1 << 30)) {
        uintptr_t hi = top + SKP_PY_WINDOW_SLACK < limit ? top + SKP_PY_WINDOW_SLACK : limit;
        w.lo = hi - chunk > SKP_PY_WINDOW_MAX ? hi - SKP_PY_WINDOW_MAX : chunk;
        w.len = (size_t)(hi - w.lo);
    }
    return w;
}

/* Step 2: checks the thread state copied by step 1, then reads the cframe and the window when the
 * speculation missed them, and remembers both as t's hints. *have: the window copied into
 * r->window (none if it could not be read). Returns -1 when the thread cannot be read. */
static int read_stack_copies(struct skp__pyreader *r, struct skp__pytarget *t, const uint8_t *ts,
                             uint8_t *cf, struct spec_read spec, struct stack_window *have)
{
    const struct skp__pylayout *l = r->layout;
    if (!thread_state_current(l, t, ts))
        return -1;
    uintptr_t cframe = skpx_load_ptr(ts, l->ts_cframe);
    uintptr_t top = skpx_load_ptr(ts, l->ts_datastack_top);
    if (!skpx_plausible_ptr(cframe))
        return -1;
    struct stack_window want = wanted_window(l, ts);
    bool cframe_ok =
        spec.iov_cframe >= 0 && (size_t)spec.iov_cframe < spec.got && t->hint_cframe == cframe;
    bool window_ok = spec.iov_window >= 0 && (size_t)spec.iov_window < spec.got &&
                     t->hint_win_lo == want.lo && t->hint_win_lo + t->hint_win_len >= top;
    *have = window_ok ? (struct stack_window){t->hint_win_lo, t->hint_win_len}
                      : (struct stack_window){0, 0};
    if (!cframe_ok || (!window_ok && want.len)) {
        struct iovec loc[2];
        struct iovec rem[2];
        size_t n_iov = 0;
        int i_cf = -1;
        int i_win = -1;
        if (!cframe_ok) {
            i_cf = (int)n_iov;
            loc[n_iov] = (struct iovec){cf, l->cf_size};
            rem[n_iov++] = (struct iovec){(void *)cframe, l->cf_size};
        }
        if (!window_ok && want.len) {
            i_win = (int)n_iov;
            loc[n_iov] = (struct iovec){r->window, want.len};
            rem[n_iov++] = (struct iovec){(void *)want.lo, want.len};
        }
        size_t got2 = skp__safe_readv(loc, rem, n_iov);
        if (i_cf >= 0 && (size_t)i_cf >= got2)
            return -1;
        if (i_win >= 0 && (size_t)i_win < got2)
            *have = want;
    }
    t->hint_cframe = cframe;
    t->hint_win_lo = have->len ? have->lo : want.lo;
    t->hint_win_len = have->len ? have->len : want.len;
    return 0;
}

/* Step 3: walks innermost -> outermost from the cframe's current frame, over the window copy (or
 * one read per frame outside it), appending to r->raw. Stops after `stop_frame` (*found_stop set),
 * at a frame that cannot be read or looks torn, or past the walk cap (*more_out set). */
static void walk_frames(struct skp__pyreader *r, const uint8_t *cf, struct stack_window have,
                        uintptr_t stop_frame, size_t cap, size_t *n_raw_io, size_t *n_codes_io,
                        bool *more_out, bool *found_stop)
{
    const struct skp__pylayout *l = r->layout;
    uintptr_t addr = skpx_load_ptr(cf, l->cf_current_frame);
    size_t walk_cap = cap + 16 < SKP_PY_MAX_WALK ? cap + 16 : SKP_PY_MAX_WALK;
    uint8_t fr_tmp[FRAME_COPY_MAX];
    while (addr) {
        if (*n_raw_io >= walk_cap) {
            *more_out = true;
            break;
        }
        if (!skpx_plausible_ptr(addr))
            break;
        const uint8_t *fr;
        if (addr >= have.lo && addr + l->fr_size <= have.lo + have.len) {
            fr = r->window + (addr - have.lo);
        } else if (skp__safe_read(addr, fr_tmp, l->fr_size)) {
            fr = fr_tmp; /* generator frame or an older chunk */
        } else {
            break; /* freed under us: the stack we have is what there is */
        }
        int owner = (int)(signed char)fr[l->fr_owner];
        uintptr_t code = skpx_load_ptr(fr, l->fr_code);
        if (owner < 0 || owner > l->fr_owner_max || !skpx_plausible_ptr(code))
            break;
        add_raw_frame(r, n_raw_io, n_codes_io, code, skpx_load_ptr(fr, l->fr_prev_instr), owner);
        uintptr_t prev = skpx_load_ptr(fr, l->fr_previous);
        if (stop_frame && addr == stop_frame) {
            *found_stop = true;
            break;
        }
        /* Cycle guard: within one data-stack chunk a caller's frame always sits below its
         * callee's (pushed earlier). A torn read that points back up would loop; stop there.
         * Generator frames live outside the chunk and are bounded by walk_cap instead. */
        if (prev == addr || (window_has(have, addr) && window_has(have, prev) && prev > addr))
            break;
        addr = prev;
    }
}

/* Steps 1-3 of a direct capture: reads the target thread's frames (innermost first) into
 * r->raw[*n_raw..], registering their code objects in r->codes (*n_codes; the first call of a
 * capture starts both at 0 and clears the code index). With `stop_frame` != 0 the walk ends after
 * the frame at that address (*found_stop set). Returns -1 when the thread cannot be read. */
static int collect_thread(struct skp__pyreader *r, struct skp__pytarget *t, uintptr_t stop_frame,
                          size_t *n_raw_io, size_t *n_codes_io, bool *more_out, bool *found_stop,
                          size_t cap)
{
    uint8_t ts[TS_COPY_MAX];
    uint8_t cf[64];
    struct spec_read spec = read_speculative(r, t, ts, cf, n_codes_io);
    if (spec.got == 0)
        return -1; /* thread state unreadable: the thread is gone */
    struct stack_window have;
    if (read_stack_copies(r, t, ts, cf, spec, &have) < 0)
        return -1;
    walk_frames(r, cf, have, stop_frame, cap, n_raw_io, n_codes_io, more_out, found_stop);
    return 0;
}

/* Step 4a: code objects a watch proves current need no header read. */
static void take_watched_codes(struct skp__pyreader *r, size_t n_codes)
{
    for (size_t s = 0; s < n_codes; s++) {
        struct code_slot *cs = &r->codes[s];
        if (cs->used && !cs->have_header) {
            struct skp__pycode_entry *we = watched_entry(r, cs->addr);
            if (we) {
                cs->have_header = true;
                cs->entry = we;
                cs->watched = true;
            }
        }
    }
}

/* Step 4b: reads, in batches, the headers of the used code objects that have none yet. A header
 * that faults is marked resolved-without-header (addr 0). */
static void read_code_headers(struct skp__pyreader *r, size_t n_codes)
{
    const struct skp__pylayout *l = r->layout;
    struct iovec loc[SKP_PY_SAFE_READ_IOV_MAX];
    struct iovec rem[SKP_PY_SAFE_READ_IOV_MAX];
    for (;;) {
        size_t n_iov = 0;
        size_t first_slot[SKP_PY_SAFE_READ_IOV_MAX];
        for (size_t s = 0; s < n_codes && n_iov < SKP_PY_SAFE_READ_IOV_MAX; s++) {
            if (r->codes[s].have_header || !r->codes[s].used)
                continue;
            loc[n_iov] = (struct iovec){r->code_headers + s * CODE_COPY_MAX, l->co_copy};
            rem[n_iov] = (struct iovec){(void *)r->codes[s].addr, l->co_copy};
            first_slot[n_iov++] = s;
        }
        if (n_iov == 0)
            break;
        size_t ok = skp__safe_readv(loc, rem, n_iov);
        for (size_t i = 0; i < ok; i++)
            r->codes[first_slot[i]].have_header = true;
        if (ok < n_iov) {
            /* the pair at `ok` faulted: mark it resolved-without-header, retry the rest */
            r->codes[first_slot[ok]].have_header = true;
            r->codes[first_slot[ok]].addr = 0;
        }
    }
}

/* Step 4: resolves the code objects used by this capture to cache entries and keeps the resolved
 * ones as t's hints for its next sample. */
static void resolve_codes(struct skp__pyreader *r, struct skp__pytarget *t, size_t n_codes)
{
    take_watched_codes(r, n_codes);
    read_code_headers(r, n_codes);
    size_t n_hint = 0;
    for (size_t s = 0; s < n_codes; s++) {
        struct code_slot *cs = &r->codes[s];
        if (!cs->used)
            continue;
        if (!cs->watched) {
            cs->entry =
                cs->addr ? resolve_code(r, cs->addr, r->code_headers + s * CODE_COPY_MAX) : NULL;
            if (cs->entry)
                maybe_request_watch(r, cs->entry);
        }
        if (cs->entry && n_hint < SKP_PY_HINT_CODES)
            t->hint_codes[n_hint++] = cs->addr;
    }
    t->n_hint_codes = n_hint;
}

/* Step 5: formats the complete frames of r->raw[0..n_raw), innermost first, after `marker` (a
 * frame of plain text, NULL = none). */
static void format_frames(struct skp__pyreader *r, size_t n_raw, bool more, const char *marker,
                          struct skyprof_capture *out)
{
    const struct skp__pylayout *l = r->layout;
    out->n = 0;
    out->truncated = false;
    if (marker)
        (void)emit_text(out, marker, strlen(marker));
    for (size_t i = 0; i < n_raw; i++) {
        struct raw_frame *rf = &r->raw[i];
        if (rf->code_slot < 0 || !r->codes[rf->code_slot].entry)
            continue; /* unreadable code object (freed while we read) */
        struct skp__pycode_entry *e = r->codes[rf->code_slot].entry;
        intptr_t units = ((intptr_t)rf->prev_instr - (intptr_t)(rf->code + l->co_code_start)) /
                         (intptr_t)l->code_unit_bytes;
        if (rf->owner != l->fr_owner_generator && units < e->firsttraceable)
            continue; /* incomplete frame: Python does not show it either */
        if (units > INT32_MAX / 4 || units < -1)
            units = -1;
        int line = entry_line(l, e, (int)(units * (intptr_t)l->code_unit_bytes));
        if (!emit_frame(out, e->label, e->label_len, line, r->qualified)) {
            out->truncated = true;
            break;
        }
    }
    if (more)
        out->truncated = true;
    r->frames += out->n;
}

/* Steps 4-5: resolves the code objects of r->raw[0..n_raw) (hints kept in t) and formats the
 * frames, innermost first, after `marker` (a frame of plain text, NULL = none). */
static void finish_capture(struct skp__pyreader *r, struct skp__pytarget *t, size_t n_raw,
                           size_t n_codes, bool more, const char *marker,
                           struct skyprof_capture *out)
{
    resolve_codes(r, t, n_codes);
    format_frames(r, n_raw, more, marker, out);
}

/* Starts a capture's code table empty (code_slot_of adds to it). */
static void clear_code_index(struct skp__pyreader *r)
{
    memset(r->code_index, 0, SKP_PY_MAX_CODES * 2 * sizeof(*r->code_index));
}

static int capture_direct(struct skp__pyreader *r, struct skp__pytarget *t,
                          struct skyprof_capture *out)
{
    size_t n_raw = 0;
    size_t n_codes = 0;
    bool more = false;
    bool found = false;
    clear_code_index(r);
    if (collect_thread(r, t, 0, &n_raw, &n_codes, &more, &found, out->cap) < 0)
        return -1;
    finish_capture(r, t, n_raw, n_codes, more, NULL, out);
    return 0;
}

/* Reads the head of the coroutine or generator at `addr` (with its frame header) into g, and
 * speculatively the first AWAIT_PEEK_BYTES of its frame's locals and value stack with it (one
 * read instead of two per coroutine; *got_len says how much came). Returns its frame state, or
 * INT_MIN when it is not a readable coroutine / generator. */
static int read_gen(const struct skp__pylayout *l, uintptr_t addr, uint8_t *g, size_t *got_len)
{
    *got_len = 0;
    if (!skpx_plausible_ptr(addr))
        return INT_MIN;
    if (skp__safe_read(addr, g, l->gen_copy + AWAIT_PEEK_BYTES))
        *got_len = l->gen_copy + AWAIT_PEEK_BYTES;
    else if (skp__safe_read(addr, g, l->gen_copy)) /* the object ends near a mapping's end */
        *got_len = l->gen_copy;
    else
        return INT_MIN;
    uintptr_t type = skpx_load_ptr(g, l->obj_type);
    if (type != l->coro_type && type != l->gen_type)
        return INT_MIN;
    return (int)(signed char)g[l->gen_frame_state];
}

static struct await_hint *await_hint_of(struct skp__pyreader *r, uintptr_t coro)
{
    return &r->await_hints[(size_t)(((uint64_t)(coro >> 4) * 0x9E3779B97F4A7C15ull) >> 40) %
                           AWAIT_HINTS];
}

/* The links of the chain remembered for `coro` worth reading (the awaited future at its end is
 * known, see struct await_hint): their number, 0 when none is remembered. */
static size_t hinted_links(struct skp__pyreader *r, uintptr_t coro, const struct await_hint **out)
{
    const struct await_hint *h = await_hint_of(r, coro);
    *out = h;
    if (h->coro != coro || h->n == 0)
        return 0;
    size_t n = h->n < AWAIT_HINT_DEPTH ? h->n : AWAIT_HINT_DEPTH;
    if (h->term && n > 0 && h->chain[n - 1] == h->term)
        n--;
    return n;
}

/* The prepared share of `coro` (taken: it serves one capture), or NULL. */
static const struct prepared_task *take_prepared(struct skp__pyreader *r, uintptr_t coro)
{
    if (r->prep_left == 0)
        return NULL;
    for (size_t i = 0; i < r->n_prep; i++) {
        struct prepared_task *pt = &r->prep[i];
        if (pt->coro == coro && !pt->taken) {
            pt->taken = true;
            return pt->p.n > 0 ? pt : NULL;
        }
    }
    return NULL;
}

/* Bytes worth reading of chain link k of hint h: the coroutine's head and frame header, and its
 * locals and value stack up to the depth it had (the object it awaits is the top of that stack),
 * plus two slots; the fixed peek when that depth is not known. */
static size_t link_read_len(const struct skp__pylayout *l, const struct await_hint *h, size_t k)
{
    size_t peek = AWAIT_PEEK_BYTES;
    if (h->top[k] > 0) {
        size_t upto = l->gen_iframe + l->fr_localsplus + ((size_t)h->top[k] + 2) * sizeof(void *);
        peek = upto > l->gen_copy ? upto - l->gen_copy : 0;
        if (peek > AWAIT_PEEK_BYTES)
            peek = AWAIT_PEEK_BYTES;
    }
    return l->gen_copy + peek;
}

/* Fills n_links links of hint h into p, their bytes adjacent from buf, as (loc, rem) pairs.
 * Returns the bytes used. */
static size_t plan_links(const struct skp__pylayout *l, const struct await_hint *h, size_t n_links,
                         uint8_t *buf, struct await_prefetch *p, struct iovec *loc,
                         struct iovec *rem)
{
    size_t used = 0;
    for (size_t k = 0; k < n_links; k++) {
        size_t len = link_read_len(l, h, k);
        loc[k] = (struct iovec){buf + used, len};
        rem[k] = (struct iovec){(void *)h->chain[k], len};
        p->addr[k] = h->chain[k];
        p->at[k] = buf + used;
        p->got[k] = len;
        used += len;
    }
    p->n = n_links;
    return used;
}

/* Reads, in one batch, the heads of the coroutines the task of `coro` awaited through at its
 * previous capture (none when not remembered), unless the sampler's prepare read them already;
 * *ah = the words of its readiness test the prepare read too (NULL: none). */
static void prefetch_awaits(struct skp__pyreader *r, uintptr_t coro, struct await_prefetch *p,
                            const struct skp__pyasync_ahead **ah)
{
    const struct prepared_task *pt = take_prepared(r, coro);
    *ah = NULL;
    if (pt) {
        *p = pt->p;
        *ah = pt->has_ready ? &pt->ready : NULL;
        return;
    }
    p->n = 0;
    const struct await_hint *h;
    size_t n = hinted_links(r, coro, &h);
    if (n == 0)
        return;
    struct iovec loc[AWAIT_HINT_DEPTH];
    struct iovec rem[AWAIT_HINT_DEPTH];
    (void)plan_links(r->layout, h, n, r->await_buf, p, loc, rem);
    p->n = skp__safe_readv(loc, rem, n);
}

void skp__pyreader_prepare_tasks(struct skp__pyreader *r, const uintptr_t *coros, size_t n,
                                 size_t n_captures)
{
    r->n_prep = 0;
    r->prep_left = 0;
    if (!r->layout)
        return;
    const struct skp__pylayout *l = r->layout;
    struct iovec loc[PREP_LINKS_MAX];
    struct iovec rem[PREP_LINKS_MAX];
    size_t first[PREP_TASKS_MAX];
    size_t n_iov = 0;
    size_t used = 0;
    for (size_t i = 0; i < n && r->n_prep < PREP_TASKS_MAX; i++) {
        const struct await_hint *h;
        size_t k = hinted_links(r, coros[i], &h);
        if (k == 0 || n_iov + k > PREP_LINKS_MAX ||
            used + k * AWAIT_SLOT_BYTES > (size_t)PREP_LINKS_MAX * AWAIT_SLOT_BYTES)
            continue;
        struct prepared_task *pt = &r->prep[r->n_prep];
        first[r->n_prep++] = n_iov;
        pt->coro = coros[i];
        pt->taken = false;
        pt->has_ready = false;
        used += plan_links(l, h, k, r->prep_buf + used, &pt->p, loc + n_iov, rem + n_iov);
        n_iov += k;
    }
    if (n_iov == 0)
        return;
    /* The words of the tasks' readiness tests (pyasync.h) at the end of the batch, after every
     * link: one of them faulting (a guess at a freed object) cuts no chain short. */
    size_t ready_first[PREP_TASKS_MAX];
    size_t ready_n[PREP_TASKS_MAX];
    const struct skp__pyasync *pa = skp__pyasync_get();
    for (size_t i = 0; i < r->n_prep; i++) {
        struct prepared_task *pt = &r->prep[i];
        const struct await_hint *h = await_hint_of(r, pt->coro);
        ready_n[i] = 0;
        size_t bytes = SKP_PYASYNC_WORDS * sizeof(uint64_t);
        if (!pa || h->coro != pt->coro || n_iov + SKP_PYASYNC_WORDS > PREP_LINKS_MAX ||
            used + bytes > (size_t)PREP_LINKS_MAX * AWAIT_SLOT_BYTES)
            continue;
        ready_first[i] = n_iov;
        ready_n[i] = skp__pyasync_plan(pa, &h->memo, r->prep_buf + used, loc + n_iov, rem + n_iov,
                                       &pt->ready);
        pt->has_ready = ready_n[i] > 0;
        n_iov += ready_n[i];
        used += ready_n[i] * sizeof(uint64_t);
    }
    size_t got = skp__safe_readv(loc, rem, n_iov);
    for (size_t i = 0; i < r->n_prep; i++) {
        /* the kernel stops at the first pair that faulted: the tasks from there on read their
         * own chain (a share cut short keeps the links read before the fault) */
        struct prepared_task *pt = &r->prep[i];
        pt->p.n = got <= first[i] ? 0 : got - first[i] < pt->p.n ? got - first[i] : pt->p.n;
        if (pt->has_ready)
            pt->ready.n_read = got <= ready_first[i]               ? 0
                               : got - ready_first[i] < ready_n[i] ? got - ready_first[i]
                                                                   : ready_n[i];
    }
    r->prep_left = n_captures;
}

void skp__pyreader_capture_done(struct skp__pyreader *r)
{
    if (r->prep_left > 0 && --r->prep_left == 0)
        r->n_prep = 0;
}

/* The head of the coroutine at `addr`, link `k` of the chain: from the prefetch when it read that
 * address there, else read into `g`. *out points at the bytes. Returns its frame state, or INT_MIN
 * when it is not a readable coroutine / generator. */
static int gen_at(struct skp__pyreader *r, const struct await_prefetch *p, size_t k, uintptr_t addr,
                  uint8_t *g, const uint8_t **out, size_t *got)
{
    const struct skp__pylayout *l = r->layout;
    if (p && k < p->n && p->addr[k] == addr) {
        const uint8_t *b = p->at[k];
        uintptr_t type = skpx_load_ptr(b, l->obj_type);
        if (type != l->coro_type && type != l->gen_type)
            return INT_MIN;
        *out = b;
        *got = p->got[k];
        return (int)(signed char)b[l->gen_frame_state];
    }
    *out = g;
    return read_gen(l, addr, g, got);
}

/* asyncio.sleep's local `h` (its TimerHandle) from the copy `g` (got bytes) of the sleep
 * coroutine at `cur`, or 0. */
static uintptr_t sleep_timer(const struct skp__pylayout *l, const struct skp__pyasync *pa,
                             uintptr_t cur, const uint8_t *g, size_t got)
{
    size_t off = l->gen_iframe + l->fr_localsplus + pa->sleep_h_slot * sizeof(void *);
    uintptr_t h = 0;
    if (off + sizeof(h) <= got)
        h = skpx_load_ptr(g, off);
    else if (!skp__safe_read(cur + off, &h, sizeof(h)))
        h = 0;
    return h;
}

/* Appends to r->raw, innermost first, the await chain of the suspended coroutine at `coro`: its
 * frame, then the frame of the coroutine it awaits (the top of its value stack), and so on down
 * to the innermost suspended coroutine (which awaits a future or another object). Links come
 * from the prefetch `p` when it has them (NULL: none); the chain seen is remembered for the next
 * capture. When `end` is given (asyncio's offsets `pa` known), it gets what the readiness test
 * needs: the innermost coroutine's code, the object it awaits, its sleep timer. Returns the
 * number of frames added. */
static size_t collect_awaits(struct skp__pyreader *r, uintptr_t coro,
                             const struct await_prefetch *p, size_t *n_raw_io, size_t *n_codes_io,
                             const struct skp__pyasync *pa, struct skp__pyasync_chain *end)
{
    const struct skp__pylayout *l = r->layout;
    uint8_t g_local[GEN_COPY_MAX + AWAIT_PEEK_BYTES];
    const uint8_t *g = NULL;
    size_t got = 0;
    uintptr_t code[AWAIT_DEPTH_MAX];
    uintptr_t prev_instr[AWAIT_DEPTH_MAX];
    uintptr_t link[AWAIT_DEPTH_MAX + 1];
    uint16_t tops[AWAIT_DEPTH_MAX + 1] = {0}; /* each coroutine link's stacktop */
    size_t n = 0;
    size_t n_links = 0; /* the coroutines, and the object the innermost one awaits */
    uintptr_t cur = coro;
    struct await_hint *h = await_hint_of(r, coro);
    uintptr_t known_instr = h->coro == coro ? h->term_instr : 0;
    uintptr_t known_term = h->coro == coro ? h->term : 0;
    uintptr_t term = 0, term_instr = 0;
    for (;;) {
        if (n >= AWAIT_DEPTH_MAX)
            break;
        link[n_links++] = cur;
        if (gen_at(r, p, n, cur, g_local, &g, &got) != l->gen_state_suspended)
            break; /* a future (or a running / finished one) ends the chain */
        const uint8_t *fr = g + l->gen_iframe;
        code[n] = skpx_load_ptr(fr, l->fr_code);
        prev_instr[n] = skpx_load_ptr(fr, l->fr_prev_instr);
        if (!skpx_plausible_ptr(code[n]))
            break;
        n++;
        if (end)
            end->timer = code[n - 1] == pa->sleep_code ? sleep_timer(l, pa, cur, g, got) : 0;
        int top = skpx_load_int(fr, l->fr_stacktop);
        if (top <= 0 || top > (1 << 20))
            break;
        tops[n_links - 1] = top < UINT16_MAX ? (uint16_t)top : 0;
        size_t off = l->gen_iframe + l->fr_localsplus + (size_t)(top - 1) * sizeof(void *);
        uintptr_t awaited = 0;
        if (off + sizeof(awaited) <= got)
            awaited = skpx_load_ptr(g, off);
        else if (!skp__safe_read(cur + off, &awaited, sizeof(awaited)))
            break;
        if (awaited == cur)
            break;
        if (known_term && awaited == known_term && prev_instr[n - 1] == known_instr) {
            link[n_links++] = awaited; /* the same future as at the previous capture */
            term = awaited;
            term_instr = known_instr;
            break;
        }
        cur = awaited;
    }
    if (!term && n_links == n + 1 && n > 0 && link[n] != coro) {
        /* ended on an object that is no coroutine (a future): remember it with its await site */
        term = link[n];
        term_instr = prev_instr[n - 1];
    }
    if (h->coro != coro)
        memset(&h->memo, 0, sizeof(h->memo)); /* another task's guesses */
    if (end) {
        end->innermost_code = n > 0 ? code[n - 1] : 0;
        end->awaited = n > 0 && n_links == n + 1 ? link[n] : 0;
    }
    h->coro = coro;
    h->n = (uint32_t)(n_links < AWAIT_HINT_DEPTH ? n_links : AWAIT_HINT_DEPTH);
    for (size_t k = 0; k < h->n; k++) {
        h->chain[k] = link[k];
        h->top[k] = tops[k];
    }
    h->term = h->n == n_links ? term : 0;
    h->term_instr = term_instr;
    size_t n_raw = *n_raw_io;
    size_t added = 0;
    for (size_t i = n; i-- > 0 && n_raw < SKP_PY_MAX_WALK;) {
        struct raw_frame *rf = &r->raw[n_raw++];
        rf->code = code[i];
        rf->prev_instr = prev_instr[i];
        rf->owner = l->fr_owner_generator;
        rf->code_slot = code_slot_of(r, n_codes_io, code[i]);
        if (rf->code_slot >= 0)
            r->codes[rf->code_slot].used = true;
        added++;
    }
    *n_raw_io = n_raw;
    return added;
}

/* Counts a capture and empties `out`; false (counted as a failed capture) when there is no
 * thread to read or nowhere to put its frames. */
static bool capture_begin(struct skp__pyreader *r, const struct skp__pytarget *t,
                          struct skyprof_capture *out)
{
    r->captures++;
    out->n = 0;
    out->truncated = false;
    if (!t || !t->tstate || !out->frames || out->cap == 0) {
        r->failures++;
        return false;
    }
    return true;
}

int skp__pyreader_capture_task(struct skp__pyreader *r, struct skp__pytarget *t, uintptr_t coro,
                               struct skp__pytarget *worker, struct skyprof_capture *out)
{
    if (!r->layout || !coro)
        return skp__pyreader_capture(r, t, false, out);
    if (!capture_begin(r, t, out))
        return -1;
    const struct skp__pylayout *l = r->layout;
    uint8_t g_local[GEN_COPY_MAX + AWAIT_PEEK_BYTES];
    const uint8_t *g = NULL;
    size_t got = 0;
    struct await_prefetch pref;
    const struct skp__pyasync_ahead *ahead = NULL;
    prefetch_awaits(r, coro, &pref, &ahead);
    int state = gen_at(r, &pref, 0, coro, g_local, &g, &got);
    (void)g;
    size_t n_raw = 0;
    size_t n_codes = 0;
    bool more = false;
    bool found = false;
    clear_code_index(r);
    if (worker && state == l->gen_state_suspended &&
        collect_thread(r, worker, 0, &n_raw, &n_codes, &more, &found, out->cap) == 0) {
        /* handed to a worker thread: its stack on top of the request's await chain */
        (void)collect_awaits(r, coro, &pref, &n_raw, &n_codes, NULL, NULL);
        finish_capture(r, worker, n_raw, n_codes, more, NULL, out);
        return 0;
    }
    n_raw = 0;
    n_codes = 0;
    more = false;
    clear_code_index(r);
    if (state == l->gen_state_executing) {
        /* running: the thread's stack from the task's coroutine up (the loop below it is cut) */
        uintptr_t frame = coro + l->gen_iframe;
        if (collect_thread(r, t, frame, &n_raw, &n_codes, &more, &found, out->cap) < 0) {
            r->failures++;
            return -1;
        }
        finish_capture(r, t, n_raw, n_codes, more, NULL, out);
        return 0;
    }
    const struct skp__pyasync *pa = skp__pyasync_get();
    struct skp__pyasync_chain end = {0, 0, 0};
    if (state == l->gen_state_suspended &&
        collect_awaits(r, coro, &pref, &n_raw, &n_codes, pa, pa ? &end : NULL) > 0) {
        /* ready (its wakeup is due, the loop runs something else) or waiting: pyasync.h */
        bool ready = pa && skp__pyasync_is_ready(pa, &end, &await_hint_of(r, coro)->memo, ahead,
                                                 (double)skpx_mono_ns() / 1e9);
        finish_capture(r, t, n_raw, n_codes, false, ready ? SKP_PY_READY_MARK : SKP_PY_WAITING_MARK,
                       out);
        return 0;
    }
    r->failures++;
    return -1; /* not started, finished, or not a coroutine any more */
}

/* ---------------------------------------------------------------------------------------------
 * portable mode (GIL)
 * ------------------------------------------------------------------------------------------- */
static int capture_portable_locked(struct skp__pytarget *t, bool qualified,
                                   struct skyprof_capture *out)
{
    PyThreadState *me = _PyThreadState_UncheckedGet();
    if (!me)
        return -1;
    PyThreadState *target = NULL;
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(PyThreadState_GetInterpreter(me)); ts;
         ts = PyThreadState_Next(ts)) {
        if ((uintptr_t)ts == t->tstate && ts->thread_id == t->thread_id &&
            ts->native_thread_id == t->native_tid) {
            target = ts;
            break;
        }
    }
    if (!target)
        return -1;
    out->n = 0;
    out->truncated = false;
    PyFrameObject *f = PyThreadState_GetFrame(target); /* new reference or NULL */
    while (f) {
        PyCodeObject *co = PyFrame_GetCode(f); /* new reference */
        Py_ssize_t fn_len = 0;
        Py_ssize_t nm_len = 0;
        const char *fn = PyUnicode_AsUTF8AndSize(co->co_filename, &fn_len);
        const char *nm =
            fn ? PyUnicode_AsUTF8AndSize(qualified ? co->co_qualname : co->co_name, &nm_len) : NULL;
        bool ok = true;
        if (!fn || !nm) {
            PyErr_Clear();
        } else {
            char label[SKP_PY_LABEL_MAX];
            size_t len = qualified ? join_label(label, nm, (size_t)nm_len, " (", fn, (size_t)fn_len)
                                   : join_label(label, fn, (size_t)fn_len, ".", nm, (size_t)nm_len);
            ok = emit_frame(out, label, len, PyFrame_GetLineNumber(f), qualified);
        }
        Py_DECREF(co);
        PyFrameObject *back = PyFrame_GetBack(f); /* new reference or NULL */
        Py_DECREF(f);
        f = back;
        if (!ok) {
            out->truncated = back != NULL;
            Py_XDECREF(back);
            break;
        }
    }
    return 0;
}

static int capture_portable(struct skp__pytarget *t, bool gil_held, bool qualified,
                            struct skyprof_capture *out)
{
    if (gil_held)
        return capture_portable_locked(t, qualified, out);
    /* Taking the GIL from an agent thread during or after finalization can hang or crash. */
    if (!Py_IsInitialized() || _Py_IsFinalizing())
        return -1;
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = capture_portable_locked(t, qualified, out);
    PyGILState_Release(g);
    return rc;
}

int skp__pyreader_capture(struct skp__pyreader *r, struct skp__pytarget *t, bool gil_held,
                          struct skyprof_capture *out)
{
    if (!capture_begin(r, t, out))
        return -1;
    int rc =
        r->layout ? capture_direct(r, t, out) : capture_portable(t, gil_held, r->qualified, out);
    if (rc < 0) {
        out->n = 0;
        r->failures++;
    }
    return rc;
}
