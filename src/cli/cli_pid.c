/* cli_pid.c - see cli_pid.h. */
#include "cli/cli_pid.h"

#include <limits.h>
#include <sys/types.h>

/* The largest pid_t (a signed integer type of the platform's width). */
#define PID_T_MAX ((long)(((unsigned long)1 << (sizeof(pid_t) * 8 - 1)) - 1))

bool cli_parse_pid(const char *arg, long *out)
{
    if (!arg || !*arg)
        return false;
    long v = 0;
    for (const char *p = arg; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        int d = *p - '0';
        if (v > (PID_T_MAX - d) / 10)
            return false; /* past pid_t */
        v = v * 10 + d;
    }
    if (v <= 0)
        return false;
    *out = v;
    return true;
}
