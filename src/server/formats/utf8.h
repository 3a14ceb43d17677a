/* utf8.h - UTF-8 hygiene for text that reaches JSON. Agents send protobuf strings that
 * protobuf-c does not validate; jansson refuses invalid UTF-8, so one bad frame or operation
 * name would otherwise fail a whole listing or analysis. Invalid bytes become U+FFFD.
 * Pure functions; thread-safe. */
#ifndef SKP_SERVER_UTF8_H
#define SKP_SERVER_UTF8_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* True if s[0..n) is well-formed UTF-8 (no overlongs, surrogates or code points > U+10FFFF). */
bool skp_utf8_valid(const char *s, size_t n);
/* Copy of the NUL-terminated `s` with each invalid byte replaced by U+FFFD; caller frees with
 * skpx_free. NULL on allocation failure (or NULL input). */
char *skp_utf8_sanitize(const char *s);
/* json_string(s) for any bytes: invalid UTF-8 is replaced, NULL gives "". Returns a new
 * reference, NULL only on allocation failure. */
json_t *skp_json_str(const char *s);
/* j as compact JSON text in a new skpx buffer (NUL-terminated; its length in *len when len is
 * not NULL), so that nothing depends on the allocator jansson was given. NULL for NULL, on
 * allocation failure or an unserialisable value. */
char *skp_json_text(const json_t *j, size_t *len);

#endif
