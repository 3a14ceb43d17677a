/* env.h - a bounded integer knob read from the environment (tuning and test variables of the
 * agent). Reads the environment, so not safe against a concurrent setenv; async-signal-unsafe. */
#ifndef SKP_COMMON_ENV_H
#define SKP_COMMON_ENV_H

#include <errno.h>
#include <stdlib.h>

/* The decimal value of environment variable `name` when it lies in [lo, hi] (lo > 0); 0 when it
 * is unset, empty, not a whole decimal number or out of range. */
static inline long long skpx_env_int(const char *name, long long lo, long long hi)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return 0;
    char *end = NULL;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || *end || x < lo || x > hi)
        return 0;
    return x;
}

#endif
