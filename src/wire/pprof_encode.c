/* pprof_encode.c - the pprof builder and encoder (profile.proto written by hand, field numbers of
 * the public perftools.profiles schema).
 *
 * Design: four interning maps of one kind (struct pmap: open addressing over byte keys stored in
 * one arena): strings (id = index into the string table, 0 = ""), functions (key: name id, file
 * id), locations (key: function id, line) and samples (key: varints of the location ids and
 * label words, see skpx_varint_put). A sample's values live in a parallel int64 array. Every byte
 * the maps hold is counted in p->bytes against p->max_bytes before it is allocated, so a full
 * builder refuses new entries while merging into existing samples keeps working. */
#include "wire/pprof_encode.h"

#include <string.h>
#include <zlib.h>

#include "common/varint.h"
#include "common/alloc.h"
#include "common/grow.h"
#include "common/map.h"

/* ---- byte-keyed interning map -------------------------------------------------------------- */
struct pmap {
    uint32_t *slots; /* entry index + 1, 0 = empty; cap_slots is a power of two */
    size_t cap_slots;
    uint32_t *off; /* per entry: key offset in arena */
    uint32_t *len; /* per entry: key length */
    uint32_t *hash;
    size_t n, cap; /* entries */
    uint8_t *arena;
    size_t arena_len, arena_cap;
};

struct skpx_pprof {
    size_t max_bytes;
    size_t bytes;
    size_t n_types;
    int64_t type_str[SKPX_PPROF_MAX_TYPES][2];
    int64_t period_type[2];
    int64_t period;
    int64_t time_nanos, duration_nanos;
    struct pmap strs, funcs, locs, samples;
    int64_t *values; /* samples.n * n_types */
    size_t values_cap;
    int64_t *comments;
    size_t n_comments, comments_cap;
    int64_t default_type; /* string id of the default sample type, 0 = none */
    size_t max_frames;    /* SKPX_PPROF_MAX_FRAMES unless set_max_frames raised it */
    uint8_t *big_key;     /* sample-key scratch for stacks deeper than SKPX_PPROF_MAX_FRAMES */
};

/* Most bytes of a sample key with n_frames frames and the most labels (varints of at most 10
 * bytes, see skpx_varint_put). */
#define KEY_BYTES(n_frames) (10 * (2 + (size_t)(n_frames) + 4 * SKPX_PPROF_MAX_LABELS))

/* common/map.h's hash (eight bytes per step: sample keys run to hundreds of bytes), cut to the
 * 32 bits an entry keeps. */
static uint32_t hash_bytes(const void *k, size_t n)
{
    uint32_t h = (uint32_t)skpx_hash_bytes(k, n);
    return h ? h : 1;
}

static void pmap_cleanup(struct pmap *m)
{
    SKPX_FREE_ALL(m->slots, m->off, m->len, m->hash, m->arena);
    memset(m, 0, sizeof(*m));
}

/* Reserves `extra` bytes of budget. */
static bool budget_take(struct skpx_pprof *p, size_t extra)
{
    if (extra > p->max_bytes - p->bytes)
        return false;
    p->bytes += extra;
    return true;
}

static skp_err grow_array(struct skpx_pprof *p, void **arr, size_t elem, size_t old_cap,
                          size_t new_cap)
{
    if (!budget_take(p, (new_cap - old_cap) * elem))
        return SKP_EFULL;
    void *n = skpx_realloc(*arr, new_cap * elem);
    if (!n) {
        p->bytes -= (new_cap - old_cap) * elem;
        return SKP_ENOMEM;
    }
    *arr = n;
    return SKP_OK;
}

/* Grows *arr (*cap elements of elem bytes) through grow_array to hold `need` elements, the
 * capacity doubling from *cap (first_cap when 0). Errors: grow_array's, SKP_EFULL past max_cap. */
static skp_err grow_to(struct skpx_pprof *p, void **arr, size_t elem, size_t *cap, size_t need,
                       size_t first_cap, size_t max_cap)
{
    if (need <= *cap)
        return SKP_OK;
    size_t nc = *cap ? *cap : first_cap;
    while (nc < need)
        nc *= 2;
    if (nc > max_cap)
        return SKP_EFULL;
    skp_err err = grow_array(p, arr, elem, *cap, nc);
    if (!err)
        *cap = nc;
    return err;
}

