/* gql_schema.c - SDL text -> the schema's type descriptions (gql_int.h): scalar, type, input,
 * enum, schema and extend type definitions with descriptions and "#" comments (directives in
 * the SDL are read and ignored). After parsing, every type reference is linked to its type and
 * checked (output types for fields, input types for arguments), and the resolvers are bound to
 * their fields. The same descriptions serve coercion, answer shaping and introspection.
 * Pure; a bound schema is read-only and may be shared by threads. */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "server/graphql/gql_int.h"

struct sdl {
    struct gql_lexer lx;
    struct gql_schema *s;
    struct gql_error err;
    bool introspection; /* parsing the engine's own types */
    const char *query_name, *mutation_name;
};

static bool sdl_next(struct sdl *p)
{
    gql_lex_next(&p->lx);
    if (p->lx.tok != GQL_T_ERROR)
        return true;
    gql_error_at(&p->err, &p->lx, "Syntax Error: %s.", p->lx.text);
    return false;
}

static void *sdl_node(struct sdl *p, size_t n)
{
    void *v = gql_arena_alloc(&p->s->arena, n);
    if (!v)
        gql_error_at(&p->err, &p->lx, "out of memory");
    return v;
}

/* An optional description string before a definition. */
static bool description(struct sdl *p, const char **out)
{
    *out = NULL;
    if (p->lx.tok != GQL_T_STRING)
        return true;
    *out = p->lx.text;
    return sdl_next(p);
}

/* Inside a list closed by `close`: the end of the text is an error there. */
static bool not_at_end(struct sdl *p, const char *close)
{
    if (p->lx.tok != GQL_T_EOF)
        return true;
    gql_error_at(&p->err, &p->lx, "Syntax Error: Expected \"%s\".", close);
    return false;
}

static bool skip_directives(struct sdl *p)
{
    while (gql_lex_is_punct(&p->lx, "@")) {
        const char *name;
        struct gql_arg *args;
        if (!sdl_next(p) || !gql_expect_name(&p->lx, &name, &p->err) ||
            !gql_parse_args(&p->lx, true, &args, &p->err, 16))
            return false;
    }
    return true;
}

struct gql_type *gql_schema_type(const struct gql_schema *s, const char *name)
{
    for (struct gql_type *t = s->types; t; t = t->next)
        if (strcmp(t->name, name) == 0)
            return t;
    return NULL;
}

struct gql_field *gql_type_field(const struct gql_type *t, const char *name)
{
    for (struct gql_field *f = t->fields; f; f = f->next)
        if (strcmp(f->name, name) == 0)
            return f;
    return NULL;
}

struct gql_type *gql_tref_named(const struct gql_tref *t)
{
    while (t->kind != GQL_TR_NAMED)
        t = t->of;
    return t->resolved;
}

/* The type `name` of `kind`, created if new; an existing one of another kind is an error. */
static struct gql_type *type_for(struct sdl *p, const char *name, enum gql_type_kind kind)
{
    struct gql_type *t = gql_schema_type(p->s, name);
    if (t) {
        if (t->kind != kind) {
            gql_error_at(&p->err, &p->lx, "type %s is defined twice with different kinds", name);
            return NULL;
        }
        return t;
    }
    t = sdl_node(p, sizeof(*t));
    if (!t)
        return NULL;
    t->kind = kind;
    t->name = name;
    t->is_introspection = p->introspection;
    struct gql_type **tail = &p->s->types;
    while (*tail)
        tail = &(*tail)->next;
    *tail = t;
    return t;
}

static void append_field(struct gql_field **list, struct gql_field *f)
{
    while (*list)
        list = &(*list)->next;
    *list = f;
}

/* Description? Name ArgumentsDefinition? : Type DefaultValue? Directives? */
static bool input_value(struct sdl *p, struct gql_field **out)
{
    struct gql_field *f = sdl_node(p, sizeof(*f));
    if (!f || !description(p, &f->desc) || !gql_expect_name(&p->lx, &f->name, &p->err) ||
        !gql_expect_punct(&p->lx, ":", &p->err) || !gql_parse_tref(&p->lx, &f->type, &p->err))
        return false;
    if (gql_lex_is_punct(&p->lx, "=")) {
        if (!sdl_next(p))
            return false;
        size_t from = p->lx.tok_pos;
        if (!gql_parse_value(&p->lx, true, &f->def, &p->err, 16))
            return false;
        f->def_text = gql_arena_strndup(&p->s->arena, p->lx.src + from, p->lx.prev_end - from);
        if (!f->def_text)
            return false;
    }
    *out = f;
    return skip_directives(p);
}

