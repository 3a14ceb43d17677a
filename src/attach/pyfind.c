/* pyfind.c - finding the CPython runtime of a process: which image holds it (libpython3.X.so
 * first, then a python3.X executable, as listed in /proc/PID/maps), where _PyRuntime is (ELF
 * symbol, else the .PyRuntime section, else a scan of .data/.bss for a structure whose
 * interpreter's first thread state points back to that interpreter), which version it is
 * (Py_Version, else the file name) and so which layout to use. */
#include "attach/pyreader.h"

#include <stdio.h>
#include <string.h>

#include "attach/elfsym.h"
#include "attach/procmaps.h"
#include "attach/pyreader_int.h"
#include "common/alloc.h"

enum { SYM_RUNTIME, SYM_VERSION, SYM_CODE_TYPE, SYM_STR_TYPE, SYM_BYTES_TYPE, SYM_COUNT };
static const char *const g_syms[SYM_COUNT] = {
    "_PyRuntime", "Py_Version", "PyCode_Type", "PyUnicode_Type", "PyBytes_Type",
};

/* Largest .data+.bss region scanned by the fallback (bytes). */
#define SCAN_MAX ((size_t)32 * 1024 * 1024)
#define SCAN_CHUNK ((size_t)64 * 1024)

/* The table for minor versions with no _Py_DebugOffsets; NULL for the others. */
static const struct attach_pylayout *layout_for(unsigned minor)
{
    if (minor == 11)
        return attach_pylayout_py311();
    if (minor == 12)
        return attach_pylayout_py312();
    return NULL;
}

/* Looks for the runtime in [lo, hi) of the target: an address r where r+rt_interp_head holds an
 * interpreter whose thread list's head points back to it. 0 when none. */
static uintptr_t scan_for_runtime(struct attach_target *t, uintptr_t lo, uintptr_t hi)
{
    const struct attach_pylayout *l = &t->layout;
    if (hi <= lo || hi - lo > SCAN_MAX)
        return 0;
    uint8_t *buf = skpx_malloc(SCAN_CHUNK);
    if (!buf)
        return 0;
    uintptr_t found = 0;
    for (uintptr_t base = lo & ~(uintptr_t)7; base < hi && !found; base += SCAN_CHUNK) {
        size_t n = hi - base < SCAN_CHUNK ? hi - base : SCAN_CHUNK;
        if (!attach_remote_read(&t->mem, base, buf, n))
            continue;
        for (size_t off = 0; off + sizeof(uintptr_t) <= n && !found; off += 8) {
            uintptr_t interp;
            memcpy(&interp, buf + off, sizeof(interp));
            if (interp < 4096 || (interp & 7) || off < l->rt_interp_head)
                continue;
            uintptr_t ts = 0;
            uintptr_t back = 0;
            if (!attach_remote_read(&t->mem, interp + l->is_threads_head, &ts, sizeof(ts)) ||
                ts < 4096 || (ts & 7))
                continue;
            if (attach_remote_read(&t->mem, ts + l->ts_interp, &back, sizeof(back)) &&
                back == interp)
                found = base + off - l->rt_interp_head;
        }
    }
    skpx_free(buf);
    return found;
}

