/* clock.c - wall and monotonic clocks. */
#include "common/clock.h"

#include <errno.h>
#include <time.h>

int64_t skpx_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t skpx_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t skpx_mono_ms(void)
{
    return skpx_mono_ns() / 1000000;
}

void skpx_sleep_ns(int64_t ns)
{
    if (ns <= 0)
        return;
    int64_t deadline = skpx_mono_ns() + ns;
    struct timespec ts = {.tv_sec = deadline / 1000000000, .tv_nsec = deadline % 1000000000};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}
