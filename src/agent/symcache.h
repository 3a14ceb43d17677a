/* symcache.h - bounded cache address -> symbolized frame text, so the stack source's symbolize
 * (libdw, slow) runs once per address. When it reaches SKP_SYMCACHE_ENTRIES it is cleared
 * (simple, bounded; hot addresses are re-resolved once), and it is cleared whenever the dynamic
 * loader has unloaded a module since the last lookup (the address may now be another module's).
 * Channel thread only (not thread-safe). */
#ifndef SKP_AGENT_SYMCACHE_H
#define SKP_AGENT_SYMCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "skyprof/skyprof.h"

struct skp__symcache_entry;

struct skp__symcache {
    struct skp__symcache_entry *tab; /* owned, cap entries (power of two) */
    size_t cap;
    size_t n;
    uint64_t hits;
    uint64_t misses;
    uint64_t resets;                 /* cleared because a module was unloaded */
    unsigned long long unloads_seen; /* loader's unload count the entries belong to */
};

/* Prepares an empty cache; the table is allocated at the first lookup. Never fails today
 * (kept fallible for the contract). */
SKP_MUST_CHECK skp_err skp__symcache_init(struct skp__symcache *c);
void skp__symcache_cleanup(struct skp__symcache *c);

/* Returns the text for addr (borrowed until the next call), resolving it through
 * src->symbolize when not cached, or "0x<hex>" when the source cannot name it (also cached) or
 * memory is short. Never NULL. */
const char *skp__symcache_get(struct skp__symcache *c, const struct skyprof_stack_source *src,
                              uint64_t addr);

#endif
