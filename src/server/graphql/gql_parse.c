/* gql_parse.c - recursive-descent parser of GraphQL executable documents (operations,
 * fragments) into an arena tree, and the value and type-reference grammar the SDL parser
 * (gql_schema.c) shares. Bounded: query bytes, tokens, nesting depth and field selections are
 * checked while parsing, so a hostile text costs at most the limits. Pure. */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "server/formats/utf8.h"
#include "server/graphql/gql_int.h"

void gql_limits_default(struct gql_limits *l)
{
    l->max_query_bytes = GQL_MAX_QUERY_BYTES;
    l->max_tokens = GQL_MAX_TOKENS;
    l->max_depth = GQL_MAX_DEPTH;
    l->max_fields = GQL_MAX_FIELDS;
    l->max_answer_bytes = GQL_MAX_ANSWER_BYTES;
}

struct parser {
    struct gql_lexer lx;
    struct gql_doc *doc;
    const struct gql_limits *lim;
    struct gql_error err;
    enum gql_refusal refused;
};

static bool lex_ok(struct gql_lexer *lx, struct gql_error *e)
{
    if (lx->tok != GQL_T_ERROR)
        return true;
    snprintf(e->msg, sizeof(e->msg), "Syntax Error: %s.", lx->text);
    e->line = lx->line;
    e->col = lx->col;
    return false;
}

/* Advances and reports a lexical error. */
static bool next(struct gql_lexer *lx, struct gql_error *e)
{
    gql_lex_next(lx);
    return lex_ok(lx, e);
}

static const char *tok_desc(const struct gql_lexer *lx, char *buf, size_t cap)
{
    switch (lx->tok) {
    case GQL_T_EOF:
        return "<EOF>";
    case GQL_T_STRING:
        return "a string";
    default:
        snprintf(buf, cap, "\"%.*s\"", (int)(lx->text_len > 40 ? 40 : lx->text_len), lx->text);
        return buf;
    }
}

bool gql_expect_punct(struct gql_lexer *lx, const char *p, struct gql_error *e)
{
    if (!lex_ok(lx, e))
        return false;
    if (!gql_lex_is_punct(lx, p)) {
        char b[64];
        gql_error_at(e, lx, "Syntax Error: Expected \"%s\", found %s.", p, tok_desc(lx, b, 64));
        return false;
    }
    return next(lx, e);
}

bool gql_expect_name(struct gql_lexer *lx, const char **out, struct gql_error *e)
{
    if (!lex_ok(lx, e))
        return false;
    if (lx->tok != GQL_T_NAME) {
        char b[64];
        gql_error_at(e, lx, "Syntax Error: Expected Name, found %s.", tok_desc(lx, b, 64));
        return false;
    }
    *out = gql_arena_strndup(lx->arena, lx->text, lx->text_len);
    if (!*out) {
        gql_error_at(e, lx, "query too large");
        return false;
    }
    return next(lx, e);
}

static void *node(struct gql_lexer *lx, size_t n, struct gql_error *e)
{
    void *p = gql_arena_alloc(lx->arena, n);
    if (!p)
        gql_error_at(e, lx, "query too large");
    return p;
}

bool gql_parse_value(struct gql_lexer *lx, bool is_const, struct gql_value **out,
                     struct gql_error *e, int depth)
{
    if (!lex_ok(lx, e))
        return false;
    if (depth <= 0) {
        gql_error_at(e, lx, "values nested too deep");
        return false;
    }
    struct gql_value *v = node(lx, sizeof(*v), e);
    if (!v)
        return false;
    v->line = lx->tok_line;
    v->col = lx->tok_col;
    *out = v;
    if (gql_lex_is_punct(lx, "$")) {
        if (is_const) {
            gql_error_at(e, lx, "Syntax Error: Unexpected variable in a constant value.");
            return false;
        }
        v->kind = GQL_V_VAR;
        return next(lx, e) && gql_expect_name(lx, &v->s, e);
    }
    if (gql_lex_is_punct(lx, "[") || gql_lex_is_punct(lx, "{")) {
        bool is_list = gql_lex_is_punct(lx, "[");
        const char *close = is_list ? "]" : "}";
        v->kind = is_list ? GQL_V_LIST : GQL_V_OBJECT;
        if (!next(lx, e))
            return false;
        struct gql_value **tail = &v->items;
        while (!gql_lex_is_punct(lx, close)) {
            if (lx->tok == GQL_T_EOF) {
                gql_error_at(e, lx, "Syntax Error: Expected \"%s\", found <EOF>.", close);
                return false;
            }
            const char *name = NULL;
            if (!is_list && (!gql_expect_name(lx, &name, e) || !gql_expect_punct(lx, ":", e)))
                return false;
            if (!gql_parse_value(lx, is_const, tail, e, depth - 1))
                return false;
            (*tail)->name = name;
            tail = &(*tail)->next;
        }
        return next(lx, e);
    }
    switch (lx->tok) {
    case GQL_T_INT:
    case GQL_T_FLOAT:
    case GQL_T_STRING:
        v->kind = lx->tok == GQL_T_INT     ? GQL_V_INT
                  : lx->tok == GQL_T_FLOAT ? GQL_V_FLOAT
                                           : GQL_V_STRING;
        v->len = lx->text_len;
        v->s = lx->tok == GQL_T_STRING ? lx->text : gql_arena_strndup(lx->arena, lx->text, v->len);
        if (!v->s) {
            gql_error_at(e, lx, "query too large");
            return false;
        }
        return next(lx, e);
    case GQL_T_NAME:
        if (gql_lex_is_name(lx, "true") || gql_lex_is_name(lx, "false"))
            v->kind = GQL_V_BOOL;
        else if (gql_lex_is_name(lx, "null"))
            v->kind = GQL_V_NULL;
        else
            v->kind = GQL_V_ENUM;
        return gql_expect_name(lx, &v->s, e);
    default: {
        char b[64];
        gql_error_at(e, lx, "Syntax Error: Unexpected %s.", tok_desc(lx, b, 64));
        return false;
    }
    }
}

