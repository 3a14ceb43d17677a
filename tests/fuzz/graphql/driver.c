/* Fuzz target of the GraphQL engine (src/server/graphql/gql_*.c): every input is parsed as an
 * executable document and, when it parses, validated and executed against a schema shaped like
 * skyprofd's (lists, nested objects, enums, input objects, Long) with resolvers that echo their
 * arguments; and parsed as SDL text by the schema builder. The limits are the defaults, so any
 * crash, leak, sanitizer report or unbounded work is a bug. Corpus: queries SkyWalking's UI
 * sends (written for skyprof from the protocol), SDL and hostile shapes. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "server/graphql/gql.h"

static const char k_sdl[] =
    "scalar Long\n"
    "type Query { version: String listServices(layer: String): [Service!]!\n"
    "  getSegmentsProfileAnalyze(queries: [Q!]!): Analysis!\n"
    "  getProfileTaskList(serviceId: ID, endpointName: String): [Task!]! }\n"
    "type Mutation { createProfileTask(creationRequest: Req): Result! }\n"
    "type Service { id: ID! name: String! layers: [String!]! normal: Boolean }\n"
    "input Q { segmentId: String! timeRange: Range! }\n"
    "input Range { start: Long! end: Long! }\n"
    "type Analysis { tip: String trees: [Tree!]! }\n"
    "type Tree { elements: [El!]! }\n"
    "type El { id: ID! parentId: ID! codeSignature: String! duration: Int! count: Int! }\n"
    "type Task { id: String! serviceId: ID! logs: [Log!]! }\n"
    "type Log { id: String! operationType: Op! operationTime: Long! }\n"
    "enum Op { NOTIFIED EXECUTION_FINISHED }\n"
    "input Req { serviceId: ID! endpointName: String! startTime: Long duration: Int! }\n"
    "type Result { errorReason: String id: String }\n";

static skp_err r_args(struct gql_call *c, json_t **out)
{
    *out = json_pack("[{s:s,s:s,s:[s],s:b}]", "id", "c2Vydg==.1", "name", "serv", "layers",
                     "GENERAL", "normal", 1);
    (void)c;
    return SKP_OK;
}

static skp_err r_analysis(struct gql_call *c, json_t **out)
{
    *out = json_pack("{s:n,s:[{s:[{s:i,s:i,s:s,s:i,s:i},{s:i,s:i,s:s,s:i,s:i}]}]}", "tip", "trees",
                     "elements", "id", 1, "parentId", 0, "codeSignature", "main", "duration", 10,
                     "count", 1, "id", 2, "parentId", 1, "codeSignature", "f", "duration", 5,
                     "count", 1);
    (void)c;
    return SKP_OK;
}

static skp_err r_tasks(struct gql_call *c, json_t **out)
{
    *out = json_pack("[{s:s,s:s,s:[{s:s,s:s,s:I}]}]", "id", "1_c2Vydg==.1", "serviceId",
                     "c2Vydg==.1", "logs", "id", "l", "operationType", "NOTIFIED", "operationTime",
                     (json_int_t)1700000000000);
    (void)c;
    return SKP_OK;
}

static skp_err r_echo(struct gql_call *c, json_t **out)
{
    *out =
        json_pack("{s:O?,s:n}", "id", json_object_get(c->args, "creationRequest"), "errorReason");
    return *out ? SKP_OK : SKP_ENOMEM;
}

static skp_err r_version(struct gql_call *c, json_t **out)
{
    (void)c;
    *out = json_string("fuzz");
    return SKP_OK;
}

static const struct gql_resolver k_res[] = {
    {"Query", "version", r_version},
    {"Query", "listServices", r_args},
    {"Query", "getSegmentsProfileAnalyze", r_analysis},
    {"Query", "getProfileTaskList", r_tasks},
    {"Mutation", "createProfileTask", r_echo},
};

static struct gql_schema *g_schema;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    if (!g_schema && gql_schema_new(k_sdl, strlen(k_sdl), k_res, sizeof(k_res) / sizeof(k_res[0]),
                                    err, sizeof(err), &g_schema) != SKP_OK)
        return 0;
    struct gql_limits l;
    gql_limits_default(&l);
    l.max_answer_bytes = 1u << 20;
    struct gql_doc *d = NULL;
    json_t *errors = NULL;
    if (gql_doc_parse((const char *)data, size, &l, &d, &errors, NULL) == SKP_OK) {
        json_t *vars = json_pack("{s:s,s:[{s:s,s:{s:i,s:s}}]}", "layer", "GENERAL", "queries",
                                 "segmentId", "s", "timeRange", "start", 1, "end", "2");
        json_decref(gql_execute(g_schema, d, NULL, vars, NULL, &l, NULL));
        json_decref(vars);
        gql_doc_free(d);
    }
    json_decref(errors);
    /* the same bytes as SDL */
    struct gql_schema *s = NULL;
    if (size <= l.max_query_bytes &&
        gql_schema_new((const char *)data, size, NULL, 0, err, sizeof(err), &s) == SKP_OK)
        gql_schema_free(s);
    return 0;
}
