/* retention.c - periodic purge of old profiling data (see retention.h). A failed purge (e.g. a
 * read-only database) is logged and retried at the next period; it never stops the server. */
#include "server/stats/retention.h"

#include <event2/event.h>
#include <inttypes.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "server/store/store_stall.h"

#define MS_PER_DAY INT64_C(86400000)

struct retention {
    struct store *st;
    struct metrics *m;
    int days;
    struct event *timer;
};

void retention_run(struct retention *r)
{
    if (!r || r->days <= 0)
        return;
    int64_t cutoff = skpx_now_ms() - (int64_t)r->days * MS_PER_DAY;
    uint64_t n = 0;
    int64_t t0 = skpx_mono_ms();
    /* The purge is one transaction that may run long: the stall bound of the loop's store
     * (store_stall.h) would fail it every time, so it waits as before (issue 27: batched
     * purges that yield are not done yet). */
    int64_t bound = store_get_stall_ms(r->st);
    store_set_stall_ms(r->st, 0);
    skp_err err = store_purge_before(r->st, cutoff, &n);
    store_set_stall_ms(r->st, bound);
    r->m->retention_runs++;
    if (err) {
        r->m->retention_errors++;
        SKPX_WARN("retention: purge of data older than %d day(s) failed: %s", r->days,
                  skp_strerror(err));
        return;
    }
    r->m->retention_deleted += n;
    if (n)
        SKPX_INFO("retention: deleted %" PRIu64 " row(s) older than %d day(s) in %" PRId64 " ms", n,
                  r->days, skpx_mono_ms() - t0);
}

static void on_timer(evutil_socket_t fd, short what, void *ud)
{
    (void)fd;
    (void)what;
    retention_run(ud);
}

skp_err retention_start(struct event_base *base, struct store *st, struct metrics *m, int days,
                        struct retention **out)
{
    *out = NULL;
    struct retention *r = skpx_calloc(1, sizeof(*r));
    if (!r)
        return SKP_ENOMEM;
    r->st = st;
    r->m = m;
    r->days = days;
    if (days > 0) {
        r->timer = event_new(base, -1, EV_PERSIST, on_timer, r);
        struct timeval tv = {.tv_sec = RETENTION_PERIOD_S};
        if (!r->timer || event_add(r->timer, &tv) != 0) {
            retention_stop(r);
            return SKP_ENOMEM;
        }
        retention_run(r);
    }
    *out = r;
    return SKP_OK;
}

void retention_stop(struct retention *r)
{
    if (!r)
        return;
    if (r->timer)
        event_free(r->timer);
    skpx_free(r);
}
