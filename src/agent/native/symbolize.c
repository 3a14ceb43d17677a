/* symbolize.c - libdw-backed symbolizer with a bounded open-addressing cache.
 *
 * Design: one Dwfl session over /proc/self/maps. The cache maps an address to the formatted
 * signature (or to "unknown"); it is cleared when it reaches 3/4 of its capacity (simple, and the
 * working set of a profile is small) or when the loader reports an unload. Debuginfod is never
 * contacted (the standard libdw lookup would when DEBUGINFOD_URLS is set: a network fetch from
 * inside a host process is not acceptable); only local debug files are used.
 * Lock order: `mu` only. */
#include "agent/native/symbolize.h"

#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <inttypes.h>
#include <link.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/log.h"

struct cache_entry {
    uintptr_t addr; /* 0 = empty slot */
    char *text;     /* owned; NULL = known to be unknown */
    uint32_t len;
};

struct skp__symbolizer {
    pthread_mutex_t mu;
    Dwfl *dwfl;
    Dwfl_Callbacks cb;
    unsigned long long loads_seen; /* dl_iterate_phdr dlpi_adds at the last report */
    unsigned long long unloads_seen;
    struct cache_entry *slots;
    uint32_t cap; /* power of two */
    uint32_t entries;
    struct skp__symbolizer_stats st;
};

static int find_debuginfo_local(Dwfl_Module *mod, void **userdata, const char *modname,
                                Dwarf_Addr base, const char *file_name, const char *debuglink_file,
                                GElf_Word debuglink_crc, char **debuginfo_file_name)
{
    /* dwfl_build_id_find_debuginfo looks only in the local .build-id trees; the standard
     * function would also try debuginfod when DEBUGINFOD_URLS is set. Debug info embedded in
     * the module itself is found by libdw before this callback is consulted. */
    int fd = dwfl_build_id_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
                                          debuglink_crc, debuginfo_file_name);
    if (fd >= 0)
        return fd;
    const char *urls = getenv("DEBUGINFOD_URLS");
    if (urls && *urls)
        return -1;
    return dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file,
                                        debuglink_crc, debuginfo_file_name);
}

struct loader_counts {
    unsigned long long adds, subs;
};

static int loader_counts_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct loader_counts *c = arg;

    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
        c->adds = info->dlpi_adds;
        c->subs = info->dlpi_subs;
    }
    return 1; /* the counters are process-wide: the first object is enough */
}

static struct loader_counts loader_counts_now(void)
{
    struct loader_counts c = {0, 0};
    dl_iterate_phdr(loader_counts_cb, &c);
    return c;
}

/* C++ names are demangled with the host's own C++ runtime when it has one loaded: we do not
 * link libstdc++ into C hosts for this. Looked up per call (cheap, off the hot path) so that a
 * runtime loaded later is used. */
typedef char *(*cxa_demangle_fn)(const char *mangled, char *buf, size_t *len, int *status);

static cxa_demangle_fn find_demangler(void)
{
    void *p = dlsym(RTLD_DEFAULT, "__cxa_demangle");
    cxa_demangle_fn fn;
    memcpy(&fn, &p, sizeof(fn)); /* object pointer -> function pointer without a cast warning */
    return fn;
}

/* Formats "<demangled or raw name> (<where>)" into text. */
static int format_named(char *text, size_t cap, const char *name, const char *where)
{
    if (name[0] == '_' && name[1] == 'Z') {
        cxa_demangle_fn demangle = find_demangler();
        int status = -1;
        char *d = demangle ? demangle(name, NULL, NULL, &status) : NULL;
        if (d && status == 0) {
            int len = snprintf(text, cap, "%s (%s)", d, where);
            free(d); /* lint:allow - the C++ runtime malloc()ed it */
            return len;
        }
        free(d); /* lint:allow - as above */
    }
    return snprintf(text, cap, "%s (%s)", name, where);
}

static void cache_clear(struct skp__symbolizer *s)
{
    for (uint32_t i = 0; i < s->cap; i++) {
        skpx_free(s->slots[i].text);
        s->slots[i].text = NULL;
        s->slots[i].addr = 0;
    }
    s->entries = 0;
}

static skp_err report_modules(struct skp__symbolizer *s)
{
    struct loader_counts c = loader_counts_now();

    dwfl_report_begin(s->dwfl);
    int r = dwfl_linux_proc_report(s->dwfl, getpid());
    if (dwfl_report_end(s->dwfl, NULL, NULL) != 0 || r != 0) {
        SKPX_WARN("native: symbolizer could not read the process maps: %s",
                  r > 0 ? strerror(r) : dwfl_errmsg(-1));
        return SKP_EIO;
    }
    s->loads_seen = c.adds;
    s->unloads_seen = c.subs;
    return SKP_OK;
}

skp_err skp__symbolizer_new(uint32_t cache_cap, struct skp__symbolizer **out)
{
    skp_err err = SKP_OK;
    struct skp__symbolizer *s = NULL;
    uint32_t cap = 16;

    *out = NULL;
    if (cache_cap == 0)
        cache_cap = SKP_SYMBOLIZE_DEFAULT_CACHE;
    if (cache_cap > SKP_SYMBOLIZE_MAX_CACHE)
        cache_cap = SKP_SYMBOLIZE_MAX_CACHE;
    while (cap < cache_cap)
        cap <<= 1;
    s = skpx_calloc(1, sizeof(*s));
    if (!s)
        return SKP_ENOMEM;
    pthread_mutex_init(&s->mu, NULL);
    s->slots = skpx_calloc(cap, sizeof(*s->slots));
    if (!s->slots) {
        err = SKP_ENOMEM;
        goto out;
    }
    s->cap = cap;
    s->st.cap = cap;
    s->cb.find_elf = dwfl_linux_proc_find_elf;
    s->cb.find_debuginfo = find_debuginfo_local;
    s->dwfl = dwfl_begin(&s->cb);
    if (!s->dwfl) {
        err = SKP_ENOMEM;
        goto out;
    }
    err = report_modules(s);
    if (err)
        goto out;
    *out = s;
    s = NULL;
out:
    skp__symbolizer_free(s);
    return err;
}

