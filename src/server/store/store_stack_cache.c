/* store_stack_cache.c - the stack and frame caches of store_stack_cache.h. */
#include "server/store/store_stack_cache.h"

#include <string.h>

#include "common/alloc.h"
#include "common/grow.h"

void store_stack_cache_clear(struct store_stack_cache *c)
{
    c->n_stacks = 0;
    c->pool_len = 0;
    skpx_u64map_clear(&c->by_hash);
    skpx_u64map_clear(&c->by_id);
}

void store_stack_cache_cleanup(struct store_stack_cache *c)
{
    skpx_u64map_cleanup(&c->by_hash);
    skpx_u64map_cleanup(&c->by_id);
    skpx_free(c->stacks);
    skpx_free(c->pool);
    memset(c, 0, sizeof(*c));
}

const uint32_t *store_stack_cache_add(struct store_stack_cache *c, uint32_t id, const uint32_t *ids,
                                      size_t n)
{
    uint64_t idx;
    if (skpx_u64map_get(&c->by_id, id, &idx))
        return c->pool + c->stacks[idx].off;
    if (n > STORE_STACK_POOL_MAX / 4)
        return NULL;
    if (c->pool_len + n > STORE_STACK_POOL_MAX)
        store_stack_cache_clear(c);
    /* Allocated even for an empty first stack (room for one id at least): its location must not
     * be NULL + 0. */
    size_t need = c->pool_len + n;
    if (skpx_grow(&c->pool, &c->pool_cap, need ? need : 1, sizeof(*c->pool), 4096))
        return NULL;
    if (skpx_grow(&c->stacks, &c->cap_stacks, c->n_stacks + 1, sizeof(*c->stacks), 256))
        return NULL;
    size_t at = c->n_stacks;
    uint64_t hash = skpx_hash_u32s(ids, n), dummy;
    if (skpx_u64map_put(&c->by_id, id, at) != SKP_OK)
        return NULL;
    if (!skpx_u64map_get(&c->by_hash, hash, &dummy) &&
        skpx_u64map_put(&c->by_hash, hash, at) != SKP_OK) {
        store_stack_cache_clear(c); /* keep both indexes consistent */
        return NULL;
    }
    struct store_stack_entry *e = &c->stacks[at];
    e->id = id;
    e->n = (uint32_t)n;
    e->off = c->pool_len;
    if (n)
        memcpy(c->pool + c->pool_len, ids, n * sizeof(*ids));
    c->pool_len += n;
    c->n_stacks++;
    return c->pool + e->off;
}

bool store_stack_cache_find(const struct store_stack_cache *c, const uint32_t *ids, size_t n,
                            uint32_t *out)
{
    uint64_t idx;
    if (!skpx_u64map_get(&c->by_hash, skpx_hash_u32s(ids, n), &idx))
        return false;
    const struct store_stack_entry *e = &c->stacks[idx];
    if (e->n != n || (n && memcmp(c->pool + e->off, ids, n * sizeof(*ids)) != 0))
        return false;
    *out = e->id;
    return true;
}

bool store_stack_cache_get(const struct store_stack_cache *c, uint32_t id, const uint32_t **frames,
                           size_t *n)
{
    uint64_t idx;
    if (!skpx_u64map_get(&c->by_id, id, &idx))
        return false;
    *frames = c->pool + c->stacks[idx].off;
    *n = c->stacks[idx].n;
    return true;
}

void store_frame_sigs_cleanup(struct store_frame_sigs *c)
{
    skpx_u64map_cleanup(&c->idx);
    for (size_t i = 0; i < c->n; i++)
        skpx_free(c->sigs[i]);
    skpx_free(c->sigs);
    memset(c, 0, sizeof(*c));
}

bool store_frame_sigs_get(const struct store_frame_sigs *c, uint32_t id, const char **sig)
{
    uint64_t idx;
    if (!skpx_u64map_get(&c->idx, id, &idx))
        return false;
    *sig = c->sigs[idx];
    return true;
}

skp_err store_frame_sigs_add(struct store_frame_sigs *c, uint32_t id, const char *sig,
                             const char **out)
{
    const char *held;
    if (store_frame_sigs_get(c, id, &held)) {
        if (out)
            *out = held;
        return SKP_OK;
    }
    char *copy = skpx_strdup(sig);
    if (!copy)
        return SKP_ENOMEM;
    if (skpx_grow(&c->sigs, &c->cap, c->n + 1, sizeof(*c->sigs), 256) ||
        skpx_u64map_put(&c->idx, id, c->n) != SKP_OK) {
        skpx_free(copy);
        return SKP_ENOMEM;
    }
    c->sigs[c->n++] = copy;
    if (out)
        *out = copy;
    return SKP_OK;
}