/* Puts entry e (hash h) in the first free slot of its probe sequence (linear probing; slots
 * hold entry + 1, 0 is free; cap is a power of two with a free slot). */
static void slot_put(uint32_t *slots, size_t cap, uint32_t h, size_t e)
{
    size_t j = h & (cap - 1);
    while (slots[j])
        j = (j + 1) & (cap - 1);
    slots[j] = (uint32_t)e + 1;
}

static skp_err pmap_rehash(struct skpx_pprof *p, struct pmap *m, size_t new_cap)
{
    if (!budget_take(p, (new_cap - m->cap_slots) * sizeof(uint32_t)))
        return SKP_EFULL;
    uint32_t *s = skpx_calloc(new_cap, sizeof(uint32_t));
    if (!s) {
        p->bytes -= (new_cap - m->cap_slots) * sizeof(uint32_t);
        return SKP_ENOMEM;
    }
    for (size_t i = 0; i < m->n; i++)
        slot_put(s, new_cap, m->hash[i], i);
    skpx_free(m->slots);
    m->slots = s;
    m->cap_slots = new_cap;
    return SKP_OK;
}

/* Finds key; when absent and `insert`, adds it. *idx = entry index; *added tells which.
 * Errors: SKP_EFULL, SKP_ENOMEM, SKP_ENOTFOUND (absent, !insert). */
static skp_err pmap_get(struct skpx_pprof *p, struct pmap *m, const void *key, size_t klen,
                        bool insert, size_t *idx, bool *added)
{
    *added = false;
    if (klen > UINT32_MAX / 2)
        return SKP_EINVAL;
    uint32_t h = hash_bytes(key, klen);
    if (m->cap_slots) {
        size_t j = h & (m->cap_slots - 1);
        while (m->slots[j]) {
            size_t e = m->slots[j] - 1;
            if (m->hash[e] == h && m->len[e] == klen &&
                (klen == 0 || memcmp(m->arena + m->off[e], key, klen) == 0)) {
                *idx = e;
                return SKP_OK;
            }
            j = (j + 1) & (m->cap_slots - 1);
        }
    }
    if (!insert)
        return SKP_ENOTFOUND;
    skp_err err;
    if ((m->n + 1) * 4 > m->cap_slots * 3) { /* load factor <= 0.75 */
        err = pmap_rehash(p, m, m->cap_slots ? m->cap_slots * 2 : 64);
        if (err)
            return err;
    }
    if (m->n == m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 32;
        err = grow_array(p, (void **)&m->off, sizeof(uint32_t), m->cap, nc);
        if (!err)
            err = grow_array(p, (void **)&m->len, sizeof(uint32_t), m->cap, nc);
        if (!err)
            err = grow_array(p, (void **)&m->hash, sizeof(uint32_t), m->cap, nc);
        if (err) /* arrays already grown stay larger: harmless */
            return err;
        m->cap = nc;
    }
    err = grow_to(p, (void **)&m->arena, 1, &m->arena_cap, m->arena_len + klen, 1024, UINT32_MAX);
    if (err)
        return err;
    if (klen)
        memcpy(m->arena + m->arena_len, key, klen);
    size_t e = m->n++;
    m->off[e] = (uint32_t)m->arena_len;
    m->len[e] = (uint32_t)klen;
    m->hash[e] = h;
    m->arena_len += klen;
    slot_put(m->slots, m->cap_slots, h, e);
    *idx = e;
    *added = true;
    return SKP_OK;
}

/* ---- builder ------------------------------------------------------------------------------- */
static skp_err intern(struct skpx_pprof *p, const char *s, size_t n, int64_t *id)
{
    size_t idx;
    bool added;
    skp_err err = pmap_get(p, &p->strs, s ? s : "", s ? n : 0, true, &idx, &added);
    if (!err)
        *id = (int64_t)idx;
    return err;
}

static skp_err intern_cstr(struct skpx_pprof *p, const char *s, int64_t *id)
{
    return intern(p, s, s ? strlen(s) : 0, id);
}

