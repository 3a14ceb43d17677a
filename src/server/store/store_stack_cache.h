/* store_stack_cache.h - the bounded stack cache each backend's store object keeps: a stack's
 * frame ids by its id (store_get_stack, the readers) and by the hash of its frame ids (ingest's
 * de-duplication), in one pool of at most STORE_STACK_POOL_MAX frame ids; the cache is cleared
 * when the pool is full. Only a cache: a stack it does not hold is read from the database.
 *
 * Threading: owned by one store object, on that store's thread. */
#ifndef SKP_SERVER_STORE_STACK_CACHE_H
#define SKP_SERVER_STORE_STACK_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/map.h"

#define STORE_STACK_POOL_MAX (1u << 22) /* frame ids held by the stack cache (16 MB) */

/* One cached stack: its frame ids live in pool[off .. off+n). */
struct store_stack_entry {
    uint32_t id;
    uint32_t n;
    size_t off;
};

/* Zero-initialised: empty. */
struct store_stack_cache {
    struct store_stack_entry *stacks;
    size_t n_stacks, cap_stacks;
    uint32_t *pool;
    size_t pool_len, pool_cap;
    struct skpx_u64map by_hash; /* hash of the frame ids → index in stacks (its first entry) */
    struct skpx_u64map by_id;   /* id → index in stacks */
};

/* Forgets every stack (keeps the memory). */
void store_stack_cache_clear(struct store_stack_cache *c);
/* Frees the cache's memory; it is empty afterwards. */
void store_stack_cache_cleanup(struct store_stack_cache *c);
/* Adds stack `id` of the n frame ids (borrowed) unless held; returns where its frame ids are
 * held, or NULL when it is not cached (allocation failure, or too large for the pool). */
const uint32_t *store_stack_cache_add(struct store_stack_cache *c, uint32_t id, const uint32_t *ids,
                                      size_t n);
/* The id of the cached stack of exactly these n frame ids into *out: false when none. */
bool store_stack_cache_find(const struct store_stack_cache *c, const uint32_t *ids, size_t n,
                            uint32_t *out);
/* The frame ids of cached stack `id` (held by the cache until its next add or clear) into
 * *frames and *n: false when not cached. */
bool store_stack_cache_get(const struct store_stack_cache *c, uint32_t id, const uint32_t **frames,
                           size_t *n);

#endif
