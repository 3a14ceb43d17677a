/* pct.c - percent-decoding (see pct.h). */
#include "common/pct.h"

#include "common/hex.h"

size_t skpx_pct_decode(const char *in, size_t in_len, char *out, size_t cap, bool *malformed)
{
    bool bad = false;
    size_t need = 0;
    for (size_t i = 0; i < in_len; i++) {
        char c = in[i];
        if (c == '%') {
            int hi = i + 2 < in_len ? skpx_hex_value(in[i + 1]) : -1;
            int lo = hi >= 0 ? skpx_hex_value(in[i + 2]) : -1;
            if (lo >= 0) {
                c = (char)(hi << 4 | lo);
                i += 2;
                if (c == '\0')
                    bad = true;
            } else {
                bad = true;
            }
        }
        if (cap && need < cap - 1)
            out[need] = c;
        need++;
    }
    if (cap)
        out[need < cap ? need : cap - 1] = '\0';
    if (malformed)
        *malformed = bad;
    return need;
}
