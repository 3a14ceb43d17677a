/* continuous_eval.h - skyprofd's evaluator of the server-side items of continuous-profiling
 * policies (ENDPOINT_AVG/P90/P99_RESPONSE_TIME, ENDPOINT_ERROR_RATE) from every reported
 * segment's entry span, with rover's semantics (spec §3.1):
 *  - slots of slot_ms (1 s; tests shorten it) by the end time of the request's entry span (the
 *    slot it arrived in when that is in the future or older than the lateness horizon); a slot
 *    stays open for late segments until the horizon (CONT_EVAL_LATENESS_MS) has passed, and only
 *    closed slots are judged, so a trigger comes at most that much after its window;
 *  - per endpoint that an item of the service's policy names (uriList) or matches (uriRegex; an
 *    item with neither matches every endpoint): per slot the request count, errors, mean, p90
 *    and p99 (a slot's latencies go into one sparse histogram, es_hist, reused every slot);
 *  - an item fires when at least `count` of the last `period` closed slots have a value >=
 *    threshold (slots without requests have no value); any firing item fires its target;
 *  - then no trigger for the service while the task runs (execute duration, or the created
 *    task's end if later) nor during the silence after it, and at most maxTriggersPerHour.
 * Bounds: CONT_EVAL_MAX_SERIES endpoints tracked in all (more are not tracked, and counted);
 * an endpoint never matched is remembered as such (at most CONT_EVAL_MAX_NEG per service).
 *
 * Merged mode (several collectors on one database, continuous_cluster.h): each collector still
 * records its own requests in open slots, but exports them (cont_eval_export) instead of closing
 * them into its ring; the ring is filled from the sum of every collector's shares
 * (cont_eval_put_merged), and slots are judged `merge_delay_ms` later than alone so that the
 * other collectors' last shares are stored first.
 * Single-threaded (the server loop). */
#ifndef SKP_SERVER_CONTINUOUS_EVAL_H
#define SKP_SERVER_CONTINUOUS_EVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/continuous/continuous_policy.h"
#include "skyprof/skp_err.h"

struct es_hist; /* server/stats/endpoint_stats.h */

#define CONT_EVAL_MAX_SERIES 20000
/* Policies held (one per service); a new service's beyond it is refused (cont_eval_policy_room). */
#define CONT_EVAL_MAX_POLICIES 1000
#define CONT_EVAL_MAX_NEG 10000
#define CONT_EVAL_MAX_CAUSES 8
#define CONT_EVAL_MAX_INSTANCES 16 /* instances remembered per endpoint (for PPROF targets) */
/* How late a segment may arrive and still count in the slot of its end (agents send finished
 * segments in batches, every second or so). */
#define CONT_EVAL_LATENESS_MS 3000
#define CONT_EVAL_MAX_HORIZON 64 /* open slots per endpoint at most */

struct cont_eval;

struct cont_eval_opts {
    int64_t slot_ms;        /* 0 = 1000 */
    size_t max_series;      /* 0 = CONT_EVAL_MAX_SERIES */
    size_t max_policies;    /* 0 = CONT_EVAL_MAX_POLICIES */
    int64_t lateness_ms;    /* 0 = CONT_EVAL_LATENESS_MS */
    bool merged;            /* judge every collector's shares (see above) */
    int64_t merge_delay_ms; /* merged: how long a share takes to be stored (0 = slot_ms) */
};

/* One cause of a firing target (strings borrowed for the callback). */
struct cont_cause {
    enum cont_monitor type;
    const char *uri; /* the endpoint */
    double threshold;
    double current;   /* mean value of the slots at or above the threshold */
    int64_t window_s; /* the item's period, in seconds of slot_ms */
    int64_t hits;     /* slots of the window at or above the threshold */
    int64_t period;   /* = the item's period (slots) */
};

/* A target fired. */
struct cont_fire {
    const struct cont_policy *policy;
    enum cont_target target;
    const struct cont_cause *causes;
    size_t n_causes;
    const char *const *instances; /* instances that served the first cause's endpoint lately */
    size_t n_instances;
    int64_t now_ms;
    int64_t window_end_ms; /* the end of the window judged (the first slot not judged) */
};
/* Called for each firing target; returns the end time (ms) of the task it created (0 = none),
 * so the evaluator holds the service quiet until then plus the silence. */
typedef int64_t (*cont_fire_cb)(void *ud, const struct cont_fire *f);

struct cont_eval_counters {
    uint64_t recorded;   /* requests added to a tracked endpoint */
    uint64_t untracked;  /* matched but not tracked (series bound) */
    uint64_t fired;      /* triggers fired */
    uint64_t suppressed; /* firing targets held back by the hourly cap */
    uint64_t reslotted;  /* requests counted in their arrival slot (end time out of range) */
    size_t series;
    size_t policies;
};

SKP_MUST_CHECK skp_err cont_eval_new(const struct cont_eval_opts *opts, struct cont_eval **out);
void cont_eval_free(struct cont_eval *e);

