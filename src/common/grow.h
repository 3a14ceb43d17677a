/* grow.h - the one array-growth helper: doubles a heap array until it holds a requested number
 * of elements, with overflow checks (or under a ceiling: skpx_grow_capped). Callers keep
 * (pointer, count, capacity) in their own struct and decide their own maximum. Single-threaded
 * per array. */
#ifndef SKP_COMMON_GROW_H
#define SKP_COMMON_GROW_H

#include <stddef.h>

#include "skyprof/skp_err.h"

/* `parray` is the address of the array pointer (any object type, e.g. `&v->items`); grows the
 * array (skpx_realloc) to at least `need` elements of `elem` bytes, starting at `first_cap`
 * elements and doubling, and updates *cap. Does nothing if *cap >= need. The array stays valid
 * and unchanged on failure. Errors: SKP_ENOMEM (allocation failed or size overflow). */
SKP_MUST_CHECK skp_err skpx_grow(void *parray, size_t *cap, size_t need, size_t elem,
                                 size_t first_cap);

/* skpx_grow under a ceiling: the capacity doubles from *cap (`first_cap` when 0) until it holds
 * `need`, cut to `max_cap` elements. Errors: SKP_ETOOBIG (need > max_cap; nothing changed),
 * SKP_ENOMEM. */
SKP_MUST_CHECK skp_err skpx_grow_capped(void *parray, size_t *cap, size_t need, size_t elem,
                                        size_t first_cap, size_t max_cap);

#endif
