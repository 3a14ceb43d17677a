/* py_linetable.c - decoder of CPython's location table (3.11+). Every entry starts with a byte
 * that has bit 7 set: bits 3-6 are the entry's code, bits 0-2 the number of code units it covers
 * minus one. The codes that carry a line delta encode it as the first (signed) varint after the
 * first byte; "one line" codes 11 and 12 mean +1 and +2; code 15 means "no location". Varints
 * hold 6 bits per byte, bit 6 meaning "more follows". Bytes after the varint (columns) never
 * have bit 7 set, which is how the decoder finds the next entry. */
#include "common/py_linetable.h"

#include <stdbool.h>

enum {
    LOC_ONE_LINE1 = 11,
    LOC_ONE_LINE2 = 12,
    LOC_NO_COLUMNS = 13,
    LOC_LONG = 14,
    LOC_NONE = 15,
};

/* Bytes one code unit takes (an opcode byte and its argument byte). */
#define CODE_UNIT_BYTES 2

static unsigned read_varint(const uint8_t **p, const uint8_t *end)
{
    unsigned val = 0;
    unsigned shift = 0;
    while (*p < end) {
        uint8_t b = *(*p)++;
        if (shift < 30)
            val |= (unsigned)(b & 63) << shift;
        shift += 6;
        if (!(b & 64))
            break;
    }
    return val;
}

static int read_svarint(const uint8_t **p, const uint8_t *end)
{
    unsigned u = read_varint(p, end);
    return (u & 1) ? -(int)(u >> 1) : (int)(u >> 1);
}

int skpx_py_linetable_line(const uint8_t *table, size_t len, int firstlineno, int addr)
{
    if (addr < 0)
        return firstlineno;
    if (!table)
        return -1;
    const uint8_t *p = table;
    const uint8_t *end = table + len;
    /* int arithmetic on hostile tables: keep the line in a wide type and clamp at the end */
    long long line = firstlineno;
    long long start = 0;
    while (p < end) {
        uint8_t first = *p++;
        if (!(first & 128))
            return -1; /* not at an entry start: corrupt or torn copy */
        int code = (first >> 3) & 15;
        long long n_bytes = (long long)((first & 7) + 1) * CODE_UNIT_BYTES;
        int delta = 0;
        switch (code) {
        case LOC_NO_COLUMNS:
        case LOC_LONG:
            delta = read_svarint(&p, end);
            break;
        case LOC_ONE_LINE1:
            delta = 1;
            break;
        case LOC_ONE_LINE2:
            delta = 2;
            break;
        default:
            break; /* short forms (0-9), one-line-0 (10) and none (15): same line */
        }
        line += delta;
        if (addr < start + n_bytes) {
            if (code == LOC_NONE || line < 0 || line > INT32_MAX)
                return -1;
            return (int)line;
        }
        start += n_bytes;
        while (p < end && !(*p & 128))
            p++;
    }
    return -1;
}
