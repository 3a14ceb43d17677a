/* Fuzz target: the raw-memory object readers of src/attach/pydict.h (dicts, instance attributes,
 * sets, type names, ints) on a fake remote image. The input is copied into a page-aligned buffer
 * of this process, which the readers then read with process_vm_readv like any target. Pointers
 * inside the image are written relative to it: every 8-byte word whose top 16 bits are 0xB0B0 is
 * replaced by (buffer + its low 32 bits), so inputs can link objects to each other; any other
 * word stays as it is (a wild pointer: the read fails and the reader must refuse cleanly).
 * Oracles: no crash or sanitizer report, results that point into the image or are refused, and
 * the documented error codes only. CPython 3.11's layout (from the build's headers). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attach/pydict.h"

/* Largest image tried (bigger inputs are cut). */
#define IMAGE_MAX (64 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t *g_image;
static struct attach_remote g_mem;
static bool g_ready;

static bool allowed(skp_err err)
{
    return err == SKP_OK || err == SKP_ENOTFOUND || err == SKP_EINVAL || err == SKP_ENOMEM;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct attach_pyobj_layout *l = attach_pyobj_layout_py311();
    if (!l || size < 8)
        return 0;
    if (!g_ready) {
        g_image = aligned_alloc(4096, IMAGE_MAX);
        char why[128];
        if (!g_image ||
            attach_remote_init(&g_mem, getpid(), (uintptr_t)g_image, why, sizeof(why)) != SKP_OK)
            abort();
        g_ready = true;
    }
    if (size > IMAGE_MAX)
        size = IMAGE_MAX;
    memset(g_image, 0, IMAGE_MAX);
    memcpy(g_image, data, size);
    for (size_t off = 0; off + 8 <= size; off += 8) {
        uint64_t w;
        memcpy(&w, g_image + off, 8);
        if ((w >> 48) == 0xB0B0) {
            w = (uint64_t)(uintptr_t)g_image + (uint32_t)w % IMAGE_MAX;
            memcpy(g_image + off, &w, 8);
        }
    }
    struct attach_pyobjs o = {&g_mem, l, 0};
    /* the object looked at sits 64 bytes in: a managed-dict instance keeps two pointers before
     * its GC header, which must be inside the image too */
    uintptr_t root = (uintptr_t)g_image + 64;
    uintptr_t v = 0;
    skp_err err = attach_pydict_get(&o, root, "data", &v);
    if (!allowed(err) || (err == SKP_OK && v == 0))
        abort();
    uintptr_t keys[64];
    uintptr_t vals[64];
    size_t n = 0;
    err = attach_pydict_items(&o, root, keys, vals, 64, &n);
    if (!allowed(err) || n > 64 || (err != SKP_OK && n != 0))
        abort();
    for (size_t i = 0; i < n; i++)
        if (!keys[i] || !vals[i])
            abort();
    err = attach_pyobj_getattr(&o, root, "data", &v);
    if (!allowed(err))
        abort();
    err = attach_pyset_items(&o, root, keys, 64, &n);
    if (!allowed(err) || n > 64 || (err != SKP_OK && n != 0))
        abort();
    char name[ATTACH_TYPE_NAME_MAX];
    if (attach_pyobj_type_name(&o, root, name, sizeof(name)) &&
        strnlen(name, sizeof(name)) == sizeof(name))
        abort();
    uint64_t iv = 0;
    if (attach_pylong_value(&o, root, &iv) && iv >> 62)
        abort();
    char s[ATTACH_DICT_KEY_MAX + 1];
    if (attach_pystr_ascii(&o, root, s, sizeof(s)) && strnlen(s, sizeof(s)) == sizeof(s))
        abort();
    return 0;
}
