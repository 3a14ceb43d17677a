/* cli_pid.h - the one parser of `--pid` for every out-of-process command (dump, record, top,
 * attach). */
#ifndef SKP_CLI_CLI_PID_H
#define SKP_CLI_CLI_PID_H

#include <stdbool.h>

/* Parses a process id: decimal digits only (no sign, no spaces), 1..the largest pid_t. Anything
 * else, e.g. 4294976680 (2^32 + P, which a cast to pid_t used to turn into P), is refused.
 * Returns true and sets *out on success. */
bool cli_parse_pid(const char *arg, long *out);

#endif