static bool field_def(struct sdl *p, struct gql_field **out)
{
    struct gql_field *f = sdl_node(p, sizeof(*f));
    if (!f || !description(p, &f->desc) || !gql_expect_name(&p->lx, &f->name, &p->err))
        return false;
    if (gql_lex_is_punct(&p->lx, "(")) {
        if (!sdl_next(p))
            return false;
        while (!gql_lex_is_punct(&p->lx, ")")) {
            struct gql_field *a;
            if (!not_at_end(p, ")") || !input_value(p, &a))
                return false;
            append_field(&f->args, a);
        }
        if (!sdl_next(p))
            return false;
    }
    if (!gql_expect_punct(&p->lx, ":", &p->err) || !gql_parse_tref(&p->lx, &f->type, &p->err) ||
        !skip_directives(p))
        return false;
    *out = f;
    return true;
}

static bool fields_block(struct sdl *p, struct gql_type *t)
{
    if (!gql_expect_punct(&p->lx, "{", &p->err))
        return false;
    while (!gql_lex_is_punct(&p->lx, "}")) {
        struct gql_field *f;
        if (!not_at_end(p, "}") ||
            !(t->kind == GQL_K_INPUT ? input_value(p, &f) : field_def(p, &f)))
            return false;
        if (gql_type_field(t, f->name)) {
            gql_error_at(&p->err, &p->lx, "field %s.%s is defined twice", t->name, f->name);
            return false;
        }
        append_field(&t->fields, f);
    }
    return sdl_next(p);
}

static bool enum_block(struct sdl *p, struct gql_type *t)
{
    if (!gql_expect_punct(&p->lx, "{", &p->err))
        return false;
    struct gql_enum_value **tail = &t->values;
    while (*tail)
        tail = &(*tail)->next;
    while (!gql_lex_is_punct(&p->lx, "}")) {
        struct gql_enum_value *v = sdl_node(p, sizeof(*v));
        const char *desc;
        if (!v || !description(p, &desc) || !gql_expect_name(&p->lx, &v->name, &p->err) ||
            !skip_directives(p))
            return false;
        *tail = v;
        tail = &v->next;
    }
    return sdl_next(p);
}

static bool definition(struct sdl *p)
{
    const char *desc, *kw, *name;
    if (!description(p, &desc) || !gql_expect_name(&p->lx, &kw, &p->err))
        return false;
    bool extend = strcmp(kw, "extend") == 0;
    if (extend && !gql_expect_name(&p->lx, &kw, &p->err))
        return false;
    if (strcmp(kw, "schema") == 0) {
        if (!skip_directives(p) || !gql_expect_punct(&p->lx, "{", &p->err))
            return false;
        while (!gql_lex_is_punct(&p->lx, "}")) {
            const char *op, *tn;
            if (!gql_expect_name(&p->lx, &op, &p->err) || !gql_expect_punct(&p->lx, ":", &p->err) ||
                !gql_expect_name(&p->lx, &tn, &p->err))
                return false;
            if (strcmp(op, "query") == 0)
                p->query_name = tn;
            else if (strcmp(op, "mutation") == 0)
                p->mutation_name = tn;
        }
        return sdl_next(p);
    }
    static const struct {
        const char *kw;
        enum gql_type_kind kind;
    } kinds[] = {{"scalar", GQL_K_SCALAR},
                 {"type", GQL_K_OBJECT},
                 {"input", GQL_K_INPUT},
                 {"enum", GQL_K_ENUM}};
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        if (strcmp(kw, kinds[i].kw) != 0)
            continue;
        if (!gql_expect_name(&p->lx, &name, &p->err))
            return false;
        struct gql_type *t = type_for(p, name, kinds[i].kind);
        if (!t || !skip_directives(p))
            return false;
        if (desc && !t->desc)
            t->desc = desc;
        if (t->kind == GQL_K_SCALAR)
            return true;
        return t->kind == GQL_K_ENUM ? enum_block(p, t) : fields_block(p, t);
    }
    gql_error_at(&p->err, &p->lx, "unsupported definition '%s'", kw);
    return false;
}

static bool parse_text(struct sdl *p, const char *text, size_t len)
{
    gql_lex_init(&p->lx, text, len, &p->s->arena, 0);
    if (!sdl_next(p))
        return false;
    while (p->lx.tok != GQL_T_EOF)
        if (!definition(p))
            return false;
    return true;
}

