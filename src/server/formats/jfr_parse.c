/* jfr_parse.c - walks a JFR recording chunk by chunk: header, metadata, constant-pool index,
 * then every event in file order; the sample-like ones are decoded through the metadata and
 * handed to the callback with their stack resolved.
 *
 * Design: per chunk, stacks are resolved once per stack-trace key and kept as arrays of
 * interned frame names (root first), so an event costs one field walk and a few hash lookups.
 * Method, class and thread names are cached per chunk too (keys are chunk-local). Interned
 * strings live in blocks owned by the parser until jfr_parser_free, which is what lets the
 * callback keep pointers (the tree builder compares frames by pointer). */
#include "server/formats/jfr.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/alloc.h"
#include "common/grow.h"
#include "server/formats/jfr_int.h"

#define JFR_NAME_MAX 1024 /* longer names are cut (UTF-8 safe enough for display) */
#define INTERN_BLOCK (64u << 10)

struct intern {
    char **blocks;
    size_t n_blocks, cap_blocks;
    char *cur;
    size_t cur_left;
    const char **slots;
    uint64_t *hashes;
    size_t cap, n;
};

struct stack_ref {
    uint32_t off; /* into frames */
    uint32_t n;
    uint64_t id;
};

/* What the parser does with events of a type. */
enum ev_kind {
    EV_NONE = 0,
    EV_EXEC,
    EV_WALL, /* profiler.WallClockSample: weight = samples */
    EV_NATIVE,
    EV_TLAB_IN,
    EV_TLAB_OUT,
    EV_ALLOC_SAMPLE,
    EV_LOCK,
    EV_LIVE,
};

static const struct {
    const char *name;
    enum ev_kind ev;
} g_events[] = {
    {"jdk.ExecutionSample", EV_EXEC},
    {"profiler.WallClockSample", EV_WALL},
    {"jdk.NativeMethodSample", EV_NATIVE},
    {"jdk.ObjectAllocationInNewTLAB", EV_TLAB_IN},
    {"jdk.ObjectAllocationOutsideTLAB", EV_TLAB_OUT},
    {"jdk.ObjectAllocationSample", EV_ALLOC_SAMPLE},
    {"jdk.JavaMonitorEnter", EV_LOCK},
    {"jdk.ThreadPark", EV_LOCK},
    {"profiler.LiveObject", EV_LIVE},
};

struct jfr_parser {
    struct jfr_parse_opts opts;
    jfr_sample_cb cb;
    void *ctx;
    struct intern in;
    uint32_t n_chunks;
    uint64_t next_stack_id;

    /* current chunk */
    const uint8_t *chunk;
    size_t chunk_len;
    bool compressed;
    int64_t ticks_per_second;
    int64_t start_nanos; /* the chunk's start: wall clock (ns since the epoch) ... */
    int64_t start_ticks; /* ... and the same instant in ticks */
    struct jfr_meta meta;
    uint8_t *meta_copy; /* declarations of the last parsed metadata (see metadata_body) */
    size_t meta_copy_len, meta_copy_cap;
    bool meta_valid;
    struct jfr_pools pools;
    uint8_t *ev_of_type;   /* [n_types] enum ev_kind */
    const char **ev_names; /* [n_types] interned event type names (only for EV_*) */
    size_t cap_ev;
    struct skpx_u64map stack_cache;  /* stack key → index in stacks */
    struct skpx_u64map method_cache; /* method key → interned "pkg.Class.method" */
    struct skpx_u64map class_cache;  /* class key → interned "pkg.Class" */
    struct skpx_u64map thread_cache; /* thread key → interned name */
    struct stack_ref *stacks;
    size_t n_stacks, cap_stacks;
    const char **frames;
    size_t n_frames, cap_frames;
    uint32_t string_type; /* java.lang.String type index (for pooled strings) */
    struct jfr_error *err;

    uint8_t *file_buf; /* parse_file's chunk buffer */
    size_t file_cap;
};

/* ---- interning ---- */

