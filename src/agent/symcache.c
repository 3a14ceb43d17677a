/* symcache.c - open-addressing address -> text cache (see symcache.h).
 * Design: an address names code only while the module mapped there stays loaded. The dynamic
 * loader counts unloads (dl_iterate_phdr's dlpi_subs, process-wide); the cache remembers the
 * count its entries were resolved under and is cleared when it moved, so a name can never
 * outlive its module (dlclose + a new dlopen at the same address). The source's own cache
 * (symbolize.c) follows the same counter, so the two always agree. */
#include "agent/symcache.h"

#include <link.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "agent/agent_limits.h"
#include "common/alloc.h"

struct skp__symcache_entry {
    uint64_t addr;
    char *text; /* owned; NULL = empty cell */
};

static int unloads_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    unsigned long long *subs = arg;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs))
        *subs = info->dlpi_subs;
    return 1; /* process-wide counter: the first object is enough */
}

/* Number of objects the loader has unloaded so far (0 where the loader does not count). */
static unsigned long long loader_unloads(void)
{
    unsigned long long subs = 0;
    dl_iterate_phdr(unloads_cb, &subs);
    return subs;
}

skp_err skp__symcache_init(struct skp__symcache *c)
{
    /* The table (256 KB) is allocated at the first address to resolve: string-only sources
     * (Python) and agents that never profile do not pay for it. */
    memset(c, 0, sizeof(*c));
    c->unloads_seen = loader_unloads();
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
    unsigned long long unloads = loader_unloads();
    if (unloads != c->unloads_seen) {
        clear(c);
        c->unloads_seen = unloads;
        c->resets++;
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
