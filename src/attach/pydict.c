/* pydict.c - dicts, sets, instance attributes, type names and small ints of another process's
 * CPython, read from raw memory (pydict.h).
 *
 * Design. A dict is read as: its header (one read), its keys object's header (one read), then
 * the entry array in one read (dk_nentries entries, bounded) and, for a split table, the values
 * array in one more. Before any entry is used the keys header must agree with itself: the index
 * width follows from dk_log2_size, so dk_log2_index_bytes is implied by it, and dk_nentries is
 * at most two thirds of the table size (CPython's usable fraction). Keys are compared by content
 * (compact ASCII str objects only), read in batches of ATTACH_READV_MAX; the target's hash
 * secret is unknown, so the index table is never probed. A set is its table of (key, hash)
 * slots: NULL keys are empty and hash -1 marks a deleted slot (CPython's dummy). */
#include "attach/pydict.h"

#include <string.h>

#include "common/rawload.h"
#include "common/alloc.h"

/* Bytes of each header copied (every offset a layout gives must fit: checked by layout_ok). */
#define DICT_HDR 64
#define KEYS_HDR 64

static bool layout_ok(const struct attach_pyobj_layout *l)
{
    const size_t p = sizeof(uintptr_t);
    return l->dict_keys + p <= DICT_HDR && l->dict_values + p <= DICT_HDR &&
           l->dict_used + p <= DICT_HDR && l->dk_nentries + p <= KEYS_HDR &&
           l->dk_log2_size < KEYS_HDR && l->dk_log2_index_bytes < KEYS_HDR &&
           l->dk_kind < KEYS_HDR && l->dk_indices <= KEYS_HDR && l->dk_entry_general >= 2 * p &&
           l->dk_entry_general <= 64 && l->dk_entry_unicode >= 2 * p && l->dk_entry_unicode <= 64 &&
           l->dke_general_key + p <= l->dk_entry_general &&
           l->dke_general_value + p <= l->dk_entry_general &&
           l->dke_unicode_key + p <= l->dk_entry_unicode &&
           l->dke_unicode_value + p <= l->dk_entry_unicode && l->set_entry >= p &&
           l->set_entry <= 64 && l->setentry_key + p <= l->set_entry &&
           l->setentry_hash + p <= l->set_entry && l->str_ascii_size <= 128 &&
           l->str_length + 8 <= l->str_ascii_size && l->str_state + 4 <= l->str_ascii_size &&
           l->obj_type + p <= l->str_ascii_size && l->set_mask + p <= DICT_HDR &&
           l->set_table + p <= DICT_HDR && l->tp_flags + p <= 512 && l->tp_name + p <= 512 &&
           l->tp_base + p <= 512 && l->ht_cached_keys + p <= 4096 && l->var_size + p <= 64 &&
           l->long_digits <= 64 && (l->long_digit_size == 2 || l->long_digit_size == 4) &&
           l->long_shift > 0 && l->long_shift < 32;
}

/* ---------------------------------------------------------------------------------------------
 * the keys object
 * ------------------------------------------------------------------------------------------- */

struct keys_view {
    int kind;
    size_t n; /* entries copied */
    size_t entry_size, key_off, value_off;
    uint8_t *entries; /* owned: n * entry_size bytes */
};

