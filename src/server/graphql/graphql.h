/* graphql.h - skyprofd's GraphQL front door (SkyWalking's query protocol): the schema text
 * (schema.graphqls, compiled in), the resolvers of its fields, and OAP's ids. The resolvers call
 * the store, the task service and the analyzer, the same code the HTTP API calls: one
 * implementation per feature, two front doors. The HTTP glue (http/http_graphql.c) parses a
 * request, asks graphql_needs_worker whether it may run on the loop, and runs graphql_execute
 * with a context naming the store of the thread it runs on.
 *
 * Threads: graphql_schema builds the schema once (thread-safe); a context is used by one thread;
 * the counters are atomic. */
#ifndef SKP_SERVER_GRAPHQL_H
#define SKP_SERVER_GRAPHQL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/graphql/gql.h"
#include "server/store/store.h"
#include "skyprof/skp_err.h"

struct cont_eval;
struct endpoint_stats;
struct metrics;

/* The schema text (schema.graphqls), NUL-terminated; generated at build time. */
extern const char graphql_schema_text[];

/* Listings one answer holds at most (tasks of getProfileTaskList, segments of
 * getProfileTaskSegments, traces of queryBasicTraces, endpoints of findEndpoint): the UI shows
 * them in one list without paging. */
#define GRAPHQL_LIST_MAX 1000
/* Profiled segments queryTrace and queryBasicTraces look through (their store has no index by
 * trace id: they walk the tasks' profiled segments). */
#define GRAPHQL_SCAN_MAX 100000
/* Longest id or name an id argument may decode to. */
#define GRAPHQL_ID_MAX 4096

/* What a resolver may use. The store belongs to the thread running the request. */
struct graphql_ctx {
    struct store *store;
    struct endpoint_stats *endpoint_stats; /* loop only; NULL = none (the worker) */
    struct metrics *metrics;               /* loop only; NULL = none */
    struct cont_eval *cont_eval;           /* loop only; NULL = none (policies not evaluated) */
    int64_t now_ms;
    int retention_days; /* 0 = forever */
    uint64_t max_analyze_snapshots;
    bool can_write; /* mutations allowed (the loop's store) */
};

/* The bound schema, built on first use; NULL if it could not be built (logged once). */
const struct gql_schema *graphql_schema(void);
/* Builds a fresh bound schema (tests). Caller frees with gql_schema_free. */
SKP_MUST_CHECK skp_err graphql_schema_new(struct gql_schema **out, char *err, size_t cap);

/* Whether the document selects a field whose resolver reads much (analyses, segment
 * listings, trace scans): the request then runs on the worker. */
bool graphql_needs_worker(const struct gql_doc *d);

/* Runs `op_name` of `d` against skyprofd's schema; see gql_execute_text (*text: the answer's
 * JSON text, caller frees with skpx_free). Errors: SKP_ENOMEM. */
SKP_MUST_CHECK skp_err graphql_execute(struct gql_doc *d, const char *op_name,
                                       const json_t *variables, struct graphql_ctx *ctx,
                                       const struct gql_limits *l, enum gql_refusal *refused,
                                       char **text, size_t *len);

/* Requests refused per limit and answered per kind, for /metrics. */
struct graphql_counters {
    uint64_t requests;
    uint64_t refused_query_bytes, refused_tokens, refused_depth, refused_fields, refused_answer;
};
void graphql_count(enum gql_refusal r);
void graphql_counters_get(struct graphql_counters *out);
/* Appends the counters in Prometheus text format to `out` (a buffer of `cap` bytes); returns
 * the bytes written (truncated at cap). */
size_t graphql_metrics_text(char *out, size_t cap);

/* The answer size limit (skyprofd --graphql-max-answer-bytes; 0 = GQL_MAX_ANSWER_BYTES). */
void graphql_set_max_answer_bytes(uint64_t n);
void graphql_limits(struct gql_limits *l);
/* Retention shown by getRecordsTTL/getMetricsTTL (skyprofd --retention-days). */
void graphql_set_retention_days(int days);
int graphql_retention_days(void);

/* ---- OAP's ids ---- */
/* base64(name) + ".1" into out (cap bytes); false if it does not fit. */
bool graphql_service_id(const char *name, char *out, size_t cap);
/* serviceId + "_" + base64(name) (instances, endpoints). */
bool graphql_child_id(const char *service, const char *name, char *out, size_t cap);
/* The service name of a service id (caller frees with skpx_free); NULL if malformed. */
char *graphql_service_of(const char *id);
/* The service and child names of an instance or endpoint id; false if malformed. */
bool graphql_split_child(const char *id, char **service, char **name);

/* ---- the resolvers' arguments, answers, refusals and store failures ---- */
/* The string argument `name` of the field being resolved; NULL when absent or not a string. */
const char *graphql_arg_str(const struct gql_call *c, const char *name);
/* SKP_OK when *out holds an answer, SKP_ENOMEM when building it failed (*out NULL). */
skp_err graphql_oom_or(json_t **out);
/* Whether c may run a mutation (its context can write); if not, c->error says mutations run on
 * the server's loop only. */
bool graphql_writable(struct gql_call *c);
/* Sets c->error to "<what> could not be read: <err's text>" and returns err. */
skp_err graphql_read_failed(struct gql_call *c, skp_err err, const char *what);
/* A listing's answer: `list` (stolen) in *out when err is SKP_OK; else `list` is freed and the
 * error is graphql_read_failed's (`what` NULL: c->error is left as it is). Returns err. */
skp_err graphql_list_answer(struct gql_call *c, skp_err err, json_t *list, const char *what,
                            json_t **out);

/* Resolver tables of the fields (graphql_meta.c, graphql_profile.c, graphql_templates.c). */
extern const struct gql_resolver graphql_meta_resolvers[];
extern const size_t graphql_n_meta_resolvers;
extern const struct gql_resolver graphql_profile_resolvers[];
extern const size_t graphql_n_profile_resolvers;
extern const struct gql_resolver graphql_template_resolvers[];
extern const size_t graphql_n_template_resolvers;
extern const struct gql_resolver graphql_pprof_resolvers[]; /* graphql_pprof.c */
extern const size_t graphql_n_pprof_resolvers;
extern const struct gql_resolver graphql_continuous_resolvers[]; /* graphql_continuous.c */
extern const size_t graphql_n_continuous_resolvers;
extern const struct gql_resolver graphql_ebpf_resolvers[]; /* graphql_ebpf.c */
extern const size_t graphql_n_ebpf_resolvers;

#endif