/* Tries one image: on success fills t (runtime, layout, types, version) and returns SKP_OK. */
static skp_err try_image(struct attach_target *t, const struct attach_maps *maps, const char *path,
                         unsigned name_minor, char *why, size_t cap)
{
    char fpath[ATTACH_MAP_PATH_MAX + 64];
    struct attach_elf_info info;
    /* through /proc/PID/root: the target may live in another mount namespace (a container) */
    snprintf(fpath, sizeof(fpath), "/proc/%d/root%s", (int)t->pid, path);
    skp_err err = attach_elf_parse_file(fpath, g_syms, SYM_COUNT, &info, why, cap);
    if (err)
        err = attach_elf_parse_file(path, g_syms, SYM_COUNT, &info, why, cap);
    if (err)
        return err;
    uintptr_t start = attach_maps_image_start(maps, path);
    uintptr_t bias = start - (uintptr_t)info.load_vaddr;

    unsigned major = 3;
    unsigned minor = name_minor;
    unsigned micro = 0;
    bool have_micro = false;
    uint32_t hex = 0;
    if (info.values[SYM_VERSION] &&
        attach_remote_read(&t->mem, bias + (uintptr_t)info.values[SYM_VERSION], &hex,
                           sizeof(hex)) &&
        (hex >> 24) == 3) {
        major = hex >> 24;
        minor = (hex >> 16) & 0xff;
        micro = (hex >> 8) & 0xff;
        have_micro = true;
    }
    if (!minor) {
        snprintf(why, cap, "%s: cannot tell the CPython version (no Py_Version symbol)", path);
        return SKP_ENOTFOUND;
    }
    const struct attach_pylayout *l = layout_for(minor);
    if (!l && minor < 13) {
        snprintf(why, cap,
                 "process %d runs CPython %u.%u, which this reader does not support (supported: "
                 "3.11, 3.12, 3.13, 3.14)",
                 (int)t->pid, major, minor);
        return SKP_ENOTSUP;
    }
    if (l)
        t->layout = *l;
    if (have_micro)
        snprintf(t->version, sizeof(t->version), "%u.%u.%u", major, minor, micro);
    else
        snprintf(t->version, sizeof(t->version), "%u.%u", major, minor);
    snprintf(t->image, sizeof(t->image), "%s", path);
    t->code_type = info.values[SYM_CODE_TYPE] ? bias + (uintptr_t)info.values[SYM_CODE_TYPE] : 0;
    t->str_type = info.values[SYM_STR_TYPE] ? bias + (uintptr_t)info.values[SYM_STR_TYPE] : 0;
    t->bytes_type = info.values[SYM_BYTES_TYPE] ? bias + (uintptr_t)info.values[SYM_BYTES_TYPE] : 0;

    if (info.values[SYM_RUNTIME])
        t->runtime = bias + (uintptr_t)info.values[SYM_RUNTIME];
    else if (info.pyruntime.size)
        t->runtime = bias + (uintptr_t)info.pyruntime.addr;
    else if (l && (info.data.size || info.bss.size)) {
        uintptr_t lo = info.data.size ? info.data.addr : info.bss.addr;
        uintptr_t hi =
            info.bss.size ? info.bss.addr + info.bss.size : info.data.addr + info.data.size;
        t->runtime = scan_for_runtime(t, bias + lo, bias + hi);
    }
    if (!t->runtime) {
        snprintf(why, cap,
                 "%s: no _PyRuntime symbol, no .PyRuntime section and no runtime found "
                 "in .data/.bss",
                 path);
        return SKP_ENOTFOUND;
    }
    if (!l) {
        /* 3.13+: the runtime describes itself */
        err = attach__layout_from_runtime(t, why, cap);
        if (err)
            return err;
    }
    t->layout.version_hex = hex;
    return attach__target_validate(t, why, cap);
}

skp_err attach_target_open(pid_t pid, struct attach_target **out, char *why, size_t why_cap)
{
    *out = NULL;
    char scratch[ATTACH_WHY_MAX];
    if (!why || !why_cap) {
        why = scratch;
        why_cap = sizeof(scratch);
    }
    why[0] = 0;
    struct attach_maps maps = {0};
    struct attach_target *t = NULL;
    skp_err err = attach_maps_read(pid, &maps, why, why_cap);
    if (err) {
        if (err == SKP_ENOTFOUND)
            snprintf(why, why_cap, "no process with pid %d", (int)pid);
        goto out;
    }
    err = attach__target_alloc(&t);
    if (err)
        goto out;
    t->pid = pid;
    /* probe a readable mapping: an EPERM here is explained before anything else */
    uintptr_t probe = 0;
    for (size_t i = 0; i < maps.n && !probe; i++)
        if (maps.maps[i].r && maps.maps[i].path[0] == '/')
            probe = maps.maps[i].start;
    err = attach_remote_init(&t->mem, pid, probe, why, why_cap);
    if (err)
        goto out;

    /* candidates: libpython first (the executable may be a launcher), then executables */
    err = SKP_ENOTFOUND;
    snprintf(why, why_cap,
             "process %d does not run CPython (no libpython3.X or python3.X image "
             "in /proc/%d/maps)",
             (int)pid, (int)pid);
    for (int want = 2; want >= 1 && err; want--) {
        const char *seen = "";
        for (size_t i = 0; i < maps.n; i++) {
            const char *path = maps.maps[i].path;
            unsigned minor;
            if (path[0] != '/' || strcmp(path, seen) == 0)
                continue;
            if (attach_maps_python_kind(path, &minor) != want)
                continue;
            seen = path;
            char tmp[ATTACH_WHY_MAX];
            skp_err e = try_image(t, &maps, path, minor, tmp, sizeof(tmp));
            if (!e) {
                err = SKP_OK;
                break;
            }
            /* keep the most telling reason: unsupported version/permission over "not found" */
            if (err == SKP_ENOTFOUND || e != SKP_ENOTFOUND) {
                err = e;
                snprintf(why, why_cap, "%s", tmp);
            }
            t->runtime = 0;
            if (e == SKP_ENOTSUP)
                goto out;
        }
    }
out:
    attach_maps_cleanup(&maps);
    if (err) {
        attach_target_close(t);
        return err;
    }
    why[0] = 0;
    *out = t;
    return SKP_OK;
}