static uint64_t hash_str(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

static skp_err intern_grow(struct intern *in)
{
    size_t cap = in->cap ? in->cap * 2 : 1024;
    const char **slots = skpx_calloc(cap, sizeof(*slots));
    uint64_t *hashes = skpx_malloc(cap * sizeof(*hashes));
    if (!slots || !hashes) {
        skpx_free(slots);
        skpx_free(hashes);
        return SKP_ENOMEM;
    }
    for (size_t i = 0; i < in->cap; i++) {
        if (!in->slots[i])
            continue;
        size_t j = in->hashes[i] & (cap - 1);
        while (slots[j])
            j = (j + 1) & (cap - 1);
        slots[j] = in->slots[i];
        hashes[j] = in->hashes[i];
    }
    skpx_free(in->slots);
    skpx_free(in->hashes);
    in->slots = slots;
    in->hashes = hashes;
    in->cap = cap;
    return SKP_OK;
}

/* Interned copy of s[0..n); *out stays valid until the parser is freed. */
static skp_err intern(struct intern *in, const char *s, size_t n, const char **out)
{
    if ((in->n + 1) * 2 > in->cap) {
        skp_err err = intern_grow(in);
        if (err)
            return err;
    }
    uint64_t h = hash_str(s, n);
    size_t j = h & (in->cap - 1);
    for (; in->slots[j]; j = (j + 1) & (in->cap - 1)) {
        if (in->hashes[j] == h && strncmp(in->slots[j], s, n) == 0 && in->slots[j][n] == '\0') {
            *out = in->slots[j];
            return SKP_OK;
        }
    }
    if (n + 1 > in->cur_left) {
        if (skpx_grow(&in->blocks, &in->cap_blocks, in->n_blocks + 1, sizeof(*in->blocks), 16))
            return SKP_ENOMEM;
        size_t sz = n + 1 > INTERN_BLOCK ? n + 1 : INTERN_BLOCK;
        char *blk = skpx_malloc(sz);
        if (!blk)
            return SKP_ENOMEM;
        in->blocks[in->n_blocks++] = blk;
        in->cur = blk;
        in->cur_left = sz;
    }
    char *dst = in->cur;
    memcpy(dst, s, n);
    dst[n] = '\0';
    in->cur += n + 1;
    in->cur_left -= n + 1;
    in->slots[j] = dst;
    in->hashes[j] = h;
    in->n++;
    *out = dst;
    return SKP_OK;
}

static void intern_cleanup(struct intern *in)
{
    for (size_t i = 0; i < in->n_blocks; i++)
        skpx_free(in->blocks[i]);
    SKPX_FREE_ALL(in->blocks, in->slots, in->hashes);
    memset(in, 0, sizeof(*in));
}

/* ---- public bits ---- */

static const char *const g_kind_names[JFR_KIND_COUNT] = {"execution", "native", "alloc", "lock",
                                                         "live"};

const char *jfr_kind_name(enum jfr_kind k)
{
    return (unsigned)k < JFR_KIND_COUNT ? g_kind_names[k] : "unknown";
}

skp_err jfr_kind_parse(const char *s, enum jfr_kind *out)
{
    static const struct {
        const char *name;
        enum jfr_kind kind;
    } names[] = {
        {"execution", JFR_KIND_EXECUTION},
        {"execution_sample", JFR_KIND_EXECUTION},
        {"cpu", JFR_KIND_EXECUTION},
        {"wall", JFR_KIND_EXECUTION},
        {"ctimer", JFR_KIND_EXECUTION},
        {"itimer", JFR_KIND_EXECUTION},
        {"native", JFR_KIND_NATIVE},
        {"native_method_sample", JFR_KIND_NATIVE},
        {"alloc", JFR_KIND_ALLOC},
        {"allocation", JFR_KIND_ALLOC},
        {"object_allocation_in_new_tlab", JFR_KIND_ALLOC},
        {"object_allocation_outside_tlab", JFR_KIND_ALLOC},
        {"object_allocation_sample", JFR_KIND_ALLOC},
        {"lock", JFR_KIND_LOCK},
        {"thread_park", JFR_KIND_LOCK},
        {"java_monitor_enter", JFR_KIND_LOCK},
        {"live", JFR_KIND_LIVE},
        {"live_object", JFR_KIND_LIVE},
    };
    *out = JFR_KIND_EXECUTION;
    if (!s)
        return SKP_EINVAL;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcasecmp(s, names[i].name) == 0) {
            *out = names[i].kind;
            return SKP_OK;
        }
    }
    return SKP_EINVAL;
}

skp_err jfr_parser_new(const struct jfr_parse_opts *opts, jfr_sample_cb cb, void *ctx,
                       struct jfr_parser **out)
{
    *out = NULL;
    struct jfr_parser *p = skpx_calloc(1, sizeof(*p));
    if (!p)
        return SKP_ENOMEM;
    if (opts)
        p->opts = *opts;
    else
        p->opts.with_lines = true;
    if (!p->opts.max_chunk_bytes)
        p->opts.max_chunk_bytes = JFR_DEFAULT_MAX_CHUNK_BYTES;
    p->cb = cb;
    p->ctx = ctx;
    p->next_stack_id = 1;
    *out = p;
    return SKP_OK;
}

uint32_t jfr_parser_chunks(const struct jfr_parser *p)
{
    return p->n_chunks;
}

void jfr_parser_free(struct jfr_parser *p)
{
    if (!p)
        return;
    intern_cleanup(&p->in);
    jfr_meta_cleanup(&p->meta);
    jfr_pools_cleanup(&p->pools);
    skpx_u64map_cleanup(&p->stack_cache);
    skpx_u64map_cleanup(&p->method_cache);
    skpx_u64map_cleanup(&p->class_cache);
    skpx_u64map_cleanup(&p->thread_cache);
    SKPX_FREE_ALL(p->ev_of_type, p->ev_names, p->stacks, p->frames, p->file_buf, p->meta_copy, p);
}

/* ---- resolution ---- */

static bool pool_cursor(struct jfr_parser *p, uint32_t type_idx, int64_t key, struct jfr_cursor *c)
{
    return jfr_pools_find(&p->pools, type_idx, key, p->chunk, p->chunk_len, p->compressed, c);
}

