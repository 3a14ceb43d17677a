/* export_pprof.c - pprof's profile.proto (package perftools.profiles), encoded by hand and
 * gzip-compressed, as `go tool pprof` and the pprof web UI read it.
 *
 * Design: one Location per distinct code signature (ids 1..n) with the signature's line, one
 * Function per distinct function and file (name = the function alone, file in `filename`: the
 * signature is split by signature_parts), so pprof's function views merge the lines of one
 * function; one Sample per tree node with a non-zero self count, its location ids
 * leaf first, values [self count, self count x dump period in ns] for the sample types
 * samples/count and wall/nanoseconds (thread dumps see running and waiting threads alike, so
 * the time is wall time); string labels trace_id, segment_id, endpoint and task_id from the
 * export meta. Fields are written as they are produced: protobuf allows any field order, so
 * samples stream out during the walk and the string table, functions and locations follow.
 * Field numbers are those of the public profile.proto. */
#include "server/export_int.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/alloc.h"

/* Profile fields. */
enum {
    PF_SAMPLE_TYPE = 1,
    PF_SAMPLE = 2,
    PF_LOCATION = 4,
    PF_FUNCTION = 5,
    PF_STRING_TABLE = 6,
    PF_TIME_NANOS = 9,
    PF_DURATION_NANOS = 10,
    PF_PERIOD_TYPE = 11,
    PF_PERIOD = 12,
    PF_COMMENT = 13,
    PF_DEFAULT_SAMPLE_TYPE = 14,
};
/* Nested messages. */
enum { VT_TYPE = 1, VT_UNIT = 2 };
enum { SM_LOCATION_ID = 1, SM_VALUE = 2, SM_LABEL = 3 };
enum { LB_KEY = 1, LB_STR = 2 };
enum { LC_ID = 1, LC_LINE = 4 };
enum { LN_FUNCTION_ID = 1, LN_LINE = 2 };
enum { FN_ID = 1, FN_NAME = 2, FN_SYSTEM_NAME = 3, FN_FILENAME = 4 };
enum { WT_VARINT = 0, WT_LEN = 2 };

/* ---- protobuf primitives ---- */

