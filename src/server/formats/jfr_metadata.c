/* jfr_metadata.c - a chunk's metadata event: the string table and the element tree
 * (root > metadata > class > field) that declares every event and constant type with its
 * fields, in the order their values are written. The parser reads every value by walking
 * these declarations, never by a hard-coded layout, so recordings of any JDK (or of
 * async-profiler) with their own extra fields parse alike.
 *
 * Layout (after the event's size and type id 0): start time, duration, metadata id, string
 * count, strings; then the root element: name index, attribute count, (key index, value
 * index) pairs, child count, children (each a name index then an element). */
#include "server/formats/jfr_int.h"

#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/grow.h"

static const struct {
    const char *name;
    enum jfr_prim prim;
} g_prims[] = {
    {"boolean", JFR_PRIM_BOOLEAN},
    {"byte", JFR_PRIM_BYTE},
    {"char", JFR_PRIM_CHAR},
    {"short", JFR_PRIM_SHORT},
    {"int", JFR_PRIM_INT},
    {"long", JFR_PRIM_LONG},
    {"float", JFR_PRIM_FLOAT},
    {"double", JFR_PRIM_DOUBLE},
    {"java.lang.String", JFR_PRIM_STRING},
};

static const struct {
    const char *name;
    enum jfr_role role;
} g_roles[] = {
    {"stackTrace", JFR_R_STACK_TRACE},
    {"sampledThread", JFR_R_SAMPLED_THREAD},
    {"eventThread", JFR_R_EVENT_THREAD},
    {"duration", JFR_R_DURATION},
    {"weight", JFR_R_WEIGHT},
    {"allocationSize", JFR_R_ALLOCATION_SIZE},
    {"tlabSize", JFR_R_TLAB_SIZE},
    {"objectClass", JFR_R_OBJECT_CLASS},
    {"samples", JFR_R_SAMPLES},
    {"method", JFR_R_METHOD},
    {"lineNumber", JFR_R_LINE_NUMBER},
    {"frames", JFR_R_FRAMES},
    {"type", JFR_R_TYPE},
    {"name", JFR_R_NAME},
    {"string", JFR_R_STRING},
    {"javaName", JFR_R_JAVA_NAME},
    {"osName", JFR_R_OS_NAME},
    {"startTime", JFR_R_START_TIME},
};

/* Parse state: the string table as offsets into m->arena. */
struct mparse {
    struct jfr_meta *m;
    struct jfr_cursor *c;
    struct jfr_error *err;
    uint32_t *str_off;
    uint32_t n_str;
    uint32_t cur_class; /* type being declared, UINT32_MAX outside a class */
};

enum ctx { CTX_OTHER, CTX_CLASS };

static const char *str_at(const struct mparse *st, int64_t idx)
{
    if (idx < 0 || (uint64_t)idx >= st->n_str)
        return NULL;
    return st->m->arena + st->str_off[idx];
}

static skp_err arena_add(struct jfr_meta *m, const struct jfr_str *s, uint32_t *off)
{
    /* Metadata names are short; 4 bytes per input byte covers Latin-1/UTF-16 conversion. */
    size_t need = (size_t)s->len * 4 + 1;
    if (m->arena_len + need > m->arena_cap) {
        size_t cap = m->arena_cap ? m->arena_cap : 4096;
        while (cap < m->arena_len + need)
            cap *= 2;
        if (cap > UINT32_MAX)
            return SKP_ETOOBIG;
        char *a = skpx_realloc(m->arena, cap);
        if (!a)
            return SKP_ENOMEM;
        m->arena = a;
        m->arena_cap = cap;
    }
    *off = (uint32_t)m->arena_len;
    size_t len = 0;
    m->arena[m->arena_len] = '\0';
    jfr_str_append(s, m->arena + m->arena_len, &len, need);
    m->arena_len += len + 1;
    return SKP_OK;
}

static int64_t parse_i64(const char *s, bool *ok)
{
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    *ok = s[0] && end && *end == '\0';
    return v;
}

