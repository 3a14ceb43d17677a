/* sat.h - saturating int64 arithmetic for times an agent supplies. Agent clocks are untrusted:
 * a snapshot at INT64_MIN next to one at INT64_MAX, or a span from INT64_MIN to INT64_MAX, must
 * give a clamped figure (INT64_MAX / INT64_MIN), never signed overflow (undefined behaviour,
 * which the UBSan build turns into an abort and a release build into nonsense such as a
 * duration of -1). Pure, thread-safe, header-only. */
#ifndef SKP_COMMON_SAT_H
#define SKP_COMMON_SAT_H

#include <stdint.h>

/* a + b, clamped to [INT64_MIN, INT64_MAX]. */
static inline int64_t skpx_sat_add_i64(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

/* a - b, clamped to [INT64_MIN, INT64_MAX]. */
static inline int64_t skpx_sat_sub_i64(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r))
        return b < 0 ? INT64_MAX : INT64_MIN;
    return r;
}

#endif