void skp__symbolizer_free(struct skp__symbolizer *s)
{
    if (!s)
        return;
    if (s->slots)
        cache_clear(s);
    skpx_free(s->slots);
    if (s->dwfl)
        dwfl_end(s->dwfl);
    pthread_mutex_destroy(&s->mu);
    skpx_free(s);
}

static uint32_t addr_hash(uintptr_t a)
{
    uint64_t x = (uint64_t)a;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (uint32_t)x;
}

static struct cache_entry *cache_find(struct skp__symbolizer *s, uintptr_t addr, bool *found)
{
    uint32_t mask = s->cap - 1;
    for (uint32_t i = addr_hash(addr) & mask;; i = (i + 1) & mask) {
        struct cache_entry *e = &s->slots[i];
        if (e->addr == addr) {
            *found = true;
            return e;
        }
        if (e->addr == 0) {
            *found = false;
            return e;
        }
    }
}

static const char *base_name(const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    return slash ? slash + 1 : path;
}

/* Formats the signature of addr into text (cap SKP_SYMBOLIZE_TEXT_MAX). Returns the length or
 * -1. */
static int resolve(struct skp__symbolizer *s, uintptr_t addr, char *text, size_t cap)
{
    Dwfl_Module *mod = dwfl_addrmodule(s->dwfl, addr);
    if (!mod) {
        struct loader_counts c = loader_counts_now();
        if (c.adds != s->loads_seen || c.subs != s->unloads_seen) {
            s->st.refreshes++;
            if (report_modules(s) == SKP_OK)
                mod = dwfl_addrmodule(s->dwfl, addr);
        }
    }
    if (!mod)
        return -1;

    const char *modname = NULL;
    Dwarf_Addr mod_lo = 0;
    modname = dwfl_module_info(mod, NULL, &mod_lo, NULL, NULL, NULL, NULL, NULL);
    const char *mod_base = base_name(modname ? modname : "?");
    const char *fn = dwfl_module_addrname(mod, addr);
    int len;
    if (!fn) {
        len = snprintf(text, cap, "%s+0x%" PRIxPTR, mod_base, addr - (uintptr_t)mod_lo);
    } else {
        Dwfl_Line *line = dwfl_module_getsrc(mod, addr);
        int lineno = 0;
        const char *file = line ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
        char where[SKP_SYMBOLIZE_TEXT_MAX];
        if (file && lineno > 0)
            snprintf(where, sizeof(where), "%s:%d", base_name(file), lineno);
        else
            snprintf(where, sizeof(where), "%s", mod_base);
        len = format_named(text, cap, fn, where);
    }
    if (len < 0)
        return -1;
    return (size_t)len < cap ? len : (int)cap - 1;
}

int skp__symbolize(struct skp__symbolizer *s, uintptr_t addr, char *buf, size_t cap)
{
    char text[SKP_SYMBOLIZE_TEXT_MAX];
    int len;
    bool found = false;

    if (cap)
        buf[0] = '\0';
    if (addr == 0)
        return -1;
    pthread_mutex_lock(&s->mu);
    s->st.lookups++;
    struct loader_counts c = loader_counts_now();
    if (c.subs != s->unloads_seen) {
        /* Something was unloaded: cached addresses may now belong to another module. */
        cache_clear(s);
        s->st.resets++;
        s->st.refreshes++;
        (void)report_modules(s);
    }
    struct cache_entry *e = cache_find(s, addr, &found);
    if (found) {
        s->st.hits++;
        len = e->text ? (int)e->len : -1;
        if (len >= 0)
            memcpy(text, e->text, (size_t)len + 1);
    } else {
        s->st.misses++;
        if (c.adds != s->loads_seen) {
            /* Something was loaded since the modules were reported. Refresh before resolving,
             * not only when the address is outside every known module: dwfl's range of a module
             * spans its whole mapping, holes included, and a library mapped later into such a
             * hole would otherwise be attributed to the wrong module. */
            s->st.refreshes++;
            (void)report_modules(s);
        }
        len = resolve(s, addr, text, sizeof(text));
        if (s->entries + 1 > s->cap / 4 * 3) {
            cache_clear(s);
            s->st.resets++;
        }
        e = cache_find(s, addr, &found);
        char *copy = len >= 0 ? skpx_strndup(text, (size_t)len) : NULL;
        if (len < 0 || copy) { /* on OOM simply do not cache */
            e->addr = addr;
            e->text = copy;
            e->len = len >= 0 ? (uint32_t)len : 0;
            s->entries++;
        }
    }
    if (len < 0)
        s->st.unknown++;
    pthread_mutex_unlock(&s->mu);

    if (len < 0 || cap == 0)
        return -1;
    size_t n = (size_t)len < cap - 1 ? (size_t)len : cap - 1;
    memcpy(buf, text, n);
    buf[n] = '\0';
    return (int)n;
}

void skp__symbolizer_get_stats(struct skp__symbolizer *s, struct skp__symbolizer_stats *out)
{
    pthread_mutex_lock(&s->mu);
    *out = s->st;
    out->entries = s->entries;
    pthread_mutex_unlock(&s->mu);
}
