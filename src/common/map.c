/* map.c - open-addressing hash maps (linear probing, load factor <= 1/2), see map.h.
 * Design: keys are hashed once with a 64-bit multiply-xorshift mix; tables double when half
 * full. No deletion of single entries is needed (caches are cleared wholesale), which keeps
 * linear probing free of tombstones. */
#include "common/map.h"

#include <string.h>

#include "common/alloc.h"

#define MAP_MIN_CAP 16

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    return x;
}

uint64_t skpx_hash_bytes(const void *p, size_t n)
{
    /* Eight bytes per step (frame signatures are 50-100 bytes and hashed on every ingest
     * lookup), finished with a mix so the low bits spread well. In-memory only: the stored
     * stack hashes depend on skpx_hash_u32s alone. */
    const unsigned char *b = p;
    uint64_t h = UINT64_C(0xcbf29ce484222325) ^ (n * UINT64_C(0x9e3779b97f4a7c15));
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * UINT64_C(0xff51afd7ed558ccd);
        h ^= h >> 29;
    }
    uint64_t tail = 0;
    for (size_t k = 0; i + k < n; k++)
        tail |= (uint64_t)b[i + k] << (8 * k);
    h = (h ^ tail) * UINT64_C(0xc4ceb9fe1a85ec53);
    return mix64(h);
}

uint64_t skpx_hash_u32s(const uint32_t *v, size_t n)
{
    /* Stored in stacks.hash: never change this function without a schema migration that
     * recomputes the column. */
    uint64_t h = UINT64_C(0x9e3779b97f4a7c15) ^ (uint64_t)n;
    for (size_t i = 0; i < n; i++)
        h = mix64(h ^ ((uint64_t)v[i] + UINT64_C(0x9e3779b97f4a7c15) * (i + 1)));
    return h;
}

/* ---- u64 → u64 ---- */

void skpx_u64map_cleanup(struct skpx_u64map *m)
{
    if (!m)
        return;
    SKPX_FREE_ALL(m->keys, m->vals, m->used);
    memset(m, 0, sizeof(*m));
}

void skpx_u64map_clear(struct skpx_u64map *m)
{
    if (m->used)
        memset(m->used, 0, m->cap);
    m->n = 0;
}

bool skpx_u64map_get(const struct skpx_u64map *m, uint64_t key, uint64_t *val)
{
    if (!m->cap)
        return false;
    size_t mask = m->cap - 1;
    for (size_t i = mix64(key) & mask;; i = (i + 1) & mask) {
        if (!m->used[i])
            return false;
        if (m->keys[i] == key) {
            *val = m->vals[i];
            return true;
        }
    }
}

static void u64map_place(uint64_t *keys, uint64_t *vals, uint8_t *used, size_t cap, uint64_t key,
                         uint64_t val)
{
    size_t mask = cap - 1;
    size_t i = mix64(key) & mask;
    while (used[i] && keys[i] != key)
        i = (i + 1) & mask;
    keys[i] = key;
    vals[i] = val;
    used[i] = 1;
}

skp_err skpx_u64map_put(struct skpx_u64map *m, uint64_t key, uint64_t val)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : MAP_MIN_CAP;
        uint64_t *nk = skpx_malloc(ncap * sizeof(*nk));
        uint64_t *nv = skpx_malloc(ncap * sizeof(*nv));
        uint8_t *nu = skpx_calloc(ncap, 1);
        if (!nk || !nv || !nu) {
            SKPX_FREE_ALL(nk, nv, nu);
            return SKP_ENOMEM;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->used[i])
                u64map_place(nk, nv, nu, ncap, m->keys[i], m->vals[i]);
        SKPX_FREE_ALL(m->keys, m->vals, m->used);
        m->keys = nk;
        m->vals = nv;
        m->used = nu;
        m->cap = ncap;
    }
    size_t mask = m->cap - 1;
    size_t i = mix64(key) & mask;
    while (m->used[i] && m->keys[i] != key)
        i = (i + 1) & mask;
    if (!m->used[i])
        m->n++;
    m->keys[i] = key;
    m->vals[i] = val;
    m->used[i] = 1;
    return SKP_OK;
}

/* ---- string → u32 ---- */

void skpx_strmap_clear(struct skpx_strmap *m)
{
    for (size_t i = 0; i < m->cap; i++) {
        skpx_free(m->slots[i].key);
        m->slots[i].key = NULL;
    }
    m->n = 0;
}

void skpx_strmap_cleanup(struct skpx_strmap *m)
{
    if (!m)
        return;
    skpx_strmap_clear(m);
    skpx_free(m->slots);
    memset(m, 0, sizeof(*m));
}

bool skpx_strmap_find(const struct skpx_strmap *m, const char *key, uint32_t *val,
                      const char **stored)
{
    if (!m->cap)
        return false;
    uint64_t h = skpx_hash_bytes(key, strlen(key));
    size_t mask = m->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        const struct skpx_strmap_slot *s = &m->slots[i];
        if (!s->key)
            return false;
        if (s->hash == h && strcmp(s->key, key) == 0) {
            *val = s->val;
            if (stored)
                *stored = s->key;
            return true;
        }
    }
}

bool skpx_strmap_get(const struct skpx_strmap *m, const char *key, uint32_t *val)
{
    return skpx_strmap_find(m, key, val, NULL);
}

skp_err skpx_strmap_put(struct skpx_strmap *m, const char *key, uint32_t val)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : MAP_MIN_CAP;
        struct skpx_strmap_slot *ns = skpx_calloc(ncap, sizeof(*ns));
        if (!ns)
            return SKP_ENOMEM;
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->slots[i].key)
                continue;
            size_t j = m->slots[i].hash & (ncap - 1);
            while (ns[j].key)
                j = (j + 1) & (ncap - 1);
            ns[j] = m->slots[i];
        }
        skpx_free(m->slots);
        m->slots = ns;
        m->cap = ncap;
    }
    uint64_t h = skpx_hash_bytes(key, strlen(key));
    size_t mask = m->cap - 1;
    size_t i = h & mask;
    while (m->slots[i].key && !(m->slots[i].hash == h && strcmp(m->slots[i].key, key) == 0))
        i = (i + 1) & mask;
    if (m->slots[i].key) {
        m->slots[i].val = val;
        return SKP_OK;
    }
    char *copy = skpx_strdup(key);
    if (!copy)
        return SKP_ENOMEM;
    m->slots[i].key = copy;
    m->slots[i].hash = h;
    m->slots[i].val = val;
    m->n++;
    return SKP_OK;
}