/* Type references nest lists at most this deep ([[[T]]] is 3). */
#define GQL_TREF_DEPTH_MAX 8

static bool parse_tref(struct gql_lexer *lx, struct gql_tref **out, struct gql_error *e, int depth)
{
    struct gql_tref *t = node(lx, sizeof(*t), e);
    if (!t)
        return false;
    if (gql_lex_is_punct(lx, "[")) {
        t->kind = GQL_TR_LIST;
        if (depth >= GQL_TREF_DEPTH_MAX) {
            gql_error_at(e, lx, "type nested too deep");
            return false;
        }
        if (!next(lx, e) || !parse_tref(lx, &t->of, e, depth + 1) || !gql_expect_punct(lx, "]", e))
            return false;
    } else {
        t->kind = GQL_TR_NAMED;
        if (!gql_expect_name(lx, &t->name, e))
            return false;
    }
    if (gql_lex_is_punct(lx, "!")) {
        struct gql_tref *nn = node(lx, sizeof(*nn), e);
        if (!nn)
            return false;
        nn->kind = GQL_TR_NON_NULL;
        nn->of = t;
        t = nn;
        if (!next(lx, e))
            return false;
    }
    *out = t;
    return true;
}

bool gql_parse_tref(struct gql_lexer *lx, struct gql_tref **out, struct gql_error *e)
{
    return parse_tref(lx, out, e, 0);
}

bool gql_parse_args(struct gql_lexer *lx, bool is_const, struct gql_arg **out, struct gql_error *e,
                    int depth)
{
    *out = NULL;
    if (!gql_lex_is_punct(lx, "("))
        return true;
    if (!next(lx, e))
        return false;
    struct gql_arg **tail = out;
    do {
        struct gql_arg *a = node(lx, sizeof(*a), e);
        if (!a)
            return false;
        a->line = lx->tok_line;
        a->col = lx->tok_col;
        if (!gql_expect_name(lx, &a->name, e) || !gql_expect_punct(lx, ":", e) ||
            !gql_parse_value(lx, is_const, &a->value, e, depth))
            return false;
        *tail = a;
        tail = &a->next;
    } while (!gql_lex_is_punct(lx, ")"));
    return next(lx, e);
}

static bool parse_args(struct parser *p, bool is_const, struct gql_arg **out)
{
    return gql_parse_args(&p->lx, is_const, out, &p->err, (int)p->lim->max_depth);
}

static bool parse_directives(struct parser *p, bool is_const, struct gql_directive **out)
{
    struct gql_lexer *lx = &p->lx;
    struct gql_directive **tail = out;
    *out = NULL;
    while (gql_lex_is_punct(lx, "@")) {
        struct gql_directive *d = node(lx, sizeof(*d), &p->err);
        if (!d)
            return false;
        d->line = lx->tok_line;
        d->col = lx->tok_col;
        if (!next(lx, &p->err) || !gql_expect_name(lx, &d->name, &p->err) ||
            !parse_args(p, is_const, &d->args))
            return false;
        *tail = d;
        tail = &d->next;
    }
    return true;
}

static bool parse_selection_set(struct parser *p, struct gql_sel **out, size_t depth);

