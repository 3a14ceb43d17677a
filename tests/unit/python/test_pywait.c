/* test_pywait.c - unit tests of the lock-wait classifier (src/python/pywait.c): the parser of
 * /proc/self/task/TID/syscall on fixed texts (futex waits, the GIL's range, other syscalls,
 * malformed input), the frame test of `mutex`, and the real kernel answer for a thread blocked
 * on a semaphore (as threading.Lock.acquire blocks), one sleeping, and the GIL-range exclusion. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "python/pywait.h"

#define FUTEX 202

static enum skp__pywait_state parse(const char *s, uintptr_t lo, uintptr_t hi, uint64_t *w)
{
    return skp__pywait_parse(s, strlen(s), FUTEX, lo, hi, w);
}

static void test_parse(void **state)
{
    (void)state;
    uint64_t w = 1;
    /* sem_clockwait: FUTEX_WAIT_BITSET | PRIVATE (0x189) on a word outside the GIL */
    assert_int_equal(
        parse("202 0x55d0c0a8 0x189 0x0 0x0 0x7ffd 0xffffffff 0x7ffc 0x7f1\n", 0x1000, 0x2000, &w),
        SKP_PYWAIT_LOCK);
    assert_int_equal(w, 0x55d0c0a8);
    /* FUTEX_WAIT (0x80: private) and LOCK_PI */
    assert_int_equal(parse("202 0x10 0x80 0x2 0x0 0x0 0x0 0x7ffc 0x7f1", 0, 0, &w),
                     SKP_PYWAIT_LOCK);
    assert_int_equal(parse("202 0x10 0x86 0x0 0x0 0x0 0x0 0x7ffc 0x7f1", 0, 0, &w),
                     SKP_PYWAIT_LOCK);
    /* the same wait on a word inside the GIL state: waiting for the GIL */
    assert_int_equal(parse("202 0x1010 0x189 0x0 0x0 0x0 0x0 0x7ffc 0x7f1", 0x1000, 0x1100, &w),
                     SKP_PYWAIT_NO);
    assert_int_equal(w, 0);
    assert_int_equal(parse("202 0x1100 0x189 0x0 0x0 0x0 0x0 0x7ffc 0x7f1", 0x1000, 0x1100, &w),
                     SKP_PYWAIT_LOCK);
    /* FUTEX_WAKE (1 | private) does not sleep */
    assert_int_equal(parse("202 0x10 0x81 0x1 0x0 0x0 0x0 0x7ffc 0x7f1", 0, 0, &w), SKP_PYWAIT_NO);
    /* running, outside a syscall, other syscalls (clock_nanosleep, epoll_wait, read) */
    assert_int_equal(parse("running\n", 0, 0, &w), SKP_PYWAIT_NO);
    assert_int_equal(parse("-1 0x7ffc 0x7f1\n", 0, 0, &w), SKP_PYWAIT_NO);
    assert_int_equal(parse("230 0x1 0x0 0x7ffd 0x7ffd 0x0 0x0 0x7ffc 0x7f1", 0, 0, &w),
                     SKP_PYWAIT_NO);
    assert_int_equal(parse("0 0x3 0x7ffd 0x1 0x0 0x0 0x0 0x7ffc 0x7f1", 0, 0, &w), SKP_PYWAIT_NO);
    /* malformed */
    assert_int_equal(parse("", 0, 0, &w), SKP_PYWAIT_UNKNOWN);
    assert_int_equal(parse("abc", 0, 0, &w), SKP_PYWAIT_UNKNOWN);
    assert_int_equal(parse("202", 0, 0, &w), SKP_PYWAIT_UNKNOWN);
    assert_int_equal(parse("202 0x", 0, 0, &w), SKP_PYWAIT_UNKNOWN);
    assert_int_equal(parse("202 0x10", 0, 0, &w), SKP_PYWAIT_UNKNOWN);
    assert_int_equal(parse("202 0x10z 0x80", 0, 0, &w), SKP_PYWAIT_UNKNOWN);
    assert_int_equal(parse("202 0x1ffffffffffffffff 0x80", 0, 0, &w), SKP_PYWAIT_UNKNOWN);
    /* the length bounds the read: "202 0x10 0x80" cut before the op */
    assert_int_equal(skp__pywait_parse("202 0x10 0x80", 9, FUTEX, 0, 0, &w), SKP_PYWAIT_UNKNOWN);
}

