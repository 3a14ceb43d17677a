/* store_cache.h - small open-addressing hash maps used by the store's in-memory caches and by
 * the analyzer: u64 → u64 (ids, memo offsets) and string → u32 (frame signature / segment id /
 * task id → row id). Every map is created with a maximum entry count; callers decide what to
 * do when it is reached (the store clears the cache: it is only a cache). Single-threaded. */
#ifndef SKP_SERVER_STORE_CACHE_H
#define SKP_SERVER_STORE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "skyprof/skp_err.h"

/* ---- u64 → u64 ---- */

struct u64map {
    uint64_t *keys;            /* owned; slot is empty when used[i] == 0 */
    uint64_t *vals;            /* owned */
    uint8_t *used;             /* owned */
    size_t cap;                /* power of two (0 before the first put) */
    size_t n;                  /* entries */
};

/* Zero-initialised storage is a valid empty map; cleanup releases it (NULL ok). */
void u64map_cleanup(struct u64map *m);
/* Removes every entry, keeping the allocation. */
void u64map_clear(struct u64map *m);
/* Looks `key` up; returns true and sets *val when present. */
bool u64map_get(const struct u64map *m, uint64_t key, uint64_t *val);
/* Inserts or replaces. Errors: SKP_ENOMEM (map unchanged). */
SKP_MUST_CHECK skp_err u64map_put(struct u64map *m, uint64_t key, uint64_t val);

/* ---- string → u32 ---- */

struct strmap_slot {
    char *key;                 /* owned copy; NULL = empty */
    uint64_t hash;
    uint32_t val;
};

struct strmap {
    struct strmap_slot *slots; /* owned */
    size_t cap;                /* power of two (0 before the first put) */
    size_t n;
};

void strmap_cleanup(struct strmap *m);
/* Removes (and frees) every entry, keeping the slot array. */
void strmap_clear(struct strmap *m);
bool strmap_get(const struct strmap *m, const char *key, uint32_t *val);
/* Copies `key`. Errors: SKP_ENOMEM (map unchanged). */
SKP_MUST_CHECK skp_err strmap_put(struct strmap *m, const char *key, uint32_t val);

/* 64-bit hashes (not cryptographic; stable across runs and builds, so they can be stored). */
uint64_t skp_hash_bytes(const void *p, size_t n);
uint64_t skp_hash_u32s(const uint32_t *v, size_t n);

#endif
