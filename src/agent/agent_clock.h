/* agent_clock.h - the time seam of the agent: wall-clock ms for protocol fields and task
 * scheduling (SkyWalking compares the agent clock with the OAP's StartTime), monotonic ms for
 * periods. Components take a `const struct skp__clock *` so unit tests can drive a fake clock. */
#ifndef SKP_AGENT_CLOCK_H
#define SKP_AGENT_CLOCK_H

#include <stdint.h>

struct skp__clock {
    int64_t (*now_ms)(void *ud);  /* wall clock, ms since the epoch */
    int64_t (*mono_ns)(void *ud); /* monotonic ns */
    void *ud;
};

/* The real clocks (src/common/clock.h). Thread-safe. */
extern const struct skp__clock skp__clock_real;

static inline int64_t skp__now_ms(const struct skp__clock *c)
{
    return c->now_ms(c->ud);
}

static inline int64_t skp__mono_ns(const struct skp__clock *c)
{
    return c->mono_ns(c->ud);
}

#endif
