/* codecache.h - bounded cache: code object address -> ("<filename>.<name>", location table).
 * Filled by the stack reader from safe copies of code objects; never touches live objects.
 * An entry is valid for a code object only while the code's co_filename, co_name, co_linetable
 * and co_firstlineno still hold the values it was built from (a freed code object's address can
 * be reused; the reader re-reads these fields for every sample and compares).
 * Set-associative (SKP_PY_CODE_CACHE_WAYS ways), least recently used way evicted.
 * Single-threaded: each reader owns its cache. */
#ifndef SKP_PYTHON_CODECACHE_H
#define SKP_PYTHON_CODECACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "skyprof/skp_err.h"

/* 256 sets x 4 ways: a service's hot code is typically a few hundred code objects. */
#define SKP_PY_CODE_CACHE_SETS 256
#define SKP_PY_CODE_CACHE_WAYS 4
/* Longest "<filename>.<name>" label kept (longer ones are truncated). */
#define SKP_PY_LABEL_MAX 2048
/* Largest location table copied; a code object with a bigger one reports its first line. */
#define SKP_PY_LINETABLE_MAX (64 * 1024)

struct skp__pycode_key {
    uintptr_t code;
    uintptr_t filename;
    uintptr_t name;
    uintptr_t linetable;
    int firstlineno;
};

struct skp__pycode_entry {
    struct skp__pycode_key key;
    int firsttraceable; /* first code unit at which a frame counts as complete */
    char *label;        /* owned; "<filename>.<name>", not NUL-terminated */
    uint32_t label_len;
    uint8_t *table; /* owned copy of co_linetable (NULL if too big/unreadable) */
    uint32_t table_len;
    int watch_slot; /* codewatch slot, -1 = none requested */
    uint16_t watch_gen;
    int64_t watch_requested_ns; /* when the watch was last requested */
    int memo_addr;              /* last (addr -> line) lookup, -1 = none */
    int memo_line;
    uint64_t used; /* LRU stamp; 0 = empty way */
};

struct skp__pycode_cache {
    struct skp__pycode_entry *ways; /* owned; SETS * WAYS entries */
    uint64_t clock;
    uint64_t hits, misses, evictions;
};

/* Allocates the (empty) table. Errors: SKP_ENOMEM. */
SKP_MUST_CHECK skp_err skp__pycode_cache_init(struct skp__pycode_cache *c);
/* Frees every entry. Safe on a zeroed or failed cache. */
void skp__pycode_cache_cleanup(struct skp__pycode_cache *c);
/* The entry whose key equals *key, or NULL. Marks it used. */
struct skp__pycode_entry *skp__pycode_cache_find(struct skp__pycode_cache *c,
                                                 const struct skp__pycode_key *key);
/* The most recently used entry for code address `code` whatever the rest of its key, or NULL.
 * Marks it used. (Callers prove it current by other means: codewatch.) */
struct skp__pycode_entry *skp__pycode_cache_find_addr(struct skp__pycode_cache *c, uintptr_t code);
/* Inserts an entry for *key, taking ownership of `label` and `table` (both freed with skpx_free,
 * also on failure), evicting the least recently used way of its set. Returns the entry. */
struct skp__pycode_entry *skp__pycode_cache_insert(struct skp__pycode_cache *c,
                                                   const struct skp__pycode_key *key,
                                                   int firsttraceable, char *label,
                                                   uint32_t label_len, uint8_t *table,
                                                   uint32_t table_len);
/* Number of live entries. */
size_t skp__pycode_cache_count(const struct skp__pycode_cache *c);

#endif
