/* config.h - agent-internal configuration helpers (the public part is in skyprof.h). */
#ifndef SKP_AGENT_CONFIG_H
#define SKP_AGENT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "skyprof/skyprof.h"

/* Writes a SkyWalking-like instance name "<32 hex random>@<hostname>" into buf (NUL-terminated,
 * truncated to cap). Uses getrandom (falls back to time and pid). Thread-safe. */
void skp__config_gen_instance(char *buf, size_t cap);

/* Fills buf with 32 random hex digits + NUL (cap >= 33). Thread-safe. */
void skp__config_random_hex(char *buf, size_t cap);

/* Parses a boolean the way SkyWalking HEAD does, extended: "false", "0", "no", "off" (any case)
 * are false, "true", "1", "yes", "on" true. Returns -1 when it is neither. */
int skp__config_parse_bool(const char *s);

/* Parses a decimal int64 (whole string, optional sign). Returns false if malformed. */
bool skp__config_parse_i64(const char *s, long long *out);

#endif