static skp_err add_type(struct mparse *st, const char *id_s, const char *name)
{
    struct jfr_meta *m = st->m;
    bool ok = false;
    int64_t id = id_s ? parse_i64(id_s, &ok) : 0;
    if (!ok || !name)
        return jfr_fail(st->err, 0, "metadata: class without a numeric id or a name");
    if (m->n_types >= JFR_MAX_TYPES)
        return jfr_fail(st->err, 0, "metadata: more than %u types", JFR_MAX_TYPES);
    if (skpx_grow(&m->types, &m->cap_types, m->n_types + 1, sizeof(*m->types), 256))
        return SKP_ENOMEM;
    struct jfr_type *t = &m->types[m->n_types];
    memset(t, 0, sizeof(*t));
    t->id = (uint64_t)id;
    t->name = name;
    t->first_field = m->n_fields;
    bool inserted = false;
    skp_err err = jfr_map_put_new(&m->by_id, t->id, m->n_types, &inserted);
    if (err)
        return err;
    if (!inserted)
        return jfr_fail(st->err, 0, "metadata: type id %lld declared twice", (long long)id);
    st->cur_class = m->n_types++;
    return SKP_OK;
}

static skp_err add_field(struct mparse *st, const char *name, const char *cls, const char *pool,
                         const char *dim)
{
    struct jfr_meta *m = st->m;
    bool ok = false;
    int64_t tid = cls ? parse_i64(cls, &ok) : 0;
    if (!ok || !name)
        return jfr_fail(st->err, 0, "metadata: field without a name or a numeric class");
    if (m->n_fields >= JFR_MAX_FIELDS)
        return jfr_fail(st->err, 0, "metadata: more than %u fields", JFR_MAX_FIELDS);
    if (skpx_grow(&m->fields, &m->cap_fields, m->n_fields + 1, sizeof(*m->fields), 1024))
        return SKP_ENOMEM;
    struct jfr_field *f = &m->fields[m->n_fields++];
    memset(f, 0, sizeof(*f));
    f->name = name;
    f->type_id = (uint64_t)tid;
    f->is_pool = pool && strcmp(pool, "true") == 0;
    if (dim) {
        int64_t d = parse_i64(dim, &ok);
        if (!ok || d < 0 || d > 1)
            return jfr_fail(st->err, 0, "metadata: field %s has dimension %s (only 0 or 1)", name,
                            dim);
        f->is_array = d == 1;
    }
    m->types[st->cur_class].n_fields++;
    return SKP_OK;
}

static skp_err element(struct mparse *st, const char *name, unsigned depth, enum ctx parent)
{
    struct jfr_cursor *c = st->c;
    if (depth > JFR_MAX_ELEMENT_DEPTH)
        return jfr_fail(st->err, (uint64_t)(c->p - c->base),
                        "metadata: elements nested deeper than %u", JFR_MAX_ELEMENT_DEPTH);
    bool is_class = strcmp(name, "class") == 0;
    bool is_field = parent == CTX_CLASS && strcmp(name, "field") == 0;
    if (is_class && st->cur_class != UINT32_MAX)
        return jfr_fail(st->err, (uint64_t)(c->p - c->base), "metadata: class inside a class");
    int64_t n_attr = jfr_int(c, 4);
    if (c->bad || n_attr < 0 || (uint64_t)n_attr > jfr_left(c) / 2)
        return jfr_fail(st->err, (uint64_t)(c->p - c->base), "metadata: bad attribute count");
    const char *a_id = NULL, *a_name = NULL, *a_class = NULL, *a_pool = NULL, *a_dim = NULL;
    for (int64_t i = 0; i < n_attr; i++) {
        const char *k = str_at(st, jfr_int(c, 4));
        const char *v = str_at(st, jfr_int(c, 4));
        if (c->bad || !k || !v)
            return jfr_fail(st->err, (uint64_t)(c->p - c->base),
                            "metadata: attribute refers to a missing string");
        if (strcmp(k, "id") == 0)
            a_id = v;
        else if (strcmp(k, "name") == 0)
            a_name = v;
        else if (strcmp(k, "class") == 0)
            a_class = v;
        else if (strcmp(k, "constantPool") == 0)
            a_pool = v;
        else if (strcmp(k, "dimension") == 0)
            a_dim = v;
    }
    skp_err err = SKP_OK;
    if (is_class)
        err = add_type(st, a_id, a_name);
    else if (is_field)
        err = add_field(st, a_name, a_class, a_pool, a_dim);
    if (err)
        return err;
    int64_t n_child = jfr_int(c, 4);
    if (c->bad || n_child < 0 || (uint64_t)n_child > jfr_left(c) / 2)
        return jfr_fail(st->err, (uint64_t)(c->p - c->base), "metadata: bad child count");
    for (int64_t i = 0; i < n_child; i++) {
        const char *child = str_at(st, jfr_int(c, 4));
        if (c->bad || !child)
            return jfr_fail(st->err, (uint64_t)(c->p - c->base),
                            "metadata: element name refers to a missing string");
        /* Fields belong to the class directly above them only. */
        err = element(st, child, depth + 1, is_class ? CTX_CLASS : CTX_OTHER);
        if (err)
            return err;
    }
    if (is_class)
        st->cur_class = UINT32_MAX;
    return SKP_OK;
}