/* Appends the text of a string value (inline or pooled) to buf. */
static void append_str(struct jfr_parser *p, const struct jfr_str *s, char *buf, size_t *len,
                       size_t cap)
{
    if (s->enc != JFR_STR_POOL) {
        jfr_str_append(s, buf, len, cap);
        return;
    }
    struct jfr_cursor c;
    if (p->string_type == UINT32_MAX || !pool_cursor(p, p->string_type, s->pool_key, &c))
        return;
    struct jfr_str inner;
    jfr_str_read(&c, &inner);
    if (!c.bad && inner.enc != JFR_STR_POOL)
        jfr_str_append(&inner, buf, len, cap);
}

/* Appends the text of a field value that names something: a string, or a pooled Symbol /
 * String constant (whose "string" field holds the text). */
static void append_name(struct jfr_parser *p, const struct jfr_val *v, char *buf, size_t *len,
                        size_t cap)
{
    if (!v->has)
        return;
    if (!v->is_pool) {
        if (p->meta.types[v->type_idx].prim == JFR_PRIM_STRING)
            append_str(p, &v->s, buf, len, cap);
        return;
    }
    struct jfr_cursor c;
    if (!pool_cursor(p, v->type_idx, v->i, &c))
        return;
    const struct jfr_type *t = &p->meta.types[v->type_idx];
    if (t->prim == JFR_PRIM_STRING) {
        struct jfr_str s;
        jfr_str_read(&c, &s);
        if (!c.bad)
            append_str(p, &s, buf, len, cap);
        return;
    }
    if (t->prim != JFR_PRIM_STRUCT)
        return;
    struct jfr_val vals[JFR_R_COUNT];
    jfr_struct_read(&p->meta, v->type_idx, &c, 1, vals);
    if (!c.bad && vals[JFR_R_STRING].has && !vals[JFR_R_STRING].is_pool)
        append_str(p, &vals[JFR_R_STRING].s, buf, len, cap);
}

/* JVM array descriptors ("[J", "[[Ljava.lang.String;") → "long[]", "java.lang.String[][]".
 * Rewrites buf in place; returns the new length (unchanged when not a descriptor). */
static size_t array_name(char *buf, size_t len, size_t cap)
{
    static const char codes[] = "BCDFIJSZ";
    static const char *const names[] = {"byte", "char", "double", "float",
                                        "int",  "long", "short",  "boolean"};
    size_t dims = 0;
    while (dims < len && buf[dims] == '[')
        dims++;
    if (dims == len)
        return len;
    char elem[JFR_NAME_MAX];
    size_t elen;
    const char *code = strchr(codes, buf[dims]);
    if (buf[dims] == 'L' && buf[len - 1] == ';' && len - dims >= 3) {
        elen = len - dims - 2;
        memcpy(elem, buf + dims + 1, elen);
    } else if (code && *code && len == dims + 1) {
        elen = strlen(names[code - codes]);
        memcpy(elem, names[code - codes], elen);
    } else {
        return len;
    }
    if (elen + 2 * dims + 1 > cap)
        return len;
    memcpy(buf, elem, elen);
    for (size_t i = 0; i < dims; i++)
        memcpy(buf + elen + 2 * i, "[]", 2);
    len = elen + 2 * dims;
    buf[len] = '\0';
    return len;
}

/* The name a constant-pool key was given before (class, method and thread names are cached by
 * key: events repeat them). */
static bool cached_name(const struct skpx_u64map *cache, int64_t key, const char **out)
{
    uint64_t cached = 0;
    if (!skpx_u64map_get(cache, (uint64_t)key, &cached))
        return false;
    *out = (const char *)(uintptr_t)cached;
    return true;
}

/* Reads the pooled struct constant `v` refers to into vals; false when v is not a pooled
 * struct, its key is not in the pool, or the struct is cut short. */
static bool read_pooled(struct jfr_parser *p, const struct jfr_val *v,
                        struct jfr_val vals[JFR_R_COUNT])
{
    struct jfr_cursor c;
    if (!v->has || !v->is_pool || !pool_cursor(p, v->type_idx, v->i, &c) ||
        p->meta.types[v->type_idx].prim != JFR_PRIM_STRUCT)
        return false;
    jfr_struct_read(&p->meta, v->type_idx, &c, 1, vals);
    return !c.bad;
}

/* Interns the name built in buf and caches it under key. */
static skp_err remember_name(struct jfr_parser *p, struct skpx_u64map *cache, int64_t key,
                             const char *buf, size_t len, const char **out)
{
    skp_err err = intern(&p->in, buf, len, out);
    if (err)
        return err;
    bool ins = false;
    return jfr_map_put_new(cache, (uint64_t)key, (uint64_t)(uintptr_t)*out, &ins);
}

/* Writes the name of pooled constant `v` into buf (JFR_NAME_MAX bytes, "" on entry; *len its
 * length) from the constant's fields `vals` (NULL when it cannot be read), or the fallback name
 * when they give none. */
typedef skp_err (*name_builder)(struct jfr_parser *p, const struct jfr_val *v,
                                const struct jfr_val *vals, char *buf, size_t *len);

