/* uri_regex.h - the endpoint-name patterns of continuous-profiling policies (`uriRegex`).
 * SkyWalking's rover compiles them with Go's regexp package (RE2 syntax, also what most users
 * write from Java habits) and a pattern matches when it matches anywhere in the name (Go's
 * MatchString: anchor with ^ and $). We match them with POSIX regcomp(3), so the pattern is first
 * translated from the RE2 syntax that has a POSIX meaning and refused, with a reason, where it
 * has none. Used by skyprofd's policy validation and evaluation and by the agents' local checks,
 * so every side agrees on every pattern. Pure functions, thread-safe. */
#ifndef SKP_COMMON_URI_REGEX_H
#define SKP_COMMON_URI_REGEX_H

#include <regex.h>
#include <stddef.h>

#include "skyprof/skp_err.h"

/* Longest pattern accepted (bytes), and room that always holds its translation. */
#define SKP_URI_REGEX_MAX 512
#define SKP_URI_REGEX_OUT_MAX (8 * SKP_URI_REGEX_MAX + 16)

/* Translates the RE2-syntax pattern `rx` to a POSIX extended expression in `out` (cap bytes,
 * NUL-terminated; unanchored, like the original) and sets *icase when the pattern starts with
 * flags including `i`. Understood: literals and escaped punctuation, `.`, `[...]` classes with
 * ranges, escapes and `[:name:]` classes, `\d \D \w \W \s \S`, `\t \n \r \f`, `\Q...\E`,
 * groups `(...)`, `(?:...)` and named `(?P<n>...)`/`(?<n>...)`, `|`, `^ $`, quantifiers
 * `* + ? {n} {n,} {n,m}` and their lazy forms (laziness does not change whether a match exists),
 * leading flags `(?i)` `(?s)` `(?m)` `(?u)` and combinations.
 * Refused (SKP_EINVAL, reason in `err`): lookaround and atomic groups, back-references, word and
 * text boundaries, possessive quantifiers, nested or intersected classes, `\p{..}`, `\x..`,
 * other escapes of letters or digits, flags anywhere but the start, unbalanced brackets or
 * parentheses, patterns longer than SKP_URI_REGEX_MAX. SKP_ETOOBIG when `out` is too small
 * (SKP_URI_REGEX_OUT_MAX always suffices). Borrows rx; err may be NULL. */
SKP_MUST_CHECK skp_err skpx_uri_regex_translate(const char *rx, char *out, size_t cap, int *icase,
                                                char *err, size_t err_cap);

/* Translates and compiles `rx` into *re (REG_EXTENDED | REG_NOSUB, plus REG_ICASE for `(?i)`).
 * On success the caller owns *re and releases it with regfree(). Errors: those of
 * skpx_uri_regex_translate, SKP_EINVAL when regcomp refuses the translation, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err skpx_uri_regex_compile(regex_t *re, const char *rx, char *err,
                                              size_t err_cap);

#endif
