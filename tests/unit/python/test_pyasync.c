/* test_pyasync.c - unit tests of the ready-or-waiting rule of a suspended asyncio task
 * (src/python/pyasync_rule.c) on fake objects laid out as the offsets say: a bare yield is
 * ready; a FutureIter over a pending future waits, over a done one is ready; an asyncio.sleep
 * timer before its deadline waits, past it is ready; an awaited object of another type waits;
 * the words read ahead decide with no read of the test's own, and a stale guess (a new future
 * behind the same FutureIter, a guess at unmapped memory) still gives the right answer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <sys/mman.h>
#include <time.h>

#include "python/pyasync.h"
#include "python/safe_read.h"

/* Fake objects: 32 words each, ob_type at word 1. */
struct obj {
    uint64_t w[32];
};

static struct obj t_futiter, t_timer, t_float, t_other; /* type objects (only their address) */
static struct obj code_sleep, code_sleep0, code_other;
static struct obj futiter, future, future2, timer, when_f, other;

static struct skp__pyasync layout(void)
{
    return (struct skp__pyasync){
        .obj_type = 8,
        .futiter_type = (uintptr_t)&t_futiter,
        .futiter_future = 16,
        .fut_state = 88,
        .fut_pending = 0,
        .sleep_code = (uintptr_t)&code_sleep,
        .sleep0_code = (uintptr_t)&code_sleep0,
        .sleep_h_slot = 4,
        .timer_type = (uintptr_t)&t_timer,
        .timer_when = 96,
        .float_type = (uintptr_t)&t_float,
        .float_value = 16,
    };
}

static void set_state(struct obj *f, int state)
{
    memcpy((char *)f->w + 88, &state, sizeof(state));
}

