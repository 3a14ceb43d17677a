/* Fixture tests of the out-of-process reader for CPython versions this machine does not have
 * (3.12, 3.13, 3.14): the test lays out, in its own memory, a runtime, an interpreter, a thread
 * state, a frame data stack (with a shim frame), code objects, str and bytes objects exactly as
 * each version documents them, forks, scribbles over its own copy, and reads the CHILD with
 * attach_target_open_at + attach_target_sample. 3.13 and 3.14 runtimes carry a _Py_DebugOffsets
 * table with offsets that differ from any real build, so the reader can only pass by using the
 * table; 3.14 frames hold tagged references. Also: a wrong cookie, a free-threaded build and an
 * unknown version are refused with a clear reason. And the raw-memory object readers of pydict.h
 * (dicts: combined, general, split; managed instance attributes; sets; type names; ints) against
 * CPython 3.11 objects laid out the same way, valid and corrupt. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "attach/pydebug_offsets.h"
#include "attach/pydict.h"
#include "attach/pylayout.h"
#include "attach/pyreader.h"

#define ARENA_BYTES (256 * 1024)

/* Everything the child must keep: one arena, bump-allocated, 16-aligned. */
struct arena {
    uint8_t *base;
    size_t used;
};

static void *alloc(struct arena *a, size_t n)
{
    size_t at = (a->used + 15) & ~(size_t)15;
    assert_true(at + n <= ARENA_BYTES);
    a->used = at + n;
    return a->base + at;
}

static void put_ptr(void *base, size_t off, const void *p)
{
    uintptr_t v = (uintptr_t)p;
    memcpy((uint8_t *)base + off, &v, sizeof(v));
}

static void put_u64(void *base, size_t off, uint64_t v)
{
    memcpy((uint8_t *)base + off, &v, sizeof(v));
}

static void put_int(void *base, size_t off, int v)
{
    memcpy((uint8_t *)base + off, &v, sizeof(v));
}

/* A compact ASCII str object for layout l. */
static void *make_str(struct arena *a, const struct attach_pylayout *l, const char *s)
{
    size_t n = strlen(s);
    uint8_t *o = alloc(a, l->str_compact_size + n + 1);
    memset(o, 0, l->str_compact_size);
    put_u64(o, l->str_length, n);
    uint32_t state = (1u << 2) | (1u << 5) | (1u << 6); /* kind 1, compact, ascii */
    if (l->str_ready_bit >= 0)
        state |= 1u << l->str_ready_bit;
    memcpy(o + l->str_state, &state, sizeof(state));
    memcpy(o + l->str_ascii_size, s, n + 1);
    return o;
}

/* A bytes object holding a location table: units 0-7 on firstlineno+1, 8-15 on firstlineno+3. */
static void *make_linetable(struct arena *a, const struct attach_pylayout *l)
{
    static const uint8_t table[] = {
        0x80 | (13 << 3) | 7, 2, /* no columns, 8 units, line +1 (svarint 2) */
        0x80 | (13 << 3) | 7, 4, /* no columns, 8 units, line +2 (svarint 4) */
    };
    uint8_t *o = alloc(a, l->bytes_data + sizeof(table) + 1);
    memset(o, 0, l->bytes_data);
    put_u64(o, l->var_size, sizeof(table));
    memcpy(o + l->bytes_data, table, sizeof(table));
    return o;
}

static void *make_code(struct arena *a, const struct attach_pylayout *l, const char *name,
                       const char *file, int firstlineno)
{
    uint8_t *co = alloc(a, l->co_code_start + 64);
    memset(co, 0, l->co_code_start + 64);
    put_ptr(co, l->co_filename, make_str(a, l, file));
    void *n = make_str(a, l, name);
    put_ptr(co, l->co_name, n);
    if (l->co_qualname != ATTACH_NO_FIELD)
        put_ptr(co, l->co_qualname, n);
    put_ptr(co, l->co_linetable, make_linetable(a, l));
    put_int(co, l->co_firstlineno, firstlineno);
    return co;
}

