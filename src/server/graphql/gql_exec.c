/* gql_exec.c - validation and execution of one operation (GraphQL spec sections 5 and 6):
 * variables coerced to their declared types, the selection validated against the schema with
 * fragments expanded (unknown fields, arguments, fragments and directives, leaf/object
 * selections, argument values), then executed: fields collected with @skip/@include and
 * fragments, grouped by response key, resolved (a bound resolver, else the source object's
 * member of the field's name) and completed against their types (non-null errors propagate to
 * the nearest nullable parent, lists, scalars, enums). Every error carries its locations and
 * path. The answer's size is counted as it is built and stops at the limit.
 * Pure, single-threaded per call. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "server/formats/utf8.h"
#include "server/graphql/gql_int.h"

/* Deepest response path an error reports (deeper ones are cut; the depth limit is lower). */
#define GQL_PATH_MAX 128

struct exec {
    const struct gql_schema *s;
    struct gql_doc *d;
    const struct gql_op *op;
    json_t *vars; /* coerced variables */
    void *ctx;
    const struct gql_limits *l;
    json_t *errors;
    /* response path of the value being completed: keys and list indexes, built into JSON only
     * for an error (the hot path of a large list must not allocate per element) */
    struct path_el {
        const char *key; /* NULL: index */
        size_t index;
    } path[GQL_PATH_MAX];
    size_t n_path;
    struct skpx_buf out; /* the answer's "data" as JSON text, bounded by max_answer_bytes */
    bool wrote_null;     /* the last completed value was null (non-null checks) */
    size_t answer_bytes;
    size_t n_fields; /* validation: fields visited with fragments expanded */
    enum gql_refusal refused;
    bool stop; /* a limit was hit: unwind */
};

/* ---- errors ---- */