skp_err skpx_pprof_new(const struct skpx_pprof_type *types, size_t n_types, size_t max_bytes,
                       struct skpx_pprof **out)
{
    *out = NULL;
    if (!types || n_types == 0 || n_types > SKPX_PPROF_MAX_TYPES || max_bytes < 4096)
        return SKP_EINVAL;
    struct skpx_pprof *p = skpx_calloc(1, sizeof(*p));
    if (!p)
        return SKP_ENOMEM;
    p->max_bytes = max_bytes;
    p->bytes = sizeof(*p);
    p->n_types = n_types;
    p->max_frames = SKPX_PPROF_MAX_FRAMES;
    int64_t empty;
    skp_err err = intern(p, "", 0, &empty); /* string 0 must be "" */
    for (size_t i = 0; !err && i < n_types; i++) {
        err = intern_cstr(p, types[i].type, &p->type_str[i][0]);
        if (!err)
            err = intern_cstr(p, types[i].unit, &p->type_str[i][1]);
    }
    if (err) {
        skpx_pprof_free(p);
        return err == SKP_EFULL ? SKP_EINVAL : err;
    }
    *out = p;
    return SKP_OK;
}

void skpx_pprof_free(struct skpx_pprof *p)
{
    if (!p)
        return;
    pmap_cleanup(&p->strs);
    pmap_cleanup(&p->funcs);
    pmap_cleanup(&p->locs);
    pmap_cleanup(&p->samples);
    SKPX_FREE_ALL(p->values, p->comments, p->big_key, p);
}

skp_err skpx_pprof_set_period(struct skpx_pprof *p, const struct skpx_pprof_type *t, int64_t period)
{
    if (!p || !t)
        return SKP_EINVAL;
    skp_err err = intern_cstr(p, t->type, &p->period_type[0]);
    if (!err)
        err = intern_cstr(p, t->unit, &p->period_type[1]);
    if (!err)
        p->period = period;
    return err;
}

void skpx_pprof_set_time(struct skpx_pprof *p, int64_t time_nanos, int64_t duration_nanos)
{
    if (!p)
        return;
    p->time_nanos = time_nanos;
    p->duration_nanos = duration_nanos;
}

skp_err skpx_pprof_set_default_type(struct skpx_pprof *p, const char *type)
{
    if (!p || !type)
        return SKP_EINVAL;
    size_t n = strlen(type);
    for (size_t t = 0; t < p->n_types; t++) {
        int64_t id = p->type_str[t][0];
        if (p->strs.len[id] == n && memcmp(p->strs.arena + p->strs.off[id], type, n) == 0) {
            p->default_type = id;
            return SKP_OK;
        }
    }
    return SKP_EINVAL;
}

skp_err skpx_pprof_set_max_frames(struct skpx_pprof *p, size_t max_frames)
{
    if (!p || max_frames < p->max_frames || max_frames > SKPX_PPROF_MAX_FRAMES_LIMIT)
        return SKP_EINVAL;
    if (max_frames == p->max_frames)
        return SKP_OK;
    size_t old = p->big_key ? KEY_BYTES(p->max_frames) : 0;
    void *k = p->big_key;
    skp_err err = grow_array(p, &k, 1, old, KEY_BYTES(max_frames));
    if (err)
        return err;
    p->big_key = k;
    p->max_frames = max_frames;
    return SKP_OK;
}

skp_err skpx_pprof_add_comment(struct skpx_pprof *p, const char *text)
{
    if (!p || !text)
        return SKP_EINVAL;
    int64_t id;
    skp_err err = intern_cstr(p, text, &id);
    if (err)
        return err;
    err = grow_to(p, (void **)&p->comments, sizeof(int64_t), &p->comments_cap, p->n_comments + 1, 4,
                  SIZE_MAX);
    if (err)
        return err;
    p->comments[p->n_comments++] = id;
    return SKP_OK;
}

/* A sample key is a run of protobuf varints: n_frames, the location ids, n_labels, then per
 * label its key's string id, its string's id + 1 (0 for a numeric label), its number and its
 * unit's string id. The words are read back in order only (get_key_word), so the run is
 * unambiguous and keys compare as bytes; the location ids are already the packed field the
 * encoder writes. Small ids take one or two bytes, where fixed words took eight.
 * get_key_word reads the next word of a key written by skpx_varint_put (keys are ours: no
 * bound needed). */
static uint64_t get_key_word(const uint8_t **k)
{
    uint64_t v = 0;
    unsigned shift = 0;
    while (**k & 0x80) {
        v |= (uint64_t)(**k & 0x7f) << shift;
        shift += 7;
        (*k)++;
    }
    v |= (uint64_t) * *k << shift;
    (*k)++;
    return v;
}

