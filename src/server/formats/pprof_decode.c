/* pprof_decode.c - bounded pprof decoder (see pprof_decode.h).
 *
 * Design: the (inflated) buffer is read twice. Pass 1 walks every message, checks lengths and
 * wire types and counts each table and each repeated field, so pass 2 can fill exactly sized
 * arrays; string indices and ids are resolved after pass 2, when every table is known
 * (protobuf allows any field order: the string table usually comes last). Ids map to indices
 * directly when they are dense and 1-based (what Go writes), else through a sorted id table. */
#include "server/formats/pprof_decode.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/alloc.h"
#include "common/varint.h"
#include "server/formats/pb_wire.h"

/* profile.proto field numbers. */
enum {
    P_SAMPLE_TYPE = 1,
    P_SAMPLE = 2,
    P_MAPPING = 3,
    P_LOCATION = 4,
    P_FUNCTION = 5,
    P_STRING = 6,
    P_TIME = 9,
    P_DURATION = 10,
    P_PERIOD_TYPE = 11,
    P_PERIOD = 12,
    P_DEFAULT_TYPE = 14,
};

struct rd {
    const uint8_t *p, *end, *base;
};

struct dec {
    struct pprof_profile *p;
    char *err; /* PPROF_ERR_MAX or NULL */
    const uint8_t *base;
    /* pass-1 counts */
    size_t n_types, n_samples, n_locs_ids, n_values, n_labels, n_maps, n_locations, n_lines,
        n_funcs, n_strings;
    /* pass-2 fill positions */
    size_t i_types, i_samples, i_locs_ids, i_values, i_labels, i_maps, i_locations, i_lines,
        i_funcs, i_strings;
    uint64_t *raw_loc_ids;    /* sample location ids before resolution */
    uint64_t *raw_line_funcs; /* line function ids before resolution */
    uint64_t *raw_loc_maps;   /* location mapping ids before resolution */
    size_t *sample_nvalues;   /* values per sample, checked against the sample types */
    int64_t (*raw_label)[4];  /* key, str, num, num_unit string indices */
    int64_t (*raw_type)[2];
    int64_t (*raw_func)[3]; /* name, system_name, filename */
    int64_t (*raw_map)[2];  /* filename, build_id */
    int64_t raw_period_type[2];
    int64_t raw_default;
    uint32_t *str_off; /* string slices in the buffer */
    uint32_t *str_len;
};