static bool parse_selection(struct parser *p, struct gql_sel **out, size_t depth)
{
    struct gql_lexer *lx = &p->lx;
    struct gql_error *e = &p->err;
    struct gql_sel *s = node(lx, sizeof(*s), e);
    if (!s)
        return false;
    *out = s;
    s->line = lx->tok_line;
    s->col = lx->tok_col;
    if (gql_lex_is_punct(lx, "...")) {
        if (!next(lx, e))
            return false;
        if (lx->tok == GQL_T_NAME && !gql_lex_is_name(lx, "on")) {
            s->kind = GQL_SEL_SPREAD;
            return gql_expect_name(lx, &s->name, e) && parse_directives(p, false, &s->dirs);
        }
        s->kind = GQL_SEL_INLINE;
        if (gql_lex_is_name(lx, "on") && (!next(lx, e) || !gql_expect_name(lx, &s->type_cond, e)))
            return false;
        return parse_directives(p, false, &s->dirs) && parse_selection_set(p, &s->sels, depth);
    }
    s->kind = GQL_SEL_FIELD;
    if (++p->doc->n_fields > p->lim->max_fields) {
        p->refused = GQL_REFUSED_FIELDS;
        gql_error_at(e, lx, "the query selects more than %zu fields", p->lim->max_fields);
        return false;
    }
    if (!gql_expect_name(lx, &s->name, e))
        return false;
    if (gql_lex_is_punct(lx, ":")) {
        s->alias = s->name;
        if (!next(lx, e) || !gql_expect_name(lx, &s->name, e))
            return false;
    }
    if (!parse_args(p, false, &s->args) || !parse_directives(p, false, &s->dirs))
        return false;
    if (gql_lex_is_punct(lx, "{"))
        return parse_selection_set(p, &s->sels, depth);
    return true;
}

static bool parse_selection_set(struct parser *p, struct gql_sel **out, size_t depth)
{
    struct gql_lexer *lx = &p->lx;
    if (depth >= p->lim->max_depth) {
        p->refused = GQL_REFUSED_DEPTH;
        gql_error_at(&p->err, lx, "the query nests deeper than %zu levels", p->lim->max_depth);
        return false;
    }
    if (!gql_expect_punct(lx, "{", &p->err))
        return false;
    struct gql_sel **tail = out;
    do {
        if (!parse_selection(p, tail, depth + 1))
            return false;
        tail = &(*tail)->next;
    } while (!gql_lex_is_punct(lx, "}") && lx->tok != GQL_T_ERROR);
    return gql_expect_punct(lx, "}", &p->err);
}

static bool parse_vardefs(struct parser *p, struct gql_vardef **out)
{
    struct gql_lexer *lx = &p->lx;
    struct gql_error *e = &p->err;
    *out = NULL;
    if (!gql_lex_is_punct(lx, "("))
        return true;
    if (!next(lx, e))
        return false;
    struct gql_vardef **tail = out;
    do {
        struct gql_vardef *v = node(lx, sizeof(*v), e);
        if (!v)
            return false;
        v->line = lx->tok_line;
        v->col = lx->tok_col;
        struct gql_directive *dirs;
        if (!gql_expect_punct(lx, "$", e) || !gql_expect_name(lx, &v->name, e) ||
            !gql_expect_punct(lx, ":", e) || !gql_parse_tref(lx, &v->type, e))
            return false;
        if (gql_lex_is_punct(lx, "=") &&
            (!next(lx, e) || !gql_parse_value(lx, true, &v->def, e, (int)p->lim->max_depth)))
            return false;
        if (!parse_directives(p, true, &dirs))
            return false;
        *tail = v;
        tail = &v->next;
    } while (!gql_lex_is_punct(lx, ")"));
    return next(lx, e);
}

static bool parse_definition(struct parser *p, struct gql_op ***op_tail,
                             struct gql_frag ***frag_tail)
{
    struct gql_lexer *lx = &p->lx;
    struct gql_error *e = &p->err;
    int line = lx->tok_line, col = lx->tok_col;
    if (gql_lex_is_name(lx, "fragment")) {
        struct gql_frag *f = node(lx, sizeof(*f), e);
        if (!f || !next(lx, e))
            return false;
        f->line = line;
        f->col = col;
        if (gql_lex_is_name(lx, "on")) {
            gql_error_at(e, lx, "Syntax Error: Unexpected Name \"on\".");
            return false;
        }
        if (!gql_expect_name(lx, &f->name, e))
            return false;
        if (!gql_lex_is_name(lx, "on")) {
            char b[64];
            gql_error_at(e, lx, "Syntax Error: Expected \"on\", found %s.", tok_desc(lx, b, 64));
            return false;
        }
        if (!next(lx, e) || !gql_expect_name(lx, &f->type_cond, e) ||
            !parse_directives(p, false, &f->dirs) || !parse_selection_set(p, &f->sels, 0))
            return false;
        **frag_tail = f;
        *frag_tail = &f->next;
        return true;
    }
    struct gql_op *op = node(lx, sizeof(*op), e);
    if (!op)
        return false;
    op->line = line;
    op->col = col;
    if (gql_lex_is_punct(lx, "{")) {
        op->kind = GQL_OP_QUERY;
    } else if (gql_lex_is_name(lx, "query") || gql_lex_is_name(lx, "mutation") ||
               gql_lex_is_name(lx, "subscription")) {
        op->kind = gql_lex_is_name(lx, "query")      ? GQL_OP_QUERY
                   : gql_lex_is_name(lx, "mutation") ? GQL_OP_MUTATION
                                                     : GQL_OP_SUBSCRIPTION;
        if (!next(lx, e))
            return false;
        if (lx->tok == GQL_T_NAME && !gql_expect_name(lx, &op->name, e))
            return false;
        if (!parse_vardefs(p, &op->vars) || !parse_directives(p, false, &op->dirs))
            return false;
    } else {
        char b[64];
        gql_error_at(e, lx,
                     "Syntax Error: Unexpected %s (an executable document holds "
                     "operations and fragments).",
                     tok_desc(lx, b, 64));
        return false;
    }
    if (!parse_selection_set(p, &op->sels, 0))
        return false;
    **op_tail = op;
    *op_tail = &op->next;
    return true;
}

