/* cont_policy.h - a service's threshold-triggered ("continuous") profiling policy as the agent
 * holds it, and the bounded parser of the `ServiceWithPolicyJSON` argument of SkyWalking's
 * `ContinuousProfilingPolicyQuery` command (spec §3.2):
 *   [{"ServiceName": s, "UUID": u, "Profiling": {"ON_CPU": {"PROCESS_CPU": {"Threshold": "50",
 *     "Period": 10, "Count": 3, "URIList": [...], "URIRegex": "..."}}}}, ...]
 * Only the entry of our service is kept; an empty UUID means its policy was removed. Unknown
 * targets and monitor types are skipped (counted), unknown keys ignored. Every string, list and
 * nesting level has a maximum below; input beyond one is refused with a reason, never read past
 * its length. Pure and reentrant (fuzzed: tests/fuzz/cont_policy). */
#ifndef SKP_AGENT_CONT_POLICY_H
#define SKP_AGENT_CONT_POLICY_H

#include <stdbool.h>
#include <stddef.h>

#include "skyprof/skp_err.h"

/* Targets and monitor types in the wire's enum order (ContinuousProfilingTriggeredMonitorType). */
enum skp__cont_target {
    SKP_CONT_ON_CPU = 0,
    SKP_CONT_OFF_CPU = 1,
    SKP_CONT_NETWORK = 2, /* eBPF network profiling: kept, never run by our agents */
    SKP_CONT_N_TARGETS = 3,
};

enum skp__cont_monitor {
    SKP_CONT_PROCESS_CPU = 0,
    SKP_CONT_PROCESS_THREAD_COUNT = 1,
    SKP_CONT_SYSTEM_LOAD = 2,
    SKP_CONT_HTTP_ERROR_RATE = 3,
    SKP_CONT_HTTP_AVG_RESPONSE_TIME = 4,
    SKP_CONT_N_MONITORS = 5,
};

/* The policy's UUID is a SHA-512 hex (128 characters). */
#define SKP_CONT_UUID_MAX 160
/* URIs per check item (uriList) and bytes per URI or regex. */
#define SKP_CONT_URIS_MAX 16
#define SKP_CONT_URI_MAX 256
/* Largest period (seconds) a check keeps slots for; longer periods are cut to it. */
#define SKP_CONT_PERIOD_MAX 600
/* Input limits of the parser. */
#define SKP_CONT_JSON_MAX (1u << 20)
#define SKP_CONT_JSON_DEPTH 16
#define SKP_CONT_SERVICES_MAX 1024

struct skp__cont_item {
    bool present;
    double threshold;
    int period; /* seconds, 1..SKP_CONT_PERIOD_MAX */
    int count;  /* 1..period */
    int n_uris;
    char uris[SKP_CONT_URIS_MAX][SKP_CONT_URI_MAX];
    char regex[SKP_CONT_URI_MAX]; /* "" = none */
};

struct skp__cont_policy {
    char uuid[SKP_CONT_UUID_MAX]; /* "" = no policy */
    bool has_target[SKP_CONT_N_TARGETS];
    struct skp__cont_item items[SKP_CONT_N_TARGETS][SKP_CONT_N_MONITORS];
    /* Our extensions, when the server sends them (seconds; 0 = the agent's default). */
    int execute_s;
    int silence_s;
    int n_skipped; /* unknown targets / monitor types */
};

/* Names as in the JSON ("ON_CPU", "PROCESS_CPU", ...). */
const char *skp__cont_target_name(int t);
const char *skp__cont_monitor_name(int m);

/* Parses `json` (len bytes, borrowed, need not be NUL-terminated) and fills *out with the entry
 * of `service`; *found is false when the list has no entry for it (then *out is an empty policy).
 * An entry with an empty UUID gives found = true and an empty policy (removed).
 * Errors: SKP_EINVAL (malformed or over a limit; `reason` says where), SKP_ETOOBIG (over
 * SKP_CONT_JSON_MAX). Pure. */
SKP_MUST_CHECK skp_err skp__cont_policy_parse(const char *json, size_t len, const char *service,
                                              struct skp__cont_policy *out, bool *found,
                                              char *reason, size_t cap);

/* True when a check item of the policy has HTTP monitor types (the request path then counts). */
bool skp__cont_policy_has_http(const struct skp__cont_policy *p);
/* True when the policy has a target our agents run (ON_CPU or OFF_CPU) with an item. */
bool skp__cont_policy_active(const struct skp__cont_policy *p);

#endif
