/* Unit tests for the GraphQL engine (src/server/graphql/gql_*.c) on a small schema of its own:
 * lexing (strings, escapes, block strings, numbers), parse errors with their locations,
 * variables (types, defaults, input objects, lists, enums), aliases, fragments, inline
 * fragments, @skip/@include, __typename, null propagation, resolver errors with paths, the
 * limits and which refusal they report, introspection, schema build errors; and OAP's ids
 * (graphql.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "server/graphql/gql.h"
#include "server/graphql/graphql.h"

static const char k_sdl[] =
    "scalar Long\n"
    "\"\"\"\n  The root.\n    Indented.\n\"\"\"\n"
    "type Query {\n"
    "  echo(s: String, n: Int, l: Long, e: Color = RED, list: [Int!], in: Pair): Echo!\n"
    "  items: [Item!]!\n"
    "  broken: Item\n"
    "  brokenList: [Item!]\n"
    "  fails: String\n"
    "}\n"
    "type Mutation { bump(by: Int! = 1): Int! }\n"
    "enum Color { RED GREEN }\n"
    "input Pair { a: Int! b: String = \"dflt\" }\n"
    "type Echo { s: String n: Int l: Long e: Color list: [Int!] in: PairOut }\n"
    "type PairOut { a: Int b: String }\n"
    "type Item { id: ID! name: String! sub: Item }\n";

static int g_bumps;

static skp_err r_echo(struct gql_call *c, json_t **out)
{
    *out = json_deep_copy(c->args);
    return SKP_OK;
}

static skp_err r_items(struct gql_call *c, json_t **out)
{
    (void)c;
    *out = json_pack("[{s:i,s:s,s:{s:s,s:s}},{s:s,s:s}]", "id", 1, "name", "one", "sub", "id",
                     "1.1", "name", "inner", "id", "2", "name", "two");
    return SKP_OK;
}

static skp_err r_broken(struct gql_call *c, json_t **out)
{
    (void)c;
    *out = json_pack("{s:s}", "id", "x"); /* name (String!) missing */
    return SKP_OK;
}

static skp_err r_broken_list(struct gql_call *c, json_t **out)
{
    (void)c;
    *out = json_pack("[{s:s,s:s},n]", "id", "a", "name", "a");
    return SKP_OK;
}

static skp_err r_fails(struct gql_call *c, json_t **out)
{
    (void)out;
    snprintf(c->error, sizeof(c->error), "the store is gone");
    return SKP_EIO;
}

static skp_err r_bump(struct gql_call *c, json_t **out)
{
    g_bumps += (int)json_integer_value(json_object_get(c->args, "by"));
    *out = json_integer(g_bumps);
    return SKP_OK;
}

static const struct gql_resolver k_res[] = {
    {"Query", "echo", r_echo},     {"Query", "items", r_items},
    {"Query", "broken", r_broken}, {"Query", "brokenList", r_broken_list},
    {"Query", "fails", r_fails},   {"Mutation", "bump", r_bump},
};

static struct gql_schema *g_schema;

static int setup(void **state)
{
    (void)state;
    char err[256];
    skp_err rc = gql_schema_new(k_sdl, strlen(k_sdl), k_res, sizeof(k_res) / sizeof(k_res[0]), err,
                                sizeof(err), &g_schema);
    if (rc)
        fprintf(stderr, "schema: %s\n", err);
    return rc ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    gql_schema_free(g_schema);
    return 0;
}

/* Runs `q` with variables (JSON text or NULL) and returns the answer's compact text (static). */
static const char *run_l(const char *q, const char *vars, const char *op,
                         const struct gql_limits *l, enum gql_refusal *refused)
{
    static char text[4096];
    json_t *v = vars ? json_loads(vars, 0, NULL) : NULL;
    json_t *errors = NULL;
    struct gql_doc *d = NULL;
    json_t *ans;
    if (gql_doc_parse(q, strlen(q), l, &d, &errors, refused) != SKP_OK)
        ans = errors;
    else
        ans = gql_execute(g_schema, d, op, v, NULL, l, refused);
    assert_non_null(ans);
    size_t n = json_dumpb(ans, text, sizeof(text) - 1, JSON_COMPACT | JSON_SORT_KEYS);
    text[n < sizeof(text) ? n : sizeof(text) - 1] = '\0';
    json_decref(ans);
    json_decref(v);
    gql_doc_free(d);
    return text;
}

