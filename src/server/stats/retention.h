/* retention.h - deletes data older than --retention-days: once at start and then hourly on a
 * timer of the server's event loop. */
#ifndef SKP_SERVER_RETENTION_H
#define SKP_SERVER_RETENTION_H

#include <stdint.h>

#include "server/stats/metrics.h"
#include "server/store/store.h"
#include "skyprof/skp_err.h"

struct event_base;
struct retention;

/* Interval between purges. */
#define RETENTION_PERIOD_S 3600

/* Purges now and arms the hourly timer. `days` == 0 disables retention (*out is still a valid
 * object). Borrows base, st and m (they must outlive the object). Caller frees with
 * retention_stop. Errors: SKP_ENOMEM. */
SKP_MUST_CHECK skp_err retention_start(struct event_base *base, struct store *st, struct metrics *m,
                                       int days, struct retention **out);
/* Runs one purge now (cut-off = now - days); failures are logged and counted. */
void retention_run(struct retention *r);
/* Disarms and frees. NULL ok. */
void retention_stop(struct retention *r);

#endif