static skp_err fail(struct dec *d, const struct rd *r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static skp_err fail(struct dec *d, const struct rd *r, const char *fmt, ...)
{
    if (d->err) {
        char msg[100];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (r)
            snprintf(d->err, PPROF_ERR_MAX, "corrupt pprof at byte %zu: %.100s",
                     (size_t)(r->p - d->base), msg);
        else
            snprintf(d->err, PPROF_ERR_MAX, "corrupt pprof: %.100s", msg);
    }
    return SKP_EINVAL;
}

/* The varint at the cursor (common/varint.h); *v is left as it was when it is malformed. */
static bool rd_varint(struct rd *r, uint64_t *v)
{
    if (r->p < r->end && *r->p < 0x80) { /* one byte: most keys, lengths and small ids */
        *v = *r->p++;
        return true;
    }
    uint64_t x;
    if (!skpx_varint_read(&r->p, r->end, &x))
        return false;
    *v = x;
    return true;
}

/* Reads a key; false at a malformed key. */
static bool rd_key(struct rd *r, uint32_t *field, int *wt)
{
    uint64_t k;
    if (!rd_varint(r, &k) || (k >> 3) == 0 || (k >> 3) > UINT32_MAX)
        return false;
    *field = (uint32_t)(k >> 3);
    *wt = (int)(k & 7);
    return true;
}

static bool rd_sub(struct rd *r, struct rd *sub)
{
    uint64_t n;
    if (!skpx_varint_read_len(&r->p, r->end, &n))
        return false;
    sub->base = r->base;
    sub->p = r->p;
    sub->end = r->p + n;
    r->p += n;
    return true;
}

/* Steps over a field's value (groups, 3 and 4, and 6, 7 are not in profile.proto). */
static bool rd_skip(struct rd *r, int wt)
{
    uint64_t v;
    const uint8_t *payload, *payload_end;
    return pb_wire_value(&r->p, r->end, wt, &v, &payload, &payload_end);
}

/* One value of a repeated varint field: stored at out[*i] (none past cap) unless out is NULL
 * (pass 1 only counts), and counted in *i. */
static bool put_scalar(uint64_t v, uint64_t *out, size_t cap, size_t *i)
{
    if (out) {
        if (*i >= cap)
            return false;
        out[*i] = v;
    }
    (*i)++;
    return true;
}

/* Reads a packed or unpacked repeated varint field into out[*i...] (bounded by cap), or with out
 * NULL counts its values in *i; false if malformed. */
static bool read_scalars(struct rd *r, int wt, uint64_t *out, size_t cap, size_t *i)
{
    uint64_t v;
    if (wt == WT_VARINT)
        return rd_varint(r, &v) && put_scalar(v, out, cap, i);
    struct rd sub;
    if (wt != WT_LEN || !rd_sub(r, &sub))
        return false;
    while (sub.p < sub.end) {
        if (!rd_varint(&sub, &v) || !put_scalar(v, out, cap, i))
            return false;
    }
    return true;
}

/* Walks a sub-message, calling `f` per field. f returns false on a malformed field. */
typedef bool (*field_fn)(struct dec *d, struct rd *r, uint32_t field, int wt, void *ud);

static skp_err walk(struct dec *d, struct rd *r, field_fn f, void *ud, const char *what)
{
    while (r->p < r->end) {
        uint32_t field;
        int wt;
        const uint8_t *at = r->p;
        if (!rd_key(r, &field, &wt))
            return fail(d, r, "bad field key in %s", what);
        bool ok = f(d, r, field, wt, ud);
        if (!ok) {
            struct rd here = {at, r->end, r->base};
            return fail(d, &here, "bad field %u (wire type %d) in %s", field, wt, what);
        }
    }
    return SKP_OK;
}

static bool varint_field(struct rd *r, int wt, uint64_t *v)
{
    return wt == WT_VARINT && rd_varint(r, v);
}

/* A varint field kept as int64 (ids and indices kept raw until resolution, line numbers);
 * *out is left as it was when the field is bad. */
static bool int64_field(struct rd *r, int wt, int64_t *out)
{
    uint64_t v;
    if (!varint_field(r, wt, &v))
        return false;
    *out = (int64_t)v;
    return true;
}

/* ---------------------------------------------------------------- pass 1 (count) */

struct sample_count {
    size_t n_locs, n_values, n_labels;
};

static bool count_sample_field(struct dec *d, struct rd *r, uint32_t field, int wt, void *ud)
{
    (void)d;
    struct sample_count *c = ud;
    if (field == 1)
        return read_scalars(r, wt, NULL, 0, &c->n_locs);
    if (field == 2)
        return read_scalars(r, wt, NULL, 0, &c->n_values);
    if (field == 3) {
        c->n_labels++;
        return wt == WT_LEN && rd_skip(r, wt);
    }
    return rd_skip(r, wt);
}

static bool count_location_field(struct dec *d, struct rd *r, uint32_t field, int wt, void *ud)
{
    (void)ud;
    if (field == 4) {
        d->n_lines++;
        return wt == WT_LEN && rd_skip(r, wt);
    }
    return rd_skip(r, wt);
}

static bool skip_field(struct dec *d, struct rd *r, uint32_t field, int wt, void *ud)
{
    (void)d;
    (void)field;
    (void)ud;
    return rd_skip(r, wt);
}

/* The name of a top-level field that holds a message (or a string), NULL for the others. */
static const char *msg_name(uint32_t field)
{
    switch (field) {
    case P_SAMPLE_TYPE:
        return "sample_type";
    case P_SAMPLE:
        return "sample";
    case P_MAPPING:
        return "mapping";
    case P_LOCATION:
        return "location";
    case P_FUNCTION:
        return "function";
    case P_STRING:
        return "string";
    case P_PERIOD_TYPE:
        return "period_type";
    default:
        return NULL;
    }
}

static skp_err pass_count(struct dec *d, const uint8_t *buf, size_t len)
{
    struct rd r = {buf, buf + len, buf};
    while (r.p < r.end) {
        uint32_t field;
        int wt;
        if (!rd_key(&r, &field, &wt))
            return fail(d, &r, "bad field key");
        const uint8_t *at = r.p;
        const char *what = msg_name(field);
        struct rd sub;
        skp_err err = SKP_OK;
        if (what) {
            if (wt != WT_LEN || !rd_sub(&r, &sub)) {
                struct rd here = {at, r.end, r.base};
                return fail(d, &here, "field %u must be length-delimited", field);
            }
        } else if (!rd_skip(&r, wt)) {
            return fail(d, &r, "bad field %u", field);
        }
        switch (field) {
        case P_SAMPLE: {
            struct sample_count c = {0};
            err = walk(d, &sub, count_sample_field, &c, what);
            d->n_samples++;
            d->n_locs_ids += c.n_locs;
            d->n_values += c.n_values;
            d->n_labels += c.n_labels;
            break;
        }
        case P_LOCATION:
            d->n_locations++;
            err = walk(d, &sub, count_location_field, NULL, what);
            break;
        case P_STRING:
            d->n_strings++;
            break;
        case P_SAMPLE_TYPE:
        case P_MAPPING:
        case P_FUNCTION:
        case P_PERIOD_TYPE:
            d->n_types += field == P_SAMPLE_TYPE;
            d->n_maps += field == P_MAPPING;
            d->n_funcs += field == P_FUNCTION;
            err = walk(d, &sub, skip_field, NULL, what);
            break;
        default:
            break;
        }
        if (err)
            return err;
    }
    if (d->n_locations > UINT32_MAX - 1 || d->n_lines > UINT32_MAX || d->n_funcs > UINT32_MAX ||
        d->n_maps > UINT32_MAX - 1 || d->n_locs_ids > UINT32_MAX || d->n_labels > UINT32_MAX ||
        d->n_strings > UINT32_MAX)
        return fail(d, NULL, "too many entries");
    return SKP_OK;
}

/* ---------------------------------------------------------------- pass 2 (fill) */

static bool fill_value_type(struct dec *d, struct rd *r, uint32_t field, int wt, void *ud)
{
    (void)d;
    int64_t *vt = ud;
    if (field == 1 || field == 2)
        return int64_field(r, wt, &vt[field - 1]);
    return rd_skip(r, wt);
}

static bool fill_label(struct dec *d, struct rd *r, uint32_t field, int wt, void *ud)
{
    (void)d;
    int64_t *l = ud;
    if (field >= 1 && field <= 4)
        return int64_field(r, wt, &l[field - 1]);
    return rd_skip(r, wt);
}

static bool fill_sample_field(struct dec *d, struct rd *r, uint32_t field, int wt, void *ud)
{
    struct pprof_sample *s = ud;
    if (field == 1) {
        size_t before = d->i_locs_ids;
        if (!read_scalars(r, wt, d->raw_loc_ids, d->n_locs_ids, &d->i_locs_ids))
            return false;
        s->n_locs += (uint32_t)(d->i_locs_ids - before);
        return true;
    }
    if (field == 2) {
        size_t before = d->i_values;
        if (!read_scalars(r, wt, (uint64_t *)d->p->values, d->n_values, &d->i_values))
            return false;
        d->sample_nvalues[d->i_samples] += d->i_values - before;
        return true;
    }
    if (field == 3) {
        struct rd sub;
        if (wt != WT_LEN || !rd_sub(r, &sub) || d->i_labels >= d->n_labels)
            return false;
        int64_t *l = d->raw_label[d->i_labels];
        memset(l, 0, sizeof(d->raw_label[0]));
        if (walk(d, &sub, fill_label, l, "label"))
            return false;
        d->i_labels++;
        s->n_labels++;
        return true;
    }
    return rd_skip(r, wt);
}

static bool fill_line(struct dec *d, struct rd *r, uint32_t field, int wt, void *ud)
{
    (void)d;
    size_t i = *(size_t *)ud;
    if (field == 1)
        return varint_field(r, wt, &d->raw_line_funcs[i]);
    if (field == 2)
        return int64_field(r, wt, &d->p->lines[i].line);
    return rd_skip(r, wt);
}

static bool fill_location_field(struct dec *d, struct rd *r, uint32_t field, int wt, void *ud)
{
    struct pprof_location *l = ud;
    uint64_t v;
    switch (field) {
    case 1:
        return varint_field(r, wt, &l->id);
    case 2:
        return varint_field(r, wt, &d->raw_loc_maps[d->i_locations]);
    case 3:
        return varint_field(r, wt, &l->address);
    case 4: {
        struct rd sub;
        if (wt != WT_LEN || !rd_sub(r, &sub) || d->i_lines >= d->n_lines)
            return false;
        size_t i = d->i_lines;
        d->raw_line_funcs[i] = 0;
        d->p->lines[i].line = 0;
        if (walk(d, &sub, fill_line, &i, "line"))
            return false;
        d->i_lines++;
        l->n_lines++;
        return true;
    }
    default:
        (void)v;
        return rd_skip(r, wt);
    }
}

static bool fill_function_field(struct dec *d, struct rd *r, uint32_t field, int wt, void *ud)
{
    struct pprof_function *f = ud;
    int64_t *raw = d->raw_func[d->i_funcs];
    switch (field) {
    case 1:
        return varint_field(r, wt, &f->id);
    case 2:
    case 3:
    case 4:
        return int64_field(r, wt, &raw[field - 2]);
    case 5:
        return int64_field(r, wt, &f->start_line);
    default:
        return rd_skip(r, wt);
    }
}

static bool fill_mapping_field(struct dec *d, struct rd *r, uint32_t field, int wt, void *ud)
{
    struct pprof_mapping *m = ud;
    int64_t *raw = d->raw_map[d->i_maps];
    switch (field) {
    case 1:
        return varint_field(r, wt, &m->id);
    case 2:
        return varint_field(r, wt, &m->memory_start);
    case 3:
        return varint_field(r, wt, &m->memory_limit);
    case 4:
        return varint_field(r, wt, &m->file_offset);
    case 5:
    case 6:
        return int64_field(r, wt, &raw[field - 5]);
    default:
        return rd_skip(r, wt);
    }
}

static skp_err pass_fill(struct dec *d, const uint8_t *buf, size_t len)
{
    struct pprof_profile *p = d->p;
    struct rd r = {buf, buf + len, buf};
    while (r.p < r.end) {
        uint32_t field;
        int wt;
        if (!rd_key(&r, &field, &wt))
            return fail(d, &r, "bad field key");
        const char *what = msg_name(field);
        struct rd sub = {0};
        uint64_t v = 0;
        skp_err err = SKP_OK;
        if (what && !rd_sub(&r, &sub))
            return fail(d, &r, "bad %s", what);
        /* Each entry is filled once, at the position pass 1 counted, in tables calloc zeroed. */
        switch (field) {
        case P_SAMPLE_TYPE:
            err = walk(d, &sub, fill_value_type, d->raw_type[d->i_types++], what);
            break;
        case P_SAMPLE: {
            struct pprof_sample *s = &p->samples[d->i_samples];
            s->loc_off = (uint32_t)d->i_locs_ids;
            s->label_off = (uint32_t)d->i_labels;
            err = walk(d, &sub, fill_sample_field, s, what);
            d->i_samples++;
            break;
        }
        case P_MAPPING:
            err = walk(d, &sub, fill_mapping_field, &p->mappings[d->i_maps], what);
            d->i_maps++;
            break;
        case P_LOCATION:
            p->locations[d->i_locations].line_off = (uint32_t)d->i_lines;
            err = walk(d, &sub, fill_location_field, &p->locations[d->i_locations], what);
            d->i_locations++;
            break;
        case P_FUNCTION:
            err = walk(d, &sub, fill_function_field, &p->functions[d->i_funcs], what);
            d->i_funcs++;
            break;
        case P_STRING:
            d->str_off[d->i_strings] = (uint32_t)(sub.p - buf);
            d->str_len[d->i_strings] = (uint32_t)(sub.end - sub.p);
            d->i_strings++;
            break;
        case P_PERIOD_TYPE:
            err = walk(d, &sub, fill_value_type, d->raw_period_type, what);
            break;
        case P_TIME:
        case P_DURATION:
        case P_PERIOD:
        case P_DEFAULT_TYPE:
            if (wt != WT_VARINT || !rd_varint(&r, &v))
                return fail(d, &r, "field %u must be a varint", field);
            if (field == P_TIME)
                p->time_nanos = (int64_t)v;
            else if (field == P_DURATION)
                p->duration_nanos = (int64_t)v;
            else if (field == P_PERIOD)
                p->period = (int64_t)v;
            else
                d->raw_default = (int64_t)v;
            break;
        default:
            if (!rd_skip(&r, wt))
                return fail(d, &r, "bad field %u", field);
            break;
        }
        if (err)
            return err;
    }
    return SKP_OK;
}

/* ---------------------------------------------------------------- resolution */

struct id_index {
    uint64_t id;
    uint32_t index;
};

static int cmp_id(const void *a, const void *b)
{
    const struct id_index *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Maps ids to indices: dense (ids[i] == i + 1 for all i) needs no table. */
struct id_map {
    bool dense;
    struct id_index *v;
    size_t n;
};

static skp_err id_map_build(struct id_map *m, size_t n, uint64_t (*id_of)(const void *, size_t),
                            const void *tab)
{
    m->dense = true;
    m->n = n;
    m->v = NULL;
    for (size_t i = 0; i < n && m->dense; i++)
        m->dense = id_of(tab, i) == i + 1;
    if (m->dense || n == 0)
        return SKP_OK;
    m->v = skpx_malloc(n * sizeof(*m->v));
    if (!m->v)
        return SKP_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        m->v[i].id = id_of(tab, i);
        m->v[i].index = (uint32_t)i;
    }
    qsort(m->v, n, sizeof(*m->v), cmp_id);
    return SKP_OK;
}

/* Index of `id`, PPROF_NONE if absent (the first of duplicate ids wins). */
static uint32_t id_map_find(const struct id_map *m, uint64_t id)
{
    if (m->dense)
        return id >= 1 && id <= m->n ? (uint32_t)(id - 1) : PPROF_NONE;
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->v[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < m->n && m->v[lo].id == id ? m->v[lo].index : PPROF_NONE;
}

static uint64_t loc_id(const void *t, size_t i)
{
    return ((const struct pprof_location *)t)[i].id;
}
static uint64_t func_id(const void *t, size_t i)
{
    return ((const struct pprof_function *)t)[i].id;
}
static uint64_t map_id(const void *t, size_t i)
{
    return ((const struct pprof_mapping *)t)[i].id;
}

static skp_err str_at(struct dec *d, int64_t idx, const char **out)
{
    if (idx < 0 || (uint64_t)idx >= d->n_strings) {
        if (idx == 0 && d->n_strings == 0) {
            *out = "";
            return SKP_OK;
        }
        return fail(d, NULL, "string index %lld out of range (table has %zu)", (long long)idx,
                    d->n_strings);
    }
    *out = d->p->_string_table[idx];
    return SKP_OK;
}

static skp_err build_strings(struct dec *d, const uint8_t *buf)
{
    struct pprof_profile *p = d->p;
    size_t total = 0;
    for (size_t i = 0; i < d->n_strings; i++)
        total += (size_t)d->str_len[i] + 1;
    p->_strings = skpx_malloc(total ? total : 1);
    p->_string_table = skpx_malloc((d->n_strings ? d->n_strings : 1) * sizeof(char *));
    if (!p->_strings || !p->_string_table)
        return SKP_ENOMEM;
    char *o = p->_strings;
    for (size_t i = 0; i < d->n_strings; i++) {
        memcpy(o, buf + d->str_off[i], d->str_len[i]);
        o[d->str_len[i]] = '\0';
        p->_string_table[i] = o;
        o += d->str_len[i] + 1;
    }
    p->n_strings = d->n_strings;
    if (d->n_strings && d->str_len[0] != 0)
        return fail(d, NULL, "string_table[0] must be the empty string");
    return SKP_OK;
}

static skp_err resolve(struct dec *d)
{
    struct pprof_profile *p = d->p;
    skp_err err = SKP_OK;
    struct id_map locs = {0}, funcs = {0}, maps = {0};
    for (size_t i = 0; i < p->n_sample_types && !err; i++) {
        err = str_at(d, d->raw_type[i][0], &p->sample_types[i].type);
        if (!err)
            err = str_at(d, d->raw_type[i][1], &p->sample_types[i].unit);
    }
    if (!err)
        err = str_at(d, d->raw_period_type[0], &p->period_type.type);
    if (!err)
        err = str_at(d, d->raw_period_type[1], &p->period_type.unit);
    for (size_t i = 0; i < p->n_functions && !err; i++) {
        err = str_at(d, d->raw_func[i][0], &p->functions[i].name);
        if (!err)
            err = str_at(d, d->raw_func[i][1], &p->functions[i].system_name);
        if (!err)
            err = str_at(d, d->raw_func[i][2], &p->functions[i].filename);
    }
    for (size_t i = 0; i < p->n_mappings && !err; i++) {
        err = str_at(d, d->raw_map[i][0], &p->mappings[i].filename);
        if (!err)
            err = str_at(d, d->raw_map[i][1], &p->mappings[i].build_id);
    }
    for (size_t i = 0; i < p->n_labels && !err; i++) {
        struct pprof_label *l = &p->labels[i];
        l->num = d->raw_label[i][2];
        err = str_at(d, d->raw_label[i][0], &l->key);
        if (!err)
            err = str_at(d, d->raw_label[i][1], &l->str);
        if (!err)
            err = str_at(d, d->raw_label[i][3], &l->num_unit);
    }
    if (err)
        return err;
    p->default_sample_type = -1;
    if (d->raw_default > 0) {
        const char *def = NULL;
        err = str_at(d, d->raw_default, &def);
        if (err)
            return err;
        p->default_sample_type = pprof_sample_type_index(p, def);
    }
    if ((err = id_map_build(&locs, p->n_locations, loc_id, p->locations)) ||
        (err = id_map_build(&funcs, p->n_functions, func_id, p->functions)) ||
        (err = id_map_build(&maps, p->n_mappings, map_id, p->mappings)))
        goto out;
    for (size_t i = 0; i < p->n_lines; i++) {
        uint64_t fid = d->raw_line_funcs[i];
        p->lines[i].function = fid ? id_map_find(&funcs, fid) : PPROF_NONE;
        if (fid && p->lines[i].function == PPROF_NONE) {
            err = fail(d, NULL, "line refers to unknown function id %llu", (unsigned long long)fid);
            goto out;
        }
    }
    for (size_t i = 0; i < p->n_locations; i++) {
        uint64_t mid = d->raw_loc_maps[i];
        p->locations[i].mapping = mid ? id_map_find(&maps, mid) : PPROF_NONE;
        if (p->locations[i].id == 0) {
            err = fail(d, NULL, "location %zu has id 0", i);
            goto out;
        }
    }
    for (size_t i = 0; i < p->n_sample_locs; i++) {
        uint32_t idx = id_map_find(&locs, d->raw_loc_ids[i]);
        if (idx == PPROF_NONE) {
            err = fail(d, NULL, "sample refers to unknown location id %llu",
                       (unsigned long long)d->raw_loc_ids[i]);
            goto out;
        }
        p->sample_locs[i] = idx;
    }
    for (size_t i = 0; i < p->n_samples; i++) {
        if (d->sample_nvalues[i] != p->n_sample_types) {
            err = fail(d, NULL, "sample %zu has %zu values but the profile has %zu sample types", i,
                       d->sample_nvalues[i], p->n_sample_types);
            goto out;
        }
    }
out:
    SKPX_FREE_ALL(locs.v, funcs.v, maps.v);
    return err;
}

/* ---------------------------------------------------------------- inflate */

static skp_err inflate_all(const uint8_t *in, size_t len, size_t max, uint8_t **out,
                           size_t *out_len, char *errbuf)
{
    *out = NULL;
    *out_len = 0;
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
        return SKP_ENOMEM;
    size_t cap = len * 4 < (1u << 20) ? (1u << 20) : len * 4;
    if (cap > max + 1)
        cap = max + 1;
    uint8_t *buf = skpx_malloc(cap);
    skp_err err = buf ? SKP_OK : SKP_ENOMEM;
    size_t used = 0;
    z.next_in = (Bytef *)in;
    while (!err) {
        if (used == cap) {
            if (cap > max) {
                if (errbuf)
                    snprintf(errbuf, PPROF_ERR_MAX, "pprof inflates to more than %zu bytes", max);
                err = SKP_ETOOBIG;
                break;
            }
            size_t ncap = cap * 2 > max + 1 ? max + 1 : cap * 2;
            uint8_t *nb = skpx_realloc(buf, ncap);
            if (!nb) {
                err = SKP_ENOMEM;
                break;
            }
            buf = nb;
            cap = ncap;
        }
        size_t in_left = len - (size_t)((const uint8_t *)z.next_in - in);
        z.avail_in = in_left > UINT32_MAX ? UINT32_MAX : (uInt)in_left;
        size_t out_room = cap - used;
        z.avail_out = out_room > UINT32_MAX ? UINT32_MAX : (uInt)out_room;
        z.next_out = buf + used;
        int rc = inflate(&z, Z_NO_FLUSH);
        used = (size_t)(z.next_out - buf);
        if (rc == Z_STREAM_END) {
            size_t rest = len - (size_t)((const uint8_t *)z.next_in - in);
            /* Concatenated gzip members (gzip allows them) continue the same stream. */
            if (rest >= 2 && z.next_in[0] == 0x1f && z.next_in[1] == 0x8b) {
                inflateReset(&z);
                continue;
            }
            break;
        }
        if (rc == Z_OK)
            continue;
        if (rc == Z_BUF_ERROR && z.avail_out == 0)
            continue; /* grow */
        if (errbuf)
            snprintf(errbuf, PPROF_ERR_MAX, "corrupt gzip stream: %s",
                     rc == Z_BUF_ERROR ? "truncated" : (z.msg ? z.msg : "inflate failed"));
        err = rc == Z_MEM_ERROR ? SKP_ENOMEM : SKP_EINVAL;
    }
    inflateEnd(&z);
    if (err) {
        skpx_free(buf);
        return err;
    }
    if (used > max) {
        skpx_free(buf);
        if (errbuf)
            snprintf(errbuf, PPROF_ERR_MAX, "pprof inflates to more than %zu bytes", max);
        return SKP_ETOOBIG;
    }
    *out = buf;
    *out_len = used;
    return SKP_OK;
}

/* ---------------------------------------------------------------- API */

void pprof_free(struct pprof_profile *p)
{
    if (!p)
        return;
    SKPX_FREE_ALL(p->sample_types, p->samples, p->values, p->sample_locs, p->labels, p->locations,
                  p->lines, p->functions, p->mappings, p->_strings, p->_string_table, p);
}

int pprof_sample_type_index(const struct pprof_profile *p, const char *type)
{
    for (size_t i = 0; type && i < p->n_sample_types; i++)
        if (strcmp(p->sample_types[i].type, type) == 0)
            return (int)i;
    return -1;
}

static void *alloc_n(size_t n, size_t size, bool *ok)
{
    void *v = skpx_calloc(n ? n : 1, size);
    if (!v)
        *ok = false;
    return v;
}

static uint64_t refusals;

uint64_t pprof_decode_refusals(void)
{
    return __atomic_load_n(&refusals, __ATOMIC_RELAXED);
}

/* The memory the tables of pass 1's counts take, with the inflated buffer (n bytes) still held:
 * every array pprof_decode and resolve allocate, the string block and its table. Saturates. */
static size_t decode_memory(const struct dec *d, size_t n)
{
    const struct {
        size_t count, each;
    } t[] = {
        {d->n_types, sizeof(struct pprof_value_type) + 2 * sizeof(int64_t)},
        {d->n_samples, sizeof(struct pprof_sample) + sizeof(size_t)},
        {d->n_values, sizeof(int64_t)},
        {d->n_locs_ids, sizeof(uint32_t) + sizeof(uint64_t)},
        {d->n_labels, sizeof(struct pprof_label) + 4 * sizeof(int64_t)},
        {d->n_locations, sizeof(struct pprof_location) + 3 * sizeof(uint64_t)},
        {d->n_lines, sizeof(struct pprof_line) + sizeof(uint64_t)},
        {d->n_funcs, sizeof(struct pprof_function) + 3 * sizeof(int64_t) + 2 * sizeof(uint64_t)},
        {d->n_maps, sizeof(struct pprof_mapping) + 2 * sizeof(int64_t) + 2 * sizeof(uint64_t)},
        {d->n_strings, 2 * sizeof(uint32_t) + sizeof(char *) + 1},
    };
    size_t total = n * 2; /* the inflated bytes + the string block (at most as long) */
    if (total < n)
        return SIZE_MAX;
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        if (t[i].count > SIZE_MAX / t[i].each || total > SIZE_MAX - t[i].count * t[i].each)
            return SIZE_MAX;
        total += t[i].count * t[i].each;
    }
    return total;
}

static skp_err refuse(char *errbuf, const char *fmt, size_t limit)
{
    __atomic_add_fetch(&refusals, 1, __ATOMIC_RELAXED);
    if (errbuf)
        snprintf(errbuf, PPROF_ERR_MAX, fmt, limit);
    return SKP_ETOOBIG;
}

skp_err pprof_decode(const uint8_t *data, size_t len, size_t max_decoded,
                     struct pprof_profile **out, char *errbuf)
{
    struct pprof_limits lim = {.max_decoded = max_decoded};
    return pprof_decode_limited(data, len, &lim, out, errbuf);
}

skp_err pprof_decode_limited(const uint8_t *data, size_t len, const struct pprof_limits *lim,
                             struct pprof_profile **out, char *errbuf)
{
    *out = NULL;
    if (errbuf)
        errbuf[0] = '\0';
    size_t max_decoded = lim && lim->max_decoded ? lim->max_decoded : PPROF_DEFAULT_MAX_DECODED;
    size_t max_memory = lim && lim->max_memory ? lim->max_memory : PPROF_DEFAULT_MAX_MEMORY;
    size_t max_samples = lim ? lim->max_samples : 0;
    uint8_t *inflated = NULL;
    const uint8_t *buf = data;
    size_t n = len;
    skp_err err = SKP_OK;
    if (len >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
        err = inflate_all(data, len, max_decoded, &inflated, &n, errbuf);
        if (err == SKP_ETOOBIG)
            __atomic_add_fetch(&refusals, 1, __ATOMIC_RELAXED);
        if (err)
            return err;
        buf = inflated;
    } else if (len > max_decoded) {
        return refuse(errbuf, "pprof larger than %zu bytes", max_decoded);
    }
    if (n > UINT32_MAX) {
        skpx_free(inflated);
        if (errbuf)
            snprintf(errbuf, PPROF_ERR_MAX, "pprof larger than 4 GiB");
        return SKP_ETOOBIG;
    }
    struct dec d = {.err = errbuf, .base = buf};
    struct pprof_profile *p = skpx_calloc(1, sizeof(*p));
    if (!p) {
        skpx_free(inflated);
        return SKP_ENOMEM;
    }
    d.p = p;
    err = pass_count(&d, buf, n);
    if (err)
        goto out;
    if (max_samples && d.n_samples > max_samples) {
        err = refuse(errbuf, "pprof has more than %zu samples", max_samples);
        goto out;
    }
    size_t need = decode_memory(&d, n);
    if (need > max_memory) {
        err =
            refuse(errbuf, "pprof would take more than %zu bytes of memory to decode", max_memory);
        goto out;
    }
    p->mem_bytes = need - n;
    bool ok = true;
    p->sample_types = alloc_n(d.n_types, sizeof(*p->sample_types), &ok);
    p->samples = alloc_n(d.n_samples, sizeof(*p->samples), &ok);
    p->values = alloc_n(d.n_values, sizeof(*p->values), &ok);
    p->sample_locs = alloc_n(d.n_locs_ids, sizeof(*p->sample_locs), &ok);
    p->labels = alloc_n(d.n_labels, sizeof(*p->labels), &ok);
    p->locations = alloc_n(d.n_locations, sizeof(*p->locations), &ok);
    p->lines = alloc_n(d.n_lines, sizeof(*p->lines), &ok);
    p->functions = alloc_n(d.n_funcs, sizeof(*p->functions), &ok);
    p->mappings = alloc_n(d.n_maps, sizeof(*p->mappings), &ok);
    d.raw_loc_ids = alloc_n(d.n_locs_ids, sizeof(*d.raw_loc_ids), &ok);
    d.raw_line_funcs = alloc_n(d.n_lines, sizeof(*d.raw_line_funcs), &ok);
    d.raw_loc_maps = alloc_n(d.n_locations, sizeof(*d.raw_loc_maps), &ok);
    d.sample_nvalues = alloc_n(d.n_samples, sizeof(*d.sample_nvalues), &ok);
    d.raw_label = alloc_n(d.n_labels, sizeof(*d.raw_label), &ok);
    d.raw_type = alloc_n(d.n_types, sizeof(*d.raw_type), &ok);
    d.raw_func = alloc_n(d.n_funcs, sizeof(*d.raw_func), &ok);
    d.raw_map = alloc_n(d.n_maps, sizeof(*d.raw_map), &ok);
    d.str_off = alloc_n(d.n_strings, sizeof(*d.str_off), &ok);
    d.str_len = alloc_n(d.n_strings, sizeof(*d.str_len), &ok);
    if (!ok) {
        err = SKP_ENOMEM;
        goto out;
    }
    p->n_sample_types = d.n_types;
    p->n_samples = d.n_samples;
    p->n_sample_locs = d.n_locs_ids;
    p->n_labels = d.n_labels;
    p->n_locations = d.n_locations;
    p->n_lines = d.n_lines;
    p->n_functions = d.n_funcs;
    p->n_mappings = d.n_maps;
    err = pass_fill(&d, buf, n);
    if (!err)
        err = build_strings(&d, buf);
    if (!err)
        err = resolve(&d);
out:
    SKPX_FREE_ALL(d.raw_loc_ids, d.raw_line_funcs, d.raw_loc_maps, d.sample_nvalues, d.raw_label,
                  d.raw_type, d.raw_func, d.raw_map, d.str_off, d.str_len, inflated);
    if (err) {
        if (err == SKP_ENOMEM && errbuf)
            snprintf(errbuf, PPROF_ERR_MAX, "out of memory decoding the pprof");
        pprof_free(p);
        return err;
    }
    *out = p;
    return SKP_OK;
}