/* The name of pooled constant `v`: from `cache`, else built by `build` and remembered there. */
static skp_err pooled_name(struct jfr_parser *p, struct skpx_u64map *cache, const struct jfr_val *v,
                           name_builder build, const char **out)
{
    if (cached_name(cache, v->i, out))
        return SKP_OK;
    char buf[JFR_NAME_MAX];
    size_t len = 0;
    buf[0] = '\0';
    struct jfr_val vals[JFR_R_COUNT];
    skp_err err = build(p, v, read_pooled(p, v, vals) ? vals : NULL, buf, &len);
    if (err)
        return err;
    return remember_name(p, cache, v->i, buf, len, out);
}

/* "pkg.Class" (internal '/' turned into '.'). */
static skp_err build_class(struct jfr_parser *p, const struct jfr_val *v,
                           const struct jfr_val *vals, char *buf, size_t *len)
{
    (void)v;
    if (vals)
        append_name(p, &vals[JFR_R_NAME], buf, len, JFR_NAME_MAX);
    for (size_t i = 0; i < *len; i++)
        if (buf[i] == '/')
            buf[i] = '.';
    if (*len == 0)
        *len = (size_t)snprintf(buf, JFR_NAME_MAX, "[unknown class]");
    else if (buf[0] == '[')
        *len = array_name(buf, *len, JFR_NAME_MAX);
    return SKP_OK;
}

/* "pkg.Class" for a pooled class constant. */
static skp_err class_name(struct jfr_parser *p, const struct jfr_val *v, const char **out)
{
    *out = NULL;
    if (!v->has || !v->is_pool)
        return SKP_OK;
    return pooled_name(p, &p->class_cache, v, build_class, out);
}

/* "pkg.Class.method". */
static skp_err build_method(struct jfr_parser *p, const struct jfr_val *v,
                            const struct jfr_val *vals, char *buf, size_t *len)
{
    (void)v;
    if (vals) {
        const char *cls = NULL;
        skp_err err = class_name(p, &vals[JFR_R_TYPE], &cls);
        if (err)
            return err;
        if (cls) {
            size_t n = strlen(cls);
            if (n + 2 < JFR_NAME_MAX) {
                memcpy(buf, cls, n);
                buf[n] = '.';
                *len = n + 1;
                buf[*len] = '\0';
            }
        }
        append_name(p, &vals[JFR_R_NAME], buf, len, JFR_NAME_MAX);
    }
    if (*len == 0)
        *len = (size_t)snprintf(buf, JFR_NAME_MAX, "[unknown method]");
    return SKP_OK;
}

/* "pkg.Class.method" for a pooled method constant. */
static skp_err method_name(struct jfr_parser *p, const struct jfr_val *v, const char **out)
{
    *out = NULL;
    return pooled_name(p, &p->method_cache, v, build_method, out);
}

/* The Java name, else the OS name, else "[thread id]". */
static skp_err build_thread(struct jfr_parser *p, const struct jfr_val *v,
                            const struct jfr_val *vals, char *buf, size_t *len)
{
    if (vals) {
        append_name(p, &vals[JFR_R_JAVA_NAME], buf, len, JFR_NAME_MAX);
        if (*len == 0)
            append_name(p, &vals[JFR_R_OS_NAME], buf, len, JFR_NAME_MAX);
    }
    if (*len == 0)
        *len = (size_t)snprintf(buf, JFR_NAME_MAX, "[thread %lld]", (long long)v->i);
    return SKP_OK;
}

static skp_err thread_name(struct jfr_parser *p, const struct jfr_val *v, const char **out)
{
    *out = NULL;
    if (!v->has || !v->is_pool || v->i == 0)
        return SKP_OK;
    return pooled_name(p, &p->thread_cache, v, build_thread, out);
}

static skp_err push_frame(struct jfr_parser *p, const char *f)
{
    if (p->n_frames == p->cap_frames) {
        size_t cap = p->cap_frames ? p->cap_frames * 2 : 4096;
        if (cap > UINT32_MAX)
            return SKP_ETOOBIG;
        const char **fr = skpx_realloc(p->frames, cap * sizeof(*fr));
        if (!fr)
            return SKP_ENOMEM;
        p->frames = fr;
        p->cap_frames = cap;
    }
    p->frames[p->n_frames++] = f;
    return SKP_OK;
}

