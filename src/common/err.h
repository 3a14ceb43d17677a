/* err.h - error helpers shared by every component. */
#ifndef SKP_COMMON_ERR_H
#define SKP_COMMON_ERR_H

#include "skyprof/skp_err.h"

/* Converts an errno value once, at the syscall boundary. Thread-safe. */
skp_err skpx_err_from_errno(int e);

#define SKP_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define SKP_CONTAINER_OF(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

#endif