skp_err skpx_pprof_location(struct skpx_pprof *p, const struct skpx_pprof_frame *f, uint64_t *id)
{
    if (!p || !f || !id)
        return SKP_EINVAL;
    int64_t fk[2];
    skp_err err = intern(p, f->func, f->func_len, &fk[0]);
    if (!err)
        err = intern(p, f->file, f->file_len, &fk[1]);
    size_t fidx = 0, lidx = 0;
    bool added;
    if (!err)
        err = pmap_get(p, &p->funcs, fk, sizeof(fk), true, &fidx, &added);
    int64_t lk[2] = {(int64_t)fidx + 1, f->line};
    if (!err)
        err = pmap_get(p, &p->locs, lk, sizeof(lk), true, &lidx, &added);
    if (!err)
        *id = (uint64_t)lidx + 1;
    return err; /* on failure strings/functions added so far stay: harmless, counted */
}

/* skpx_pprof_add and skpx_pprof_add_ids: the stack is `frames` or, when NULL, `ids`. */
static skp_err add_sample(struct skpx_pprof *p, const struct skpx_pprof_frame *frames,
                          const uint64_t *ids, size_t n_frames, const int64_t *values,
                          const struct skpx_pprof_label *labels, size_t n_labels)
{
    if (!p || (!frames && !ids && n_frames) || !values || (!labels && n_labels) ||
        n_labels > SKPX_PPROF_MAX_LABELS)
        return SKP_EINVAL;
    if (n_frames > p->max_frames)
        n_frames = p->max_frames; /* leaf first: the innermost are the first ones */
    /* Sample key: n_frames, location ids..., n_labels, (key, str, num, unit) per label. On the
     * stack unless the stack is deeper than the default cap (then the builder's scratch). */
    uint8_t stack_key[KEY_BYTES(SKPX_PPROF_MAX_FRAMES)];
    uint8_t *key = n_frames > SKPX_PPROF_MAX_FRAMES ? p->big_key : stack_key;
    size_t k = skpx_varint_put(key, n_frames);
    skp_err err = SKP_OK;
    for (size_t i = 0; i < n_frames; i++) {
        uint64_t lid;
        if (frames) {
            err = skpx_pprof_location(p, &frames[i], &lid);
            if (err)
                return err; /* locations added so far stay: harmless, counted */
        } else {
            lid = ids[i];
            if (lid == 0 || lid > p->locs.n)
                return SKP_EINVAL;
        }
        k += skpx_varint_put(key + k, lid);
    }
    k += skpx_varint_put(key + k, n_labels);
    for (size_t i = 0; i < n_labels; i++) {
        int64_t kid, sid = 0, uid = 0;
        err = intern_cstr(p, labels[i].key, &kid);
        if (!err && labels[i].str)
            err = intern_cstr(p, labels[i].str, &sid);
        if (!err && !labels[i].str && labels[i].num_unit)
            err = intern_cstr(p, labels[i].num_unit, &uid);
        if (err)
            return err;
        k += skpx_varint_put(key + k, (uint64_t)kid);
        k += skpx_varint_put(key + k, labels[i].str ? (uint64_t)sid + 1 : 0);
        k += skpx_varint_put(key + k, labels[i].str ? 0 : (uint64_t)labels[i].num);
        k += skpx_varint_put(key + k, (uint64_t)uid);
    }
    size_t sidx;
    bool added = false;
    err = pmap_get(p, &p->samples, key, k, false, &sidx, &added);
    if (err == SKP_OK) { /* merge: works even when the budget is used up */
        int64_t *v = &p->values[sidx * p->n_types];
        for (size_t t = 0; t < p->n_types; t++)
            v[t] += values[t];
        return SKP_OK;
    }
    /* The values array must have room before the sample exists. */
    err = grow_to(p, (void **)&p->values, sizeof(int64_t) * p->n_types, &p->values_cap,
                  p->samples.n + 1, 64, SIZE_MAX);
    if (err)
        return err;
    err = pmap_get(p, &p->samples, key, k, true, &sidx, &added);
    if (err)
        return err;
    int64_t *v = &p->values[sidx * p->n_types];
    for (size_t t = 0; t < p->n_types; t++)
        v[t] = added ? values[t] : v[t] + values[t];
    return SKP_OK;
}

skp_err skpx_pprof_add(struct skpx_pprof *p, const struct skpx_pprof_frame *frames, size_t n_frames,
                       const int64_t *values, const struct skpx_pprof_label *labels,
                       size_t n_labels)
{
    if (!frames && n_frames)
        return SKP_EINVAL;
    static const struct skpx_pprof_frame none;
    return add_sample(p, frames ? frames : &none, NULL, n_frames, values, labels, n_labels);
}