static void put_varint(struct skpx_buf *b, uint64_t v)
{
    uint8_t tmp[10];
    size_t n = 0;
    do {
        tmp[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            tmp[n] |= 0x80;
        n++;
    } while (v);
    skpx_buf_put(b, tmp, n);
}

static void put_tag(struct skpx_buf *b, uint32_t field, uint32_t wire)
{
    put_varint(b, ((uint64_t)field << 3) | wire);
}

static void put_uint(struct skpx_buf *b, uint32_t field, uint64_t v)
{
    put_tag(b, field, WT_VARINT);
    put_varint(b, v);
}

static void put_bytes(struct skpx_buf *b, uint32_t field, const void *p, size_t n)
{
    put_tag(b, field, WT_LEN);
    put_varint(b, n);
    skpx_buf_put(b, p, n);
}

/* Embeds `inner` as field `field` and empties it for reuse. */
static void put_message(struct skpx_buf *b, uint32_t field, struct skpx_buf *inner)
{
    if (inner->err && !b->err)
        b->err = inner->err;
    put_bytes(b, field, inner->data, inner->len);
    skpx_buf_reset(inner);
}

/* ---- code signatures ---- */

/* What a code signature says: the function, and the file and line when it carries them. The
 * pointers point into the signature. */
struct sig_parts {
    const char *name;
    size_t name_len;
    const char *file; /* NULL = no file */
    size_t file_len;
    int64_t line; /* 0 = no line */
};

/* Splits "file.py.func: 50" (Python agents: file "file.py", function "func", which may be a
 * qualified "Class.method"), "func (file.c:42)" (native frames) and "func: 7" (function and line
 * only). Anything else is a function name alone. */
static void signature_parts(const char *sig, struct sig_parts *p)
{
    size_t n = strlen(sig);
    *p = (struct sig_parts){.name = sig, .name_len = n};
    size_t end = n;
    if (end > 0 && sig[end - 1] == ')')
        end--;
    size_t d = end;
    while (d > 0 && sig[d - 1] >= '0' && sig[d - 1] <= '9')
        d--;
    if (d == end || d == 0 || end - d > 9)
        return;
    size_t colon = d;
    while (colon > 0 && sig[colon - 1] == ' ')
        colon--;
    if (colon == 0 || sig[colon - 1] != ':')
        return;
    colon--;
    int64_t line = strtoll(sig + d, NULL, 10);
    if (end < n) {
        /* Native form: the file sits between " (" and the colon, the function before " (". */
        for (size_t i = colon; i > 0; i--) {
            if (sig[i - 1] == '(') {
                size_t name_end = i - 1;
                while (name_end > 0 && sig[name_end - 1] == ' ')
                    name_end--;
                if (name_end == 0 || i == colon)
                    return;
                *p = (struct sig_parts){.name = sig,
                                        .name_len = name_end,
                                        .file = sig + i,
                                        .file_len = colon - i,
                                        .line = line};
                return;
            }
        }
        return;
    }
    p->line = line;
    p->name_len = colon;
    /* Python form "/path/app.py.Class.method": the file ends at the last ".py." */
    const char *py = NULL;
    for (const char *q = sig; q + 4 <= sig + colon; q++)
        if (memcmp(q, ".py.", 4) == 0)
            py = q;
    if (py && py + 4 < sig + colon) {
        p->file = sig;
        p->file_len = (size_t)(py + 3 - sig);
        p->name = py + 4;
        p->name_len = (size_t)(sig + colon - p->name);
    }
}

/* ---- rendering ---- */

struct pprof_ctx {
    struct skpx_buf *out;   /* the Profile message */
    struct skpx_buf sample; /* scratch for one Sample */
    struct skpx_buf packed; /* scratch for packed repeated fields */
    struct skpx_buf label;  /* scratch for one Label */
    struct export_intern strings;
    struct export_intern sigs; /* code signature -> function/location id - 1 */
    int64_t period_ns;
    uint32_t label_keys[4];
    uint32_t label_vals[4];
    size_t n_labels;
    bool value_mode;            /* export_meta.value_type set: one sample type, value = self */
    struct export_intern funcs; /* "name\x1ffile" -> function id - 1 */
};

/* The id (0-based) of the function (name, file) of `sp`, writing its Function message to `raw`
 * the first time. Errors: SKP_ENOMEM. */
static skp_err function_id(struct pprof_ctx *c, struct skpx_buf *raw, const struct sig_parts *sp,
                           uint32_t *out)
{
    /* Key "name\x1ffile" (a signature holding \x1f only merges with a lookalike: harmless). */
    char *key = skpx_malloc(sp->name_len + sp->file_len + 2);
    if (!key)
        return SKP_ENOMEM;
    memcpy(key, sp->name, sp->name_len);
    key[sp->name_len] = '\x1f';
    if (sp->file_len)
        memcpy(key + sp->name_len + 1, sp->file, sp->file_len);
    key[sp->name_len + 1 + sp->file_len] = '\0';
    uint32_t before = (uint32_t)c->funcs.n;
    skp_err err = export_intern_get(&c->funcs, key, out);
    if (err || *out < before) {
        skpx_free(key);
        return err;
    }
    uint32_t name_id, file_id = 0;
    key[sp->name_len] = '\0';
    err = export_intern_get(&c->strings, key, &name_id);
    if (!err && sp->file)
        err = export_intern_get(&c->strings, key + sp->name_len + 1, &file_id);
    skpx_free(key);
    if (err)
        return err;
    put_uint(&c->label, FN_ID, (uint64_t)*out + 1);
    put_uint(&c->label, FN_NAME, name_id);
    put_uint(&c->label, FN_SYSTEM_NAME, name_id);
    if (sp->file)
        put_uint(&c->label, FN_FILENAME, file_id);
    put_message(raw, PF_FUNCTION, &c->label);
    return SKP_OK;
}

static skp_err visit(void *ud, const struct analysis_tree *t,
                     const struct analysis_node *const *path, size_t depth)
{
    struct pprof_ctx *c = ud;
    uint64_t self = export_node_self_count(t, path[depth]);
    skp_err err;

    if (self == 0)
        return SKP_OK;
    skpx_buf_reset(&c->packed);
    for (size_t i = depth + 1; i-- > 0;) {
        uint32_t id;
        err = export_intern_get(&c->sigs, path[i]->code_signature, &id);
        if (err)
            return err;
        put_varint(&c->packed, (uint64_t)id + 1);
    }
    put_message(&c->sample, SM_LOCATION_ID, &c->packed);
    put_varint(&c->packed, self);
    if (!c->value_mode)
        put_varint(&c->packed, (uint64_t)((int64_t)self * c->period_ns));
    put_message(&c->sample, SM_VALUE, &c->packed);
    for (size_t i = 0; i < c->n_labels; i++) {
        put_uint(&c->label, LB_KEY, c->label_keys[i]);
        put_uint(&c->label, LB_STR, c->label_vals[i]);
        put_message(&c->sample, SM_LABEL, &c->label);
    }
    put_message(c->out, PF_SAMPLE, &c->sample);
    return c->out->err;
}

static skp_err put_value_type(struct pprof_ctx *c, uint32_t field, const char *type,
                              const char *unit)
{
    uint32_t t, u;
    skp_err err = export_intern_get(&c->strings, type, &t);
    if (!err)
        err = export_intern_get(&c->strings, unit, &u);
    if (err)
        return err;
    put_uint(&c->packed, VT_TYPE, t);
    put_uint(&c->packed, VT_UNIT, u);
    put_message(c->out, field, &c->packed);
    return SKP_OK;
}

static skp_err add_label(struct pprof_ctx *c, const char *key, const char *value)
{
    if (!value || !*value)
        return SKP_OK;
    skp_err err = export_intern_get(&c->strings, key, &c->label_keys[c->n_labels]);
    if (!err)
        err = export_intern_get(&c->strings, value, &c->label_vals[c->n_labels]);
    if (!err)
        c->n_labels++;
    return err;
}

static skp_err gzip_buf(const struct skpx_buf *in, struct skpx_buf *out)
{
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    /* windowBits 15 + 16 selects the gzip wrapper (what pprof expects). */
    if (deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return SKP_EIO;
    uLong bound = deflateBound(&zs, (uLong)in->len);
    if (bound > EXPORT_MAX_OUTPUT_BYTES) {
        deflateEnd(&zs);
        return SKP_ETOOBIG;
    }
    out->data = skpx_malloc(bound + 1);
    if (!out->data) {
        deflateEnd(&zs);
        return SKP_ENOMEM;
    }
    out->cap = bound + 1;
    zs.next_in = in->data;
    zs.avail_in = (uInt)in->len;
    zs.next_out = out->data;
    zs.avail_out = (uInt)bound;
    int rc = deflate(&zs, Z_FINISH);
    out->len = bound - zs.avail_out;
    out->data[out->len] = '\0';
    deflateEnd(&zs);
    return rc == Z_STREAM_END ? SKP_OK : SKP_EIO;
}

skp_err export_render_pprof(const struct analysis *a, const struct export_meta *m,
                            struct skpx_buf *b)
{
    struct export_part one = {.a = a, .segment_id = m->segment_id, .trace_id = m->trace_id};
    return export_render_pprof_parts(&one, 1, m, b);
}

skp_err export_render_pprof_parts(const struct export_part *parts, size_t n_parts,
                                  const struct export_meta *m, struct skpx_buf *b)
{
    struct skpx_buf raw;
    struct pprof_ctx c;
    uint32_t dummy;
    skp_err err;

    memset(&c, 0, sizeof(c));
    skpx_buf_init(&raw, EXPORT_MAX_OUTPUT_BYTES);
    skpx_buf_init(&c.sample, EXPORT_MAX_OUTPUT_BYTES);
    skpx_buf_init(&c.packed, EXPORT_MAX_OUTPUT_BYTES);
    skpx_buf_init(&c.label, EXPORT_MAX_OUTPUT_BYTES);
    c.out = &raw;
    c.period_ns = (int64_t)export_period_ms(m) * 1000000;
    /* The string table must start with "". */
    err = export_intern_get(&c.strings, "", &dummy);
    c.value_mode = m->value_type != NULL;
    if (c.value_mode) {
        /* Process profiles: the values are already in the sample type's unit. */
        c.period_ns = 1;
        const char *unit = m->value_unit ? m->value_unit : "count";
        if (!err)
            err = put_value_type(&c, PF_SAMPLE_TYPE, m->value_type, unit);
        if (!err)
            err = put_value_type(&c, PF_PERIOD_TYPE, m->value_type, unit);
    } else {
        if (!err)
            err = put_value_type(&c, PF_SAMPLE_TYPE, "samples", "count");
        if (!err)
            err = put_value_type(&c, PF_SAMPLE_TYPE, "wall", "nanoseconds");
        if (!err)
            err = put_value_type(&c, PF_PERIOD_TYPE, "wall", "nanoseconds");
    }
    /* Labels of every sample: the part's trace_id and segment_id, then the common ones. */
    uint64_t n_snapshots = 0;
    for (size_t i = 0; i < n_parts; i++)
        n_snapshots += parts[i].a->n_snapshots;
    if (err)
        goto out;
    put_uint(&raw, PF_PERIOD, (uint64_t)c.period_ns);
    if (!c.value_mode)
        put_uint(&raw, PF_DEFAULT_SAMPLE_TYPE, 1);
    if (m->time_ms > 0)
        put_uint(&raw, PF_TIME_NANOS, (uint64_t)(m->time_ms * 1000000));
    if (!c.value_mode)
        put_uint(&raw, PF_DURATION_NANOS, (uint64_t)((int64_t)n_snapshots * c.period_ns));
    if (m->title && *m->title) {
        uint32_t title;
        err = export_intern_get(&c.strings, m->title, &title);
        if (err)
            goto out;
        put_uint(&raw, PF_COMMENT, title);
    }

    for (size_t i = 0; i < n_parts && !err; i++) {
        c.n_labels = 0;
        err = add_label(&c, "trace_id", parts[i].trace_id);
        if (!err)
            err = add_label(&c, "segment_id", parts[i].segment_id);
        if (!err)
            err = add_label(&c, "endpoint", m->endpoint);
        if (!err)
            err = add_label(&c, "task_id", m->task_id);
        if (!err)
            err = export_walk(parts[i].a, visit, &c);
    }
    if (err)
        goto out;

    /* One location per distinct signature (id = position + 1), with its line; one function per
     * distinct (name, file), so `go tool pprof -functions` merges the lines of a function. */
    for (size_t i = 0; i < c.sigs.n && !err; i++) {
        struct sig_parts sp;
        signature_parts(c.sigs.order[i], &sp);
        uint32_t fn;
        err = function_id(&c, &raw, &sp, &fn);
        if (err)
            break;
        put_uint(&c.packed, LN_FUNCTION_ID, (uint64_t)fn + 1);
        if (sp.line > 0)
            put_uint(&c.packed, LN_LINE, (uint64_t)sp.line);
        put_uint(&c.label, LC_ID, i + 1);
        put_message(&c.label, LC_LINE, &c.packed);
        put_message(&raw, PF_LOCATION, &c.label);
    }
    if (err)
        goto out;
    for (size_t i = 0; i < c.strings.n; i++)
        put_bytes(&raw, PF_STRING_TABLE, c.strings.order[i], strlen(c.strings.order[i]));
    err = raw.err        ? raw.err
          : c.sample.err ? c.sample.err
          : c.packed.err ? c.packed.err
                         : c.label.err;
    if (err)
        goto out;
    err = gzip_buf(&raw, b);
out:
    export_intern_cleanup(&c.funcs);
    export_intern_cleanup(&c.strings);
    export_intern_cleanup(&c.sigs);
    skpx_buf_cleanup(&c.sample);
    skpx_buf_cleanup(&c.packed);
    skpx_buf_cleanup(&c.label);
    skpx_buf_cleanup(&raw);
    return err;
}
