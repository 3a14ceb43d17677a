/* Fuzz target of the /proc/self/task/TID/syscall parser and the frame test of the Python lock-wait
 * events (src/python/pywait.c): any text is classified without reading past its length (the input
 * is copied to an exact-size buffer, no NUL), a LOCK answer has a word outside the GIL range, and
 * a refused text reports no word. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "python/pywait.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *text = malloc(size ? size : 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    const uintptr_t lo = 0x1000, hi = 0x2000;
    uint64_t word = 7;
    enum skp__pywait_state s = skp__pywait_parse(text, size, 202, lo, hi, &word);
    CHECK(s == SKP_PYWAIT_UNKNOWN || s == SKP_PYWAIT_NO || s == SKP_PYWAIT_LOCK);
    if (s == SKP_PYWAIT_LOCK)
        CHECK(word < lo || word >= hi);
    else
        CHECK(word == 0);
    (void)skp__pywait_is_event_wait(text, size);
    free(text);
    return 0;
}
