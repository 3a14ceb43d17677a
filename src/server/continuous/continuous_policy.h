/* continuous_policy.h - threshold-triggered ("continuous") profiling policies (issue 11, spec
 * §3.1): one policy per service, SkyWalking's input shape and validation texts (OAP's
 * ContinuousProfilingMutationService), plus our targets (TRACE, PPROF_CPU, PPROF_WALL), our
 * server-evaluated item types (ENDPOINT_*), decimal thresholds and per-policy execute/silence
 * durations and a cap on triggers per hour.
 *
 * Three JSON shapes:
 *  - input  (HTTP PUT body): {"targets": [{"targetType", "checkItems": [{"type", "threshold",
 *    "period", "count", "uriList", "uriRegex"}]}], "executeDuration", "silenceDuration",
 *    "maxTriggersPerHour"} - the last three ours, optional (seconds, seconds, count);
 *  - stored (the policy's canonical JSON, OAP's configuration JSON plus our three fields):
 *    {"targetCheckers": {"<TARGET>": {"<TYPE>": {"threshold", "period", "count", "uriList",
 *    "uriRegex"}}}, "executeDuration", "silenceDuration", "maxTriggersPerHour"}; its SHA-512
 *    hex is the policy's uuid (agents detect a change by it);
 *  - agent  (queryPolicies' ServiceWithPolicyJSON element, rover's key names): {"ServiceName",
 *    "UUID", "Profiling": {"<TARGET>": {"<TYPE>": {"Threshold", "Period", "Count", "URIList",
 *    "URIRegex"}}}} holding only the items agents evaluate (PROCESS_*, HTTP_*).
 * Pure functions; thread-safe. */
#ifndef SKP_SERVER_CONTINUOUS_POLICY_H
#define SKP_SERVER_CONTINUOUS_POLICY_H

#include <jansson.h>
#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "skyprof/skp_err.h"

enum cont_target {
    CONT_TARGET_ON_CPU = 0, /* SkyWalking's (eBPF); our agents: a CPU process profile */
    CONT_TARGET_OFF_CPU,    /* SkyWalking's (eBPF); our agents: a wall process profile */
    CONT_TARGET_NETWORK,    /* SkyWalking's (eBPF); recorded, no task of ours runs it */
    CONT_TARGET_TRACE,      /* ours: a trace-profiling task for the endpoint that crossed */
    CONT_TARGET_PPROF_CPU,  /* ours: a pprof "cpu" process task on the instances that crossed */
    CONT_TARGET_PPROF_WALL, /* ours: a pprof "wall" process task */
    CONT_TARGET_COUNT
};

enum cont_monitor {
    CONT_MON_PROCESS_CPU = 0, /* agent-side (rover's five) */
    CONT_MON_PROCESS_THREAD_COUNT,
    CONT_MON_SYSTEM_LOAD,
    CONT_MON_HTTP_ERROR_RATE,
    CONT_MON_HTTP_AVG_RESPONSE_TIME,
    CONT_MON_ENDPOINT_AVG_RESPONSE_TIME, /* server-side, from the reported segments (ours) */
    CONT_MON_ENDPOINT_P90_RESPONSE_TIME,
    CONT_MON_ENDPOINT_P99_RESPONSE_TIME,
    CONT_MON_ENDPOINT_ERROR_RATE,
    CONT_MON_COUNT
};

/* Bounds of ours (OAP has none): they bound the evaluator's memory and a policy's size. */
#define CONT_PERIOD_MAX_S 600
#define CONT_MAX_URIS 64           /* uriList entries of one item */
#define CONT_URI_MAX 512           /* bytes of one URI or regex */
#define CONT_EXECUTE_DEFAULT_S 600 /* rover's defaults: execute 10 min, silence 20 min */
#define CONT_SILENCE_DEFAULT_S 1200
#define CONT_EXECUTE_MAX_S 900 /* 15 min: the longest trace or pprof task */
#define CONT_SILENCE_MAX_S 86400
#define CONT_PER_HOUR_DEFAULT 6
#define CONT_PER_HOUR_MAX 3600

struct cont_item {
    enum cont_monitor type;
    char *threshold_text; /* as given (OAP keeps the string) */
    double threshold;
    int64_t period_s;
    int64_t count;
    char **uri_list; /* NULL when none */
    size_t n_uris;
    char *uri_regex; /* NULL when none */
    regex_t re;      /* uri_regex compiled by skpx_uri_regex_compile: whole name */
    bool has_re;
};

struct cont_target_spec {
    enum cont_target type;
    struct cont_item *items;
    size_t n_items;
};

/* A policy; owns everything it points to (cont_policy_cleanup frees). */
struct cont_policy {
    char *service;
    struct cont_target_spec *targets;
    size_t n_targets;
    int64_t execute_s;
    int64_t silence_s;
    int64_t max_per_hour;
    char *json;     /* stored (canonical) JSON */
    char uuid[129]; /* SHA-512 hex of json */
};

const char *cont_target_name(enum cont_target t);
const char *cont_monitor_name(enum cont_monitor m);
/* Parses a name; false if unknown. */
bool cont_target_parse(const char *s, enum cont_target *out);
bool cont_monitor_parse(const char *s, enum cont_monitor *out);
/* True for the ENDPOINT_* types skyprofd evaluates from segments. */
bool cont_monitor_server_side(enum cont_monitor m);
/* Unit of a monitor type's value: "%", "ms", "" (counts, load). */
const char *cont_monitor_unit(enum cont_monitor m);

/* Builds *out for `service` from the input JSON `in` (borrowed), validating in OAP's order with
 * its texts ("contains multiple same target type: X", "contains multiple same monitor type X in
 * Y", "check X in Y error: <item error>", item errors "period must be bigger than zero",
 * "count must bigger than zero", "count must be equal to or smaller than period", "parsing
 * threshold error" and the per-type threshold texts) and then ours. On SKP_EINVAL, reason (cap
 * bytes) holds the text. Errors: SKP_EINVAL, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err cont_policy_from_input(const char *service, const json_t *in,
                                              struct cont_policy *out, char *reason, size_t cap);
/* Rebuilds a policy from its stored JSON (as written by cont_policy_from_input). Errors:
 * SKP_EINVAL (not a valid stored policy), SKP_ENOMEM. */
SKP_MUST_CHECK skp_err cont_policy_from_stored(const char *service, const char *json,
                                               struct cont_policy *out);
void cont_policy_cleanup(struct cont_policy *p);

/* The input shape of a policy (what GET returns; PUT of it gives the same uuid). New reference,
 * NULL on allocation failure. */
json_t *cont_policy_input_json(const struct cont_policy *p);
/* The agent element (see above); NULL on allocation failure. A removed policy: pass p = NULL
 * (gives {"ServiceName": service, "UUID": ""}). */
json_t *cont_policy_agent_json(const char *service, const struct cont_policy *p);
/* True when an item of this policy is evaluated by skyprofd / by agents. */
bool cont_policy_has_server_items(const struct cont_policy *p);

/* SHA-512 hex (128 chars + NUL) of data. */
void cont_sha512_hex(const void *data, size_t len, char out[129]);

/* A URI matches an item: in uri_list, or matching uri_regex; an item with neither matches every
 * endpoint. */
bool cont_item_matches(const struct cont_item *it, const char *uri);

#endif
