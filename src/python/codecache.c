/* codecache.c - see codecache.h. */
#include "python/codecache.h"

#include <string.h>

#include "common/alloc.h"

static size_t set_of(uintptr_t code)
{
    /* code objects are 16-byte aligned heap objects: drop the low bits, mix the rest */
    uint64_t h = (uint64_t)(code >> 4) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 56) % SKP_PY_CODE_CACHE_SETS;
}

static bool key_eq(const struct skp__pycode_key *a, const struct skp__pycode_key *b)
{
    return a->code == b->code && a->filename == b->filename && a->name == b->name &&
           a->linetable == b->linetable && a->firstlineno == b->firstlineno;
}

static void entry_clear(struct skp__pycode_entry *e)
{
    skpx_free(e->label);
    skpx_free(e->table);
    memset(e, 0, sizeof(*e));
}

skp_err skp__pycode_cache_init(struct skp__pycode_cache *c)
{
    memset(c, 0, sizeof(*c));
    c->ways = skpx_calloc(SKP_PY_CODE_CACHE_SETS * SKP_PY_CODE_CACHE_WAYS, sizeof(*c->ways));
    return c->ways ? SKP_OK : SKP_ENOMEM;
}

void skp__pycode_cache_cleanup(struct skp__pycode_cache *c)
{
    if (!c->ways)
        return;
    for (size_t i = 0; i < SKP_PY_CODE_CACHE_SETS * SKP_PY_CODE_CACHE_WAYS; i++)
        entry_clear(&c->ways[i]);
    skpx_free(c->ways);
    c->ways = NULL;
}

struct skp__pycode_entry *skp__pycode_cache_find(struct skp__pycode_cache *c,
                                                 const struct skp__pycode_key *key)
{
    struct skp__pycode_entry *set = &c->ways[set_of(key->code) * SKP_PY_CODE_CACHE_WAYS];
    for (size_t w = 0; w < SKP_PY_CODE_CACHE_WAYS; w++) {
        if (set[w].used && key_eq(&set[w].key, key)) {
            set[w].used = ++c->clock;
            c->hits++;
            return &set[w];
        }
    }
    c->misses++;
    return NULL;
}

struct skp__pycode_entry *skp__pycode_cache_find_addr(struct skp__pycode_cache *c, uintptr_t code)
{
    struct skp__pycode_entry *set = &c->ways[set_of(code) * SKP_PY_CODE_CACHE_WAYS];
    struct skp__pycode_entry *best = NULL;
    for (size_t w = 0; w < SKP_PY_CODE_CACHE_WAYS; w++) {
        if (set[w].used && set[w].key.code == code && (!best || set[w].used > best->used))
            best = &set[w];
    }
    if (best)
        best->used = ++c->clock;
    return best;
}

struct skp__pycode_entry *skp__pycode_cache_insert(struct skp__pycode_cache *c,
                                                   const struct skp__pycode_key *key,
                                                   int firsttraceable, char *label,
                                                   uint32_t label_len, uint8_t *table,
                                                   uint32_t table_len)
{
    struct skp__pycode_entry *set = &c->ways[set_of(key->code) * SKP_PY_CODE_CACHE_WAYS];
    struct skp__pycode_entry *victim = &set[0];
    for (size_t w = 0; w < SKP_PY_CODE_CACHE_WAYS; w++) {
        if (!set[w].used) {
            victim = &set[w];
            break;
        }
        if (set[w].used < victim->used)
            victim = &set[w];
    }
    if (victim->used)
        c->evictions++;
    entry_clear(victim);
    victim->key = *key;
    victim->firsttraceable = firsttraceable;
    victim->label = label;
    victim->label_len = label_len;
    victim->table = table;
    victim->table_len = table_len;
    victim->memo_addr = -1;
    victim->watch_slot = -1;
    victim->used = ++c->clock;
    return victim;
}

size_t skp__pycode_cache_count(const struct skp__pycode_cache *c)
{
    size_t n = 0;
    for (size_t i = 0; c->ways && i < SKP_PY_CODE_CACHE_SETS * SKP_PY_CODE_CACHE_WAYS; i++)
        n += c->ways[i].used != 0;
    return n;
}
