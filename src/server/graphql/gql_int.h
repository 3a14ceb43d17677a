/* gql_int.h - shared by the files of src/server/graphql: the arena every parse allocates from,
 * the lexer, the document tree (executable documents, gql_parse.c) and the schema's type
 * descriptions (gql_schema.c). Nothing here knows the server: pure code, single-threaded per
 * object. */
#ifndef SKP_SERVER_GQL_INT_H
#define SKP_SERVER_GQL_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/graphql/gql.h"

/* ---- arena: blocks freed together ---- */
struct gql_arena {
    struct gql_arena_block *head;
    size_t used;  /* bytes handed out, for the limits */
    size_t limit; /* 0 = none */
};
void gql_arena_init(struct gql_arena *a, size_t limit);
/* Zeroed memory of n bytes; NULL when out of memory or past the limit. */
void *gql_arena_alloc(struct gql_arena *a, size_t n);
char *gql_arena_strndup(struct gql_arena *a, const char *s, size_t n);
void gql_arena_cleanup(struct gql_arena *a);

/* ---- lexer ---- */
enum gql_tok {
    GQL_T_EOF = 0,
    GQL_T_PUNCT, /* one of ! $ & ( ) ... : = @ [ ] { | } (text holds it) */
    GQL_T_NAME,
    GQL_T_INT,
    GQL_T_FLOAT,
    GQL_T_STRING, /* text is the decoded value (arena), len its length */
    GQL_T_ERROR,  /* text is the message */
};
struct gql_lexer {
    const char *src;
    size_t len;
    size_t pos;
    int line, col; /* of pos, 1-based */
    size_t n_tokens;
    size_t max_tokens; /* 0 = none */
    struct gql_arena *arena;
    /* the current token */
    enum gql_tok tok;
    const char *text;
    size_t text_len;
    int tok_line, tok_col;
    size_t tok_pos;  /* byte offset of the current token */
    size_t prev_end; /* byte offset just past the previous token */
    char punct[4];
};
void gql_lex_init(struct gql_lexer *lx, const char *src, size_t len, struct gql_arena *arena,
                  size_t max_tokens);
/* Reads the next token into lx->tok/text. */
void gql_lex_next(struct gql_lexer *lx);
bool gql_lex_is_punct(const struct gql_lexer *lx, const char *p);
bool gql_lex_is_name(const struct gql_lexer *lx, const char *name);

/* ---- parse errors ---- */
struct gql_error {
    char msg[256];
    int line, col;
};

/* ---- type references (both trees) ---- */
enum gql_tref_kind { GQL_TR_NAMED, GQL_TR_LIST, GQL_TR_NON_NULL };
struct gql_tref {
    enum gql_tref_kind kind;
    const char *name;          /* GQL_TR_NAMED */
    struct gql_tref *of;       /* LIST, NON_NULL */
    struct gql_type *resolved; /* NAMED, set by the schema's link step (schema trees only) */
};

/* ---- values ---- */
enum gql_vkind {
    GQL_V_VAR,
    GQL_V_INT,
    GQL_V_FLOAT,
    GQL_V_STRING,
    GQL_V_BOOL,
    GQL_V_NULL,
    GQL_V_ENUM,
    GQL_V_LIST,
    GQL_V_OBJECT,
};
struct gql_value {
    enum gql_vkind kind;
    const char *s; /* VAR/ENUM name, INT/FLOAT text, STRING value, BOOL "true"/"false" */
    size_t len;
    const char *name;        /* member name inside an OBJECT */
    struct gql_value *items; /* LIST items / OBJECT members */
    struct gql_value *next;
    int line, col;
};

