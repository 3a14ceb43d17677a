/* symcache.c - open-addressing address -> text cache (see symcache.h). */
#include "agent/symcache.h"

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
    memset(c, 0, sizeof(*c));
    size_t cap = 16;
    while (cap < SKP_SYMCACHE_ENTRIES * 2)
        cap <<= 1;
    c->tab = skpx_calloc(cap, sizeof(*c->tab));
    if (!c->tab)
        return SKP_ENOMEM;
    c->cap = cap;
    return SKP_OK;
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