/* Reads and validates the keys object at `keys` and copies its entry array. */
static skp_err read_keys(struct attach_pyobjs *o, uintptr_t keys, struct keys_view *kv)
{
    const struct attach_pyobj_layout *l = o->l;
    memset(kv, 0, sizeof(*kv));
    uint8_t hdr[KEYS_HDR];
    if (!skpx_plausible_ptr(keys) || !attach_remote_read(o->mem, keys, hdr, l->dk_indices))
        return SKP_EINVAL;
    unsigned log2_size = hdr[l->dk_log2_size];
    unsigned log2_index_bytes = hdr[l->dk_log2_index_bytes];
    int kind = hdr[l->dk_kind];
    int64_t nentries = skpx_load_i64(hdr, l->dk_nentries);
    /* a table of 2**log2_size indices, each 1, 2, 4 or 8 bytes wide by the table's size */
    unsigned log2_width = log2_size <= 7 ? 0 : log2_size <= 15 ? 1 : log2_size <= 31 ? 2 : 3;
    if (log2_size < 3 || log2_size > 30 || log2_index_bytes != log2_size + log2_width)
        return SKP_EINVAL;
    if (kind != l->dk_kind_general && kind != l->dk_kind_split && kind != 1)
        return SKP_EINVAL;
    int64_t usable = ((int64_t)1 << log2_size) * 2 / 3;
    if (nentries < 0 || nentries > usable || nentries > ATTACH_DICT_ENTRIES_MAX)
        return SKP_EINVAL;
    kv->kind = kind;
    if (kind == l->dk_kind_general) {
        kv->entry_size = l->dk_entry_general;
        kv->key_off = l->dke_general_key;
        kv->value_off = l->dke_general_value;
    } else {
        kv->entry_size = l->dk_entry_unicode;
        kv->key_off = l->dke_unicode_key;
        kv->value_off = l->dke_unicode_value;
    }
    kv->n = (size_t)nentries;
    if (kv->n == 0)
        return SKP_OK;
    size_t bytes = kv->n * kv->entry_size;
    kv->entries = skpx_malloc(bytes);
    if (!kv->entries)
        return SKP_ENOMEM;
    uintptr_t at = keys + l->dk_indices + ((uintptr_t)1 << log2_index_bytes);
    if (!attach_remote_read(o->mem, at, kv->entries, bytes)) {
        skpx_free(kv->entries);
        kv->entries = NULL;
        return SKP_EINVAL;
    }
    return SKP_OK;
}

static uintptr_t entry_key(const struct keys_view *kv, size_t i)
{
    return skpx_load_ptr(kv->entries + i * kv->entry_size, kv->key_off);
}

static uintptr_t entry_value(const struct keys_view *kv, size_t i)
{
    return skpx_load_ptr(kv->entries + i * kv->entry_size, kv->value_off);
}

/* The values of a split table (n pointers at `values`), owned by the caller (skpx_free). */
static uintptr_t *read_values(struct attach_pyobjs *o, uintptr_t values, size_t n)
{
    uintptr_t *v = skpx_malloc(n ? n * sizeof(*v) : sizeof(*v));
    if (!v)
        return NULL;
    if (n &&
        (!skpx_plausible_ptr(values) || !attach_remote_read(o->mem, values, v, n * sizeof(*v)))) {
        skpx_free(v);
        return NULL;
    }
    return v;
}

/* ---------------------------------------------------------------------------------------------
 * str keys
 * ------------------------------------------------------------------------------------------- */

/* Which of keys[0..n) are compact ASCII str objects equal to `want` (len bytes): sets match[i].
 * Reads in batches; a key that cannot be read does not match. */
static void match_keys(struct attach_pyobjs *o, const uintptr_t *keys, size_t n, const char *want,
                       size_t len, bool *match)
{
    const struct attach_pyobj_layout *l = o->l;
    size_t slot = l->str_ascii_size + len;
    uint8_t *buf = skpx_malloc(ATTACH_READV_MAX * slot);
    for (size_t i = 0; i < n; i++)
        match[i] = false;
    if (!buf)
        return;
    for (size_t base = 0; base < n; base += ATTACH_READV_MAX) {
        size_t m = n - base < ATTACH_READV_MAX ? n - base : ATTACH_READV_MAX;
        struct iovec loc[ATTACH_READV_MAX];
        struct iovec rem[ATTACH_READV_MAX];
        bool ok[ATTACH_READV_MAX];
        size_t k_used = 0;
        size_t idx[ATTACH_READV_MAX];
        for (size_t k = 0; k < m; k++) {
            uintptr_t key = keys[base + k];
            if (!skpx_plausible_ptr(key))
                continue;
            loc[k_used] = (struct iovec){buf + k_used * slot, slot};
            rem[k_used] = (struct iovec){(void *)key, slot};
            idx[k_used] = base + k;
            k_used++;
        }
        if (!k_used)
            continue;
        attach_remote_readv(o->mem, loc, rem, k_used, ok);
        for (size_t k = 0; k < k_used; k++) {
            if (!ok[k])
                continue;
            const uint8_t *s = buf + k * slot;
            if (o->str_type && skpx_load_ptr(s, l->obj_type) != o->str_type)
                continue;
            int64_t length = skpx_load_i64(s, l->str_length);
            uint32_t state;
            memcpy(&state, s + l->str_state, sizeof(state));
            bool compact = (state >> 5) & 1;
            bool ascii = (state >> 6) & 1;
            if (!compact || !ascii || length != (int64_t)len)
                continue;
            if (memcmp(s + l->str_ascii_size, want, len) == 0)
                match[idx[k]] = true;
        }
    }
    skpx_free(buf);
}

