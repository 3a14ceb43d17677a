/* pydict.h - reading CPython objects of another process that the stack walk does not need:
 * dicts (combined and split tables, unicode and general keys), sets, instance attributes of
 * pure-Python classes (3.11 "managed" dicts: values before the object, keys shared by the type),
 * module dicts, weak references, small ints and type names. The asyncio task reader
 * (pytasks.c) uses them to reach sys.modules -> asyncio's task set from raw memory.
 * Every read goes through attach_remote (process_vm_readv) and is validated: a dict's keys
 * object must be self-consistent (its size, index width and entry count agree) before an entry
 * is looked at, and every count is bounded, so a torn or hostile image costs bounded time and
 * memory and gives SKP_EINVAL, never a crash. Single-threaded, like the remote handle. */
#ifndef SKP_ATTACH_PYDICT_H
#define SKP_ATTACH_PYDICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "attach/remote.h"
#include "skyprof/skp_err.h"

/* Most entries of one dict or slots of one set table looked at (sys.modules of a big
 * application holds a few thousand modules). */
#define ATTACH_DICT_ENTRIES_MAX 65536
/* Longest key compared by attach_pydict_get / attach_pyobj_getattr. */
#define ATTACH_DICT_KEY_MAX 64
/* Longest type name read by attach_pyobj_type_name. */
#define ATTACH_TYPE_NAME_MAX 64

/* Offsets of the object structures these readers use, for one CPython minor version (3.11:
 * py311.c, from that version's headers). Plain data. */
struct attach_pyobj_layout {
    /* any object; str (compact ASCII keys only are compared) */
    size_t obj_type;
    size_t str_length, str_state, str_ascii_size;
    /* type objects */
    size_t tp_name, tp_flags, tp_base, ht_cached_keys;
    unsigned long tpflag_managed_dict;
    /* managed dict (3.11): a pointer to the values, then one to the dict, before the object */
    ptrdiff_t managed_values, managed_dict;
    /* PyDictObject */
    size_t dict_used, dict_keys, dict_values;
    /* PyDictKeysObject */
    size_t dk_log2_size, dk_log2_index_bytes, dk_kind, dk_nentries, dk_indices;
    int dk_kind_general, dk_kind_split;
    size_t dk_entry_general, dke_general_key, dke_general_value; /* entry size, fields */
    size_t dk_entry_unicode, dke_unicode_key, dke_unicode_value;
    /* PySetObject, setentry */
    size_t set_mask, set_table, set_entry, setentry_key, setentry_hash;
    /* PyModuleObject, PyWeakReference */
    size_t mod_dict, wr_object;
    /* PyLongObject: ob_size then 30-bit digits */
    size_t var_size, long_digits;
    unsigned long_shift, long_digit_size;
    /* PyInterpreterState.modules (sys.modules) */
    size_t is_modules;
};

/* What the readers need: the target's memory and layout (both borrowed), and the str type's
 * address when known (0: keys are not type-checked). */
struct attach_pyobjs {
    struct attach_remote *mem;
    const struct attach_pyobj_layout *l;
    uintptr_t str_type;
};

/* The 3.11 layout compiled from its headers; NULL when the build had none (py311.c). */
const struct attach_pyobj_layout *attach_pyobj_layout_py311(void);

/* Looks up the str key `key` (ASCII, at most ATTACH_DICT_KEY_MAX bytes) in the dict at `dict`
 * by comparing every live entry's key (no hashing: the target's hash secret is unknown).
 * *out = the value's address. Errors: SKP_ENOTFOUND (no such key), SKP_EINVAL (the dict does
 * not validate: torn, freed, or not a dict), SKP_ENOMEM. */
SKP_MUST_CHECK skp_err attach_pydict_get(struct attach_pyobjs *o, uintptr_t dict, const char *key,
                                         uintptr_t *out);

/* Copies up to `cap` live (key, value) pairs of the dict at `dict` into keys[] / values[]
 * (either may be NULL), in insertion order; *n = how many. *n < live entries when cap was
 * reached. Errors: SKP_EINVAL (does not validate), SKP_ENOMEM. */
SKP_MUST_CHECK skp_err attach_pydict_items(struct attach_pyobjs *o, uintptr_t dict, uintptr_t *keys,
                                           uintptr_t *values, size_t cap, size_t *n);

/* The attribute `name` of the instance at `obj` of a pure-Python class: its managed values
 * (keys shared by the type) or its instance dict. Errors: SKP_ENOTFOUND (no such attribute, or
 * the type has no managed dict), SKP_EINVAL (torn), SKP_ENOMEM. */
SKP_MUST_CHECK skp_err attach_pyobj_getattr(struct attach_pyobjs *o, uintptr_t obj,
                                            const char *name, uintptr_t *out);

/* Copies up to `cap` live keys of the set at `set` (deleted slots skipped) into keys[];
 * *n = how many. Errors: SKP_EINVAL (does not validate), SKP_ENOMEM. */
SKP_MUST_CHECK skp_err attach_pyset_items(struct attach_pyobjs *o, uintptr_t set, uintptr_t *keys,
                                          size_t cap, size_t *n);

/* The tp_name of the type at `type` into buf (NUL-terminated, truncated to cap - 1 bytes).
 * False when it cannot be read. */
bool attach_pytype_name(struct attach_pyobjs *o, uintptr_t type, char *buf, size_t cap);

/* The tp_name of the object at `obj`'s type. False when it cannot be read. */
bool attach_pyobj_type_name(struct attach_pyobjs *o, uintptr_t obj, char *buf, size_t cap);

/* True when the type of `obj`, or one of its bases (at most 8 levels), is named `name`. */
bool attach_pyobj_is_a(struct attach_pyobjs *o, uintptr_t obj, const char *name);

/* The value of the int object at `obj` when it fits in 62 bits and is not negative. */
bool attach_pylong_value(struct attach_pyobjs *o, uintptr_t obj, uint64_t *out);

/* The compact ASCII str at `obj` into buf (NUL-terminated; false when it is not one, longer
 * than cap - 1, or cannot be read). */
bool attach_pystr_ascii(struct attach_pyobjs *o, uintptr_t obj, char *buf, size_t cap);

#endif
