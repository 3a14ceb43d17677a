/* symcache.c - open-addressing address -> text cache (see symcache.h). */
#include "agent/symcache.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "agent/agent_limits.h"
#include "common/alloc.h"

struct skp__symcache_entry {
    uint64_t addr;
    char *text; /* owned; NULL = empty cell */
};

skp_err skp__symcache_init(struct skp__symcache *c)
{
    /* The table (256 KB) is allocated at the first address to resolve: string-only sources
     * (Python) and agents that never profile do not pay for it. */
    memset(c, 0, sizeof(*c));
    return SKP_OK;
}

static bool ensure_table(struct skp__symcache *c)
{
    if (c->tab)
        return true;
    size_t cap = 16;
    while (cap < SKP_SYMCACHE_ENTRIES * 2)
        cap <<= 1;
    c->tab = skpx_calloc(cap, sizeof(*c->tab));
    if (!c->tab)
        return false;
    c->cap = cap;
    return true;
}

static void clear(struct skp__symcache *c)
{
    for (size_t i = 0; i < c->cap; i++) {
        skpx_free(c->tab[i].text);
        c->tab[i].text = NULL;
    }
    c->n = 0;
}

void skp__symcache_cleanup(struct skp__symcache *c)
{
    if (!c || !c->tab)
        return;
    clear(c);
    skpx_free(c->tab);
    c->tab = NULL;
}

static size_t hash(uint64_t a)
{
    a ^= a >> 33;
    a *= 0xff51afd7ed558ccdULL;
    a ^= a >> 33;
    return (size_t)a;
}

const char *skp__symcache_get(struct skp__symcache *c, const struct skyprof_stack_source *src,
                              uint64_t addr)
{
    static __thread char fallback[32];
    if (!ensure_table(c)) {
        snprintf(fallback, sizeof(fallback), "0x%llx", (unsigned long long)addr);
        return fallback;
    }
    size_t i = hash(addr) & (c->cap - 1);
    while (c->tab[i].text) {
        if (c->tab[i].addr == addr) {
            c->hits++;
            return c->tab[i].text;
        }
        i = (i + 1) & (c->cap - 1);
    }
    c->misses++;
    char buf[SKP_SYMBOL_MAX];
    int n = -1;
    if (src && src->symbolize)
        n = src->symbolize(src->ud, addr, buf, sizeof(buf));
    if (n < 0 || buf[0] == '\0')
        snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)addr);
    buf[sizeof(buf) - 1] = '\0';
    if (c->n >= SKP_SYMCACHE_ENTRIES) {
        clear(c);
        i = hash(addr) & (c->cap - 1);
    }
    char *t = skpx_strdup(buf);
    if (!t) {
        snprintf(fallback, sizeof(fallback), "0x%llx", (unsigned long long)addr);
        return fallback;
    }
    c->tab[i].addr = addr;
    c->tab[i].text = t;
    c->n++;
    return t;
}