bool attach_pystr_ascii(struct attach_pyobjs *o, uintptr_t obj, char *buf, size_t cap)
{
    const struct attach_pyobj_layout *l = o->l;
    uint8_t hdr[128];
    if (cap == 0 || !layout_ok(l) || !skpx_plausible_ptr(obj) ||
        !attach_remote_read(o->mem, obj, hdr, l->str_ascii_size))
        return false;
    if (o->str_type && skpx_load_ptr(hdr, l->obj_type) != o->str_type)
        return false;
    int64_t length = skpx_load_i64(hdr, l->str_length);
    uint32_t state;
    memcpy(&state, hdr + l->str_state, sizeof(state));
    if (!((state >> 5) & 1) || !((state >> 6) & 1) || length < 0 || (uint64_t)length >= cap)
        return false;
    if (!attach_remote_read(o->mem, obj + l->str_ascii_size, buf, (size_t)length))
        return false;
    buf[length] = 0;
    for (int64_t i = 0; i < length; i++)
        if ((unsigned char)buf[i] >= 0x80)
            return false;
    return true;
}

/* ---------------------------------------------------------------------------------------------
 * dicts
 * ------------------------------------------------------------------------------------------- */

/* Looks `key` up in the keys object `keys` whose values are in `values` (split) or in the
 * entries (combined: values == 0). */
static skp_err lookup(struct attach_pyobjs *o, uintptr_t keys, uintptr_t values, bool split,
                      const char *key, uintptr_t *out)
{
    size_t len = strlen(key);
    if (len == 0 || len > ATTACH_DICT_KEY_MAX)
        return SKP_ENOTFOUND;
    struct keys_view kv;
    skp_err err = read_keys(o, keys, &kv);
    if (err)
        return err;
    if (split && kv.kind != o->l->dk_kind_split) {
        skpx_free(kv.entries);
        return SKP_EINVAL;
    }
    uintptr_t *k = skpx_malloc((kv.n ? kv.n : 1) * sizeof(*k));
    bool *match = skpx_malloc(kv.n ? kv.n : 1);
    uintptr_t *vals = split ? read_values(o, values, kv.n) : NULL;
    if (!k || !match || (split && !vals)) {
        err = !k || !match ? SKP_ENOMEM : SKP_EINVAL;
        goto out;
    }
    for (size_t i = 0; i < kv.n; i++)
        k[i] = entry_key(&kv, i);
    match_keys(o, k, kv.n, key, len, match);
    err = SKP_ENOTFOUND;
    /* the last match wins: a key deleted and set again appears once live (deleted entries have
     * a NULL value in a combined table, NULL in the values of a split one) */
    for (size_t i = kv.n; i-- > 0;) {
        if (!match[i])
            continue;
        uintptr_t v = split ? vals[i] : entry_value(&kv, i);
        if (!v)
            continue;
        if (!skpx_plausible_ptr(v)) {
            err = SKP_EINVAL;
            break;
        }
        *out = v;
        err = SKP_OK;
        break;
    }
out:
    SKPX_FREE_ALL(k, match, vals, kv.entries);
    return err;
}

/* The dict header at `dict`: keys and values pointers. */
static skp_err dict_header(struct attach_pyobjs *o, uintptr_t dict, uintptr_t *keys,
                           uintptr_t *values)
{
    const struct attach_pyobj_layout *l = o->l;
    uint8_t hdr[DICT_HDR];
    if (!layout_ok(l) || !skpx_plausible_ptr(dict) ||
        !attach_remote_read(o->mem, dict, hdr, l->dict_values + sizeof(uintptr_t)))
        return SKP_EINVAL;
    *keys = skpx_load_ptr(hdr, l->dict_keys);
    *values = skpx_load_ptr(hdr, l->dict_values);
    int64_t used = skpx_load_i64(hdr, l->dict_used);
    if (!skpx_plausible_ptr(*keys) || (*values && !skpx_plausible_ptr(*values)) || used < 0 ||
        used > ATTACH_DICT_ENTRIES_MAX)
        return SKP_EINVAL;
    return SKP_OK;
}

skp_err attach_pydict_get(struct attach_pyobjs *o, uintptr_t dict, const char *key, uintptr_t *out)
{
    *out = 0;
    uintptr_t keys = 0;
    uintptr_t values = 0;
    skp_err err = dict_header(o, dict, &keys, &values);
    if (err)
        return err;
    return lookup(o, keys, values, values != 0, key, out);
}

