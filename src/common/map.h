/* map.h - the open-addressing hash maps every component uses: u64 → u64 (ids, memo offsets) and
 * string → u32 (frame signature / segment id / task id / interned string → id).
 * One key-ownership rule: a map owns its keys — u64 keys by value, string keys as a copy made by
 * put and freed by clear/cleanup — so a caller's string never has to outlive the map, and a
 * pointer a map hands back (skpx_strmap_find) stays valid until the next clear/cleanup.
 * No single-entry deletion (maps are caches or append-only tables, cleared wholesale). Callers
 * bound their maps (count entries, clear or refuse at their maximum). Single-threaded. */
#ifndef SKP_COMMON_MAP_H
#define SKP_COMMON_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "skyprof/skp_err.h"

/* ---- u64 → u64 ---- */

struct skpx_u64map {
    uint64_t *keys; /* owned; slot is empty when used[i] == 0 */
    uint64_t *vals; /* owned */
    uint8_t *used;  /* owned */
    size_t cap;     /* power of two (0 before the first put) */
    size_t n;       /* entries */
};

/* Zero-initialised storage is a valid empty map; cleanup releases it (NULL ok). */
void skpx_u64map_cleanup(struct skpx_u64map *m);
/* Removes every entry, keeping the allocation. */
void skpx_u64map_clear(struct skpx_u64map *m);
/* Looks `key` up; returns true and sets *val when present. */
bool skpx_u64map_get(const struct skpx_u64map *m, uint64_t key, uint64_t *val);
/* Inserts or replaces. Errors: SKP_ENOMEM (map unchanged). */
SKP_MUST_CHECK skp_err skpx_u64map_put(struct skpx_u64map *m, uint64_t key, uint64_t val);

/* ---- string → u32 ---- */

struct skpx_strmap_slot {
    char *key; /* owned copy; NULL = empty */
    uint64_t hash;
    uint32_t val;
};

struct skpx_strmap {
    struct skpx_strmap_slot *slots; /* owned */
    size_t cap;                     /* power of two (0 before the first put) */
    size_t n;
};

void skpx_strmap_cleanup(struct skpx_strmap *m);
/* Removes (and frees) every entry, keeping the slot array. */
void skpx_strmap_clear(struct skpx_strmap *m);
bool skpx_strmap_get(const struct skpx_strmap *m, const char *key, uint32_t *val);
/* Like get, and also sets *stored (if not NULL) to the map's own copy of the key. */
bool skpx_strmap_find(const struct skpx_strmap *m, const char *key, uint32_t *val,
                      const char **stored);
/* Inserts or replaces; copies `key` (borrowed). Errors: SKP_ENOMEM (map unchanged). */
SKP_MUST_CHECK skp_err skpx_strmap_put(struct skpx_strmap *m, const char *key, uint32_t val);

/* 64-bit hashes (not cryptographic; stable across runs and builds, so they can be stored). */
uint64_t skpx_hash_bytes(const void *p, size_t n);
uint64_t skpx_hash_u32s(const uint32_t *v, size_t n);

#endif
