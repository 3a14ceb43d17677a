/* cont_eval.h - rover's evaluation of a continuous-profiling policy, in the agent: one slot per
 * second; each check item keeps the values of its last `period` slots (per URI for the HTTP
 * items: one series per uriList entry, or one for the uriRegex); an item fires when at least
 * `count` of them are >= its threshold; any fired item of a target fires the target, with every
 * fired item (and URI) as a cause. Values:
 *   PROCESS_CPU            CPU time of the process in the slot / the slot's wall time x 100
 *                          (a per-slot delta; rover divides lifetime CPU by lifetime)
 *   PROCESS_THREAD_COUNT   threads of the process
 *   SYSTEM_LOAD            1-minute load average
 *   HTTP_ERROR_RATE        5xx / requests x 100 of the matching endpoints in the slot (0 when
 *                          there was no request)
 *   HTTP_AVG_RESPONSE_TIME mean duration (ms) of those requests (0 when none)
 * An endpoint matches a URI when its name, or the path after a "METHOD:" prefix, equals it (or
 * matches the regex as a whole, POSIX extended syntax). Channel thread only. */
#ifndef SKP_AGENT_CONT_EVAL_H
#define SKP_AGENT_CONT_EVAL_H

#include <regex.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/cont_http.h"
#include "agent/cont_policy.h"
#include "skyprof/skp_err.h"

/* One cause of a trigger (ContinuousProfilingCause). */
struct skp__cont_cause {
    int monitor; /* enum skp__cont_monitor */
    double threshold;
    double current; /* the latest slot value >= threshold */
    int n_over;     /* slots >= threshold in the window */
    int period;
    int uri_kind; /* 0 none, 1 path (uriList entry), 2 regex */
    char uri[SKP_CONT_URI_MAX];
};
#define SKP_CONT_CAUSES_MAX (SKP_CONT_N_MONITORS * SKP_CONT_URIS_MAX)

/* Process-wide readings of one slot; `has_*` false = not read (no item needs it). */
struct skp__cont_sample {
    double cpu_pct, threads, load1;
    bool has_cpu, has_threads, has_load;
};

struct skp__cont_series {
    float *vals; /* period values, ring */
    int head, filled;
    /* HTTP accumulators of the open slot */
    uint64_t count, errors, sum_ms;
};

struct skp__cont_check {
    int n_series;
    struct skp__cont_series series[SKP_CONT_URIS_MAX];
    regex_t re;
    bool has_re;
};

struct skp__cont_eval {
    struct skp__cont_policy *pol; /* owned copy; NULL = none */
    struct skp__cont_check chk[SKP_CONT_N_TARGETS][SKP_CONT_N_MONITORS];
    /* per endpoint slot and HTTP check: the series it feeds, -1 none, -2 not computed yet */
    int8_t (*ep_map)[SKP_CONT_N_TARGETS][2];
    bool needs_cpu, needs_threads, needs_load, needs_http;
};

void skp__cont_eval_init(struct skp__cont_eval *e);
/* Frees everything. */
void skp__cont_eval_cleanup(struct skp__cont_eval *e);
/* Replaces the policy (copied; NULL = none) and starts empty windows. A regex that does not
 * compile makes its item never fire (logged). Errors: SKP_ENOMEM (then no policy). */
SKP_MUST_CHECK skp_err skp__cont_eval_set_policy(struct skp__cont_eval *e,
                                                 const struct skp__cont_policy *p);
/* Adds one endpoint's requests of the open slot (index = its cont_http slot). */
void skp__cont_eval_http(struct skp__cont_eval *e, int index, const char *name, uint64_t count,
                         uint64_t errors, uint64_t sum_ms);
/* Closes the slot with the process readings `s` (HTTP values from what _http added). */
void skp__cont_eval_slot(struct skp__cont_eval *e, const struct skp__cont_sample *s);
/* Whether `target`'s items fire now; fills up to cap causes. */
bool skp__cont_eval_fired(const struct skp__cont_eval *e, int target,
                          struct skp__cont_cause *causes, int cap, int *n_causes);
/* Empties every window (after a trigger: the next one needs new evidence). */
void skp__cont_eval_clear(struct skp__cont_eval *e);
/* True when the endpoint `name` (NUL-terminated) matches `uri` as described above. Pure. */
bool skp__cont_uri_matches(const char *name, const char *uri);

#endif