skp_err skpx_pprof_add_ids(struct skpx_pprof *p, const uint64_t *ids, size_t n_ids,
                           const int64_t *values, const struct skpx_pprof_label *labels,
                           size_t n_labels)
{
    if (!ids && n_ids)
        return SKP_EINVAL;
    static const uint64_t none;
    return add_sample(p, NULL, ids ? ids : &none, n_ids, values, labels, n_labels);
}

static void str_of(const struct skpx_pprof *p, int64_t id, const char **s, size_t *n)
{
    *s = (const char *)p->strs.arena + p->strs.off[id];
    *n = p->strs.len[id];
}

bool skpx_pprof_sample(const struct skpx_pprof *p, size_t s, struct skpx_pprof_frame *scratch,
                       size_t *n_frames, const int64_t **values)
{
    if (!p || !scratch || s >= p->samples.n)
        return false;
    const uint8_t *k = p->samples.arena + p->samples.off[s];
    uint64_t nf = get_key_word(&k);
    if (nf > SKPX_PPROF_MAX_FRAMES)
        nf = SKPX_PPROF_MAX_FRAMES;
    for (size_t i = 0; i < nf; i++) {
        uint64_t lid = get_key_word(&k);
        int64_t lk[2], fk[2];
        memcpy(lk, p->locs.arena + p->locs.off[lid - 1], sizeof(lk));
        memcpy(fk, p->funcs.arena + p->funcs.off[lk[0] - 1], sizeof(fk));
        str_of(p, fk[0], &scratch[i].func, &scratch[i].func_len);
        str_of(p, fk[1], &scratch[i].file, &scratch[i].file_len);
        scratch[i].line = lk[1];
    }
    *n_frames = (size_t)nf;
    *values = &p->values[s * p->n_types];
    return true;
}

int skpx_pprof_each(const struct skpx_pprof *p, struct skpx_pprof_frame *scratch,
                    skpx_pprof_sample_cb cb, void *ud)
{
    if (!cb)
        return 0;
    size_t n = 0;
    const int64_t *v = NULL;
    for (size_t s = 0; skpx_pprof_sample(p, s, scratch, &n, &v); s++) {
        int rc = cb(ud, scratch, n, v);
        if (rc)
            return rc;
    }
    return 0;
}

size_t skpx_pprof_n_samples(const struct skpx_pprof *p)
{
    return p ? p->samples.n : 0;
}

size_t skpx_pprof_bytes(const struct skpx_pprof *p)
{
    return p ? p->bytes : 0;
}

/* ---- encoding ------------------------------------------------------------------------------ */
struct obuf {
    uint8_t *b;
    size_t len, cap;
    bool failed;
};

static void ob_put(struct obuf *o, const void *d, size_t n)
{
    if (o->failed)
        return;
    if (skpx_grow(&o->b, &o->cap, o->len + n, 1, 4096)) {
        o->failed = true;
        return;
    }
    memcpy(o->b + o->len, d, n);
    o->len += n;
}

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static void ob_varint(struct obuf *o, uint64_t v)
{
    uint8_t t[10];
    ob_put(o, t, skpx_varint_put(t, v));
}

enum { WT_VARINT = 0, WT_LEN = 2 };

static void ob_tag(struct obuf *o, uint32_t field, uint32_t wt)
{
    ob_varint(o, ((uint64_t)field << 3) | wt);
}

static void ob_field_varint(struct obuf *o, uint32_t field, uint64_t v)
{
    ob_tag(o, field, WT_VARINT);
    ob_varint(o, v);
}

static size_t field_varint_len(uint32_t field, uint64_t v)
{
    return varint_len((uint64_t)field << 3) + varint_len(v);
}

static size_t field_len_len(uint32_t field, size_t n)
{
    return varint_len((uint64_t)field << 3) + varint_len(n) + n;
}

/* Profile / nested field numbers (public profile.proto). */
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
enum { VT_TYPE = 1, VT_UNIT = 2 };
enum { SM_LOCATION_ID = 1, SM_VALUE = 2, SM_LABEL = 3 };
enum { LB_KEY = 1, LB_STR = 2, LB_NUM = 3, LB_NUM_UNIT = 4 };
enum { LC_ID = 1, LC_LINE = 4 };
enum { LN_FUNCTION_ID = 1, LN_LINE = 2 };
enum { FN_ID = 1, FN_NAME = 2, FN_SYSTEM_NAME = 3, FN_FILENAME = 4 };