/* One frame (a StackFrame struct at c, or a pooled one) → interned name. */
static skp_err frame_name(struct jfr_parser *p, uint32_t frame_type, struct jfr_cursor *c,
                          bool pooled, const char **out)
{
    *out = NULL;
    struct jfr_cursor fc;
    struct jfr_cursor *rc = c;
    if (pooled) {
        int64_t key = jfr_long(c);
        if (c->bad)
            return SKP_OK;
        if (!pool_cursor(p, frame_type, key, &fc))
            return intern(&p->in, "[unknown frame]", 15, out);
        rc = &fc;
    }
    if (p->meta.types[frame_type].prim != JFR_PRIM_STRUCT) {
        c->bad = true;
        return SKP_OK;
    }
    struct jfr_val vals[JFR_R_COUNT];
    jfr_struct_read(&p->meta, frame_type, rc, 2, vals);
    if (rc->bad) {
        c->bad = true;
        return SKP_OK;
    }
    const char *m = NULL;
    skp_err err = method_name(p, &vals[JFR_R_METHOD], &m);
    if (err)
        return err;
    int64_t line = vals[JFR_R_LINE_NUMBER].has ? vals[JFR_R_LINE_NUMBER].i : 0;
    if (!p->opts.with_lines || line <= 0) {
        *out = m;
        return SKP_OK;
    }
    char buf[JFR_NAME_MAX + 24];
    int n = snprintf(buf, sizeof(buf), "%s:%lld", m, (long long)line);
    if (n < 0 || (size_t)n >= sizeof(buf))
        n = (int)strlen(buf);
    return intern(&p->in, buf, (size_t)n, out);
}

/* Resolves (and caches) the stack trace `v` refers to. *out NULL when the event has none. */
static skp_err stack_of(struct jfr_parser *p, const struct jfr_val *v, const struct stack_ref **out)
{
    *out = NULL;
    if (!v->has || !v->is_pool || v->i == 0)
        return SKP_OK;
    uint64_t idx = 0;
    if (skpx_u64map_get(&p->stack_cache, (uint64_t)v->i, &idx)) {
        *out = &p->stacks[idx];
        return SKP_OK;
    }
    struct jfr_cursor c;
    if (!pool_cursor(p, v->type_idx, v->i, &c) ||
        p->meta.types[v->type_idx].prim != JFR_PRIM_STRUCT)
        return SKP_OK; /* a dangling reference: the event counts without a stack */
    struct jfr_val vals[JFR_R_COUNT];
    jfr_struct_read(&p->meta, v->type_idx, &c, 1, vals);
    if (c.bad)
        return jfr_fail(p->err, (uint64_t)(c.p - p->chunk), "stack trace %lld is malformed",
                        (long long)v->i);
    const struct jfr_val *fr = &vals[JFR_R_FRAMES];
    uint32_t n = fr->has && fr->array_pos ? fr->array_n : 0;
    if (skpx_grow(&p->stacks, &p->cap_stacks, p->n_stacks + 1, sizeof(*p->stacks), 1024))
        return SKP_ENOMEM;
    size_t first = p->n_frames;
    struct jfr_cursor ac = {.base = p->chunk,
                            .p = fr->array_pos,
                            .end = p->chunk + p->chunk_len,
                            .compressed = p->compressed};
    /* JFR lists frames leaf first; keep the root-most JFR_MAX_STACK_FRAMES. */
    for (uint32_t i = 0; i < n; i++) {
        const char *name = NULL;
        skp_err err = frame_name(p, fr->type_idx, &ac, fr->is_pool, &name);
        if (err)
            return err;
        if (ac.bad)
            return jfr_fail(p->err, (uint64_t)(ac.p - p->chunk),
                            "stack trace %lld: frame %u is malformed", (long long)v->i, i);
        err = push_frame(p, name);
        if (err)
            return err;
    }
    size_t cnt = p->n_frames - first;
    for (size_t i = 0; i < cnt / 2; i++) {
        const char *t = p->frames[first + i];
        p->frames[first + i] = p->frames[first + cnt - 1 - i];
        p->frames[first + cnt - 1 - i] = t;
    }
    if (cnt > JFR_MAX_STACK_FRAMES) {
        p->n_frames = first + JFR_MAX_STACK_FRAMES;
        cnt = JFR_MAX_STACK_FRAMES;
    }
    struct stack_ref *s = &p->stacks[p->n_stacks];
    s->off = (uint32_t)first;
    s->n = (uint32_t)cnt;
    s->id = p->next_stack_id++;
    bool ins = false;
    skp_err err = jfr_map_put_new(&p->stack_cache, (uint64_t)v->i, p->n_stacks, &ins);
    if (err)
        return err;
    *out = s;
    p->n_stacks++;
    return SKP_OK;
}

/* ---- events ---- */

static uint64_t ticks_to_ns(const struct jfr_parser *p, int64_t ticks)
{
    if (ticks <= 0)
        return 0;
    unsigned __int128 ns = (unsigned __int128)(uint64_t)ticks * 1000000000u;
    ns /= (uint64_t)p->ticks_per_second;
    return ns > UINT64_MAX ? UINT64_MAX : (uint64_t)ns;
}

/* An event's startTime (ticks) as ms since the epoch, through the chunk header's pair of start
 * times; 0 when the event has none or the chunk's times are not usable. */
static int64_t event_time_ms(const struct jfr_parser *p, const struct jfr_val *v)
{
    if (!v->has || v->is_pool || p->start_nanos <= 0)
        return 0;
    __int128 dt = (__int128)v->i - p->start_ticks;
    __int128 ns = (__int128)p->start_nanos + dt * 1000000000 / p->ticks_per_second;
    if (ns <= 0 || ns / 1000000 > INT64_MAX)
        return 0;
    return (int64_t)(ns / 1000000);
}