skp_err attach_pydict_items(struct attach_pyobjs *o, uintptr_t dict, uintptr_t *keys_out,
                            uintptr_t *values_out, size_t cap, size_t *n)
{
    *n = 0;
    uintptr_t keys = 0;
    uintptr_t values = 0;
    skp_err err = dict_header(o, dict, &keys, &values);
    if (err)
        return err;
    struct keys_view kv;
    err = read_keys(o, keys, &kv);
    if (err)
        return err;
    uintptr_t *vals = NULL;
    if (values) {
        vals = read_values(o, values, kv.n);
        if (!vals || kv.kind != o->l->dk_kind_split) {
            skpx_free(vals);
            skpx_free(kv.entries);
            return SKP_EINVAL;
        }
    }
    for (size_t i = 0; i < kv.n && *n < cap; i++) {
        uintptr_t k = entry_key(&kv, i);
        uintptr_t v = vals ? vals[i] : entry_value(&kv, i);
        if (!k || !v)
            continue; /* a deleted entry */
        if (!skpx_plausible_ptr(k) || !skpx_plausible_ptr(v)) {
            err = SKP_EINVAL;
            break;
        }
        if (keys_out)
            keys_out[*n] = k;
        if (values_out)
            values_out[*n] = v;
        (*n)++;
    }
    skpx_free(vals);
    skpx_free(kv.entries);
    if (err)
        *n = 0;
    return err;
}

/* ---------------------------------------------------------------------------------------------
 * instance attributes, types
 * ------------------------------------------------------------------------------------------- */

skp_err attach_pyobj_getattr(struct attach_pyobjs *o, uintptr_t obj, const char *name,
                             uintptr_t *out)
{
    const struct attach_pyobj_layout *l = o->l;
    *out = 0;
    uintptr_t type = 0;
    unsigned long flags = 0;
    if (!layout_ok(l) || !skpx_plausible_ptr(obj) ||
        !attach_remote_read(o->mem, obj + l->obj_type, &type, sizeof(type)) ||
        !skpx_plausible_ptr(type) ||
        !attach_remote_read(o->mem, type + l->tp_flags, &flags, sizeof(flags)))
        return SKP_EINVAL;
    if (!(flags & l->tpflag_managed_dict))
        return SKP_ENOTFOUND;
    /* the two pointers CPython keeps before a managed-dict object (and its GC header) */
    uintptr_t pre[2] = {0, 0};
    uintptr_t lo = obj + (uintptr_t)l->managed_values;
    if (l->managed_dict != l->managed_values + (ptrdiff_t)sizeof(uintptr_t) ||
        !attach_remote_read(o->mem, lo, pre, sizeof(pre)))
        return SKP_EINVAL;
    uintptr_t values = pre[0];
    uintptr_t dict = pre[1];
    if (values) {
        uintptr_t keys = 0;
        if (!attach_remote_read(o->mem, type + l->ht_cached_keys, &keys, sizeof(keys)))
            return SKP_EINVAL;
        return lookup(o, keys, values, true, name, out);
    }
    if (dict)
        return attach_pydict_get(o, dict, name, out);
    return SKP_ENOTFOUND; /* no attribute set yet */
}

bool attach_pytype_name(struct attach_pyobjs *o, uintptr_t type, char *buf, size_t cap)
{
    const struct attach_pyobj_layout *l = o->l;
    uintptr_t name = 0;
    if (cap == 0 || !layout_ok(l) || !skpx_plausible_ptr(type) ||
        !attach_remote_read(o->mem, type + l->tp_name, &name, sizeof(name)) || name < 4096)
        return false;
    /* tp_name is a C string anywhere (often .rodata): read it in small steps so one near the
     * end of a mapping still reads */
    size_t got = 0;
    while (got + 1 < cap) {
        size_t step = 16;
        if (step > cap - 1 - got)
            step = cap - 1 - got;
        if (!attach_remote_read(o->mem, name + got, buf + got, step))
            return false;
        void *nul = memchr(buf + got, 0, step);
        if (nul)
            return true;
        got += step;
    }
    buf[cap - 1] = 0;
    return true;
}

bool attach_pyobj_type_name(struct attach_pyobjs *o, uintptr_t obj, char *buf, size_t cap)
{
    uintptr_t type = 0;
    if (!skpx_plausible_ptr(obj) ||
        !attach_remote_read(o->mem, obj + o->l->obj_type, &type, sizeof(type)))
        return false;
    return attach_pytype_name(o, type, buf, cap);
}

