/* grow.c - array growth (see grow.h). The array pointer is read and written through memcpy so one
 * function serves every element type without aliasing a `T *` as a `void *`. */
#include "common/grow.h"

#include <stdint.h>
#include <string.h>

#include "common/alloc.h"

/* Reallocates the array at *parray to ncap elements of elem bytes and sets *cap. */
static skp_err resize(void *parray, size_t *cap, size_t ncap, size_t elem)
{
    if (elem && ncap > SIZE_MAX / elem)
        return SKP_ENOMEM;
    void *v;
    memcpy(&v, parray, sizeof(v));
    void *nv = skpx_realloc(v, ncap * elem);
    if (!nv)
        return SKP_ENOMEM;
    memcpy(parray, &nv, sizeof(nv));
    *cap = ncap;
    return SKP_OK;
}

skp_err skpx_grow(void *parray, size_t *cap, size_t need, size_t elem, size_t first_cap)
{
    if (need <= *cap)
        return SKP_OK;
    size_t ncap = *cap ? *cap : (first_cap ? first_cap : 16);
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2)
            return SKP_ENOMEM;
        ncap *= 2;
    }
    return resize(parray, cap, ncap, elem);
}

skp_err skpx_grow_capped(void *parray, size_t *cap, size_t need, size_t elem, size_t first_cap,
                         size_t max_cap)
{
    if (need <= *cap)
        return SKP_OK;
    if (need > max_cap)
        return SKP_ETOOBIG;
    size_t ncap = *cap ? *cap : (first_cap ? first_cap : 16);
    while (ncap < need)
        ncap = ncap > max_cap / 2 ? max_cap : ncap * 2;
    return resize(parray, cap, ncap < max_cap ? ncap : max_cap, elem);
}
