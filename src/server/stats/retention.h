/* retention.h - deletes data older than --retention-days: once at start and then hourly on a
 * timer of the server's event loop. A purge runs in batches (store_purge_step, at most
 * RETENTION_BATCH_ROWS rows each, each its own transaction), one batch per turn of the loop
 * (a 0 s timer between them), so the loop serves its connections between batches. */
#ifndef SKP_SERVER_RETENTION_H
#define SKP_SERVER_RETENTION_H

#include <stdbool.h>
#include <stdint.h>

#include "server/stats/metrics.h"
#include "server/store/store.h"
#include "skyprof/skp_err.h"

struct event_base;
struct retention;

/* Interval between purges. */
#define RETENTION_PERIOD_S 3600
/* Rows per batch (bounded statements: a run of PostgreSQL snapshots is a row); the time a batch
 * takes is measured by bench/server/bench_retention.py (docs/performance.md, "Retention in
 * batches"). */
#define RETENTION_BATCH_ROWS 1000

/* Purges now and arms the hourly timer. `days` == 0 disables retention (*out is still a valid
 * object). Borrows base, st and m (they must outlive the object). Caller frees with
 * retention_stop. Errors: SKP_ENOMEM. */
SKP_MUST_CHECK skp_err retention_start(struct event_base *base, struct store *st, struct metrics *m,
                                       int days, struct retention **out);
/* Starts a purge now (cut-off = now - days) unless one is under way: its first batch runs
 * now, the others on later turns of the loop; skyprof_retention_runs_total counts it when
 * it ends, skyprof_retention_batches_total its batches. Failures are logged and counted. */
void retention_run(struct retention *r);
/* Whether a purge is under way (batches left). */
bool retention_running(const struct retention *r);
/* Rows per batch from now on (0 = the whole purge in one batch); default RETENTION_BATCH_ROWS. */
void retention_set_batch_rows(struct retention *r, uint64_t rows);
/* Disarms and frees. NULL ok. */
void retention_stop(struct retention *r);

#endif
