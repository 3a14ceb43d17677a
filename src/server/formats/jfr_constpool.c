/* jfr_constpool.c - a chunk's constant pools (stack traces, methods, classes, symbols,
 * packages, threads, ...). The header points at the newest constant-pool event; each event
 * holds a delta back to the previous one (0 ends the chain), so a recording flushed many times
 * carries many pool events per chunk. Each event: size, type id 1, start time, duration,
 * delta, flush flag (a byte), pool count, then per pool: type id, count, (key, value)*.
 *
 * Values are not decoded here: the index records where each constant's value starts, and the
 * parser decodes a constant only when an event refers to it (most are never needed). A key
 * defined again in an older event keeps the newest definition. */
#include "server/formats/jfr_int.h"

#include <string.h>

#include "common/alloc.h"

#define JFR_MAX_POOL_EVENTS 1000000u /* a chain longer than this is a loop or a bomb */

static skp_err ensure_types(struct jfr_pools *p, uint32_t n)
{
    if (p->n_types >= n)
        return SKP_OK;
    struct skpx_u64map *m = skpx_realloc(p->by_type, (size_t)n * sizeof(*m));
    if (!m)
        return SKP_ENOMEM;
    memset(m + p->n_types, 0, (size_t)(n - p->n_types) * sizeof(*m));
    p->by_type = m;
    p->n_types = n;
    return SKP_OK;
}

skp_err jfr_pools_index(struct jfr_pools *p, const struct jfr_meta *m, const uint8_t *chunk,
                        size_t chunk_len, bool compressed, uint64_t first, struct jfr_error *err)
{
    jfr_pools_clear(p);
    skp_err e = ensure_types(p, m->n_types);
    if (e)
        return e;
    uint64_t pos = first;
    for (uint32_t n_events = 0;; n_events++) {
        if (n_events >= JFR_MAX_POOL_EVENTS)
            return jfr_fail(err, pos, "constant pools: more than %u pool events (a loop?)",
                            JFR_MAX_POOL_EVENTS);
        if (pos < JFR_HEADER_BYTES || pos >= chunk_len)
            return jfr_fail(err, pos, "constant pool event offset %llu is outside the chunk",
                            (unsigned long long)pos);
        struct jfr_cursor c = {
            .base = chunk, .p = chunk + pos, .end = chunk + chunk_len, .compressed = compressed};
        int64_t size = jfr_int(&c, 4);
        int64_t type = jfr_long(&c);
        if (c.bad || size <= 0 || (uint64_t)size > chunk_len - pos)
            return jfr_fail(err, pos, "constant pool event size %lld does not fit the chunk",
                            (long long)size);
        if (type != 1)
            return jfr_fail(err, pos, "expected a constant pool event (type 1), found type %lld",
                            (long long)type);
        c.end = chunk + pos + size;
        (void)jfr_long(&c); /* start time */
        (void)jfr_long(&c); /* duration */
        int64_t delta = jfr_long(&c);
        (void)jfr_u8(&c); /* flush */
        int64_t n_pools = jfr_int(&c, 4);
        if (c.bad || n_pools < 0 || (uint64_t)n_pools > jfr_left(&c))
            return jfr_fail(err, pos, "constant pool event: bad pool count %lld",
                            (long long)n_pools);
        for (int64_t i = 0; i < n_pools; i++) {
            uint64_t at = (uint64_t)(c.p - chunk);
            int64_t tid = jfr_long(&c);
            int64_t count = jfr_int(&c, 4);
            if (c.bad || count < 0 || (uint64_t)count > jfr_left(&c))
                return jfr_fail(err, at, "constant pool: bad entry count %lld", (long long)count);
            uint32_t ti = jfr_meta_find_id(m, (uint64_t)tid);
            if (ti == UINT32_MAX)
                return jfr_fail(err, at, "constant pool of undeclared type id %lld",
                                (long long)tid);
            /* A pool's values are of its type, read like a field of that type. */
            struct jfr_field f = {.name = "", .type_id = (uint64_t)tid, .type_idx = ti};
            struct skpx_u64map *map = &p->by_type[ti];
            for (int64_t k = 0; k < count; k++) {
                int64_t key = jfr_long(&c);
                uint64_t off = (uint64_t)(c.p - chunk);
                jfr_value_read(m, &f, &c, 0, NULL);
                if (c.bad)
                    return jfr_fail(err, off,
                                    "constant pool %s: entry %lld of %lld is truncated or "
                                    "malformed",
                                    m->types[ti].name, (long long)k, (long long)count);
                bool inserted = false;
                e = jfr_map_put_new(map, (uint64_t)key, off, &inserted);
                if (e)
                    return e;
                p->n_entries += inserted;
            }
        }
        if (delta == 0)
            break;
        /* The JDK links each pool event to the previous (older) one with a negative delta;
         * stepping forward would allow cycles, so require progress backwards. */
        if (delta > 0 || (uint64_t)(-delta) > pos)
            return jfr_fail(err, pos, "constant pool delta %lld does not point back",
                            (long long)delta);
        pos = (uint64_t)((int64_t)pos + delta);
    }
    return SKP_OK;
}

bool jfr_pools_find(const struct jfr_pools *p, uint32_t type_idx, int64_t key, const uint8_t *chunk,
                    size_t chunk_len, bool compressed, struct jfr_cursor *out)
{
    if (type_idx >= p->n_types)
        return false;
    uint64_t off = 0;
    if (!skpx_u64map_get(&p->by_type[type_idx], (uint64_t)key, &off) || off >= chunk_len)
        return false;
    *out = (struct jfr_cursor){
        .base = chunk, .p = chunk + off, .end = chunk + chunk_len, .compressed = compressed};
    return true;
}

void jfr_pools_clear(struct jfr_pools *p)
{
    for (uint32_t i = 0; i < p->n_types; i++)
        skpx_u64map_clear(&p->by_type[i]);
    p->n_entries = 0;
}

void jfr_pools_cleanup(struct jfr_pools *p)
{
    for (uint32_t i = 0; i < p->n_types; i++)
        skpx_u64map_cleanup(&p->by_type[i]);
    skpx_free(p->by_type);
    memset(p, 0, sizeof(*p));
}