static void test_event_wait(void **state)
{
    (void)state;
#define EV(s) skp__pywait_is_event_wait(s, strlen(s))
    assert_true(EV("Condition.wait (/usr/lib/python3.11/threading.py:320)"));
    assert_true(EV("Thread._wait_for_tstate_lock (/usr/lib/python3.11/threading.py:1132)"));
    assert_true(EV("_worker (/usr/lib/python3.11/concurrent/futures/thread.py:81)"));
    /* a contended lock in user code, or a Condition's own lock */
    assert_false(EV("wait_for_lock (/tmp/app.py:12)"));
    assert_false(EV("Semaphore.acquire (/usr/lib/python3.11/threading.py:469)"));
    /* same name elsewhere, malformed texts */
    assert_false(EV("Condition.wait (/tmp/threading_x.py:3)"));
    assert_false(EV("Condition.wait"));
    assert_false(EV("(waiting)"));
    assert_false(EV(""));
    assert_false(EV("x (:1)"));
#undef EV
}

struct blocked {
    sem_t sem;
    volatile int tid;
    int mode; /* 0: sem_wait, 1: nanosleep */
};

static void *blocker(void *arg)
{
    struct blocked *b = arg;
    b->tid = (int)syscall(SYS_gettid);
    if (b->mode == 0) {
        while (sem_wait(&b->sem) != 0) {
        }
    } else {
        struct timespec d = {1, 0};
        nanosleep(&d, NULL);
    }
    return NULL;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits (10 s at most) until the thread's state is `want`. */
static enum skp__pywait_state wait_state(int tid, uintptr_t lo, uintptr_t hi, uint64_t *w,
                                         enum skp__pywait_state want)
{
    enum skp__pywait_state s = SKP_PYWAIT_UNKNOWN;
    for (int64_t end = now_ms() + 10000; now_ms() < end;) {
        s = skp__pywait_read(tid, lo, hi, w);
        if (s == want)
            break;
        struct timespec d = {0, 2 * 1000 * 1000};
        nanosleep(&d, NULL);
    }
    return s;
}

static void test_real_threads(void **state)
{
    (void)state;
    struct blocked b = {.mode = 0};
    assert_int_equal(sem_init(&b.sem, 0, 0), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, blocker, &b), 0);
    while (!__atomic_load_n(&b.tid, __ATOMIC_SEQ_CST))
        sched_yield();
    uint64_t w = 0;
    assert_int_equal(wait_state(b.tid, 0, 0, &w, SKP_PYWAIT_LOCK), SKP_PYWAIT_LOCK);
    uintptr_t lo = (uintptr_t)&b.sem, hi = lo + sizeof(b.sem);
    assert_true(w >= lo && w < hi);
    /* the same wait with the semaphore taken for the GIL's range: not a lock wait */
    assert_int_equal(skp__pywait_read(b.tid, lo, hi, &w), SKP_PYWAIT_NO);
    assert_int_equal(sem_post(&b.sem), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    sem_destroy(&b.sem);

    struct blocked s = {.mode = 1};
    assert_int_equal(pthread_create(&t, NULL, blocker, &s), 0);
    while (!__atomic_load_n(&s.tid, __ATOMIC_SEQ_CST))
        sched_yield();
    /* sleeping: in clock_nanosleep, never a lock wait */
    struct timespec d = {0, 50 * 1000 * 1000};
    nanosleep(&d, NULL);
    assert_int_equal(skp__pywait_read(s.tid, 0, 0, &w), SKP_PYWAIT_NO);
    assert_int_equal(pthread_join(t, NULL), 0);
    /* a thread that is gone */
    assert_int_equal(skp__pywait_read(s.tid, 0, 0, &w), SKP_PYWAIT_UNKNOWN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_event_wait),
        cmocka_unit_test(test_real_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
