/* gql_introspect.c - GraphQL introspection (__schema, __type, spec section 4) derived from the
 * schema's own type descriptions. The introspection types are SDL text parsed into every schema
 * (hidden from __schema.types); the root fields live on the pseudo-type __Root, which the
 * executor consults for "__" fields of the query type. Values are JSON built on demand: a __Type
 * is {"kind","name"} (or {"kind","ofType"} for wrappers) and its fields, enum values and input
 * fields are resolved from the schema by name when selected. Pure. */
#include <string.h>

#include "server/graphql/gql_int.h"

const char gql_introspection_sdl[] =
    "type __Root { __schema: __Schema! __type(name: String!): __Type }\n"
    "type __Schema { description: String types: [__Type!]! queryType: __Type!\n"
    "  mutationType: __Type subscriptionType: __Type directives: [__Directive!]! }\n"
    "type __Type { kind: __TypeKind! name: String description: String specifiedByURL: String\n"
    "  fields(includeDeprecated: Boolean = false): [__Field!] interfaces: [__Type!]\n"
    "  possibleTypes: [__Type!] enumValues(includeDeprecated: Boolean = false): [__EnumValue!]\n"
    "  inputFields(includeDeprecated: Boolean = false): [__InputValue!] ofType: __Type\n"
    "  isOneOf: Boolean }\n"
    "type __Field { name: String! description: String\n"
    "  args(includeDeprecated: Boolean = false): [__InputValue!]! type: __Type!\n"
    "  isDeprecated: Boolean! deprecationReason: String }\n"
    "type __InputValue { name: String! description: String type: __Type! defaultValue: String\n"
    "  isDeprecated: Boolean! deprecationReason: String }\n"
    "type __EnumValue { name: String! description: String isDeprecated: Boolean!\n"
    "  deprecationReason: String }\n"
    "type __Directive { name: String! description: String locations: [__DirectiveLocation!]!\n"
    "  args(includeDeprecated: Boolean = false): [__InputValue!]! isRepeatable: Boolean! }\n"
    "enum __TypeKind { SCALAR OBJECT INTERFACE UNION ENUM INPUT_OBJECT LIST NON_NULL }\n"
    "enum __DirectiveLocation { QUERY MUTATION SUBSCRIPTION FIELD FRAGMENT_DEFINITION\n"
    "  FRAGMENT_SPREAD INLINE_FRAGMENT VARIABLE_DEFINITION SCHEMA SCALAR OBJECT FIELD_DEFINITION\n"
    "  ARGUMENT_DEFINITION INTERFACE UNION ENUM ENUM_VALUE INPUT_OBJECT INPUT_FIELD_DEFINITION }\n";

static const char *kind_name(enum gql_type_kind k)
{
    switch (k) {
    case GQL_K_SCALAR:
        return "SCALAR";
    case GQL_K_OBJECT:
        return "OBJECT";
    case GQL_K_INPUT:
        return "INPUT_OBJECT";
    default:
        return "ENUM";
    }
}

static json_t *named_type_json(const struct gql_type *t)
{
    return json_pack("{s:s,s:s}", "kind", kind_name(t->kind), "name", t->name);
}

static json_t *tref_json(const struct gql_tref *t)
{
    if (t->kind == GQL_TR_NAMED)
        return named_type_json(t->resolved);
    json_t *of = tref_json(t->of);
    return of ? json_pack("{s:s,s:n,s:o}", "kind", t->kind == GQL_TR_LIST ? "LIST" : "NON_NULL",
                          "name", "ofType", of)
              : NULL;
}

static json_t *str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

/* Appends `v` (stolen; NULL when it could not be built) to the list `a`; on failure frees `a`
 * and returns NULL, else returns `a`. */
static json_t *append_or_drop(json_t *a, json_t *v)
{
    if (json_array_append_new(a, v) != 0) {
        json_decref(a);
        return NULL;
    }
    return a;
}

static json_t *input_values_json(const struct gql_field *args)
{
    json_t *a = json_array();
    for (const struct gql_field *f = args; f && a; f = f->next)
        a = append_or_drop(a, json_pack("{s:s,s:o,s:o,s:o,s:b,s:n}", "name", f->name, "description",
                                        str_or_null(f->desc), "type", tref_json(f->type),
                                        "defaultValue", str_or_null(f->def_text), "isDeprecated", 0,
                                        "deprecationReason"));
    return a;
}

static const struct gql_type *source_type(const struct gql_call *c)
{
    const char *name = json_string_value(json_object_get(c->source, "name"));
    return name ? gql_schema_type(c->schema, name) : NULL;
}

static skp_err r_schema(struct gql_call *c, json_t **out)
{
    (void)c;
    *out = json_object();
    return *out ? SKP_OK : SKP_ENOMEM;
}

static skp_err r_type(struct gql_call *c, json_t **out)
{
    const char *name = json_string_value(json_object_get(c->args, "name"));
    const struct gql_type *t = name ? gql_schema_type(c->schema, name) : NULL;
    *out = t && (!t->is_introspection || strncmp(t->name, "__", 2) == 0) &&
                   strcmp(t->name, "__Root") != 0
               ? named_type_json(t)
               : json_null();
    return *out ? SKP_OK : SKP_ENOMEM;
}

static skp_err r_schema_types(struct gql_call *c, json_t **out)
{
    json_t *a = json_array();
    for (const struct gql_type *t = c->schema->types; t && a; t = t->next) {
        if (strcmp(t->name, "__Root") != 0)
            a = append_or_drop(a, named_type_json(t));
    }
    *out = a;
    return a ? SKP_OK : SKP_ENOMEM;
}