static void reset(struct jfr_meta *m)
{
    m->arena_len = 0;
    m->n_types = 0;
    m->n_fields = 0;
    skpx_u64map_clear(&m->by_id);
}

static skp_err finish(struct jfr_meta *m, struct jfr_error *err)
{
    for (uint32_t i = 0; i < m->n_types; i++) {
        struct jfr_type *t = &m->types[i];
        t->prim = JFR_PRIM_STRUCT;
        if (t->n_fields == 0) {
            for (size_t k = 0; k < sizeof(g_prims) / sizeof(g_prims[0]); k++)
                if (strcmp(t->name, g_prims[k].name) == 0)
                    t->prim = (uint8_t)g_prims[k].prim;
        }
    }
    for (uint32_t i = 0; i < m->n_fields; i++) {
        struct jfr_field *f = &m->fields[i];
        f->type_idx = jfr_meta_find_id(m, f->type_id);
        if (f->type_idx == UINT32_MAX)
            return jfr_fail(err, 0, "metadata: field %s has undeclared type id %llu", f->name,
                            (unsigned long long)f->type_id);
        f->role = JFR_R_NONE;
        for (size_t k = 0; k < sizeof(g_roles) / sizeof(g_roles[0]); k++) {
            if (strcmp(f->name, g_roles[k].name) == 0) {
                f->role = (uint8_t)g_roles[k].role;
                break;
            }
        }
    }
    return SKP_OK;
}

skp_err jfr_meta_parse(struct jfr_meta *m, struct jfr_cursor *c, struct jfr_error *err)
{
    reset(m);
    const uint8_t *start = c->p;
    uint64_t at = (uint64_t)(start - c->base);
    int64_t size = jfr_int(c, 4);
    int64_t type = jfr_long(c);
    if (c->bad || size <= 0 || (uint64_t)size > (uint64_t)(c->end - start))
        return jfr_fail(err, at, "metadata event size %lld does not fit the chunk",
                        (long long)size);
    if (type != 0)
        return jfr_fail(err, at, "expected the metadata event (type 0), found type %lld",
                        (long long)type);
    struct jfr_cursor ec = *c;
    ec.end = start + size;
    (void)jfr_long(&ec); /* start time */
    (void)jfr_long(&ec); /* duration */
    (void)jfr_long(&ec); /* metadata id */
    int64_t n_str = jfr_int(&ec, 4);
    if (ec.bad || n_str < 0 || (uint64_t)n_str > jfr_left(&ec) || n_str > JFR_MAX_META_STRINGS)
        return jfr_fail(err, at, "metadata: bad string count %lld", (long long)n_str);
    struct mparse st = {.m = m, .c = &ec, .err = err, .cur_class = UINT32_MAX};
    st.str_off = skpx_malloc(((size_t)n_str + 1) * sizeof(uint32_t));
    if (!st.str_off)
        return SKP_ENOMEM;
    skp_err e = SKP_OK;
    for (int64_t i = 0; i < n_str; i++) {
        struct jfr_str s;
        jfr_str_read(&ec, &s);
        if (ec.bad || s.enc == JFR_STR_POOL) {
            e = jfr_fail(err, (uint64_t)(ec.p - ec.base), "metadata: string %lld is malformed",
                         (long long)i);
            goto out;
        }
        e = arena_add(m, &s, &st.str_off[i]);
        if (e)
            goto out;
    }
    st.n_str = (uint32_t)n_str;
    const char *root = str_at(&st, jfr_int(&ec, 4));
    if (ec.bad || !root) {
        e = jfr_fail(err, (uint64_t)(ec.p - ec.base), "metadata: root element has no name");
        goto out;
    }
    /* Names were copied into the arena before any element refers to them, so the type and
     * field name pointers taken below stay valid (the arena no longer moves). */
    e = element(&st, root, 0, CTX_OTHER);
    if (e)
        goto out;
    if (err && e == SKP_OK)
        err->msg[0] = '\0';
    e = finish(m, err);
    if (e)
        goto out;
    c->p = start + size;
out:
    if (e == SKP_EINVAL && err && err->offset == 0)
        err->offset = (uint64_t)(ec.p - ec.base);
    skpx_free(st.str_off);
    return e;
}