static void ob_value_type(struct obuf *o, uint32_t field, const int64_t vt[2])
{
    size_t n =
        field_varint_len(VT_TYPE, (uint64_t)vt[0]) + field_varint_len(VT_UNIT, (uint64_t)vt[1]);
    ob_tag(o, field, WT_LEN);
    ob_varint(o, n);
    ob_field_varint(o, VT_TYPE, (uint64_t)vt[0]);
    ob_field_varint(o, VT_UNIT, (uint64_t)vt[1]);
}

static void ob_sample(struct obuf *o, const struct skpx_pprof *p, size_t s)
{
    const uint8_t *k = p->samples.arena + p->samples.off[s];
    size_t nf = (size_t)get_key_word(&k);
    const uint8_t *ids = k; /* the ids' varints: the packed location_id field as it is */
    for (size_t i = 0; i < nf; i++)
        (void)get_key_word(&k);
    size_t ids_len = (size_t)(k - ids);
    const int64_t *v = &p->values[s * p->n_types];
    size_t vals_len = 0;
    for (size_t t = 0; t < p->n_types; t++)
        vals_len += varint_len((uint64_t)v[t]);
    size_t nl = (size_t)get_key_word(&k);
    uint64_t lw[SKPX_PPROF_MAX_LABELS][4]; /* key id, string id + 1 or 0, number, unit id */
    size_t lab_len[SKPX_PPROF_MAX_LABELS];
    size_t n = field_len_len(SM_LOCATION_ID, ids_len) + field_len_len(SM_VALUE, vals_len);
    for (size_t l = 0; l < nl; l++) {
        for (size_t w = 0; w < 4; w++)
            lw[l][w] = get_key_word(&k);
        lab_len[l] = field_varint_len(LB_KEY, lw[l][0]);
        if (lw[l][1]) {
            lab_len[l] += field_varint_len(LB_STR, lw[l][1] - 1);
        } else {
            lab_len[l] += field_varint_len(LB_NUM, lw[l][2]);
            if (lw[l][3])
                lab_len[l] += field_varint_len(LB_NUM_UNIT, lw[l][3]);
        }
        n += field_len_len(SM_LABEL, lab_len[l]);
    }
    ob_tag(o, PF_SAMPLE, WT_LEN);
    ob_varint(o, n);
    ob_tag(o, SM_LOCATION_ID, WT_LEN);
    ob_varint(o, ids_len);
    ob_put(o, ids, ids_len);
    ob_tag(o, SM_VALUE, WT_LEN);
    ob_varint(o, vals_len);
    for (size_t t = 0; t < p->n_types; t++)
        ob_varint(o, (uint64_t)v[t]);
    for (size_t l = 0; l < nl; l++) {
        ob_tag(o, SM_LABEL, WT_LEN);
        ob_varint(o, lab_len[l]);
        ob_field_varint(o, LB_KEY, lw[l][0]);
        if (lw[l][1]) {
            ob_field_varint(o, LB_STR, lw[l][1] - 1);
        } else {
            ob_field_varint(o, LB_NUM, lw[l][2]);
            if (lw[l][3])
                ob_field_varint(o, LB_NUM_UNIT, lw[l][3]);
        }
    }
}

static void ob_location(struct obuf *o, const struct skpx_pprof *p, size_t i)
{
    int64_t lk[2];
    memcpy(lk, p->locs.arena + p->locs.off[i], sizeof(lk));
    size_t line_len = field_varint_len(LN_FUNCTION_ID, (uint64_t)lk[0]) +
                      (lk[1] ? field_varint_len(LN_LINE, (uint64_t)lk[1]) : 0);
    size_t n = field_varint_len(LC_ID, i + 1) + field_len_len(LC_LINE, line_len);
    ob_tag(o, PF_LOCATION, WT_LEN);
    ob_varint(o, n);
    ob_field_varint(o, LC_ID, i + 1);
    ob_tag(o, LC_LINE, WT_LEN);
    ob_varint(o, line_len);
    ob_field_varint(o, LN_FUNCTION_ID, (uint64_t)lk[0]);
    if (lk[1])
        ob_field_varint(o, LN_LINE, (uint64_t)lk[1]);
}