static skp_err r_schema_query(struct gql_call *c, json_t **out)
{
    *out = named_type_json(c->schema->query);
    return *out ? SKP_OK : SKP_ENOMEM;
}

static skp_err r_schema_mutation(struct gql_call *c, json_t **out)
{
    *out = c->schema->mutation ? named_type_json(c->schema->mutation) : json_null();
    return *out ? SKP_OK : SKP_ENOMEM;
}

static skp_err r_schema_directives(struct gql_call *c, json_t **out)
{
    (void)c;
    *out = json_pack("[{s:s,s:s,s:[sss],s:[{s:s,s:s,s:{s:s,s:n,s:{s:s,s:s}},s:n,s:b,s:n}],s:b},"
                     "{s:s,s:s,s:[sss],s:[{s:s,s:s,s:{s:s,s:n,s:{s:s,s:s}},s:n,s:b,s:n}],s:b}]",
                     "name", "include", "description",
                     "Directs the executor to include this field or fragment only when the `if` "
                     "argument is true.",
                     "locations", "FIELD", "FRAGMENT_SPREAD", "INLINE_FRAGMENT", "args", "name",
                     "if", "description", "Included when true.", "type", "kind", "NON_NULL", "name",
                     "ofType", "kind", "SCALAR", "name", "Boolean", "defaultValue", "isDeprecated",
                     0, "deprecationReason", "isRepeatable", 0, "name", "skip", "description",
                     "Directs the executor to skip this field or fragment when the `if` argument "
                     "is true.",
                     "locations", "FIELD", "FRAGMENT_SPREAD", "INLINE_FRAGMENT", "args", "name",
                     "if", "description", "Skipped when true.", "type", "kind", "NON_NULL", "name",
                     "ofType", "kind", "SCALAR", "name", "Boolean", "defaultValue", "isDeprecated",
                     0, "deprecationReason", "isRepeatable", 0);
    return *out ? SKP_OK : SKP_ENOMEM;
}

static skp_err r_type_description(struct gql_call *c, json_t **out)
{
    const struct gql_type *t = source_type(c);
    *out = str_or_null(t ? t->desc : NULL);
    return *out ? SKP_OK : SKP_ENOMEM;
}

static skp_err r_type_fields(struct gql_call *c, json_t **out)
{
    const struct gql_type *t = source_type(c);
    if (!t || t->kind != GQL_K_OBJECT) {
        *out = json_null();
        return SKP_OK;
    }
    json_t *a = json_array();
    for (const struct gql_field *f = t->fields; f && a; f = f->next)
        a = append_or_drop(a, json_pack("{s:s,s:o,s:o,s:o,s:b,s:n}", "name", f->name, "description",
                                        str_or_null(f->desc), "args", input_values_json(f->args),
                                        "type", tref_json(f->type), "isDeprecated", 0,
                                        "deprecationReason"));
    *out = a;
    return a ? SKP_OK : SKP_ENOMEM;
}

static skp_err r_type_interfaces(struct gql_call *c, json_t **out)
{
    const struct gql_type *t = source_type(c);
    *out = t && t->kind == GQL_K_OBJECT ? json_array() : json_null();
    return *out ? SKP_OK : SKP_ENOMEM;
}

static skp_err r_type_enum_values(struct gql_call *c, json_t **out)
{
    const struct gql_type *t = source_type(c);
    if (!t || t->kind != GQL_K_ENUM) {
        *out = json_null();
        return SKP_OK;
    }
    json_t *a = json_array();
    for (const struct gql_enum_value *v = t->values; v && a; v = v->next)
        a = append_or_drop(a, json_pack("{s:s,s:n,s:b,s:n}", "name", v->name, "description",
                                        "isDeprecated", 0, "deprecationReason"));
    *out = a;
    return a ? SKP_OK : SKP_ENOMEM;
}

static skp_err r_type_input_fields(struct gql_call *c, json_t **out)
{
    const struct gql_type *t = source_type(c);
    *out = t && t->kind == GQL_K_INPUT ? input_values_json(t->fields) : json_null();
    return *out ? SKP_OK : SKP_ENOMEM;
}

static skp_err r_null(struct gql_call *c, json_t **out)
{
    (void)c;
    *out = json_null();
    return SKP_OK;
}

skp_err gql_resolve_false(struct gql_call *c, json_t **out)
{
    (void)c;
    *out = json_false();
    return SKP_OK;
}

skp_err gql_introspection_bind(struct gql_schema *s)
{
    static const struct gql_resolver res[] = {
        {"__Root", "__schema", r_schema},
        {"__Root", "__type", r_type},
        {"__Schema", "description", r_null},
        {"__Schema", "types", r_schema_types},
        {"__Schema", "queryType", r_schema_query},
        {"__Schema", "mutationType", r_schema_mutation},
        {"__Schema", "subscriptionType", r_null},
        {"__Schema", "directives", r_schema_directives},
        {"__Type", "description", r_type_description},
        {"__Type", "specifiedByURL", r_null},
        {"__Type", "fields", r_type_fields},
        {"__Type", "interfaces", r_type_interfaces},
        {"__Type", "possibleTypes", r_null},
        {"__Type", "enumValues", r_type_enum_values},
        {"__Type", "inputFields", r_type_input_fields},
        {"__Type", "isOneOf", gql_resolve_false},
    };
    for (size_t i = 0; i < sizeof(res) / sizeof(res[0]); i++) {
        struct gql_type *t = gql_schema_type(s, res[i].type);
        struct gql_field *f = t ? gql_type_field(t, res[i].field) : NULL;
        if (!f)
            return SKP_EINVAL;
        f->resolve = res[i].fn;
    }
    return SKP_OK;
}
