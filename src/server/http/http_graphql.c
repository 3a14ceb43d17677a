/* http_graphql.c - POST /graphql: SkyWalking's query protocol (docs/skywalking-ui.md) through
 * the GraphQL engine of src/server/graphql. The body is {"query", "operationName",
 * "variables"}; the answer is GraphQL's {"data", "errors"} with status 200 (errors of the
 * request itself, as a body that is not JSON, keep the HTTP API's 400/413). Mutations run on
 * the loop with the loop's store (like the HTTP API's POST routes, behind the same token and
 * guards); queries that read much (analyses, segment listings, trace scans) run as a worker job
 * on the worker's read-only store; the others on the loop. */
#include <string.h>

#include "common/alloc.h"
#include "server/graphql/graphql.h"
#include "server/http/http_int.h"

struct graphql_job {
    struct http_job base;
    struct gql_doc *doc;
    char *op_name; /* NULL = the only operation */
    json_t *vars;  /* a deep copy owned by the job (never shared with the loop) */
    int64_t now_ms;
    uint64_t max_snapshots;
};

static void job_destroy(struct http_job *j)
{
    struct graphql_job *g = (struct graphql_job *)j;
    gql_doc_free(g->doc);
    skpx_free(g->op_name);
    json_decref(g->vars);
    skpx_free(g);
}

static void job_run(struct http_job *j, struct store *st)
{
    struct graphql_job *g = (struct graphql_job *)j;
    struct graphql_ctx ctx = {.store = st,
                              .now_ms = g->now_ms,
                              .retention_days = graphql_retention_days(),
                              .max_analyze_snapshots = g->max_snapshots};
    struct gql_limits l;
    enum gql_refusal refused;
    graphql_limits(&l);
    char *text = NULL;
    size_t len = 0;
    skp_err err = graphql_execute(g->doc, g->op_name, g->vars, &ctx, &l, &refused, &text, &len);
    graphql_count(refused);
    if (err)
        http_job_set_error(j, 500, "out of memory");
    else
        http_response_bytes(&j->res, 200, "application/json", text, len);
}

void http_graphql_post(struct http_ctx *cx)
{
    json_t *body = http_read_json(cx);
    struct graphql_job *g = NULL;
    if (!body)
        return;
    json_t *q = json_object_get(body, "query");
    json_t *op = json_object_get(body, "operationName");
    json_t *vars = json_object_get(body, "variables");
    if (!json_is_object(body) || !json_is_string(q)) {
        http_reply_error(cx, 400, "the body must be a JSON object with a string \"query\"");
        goto out;
    }
    if ((op && !json_is_null(op) && !json_is_string(op)) ||
        (vars && !json_is_null(vars) && !json_is_object(vars))) {
        http_reply_error(cx, 400, "\"operationName\" must be a string and \"variables\" an object");
        goto out;
    }
    struct gql_limits l;
    graphql_limits(&l);
    json_t *errors = NULL;
    enum gql_refusal refused;
    struct gql_doc *doc = NULL;
    skp_err err =
        gql_doc_parse(json_string_value(q), json_string_length(q), &l, &doc, &errors, &refused);
    if (err) {
        graphql_count(refused);
        if (!errors)
            http_reply_error(cx, 500, "out of memory");
        else
            http_reply_json(cx, 200, errors);
        goto out;
    }
    const char *op_name = json_string_value(op);
    enum gql_op_kind kind = GQL_OP_QUERY;
    bool known = gql_doc_op_kind(doc, op_name, &kind);
    if (!known || kind == GQL_OP_MUTATION || !cx->api->worker || !graphql_needs_worker(doc)) {
        /* on the loop: mutations (the loop owns the write connection) and light reads */
        struct graphql_ctx ctx = {.store = cx->api->store,
                                  .endpoint_stats = cx->api->endpoint_stats,
                                  .metrics = cx->api->metrics,
                                  .cont_eval = cx->api->cont_eval,
                                  .now_ms = http_now(cx->api),
                                  .retention_days = graphql_retention_days(),
                                  .max_analyze_snapshots = cx->api->max_analyze_snapshots,
                                  .can_write = true};
        char *text = NULL;
        size_t len = 0;
        err = graphql_execute(doc, op_name, vars, &ctx, &l, &refused, &text, &len);
        graphql_count(refused);
        gql_doc_free(doc);
        if (err)
            http_reply_error(cx, 500, "out of memory");
        else
            http_reply_bytes(cx, 200, "application/json", text, len, NULL, NULL);
        skpx_free(text);
        goto out;
    }
    g = http_job_new(cx, sizeof(*g), job_run, job_destroy);
    if (!g) {
        gql_doc_free(doc);
        goto out;
    }
    g->doc = doc;
    g->now_ms = http_now(cx->api);
    g->max_snapshots = cx->api->max_analyze_snapshots;
    g->vars = vars && json_is_object(vars) ? json_deep_copy(vars) : NULL;
    if (vars && json_is_object(vars) && !g->vars) {
        job_destroy(&g->base);
        http_reply_error(cx, 500, "out of memory");
        goto out;
    }
    if (op_name && !http_job_strdup(cx, &g->base, &g->op_name, op_name))
        goto out;
    http_job_dispatch(cx, &g->base);
out:
    json_decref(body);
}
