/* hex.h - the value of one hexadecimal digit, for the parsers that read %XX escapes, \uXXXX
 * escapes and hex numbers. Pure, thread-safe, async-signal-safe. */
#ifndef SKP_COMMON_HEX_H
#define SKP_COMMON_HEX_H

/* 0..15 for '0'-'9', 'a'-'f', 'A'-'F'; -1 for any other character. */
static inline int skpx_hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

#endif
