/* agent_clock.c - the real clock behind the agent's time seam. */
#include "agent/agent_clock.h"

#include <stddef.h>

#include "common/clock.h"

static int64_t real_now_ms(void *ud)
{
    (void)ud;
    return skpx_now_ms();
}

static int64_t real_mono_ns(void *ud)
{
    (void)ud;
    return skpx_mono_ns();
}

const struct skp__clock skp__clock_real = {real_now_ms, real_mono_ns, NULL};