/* Writes a frame at `f` running `code` at code unit `unit`. */
static void make_frame(const struct attach_pylayout *l, uint8_t *f, uint8_t *code, int unit,
                       int owner, uint8_t *previous)
{
    memset(f, 0, l->fr_copy);
    uintptr_t c = (uintptr_t)code;
    if (l->fr_code_tagged)
        c |= 1; /* a _PyStackRef with its deferred-reference tag bit */
    memcpy(f + l->fr_code, &c, sizeof(c));
    put_ptr(f, l->fr_previous, previous);
    put_ptr(f, l->fr_instr, code ? code + l->co_code_start + 2 * unit : NULL);
    f[l->fr_owner] = (uint8_t)owner;
}

struct fixture {
    uint8_t *runtime;
    uint8_t *tstate;
};

/* Builds runtime -> interpreter -> one thread -> frames outer (line 11) / shim / middle (line 23)
 * / inner (line 33, innermost), holding the GIL. `runtime` is already allocated (and holds the
 * debug offsets for 3.13+). */
static void build(struct arena *a, const struct attach_pylayout *l, struct fixture *fx)
{
    uint8_t *interp = alloc(a, 8192);
    memset(interp, 0, 8192);
    uint8_t *ts = alloc(a, ATTACH_COPY_MAX);
    memset(ts, 0, ATTACH_COPY_MAX);
    put_ptr(fx->runtime, l->rt_interp_head, interp);
    put_ptr(interp, l->is_threads_head, ts);
    put_ptr(ts, l->ts_interp, interp);
    put_u64(ts, l->ts_thread_id, 0x1234);

    if (l->is_gil_ptr != ATTACH_NO_FIELD) {
        uint8_t *gil = alloc(a, 256);
        memset(gil, 0, 256);
        put_ptr(interp, l->is_gil_ptr, gil);
        put_int(gil, l->gil_locked, 1);
        put_ptr(gil, l->gil_holder, ts);
    } else if (l->is_gil_inline != ATTACH_NO_FIELD) {
        put_int(interp + l->is_gil_inline, l->gil_locked, 1);
        put_ptr(interp + l->is_gil_inline, l->gil_holder, ts);
    }

    uint8_t *outer = make_code(a, l, "outer", "/srv/app.py", 10);
    uint8_t *middle = make_code(a, l, "Klass.middle", "/srv/lib.py", 21);
    uint8_t *inner = make_code(a, l, "inner", "/srv/lib.py", 30);

    uint8_t *chunk = alloc(a, 16384);
    memset(chunk, 0, 16384);
    /* frames also hold locals and a value stack: leave gaps; keep them pointer-aligned */
    size_t step = (l->fr_copy + 64 + 7) & ~(size_t)7;
    uint8_t *f0 = chunk + ((l->chunk_header + 7) & ~(size_t)7);
    uint8_t *shim = f0 + step;
    uint8_t *f1 = shim + step;
    uint8_t *f2 = f1 + step;
    int thread_owner = 0;
    make_frame(l, f0, outer, 3, thread_owner, NULL); /* unit 3 -> line 11 */
    if (l->owner_cstack >= 0)
        make_frame(l, shim, outer, 0, l->owner_cstack, f0); /* skipped */
    else
        shim = f0;
    make_frame(l, f1, middle, 9, thread_owner, shim); /* unit 9 -> line 24 */
    make_frame(l, f2, inner, 12, thread_owner, f1);   /* unit 12 -> line 33 */
    put_ptr(ts, l->ts_datastack_chunk, chunk);
    if (l->ts_datastack_top != ATTACH_NO_FIELD)
        put_ptr(ts, l->ts_datastack_top, f2 + l->fr_copy + 64);
    if (l->ts_current_frame != ATTACH_NO_FIELD) {
        put_ptr(ts, l->ts_current_frame, f2);
    } else {
        uint8_t *cframe = alloc(a, 64);
        memset(cframe, 0, 64);
        put_ptr(cframe, l->cf_current_frame, f2);
        put_ptr(ts, l->ts_cframe, cframe);
    }
    fx->tstate = ts;
}

struct child {
    pid_t pid;
};

/* Forks a child that sets its thread state's native id and name, then waits to be killed.
 * The parent then wipes the arena so only the child's copy holds the fixture. */