static uint64_t nonneg(const struct jfr_val *v)
{
    return v->has && !v->is_pool && v->i > 0 ? (uint64_t)v->i : 0;
}

static skp_err on_event(struct jfr_parser *p, uint32_t ti, struct jfr_cursor *c, uint64_t at)
{
    struct jfr_val vals[JFR_R_COUNT];
    jfr_struct_read(&p->meta, ti, c, 0, vals);
    if (c->bad)
        return jfr_fail(p->err, at, "%s event is truncated or malformed", p->meta.types[ti].name);
    struct jfr_sample s = {.event_type = p->ev_names[ti],
                           .time_ms = event_time_ms(p, &vals[JFR_R_START_TIME])};
    switch ((enum ev_kind)p->ev_of_type[ti]) {
    case EV_EXEC:
        s.kind = JFR_KIND_EXECUTION;
        s.weight = 1;
        break;
    case EV_WALL:
        s.kind = JFR_KIND_EXECUTION;
        s.weight = vals[JFR_R_SAMPLES].has ? nonneg(&vals[JFR_R_SAMPLES]) : 1;
        break;
    case EV_NATIVE:
        s.kind = JFR_KIND_NATIVE;
        s.weight = 1;
        break;
    case EV_TLAB_IN:
        /* One event per new TLAB: the TLAB's size is what the thread allocated since the
         * previous one (JMC and async-profiler weigh it so); fall back to the object. */
        s.kind = JFR_KIND_ALLOC;
        s.is_tlab = true;
        s.weight = nonneg(&vals[JFR_R_TLAB_SIZE]);
        if (!s.weight)
            s.weight = nonneg(&vals[JFR_R_ALLOCATION_SIZE]);
        break;
    case EV_TLAB_OUT:
        s.kind = JFR_KIND_ALLOC;
        s.is_tlab = true;
        s.weight = nonneg(&vals[JFR_R_ALLOCATION_SIZE]);
        break;
    case EV_ALLOC_SAMPLE:
        s.kind = JFR_KIND_ALLOC;
        s.weight = nonneg(&vals[JFR_R_WEIGHT]);
        break;
    case EV_LOCK:
        s.kind = JFR_KIND_LOCK;
        s.weight = ticks_to_ns(p, vals[JFR_R_DURATION].has ? vals[JFR_R_DURATION].i : 0);
        break;
    case EV_LIVE:
        s.kind = JFR_KIND_LIVE;
        s.weight = nonneg(&vals[JFR_R_ALLOCATION_SIZE]);
        break;
    case EV_NONE:
        return SKP_OK;
    }
    const struct stack_ref *st = NULL;
    skp_err err = stack_of(p, &vals[JFR_R_STACK_TRACE], &st);
    if (err)
        return err;
    if (st) {
        s.frames = p->frames + st->off;
        s.n_frames = st->n;
        s.stack_id = st->id;
    }
    const struct jfr_val *th =
        vals[JFR_R_SAMPLED_THREAD].has ? &vals[JFR_R_SAMPLED_THREAD] : &vals[JFR_R_EVENT_THREAD];
    err = thread_name(p, th, &s.thread);
    if (err)
        return err;
    if (s.kind == JFR_KIND_ALLOC || s.kind == JFR_KIND_LIVE) {
        err = class_name(p, &vals[JFR_R_OBJECT_CLASS], &s.object_class);
        if (err)
            return err;
    }
    return p->cb ? p->cb(p->ctx, &s) : SKP_OK;
}

static skp_err setup_types(struct jfr_parser *p)
{
    uint32_t n = p->meta.n_types;
    if (n > p->cap_ev) {
        uint8_t *ev = skpx_realloc(p->ev_of_type, n);
        if (!ev)
            return SKP_ENOMEM;
        p->ev_of_type = ev;
        const char **names = skpx_realloc(p->ev_names, n * sizeof(*names));
        if (!names)
            return SKP_ENOMEM;
        p->ev_names = names;
        p->cap_ev = n;
    }
    memset(p->ev_of_type, 0, n);
    p->string_type = UINT32_MAX;
    for (uint32_t i = 0; i < n; i++) {
        const struct jfr_type *t = &p->meta.types[i];
        p->ev_names[i] = NULL;
        if (t->prim == JFR_PRIM_STRING && p->string_type == UINT32_MAX)
            p->string_type = i;
        if (t->prim != JFR_PRIM_STRUCT)
            continue;
        for (size_t k = 0; k < sizeof(g_events) / sizeof(g_events[0]); k++) {
            if (strcmp(t->name, g_events[k].name) == 0) {
                p->ev_of_type[i] = (uint8_t)g_events[k].ev;
                skp_err err = intern(&p->in, t->name, strlen(t->name), &p->ev_names[i]);
                if (err)
                    return err;
            }
        }
    }
    return SKP_OK;
}

/* The metadata event's declarations (after size, type, start, duration and metadata id):
 * JDK chunks of one recording repeat the same bytes, so an equal body reuses the parsed
 * metadata instead of parsing it again (most of a small chunk's cost). */