static void add_error(struct exec *x, int line, int col, bool with_path, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void add_error(struct exec *x, int line, int col, bool with_path, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_t *e = json_pack("{s:s}", "message", msg);
    if (!e)
        return;
    if (line > 0)
        json_object_set_new(e, "locations", json_pack("[{s:i,s:i}]", "line", line, "column", col));
    if (with_path) {
        json_t *p = json_array();
        for (size_t i = 0; p && i < x->n_path && i < GQL_PATH_MAX; i++)
            json_array_append_new(p, x->path[i].key ? json_string(x->path[i].key)
                                                    : json_integer((json_int_t)x->path[i].index));
        json_object_set_new(e, "path", p);
    }
    json_array_append_new(x->errors, e);
}

/* ---- type references ---- */

static void tref_put(const struct gql_tref *t, char *buf, size_t cap, size_t *n)
{
    const char *pre = t->kind == GQL_TR_LIST ? "[" : "";
    const char *text = t->kind == GQL_TR_NAMED ? t->name : "";
    for (const char *p = pre; *p && *n + 1 < cap; p++)
        buf[(*n)++] = *p;
    for (const char *p = text; *p && *n + 1 < cap; p++)
        buf[(*n)++] = *p;
    if (t->kind != GQL_TR_NAMED)
        tref_put(t->of, buf, cap, n);
    const char *post = t->kind == GQL_TR_LIST ? "]" : t->kind == GQL_TR_NON_NULL ? "!" : "";
    for (const char *p = post; *p && *n + 1 < cap; p++)
        buf[(*n)++] = *p;
    buf[*n] = '\0';
}

/* "[Type!]!" as written (truncated to cap). */
static void tref_str(const struct gql_tref *t, char *buf, size_t cap)
{
    size_t n = 0;
    tref_put(t, buf, cap, &n);
}

/* The named type of a document's type reference (variables' types are not linked). */
static struct gql_type *doc_named(const struct gql_schema *s, const struct gql_tref *t)
{
    while (t->kind != GQL_TR_NAMED)
        t = t->of;
    return t->resolved ? t->resolved : gql_schema_type(s, t->name);
}

/* ---- input coercion ---- */

struct cerr {
    char msg[384];
};

static json_t *cfail(struct cerr *ce, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static json_t *cfail(struct cerr *ce, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ce->msg, sizeof(ce->msg), fmt, ap);
    va_end(ap);
    return NULL;
}

static bool parse_i64(const char *s, size_t n, int64_t *out)
{
    char buf[32];
    if (n == 0 || n >= sizeof(buf))
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *end = NULL;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

static bool enum_has(const struct gql_type *t, const char *name)
{
    for (const struct gql_enum_value *v = t->values; v; v = v->next)
        if (strcmp(v->name, name) == 0)
            return true;
    return false;
}

/* A scalar input from JSON. */
static json_t *scalar_in(const struct gql_type *t, const json_t *v, struct cerr *ce)
{
    const char *n = t->name;
    if (strcmp(n, "Int") == 0) {
        if (json_is_integer(v) && json_integer_value(v) >= INT32_MIN &&
            json_integer_value(v) <= INT32_MAX)
            return json_incref((json_t *)v);
        return cfail(ce, "Int cannot represent a non 32-bit integer value");
    }
    if (strcmp(n, "Long") == 0) {
        int64_t i;
        if (json_is_integer(v))
            return json_incref((json_t *)v);
        if (json_is_string(v) && parse_i64(json_string_value(v), json_string_length(v), &i))
            return json_integer((json_int_t)i);
        return cfail(ce, "Long cannot represent a non-integer value");
    }
    if (strcmp(n, "Float") == 0) {
        if (json_is_number(v))
            return json_real(json_number_value(v));
        return cfail(ce, "Float cannot represent a non numeric value");
    }
    if (strcmp(n, "String") == 0) {
        if (json_is_string(v))
            return json_incref((json_t *)v);
        return cfail(ce, "String cannot represent a non string value");
    }
    if (strcmp(n, "ID") == 0) {
        if (json_is_string(v))
            return json_incref((json_t *)v);
        if (json_is_integer(v)) {
            char b[24];
            snprintf(b, sizeof(b), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
            return json_string(b);
        }
        return cfail(ce, "ID cannot represent a non-string and non-integer value");
    }
    if (strcmp(n, "Boolean") == 0) {
        if (json_is_boolean(v))
            return json_incref((json_t *)v);
        return cfail(ce, "Boolean cannot represent a non boolean value");
    }
    return json_incref((json_t *)v); /* a custom scalar: as given */
}

/* Sets o[k] to c (taking c); a NULL c (a failed coercion) or a failed set frees o: false. */
static bool put_or_drop(json_t *o, const char *k, json_t *c)
{
    if (c && json_object_set_new(o, k, c) == 0)
        return true;
    json_decref(o);
    return false;
}

static json_t *coerce_json(const struct gql_schema *s, const struct gql_tref *t, const json_t *v,
                           struct cerr *ce, int depth);

static json_t *input_object_json(const struct gql_schema *s, const struct gql_type *it,
                                 const json_t *v, struct cerr *ce, int depth)
{
    if (!json_is_object(v))
        return cfail(ce, "Expected type \"%s\" to be an object.", it->name);
    const char *k;
    json_t *m;
    json_object_foreach((json_t *)v, k, m) {
        if (!gql_type_field(it, k))
            return cfail(ce, "Field \"%s\" is not defined by type \"%s\".", k, it->name);
    }
    json_t *o = json_object();
    if (!o)
        return cfail(ce, "out of memory");
    for (const struct gql_field *f = it->fields; f; f = f->next) {
        json_t *mv = json_object_get(v, f->name);
        json_t *c = NULL;
        if (mv) {
            c = coerce_json(s, f->type, mv, ce, depth + 1);
        } else if (f->def) {
            continue; /* defaults are applied by the literal path below */
        } else if (f->type->kind == GQL_TR_NON_NULL) {
            char ts[128];
            tref_str(f->type, ts, sizeof(ts));
            cfail(ce, "Field \"%s\" of required type \"%s\" was not provided.", f->name, ts);
        } else {
            continue;
        }
        if (!put_or_drop(o, f->name, c))
            return NULL;
    }
    return o;
}

static json_t *coerce_json(const struct gql_schema *s, const struct gql_tref *t, const json_t *v,
                           struct cerr *ce, int depth)
{
    if (depth > 64)
        return cfail(ce, "value nested too deep");
    if (t->kind == GQL_TR_NON_NULL) {
        if (!v || json_is_null(v))
            return cfail(ce, "Expected non-nullable type to not be null.");
        return coerce_json(s, t->of, v, ce, depth);
    }
    if (!v || json_is_null(v))
        return json_null();
    if (t->kind == GQL_TR_LIST) {
        json_t *a = json_array();
        if (!a)
            return cfail(ce, "out of memory");
        if (!json_is_array(v)) { /* input coercion: one value is a list of one */
            json_t *c = coerce_json(s, t->of, v, ce, depth + 1);
            if (!c || json_array_append_new(a, c) != 0) {
                json_decref(a);
                return NULL;
            }
            return a;
        }
        size_t i;
        json_t *e;
        json_array_foreach((json_t *)v, i, e) {
            json_t *c = coerce_json(s, t->of, e, ce, depth + 1);
            if (!c || json_array_append_new(a, c) != 0) {
                json_decref(a);
                return NULL;
            }
        }
        return a;
    }
    const struct gql_type *nt = doc_named(s, t);
    if (!nt)
        return cfail(ce, "Unknown type \"%s\".", t->name);
    switch (nt->kind) {
    case GQL_K_SCALAR:
        return scalar_in(nt, v, ce);
    case GQL_K_ENUM:
        if (json_is_string(v) && enum_has(nt, json_string_value(v)))
            return json_incref((json_t *)v);
        return cfail(ce, "Value does not exist in \"%s\" enum.", nt->name);
    case GQL_K_INPUT:
        return input_object_json(s, nt, v, ce, depth);
    default:
        return cfail(ce, "\"%s\" is not an input type.", nt->name);
    }
}

/* Literal (with variables already coerced in `vars`) -> JSON of type t. *absent is set when the
 * literal is a variable that was not provided (the argument then counts as not given). */
static json_t *coerce_literal(struct exec *x, const struct gql_tref *t, const struct gql_value *v,
                              struct cerr *ce, bool *absent, int depth)
{
    *absent = false;
    if (depth > 64)
        return cfail(ce, "value nested too deep");
    if (v->kind == GQL_V_VAR) {
        const struct gql_vardef *vd = x->op->vars;
        while (vd && strcmp(vd->name, v->s) != 0)
            vd = vd->next;
        if (!vd)
            return cfail(ce, "Variable \"$%s\" is not defined.", v->s);
        json_t *val = json_object_get(x->vars, v->s);
        if (!val) {
            if (t->kind == GQL_TR_NON_NULL)
                return cfail(ce, "Variable \"$%s\" of required type was not provided.", v->s);
            *absent = true;
            return json_null();
        }
        if (t->kind == GQL_TR_NON_NULL && json_is_null(val))
            return cfail(ce, "Variable \"$%s\" must not be null.", v->s);
        /* the variable was coerced to its own type; re-check against the position's */
        return coerce_json(x->s, t, val, ce, depth);
    }
    if (t->kind == GQL_TR_NON_NULL) {
        if (v->kind == GQL_V_NULL)
            return cfail(ce, "Expected a non-null value, found null.");
        return coerce_literal(x, t->of, v, ce, absent, depth);
    }
    if (v->kind == GQL_V_NULL)
        return json_null();
    if (t->kind == GQL_TR_LIST) {
        json_t *a = json_array();
        if (!a)
            return cfail(ce, "out of memory");
        const struct gql_value *items = v->kind == GQL_V_LIST ? v->items : v;
        for (const struct gql_value *it = items; it; it = v->kind == GQL_V_LIST ? it->next : NULL) {
            bool ab;
            json_t *c = coerce_literal(x, t->of, it, ce, &ab, depth + 1);
            if (!c || json_array_append_new(a, c) != 0) {
                json_decref(a);
                return NULL;
            }
        }
        return a;
    }
    const struct gql_type *nt = doc_named(x->s, t);
    if (!nt)
        return cfail(ce, "Unknown type \"%s\".", t->name);
    switch (nt->kind) {
    case GQL_K_SCALAR: {
        json_t *j = NULL;
        if (v->kind == GQL_V_INT) {
            int64_t i;
            if (!parse_i64(v->s, v->len, &i))
                return cfail(ce, "%s cannot represent the value %s", nt->name, v->s);
            j = json_integer((json_int_t)i);
        } else if (v->kind == GQL_V_FLOAT) {
            if (strcmp(nt->name, "Float") != 0)
                return cfail(ce, "%s cannot represent a non-integer value: %s", nt->name, v->s);
            j = json_real(strtod(v->s, NULL));
        } else if (v->kind == GQL_V_STRING) {
            j = json_stringn(v->s, v->len);
        } else if (v->kind == GQL_V_BOOL) {
            j = json_boolean(v->s[0] == 't');
        } else {
            return cfail(ce, "%s cannot represent this value", nt->name);
        }
        if (!j)
            return cfail(ce, "out of memory");
        /* Long and ID accept their literal forms; the others must match exactly */
        if (strcmp(nt->name, "Long") == 0 && v->kind == GQL_V_STRING) {
            json_decref(j);
            return cfail(ce, "Long cannot represent a string literal");
        }
        json_t *c = scalar_in(nt, j, ce);
        json_decref(j);
        return c;
    }
    case GQL_K_ENUM:
        if (v->kind != GQL_V_ENUM || !enum_has(nt, v->s))
            return cfail(ce, "Value does not exist in \"%s\" enum.", nt->name);
        return json_string(v->s);
    case GQL_K_INPUT: {
        if (v->kind != GQL_V_OBJECT)
            return cfail(ce, "Expected type \"%s\" to be an object.", nt->name);
        for (const struct gql_value *m = v->items; m; m = m->next) {
            if (!gql_type_field(nt, m->name))
                return cfail(ce, "Field \"%s\" is not defined by type \"%s\".", m->name, nt->name);
            for (const struct gql_value *m2 = m->next; m2; m2 = m2->next)
                if (strcmp(m->name, m2->name) == 0)
                    return cfail(ce, "There can be only one input field named \"%s\".", m->name);
        }
        json_t *o = json_object();
        if (!o)
            return cfail(ce, "out of memory");
        for (const struct gql_field *f = nt->fields; f; f = f->next) {
            const struct gql_value *m = v->items;
            while (m && strcmp(m->name, f->name) != 0)
                m = m->next;
            bool ab = false;
            json_t *c = NULL;
            if (m)
                c = coerce_literal(x, f->type, m, ce, &ab, depth + 1);
            if ((!m || ab) && f->def) {
                json_decref(c);
                c = coerce_literal(x, f->type, f->def, ce, &ab, depth + 1);
            } else if ((!m || ab) && f->type->kind == GQL_TR_NON_NULL) {
                json_decref(c);
                char ts[128];
                tref_str(f->type, ts, sizeof(ts));
                c = cfail(ce, "Field \"%s.%s\" of required type \"%s\" was not provided.", nt->name,
                          f->name, ts);
            } else if (!m || ab) {
                json_decref(c);
                continue;
            }
            if (!put_or_drop(o, f->name, c))
                return NULL;
        }
        return o;
    }
    default:
        return cfail(ce, "\"%s\" is not an input type.", nt->name);
    }
}

/* Adds the defaults of input objects nested in a variable's value (the JSON path above does not
 * apply them). */
static json_t *apply_defaults(struct exec *x, const struct gql_tref *t, json_t *v, struct cerr *ce,
                              int depth)
{
    if (!v || json_is_null(v) || depth > 64)
        return v;
    if (t->kind == GQL_TR_NON_NULL)
        return apply_defaults(x, t->of, v, ce, depth);
    if (t->kind == GQL_TR_LIST) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            json_incref(e);
            json_t *n = apply_defaults(x, t->of, e, ce, depth + 1);
            if (!n) {
                json_decref(v);
                return NULL;
            }
            json_array_set_new(v, i, n);
        }
        return v;
    }
    const struct gql_type *nt = doc_named(x->s, t);
    if (!nt || nt->kind != GQL_K_INPUT)
        return v;
    for (const struct gql_field *f = nt->fields; f; f = f->next) {
        json_t *m = json_object_get(v, f->name);
        if (m) {
            json_t *n = apply_defaults(x, f->type, json_incref(m), ce, depth + 1);
            if (!n) {
                json_decref(v);
                return NULL;
            }
            json_object_set_new(v, f->name, n);
        } else if (f->def) {
            bool ab;
            json_t *c = coerce_literal(x, f->type, f->def, ce, &ab, depth + 1);
            if (!c) {
                json_decref(v);
                return NULL;
            }
            json_object_set_new(v, f->name, c);
        }
    }
    return v;
}

/* SkyWalking's UI 10.2 asks the async-profiler progress with {"taskID": ...} where its query
 * declares $taskId: a declared variable that was not given takes the one given variable whose
 * name differs only in case, when the operation declares no variable of that name (so a
 * well-formed request never changes meaning). NULL if there is none. */
static json_t *variable_by_case(const struct exec *x, const json_t *given, const char *name)
{
    const char *k;
    json_t *v, *found = NULL;
    json_object_foreach((json_t *)given, k, v) {
        if (strcasecmp(k, name) != 0)
            continue;
        for (const struct gql_vardef *vd = x->op->vars; vd; vd = vd->next)
            if (strcmp(vd->name, k) == 0)
                return NULL;
        if (found)
            return NULL; /* two candidates: none */
        found = v;
    }
    return found;
}

static bool coerce_variables(struct exec *x, const json_t *given)
{
    bool ok = true;
    for (const struct gql_vardef *vd = x->op->vars; vd; vd = vd->next) {
        char ts[128];
        tref_str(vd->type, ts, sizeof(ts));
        const struct gql_type *nt = doc_named(x->s, vd->type);
        if (!nt || nt->kind == GQL_K_OBJECT) {
            add_error(x, vd->line, vd->col, false,
                      "Variable \"$%s\" cannot be non-input type \"%s\".", vd->name, ts);
            ok = false;
            continue;
        }
        struct cerr ce = {{0}};
        json_t *v = given ? json_object_get(given, vd->name) : NULL;
        if (!v && given)
            v = variable_by_case(x, given, vd->name);
        json_t *c = NULL;
        if (v) {
            c = coerce_json(x->s, vd->type, v, &ce, 0);
            c = c ? apply_defaults(x, vd->type, c, &ce, 0) : NULL;
        } else if (vd->def) {
            bool ab;
            c = coerce_literal(x, vd->type, vd->def, &ce, &ab, 0);
        } else if (vd->type->kind == GQL_TR_NON_NULL) {
            add_error(x, vd->line, vd->col, false,
                      "Variable \"$%s\" of required type \"%s\" was not provided.", vd->name, ts);
            ok = false;
            continue;
        } else {
            continue;
        }
        if (!c) {
            add_error(x, vd->line, vd->col, false, "Variable \"$%s\" got invalid value; %s",
                      vd->name, ce.msg);
            ok = false;
            continue;
        }
        json_object_set_new(x->vars, vd->name, c);
    }
    return ok;
}

/* ---- directives and field arguments ---- */

/* Whether @skip/@include let the selection through; false on error (*err set). */
static bool directives_pass(struct exec *x, const struct gql_directive *d, bool *pass)
{
    *pass = true;
    for (; d; d = d->next) {
        bool is_skip = strcmp(d->name, "skip") == 0;
        if (!is_skip && strcmp(d->name, "include") != 0) {
            add_error(x, d->line, d->col, false, "Unknown directive \"@%s\".", d->name);
            return false;
        }
        const struct gql_arg *a = d->args;
        static struct gql_tref boolean_nn_inner = {GQL_TR_NAMED, "Boolean", NULL, NULL};
        static struct gql_tref boolean_nn = {GQL_TR_NON_NULL, NULL, &boolean_nn_inner, NULL};
        if (!a || strcmp(a->name, "if") != 0 || a->next) {
            add_error(x, d->line, d->col, false,
                      "Directive \"@%s\" takes exactly one argument \"if\".", d->name);
            return false;
        }
        struct cerr ce = {{0}};
        bool ab;
        json_t *v = coerce_literal(x, &boolean_nn, a->value, &ce, &ab, 0);
        if (!v) {
            add_error(x, a->line, a->col, false, "Argument \"if\" has an invalid value: %s",
                      ce.msg);
            return false;
        }
        bool b = json_is_true(v);
        json_decref(v);
        if (is_skip ? b : !b)
            *pass = false;
    }
    return true;
}

/* The field's arguments coerced into a new object; NULL after adding an error. */
static json_t *field_args(struct exec *x, const struct gql_field *f, const struct gql_sel *sel)
{
    for (const struct gql_arg *a = sel->args; a; a = a->next) {
        bool known = false;
        for (const struct gql_field *d = f->args; d; d = d->next)
            known = known || strcmp(d->name, a->name) == 0;
        if (!known) {
            add_error(x, a->line, a->col, false, "Unknown argument \"%s\" on field \"%s\".",
                      a->name, f->name);
            return NULL;
        }
    }
    json_t *o = json_object();
    if (!o)
        return NULL;
    for (const struct gql_field *d = f->args; d; d = d->next) {
        const struct gql_arg *a = sel->args;
        while (a && strcmp(a->name, d->name) != 0)
            a = a->next;
        struct cerr ce = {{0}};
        bool ab = false;
        json_t *c = NULL;
        if (a)
            c = coerce_literal(x, d->type, a->value, &ce, &ab, 0);
        if (a && !c) {
            add_error(x, a->line, a->col, false, "Argument \"%s\" has an invalid value: %s",
                      d->name, ce.msg);
            json_decref(o);
            return NULL;
        }
        if (!a || ab) {
            json_decref(c);
            c = NULL;
            if (d->def) {
                c = coerce_literal(x, d->type, d->def, &ce, &ab, 0);
            } else if (d->type->kind == GQL_TR_NON_NULL) {
                char ts[128];
                tref_str(d->type, ts, sizeof(ts));
                add_error(x, sel->line, sel->col, false,
                          "Field \"%s\" argument \"%s\" of type \"%s\" is required, but it was "
                          "not provided.",
                          f->name, d->name, ts);
                json_decref(o);
                return NULL;
            } else {
                continue;
            }
        }
        if (!put_or_drop(o, d->name, c))
            return NULL;
    }
    return o;
}

/* ---- field lookup ---- */

static const struct gql_field *lookup_field(const struct exec *x, const struct gql_type *t,
                                            const char *name)
{
    if (t == x->s->query && name[0] == '_' && name[1] == '_') {
        const struct gql_type *root = gql_schema_type(x->s, "__Root");
        const struct gql_field *f = root ? gql_type_field(root, name) : NULL;
        if (f)
            return f;
    }
    return gql_type_field(t, name);
}

static const struct gql_frag *find_frag(const struct exec *x, const char *name)
{
    for (const struct gql_frag *f = x->d->frags; f; f = f->next)
        if (strcmp(f->name, name) == 0)
            return f;
    return NULL;
}

/* ---- validation ---- */

static bool validate_sels(struct exec *x, const struct gql_type *t, const struct gql_sel *sels,
                          size_t depth);

static bool type_cond_ok(struct exec *x, const char *cond, int line, int col,
                         const struct gql_type **t)
{
    if (!cond)
        return true;
    const struct gql_type *c = gql_schema_type(x->s, cond);
    if (!c) {
        add_error(x, line, col, false, "Unknown type \"%s\".", cond);
        return false;
    }
    if (c->kind != GQL_K_OBJECT) {
        add_error(x, line, col, false, "Fragment cannot condition on non composite type \"%s\".",
                  cond);
        return false;
    }
    if (c != *t) {
        add_error(x, line, col, false,
                  "Fragment cannot be spread here as objects of type \"%s\" can never be of "
                  "type \"%s\".",
                  (*t)->name, cond);
        return false;
    }
    return true;
}

static bool validate_field(struct exec *x, const struct gql_type *t, const struct gql_sel *s,
                           size_t depth)
{
    if (++x->n_fields > x->l->max_fields) {
        x->refused = GQL_REFUSED_FIELDS;
        x->stop = true;
        add_error(x, s->line, s->col, false,
                  "the query selects more than %zu fields (fragments expanded)", x->l->max_fields);
        return false;
    }
    if (strcmp(s->name, "__typename") == 0) {
        if (s->sels) {
            add_error(x, s->line, s->col, false,
                      "Field \"__typename\" must not have a selection since type \"String!\" "
                      "has no subfields.");
            return false;
        }
        return true;
    }
    const struct gql_field *f = lookup_field(x, t, s->name);
    if (!f) {
        add_error(x, s->line, s->col, false, "Cannot query field \"%s\" on type \"%s\".", s->name,
                  t->name);
        return false;
    }
    json_t *args = field_args(x, f, s);
    if (!args)
        return false;
    json_decref(args);
    const struct gql_type *ft = gql_tref_named(f->type);
    char ts[128];
    tref_str(f->type, ts, sizeof(ts));
    if (ft->kind == GQL_K_OBJECT && !s->sels) {
        add_error(x, s->line, s->col, false,
                  "Field \"%s\" of type \"%s\" must have a selection of subfields. Did you mean "
                  "\"%s { ... }\"?",
                  s->name, ts, s->name);
        return false;
    }
    if (ft->kind != GQL_K_OBJECT && s->sels) {
        add_error(x, s->line, s->col, false,
                  "Field \"%s\" must not have a selection since type \"%s\" has no subfields.",
                  s->name, ts);
        return false;
    }
    return !s->sels || validate_sels(x, ft, s->sels, depth + 1);
}

static bool validate_sels(struct exec *x, const struct gql_type *t, const struct gql_sel *sels,
                          size_t depth)
{
    bool ok = true;
    if (depth > x->l->max_depth) {
        x->refused = GQL_REFUSED_DEPTH;
        x->stop = true;
        add_error(x, sels ? sels->line : 0, sels ? sels->col : 0, false,
                  "the query nests deeper than %zu levels (fragments expanded)", x->l->max_depth);
        return false;
    }
    for (const struct gql_sel *s = sels; s && !x->stop; s = s->next) {
        bool pass;
        if (!directives_pass(x, s->dirs, &pass)) {
            ok = false;
            continue;
        }
        if (s->kind == GQL_SEL_FIELD) {
            ok = validate_field(x, t, s, depth) && ok;
        } else if (s->kind == GQL_SEL_INLINE) {
            const struct gql_type *tt = t;
            ok = type_cond_ok(x, s->type_cond, s->line, s->col, &tt) &&
                 validate_sels(x, t, s->sels, depth + 1) && ok;
        } else {
            const struct gql_frag *fr = find_frag(x, s->name);
            const struct gql_type *tt = t;
            if (!fr) {
                add_error(x, s->line, s->col, false, "Unknown fragment \"%s\".", s->name);
                ok = false;
                continue;
            }
            bool fpass;
            ok = directives_pass(x, fr->dirs, &fpass) &&
                 type_cond_ok(x, fr->type_cond, fr->line, fr->col, &tt) &&
                 validate_sels(x, t, fr->sels, depth + 1) && ok;
        }
    }
    return ok;
}

/* ---- execution ---- */

/* One response key, its field (NULL: __typename) and the field selections merged under it. */
struct collected {
    const char *key;
    const struct gql_field *field;
    const struct gql_sel *first;
    const struct gql_sel **sels;
    size_t n, cap;
};
/* The fields one selection set yields for one object type: computed once per object, or once
 * per list for all its items (the hot path of a flame graph's thousands of elements). */
struct collection {
    struct collected *v;
    size_t n, cap;
};

static void collection_free(struct collection *c)
{
    for (size_t i = 0; i < c->n; i++)
        skpx_free(c->v[i].sels);
    skpx_free(c->v);
    memset(c, 0, sizeof(*c));
}

static bool collect(struct exec *x, const struct gql_type *t, const struct gql_sel *sels,
                    struct collection *c, int depth)
{
    if (depth > (int)x->l->max_depth + 2)
        return true; /* validation bounded the depth; this only guards cycles */
    for (const struct gql_sel *s = sels; s; s = s->next) {
        bool pass;
        if (!directives_pass(x, s->dirs, &pass))
            return false;
        if (!pass)
            continue;
        if (s->kind == GQL_SEL_FIELD) {
            const char *key = s->alias ? s->alias : s->name;
            struct collected *e = NULL;
            for (size_t i = 0; i < c->n && !e; i++)
                if (strcmp(c->v[i].key, key) == 0)
                    e = &c->v[i];
            if (!e) {
                if (c->n == c->cap) {
                    size_t cap = c->cap ? c->cap * 2 : 8;
                    struct collected *nv = skpx_realloc(c->v, cap * sizeof(*nv));
                    if (!nv)
                        return false;
                    c->v = nv;
                    c->cap = cap;
                }
                e = &c->v[c->n++];
                memset(e, 0, sizeof(*e));
                e->key = key;
                e->first = s;
                e->field = strcmp(s->name, "__typename") == 0 ? NULL : lookup_field(x, t, s->name);
            }
            if (e->n == e->cap) {
                size_t cap = e->cap ? e->cap * 2 : 2;
                const struct gql_sel **ns = skpx_realloc(e->sels, cap * sizeof(*ns));
                if (!ns)
                    return false;
                e->sels = ns;
                e->cap = cap;
            }
            e->sels[e->n++] = s;
            continue;
        }
        const char *cond = s->type_cond;
        const struct gql_sel *inner = s->sels;
        if (s->kind == GQL_SEL_SPREAD) {
            const struct gql_frag *fr = find_frag(x, s->name);
            if (!fr || !directives_pass(x, fr->dirs, &pass))
                return false;
            if (!pass)
                continue;
            cond = fr->type_cond;
            inner = fr->sels;
        }
        if (cond && strcmp(cond, t->name) != 0)
            continue;
        if (!collect(x, t, inner, c, depth + 1))
            return false;
    }
    return true;
}

/* The collection of the sub-selections of every selection merged in `e` on type t. */
static bool collect_sub(struct exec *x, const struct gql_type *t, const struct collected *e,
                        struct collection *c, int depth)
{
    for (size_t i = 0; i < e->n; i++)
        if (e->sels[i]->sels && !collect(x, t, e->sels[i]->sels, c, depth))
            return false;
    return true;
}

static void path_push(struct exec *x, const char *key, size_t index)
{
    if (x->n_path < GQL_PATH_MAX)
        x->path[x->n_path] = (struct path_el){key, index};
    x->n_path++;
}

/* The answer's text went past its limit (or memory ran out): stop everything. */
static bool out_ok(struct exec *x)
{
    if (!x->out.err)
        return true;
    if (!x->stop) {
        x->stop = true;
        if (x->out.err == SKP_ETOOBIG) {
            x->refused = GQL_REFUSED_ANSWER;
            add_error(x, 0, 0, false, "the answer is larger than %zu bytes",
                      x->l->max_answer_bytes);
        } else {
            add_error(x, 0, 0, false, "out of memory");
        }
    }
    return false;
}

/* Drops what was written after `mark` (a value being replaced by null or by its parent's). */
static void out_truncate(struct exec *x, size_t mark)
{
    if (x->out.len > mark) {
        x->out.len = mark;
        x->out.data[mark] = '\0';
    }
}

/* A JSON string: quotes, backslashes and control bytes escaped; the text is UTF-8 already
 * (jansson's strings and the document's names are). */
static void put_string(struct skpx_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    skpx_buf_putc(b, '"');
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        skpx_buf_put(b, s + run, i - run);
        run = i + 1;
        char esc[7] = {'\\', (char)c, 0};
        if (c == '\n')
            esc[1] = 'n';
        else if (c == '\t')
            esc[1] = 't';
        else if (c == '\r')
            esc[1] = 'r';
        else if (c < 0x20)
            memcpy(esc, (char[]){'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15], 0}, 7);
        skpx_buf_puts(b, esc);
    }
    skpx_buf_put(b, s + run, n - run);
    skpx_buf_putc(b, '"');
}

static void put_json(struct skpx_buf *b, const json_t *v)
{
    if (json_is_string(v)) {
        put_string(b, json_string_value(v), json_string_length(v));
    } else if (json_is_integer(v)) {
        skpx_buf_printf(b, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    } else if (json_is_true(v)) {
        skpx_buf_puts(b, "true");
    } else if (json_is_false(v)) {
        skpx_buf_puts(b, "false");
    } else if (json_is_null(v)) {
        skpx_buf_puts(b, "null");
    } else {
        char tmp[64];
        size_t n = json_dumpb(v, tmp, sizeof(tmp), JSON_ENCODE_ANY | JSON_COMPACT);
        if (n && n <= sizeof(tmp))
            skpx_buf_put(b, tmp, n);
        else
            skpx_buf_puts(b, "null"); /* a custom scalar's object: not in our schemas */
    }
}

static bool exec_object(struct exec *x, const struct gql_type *t, const json_t *source,
                        const struct collection *c, int depth);

static bool complete_scalar(struct exec *x, const struct gql_type *t, const json_t *v,
                            const struct gql_sel *at)
{
    struct skpx_buf *b = &x->out;
    int64_t i;
    bool ok = true;
    switch (t->scalar) {
    case GQL_S_STRING:
    case GQL_S_ID:
        if (json_is_string(v))
            put_string(b, json_string_value(v), json_string_length(v));
        else if (json_is_integer(v))
            skpx_buf_printf(b, "\"%" JSON_INTEGER_FORMAT "\"", json_integer_value(v));
        else if (json_is_boolean(v) && t->scalar == GQL_S_STRING)
            skpx_buf_puts(b, json_is_true(v) ? "\"true\"" : "\"false\"");
        else
            ok = false;
        break;
    case GQL_S_INT:
    case GQL_S_LONG:
        if (json_is_integer(v))
            i = json_integer_value(v);
        else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
                 fabs(json_real_value(v)) < 9.0e15)
            i = (int64_t)json_real_value(v);
        else if (!json_is_string(v) || !parse_i64(json_string_value(v), json_string_length(v), &i))
            ok = false;
        if (ok && t->scalar == GQL_S_INT && (i > INT32_MAX || i < INT32_MIN))
            ok = false;
        if (ok)
            skpx_buf_printf(b, "%" PRId64, i);
        break;
    case GQL_S_FLOAT:
        ok = json_is_number(v);
        if (ok)
            put_json(b, v);
        break;
    case GQL_S_BOOLEAN:
        ok = json_is_boolean(v);
        if (ok)
            put_json(b, v);
        break;
    default:
        put_json(b, v);
        break;
    }
    if (!ok) {
        add_error(x, at->line, at->col, true, "%s cannot represent the resolved value", t->name);
        return false;
    }
    return out_ok(x);
}

/* Writes value v of type t selected by e; `pre` (may be NULL) is the collection of e's
 * sub-selections on t's object type when the caller computed it already. Returns false when
 * the value is an error that nulls its parent (its text is then dropped by the caller). */
static bool complete(struct exec *x, const struct gql_tref *t, const json_t *v,
                     const struct collected *e, int depth, const struct collection *pre)
{
    if (x->stop)
        return false;
    x->wrote_null = false;
    if (t->kind == GQL_TR_NON_NULL) {
        if (!complete(x, t->of, v, e, depth, pre))
            return false;
        if (x->wrote_null) {
            add_error(x, e->first->line, e->first->col, true,
                      "Cannot return null for non-nullable field.");
            return false;
        }
        return true;
    }
    if (!v || json_is_null(v)) {
        skpx_buf_puts(&x->out, "null");
        x->wrote_null = true;
        return out_ok(x);
    }
    if (t->kind == GQL_TR_LIST) {
        if (!json_is_array(v)) {
            add_error(x, e->first->line, e->first->col, true,
                      "Expected a list for a field of list type.");
            return false;
        }
        struct collection own = {0};
        const struct gql_type *it = gql_tref_named(t->of);
        if (!pre && it->kind == GQL_K_OBJECT) {
            if (!collect_sub(x, it, e, &own, depth)) {
                collection_free(&own);
                return false;
            }
            pre = &own;
        }
        size_t start = x->out.len;
        bool ok = true;
        skpx_buf_putc(&x->out, '[');
        size_t i;
        json_t *item;
        json_array_foreach((json_t *)v, i, item) {
            if (i)
                skpx_buf_putc(&x->out, ',');
            path_push(x, NULL, i);
            ok = complete(x, t->of, item, e, depth + 1, pre);
            x->n_path--;
            if (!ok)
                break;
        }
        collection_free(&own);
        if (!ok) {
            /* an error in a non-null item makes the whole list null */
            if (x->stop || t->of->kind == GQL_TR_NON_NULL)
                return false;
            out_truncate(x, start);
            skpx_buf_puts(&x->out, "null");
            x->wrote_null = true;
            return out_ok(x);
        }
        skpx_buf_putc(&x->out, ']');
        x->wrote_null = false;
        return out_ok(x);
    }
    const struct gql_type *nt = t->resolved;
    switch (nt->kind) {
    case GQL_K_SCALAR:
        return complete_scalar(x, nt, v, e->first);
    case GQL_K_ENUM:
        if (!json_is_string(v) || !enum_has(nt, json_string_value(v))) {
            add_error(x, e->first->line, e->first->col, true,
                      "Enum \"%s\" cannot represent the resolved value.", nt->name);
            return false;
        }
        put_string(&x->out, json_string_value(v), json_string_length(v));
        return out_ok(x);
    case GQL_K_OBJECT: {
        if (pre)
            return exec_object(x, nt, v, pre, depth + 1);
        struct collection own = {0};
        bool ok = collect_sub(x, nt, e, &own, depth) && exec_object(x, nt, v, &own, depth + 1);
        collection_free(&own);
        return ok;
    }
    default:
        return false;
    }
}

/* Resolves and writes one field's value; false: null the parent (the text is dropped). */
static bool resolve_field(struct exec *x, const struct gql_type *t, const json_t *source,
                          const struct collected *e, int depth)
{
    const struct gql_sel *s = e->first;
    const struct gql_field *f = e->field;
    if (!f) {
        put_string(&x->out, t->name, strlen(t->name)); /* __typename */
        return out_ok(x);
    }
    json_t *value = NULL;
    if (f->resolve) {
        json_t *args = field_args(x, f, s);
        if (!args)
            return false;
        struct gql_call c = {
            .ctx = x->ctx, .schema = x->s, .args = args, .source = source, .field = f->name};
        skp_err err = f->resolve(&c, &value);
        json_decref(args);
        if (err) {
            json_decref(value);
            add_error(x, s->line, s->col, true, "%s", c.error[0] ? c.error : skp_strerror(err));
            return false;
        }
    } else {
        value = json_incref(json_object_get(source, f->name));
    }
    bool ok = complete(x, f->type, value, e, depth, NULL);
    json_decref(value);
    return ok;
}

static bool exec_object(struct exec *x, const struct gql_type *t, const json_t *source,
                        const struct collection *c, int depth)
{
    skpx_buf_putc(&x->out, '{');
    for (size_t i = 0; i < c->n && !x->stop; i++) {
        const struct collected *e = &c->v[i];
        if (i)
            skpx_buf_putc(&x->out, ',');
        put_string(&x->out, e->key, strlen(e->key));
        skpx_buf_putc(&x->out, ':');
        size_t mark = x->out.len;
        path_push(x, e->key, 0);
        bool ok = resolve_field(x, t, source, e, depth);
        x->n_path--;
        if (!ok) {
            if (x->stop || !e->field || e->field->type->kind == GQL_TR_NON_NULL)
                return false;
            out_truncate(x, mark); /* the error stops at this nullable field */
            skpx_buf_puts(&x->out, "null");
        }
        if (!out_ok(x))
            return false;
    }
    skpx_buf_putc(&x->out, '}');
    x->wrote_null = false;
    return !x->stop && out_ok(x);
}

static const struct gql_op *pick_op(struct exec *x, const char *op_name)
{
    const struct gql_op *found = NULL;
    size_t n = 0;
    for (const struct gql_op *o = x->d->ops; o; o = o->next) {
        n++;
        if (op_name && o->name && strcmp(o->name, op_name) == 0)
            found = o;
    }
    if (op_name && *op_name) {
        if (!found)
            add_error(x, 0, 0, false, "Unknown operation named \"%s\".", op_name);
        return found;
    }
    if (n != 1) {
        add_error(x, 0, 0, false,
                  n ? "Must provide operation name if query contains multiple operations."
                    : "Must provide an operation.");
        return NULL;
    }
    return x->d->ops;
}

/* Appends ,"errors":[...] (the errors so far) to the buffer; false when out of memory. */
static bool put_errors(struct skpx_buf *b, const json_t *errors)
{
    size_t n = 0;
    char *t = skp_json_text(errors, &n);
    if (!t)
        return false;
    skpx_buf_puts(b, "\"errors\":");
    skpx_buf_put(b, t, n);
    skpx_free(t);
    return true;
}

skp_err gql_execute_text(const struct gql_schema *s, struct gql_doc *d, const char *op_name,
                         const json_t *variables, void *ctx, const struct gql_limits *l,
                         enum gql_refusal *refused, char **text, size_t *len)
{
    struct exec x = {.s = s, .d = d, .ctx = ctx, .l = l};
    struct skpx_buf ans;
    skp_err err = SKP_ENOMEM;
    *text = NULL;
    *len = 0;
    /* the data's text has the limit; the envelope and the errors get room beyond it */
    skpx_buf_init(&x.out, l->max_answer_bytes);
    skpx_buf_init(&ans, l->max_answer_bytes + 1024u * 1024u);
    x.errors = json_array();
    x.vars = json_object();
    if (!x.errors || !x.vars)
        goto out;
    bool run = false;
    x.op = pick_op(&x, op_name);
    const struct gql_type *root = !x.op                           ? NULL
                                  : x.op->kind == GQL_OP_QUERY    ? s->query
                                  : x.op->kind == GQL_OP_MUTATION ? s->mutation
                                                                  : NULL;
    if (x.op && !root)
        add_error(&x, x.op->line, x.op->col, false, "Schema is not configured for %s.",
                  x.op->kind == GQL_OP_MUTATION ? "mutations" : "subscriptions");
    if (root && variables && !json_is_object(variables))
        add_error(&x, 0, 0, false, "Variables must be provided as an object.");
    for (const struct gql_frag *f = d->frags; root && f; f = f->next)
        for (const struct gql_frag *g = f->next; g; g = g->next)
            if (strcmp(f->name, g->name) == 0)
                add_error(&x, g->line, g->col, false,
                          "There can be only one fragment named \"%s\".", g->name);
    if (root && !json_array_size(x.errors) && coerce_variables(&x, variables) &&
        validate_sels(&x, root, x.op->sels, 1) && !json_array_size(x.errors))
        run = true;
    skpx_buf_putc(&ans, '{');
    if (run) {
        struct collection top = {0};
        bool ok = collect(&x, root, x.op->sels, &top, 1) && exec_object(&x, root, NULL, &top, 1);
        collection_free(&top);
        skpx_buf_puts(&ans, "\"data\":");
        if (ok && !x.out.err)
            skpx_buf_put(&ans, x.out.data, x.out.len);
        else
            skpx_buf_puts(&ans, "null");
        if (json_array_size(x.errors))
            skpx_buf_putc(&ans, ',');
    }
    if (json_array_size(x.errors) && !put_errors(&ans, x.errors))
        goto out;
    skpx_buf_putc(&ans, '}');
    err = skpx_buf_take(&ans, (uint8_t **)text, len);
out:
    if (refused)
        *refused = x.refused;
    skpx_buf_cleanup(&x.out);
    skpx_buf_cleanup(&ans);
    json_decref(x.errors);
    json_decref(x.vars);
    return err;
}

json_t *gql_execute(const struct gql_schema *s, struct gql_doc *d, const char *op_name,
                    const json_t *variables, void *ctx, const struct gql_limits *l,
                    enum gql_refusal *refused)
{
    char *text = NULL;
    size_t len = 0;
    if (gql_execute_text(s, d, op_name, variables, ctx, l, refused, &text, &len) != SKP_OK)
        return NULL;
    json_t *j = json_loadb(text, len, 0, NULL);
    skpx_free(text);
    return j;
}