static const char *run(const char *q, const char *vars)
{
    struct gql_limits l;
    gql_limits_default(&l);
    return run_l(q, vars, NULL, &l, NULL);
}

static void literals_and_strings(void **state)
{
    (void)state;
    assert_string_equal(
        run("{ echo(s: \"a\\\"b\\u00e9\\ud83d\\ude00\\n\", n: -12, l: 9007199254740993) "
            "{ s n l e } }",
            NULL),
        "{\"data\":{\"echo\":{\"e\":\"RED\",\"l\":9007199254740993,\"n\":-12,\"s\":\"a\\\"b\u00e9"
        "\U0001F600\\n\"}}}");
    assert_string_equal(
        run("{ echo(s: \"\"\"\n    block \\\"\"\" x\n      more\n  \"\"\") { s } }", NULL),
        "{\"data\":{\"echo\":{\"s\":\"block \\\"\\\"\\\" x\\n  more\"}}}");
    /* commas, comments and a byte order mark are ignored */
    assert_string_equal(run("\xEF\xBB\xBF{ # comment\n echo(n: 1,,,) { n, } }", NULL),
                        "{\"data\":{\"echo\":{\"n\":1}}}");
}

static void syntax_errors_have_locations(void **state)
{
    (void)state;
    static const struct {
        const char *q, *want;
    } cases[] = {
        {"{ echo { s }", "{\"errors\":[{\"locations\":[{\"column\":13,\"line\":1}],"
                         "\"message\":\"Syntax Error: Expected Name, found <EOF>.\"}]}"},
        {"{\n  echo(s: \"open\n) { s } }",
         "{\"errors\":[{\"locations\":[{\"column\":16,\"line\":2}],"
         "\"message\":\"Syntax Error: unterminated string.\"}]}"},
        {"{ echo(n: 01) { n } }", "{\"errors\":[{\"locations\":[{\"column\":12,\"line\":1}],"
                                  "\"message\":\"Syntax Error: invalid number: unexpected digit "
                                  "after 0.\"}]}"},
        {"", "{\"errors\":[{\"locations\":[{\"column\":1,\"line\":1}],"
             "\"message\":\"Syntax Error: Unexpected <EOF>.\"}]}"},
        {"type T { a: Int }", NULL},
        {"{ echo(s: \"\\q\") { s } }", NULL},
        {"{ a: }", NULL},
        {"query ($v: [[[[[[[[[Int]]]]]]]]]) { items { id } }", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *got = run(cases[i].q, NULL);
        if (cases[i].want)
            assert_string_equal(got, cases[i].want);
        else
            assert_non_null(strstr(got, "{\"errors\":[{\"locations\":"));
    }
}

static void variables_and_coercion(void **state)
{
    (void)state;
    const char *q = "query Q($n: Int, $e: Color = GREEN, $p: Pair, $l: [Int!], $long: Long) {"
                    " echo(n: $n, e: $e, in: $p, list: $l, l: $long) { n e in { a b } list l } }";
    assert_string_equal(run(q, "{\"n\": 5, \"p\": {\"a\": 1}, \"l\": 7, \"long\": \"12\"}"),
                        "{\"data\":{\"echo\":{\"e\":\"GREEN\",\"in\":{\"a\":1,\"b\":\"dflt\"},"
                        "\"l\":12,\"list\":[7],\"n\":5}}}");
    /* wrong types, a missing required member, an unknown member, an unknown enum value */
    assert_non_null(strstr(run(q, "{\"n\": \"5\"}"), "Variable \\\"$n\\\" got invalid value"));
    /* a variable given in another case (SkyWalking's UI: taskID for $taskId) */
    assert_string_equal(run("query($nn: Int) { echo(n: $nn) { n } }", "{\"NN\": 3}"),
                        "{\"data\":{\"echo\":{\"n\":3}}}");
    assert_string_equal(run("query($nn: Int, $NN: Int) { echo(n: $nn) { n } }", "{\"NN\": 3}"),
                        "{\"data\":{\"echo\":{\"n\":null}}}");
    assert_non_null(strstr(run(q, "{\"n\": 4294967296}"), "non 32-bit"));
    assert_non_null(strstr(run(q, "{\"p\": {\"b\": \"x\"}}"), "required type"));
    assert_non_null(strstr(run(q, "{\"p\": {\"a\": 1, \"z\": 1}}"), "\\\"z\\\" is not defined"));
    assert_non_null(strstr(run(q, "{\"e\": \"BLUE\"}"), "does not exist in"));
    /* a literal of the wrong kind, an undefined variable, an unknown argument */
    assert_non_null(strstr(run("{ echo(n: \"1\") { n } }", NULL), "Argument \\\"n\\\""));
    assert_non_null(strstr(run("{ echo(n: $x) { n } }", NULL), "not defined"));
    assert_non_null(strstr(run("{ echo(zz: 1) { n } }", NULL), "Unknown argument"));
    assert_non_null(strstr(run("query($v: Item) { items { id } }", NULL), "non-input type"));
    /* literal input objects take their defaults; variables absent leave arguments unset */
    assert_string_equal(run("query($s: String) { echo(in: {a: 2}, s: $s) { s in { a b } } }", NULL),
                        "{\"data\":{\"echo\":{\"in\":{\"a\":2,\"b\":\"dflt\"},\"s\":null}}}");
}

static void selections(void **state)
{
    (void)state;
    const char *q = "query Q($no: Boolean = false) { first: items { id ...F } "
                    "items { ... on Item { sub { name } } ... @skip(if: true) { id } } "
                    "x: echo @include(if: $no) { n } __typename }\n"
                    "fragment F on Item { name alias: name __typename }";
    assert_string_equal(run(q, NULL),
                        "{\"data\":{\"__typename\":\"Query\",\"first\":[{\"__typename\":\"Item\","
                        "\"alias\":\"one\",\"id\":\"1\",\"name\":\"one\"},{\"__typename\":\"Item\","
                        "\"alias\":\"two\",\"id\":\"2\",\"name\":\"two\"}],\"items\":[{\"sub\":"
                        "{\"name\":\"inner\"}},{\"sub\":null}]}}");
    /* validation: unknown field, leaf with a selection, object without one, unknown fragment,
     * a fragment on a type that cannot match, an unknown directive */
    assert_non_null(strstr(run("{ nope }", NULL), "Cannot query field \\\"nope\\\""));
    assert_non_null(strstr(run("{ fails { x } }", NULL), "must not have a selection"));
    assert_non_null(strstr(run("{ items }", NULL), "must have a selection"));
    assert_non_null(strstr(run("{ ...G }", NULL), "Unknown fragment"));
    assert_non_null(strstr(run("{ ... on Item { id } }", NULL), "can never be of type"));
    assert_non_null(strstr(run("{ items @defer { id } }", NULL), "Unknown directive"));
    /* operations: the name picks one; without it several are an error */
    assert_string_equal(run_l("query A { fails } mutation B { bump(by: 2) }", NULL, "B",
                              &(struct gql_limits){65536, 65536, 24, 4096, 1 << 20}, NULL),
                        "{\"data\":{\"bump\":2}}");
    assert_non_null(strstr(run("query A { items { id } } query B { items { id } }", NULL),
                           "Must provide operation name"));
}

static void nulls_and_errors(void **state)
{
    (void)state;
    /* a missing non-null member nulls the nearest nullable parent, with the path */
    assert_string_equal(
        run("{ broken { id name } }", NULL),
        "{\"data\":{\"broken\":null},\"errors\":[{\"locations\":[{\"column\":15,\"line\":1}],"
        "\"message\":\"Cannot return null for non-nullable field.\",\"path\":[\"broken\","
        "\"name\"]}]}");
    assert_string_equal(
        run("{ brokenList { id } }", NULL),
        "{\"data\":{\"brokenList\":null},\"errors\":[{\"locations\":[{\"column\":3,\"line\":1}],"
        "\"message\":\"Cannot return null for non-nullable field.\",\"path\":[\"brokenList\","
        "1]}]}");
    assert_string_equal(
        run("{ fails items { id } }", NULL),
        "{\"data\":{\"fails\":null,\"items\":[{\"id\":\"1\"},{\"id\":\"2\"}]},\"errors\":[{"
        "\"locations\":[{\"column\":3,\"line\":1}],\"message\":\"the store is gone\",\"path\":"
        "[\"fails\"]}]}");
}

static void limits(void **state)
{
    (void)state;
    struct gql_limits l;
    enum gql_refusal r;
    gql_limits_default(&l);
    l.max_query_bytes = 16;
    assert_non_null(strstr(run_l("{ items { id name } }", NULL, NULL, &l, &r), "longer than"));
    assert_int_equal(r, GQL_REFUSED_QUERY_BYTES);
    gql_limits_default(&l);
    l.max_depth = 2;
    assert_non_null(strstr(run_l("{ items { sub { id } } }", NULL, NULL, &l, &r), "deeper"));
    assert_int_equal(r, GQL_REFUSED_DEPTH);
    /* fragments nest below the parser's view: the validation counts them expanded */
    assert_non_null(
        strstr(run_l("{ items { ...A } } fragment A on Item { sub { id } }", NULL, NULL, &l, &r),
               "deeper"));
    assert_int_equal(r, GQL_REFUSED_DEPTH);
    gql_limits_default(&l);
    l.max_fields = 3;
    assert_non_null(strstr(run_l("{ items { id name sub { id } } }", NULL, NULL, &l, &r),
                           "more than 3 fields"));
    assert_int_equal(r, GQL_REFUSED_FIELDS);
    assert_non_null(
        strstr(run_l("{ ...A ...A } fragment A on Query { items { id } }", NULL, NULL, &l, &r),
               "more than 3 fields"));
    assert_int_equal(r, GQL_REFUSED_FIELDS);
    gql_limits_default(&l);
    l.max_tokens = 5;
    assert_non_null(strstr(run_l("{ items { id name } }", NULL, NULL, &l, &r), "tokens"));
    assert_int_equal(r, GQL_REFUSED_TOKENS);
    gql_limits_default(&l);
    l.max_answer_bytes = 40;
    assert_string_equal(run_l("{ items { id name sub { id name } } }", NULL, NULL, &l, &r),
                        "{\"data\":null,\"errors\":[{\"message\":\"the answer is larger than 40 "
                        "bytes\"}]}");
    assert_int_equal(r, GQL_REFUSED_ANSWER);
}

static void introspection(void **state)
{
    (void)state;
    const char *got = run("{ __type(name: \"Pair\") { kind name inputFields { name defaultValue "
                          "type { kind ofType { name } } } } "
                          "__schema { queryType { name } mutationType { name } } }",
                          NULL);
    assert_string_equal(got, "{\"data\":{\"__schema\":{\"mutationType\":{\"name\":\"Mutation\"},"
                             "\"queryType\":{\"name\":\"Query\"}},\"__type\":{\"inputFields\":[{"
                             "\"defaultValue\":null,\"name\":\"a\",\"type\":{\"kind\":\"NON_NULL\","
                             "\"ofType\":{\"name\":\"Int\"}}},{\"defaultValue\":\"\\\"dflt\\\"\","
                             "\"name\":\"b\",\"type\":{\"kind\":\"SCALAR\",\"ofType\":null}}],"
                             "\"kind\":\"INPUT_OBJECT\",\"name\":\"Pair\"}}}");
    got = run("{ __type(name: \"Query\") { description } nope: __type(name: \"Nope\") { name } }",
              NULL);
    assert_string_equal(got, "{\"data\":{\"__type\":{\"description\":\"The root.\\n  Indented.\"},"
                             "\"nope\":null}}");
}

static void schema_errors(void **state)
{
    (void)state;
    static const struct {
        const char *sdl;
        const char *want;
    } cases[] = {
        {"type Query { a: Nope }", "unknown type Nope"},
        {"type Query { a(x: Q): Int } type Q { b: Int }", "not an input type"},
        {"type Query { a: Int }", "Query.a has no resolver"},
        {"type Query { a: Int a: Int }", "defined twice"},
        {"type Query { a: Int", "Expected"},
        {"union U = A | B", "unsupported definition"},
        /* directive arguments: the executable grammar's (at least one, name: value) */
        {"type Query @d() { a: Int }", "Expected Name, found \")\""},
        {"type Query @d(a: 1 { a: Int }", "Expected Name, found \"{\""},
        {"type Query @d(a 1) { a: Int }", "Expected \":\""},
        {"type Query { a: Int @d(a: $v) }", "Unexpected variable"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char err[256];
        struct gql_schema *s = NULL;
        assert_int_not_equal(
            gql_schema_new(cases[i].sdl, strlen(cases[i].sdl), NULL, 0, err, sizeof(err), &s),
            SKP_OK);
        assert_null(s);
        assert_non_null(strstr(err, cases[i].want));
    }
    char err[256];
    struct gql_schema *s = NULL;
    /* directives with arguments anywhere are read and ignored */
    static const char k_dirs[] =
        "type Query @key(fields: \"id\", n: [1, 2]) { a(x: Int = 3 @e(z: \"s\")): Int "
        "@deprecated(reason: \"old\") @f(w: {k: 1}) } enum E @g(v: true) { X @h(y: null) }";
    static const struct gql_resolver dirs_res[] = {{"Query", "a", r_fails}};
    assert_int_equal(gql_schema_new(k_dirs, strlen(k_dirs), dirs_res, 1, err, sizeof(err), &s),
                     SKP_OK);
    gql_schema_free(s);
    s = NULL;
    static const struct gql_resolver bad[] = {{"Query", "zz", r_fails}};
    assert_int_equal(gql_schema_new("type Query { a: Int }", 21, bad, 1, err, sizeof(err), &s),
                     SKP_EINVAL);
    assert_non_null(strstr(err, "Query.zz: no such field"));
}

static void skyprofd_schema_builds(void **state)
{
    (void)state;
    char err[256];
    struct gql_schema *s = NULL;
    assert_int_equal(graphql_schema_new(&s, err, sizeof(err)), SKP_OK);
    gql_schema_free(s);
}

static void oap_ids(void **state)
{
    (void)state;
    char id[256];
    assert_true(graphql_service_id("shop-api", id, sizeof(id)));
    assert_string_equal(id, "c2hvcC1hcGk=.1");
    assert_true(graphql_child_id("shop-api", "inst-1", id, sizeof(id)));
    assert_string_equal(id, "c2hvcC1hcGk=.1_aW5zdC0x");
    char *svc = graphql_service_of("c2hvcC1hcGk=.1");
    assert_string_equal(svc, "shop-api");
    skpx_free(svc);
    char *a, *b;
    assert_true(graphql_split_child("c2hvcC1hcGk=.1_L3BheQ==", &a, &b));
    assert_string_equal(a, "shop-api");
    assert_string_equal(b, "/pay");
    skpx_free(a);
    skpx_free(b);
    static const char *const bad[] = {"",       ".1",         "c2hvcC1hcGk=", "c2hvcC1hcGk.1",
                                      "!!!!.1", "AA==AA==.1", "AAA=.1" /* decodes to NUL bytes */};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_null(graphql_service_of(bad[i]));
    assert_false(graphql_split_child("c2hvcC1hcGk=.1", &a, &b));
    assert_false(graphql_split_child("c2hvcC1hcGk=.1_%%%", &a, &b));
    assert_false(graphql_service_id("shop-api", id, 8));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(literals_and_strings),   cmocka_unit_test(syntax_errors_have_locations),
        cmocka_unit_test(variables_and_coercion), cmocka_unit_test(selections),
        cmocka_unit_test(nulls_and_errors),       cmocka_unit_test(limits),
        cmocka_unit_test(introspection),          cmocka_unit_test(schema_errors),
        cmocka_unit_test(skyprofd_schema_builds), cmocka_unit_test(oap_ids),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
