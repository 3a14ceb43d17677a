/* retention.c - periodic purge of old profiling data (see retention.h), in batches of
 * store_purge_step, one per turn of the event loop. A failed purge (e.g. a read-only
 * database) is logged and retried at the next period; it never stops the server. */
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
    uint64_t batch_rows;
    struct event *timer; /* the hourly purge */
    struct event *step;  /* the next batch: a 0 s timer, so the loop polls I/O first */
    /* the purge under way */
    bool running;
    int64_t cutoff, t0, longest_ms;
    uint64_t n, batches;
};

/* Runs one batch of the purge under way; arms the next one, or ends the purge. */
static void run_batch(struct retention *r)
{
    uint64_t n = 0;
    bool done = false;
    /* A batch is short, but the scans for stacks and frames nothing refers to any more grow
     * with the data kept: it waits for them as before (store_stall.h). */
    int64_t bound = store_get_stall_ms(r->st);
    store_set_stall_ms(r->st, 0);
    int64_t t = skpx_mono_ms();
    skp_err err = store_purge_step(r->st, r->cutoff, r->batch_rows, &n, &done);
    t = skpx_mono_ms() - t;
    store_set_stall_ms(r->st, bound);
    if (t > r->longest_ms)
        r->longest_ms = t;
    r->m->retention_batches++;
    r->batches++;
    r->n += n;
    r->m->retention_deleted += n;
    if (err) {
        r->running = false;
        r->m->retention_runs++;
        r->m->retention_errors++;
        SKPX_WARN("retention: purge of data older than %d day(s) failed: %s", r->days,
                  skp_strerror(err));
        return;
    }
    if (!done) {
        static const struct timeval now = {0, 0};
        if (event_add(r->step, &now) == 0)
            return;
        SKPX_WARN("retention: cannot schedule the next batch; the purge goes on next period");
    }
    r->running = false;
    r->m->retention_runs++;
    if (r->n)
        SKPX_INFO("retention: deleted %" PRIu64 " row(s) older than %d day(s) in %" PRIu64
                  " batch(es) (the longest %" PRId64 " ms), %" PRId64 " ms",
                  r->n, r->days, r->batches, r->longest_ms, skpx_mono_ms() - r->t0);
}

void retention_run(struct retention *r)
{
    if (!r || r->days <= 0 || r->running)
        return;
    r->running = true;
    r->cutoff = skpx_now_ms() - (int64_t)r->days * MS_PER_DAY;
    r->t0 = skpx_mono_ms();
    r->n = 0;
    r->batches = 0;
    r->longest_ms = 0;
    run_batch(r);
}

bool retention_running(const struct retention *r)
{
    return r && r->running;
}

void retention_set_batch_rows(struct retention *r, uint64_t rows)
{
    if (r)
        r->batch_rows = rows;
}

static void on_timer(evutil_socket_t fd, short what, void *ud)
{
    (void)fd;
    (void)what;
    retention_run(ud);
}

static void on_step(evutil_socket_t fd, short what, void *ud)
{
    (void)fd;
    (void)what;
    run_batch(ud);
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
    r->batch_rows = RETENTION_BATCH_ROWS;
    if (days > 0) {
        r->timer = event_new(base, -1, EV_PERSIST, on_timer, r);
        r->step = event_new(base, -1, 0, on_step, r);
        struct timeval tv = {.tv_sec = RETENTION_PERIOD_S};
        if (!r->timer || !r->step || event_add(r->timer, &tv) != 0) {
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
    if (r->step)
        event_free(r->step);
    skpx_free(r);
}