static bool link_tref(struct gql_schema *s, struct gql_tref *t, bool input, char *err, size_t cap,
                      const char *where)
{
    while (t->kind != GQL_TR_NAMED)
        t = t->of;
    t->resolved = gql_schema_type(s, t->name);
    if (!t->resolved) {
        snprintf(err, cap, "%s: unknown type %s", where, t->name);
        return false;
    }
    enum gql_type_kind k = t->resolved->kind;
    if (input ? k == GQL_K_OBJECT : k == GQL_K_INPUT) {
        snprintf(err, cap, "%s: %s is not an %s type", where, t->name, input ? "input" : "output");
        return false;
    }
    return true;
}

static bool link(struct gql_schema *s, char *err, size_t cap)
{
    static const char *const scalars[] = {"", "Int", "Float", "String", "Boolean", "ID", "Long"};
    for (struct gql_type *t = s->types; t; t = t->next) {
        for (size_t i = 1; t->kind == GQL_K_SCALAR && i < sizeof(scalars) / sizeof(scalars[0]); i++)
            if (strcmp(t->name, scalars[i]) == 0)
                t->scalar = (enum gql_scalar)i;
        for (struct gql_field *f = t->fields; f; f = f->next) {
            char where[160];
            snprintf(where, sizeof(where), "%s.%s", t->name, f->name);
            if (!link_tref(s, f->type, t->kind == GQL_K_INPUT, err, cap, where))
                return false;
            for (struct gql_field *a = f->args; a; a = a->next)
                if (!link_tref(s, a->type, true, err, cap, where))
                    return false;
        }
    }
    return true;
}

static const char k_builtin_scalars[] = "scalar Int scalar Float scalar String scalar Boolean "
                                        "scalar ID";

skp_err gql_schema_new(const char *sdl_text, size_t len, const struct gql_resolver *res,
                       size_t n_res, char *err, size_t cap, struct gql_schema **out)
{
    *out = NULL;
    err[0] = '\0';
    struct gql_schema *s = skpx_calloc(1, sizeof(*s));
    struct sdl *p = skpx_calloc(1, sizeof(*p));
    skp_err rc = SKP_EINVAL;
    if (!s || !p) {
        rc = SKP_ENOMEM;
        goto out;
    }
    gql_arena_init(&s->arena, 0);
    p->s = s;
    p->introspection = true;
    if (!parse_text(p, k_builtin_scalars, strlen(k_builtin_scalars)) ||
        !parse_text(p, gql_introspection_sdl, strlen(gql_introspection_sdl)))
        goto syntax;
    p->introspection = false;
    if (!parse_text(p, sdl_text, len))
        goto syntax;
    /* the built-in scalars are shown by introspection like the schema's own types */
    for (struct gql_type *t = s->types; t; t = t->next)
        if (t->kind == GQL_K_SCALAR && strstr(k_builtin_scalars, t->name))
            t->is_introspection = false;
    if (!link(s, err, cap))
        goto out;
    s->query = gql_schema_type(s, p->query_name ? p->query_name : "Query");
    s->mutation = gql_schema_type(s, p->mutation_name ? p->mutation_name : "Mutation");
    if (!s->query || s->query->kind != GQL_K_OBJECT) {
        snprintf(err, cap, "the schema has no Query type");
        goto out;
    }
    for (size_t i = 0; i < n_res; i++) {
        struct gql_type *t = gql_schema_type(s, res[i].type);
        struct gql_field *f = t ? gql_type_field(t, res[i].field) : NULL;
        if (!f) {
            snprintf(err, cap, "resolver for %s.%s: no such field", res[i].type, res[i].field);
            goto out;
        }
        f->resolve = res[i].fn;
    }
    rc = gql_introspection_bind(s);
    if (rc) {
        snprintf(err, cap, "introspection types do not bind");
        goto out;
    }
    for (int k = 0; k < 2; k++) {
        struct gql_type *root = k ? s->mutation : s->query;
        for (struct gql_field *f = root ? root->fields : NULL; f; f = f->next) {
            if (!f->resolve) {
                snprintf(err, cap, "%s.%s has no resolver", root->name, f->name);
                rc = SKP_EINVAL;
                goto out;
            }
        }
    }
    *out = s;
    s = NULL;
    rc = SKP_OK;
    goto out;
syntax:
    snprintf(err, cap, "%s (line %d, column %d)", p->err.msg, p->err.line, p->err.col);
out:
    skpx_free(p);
    gql_schema_free(s);
    return rc;
}

void gql_schema_free(struct gql_schema *s)
{
    if (!s)
        return;
    gql_arena_cleanup(&s->arena);
    skpx_free(s);
}