void jfr_meta_cleanup(struct jfr_meta *m)
{
    SKPX_FREE_ALL(m->arena, m->types, m->fields);
    skpx_u64map_cleanup(&m->by_id);
    memset(m, 0, sizeof(*m));
}

uint32_t jfr_meta_find_id(const struct jfr_meta *m, uint64_t id)
{
    uint64_t v = 0;
    return skpx_u64map_get(&m->by_id, id, &v) ? (uint32_t)v : UINT32_MAX;
}

uint32_t jfr_meta_find_name(const struct jfr_meta *m, const char *name)
{
    for (uint32_t i = 0; i < m->n_types; i++)
        if (strcmp(m->types[i].name, name) == 0)
            return i;
    return UINT32_MAX;
}

/* ---- values ---- */

static void read_one(const struct jfr_meta *m, const struct jfr_field *f, struct jfr_cursor *c,
                     unsigned depth, struct jfr_val *out)
{
    int64_t v = 0;
    if (f->is_pool) {
        v = jfr_long(c);
    } else {
        const struct jfr_type *t = &m->types[f->type_idx];
        switch ((enum jfr_prim)t->prim) {
        case JFR_PRIM_BOOLEAN:
            v = jfr_u8(c) != 0;
            break;
        case JFR_PRIM_BYTE:
            v = (int8_t)jfr_u8(c);
            break;
        /* Compressed or not, the bytes carry the value's two's complement in its width: an int
         * of -1 (a frame with no line) arrives as 0xffffffff. */
        case JFR_PRIM_CHAR:
            v = (uint16_t)jfr_int(c, 2);
            break;
        case JFR_PRIM_SHORT:
            v = (int16_t)jfr_int(c, 2);
            break;
        case JFR_PRIM_INT:
            v = (int32_t)(uint32_t)jfr_int(c, 4);
            break;
        case JFR_PRIM_LONG:
            v = jfr_long(c);
            break;
        case JFR_PRIM_FLOAT:
            v = jfr_be(c, 4);
            break;
        case JFR_PRIM_DOUBLE:
            v = jfr_be(c, 8);
            break;
        case JFR_PRIM_STRING:
            if (out) {
                jfr_str_read(c, &out->s);
                out->has = true;
                out->i = 0;
            } else {
                struct jfr_str s;
                jfr_str_read(c, &s);
            }
            return;
        case JFR_PRIM_STRUCT:
            if (depth >= JFR_MAX_VALUE_DEPTH) {
                c->bad = true;
                return;
            }
            for (uint32_t i = 0; i < t->n_fields && !c->bad; i++)
                jfr_value_read(m, &m->fields[t->first_field + i], c, depth + 1, NULL);
            return;
        }
    }
    if (out) {
        out->has = true;
        out->i = v;
        out->s.enc = JFR_STR_NULL;
    }
}

void jfr_value_read(const struct jfr_meta *m, const struct jfr_field *f, struct jfr_cursor *c,
                    unsigned depth, struct jfr_val *out)
{
    if (out) {
        out->is_pool = f->is_pool;
        out->type_idx = f->type_idx;
    }
    if (!f->is_array) {
        read_one(m, f, c, depth, out);
        return;
    }
    int64_t n = jfr_int(c, 4);
    /* Every element takes at least one byte unless it is an empty struct; an empty struct
     * array may claim any count, so bound it by what is left too (it costs no reads). */
    if (c->bad || n < 0 || (uint64_t)n > jfr_left(c)) {
        c->bad = true;
        return;
    }
    if (out) {
        out->has = true;
        out->array_pos = c->p;
        out->array_n = (uint32_t)n;
    }
    const struct jfr_type *t = &m->types[f->type_idx];
    if (!f->is_pool && t->prim == JFR_PRIM_STRUCT && t->n_fields == 0)
        return;
    for (int64_t i = 0; i < n && !c->bad; i++)
        read_one(m, f, c, depth, NULL);
}

void jfr_struct_read(const struct jfr_meta *m, uint32_t type_idx, struct jfr_cursor *c,
                     unsigned depth, struct jfr_val *vals)
{
    for (unsigned r = 0; r < JFR_R_COUNT; r++)
        vals[r].has = false;
    const struct jfr_type *t = &m->types[type_idx];
    for (uint32_t i = 0; i < t->n_fields && !c->bad; i++) {
        const struct jfr_field *f = &m->fields[t->first_field + i];
        jfr_value_read(m, f, c, depth, f->role ? &vals[f->role] : NULL);
    }
}
