/* Fuzz target of skpx_uri_regex_translate / skpx_uri_regex_compile (src/common/uri_regex.c):
 * any pattern is translated or refused with a reason, never writing past the output room; what
 * translates fits SKP_URI_REGEX_OUT_MAX, and what compiles can be run against a name. Input:
 * the pattern, then optionally a NUL byte and an endpoint name to match. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/uri_regex.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 2048)
        return 0;
    char *buf = malloc(size + 2);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    buf[size + 1] = '\0';
    const char *rx = buf;
    const char *name = buf + strlen(buf) + 1; /* "" when there is no second part */

    char out[SKP_URI_REGEX_OUT_MAX];
    char err[160];
    int icase = 0;
    skp_err e = skpx_uri_regex_translate(rx, out, sizeof(out), &icase, err, sizeof(err));
    CHECK(e == SKP_OK || e == SKP_EINVAL);
    CHECK(e == SKP_OK || err[0] != '\0');
    CHECK(strlen(out) < sizeof(out));
    /* a small room is refused or filled, never overrun */
    char small[16];
    skp_err es = skpx_uri_regex_translate(rx, small, sizeof(small), &icase, err, sizeof(err));
    CHECK(es == e || (e == SKP_OK && es == SKP_ETOOBIG));
    CHECK(strlen(small) < sizeof(small));

    regex_t re;
    e = skpx_uri_regex_compile(&re, rx, err, sizeof(err));
    CHECK(e == SKP_OK || e == SKP_EINVAL || e == SKP_ENOMEM);
    if (e == SKP_OK) {
        (void)regexec(&re, name, 0, NULL, 0);
        regfree(&re);
    }
    free(buf);
    return 0;
}
