/* clock.h - time sources. Wall-clock ms for protocol fields (SkyWalking uses ms since epoch),
 * monotonic ns for deadlines and periods. Both thread-safe and async-signal-safe. */
#ifndef SKP_COMMON_CLOCK_H
#define SKP_COMMON_CLOCK_H

#include <stdint.h>

int64_t skpx_now_ms(void);  /* CLOCK_REALTIME, ms since the epoch */
int64_t skpx_mono_ns(void); /* CLOCK_MONOTONIC, ns */
int64_t skpx_mono_ms(void); /* CLOCK_MONOTONIC, ms */
/* Sleeps `ns` (restarting on EINTR until the deadline). */
void skpx_sleep_ns(int64_t ns);

#endif