static bool metadata_body(const struct jfr_cursor *mc, const uint8_t **body, size_t *len)
{
    struct jfr_cursor c = *mc;
    const uint8_t *start = c.p;
    int64_t size = jfr_int(&c, 4);
    for (int i = 0; i < 4; i++)
        (void)jfr_long(&c);
    if (c.bad || size <= 0 || (uint64_t)size > (uint64_t)(mc->end - start) || c.p > start + size)
        return false;
    *body = c.p;
    *len = (size_t)(start + size - c.p);
    return true;
}

static skp_err remember_metadata(struct jfr_parser *p, const uint8_t *body, size_t len)
{
    if (skpx_grow(&p->meta_copy, &p->meta_copy_cap, len, 1, len))
        return SKP_ENOMEM;
    memcpy(p->meta_copy, body, len);
    p->meta_copy_len = len;
    p->meta_valid = true;
    return SKP_OK;
}

/* Parses one complete chunk (buf[0..len) is exactly the chunk). */
static skp_err parse_chunk(struct jfr_parser *p, const uint8_t *buf, size_t len)
{
    struct jfr_cursor h = {.base = buf, .p = buf, .end = buf + len};
    if (len < JFR_HEADER_BYTES || memcmp(buf, "FLR\0", 4) != 0)
        return jfr_fail(p->err, 0, "not a JFR chunk (no FLR magic)");
    h.p += 4;
    int64_t major = jfr_be(&h, 2), minor = jfr_be(&h, 2);
    if (major != 2)
        return jfr_fail(p->err, 4, "unsupported JFR version %lld.%lld (2.x is supported)",
                        (long long)major, (long long)minor);
    (void)jfr_be(&h, 8); /* size, checked by the caller */
    int64_t cp_off = jfr_be(&h, 8);
    int64_t meta_off = jfr_be(&h, 8);
    p->start_nanos = jfr_be(&h, 8);
    (void)jfr_be(&h, 8); /* duration nanos */
    p->start_ticks = jfr_be(&h, 8);
    p->ticks_per_second = jfr_be(&h, 8);
    int64_t flags = jfr_be(&h, 4);
    if (p->ticks_per_second <= 0)
        return jfr_fail(p->err, 56, "chunk header: ticks per second is %lld",
                        (long long)p->ticks_per_second);
    if (meta_off < (int64_t)JFR_HEADER_BYTES || (uint64_t)meta_off >= len)
        return jfr_fail(p->err, 24, "chunk header: metadata offset %lld is outside the chunk",
                        (long long)meta_off);
    if (cp_off < (int64_t)JFR_HEADER_BYTES || (uint64_t)cp_off >= len)
        return jfr_fail(p->err, 16, "chunk header: constant pool offset %lld is outside the chunk",
                        (long long)cp_off);
    p->chunk = buf;
    p->chunk_len = len;
    p->compressed = (flags & JFR_FLAG_COMPRESSED_INTS) != 0;
    skpx_u64map_clear(&p->stack_cache);
    skpx_u64map_clear(&p->method_cache);
    skpx_u64map_clear(&p->class_cache);
    skpx_u64map_clear(&p->thread_cache);
    p->n_stacks = 0;
    p->n_frames = 0;

    struct jfr_cursor mc = {
        .base = buf, .p = buf + meta_off, .end = buf + len, .compressed = p->compressed};
    const uint8_t *body = NULL;
    size_t body_len = 0;
    if (!metadata_body(&mc, &body, &body_len) || !p->meta_valid || body_len != p->meta_copy_len ||
        memcmp(body, p->meta_copy, body_len) != 0) {
        /* A new or changed declaration set: parse it and remember its bytes. */
        p->meta_valid = false;
        skp_err err = jfr_meta_parse(&p->meta, &mc, p->err);
        if (!err)
            err = setup_types(p);
        if (!err && body)
            err = remember_metadata(p, body, body_len);
        if (err)
            return err;
    }
    skp_err err = SKP_OK;
    err = jfr_pools_index(&p->pools, &p->meta, buf, len, p->compressed, (uint64_t)cp_off, p->err);
    if (err)
        return err;

    uint64_t pos = JFR_HEADER_BYTES;
    while (pos < len) {
        struct jfr_cursor c = {
            .base = buf, .p = buf + pos, .end = buf + len, .compressed = p->compressed};
        int64_t size = jfr_int(&c, 4);
        int64_t type = jfr_long(&c);
        if (c.bad || size <= 0 || (uint64_t)size > len - pos)
            return jfr_fail(p->err, pos,
                            "event size %lld does not fit the chunk (%llu bytes "
                            "left)",
                            (long long)size, (unsigned long long)(len - pos));
        if (type != 0 && type != 1) {
            uint32_t ti = jfr_meta_find_id(&p->meta, (uint64_t)type);
            if (ti == UINT32_MAX)
                return jfr_fail(p->err, pos, "event of undeclared type id %lld", (long long)type);
            if (p->ev_of_type[ti]) {
                c.end = buf + pos + size;
                err = on_event(p, ti, &c, pos);
                if (err)
                    return err;
            }
        }
        pos += (uint64_t)size;
    }
    return SKP_OK;
}