/* Installs the policy of p->service, taking ownership of *p (moved: *p is zeroed), replacing
 * the previous one (its series and quiet time kept when the uuid is unchanged). A policy
 * without server-side items is dropped (nothing to evaluate). Errors: SKP_ENOMEM (*p then
 * cleaned up). */
SKP_MUST_CHECK skp_err cont_eval_set_policy(struct cont_eval *e, struct cont_policy *p);
void cont_eval_remove_policy(struct cont_eval *e, const char *service);
/* True if `service` may set a policy: it has one already, or fewer than max_policies are held. */
bool cont_eval_policy_room(const struct cont_eval *e, const char *service);
/* The uuid of the service's installed policy, NULL if none. */
const char *cont_eval_policy_uuid(const struct cont_eval *e, const char *service);

/* One finished request whose entry span ended at end_ms (hot path: a hash lookup when the
 * service has no policy). */
void cont_eval_record(struct cont_eval *e, const char *service, const char *instance,
                      const char *endpoint, int64_t end_ms, int64_t latency_ms, bool is_error,
                      int64_t now_ms);

/* Closes the slots up to now, evaluates every policy and calls cb for each firing target. */
void cont_eval_tick(struct cont_eval *e, int64_t now_ms, cont_fire_cb cb, void *ud);

/* Recent closed slot values (the window before the lateness horizon) of one item's endpoints,
 * for the UI's charts: `values[i]` is the value of slot (first_slot_ms + i*slot_ms), NaN when
 * the slot had no request. */
struct cont_series_view {
    const char *target;
    const char *type;
    const char *uri;
    double threshold;
    int64_t period;
    int64_t count;
    int64_t first_slot_ms;
    int64_t slot_ms;
    const double *values;
    size_t n_values;
};
typedef skp_err (*cont_series_cb)(void *ud, const struct cont_series_view *v);
/* Visits each (item, endpoint) of the service's policy. Errors: SKP_ENOTFOUND (no policy
 * evaluated here), SKP_ENOMEM, or the callback's. */
SKP_MUST_CHECK skp_err cont_eval_values(struct cont_eval *e, const char *service, int64_t now_ms,
                                        cont_series_cb cb, void *ud);
/* A trigger of the service's policy that happened at time_ms outside this evaluator (before a
 * restart, or on another collector sharing the database): it counts against the hourly cap and
 * starts the quiet time from time_ms: execute, or the task it created when made_task (a task of
 * executeDuration rounded up to minutes, 1-15, as continuous_trigger.h creates), then silence.
 * Call oldest first. No-op when the service has no policy evaluated here. */
void cont_eval_note_trigger(struct cont_eval *e, const char *service, int64_t time_ms,
                            bool made_task);
/* When the service may trigger again (0 = now). */
int64_t cont_eval_quiet_until(const struct cont_eval *e, const char *service);

void cont_eval_counters(const struct cont_eval *e, struct cont_eval_counters *out);

/* ---- merged mode ---- */

/* One endpoint's requests in one slot: a collector's share (cont_eval_export) or the sum of all
 * collectors' (cont_eval_put_merged). Borrowed. */
struct cont_part {
    const char *service;
    const char *endpoint;
    int64_t slot_ms; /* the slot's start */
    int64_t count, errors;
    double sum_ms;
    const struct es_hist *hist;
    const char *const *instances;
    size_t n_instances;
};
typedef skp_err (*cont_part_cb)(void *ud, const struct cont_part *p);

/* Visits the open slots recorded into since the last export (each once; a slot recorded into
 * again is visited again with its whole content). No-op unless merged. Errors: the callback's
 * (the slot it failed on stays to export). */
SKP_MUST_CHECK skp_err cont_eval_export(struct cont_eval *e, cont_part_cb cb, void *ud);
/* Sets the closed slot p->slot_ms of (p->service, p->endpoint) to the merged values of p (the
 * endpoint is tracked when an item of the service's policy matches it). */
void cont_eval_put_merged(struct cont_eval *e, const struct cont_part *p);
/* The start of the first slot not judged at now_ms: slots before it are closed. */
int64_t cont_eval_closed_before_ms(const struct cont_eval *e, int64_t now_ms);
/* The longest window of the installed policies, in ms (at least one slot). */
int64_t cont_eval_window_ms(const struct cont_eval *e);
/* Closes (drops, merged) the open slots before the judged boundary, judging nothing: what a
 * collector that does not hold the evaluator's lease does at its tick. */
void cont_eval_roll(struct cont_eval *e, int64_t now_ms);
/* Forgets every service's trigger times and quiet time (the evaluator's lease was taken over:
 * the stored triggers are replayed with cont_eval_note_trigger next). */
void cont_eval_reset_triggers(struct cont_eval *e);
/* Removes the policy of every service evaluated here for which keep(ud, service) is false
 * (policies another collector removed from the shared store). */
void cont_eval_retain(struct cont_eval *e, bool (*keep)(void *ud, const char *service), void *ud);

#endif
