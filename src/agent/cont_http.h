/* cont_http.h - per-endpoint request counters for the HTTP checks of continuous profiling
 * (HTTP_ERROR_RATE, HTTP_AVG_RESPONSE_TIME), fed from the request path.
 *
 * The table is static (process lifetime, like the tracer hub): request threads may run while an
 * agent stops or restarts. It is switched on only while a policy with HTTP items exists; off, the
 * request path pays one relaxed atomic load. On, a finished entry segment costs a hash of its
 * endpoint name, a probe in an open-addressing table and three relaxed atomic adds: no lock, no
 * syscall, no allocation. Counters only grow; the reader (the channel thread, once per second)
 * keeps the values it saw last and takes differences, so nothing is reset under a writer.
 * Endpoints beyond SKP_CONT_EP_MAX are not counted (counted as dropped). */
#ifndef SKP_AGENT_CONT_HTTP_H
#define SKP_AGENT_CONT_HTTP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Distinct endpoint names counted (a power of two) and bytes of a name kept for matching. */
#define SKP_CONT_EP_MAX 512
#define SKP_CONT_EP_NAME_MAX 256

/* Switches counting on or off (the channel thread, when the policy changes). */
void skp__cont_http_enable(bool on);
/* True while counting is on. Hot path (one relaxed load). */
bool skp__cont_http_enabled(void);
/* Counts one finished request of endpoint `name` (len bytes, borrowed) that took `dur_ms`;
 * `server_error` = a 5xx answer. Hot path: lock-free, async-signal-unsafe only through nothing
 * (no allocation, no syscall). */
void skp__cont_http_record(const char *name, size_t len, int64_t dur_ms, bool server_error);

/* One endpoint's counts since the previous read, as the reader sees them. */
struct skp__cont_http_delta {
    int index;        /* stable slot index, 0..SKP_CONT_EP_MAX-1 */
    const char *name; /* borrowed from the table (immutable once published) */
    uint64_t count, errors, sum_ms;
};
typedef void (*skp__cont_http_cb)(void *ud, const struct skp__cont_http_delta *d);
/* Calls cb for every published endpoint with its counts since the previous call (zero counts
 * included). One reader only (the channel thread). */
void skp__cont_http_read(skp__cont_http_cb cb, void *ud);
/* Endpoints not counted because the table was full. */
uint64_t skp__cont_http_dropped(void);

#endif
