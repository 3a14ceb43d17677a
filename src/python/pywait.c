/* pywait.c - lock-wait classification of a thread from /proc/self/task/TID/syscall (see
 * pywait.h). */
#include "python/pywait.h"

#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/procfs.h"

/* futex(2) operations that sleep (the low 7 bits; FUTEX_PRIVATE_FLAG and FUTEX_CLOCK_REALTIME
 * are flags above them): WAIT, LOCK_PI, WAIT_BITSET, WAIT_REQUEUE_PI, LOCK_PI2. */
#define FUTEX_CMD_MASK 127u
#define FUTEX_OP_WAIT 0u
#define FUTEX_OP_LOCK_PI 6u
#define FUTEX_OP_WAIT_BITSET 9u
#define FUTEX_OP_WAIT_REQUEUE_PI 11u
#define FUTEX_OP_LOCK_PI2 13u

/* Parses one unsigned number (decimal, or hex after 0x) at *p within [*p, end); a leading '-'
 * is accepted and reported in *neg. Advances *p past it and the spaces after. */
static bool next_num(const char **p, const char *end, uint64_t *out, bool *neg)
{
    const char *s = *p;
    *neg = false;
    *out = 0;
    if (s < end && *s == '-') {
        *neg = true;
        s++;
    }
    bool hex = end - s >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    if (hex)
        s += 2;
    int digits = 0;
    uint64_t v = 0;
    while (s < end) {
        unsigned d;
        char c = *s;
        if (c >= '0' && c <= '9')
            d = (unsigned)(c - '0');
        else if (hex && c >= 'a' && c <= 'f')
            d = (unsigned)(c - 'a' + 10);
        else if (hex && c >= 'A' && c <= 'F')
            d = (unsigned)(c - 'A' + 10);
        else
            break;
        unsigned base = hex ? 16u : 10u;
        if (v > (UINT64_MAX - d) / base)
            return false; /* more than 64 bits */
        v = v * base + d;
        digits++;
        s++;
    }
    if (digits == 0 || (s < end && *s != ' ' && *s != '\n'))
        return false;
    while (s < end && (*s == ' ' || *s == '\n'))
        s++;
    *p = s;
    *out = v;
    return true;
}

enum skp__pywait_state skp__pywait_parse(const char *text, size_t len, long futex_nr,
                                         uintptr_t gil_lo, uintptr_t gil_hi, uint64_t *word)
{
    *word = 0;
    if (!text || len == 0)
        return SKP_PYWAIT_UNKNOWN;
    if (len >= 7 && memcmp(text, "running", 7) == 0)
        return SKP_PYWAIT_NO;
    const char *p = text;
    const char *end = text + len;
    uint64_t nr, addr, op;
    bool neg;
    if (!next_num(&p, end, &nr, &neg))
        return SKP_PYWAIT_UNKNOWN;
    if (neg || nr != (uint64_t)futex_nr)
        return SKP_PYWAIT_NO; /* blocked outside a syscall, or in another one */
    if (!next_num(&p, end, &addr, &neg) || neg || !next_num(&p, end, &op, &neg) || neg)
        return SKP_PYWAIT_UNKNOWN;
    unsigned cmd = (unsigned)(op & FUTEX_CMD_MASK);
    if (cmd != FUTEX_OP_WAIT && cmd != FUTEX_OP_WAIT_BITSET && cmd != FUTEX_OP_LOCK_PI &&
        cmd != FUTEX_OP_WAIT_REQUEUE_PI && cmd != FUTEX_OP_LOCK_PI2)
        return SKP_PYWAIT_NO; /* a wake or requeue does not sleep */
    if (addr >= (uint64_t)gil_lo && addr < (uint64_t)gil_hi)
        return SKP_PYWAIT_NO; /* waiting for the GIL: about to run Python, not blocked */
    *word = addr;
    return SKP_PYWAIT_LOCK;
}

enum skp__pywait_state skp__pywait_read(int tid, uintptr_t gil_lo, uintptr_t gil_hi, uint64_t *word)
{
    char buf[256];
    *word = 0;
    ssize_t n = skpx_procfs_read_task(0, tid, "syscall", buf, sizeof(buf));
    if (n <= 0)
        return SKP_PYWAIT_UNKNOWN;
    return skp__pywait_parse(buf, (size_t)n, (long)SYS_futex, gil_lo, gil_hi, word);
}

/* Does `s` (n bytes) end with `suffix`? */
static bool ends_with(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

bool skp__pywait_is_event_wait(const char *frame, size_t len)
{
    static const struct {
        const char *func;
        const char *file_suffix;
    } waits[] = {
        {"Condition.wait", "/threading.py"},
        {"Thread._wait_for_tstate_lock", "/threading.py"},
        {"_worker", "/concurrent/futures/thread.py"},
    };
    if (!frame || len < 5 || frame[len - 1] != ')')
        return false;
    /* "<func> (<file>:<line>)": the function ends at the last " (", the file at the last ':' */
    size_t open = len;
    while (open > 0 && !(frame[open - 1] == '(' && open >= 2 && frame[open - 2] == ' '))
        open--;
    if (open < 2)
        return false;
    size_t func_len = open - 2;
    size_t colon = len - 1;
    while (colon > open && frame[colon] != ':')
        colon--;
    if (colon <= open)
        return false;
    const char *file = frame + open;
    size_t file_len = colon - open;
    for (size_t i = 0; i < sizeof(waits) / sizeof(waits[0]); i++) {
        size_t fl = strlen(waits[i].func);
        if (fl == func_len && memcmp(frame, waits[i].func, fl) == 0 &&
            ends_with(file, file_len, waits[i].file_suffix))
            return true;
    }
    return false;
}