static void spawn(struct child *c, struct arena *a, const struct attach_pylayout *l,
                  struct fixture *fx)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        if (fx->tstate)
            put_u64(fx->tstate, l->ts_native_thread_id, (uint64_t)syscall(SYS_gettid));
        prctl(PR_SET_NAME, "skp-fixture");
        char ok = 'k';
        if (write(p[1], &ok, 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(p[1]);
    char ok = 0;
    assert_int_equal(read(p[0], &ok, 1), 1);
    close(p[0]);
    memset(a->base, 0xA5, ARENA_BYTES); /* from here on only the child has the fixture */
    c->pid = pid;
}

static void reap(struct child *c)
{
    kill(c->pid, SIGKILL);
    waitpid(c->pid, NULL, 0);
}

static void check_sample(pid_t pid, uintptr_t runtime, const struct attach_pylayout *l,
                         const char *want_version)
{
    char why[ATTACH_WHY_MAX];
    struct attach_target *t = NULL;
    skp_err err = attach_target_open_at(pid, runtime, l, &t, why, sizeof(why));
    if (err)
        fail_msg("open_at: %s (%s)", skp_strerror(err), why);
    assert_string_equal(attach_target_version(t), want_version);
    struct attach_sample *s = malloc(sizeof(*s));
    assert_int_equal(attach_target_sample(t, s, 0), SKP_OK);
    assert_int_equal(s->n_torn, 0);
    assert_int_equal(s->n_threads, 1);
    const struct attach_thread *th = &s->threads[0];
    assert_int_equal(th->tid, pid);
    assert_string_equal(th->name, "skp-fixture");
    assert_int_equal(th->thread_id, 0x1234);
    assert_true(th->holds_gil);
    assert_int_equal(th->n_frames, 3); /* the shim frame is not shown */
    static const struct {
        const char *name, *file;
        int line;
    } want[] = {
        {"inner", "/srv/lib.py", 33},
        {"Klass.middle", "/srv/lib.py", 24},
        {"outer", "/srv/app.py", 11},
    };
    for (size_t i = 0; i < 3; i++) {
        const struct attach_frame *f = &s->frames[th->first_frame + i];
        assert_string_equal(f->name, want[i].name);
        assert_string_equal(f->file, want[i].file);
        assert_int_equal(f->line, want[i].line);
    }
    /* evaluation boundaries for --native: the frame the shim (entry) frame calls starts an
     * evaluation, and so does the outermost frame */
    if (!l || l->owner_cstack >= 0) { /* NULL: a 3.13+ table, which has shim frames */
        assert_false(s->frames[th->first_frame + 0].entry);
        assert_true(s->frames[th->first_frame + 1].entry);
        assert_true(s->frames[th->first_frame + 2].entry);
    }
    /* a second sample comes from the code cache and says the same */
    assert_int_equal(attach_target_sample(t, s, 0), SKP_OK);
    assert_int_equal(s->n_frames, 3);
    assert_string_equal(s->frames[0].name, "inner");
    struct attach_stats st;
    attach_target_stats(t, &st);
    assert_int_equal(st.code_misses, 3);
    assert_true(st.code_hits >= 3);
    free(s);
    attach_target_close(t);
}

static uint8_t *new_arena(struct arena *a)
{
    a->base = aligned_alloc(4096, ARENA_BYTES);
    assert_non_null(a->base);
    memset(a->base, 0, ARENA_BYTES);
    a->used = 0;
    return a->base;
}

static void fixture_312(void **state)
{
    (void)state;
    struct arena a;
    new_arena(&a);
    const struct attach_pylayout *l = attach_pylayout_py312();
    struct fixture fx = {alloc(&a, 4096), NULL};
    memset(fx.runtime, 0, 4096);
    build(&a, l, &fx);
    struct child c;
    spawn(&c, &a, l, &fx);
    check_sample(c.pid, (uintptr_t)fx.runtime, l, "3.12");
    reap(&c);
    free(a.base);
}

/* Offsets unlike any real build's, so only a reader that uses the table can pass. */
static void fill_dbg_common(uint64_t version, uint64_t *interp_head, struct attach_dbg_thread *th)
{
    (void)version;
    *interp_head = 1000;
    th->size = 600;
    th->prev = 8;
    th->next = 16;
    th->interp = 40;
    th->current_frame = 120;
    th->thread_id = 200;
    th->native_thread_id = 216;
    th->datastack_chunk = 304;
    th->status = 400;
}

static void dbg_313(uint8_t *rt, uint64_t version, bool free_threaded, const char *cookie)
{
    struct attach_dbg_313 d;
    memset(&d, 0, sizeof(d));
    memcpy(d.head.cookie, cookie, 8);
    d.head.version = version;
    d.head.free_threaded = free_threaded;
    fill_dbg_common(version, &d.runtime.interpreters_head, &d.thread);
    d.interp.next = 24;
    d.interp.threads_head = 168;
    d.interp.gil_runtime_state = 4000;
    d.interp.gil_runtime_state_locked = 4008;
    d.interp.gil_runtime_state_holder = 4016;
    d.frame.size = 96;
    d.frame.previous = 32;
    d.frame.executable = 8;
    d.frame.instr_ptr = 48;
    d.frame.localsplus = 96;
    d.frame.owner = 70;
    d.code.filename = 136;
    d.code.name = 144;
    d.code.qualname = 152;
    d.code.linetable = 168;
    d.code.firstlineno = 80;
    d.code.co_code_adaptive = 256;
    d.pyobject.a = 8;
    d.bytes.a = 16;
    d.bytes.b = 40;
    d.unicode.a = 32;
    d.unicode.b = 16;
    d.unicode.c = 48;
    memcpy(rt, &d, sizeof(d));
}

static void dbg_314(uint8_t *rt, uint64_t version, bool free_threaded, const char *cookie)
{
    struct attach_dbg_314 d;
    memset(&d, 0, sizeof(d));
    memcpy(d.head.cookie, cookie, 8);
    d.head.version = version;
    d.head.free_threaded = free_threaded;
    fill_dbg_common(version, &d.runtime.interpreters_head, &d.thread);
    d.interp.next = 16;
    d.interp.threads_head = 176;
    d.interp.threads_main = 184;
    d.interp.gil_runtime_state = 5000;
    d.interp.gil_runtime_state_locked = 5008;
    d.interp.gil_runtime_state_holder = 5016;
    d.frame.size = 88;
    d.frame.previous = 16;
    d.frame.executable = 0;
    d.frame.instr_ptr = 56;
    d.frame.localsplus = 88;
    d.frame.owner = 74;
    d.code.filename = 120;
    d.code.name = 128;
    d.code.qualname = 136;
    d.code.linetable = 144;
    d.code.firstlineno = 72;
    d.code.co_code_adaptive = 232;
    d.pyobject.a = 8;
    d.bytes.a = 16;
    d.bytes.b = 32;
    d.unicode.a = 32;
    d.unicode.b = 16;
    d.unicode.c = 40;
    memcpy(rt, &d, sizeof(d));
}

static void fixture_debug_offsets(int minor)
{
    struct arena a;
    new_arena(&a);
    struct fixture fx = {alloc(&a, 8192), NULL};
    memset(fx.runtime, 0, 8192);
    uint64_t version = (3u << 24) | ((uint64_t)minor << 16) | (2u << 8) | 0xf0;
    if (minor == 13)
        dbg_313(fx.runtime, version, false, "xdebugpy");
    else
        dbg_314(fx.runtime, version, false, "xdebugpy");
    struct attach_pylayout l;
    char why[256];
    assert_int_equal(attach_pylayout_from_debug_offsets(fx.runtime, 8192, &l, why, sizeof(why)),
                     SKP_OK);
    assert_int_equal(l.owner_cstack, minor == 13 ? 3 : 4);
    assert_int_equal(l.fr_code_tagged, minor >= 14);
    build(&a, &l, &fx);
    struct child c;
    spawn(&c, &a, &l, &fx);
    /* NULL layout: the reader must read the child's table itself */
    check_sample(c.pid, (uintptr_t)fx.runtime, NULL, minor == 13 ? "3.13" : "3.14");
    reap(&c);
    free(a.base);
}

static void fixture_313(void **state)
{
    (void)state;
    fixture_debug_offsets(13);
}

static void fixture_314(void **state)
{
    (void)state;
    fixture_debug_offsets(14);
}

static void refusals(void **state)
{
    (void)state;
    static const struct {
        int minor;
        uint64_t version;
        bool ft;
        const char *cookie;
        skp_err err;
        const char *says;
    } cases[] = {
        {13, 0x030D02F0, false, "xdebugpz", SKP_EINVAL, "cookie"},
        {14, 0x030E00F0, true, "xdebugpy", SKP_ENOTSUP, "free-threaded"},
        {14, 0x030F00A1, false, "xdebugpy", SKP_ENOTSUP, "3.15"},
        {13, 0x020700F0, false, "xdebugpy", SKP_ENOTSUP, "2.7"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint8_t rt[ATTACH_DEBUG_OFFSETS_COPY];
        memset(rt, 0, sizeof(rt));
        if (cases[i].minor == 13)
            dbg_313(rt, cases[i].version, cases[i].ft, cases[i].cookie);
        else
            dbg_314(rt, cases[i].version, cases[i].ft, cases[i].cookie);
        struct attach_pylayout l;
        char why[512] = "";
        skp_err err = attach_pylayout_from_debug_offsets(rt, sizeof(rt), &l, why, sizeof(why));
        if (err != cases[i].err || !strstr(why, cases[i].says))
            fail_msg("case %zu: %s, \"%s\"", i, skp_strerror(err), why);
    }
    /* an implausible offset in an otherwise good table */
    uint8_t rt[ATTACH_DEBUG_OFFSETS_COPY];
    memset(rt, 0, sizeof(rt));
    dbg_313(rt, 0x030D02F0, false, "xdebugpy");
    struct attach_dbg_313 d;
    memcpy(&d, rt, sizeof(d));
    d.frame.owner = (uint64_t)1 << 40;
    memcpy(rt, &d, sizeof(d));
    struct attach_pylayout l;
    char why[256] = "";
    assert_int_equal(attach_pylayout_from_debug_offsets(rt, sizeof(rt), &l, why, sizeof(why)),
                     SKP_EINVAL);
    assert_non_null(strstr(why, "implausible"));
    /* too short a copy */
    assert_int_equal(attach_pylayout_from_debug_offsets(rt, 40, &l, why, sizeof(why)), SKP_EINVAL);

    /* a wrong cookie in a live child: open_at refuses with the reason */
    struct arena a;
    new_arena(&a);
    struct fixture fx = {alloc(&a, 4096), NULL};
    dbg_314(fx.runtime, 0x030E00F0, false, "XDEBUGPY");
    struct child c;
    spawn(&c, &a, &l, &fx);
    struct attach_target *t = NULL;
    char why2[ATTACH_WHY_MAX] = "";
    assert_int_equal(
        attach_target_open_at(c.pid, (uintptr_t)fx.runtime, NULL, &t, why2, sizeof(why2)),
        SKP_EINVAL);
    assert_null(t);
    assert_non_null(strstr(why2, "xdebugpy"));
    reap(&c);
    free(a.base);
}

/* ---------------------------------------------------------------------------------------------
 * pydict.h against 3.11 objects
 * ------------------------------------------------------------------------------------------- */

/* A keys object of 2**log2 slots (1-byte indices) holding n entries of `kind` (0 general, 1
 * unicode, 2 split); entry i gets key keys[i] and value values[i] (not for split). */
static uint8_t *make_keys(struct arena *a, const struct attach_pyobj_layout *o, int kind,
                          unsigned log2, size_t n, void *const *keys, void *const *values)
{
    size_t esize = kind == o->dk_kind_general ? o->dk_entry_general : o->dk_entry_unicode;
    uint8_t *k = alloc(a, o->dk_indices + ((size_t)1 << log2) + n * esize);
    memset(k, 0, o->dk_indices);
    k[o->dk_log2_size] = (uint8_t)log2;
    k[o->dk_log2_index_bytes] = (uint8_t)log2; /* 1-byte indices below 2**8 slots */
    k[o->dk_kind] = (uint8_t)kind;
    put_u64(k, o->dk_nentries, n);
    memset(k + o->dk_indices, 0xff, (size_t)1 << log2); /* DKIX_EMPTY: never looked at */
    uint8_t *e = k + o->dk_indices + ((size_t)1 << log2);
    for (size_t i = 0; i < n; i++) {
        uint8_t *ent = e + i * esize;
        if (kind == o->dk_kind_general) {
            put_u64(ent, 0, 1234 + i); /* me_hash */
            put_ptr(ent, o->dke_general_key, keys[i]);
            put_ptr(ent, o->dke_general_value, values[i]);
        } else {
            put_ptr(ent, o->dke_unicode_key, keys[i]);
            put_ptr(ent, o->dke_unicode_value, kind == o->dk_kind_split ? NULL : values[i]);
        }
    }
    return k;
}

static uint8_t *make_dict(struct arena *a, const struct attach_pyobj_layout *o, void *keys,
                          void *values, size_t used)
{
    uint8_t *d = alloc(a, 64);
    memset(d, 0, 64);
    put_u64(d, o->dict_used, used);
    put_ptr(d, o->dict_keys, keys);
    put_ptr(d, o->dict_values, values);
    return d;
}

struct objs311 {
    uint8_t *combined, *general, *split_dict, *instance, *instance_dict, *set, *big, *small;
    uint8_t *bad_width, *bad_count, *v[4];
    void *type, *gamma;
};

static void build_objs311(struct arena *a, const struct attach_pylayout *pl,
                          const struct attach_pyobj_layout *o, struct objs311 *x)
{
    for (int i = 0; i < 4; i++) {
        x->v[i] = alloc(a, 32);
        memset(x->v[i], 0, 32);
    }
    /* combined unicode dict: alpha, a deleted entry, gamma, and alpha set again after a delete */
    void *alpha = make_str(a, pl, "alpha");
    void *ck[] = {alpha, NULL, make_str(a, pl, "gamma"), make_str(a, pl, "alpha")};
    void *cv[] = {NULL, NULL, x->v[2], x->v[0]};
    x->combined = make_dict(a, o, make_keys(a, o, 1, 3, 4, ck, cv), NULL, 2);
    x->gamma = ck[2];
    /* general keys (an int key among strs) */
    void *gk[] = {x->v[3], make_str(a, pl, "beta")};
    void *gv[] = {x->v[0], x->v[1]};
    x->general = make_dict(a, o, make_keys(a, o, o->dk_kind_general, 3, 2, gk, gv), NULL, 2);
    /* a split dict: keys shared, values apart */
    void *sk[] = {make_str(a, pl, "data"), make_str(a, pl, "_pending_removals")};
    uint8_t *shared = make_keys(a, o, o->dk_kind_split, 3, 2, sk, NULL);
    uint8_t *vals = alloc(a, 4 * sizeof(void *));
    put_ptr(vals, 0, x->v[1]);
    put_ptr(vals, sizeof(void *), x->v[2]);
    x->split_dict = make_dict(a, o, shared, vals, 2);
    /* an instance of a managed-dict class: values before the object, keys on the type */
    x->type = alloc(a, 1024);
    memset(x->type, 0, 1024);
    put_u64(x->type, o->tp_flags, o->tpflag_managed_dict);
    put_ptr(x->type, o->ht_cached_keys, shared);
    const char *tname = "WeakSet";
    char *name = alloc(a, 16);
    memcpy(name, tname, strlen(tname) + 1);
    put_ptr(x->type, o->tp_name, name);
    uint8_t *pre = alloc(a, 64 + 32);
    memset(pre, 0, 96);
    x->instance = pre + 64;
    put_ptr(x->instance, o->obj_type, x->type);
    memcpy(x->instance + o->managed_values, &vals, sizeof(vals));
    /* the same class, with a materialised instance dict instead */
    pre = alloc(a, 64 + 32);
    memset(pre, 0, 96);
    x->instance_dict = pre + 64;
    put_ptr(x->instance_dict, o->obj_type, x->type);
    uint8_t *idict = x->combined;
    memcpy(x->instance_dict + o->managed_dict, &idict, sizeof(idict));
    /* a set of 8 slots: two keys, a deleted one (hash -1), empties */
    x->set = alloc(a, 256);
    memset(x->set, 0, 256);
    uint8_t *table = alloc(a, 8 * o->set_entry);
    memset(table, 0, 8 * o->set_entry);
    put_ptr(table + 1 * o->set_entry, o->setentry_key, x->v[0]);
    put_u64(table + 1 * o->set_entry, o->setentry_hash, 77);
    put_ptr(table + 4 * o->set_entry, o->setentry_key, x->v[3]);
    put_u64(table + 4 * o->set_entry, o->setentry_hash, (uint64_t)-1);
    put_ptr(table + 6 * o->set_entry, o->setentry_key, x->v[2]);
    put_u64(table + 6 * o->set_entry, o->setentry_hash, 5);
    put_u64(x->set, o->set_mask, 7);
    put_ptr(x->set, o->set_table, table);
    /* ints: 2**40 + 5 (two 30-bit digits) and 7 */
    x->big = alloc(a, 64);
    memset(x->big, 0, 64);
    put_u64(x->big, o->var_size, 2);
    uint32_t d0 = 5, d1 = 1u << 10;
    memcpy(x->big + o->long_digits, &d0, 4);
    memcpy(x->big + o->long_digits + 4, &d1, 4);
    x->small = alloc(a, 64);
    memset(x->small, 0, 64);
    put_u64(x->small, o->var_size, 1);
    uint32_t d = 7;
    memcpy(x->small + o->long_digits, &d, 4);
    /* corrupt keys objects: an index width that does not follow from the size, and more
     * entries than a table of that size can hold */
    uint8_t *bw = make_keys(a, o, 1, 3, 1, ck + 2, cv + 2);
    bw[o->dk_log2_index_bytes] = 5;
    x->bad_width = make_dict(a, o, bw, NULL, 1);
    uint8_t *bc = make_keys(a, o, 1, 3, 1, ck + 2, cv + 2);
    put_u64(bc, o->dk_nentries, 6);
    x->bad_count = make_dict(a, o, bc, NULL, 1);
}

static void pydict_311(void **state)
{
    (void)state;
    const struct attach_pylayout *pl = attach_pylayout_py311();
    const struct attach_pyobj_layout *o = attach_pyobj_layout_py311();
    if (!pl || !o)
        skip();
    struct arena a;
    new_arena(&a);
    struct objs311 x;
    build_objs311(&a, pl, o, &x);
    struct fixture fx = {NULL, NULL};
    struct child c;
    spawn(&c, &a, pl, &fx);
    struct attach_remote mem;
    char why[256];
    assert_int_equal(attach_remote_init(&mem, c.pid, (uintptr_t)x.combined, why, sizeof(why)),
                     SKP_OK);
    struct attach_pyobjs ob = {&mem, o, 0};
    uintptr_t v = 0;
    /* combined: the live alpha is the later entry */
    assert_int_equal(attach_pydict_get(&ob, (uintptr_t)x.combined, "alpha", &v), SKP_OK);
    assert_true(v == (uintptr_t)x.v[0]);
    assert_int_equal(attach_pydict_get(&ob, (uintptr_t)x.combined, "gamma", &v), SKP_OK);
    assert_true(v == (uintptr_t)x.v[2]);
    assert_int_equal(attach_pydict_get(&ob, (uintptr_t)x.combined, "gam", &v), SKP_ENOTFOUND);
    assert_int_equal(attach_pydict_get(&ob, (uintptr_t)x.combined, "delta", &v), SKP_ENOTFOUND);
    uintptr_t keys[8], vals[8];
    size_t n = 0;
    assert_int_equal(attach_pydict_items(&ob, (uintptr_t)x.combined, keys, vals, 8, &n), SKP_OK);
    assert_int_equal(n, 2);
    assert_true(vals[0] == (uintptr_t)x.v[2] && vals[1] == (uintptr_t)x.v[0]);
    /* general keys: a non-str key is skipped by get, listed by items */
    assert_int_equal(attach_pydict_get(&ob, (uintptr_t)x.general, "beta", &v), SKP_OK);
    assert_true(v == (uintptr_t)x.v[1]);
    assert_int_equal(attach_pydict_items(&ob, (uintptr_t)x.general, keys, vals, 8, &n), SKP_OK);
    assert_int_equal(n, 2);
    assert_true(keys[0] == (uintptr_t)x.v[3] && vals[0] == (uintptr_t)x.v[0]);
    assert_int_equal(attach_pydict_items(&ob, (uintptr_t)x.general, keys, vals, 1, &n), SKP_OK);
    assert_int_equal(n, 1);
    /* split */
    assert_int_equal(attach_pydict_get(&ob, (uintptr_t)x.split_dict, "_pending_removals", &v),
                     SKP_OK);
    assert_true(v == (uintptr_t)x.v[2]);
    /* managed attributes: values + the type's keys, or the instance dict */
    assert_int_equal(attach_pyobj_getattr(&ob, (uintptr_t)x.instance, "data", &v), SKP_OK);
    assert_true(v == (uintptr_t)x.v[1]);
    assert_int_equal(attach_pyobj_getattr(&ob, (uintptr_t)x.instance, "nope", &v), SKP_ENOTFOUND);
    assert_int_equal(attach_pyobj_getattr(&ob, (uintptr_t)x.instance_dict, "gamma", &v), SKP_OK);
    assert_true(v == (uintptr_t)x.v[2]);
    char name[ATTACH_TYPE_NAME_MAX];
    assert_true(attach_pyobj_type_name(&ob, (uintptr_t)x.instance, name, sizeof(name)));
    assert_string_equal(name, "WeakSet");
    assert_true(attach_pyobj_is_a(&ob, (uintptr_t)x.instance, "WeakSet"));
    assert_false(attach_pyobj_is_a(&ob, (uintptr_t)x.instance, "Weak"));
    /* set: live keys in table order, the deleted slot left out */
    assert_int_equal(attach_pyset_items(&ob, (uintptr_t)x.set, keys, 8, &n), SKP_OK);
    assert_int_equal(n, 2);
    assert_true(keys[0] == (uintptr_t)x.v[0] && keys[1] == (uintptr_t)x.v[2]);
    /* ints, strs */
    uint64_t iv = 0;
    assert_true(attach_pylong_value(&ob, (uintptr_t)x.big, &iv));
    assert_true(iv == ((uint64_t)1 << 40) + 5);
    assert_true(attach_pylong_value(&ob, (uintptr_t)x.small, &iv) && iv == 7);
    char sbuf[16];
    assert_true(attach_pystr_ascii(&ob, (uintptr_t)x.gamma, sbuf, sizeof(sbuf)));
    assert_string_equal(sbuf, "gamma");
    assert_false(attach_pystr_ascii(&ob, (uintptr_t)x.gamma, sbuf, 5)); /* no room */
    /* corrupt, unmapped and misaligned: refused, never a crash */
    assert_int_equal(attach_pydict_get(&ob, (uintptr_t)x.bad_width, "gamma", &v), SKP_EINVAL);
    assert_int_equal(attach_pydict_get(&ob, (uintptr_t)x.bad_count, "gamma", &v), SKP_EINVAL);
    assert_int_equal(attach_pydict_get(&ob, 8, "gamma", &v), SKP_EINVAL);
    assert_int_equal(attach_pydict_get(&ob, (uintptr_t)x.combined + 4, "gamma", &v), SKP_EINVAL);
    assert_int_equal(attach_pyset_items(&ob, (uintptr_t)x.combined, keys, 8, &n), SKP_EINVAL);
    assert_int_equal(attach_pydict_get(&ob, (uintptr_t)x.set, "alpha", &v), SKP_EINVAL);
    reap(&c);
    /* the child is gone: every read fails cleanly */
    assert_int_equal(attach_pydict_get(&ob, (uintptr_t)x.combined, "alpha", &v), SKP_EINVAL);
    free(a.base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fixture_312), cmocka_unit_test(fixture_313), cmocka_unit_test(fixture_314),
        cmocka_unit_test(refusals),    cmocka_unit_test(pydict_311),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