static void ob_function(struct obuf *o, const struct skpx_pprof *p, size_t i)
{
    int64_t fk[2];
    memcpy(fk, p->funcs.arena + p->funcs.off[i], sizeof(fk));
    size_t n = field_varint_len(FN_ID, i + 1) + field_varint_len(FN_NAME, (uint64_t)fk[0]) +
               field_varint_len(FN_SYSTEM_NAME, (uint64_t)fk[0]) +
               (fk[1] ? field_varint_len(FN_FILENAME, (uint64_t)fk[1]) : 0);
    ob_tag(o, PF_FUNCTION, WT_LEN);
    ob_varint(o, n);
    ob_field_varint(o, FN_ID, i + 1);
    ob_field_varint(o, FN_NAME, (uint64_t)fk[0]);
    ob_field_varint(o, FN_SYSTEM_NAME, (uint64_t)fk[0]);
    if (fk[1])
        ob_field_varint(o, FN_FILENAME, (uint64_t)fk[1]);
}

static void *z_alloc(void *ud, unsigned n, unsigned size)
{
    (void)ud;
    return skpx_calloc(n, size);
}

static void z_free(void *ud, void *ptr)
{
    (void)ud;
    skpx_free(ptr);
}

static skp_err gzip_buf(const uint8_t *in, size_t in_len, uint8_t **out, size_t *out_len)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    z.zalloc = z_alloc;
    z.zfree = z_free;
    /* 15 + 16: a gzip wrapper (what pprof files carry). Level 6: zlib's default trade-off. */
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return SKP_ENOMEM;
    uLong bound = deflateBound(&z, (uLong)in_len) + 32;
    uint8_t *b = skpx_malloc(bound);
    if (!b) {
        deflateEnd(&z);
        return SKP_ENOMEM;
    }
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)in_len;
    z.next_out = b;
    z.avail_out = (uInt)bound;
    int rc = deflate(&z, Z_FINISH);
    size_t n = bound - z.avail_out;
    deflateEnd(&z);
    if (rc != Z_STREAM_END) {
        skpx_free(b);
        return SKP_EIO;
    }
    *out = b;
    *out_len = n;
    return SKP_OK;
}

skp_err skpx_pprof_encode(const struct skpx_pprof *p, bool gzip, uint8_t **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    if (!p)
        return SKP_EINVAL;
    if (p->strs.n > UINT32_MAX / 2 || (gzip && p->bytes > (size_t)UINT32_MAX / 4))
        return SKP_EINVAL;
    struct obuf o = {0};
    for (size_t t = 0; t < p->n_types; t++)
        ob_value_type(&o, PF_SAMPLE_TYPE, p->type_str[t]);
    for (size_t s = 0; s < p->samples.n; s++)
        ob_sample(&o, p, s);
    for (size_t i = 0; i < p->locs.n; i++)
        ob_location(&o, p, i);
    for (size_t i = 0; i < p->funcs.n; i++)
        ob_function(&o, p, i);
    for (size_t i = 0; i < p->strs.n; i++) {
        ob_tag(&o, PF_STRING_TABLE, WT_LEN);
        ob_varint(&o, p->strs.len[i]);
        ob_put(&o, p->strs.arena + p->strs.off[i], p->strs.len[i]);
    }
    if (p->time_nanos)
        ob_field_varint(&o, PF_TIME_NANOS, (uint64_t)p->time_nanos);
    if (p->duration_nanos)
        ob_field_varint(&o, PF_DURATION_NANOS, (uint64_t)p->duration_nanos);
    if (p->period_type[0] || p->period_type[1])
        ob_value_type(&o, PF_PERIOD_TYPE, p->period_type);
    if (p->period)
        ob_field_varint(&o, PF_PERIOD, (uint64_t)p->period);
    for (size_t i = 0; i < p->n_comments; i++)
        ob_field_varint(&o, PF_COMMENT, (uint64_t)p->comments[i]);
    if (p->default_type)
        ob_field_varint(&o, PF_DEFAULT_SAMPLE_TYPE, (uint64_t)p->default_type);
    if (o.failed) {
        skpx_free(o.b);
        return SKP_ENOMEM;
    }
    if (!gzip) {
        *out = o.b;
        *out_len = o.len;
        return SKP_OK;
    }
    skp_err err = gzip_buf(o.b, o.len, out, out_len);
    skpx_free(o.b);
    return err;
}
