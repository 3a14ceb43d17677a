/* export_pprof.c - pprof's profile.proto (package perftools.profiles), encoded by hand and
 * gzip-compressed, as `go tool pprof` and the pprof web UI read it.
 *
 * Design: one Function and one Location per distinct code signature (ids 1..n, location i
 * refers to function i); one Sample per tree node with a non-zero self count, its location ids
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

/* Line number at the end of a signature: "file.py.func: 50" or "func (file.c:42)". 0 if none. */
static int64_t signature_line(const char *sig, const char **file, size_t *file_len)
{
    size_t n = strlen(sig);
    size_t end = n;
    *file = NULL;
    *file_len = 0;
    if (end > 0 && sig[end - 1] == ')')
        end--;
    size_t d = end;
    while (d > 0 && sig[d - 1] >= '0' && sig[d - 1] <= '9')
        d--;
    if (d == end || d == 0)
        return 0;
    size_t colon = d;
    while (colon > 0 && sig[colon - 1] == ' ')
        colon--;
    if (colon == 0 || sig[colon - 1] != ':')
        return 0;
    colon--;
    int64_t line = strtoll(sig + d, NULL, 10);
    if (end < n) {
        /* Native form: the file sits between " (" and the colon. */
        const char *open = NULL;
        for (size_t i = colon; i > 0; i--) {
            if (sig[i - 1] == '(') {
                open = sig + i;
                break;
            }
        }
        if (open) {
            *file = open;
            *file_len = (size_t)(sig + colon - open);
        }
    } else {
        /* Python form "/path/app.py.method": the file ends at ".py.". */
        const char *py = NULL;
        for (const char *p = sig; p + 4 <= sig + colon; p++)
            if (memcmp(p, ".py.", 4) == 0)
                py = p;
        if (py) {
            *file = sig;
            *file_len = (size_t)(py + 3 - sig);
        }
    }
    return line;
}

/* ---- rendering ---- */

struct pprof_ctx {
    struct skpx_buf *out;    /* the Profile message */
    struct skpx_buf sample;  /* scratch for one Sample */
    struct skpx_buf packed;  /* scratch for packed repeated fields */
    struct skpx_buf label;   /* scratch for one Label */
    struct export_intern strings;
    struct export_intern sigs;        /* code signature -> function/location id - 1 */
    int64_t period_ns;
    uint32_t label_keys[4];
    uint32_t label_vals[4];
    size_t n_labels;
    bool value_mode;           /* export_meta.value_type set: one sample type, value = self */
    char **owned;              /* file names cut out of signatures (interned, so kept here) */
    size_t n_owned;
    size_t cap_owned;
};

static skp_err own(struct pprof_ctx *c, char *s)
{
    if (c->n_owned == c->cap_owned) {
        size_t cap = c->cap_owned ? c->cap_owned * 2 : 64;
        char **o = skpx_realloc(c->owned, cap * sizeof(*o));
        if (!o)
            return SKP_ENOMEM;
        c->owned = o;
        c->cap_owned = cap;
    }
    c->owned[c->n_owned++] = s;
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
    if (!err)
        err = add_label(&c, "trace_id", m->trace_id);
    if (!err)
        err = add_label(&c, "segment_id", m->segment_id);
    if (!err)
        err = add_label(&c, "endpoint", m->endpoint);
    if (!err)
        err = add_label(&c, "task_id", m->task_id);
    if (err)
        goto out;
    put_uint(&raw, PF_PERIOD, (uint64_t)c.period_ns);
    if (!c.value_mode)
        put_uint(&raw, PF_DEFAULT_SAMPLE_TYPE, 1);
    if (m->time_ms > 0)
        put_uint(&raw, PF_TIME_NANOS, (uint64_t)(m->time_ms * 1000000));
    if (!c.value_mode)
        put_uint(&raw, PF_DURATION_NANOS, (uint64_t)((int64_t)a->n_snapshots * c.period_ns));
    if (m->title && *m->title) {
        uint32_t title;
        err = export_intern_get(&c.strings, m->title, &title);
        if (err)
            goto out;
        put_uint(&raw, PF_COMMENT, title);
    }

    err = export_walk(a, visit, &c);
    if (err)
        goto out;

    /* One function and one location per distinct signature, id = position + 1. */
    for (size_t i = 0; i < c.sigs.n; i++) {
        const char *sig = c.sigs.order[i];
        const char *file;
        size_t file_len;
        int64_t line = signature_line(sig, &file, &file_len);
        uint32_t name_id, file_id = 0;
        char *file_str = NULL;
        err = export_intern_get(&c.strings, sig, &name_id);
        if (!err && file) {
            /* Interned strings are borrowed, so the file name lives in a copy kept (in
             * c.owned) until the table is written. */
            file_str = skpx_strndup(file, file_len);
            if (!file_str) {
                err = SKP_ENOMEM;
            } else {
                uint32_t before = (uint32_t)c.strings.n;
                err = export_intern_get(&c.strings, file_str, &file_id);
                if (err || file_id < before) {
                    skpx_free(file_str); /* not interned, or already present */
                } else {
                    err = own(&c, file_str);
                    if (err)
                        skpx_free(file_str); /* interned but the render fails anyway */
                }
                file_str = NULL;
            }
        }
        if (err)
            goto out;
        put_uint(&c.label, FN_ID, i + 1);
        put_uint(&c.label, FN_NAME, name_id);
        put_uint(&c.label, FN_SYSTEM_NAME, name_id);
        if (file)
            put_uint(&c.label, FN_FILENAME, file_id);
        put_message(&raw, PF_FUNCTION, &c.label);

        put_uint(&c.packed, LN_FUNCTION_ID, i + 1);
        if (line > 0)
            put_uint(&c.packed, LN_LINE, (uint64_t)line);
        put_uint(&c.label, LC_ID, i + 1);
        put_message(&c.label, LC_LINE, &c.packed);
        put_message(&raw, PF_LOCATION, &c.label);
    }
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
    for (size_t i = 0; i < c.n_owned; i++)
        skpx_free(c.owned[i]);
    skpx_free(c.owned);
    export_intern_cleanup(&c.strings);
    export_intern_cleanup(&c.sigs);
    skpx_buf_cleanup(&c.sample);
    skpx_buf_cleanup(&c.packed);
    skpx_buf_cleanup(&c.label);
    skpx_buf_cleanup(&raw);
    return err;
}