/* ---- executable documents ---- */
struct gql_arg {
    const char *name;
    struct gql_value *value;
    struct gql_arg *next;
    int line, col;
};
struct gql_directive {
    const char *name;
    struct gql_arg *args;
    struct gql_directive *next;
    int line, col;
};
enum gql_sel_kind { GQL_SEL_FIELD, GQL_SEL_SPREAD, GQL_SEL_INLINE };
struct gql_sel {
    enum gql_sel_kind kind;
    const char *alias;     /* FIELD: NULL = the name */
    const char *name;      /* FIELD: field; SPREAD: fragment name */
    const char *type_cond; /* INLINE: NULL = none */
    struct gql_arg *args;
    struct gql_directive *dirs;
    struct gql_sel *sels; /* selection set, NULL = none */
    struct gql_sel *next;
    int line, col;
};
struct gql_vardef {
    const char *name;
    struct gql_tref *type;
    struct gql_value *def; /* NULL = none */
    struct gql_vardef *next;
    int line, col;
};
struct gql_op {
    enum gql_op_kind kind;
    const char *name; /* NULL = anonymous */
    struct gql_vardef *vars;
    struct gql_directive *dirs;
    struct gql_sel *sels;
    struct gql_op *next;
    int line, col;
};
struct gql_frag {
    const char *name;
    const char *type_cond;
    struct gql_directive *dirs;
    struct gql_sel *sels;
    struct gql_frag *next;
    int line, col;
};
struct gql_doc {
    struct gql_arena arena;
    struct gql_op *ops;
    struct gql_frag *frags;
    size_t n_fields; /* field selections written in the text */
};

/* Shared pieces of the two parsers (gql_parse.c). Each returns false after setting *e. */
bool gql_parse_value(struct gql_lexer *lx, bool is_const, struct gql_value **out,
                     struct gql_error *e, int depth);
bool gql_parse_tref(struct gql_lexer *lx, struct gql_tref **out, struct gql_error *e);
/* Optional arguments "(name: value ...)" (at least one when the parenthesis comes); values
 * nest at most `depth` deep. *out is NULL when there are none. */
bool gql_parse_args(struct gql_lexer *lx, bool is_const, struct gql_arg **out, struct gql_error *e,
                    int depth);
bool gql_expect_punct(struct gql_lexer *lx, const char *p, struct gql_error *e);
bool gql_expect_name(struct gql_lexer *lx, const char **out, struct gql_error *e);
void gql_error_at(struct gql_error *e, const struct gql_lexer *lx, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- schema ---- */
enum gql_type_kind {
    GQL_K_SCALAR,
    GQL_K_OBJECT,
    GQL_K_INPUT,
    GQL_K_ENUM,
};
struct gql_field {
    const char *name;
    const char *desc; /* NULL = none */
    struct gql_tref *type;
    struct gql_field *args; /* arguments (fields: type + def) */
    struct gql_value *def;  /* input values: default, NULL = none */
    const char *def_text;   /* its text as written, for introspection */
    gql_resolve_cb resolve; /* bound resolver; NULL = the source's member */
    struct gql_field *next;
};
struct gql_enum_value {
    const char *name;
    struct gql_enum_value *next;
};
/* Built-in scalars, found once at link time (the executor's hot path switches on them). */
enum gql_scalar {
    GQL_S_CUSTOM = 0,
    GQL_S_INT,
    GQL_S_FLOAT,
    GQL_S_STRING,
    GQL_S_BOOLEAN,
    GQL_S_ID,
    GQL_S_LONG, /* OAP's 64-bit integer scalar */
};
struct gql_type {
    enum gql_type_kind kind;
    enum gql_scalar scalar; /* SCALAR types */
    const char *name;
    const char *desc;
    struct gql_field *fields; /* OBJECT fields, INPUT members */
    struct gql_enum_value *values;
    bool is_introspection; /* from the engine's own text: hidden from __schema.types */
    struct gql_type *next;
};
struct gql_schema {
    struct gql_arena arena;
    struct gql_type *types;
    struct gql_type *query, *mutation;
};
struct gql_type *gql_schema_type(const struct gql_schema *s, const char *name);
struct gql_field *gql_type_field(const struct gql_type *t, const char *name);
/* The named type at the bottom of a reference. */
struct gql_type *gql_tref_named(const struct gql_tref *t);
/* Introspection: the engine's own SDL text for __Schema & co (gql_introspect.c) and its resolvers
 * bound into every schema. */
extern const char gql_introspection_sdl[];
skp_err gql_introspection_bind(struct gql_schema *s);

#endif
