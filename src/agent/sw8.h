/* sw8.h - base64 helpers for the sw8 propagation header (parse/format are public, skyprof.h). */
#ifndef SKP_AGENT_SW8_H
#define SKP_AGENT_SW8_H

#include <stddef.h>

/* Standard base64 with padding of `n` bytes into out (NUL-terminated). Returns the length, or -1
 * when cap is too small. Thread-safe, no allocation. */
int skp__base64_encode(const char *in, size_t n, char *out, size_t cap);
/* Decodes standard base64 (padding optional) into out (NUL-terminated). Returns the decoded
 * length or -1 (malformed / cap too small; cap must leave room for the NUL). */
int skp__base64_decode(const char *in, size_t n, char *out, size_t cap);

#endif
