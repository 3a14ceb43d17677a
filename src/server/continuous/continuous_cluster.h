/* continuous_cluster.h - skyprofd's evaluator across several collectors on one database
 * (issue 27, item 2; PostgreSQL: the store's cluster operations, store_continuous.h).
 *
 * Every collector, at each evaluator tick, in one statement each:
 *  1. stores its shares of the slots it recorded into since the last tick (per service, endpoint
 *     and slot: count, errors, latency sum, histogram, instances - cont_eval_export);
 *  2. takes or renews the evaluator's lease (one row: holder, expiry on the database's clock,
 *     CONT_CLUSTER_LEASE_MS or three check intervals if longer); a holder that stops gives it
 *     up, one that dies loses it when it expires;
 *  3. reads every collector's shares of the slots closed since its last read and puts their sums
 *     in its evaluator (histograms merge exactly), so every collector has the cluster's values
 *     (the UI's charts agree whichever collector answers).
 * Only the lease's holder judges; a firing is first claimed in the store under (service,
 * target, end of the window judged), so it is recorded once even when two collectors judge the
 * same window while the lease changes hands. A collector taking the lease over forgets its own
 * trigger times and replays the stored ones of the last hour (hourly cap, quiet time).
 * SQLite (one collector): cont_cluster_new answers SKP_ENOTSUP and nothing of this runs.
 * Loop thread only; store calls as synchronous as every other store call of the loop. */
#ifndef SKP_SERVER_CONTINUOUS_CLUSTER_H
#define SKP_SERVER_CONTINUOUS_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>

#include "server/continuous/continuous_eval.h"
#include "server/store/store.h"
#include "skyprof/skp_err.h"

#define CONT_CLUSTER_LEASE_MS 3000
#define CONT_CLUSTER_LEASE_NAME "continuous-evaluator"
/* How long shares of slots before the judged boundary stay stored beyond the longest window. */
#define CONT_CLUSTER_KEEP_MS 60000

struct cont_cluster;

struct cont_cluster_counters {
    bool held;               /* holds the evaluator's lease now */
    int64_t writer;          /* this collector's id (low 22 bits: its process id) */
    uint64_t takeovers;      /* times the lease was taken */
    uint64_t shares_written; /* slot shares stored */
    uint64_t shares_read;    /* slot shares read (every collector's) */
    uint64_t claims_lost;    /* firings another collector had claimed */
    uint64_t errors;         /* store calls that failed */
};

/* Starts the cluster side for the evaluator of `st` (borrowed; it must outlive the object),
 * ticked every check_ms, and tries to take the lease at once. Errors: SKP_ENOTSUP (the store is
 * a single collector's: evaluate alone), SKP_ENOMEM, SKP_EIO. */
SKP_MUST_CHECK skp_err cont_cluster_new(struct store *st, int64_t check_ms, int64_t now_ms,
                                        struct cont_cluster **out);
/* Gives the lease up when held (so another collector takes it at its next tick). NULL ok. */
void cont_cluster_free(struct cont_cluster *cc);

/* Steps 1-3 above for e (merged mode) at now_ms; *judge says whether this collector holds the
 * lease and must judge (cont_eval_tick) - else it only rolls (cont_eval_roll). A failing store
 * call is counted and retried at the next tick (the lease then counts as not held). */
void cont_cluster_tick(struct cont_cluster *cc, struct cont_eval *e, int64_t now_ms, bool *judge);
/* Claims a firing of e's window ending at window_end_ms: true only for the first claim across
 * the collectors (false as well when the store fails: better no trigger than two). */
bool cont_cluster_claim(struct cont_cluster *cc, const char *service, const char *target,
                        int64_t window_end_ms);

void cont_cluster_counters(const struct cont_cluster *cc, struct cont_cluster_counters *out);

/* Notes the stored server-side triggers of the hour before now_ms in e, oldest first
 * (cont_eval_note_trigger): at start, and when the lease is taken over. Errors: the store's
 * (SKP_ENOTSUP is not one: nothing stored). */
SKP_MUST_CHECK skp_err cont_cluster_replay(struct store *st, struct cont_eval *e, int64_t now_ms);

#endif