json_t *gql_error_answer(const char *msg)
{
    return json_pack("{s:[{s:s}]}", "errors", "message", msg);
}

static json_t *located_answer(const struct gql_error *e)
{
    return json_pack("{s:[{s:s,s:[{s:i,s:i}]}]}", "errors", "message", e->msg, "locations", "line",
                     e->line, "column", e->col);
}

skp_err gql_doc_parse(const char *text, size_t len, const struct gql_limits *l,
                      struct gql_doc **out, json_t **errors, enum gql_refusal *refused)
{
    *out = NULL;
    *errors = NULL;
    if (refused)
        *refused = GQL_REFUSED_NONE;
    if (len > l->max_query_bytes) {
        char msg[96];
        snprintf(msg, sizeof(msg), "the query is longer than %zu bytes", l->max_query_bytes);
        *errors = gql_error_answer(msg);
        if (refused)
            *refused = GQL_REFUSED_QUERY_BYTES;
        return SKP_ETOOBIG;
    }
    if (!skp_utf8_valid(text, len)) {
        *errors = gql_error_answer("the query is not valid UTF-8");
        return SKP_EINVAL;
    }
    struct parser *p = skpx_calloc(1, sizeof(*p));
    struct gql_doc *d = skpx_calloc(1, sizeof(*d));
    if (!p || !d) {
        skpx_free(p);
        skpx_free(d);
        return SKP_ENOMEM;
    }
    /* The tree costs a bounded multiple of the text: 64 B per token is far above real use. */
    gql_arena_init(&d->arena, 4096 + l->max_tokens * 64);
    p->doc = d;
    p->lim = l;
    gql_lex_init(&p->lx, text, len, &d->arena, l->max_tokens);
    struct gql_op **op_tail = &d->ops;
    struct gql_frag **frag_tail = &d->frags;
    bool ok = next(&p->lx, &p->err);
    if (ok && p->lx.tok == GQL_T_EOF) {
        gql_error_at(&p->err, &p->lx, "Syntax Error: Unexpected <EOF>.");
        ok = false;
    }
    while (ok && p->lx.tok != GQL_T_EOF)
        ok = parse_definition(p, &op_tail, &frag_tail);
    if (!ok && p->lx.tok == GQL_T_ERROR && p->lx.n_tokens > l->max_tokens)
        p->refused = GQL_REFUSED_TOKENS;
    skp_err err = SKP_OK;
    if (!ok) {
        *errors = located_answer(&p->err);
        if (refused)
            *refused = p->refused;
        err = p->refused ? SKP_ETOOBIG : SKP_EINVAL;
        gql_doc_free(d);
        d = NULL;
        if (!*errors)
            err = SKP_ENOMEM;
    }
    skpx_free(p);
    *out = d;
    return err;
}

void gql_doc_free(struct gql_doc *d)
{
    if (!d)
        return;
    gql_arena_cleanup(&d->arena);
    skpx_free(d);
}

static const struct gql_op *find_op(const struct gql_doc *d, const char *op_name)
{
    const struct gql_op *found = NULL;
    for (const struct gql_op *o = d->ops; o; o = o->next) {
        if (op_name ? o->name && strcmp(o->name, op_name) == 0 : true) {
            if (!op_name && found)
                return NULL; /* several: a name is needed */
            found = o;
            if (op_name)
                break;
        }
    }
    return found;
}

bool gql_doc_op_kind(const struct gql_doc *d, const char *op_name, enum gql_op_kind *kind)
{
    const struct gql_op *o = find_op(d, op_name);
    if (o)
        *kind = o->kind;
    return o != NULL;
}