static void set_when(double when)
{
    memcpy(&when_f.w[2], &when, sizeof(when));
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int setup(void **state)
{
    (void)state;
    assert_true(skp__safe_read_init());
    memset(&futiter, 0, sizeof(futiter));
    futiter.w[1] = (uintptr_t)&t_futiter;
    futiter.w[2] = (uintptr_t)&future;
    memset(&future, 0, sizeof(future));
    memset(&future2, 0, sizeof(future2));
    set_state(&future, 0);
    set_state(&future2, 0);
    memset(&timer, 0, sizeof(timer));
    timer.w[1] = (uintptr_t)&t_timer;
    timer.w[12] = (uintptr_t)&when_f; /* offset 96 */
    memset(&when_f, 0, sizeof(when_f));
    when_f.w[1] = (uintptr_t)&t_float;
    set_when(now_s() + 3600);
    memset(&other, 0, sizeof(other));
    other.w[1] = (uintptr_t)&t_other;
    return 0;
}

static bool ready(const struct skp__pyasync *a, uintptr_t code, uintptr_t awaited, uintptr_t tm,
                  struct skp__pyasync_memo *memo)
{
    struct skp__pyasync_chain c = {code, awaited, tm};
    return skp__pyasync_is_ready(a, &c, memo, NULL, now_s());
}

static void test_bare_yield_is_ready(void **state)
{
    (void)state;
    struct skp__pyasync a = layout();
    struct skp__pyasync_memo m = {0};
    uint64_t calls = skp__safe_read_calls();
    assert_true(ready(&a, (uintptr_t)&code_sleep0, 0, 0, &m));
    assert_int_equal(skp__safe_read_calls(), calls);           /* decided without a read */
    assert_false(ready(&a, (uintptr_t)&code_other, 0, 0, &m)); /* nothing awaited, no rule */
    assert_false(skp__pyasync_is_ready(NULL, NULL, &m, NULL, now_s()));
}

static void test_future_pending_then_done(void **state)
{
    (void)state;
    struct skp__pyasync a = layout();
    struct skp__pyasync_memo m = {0};
    assert_false(ready(&a, (uintptr_t)&code_other, (uintptr_t)&futiter, 0, &m));
    assert_true(m.future == (uintptr_t)&future && m.awaited == (uintptr_t)&futiter);
    set_state(&future, 2); /* FINISHED */
    assert_true(ready(&a, (uintptr_t)&code_other, (uintptr_t)&futiter, 0, &m));
    set_state(&future, 1); /* CANCELLED: done too */
    assert_true(ready(&a, (uintptr_t)&code_other, (uintptr_t)&futiter, 0, &m));
    /* the same FutureIter now over a new, pending future: the memo's guess is stale */
    futiter.w[2] = (uintptr_t)&future2;
    assert_false(ready(&a, (uintptr_t)&code_other, (uintptr_t)&futiter, 0, &m));
    assert_true(m.future == (uintptr_t)&future2);
}

static void test_sleep_timer_deadline(void **state)
{
    (void)state;
    struct skp__pyasync a = layout();
    struct skp__pyasync_memo m = {0};
    uintptr_t sleep = (uintptr_t)&code_sleep;
    set_when(now_s() + 3600);
    assert_false(ready(&a, sleep, (uintptr_t)&futiter, (uintptr_t)&timer, &m));
    set_when(now_s() - 0.001); /* due: the loop has not run the timer */
    assert_true(ready(&a, sleep, (uintptr_t)&futiter, (uintptr_t)&timer, &m));
    /* a timer of another type (another loop's handle) proves nothing */
    struct skp__pyasync_memo m2 = {0};
    assert_false(ready(&a, sleep, (uintptr_t)&other, (uintptr_t)&other, &m2));
}

static void test_other_awaitable_waits(void **state)
{
    (void)state;
    struct skp__pyasync a = layout();
    struct skp__pyasync_memo m = {0};
    set_state(&other, 2); /* would read "done" at the state offset: must not be looked at */
    other.w[2] = (uintptr_t)&future;
    set_state(&future, 2);
    assert_false(ready(&a, (uintptr_t)&code_other, (uintptr_t)&other, 0, &m));
}

/* The sampler's batch reads the words ahead; the test then decides without a read of its own. */
static void test_read_ahead(void **state)
{
    (void)state;
    struct skp__pyasync a = layout();
    struct skp__pyasync_memo m = {0};
    uintptr_t sleep = (uintptr_t)&code_sleep;
    assert_false(ready(&a, sleep, (uintptr_t)&futiter, (uintptr_t)&timer, &m)); /* learns */
    uint8_t words[SKP_PYASYNC_WORDS * 8];
    struct iovec loc[SKP_PYASYNC_WORDS], rem[SKP_PYASYNC_WORDS];
    struct skp__pyasync_ahead ah;
    size_t n = skp__pyasync_plan(&a, &m, words, loc, rem, &ah);
    assert_int_equal(n, SKP_PYASYNC_WORDS);
    set_state(&future, 2);
    ah.n_read = skp__safe_readv(loc, rem, n);
    assert_int_equal(ah.n_read, n);
    uint64_t calls = skp__safe_read_calls();
    struct skp__pyasync_chain c = {sleep, (uintptr_t)&futiter, (uintptr_t)&timer};
    assert_true(skp__pyasync_is_ready(&a, &c, &m, &ah, now_s()));
    assert_int_equal(skp__safe_read_calls(), calls); /* no read of its own */
    /* read ahead before the future finished: the words say pending, and they are believed */
    set_state(&future, 0);
    n = skp__pyasync_plan(&a, &m, words, loc, rem, &ah);
    ah.n_read = skp__safe_readv(loc, rem, n);
    assert_false(skp__pyasync_is_ready(&a, &c, &m, &ah, now_s()));
    /* a guess at unmapped memory: the batch stops there, the test reads what it lacks */
    void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(page != MAP_FAILED);
    munmap(page, 4096);
    m.future = (uintptr_t)page;
    m.when_obj = (uintptr_t)page + 64;
    n = skp__pyasync_plan(&a, &m, words, loc, rem, &ah);
    ah.n_read = skp__safe_readv(loc, rem, n);
    assert_true(ah.n_read < n);
    set_state(&future, 2);
    assert_true(skp__pyasync_is_ready(&a, &c, &m, &ah, now_s()));
    assert_true(m.future == (uintptr_t)&future && m.when_obj == (uintptr_t)&when_f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_bare_yield_is_ready, setup),
        cmocka_unit_test_setup(test_future_pending_then_done, setup),
        cmocka_unit_test_setup(test_sleep_timer_deadline, setup),
        cmocka_unit_test_setup(test_other_awaitable_waits, setup),
        cmocka_unit_test_setup(test_read_ahead, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