/* Reads the chunk size from a header (at least JFR_HEADER_BYTES available). */
static skp_err chunk_size(struct jfr_parser *p, const uint8_t *h, uint64_t avail, uint64_t *size)
{
    if (memcmp(h, "FLR\0", 4) != 0)
        return jfr_fail(p->err, 0, "not a JFR chunk (no FLR magic)");
    struct jfr_cursor c = {.base = h, .p = h + 8, .end = h + 16};
    int64_t s = jfr_be(&c, 8);
    if (s == 0)
        return jfr_fail(p->err, 8, "chunk is unfinished (size 0: the JVM was still writing)");
    if (s < (int64_t)JFR_HEADER_BYTES)
        return jfr_fail(p->err, 8, "chunk size %lld is smaller than its header", (long long)s);
    if ((uint64_t)s > p->opts.max_chunk_bytes) {
        jfr_fail(p->err, 8, "chunk size %lld exceeds the %zu-byte limit", (long long)s,
                 p->opts.max_chunk_bytes);
        return SKP_ETOOBIG;
    }
    if (avail != UINT64_MAX && (uint64_t)s > avail)
        return jfr_fail(p->err, 8, "truncated: the chunk header says %lld bytes, %llu remain",
                        (long long)s, (unsigned long long)avail);
    *size = (uint64_t)s;
    return SKP_OK;
}

/* Prefixes the message with the chunk and makes the offset file-relative. */
static skp_err locate(struct jfr_parser *p, skp_err err, uint64_t chunk_start)
{
    if (err && p->err && (err == SKP_EINVAL || err == SKP_ETOOBIG) && p->err->msg[0]) {
        char pre[64];
        p->err->offset += chunk_start;
        p->err->chunk = p->n_chunks;
        int n = snprintf(pre, sizeof(pre), "chunk %u at offset %llu: ", p->n_chunks,
                         (unsigned long long)p->err->offset);
        size_t cap = sizeof(p->err->msg);
        size_t plen = n > 0 && (size_t)n < sizeof(pre) ? (size_t)n : 0;
        size_t mlen = strnlen(p->err->msg, cap - 1);
        if (plen + mlen > cap - 1)
            mlen = cap - 1 - plen;
        memmove(p->err->msg + plen, p->err->msg, mlen);
        memcpy(p->err->msg, pre, plen);
        p->err->msg[plen + mlen] = '\0';
    }
    return err;
}

static void err_reset(struct jfr_parser *p, struct jfr_error *err)
{
    p->err = err;
    if (err)
        memset(err, 0, sizeof(*err));
}

skp_err jfr_parser_parse_mem(struct jfr_parser *p, const uint8_t *buf, size_t len,
                             struct jfr_error *err)
{
    err_reset(p, err);
    if (len == 0)
        return locate(p, jfr_fail(err, 0, "empty recording"), 0);
    uint64_t pos = 0;
    while (pos < len) {
        if (len - pos < JFR_HEADER_BYTES)
            return locate(p,
                          jfr_fail(err, 0,
                                   "truncated: %zu bytes left, less than a chunk "
                                   "header",
                                   (size_t)(len - pos)),
                          pos);
        uint64_t size = 0;
        skp_err e = chunk_size(p, buf + pos, len - pos, &size);
        if (!e)
            e = parse_chunk(p, buf + pos, (size_t)size);
        if (e)
            return locate(p, e, pos);
        p->n_chunks++;
        pos += size;
    }
    return SKP_OK;
}

skp_err jfr_parser_parse_file(struct jfr_parser *p, FILE *f, struct jfr_error *err)
{
    err_reset(p, err);
    uint64_t pos = 0;
    for (;;) {
        uint8_t h[JFR_HEADER_BYTES];
        size_t got = fread(h, 1, sizeof(h), f);
        if (got == 0 && pos > 0 && feof(f))
            return SKP_OK;
        if (ferror(f))
            return SKP_EIO;
        if (got < sizeof(h))
            return locate(p,
                          got == 0 ? jfr_fail(err, 0, "empty recording")
                                   : jfr_fail(err, 0,
                                              "truncated: %zu bytes left, less "
                                              "than a chunk header",
                                              got),
                          pos);
        uint64_t size = 0;
        skp_err e = chunk_size(p, h, UINT64_MAX, &size);
        if (e)
            return locate(p, e, pos);
        if (size > p->file_cap) {
            uint8_t *b = skpx_realloc(p->file_buf, size);
            if (!b)
                return SKP_ENOMEM;
            p->file_buf = b;
            p->file_cap = size;
        }
        memcpy(p->file_buf, h, sizeof(h));
        size_t rest = fread(p->file_buf + sizeof(h), 1, size - sizeof(h), f);
        if (ferror(f))
            return SKP_EIO;
        if (rest < size - sizeof(h))
            return locate(p,
                          jfr_fail(err, 8,
                                   "truncated: the chunk header says %llu bytes, "
                                   "%zu remain",
                                   (unsigned long long)size, rest + sizeof(h)),
                          pos);
        e = parse_chunk(p, p->file_buf, (size_t)size);
        if (e)
            return locate(p, e, pos);
        p->n_chunks++;
        pos += size;
    }
}
