/* test_sampler.c - the sampler's schedule (skp__sampler_tick_ns): dumps stay a period apart on
 * average, each step under two periods, and code repeating at a divisor of the period
 * is not aliased (a fixed schedule dumped two alternating 1 ms functions always in the same one
 * under a 10 ms period). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdint.h>

#include "agent/sampler.h"

#define MS 1000000LL

static void test_tick_steps_bounded_mean_period(void **state)
{
    (void)state;
    uint64_t rng = 88172645463325252ULL;
    const int64_t period = 10 * MS, start = 5 * MS;
    const int64_t n = 100000;
    assert_int_equal(skp__sampler_tick_ns(start, 0, period, &rng), start);
    int64_t prev = start, min_step = INT64_MAX, max_step = 0;
    for (int64_t k = 1; k <= n; k++) {
        int64_t t = skp__sampler_tick_ns(start, k, period, &rng);
        int64_t step = t - prev;
        min_step = step < min_step ? step : min_step;
        max_step = step > max_step ? step : max_step;
        prev = t;
    }
    assert_true(min_step > 0);
    assert_true(max_step < period * 2);
    assert_true(min_step < period / 10); /* the steps really vary */
    assert_true(max_step > period * 19 / 10);
    double mean = (double)(prev - start) / (double)n;
    assert_true(mean > period * 0.99 && mean < period * 1.01);
}

/* g runs in the first millisecond of every 2 ms, h in the second: each has half the time. */
static void test_tick_no_aliasing_with_alternating_code(void **state)
{
    (void)state;
    uint64_t rng = 0x9e3779b97f4a7c15ULL;
    const int64_t period = 10 * MS, start = 123456;
    const int n = 20000;
    int in_g = 0;
    for (int k = 1; k <= n; k++) {
        int64_t t = skp__sampler_tick_ns(start, k, period, &rng);
        if ((t % (2 * MS)) < MS)
            in_g++;
    }
    double share = (double)in_g / n;
    assert_true(share > 0.48 && share < 0.52);
}

static void test_tick_tiny_period(void **state)
{
    (void)state;
    uint64_t rng = 1;
    /* a period too short to jitter stays on the grid */
    assert_int_equal(skp__sampler_tick_ns(100, 7, 1, &rng), 107);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tick_steps_bounded_mean_period),
        cmocka_unit_test(test_tick_no_aliasing_with_alternating_code),
        cmocka_unit_test(test_tick_tiny_period),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
