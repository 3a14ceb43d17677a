/* grow.h - the one array-growth helper: doubles a heap array until it holds a requested number
 * of elements, with overflow checks. Callers keep (pointer, count, capacity) in their own
 * struct and decide their own maximum. Single-threaded per array. */
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

#endif