bool attach_pyobj_is_a(struct attach_pyobjs *o, uintptr_t obj, const char *name)
{
    uintptr_t type = 0;
    if (!skpx_plausible_ptr(obj) ||
        !attach_remote_read(o->mem, obj + o->l->obj_type, &type, sizeof(type)))
        return false;
    char buf[ATTACH_TYPE_NAME_MAX];
    for (int depth = 0; depth < 8 && skpx_plausible_ptr(type); depth++) {
        if (attach_pytype_name(o, type, buf, sizeof(buf)) && strcmp(buf, name) == 0)
            return true;
        if (!attach_remote_read(o->mem, type + o->l->tp_base, &type, sizeof(type)))
            return false;
    }
    return false;
}

bool attach_pylong_value(struct attach_pyobjs *o, uintptr_t obj, uint64_t *out)
{
    const struct attach_pyobj_layout *l = o->l;
    uint8_t buf[64 + 3 * 4];
    size_t need = l->long_digits + 3 * l->long_digit_size;
    if (!layout_ok(l) || !skpx_plausible_ptr(obj) || need > sizeof(buf) ||
        !attach_remote_read(o->mem, obj, buf, l->long_digits + l->long_digit_size))
        return false;
    int64_t size = skpx_load_i64(buf, l->var_size);
    if (size < 0 || (uint64_t)size * l->long_shift > 62)
        return false;
    /* a layout with a small long_shift allows more digits than buf holds: refuse those */
    size_t all = l->long_digits + (size_t)size * l->long_digit_size;
    if (size > 1 && (all > sizeof(buf) || !attach_remote_read(o->mem, obj, buf, all)))
        return false;
    uint64_t v = 0;
    for (int64_t i = size; i-- > 0;) {
        uint32_t d = 0;
        if (l->long_digit_size == 4) {
            memcpy(&d, buf + l->long_digits + (size_t)i * 4, 4);
        } else {
            uint16_t d16;
            memcpy(&d16, buf + l->long_digits + (size_t)i * 2, 2);
            d = d16;
        }
        if (d >> l->long_shift)
            return false;
        v = (v << l->long_shift) | d;
    }
    *out = v;
    return true;
}

/* ---------------------------------------------------------------------------------------------
 * sets
 * ------------------------------------------------------------------------------------------- */

skp_err attach_pyset_items(struct attach_pyobjs *o, uintptr_t set, uintptr_t *keys, size_t cap,
                           size_t *n)
{
    const struct attach_pyobj_layout *l = o->l;
    *n = 0;
    uint8_t hdr[DICT_HDR];
    size_t hdr_len = (l->set_mask > l->set_table ? l->set_mask : l->set_table) + sizeof(uintptr_t);
    if (!layout_ok(l) || !skpx_plausible_ptr(set) || !attach_remote_read(o->mem, set, hdr, hdr_len))
        return SKP_EINVAL;
    int64_t mask = skpx_load_i64(hdr, l->set_mask);
    uintptr_t table = skpx_load_ptr(hdr, l->set_table);
    /* a table has a power-of-two number of slots, at least 8 (the set's own small table) */
    if (mask < 7 || mask > ATTACH_DICT_ENTRIES_MAX - 1 || ((mask + 1) & mask) != 0 ||
        !skpx_plausible_ptr(table))
        return SKP_EINVAL;
    size_t slots = (size_t)mask + 1;
    uint8_t *t = skpx_malloc(slots * l->set_entry);
    if (!t)
        return SKP_ENOMEM;
    if (!attach_remote_read(o->mem, table, t, slots * l->set_entry)) {
        skpx_free(t);
        return SKP_EINVAL;
    }
    skp_err err = SKP_OK;
    for (size_t i = 0; i < slots && *n < cap; i++) {
        uintptr_t key = skpx_load_ptr(t + i * l->set_entry, l->setentry_key);
        int64_t hash = skpx_load_i64(t + i * l->set_entry, l->setentry_hash);
        if (!key || hash == -1)
            continue; /* empty, or deleted (the dummy key) */
        if (!skpx_plausible_ptr(key)) {
            err = SKP_EINVAL;
            break;
        }
        keys[(*n)++] = key;
    }
    skpx_free(t);
    if (err)
        *n = 0;
    return err;
}
