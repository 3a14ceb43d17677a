/* store_stack_cache.h - the caches of stacks and frames each backend's store object keeps.
 * The bounded stack cache: a stack's frame ids by its id (store_get_stack, the readers) and by
 * the hash of its frame ids (ingest's de-duplication), in one pool of at most
 * STORE_STACK_POOL_MAX frame ids; the cache is cleared when the pool is full. Only a cache: a
 * stack it does not hold is read from the database. The frame signatures read back
 * (store_get_frame), kept until the store closes (the pointers it hands out stay valid).
 *
 * Threading: owned by one store object, on that store's thread. */
#ifndef SKP_SERVER_STORE_STACK_CACHE_H
#define SKP_SERVER_STORE_STACK_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/map.h"
#include "skyprof/skp_err.h"

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

/* Frame id → its signature. Zero-initialised: empty. */
struct store_frame_sigs {
    struct skpx_u64map idx; /* id → index in sigs */
    char **sigs;
    size_t n, cap;
};

/* Frees every signature; the cache is empty afterwards. */
void store_frame_sigs_cleanup(struct store_frame_sigs *c);
/* The signature of frame `id` into *sig (held until cleanup): false when not held. */
bool store_frame_sigs_get(const struct store_frame_sigs *c, uint32_t id, const char **sig);
/* Keeps a copy of sig as frame `id`'s unless it holds one; *out (may be NULL) gets the one kept.
 * Errors: SKP_ENOMEM. */
SKP_MUST_CHECK skp_err store_frame_sigs_add(struct store_frame_sigs *c, uint32_t id,
                                            const char *sig, const char **out);

#endif
