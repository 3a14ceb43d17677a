/* escape.h - makes untrusted text safe to print on a terminal or in a log line: control bytes
 * (C0, DEL), C1 controls (U+0080..U+009F, which some terminals take as CSI & co.) and bytes that
 * are not valid UTF-8 become visible escapes (\n, \r, \t, \xNN, \u00NN); valid UTF-8 text
 * passes unchanged. Used by the logger (every interpolated field) and by the CLI (every string
 * a server or a read process supplied). Pure functions, thread-safe. */
#ifndef SKP_COMMON_ESCAPE_H
#define SKP_COMMON_ESCAPE_H

#include <stdbool.h>
#include <stddef.h>

/* Most output bytes one input byte can become (\xNN; a C1 control is 2 bytes -> 6). */
#define SKPX_ESCAPE_MAX_EXPANSION 4

/* Writes the escaped form of s[0..n) into out (cap >= 1), always NUL-terminated; stops before
 * an escape or character that would not fit whole (the output is then truncated, never cut
 * inside a sequence). Returns the length written. Borrows s (NULL ok when n is 0) and out. */
size_t skpx_escape_ctl(const char *s, size_t n, char *out, size_t cap);
/* True if s[0..n) would be changed by skpx_escape_ctl (it holds something to escape). */
bool skpx_escape_needed(const char *s, size_t n);

#endif
