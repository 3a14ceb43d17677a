/* gql.h - a GraphQL engine for skyprofd's query protocol (SkyWalking's UI and CLI): a parser of
 * executable documents (operations, variables with types and defaults, aliases, arguments,
 * fragments, inline fragments, @include/@skip, __typename), a schema built from SDL text (the
 * type descriptions used to coerce arguments, shape answers and answer introspection) and an
 * executor that walks a selection against resolvers and builds the JSON answer
 * ({"data": ..., "errors": [{"message", "locations", "path"}]}).
 *
 * Pure: no I/O, no libevent, no global state; every call is bounded by struct gql_limits.
 * A schema is read-only once bound and may be shared by threads; a document belongs to one
 * thread at a time. */
#ifndef SKP_SERVER_GQL_H
#define SKP_SERVER_GQL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "skyprof/skp_err.h"

/* Defaults of the limits (skyprofd's flags may change the answer's). */
/* A query text: SkyWalking's UI sends at most a few KiB; 64 KiB leaves room for tools. */
#define GQL_MAX_QUERY_BYTES (64u * 1024u)
/* Lexical tokens of one query (a 64 KiB text of one-byte tokens is 64 Ki). */
#define GQL_MAX_TOKENS 65536u
/* Nesting of selections and values: the standard introspection query nests 10 deep. */
#define GQL_MAX_DEPTH 24u
/* Fields one operation may select, counted with fragments expanded (a fragment spread several
 * times is counted each time, so fragment bombs stop here). */
#define GQL_MAX_FIELDS 4096u
/* The answer: a flame graph of 100k frames is about 15 MiB of JSON. */
#define GQL_MAX_ANSWER_BYTES (64u * 1024u * 1024u)

struct gql_limits {
    size_t max_query_bytes;
    size_t max_tokens;
    size_t max_depth;
    size_t max_fields;
    size_t max_answer_bytes;
};
/* The defaults above. */
void gql_limits_default(struct gql_limits *l);

/* Why a request was refused by a limit (for /metrics). */
enum gql_refusal {
    GQL_REFUSED_NONE = 0,
    GQL_REFUSED_QUERY_BYTES,
    GQL_REFUSED_TOKENS,
    GQL_REFUSED_DEPTH,
    GQL_REFUSED_FIELDS,
    GQL_REFUSED_ANSWER,
};

enum gql_op_kind { GQL_OP_QUERY, GQL_OP_MUTATION, GQL_OP_SUBSCRIPTION };

/* ---- resolvers ---- */
struct gql_schema;
struct gql_call {
    void *ctx;                       /* the caller's context (gql_execute's ctx) */
    const struct gql_schema *schema; /* the schema being executed */
    const json_t *args;              /* the field's arguments, coerced to their types (an object) */
    const json_t *source;            /* the parent's value (NULL at the root) */
    const char *field;               /* the field's name */
    char error[256]; /* a resolver failing with a message for the client writes it here */
};
/* Computes a field's value as JSON (*out: a new reference; json_null() for null). Objects may
 * carry more members than selected: the executor picks and shapes the selected ones. Returning
 * an error makes the field null with an error entry (call->error, else the error's name). */
typedef skp_err (*gql_resolve_cb)(struct gql_call *c, json_t **out);
struct gql_resolver {
    const char *type;
    const char *field;
    gql_resolve_cb fn;
};
/* A resolver of a field that is always false (gql_introspect.c). */
skp_err gql_resolve_false(struct gql_call *c, json_t **out);

/* ---- schema ---- */
struct gql_schema;
/* Parses SDL text (scalar, type, input, enum, schema, extend type; "#" comments, descriptions)
 * plus the engine's introspection types, links every type reference and binds `res` (n of them)
 * to their fields. Borrows sdl and res. On failure writes a message to err (cap bytes).
 * Caller frees *out with gql_schema_free. Errors: SKP_EINVAL (bad SDL, unknown type, a resolver
 * naming no field, a Query or Mutation field without resolver), SKP_ENOMEM. */
SKP_MUST_CHECK skp_err gql_schema_new(const char *sdl, size_t len, const struct gql_resolver *res,
                                      size_t n_res, char *err, size_t cap, struct gql_schema **out);
void gql_schema_free(struct gql_schema *s);

/* ---- documents ---- */
struct gql_doc;
/* Parses an executable document. On a syntax error or a limit returns SKP_EINVAL / SKP_ETOOBIG
 * with *errors set to a GraphQL answer ({"errors":[...]}, new reference) and *refused to the
 * limit hit (may be NULL). Caller frees *out with gql_doc_free. */
SKP_MUST_CHECK skp_err gql_doc_parse(const char *text, size_t len, const struct gql_limits *l,
                                     struct gql_doc **out, json_t **errors,
                                     enum gql_refusal *refused);
void gql_doc_free(struct gql_doc *d);
/* The kind of the operation `op_name` (NULL: the only one) would run; false if there is no such
 * operation (gql_execute then answers the error). */
bool gql_doc_op_kind(const struct gql_doc *d, const char *op_name, enum gql_op_kind *kind);

/* Validates and executes operation `op_name` (NULL: the only one) of `d` with `variables` (an
 * object or NULL; borrowed) against `s`, calling the resolvers with `ctx`. Returns the answer
 * ({"data": ...} and/or {"errors": [...]}, a new reference; NULL only when out of memory).
 * *refused (may be NULL) says which limit stopped it. */
json_t *gql_execute(const struct gql_schema *s, struct gql_doc *d, const char *op_name,
                    const json_t *variables, void *ctx, const struct gql_limits *l,
                    enum gql_refusal *refused);

/* The same, with the answer as compact JSON text (written as it is completed, no tree): *text
 * is skpx-allocated (caller frees with skpx_free), NUL-terminated, *len its length.
 * Errors: SKP_ENOMEM (nothing to answer). */
SKP_MUST_CHECK skp_err gql_execute_text(const struct gql_schema *s, struct gql_doc *d,
                                        const char *op_name, const json_t *variables, void *ctx,
                                        const struct gql_limits *l, enum gql_refusal *refused,
                                        char **text, size_t *len);

/* A GraphQL answer holding one error without location ({"errors":[{"message": msg}]}). */
json_t *gql_error_answer(const char *msg);

#endif
