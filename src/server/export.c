/* export.c - format selection and the pieces every exporter shares: the bounded output buffer,
 * the self-count rule and a non-recursive depth-first walk over struct analysis.
 * The formats themselves live in export_pprof.c, export_collapsed.c, export_speedscope.c and
 * export_html.c; EXPORT_JSON reuses the analyzer's own serialisation so it is byte-for-byte
 * what the HTTP API returns. Pure functions, single-threaded. */
#include "server/export.h"

#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "server/export_int.h"

static const struct {
    const char *name;
    enum export_format format;
    const char *content_type;
    const char *ext;
} g_formats[] = {
    {"pprof", EXPORT_PPROF, "application/octet-stream", "pb.gz"},
    {"collapsed", EXPORT_COLLAPSED, "text/plain; charset=utf-8", "collapsed.txt"},
    {"speedscope", EXPORT_SPEEDSCOPE, "application/json", "speedscope.json"},
    {"html", EXPORT_HTML, "text/html; charset=utf-8", "html"},
    {"json", EXPORT_JSON, "application/json", "json"},
};

skp_err export_format_parse(const char *s, enum export_format *out)
{
    *out = EXPORT_JSON;
    if (!s)
        return SKP_EINVAL;
    for (size_t i = 0; i < sizeof(g_formats) / sizeof(g_formats[0]); i++) {
        if (strcmp(s, g_formats[i].name) == 0) {
            *out = g_formats[i].format;
            return SKP_OK;
        }
    }
    return SKP_EINVAL;
}

const char *export_content_type(enum export_format f)
{
    for (size_t i = 0; i < sizeof(g_formats) / sizeof(g_formats[0]); i++)
        if (g_formats[i].format == f)
            return g_formats[i].content_type;
    return "application/octet-stream";
}

const char *export_file_ext(enum export_format f)
{
    for (size_t i = 0; i < sizeof(g_formats) / sizeof(g_formats[0]); i++)
        if (g_formats[i].format == f)
            return g_formats[i].ext;
    return "bin";
}

/* ---- buffer ---- */

void export_buf_put(struct export_buf *b, const void *p, size_t n)
{
    if (b->err || n == 0)
        return;
    if (n > EXPORT_MAX_OUTPUT_BYTES - b->len) {
        b->err = SKP_ETOOBIG;
        return;
    }
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        if (cap > EXPORT_MAX_OUTPUT_BYTES)
            cap = EXPORT_MAX_OUTPUT_BYTES;
        uint8_t *d = skpx_realloc(b->data, cap);
        if (!d) {
            b->err = SKP_ENOMEM;
            return;
        }
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void export_buf_puts(struct export_buf *b, const char *s)
{
    export_buf_put(b, s, strlen(s));
}

void export_buf_printf(struct export_buf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0) {
        if (!b->err)
            b->err = SKP_EINVAL;
        return;
    }
    if ((size_t)n < sizeof(small)) {
        export_buf_put(b, small, (size_t)n);
        return;
    }
    char *big = skpx_malloc((size_t)n + 1);
    if (!big) {
        if (!b->err)
            b->err = SKP_ENOMEM;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    export_buf_put(b, big, (size_t)n);
    skpx_free(big);
}

skp_err export_buf_take(struct export_buf *b, uint8_t **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    if (b->err) {
        skp_err err = b->err;
        export_buf_cleanup(b);
        return err;
    }
    if (!b->data) {
        /* An empty export is still a valid (zero-length) buffer the caller frees. */
        b->data = skpx_malloc(1);
        if (!b->data)
            return SKP_ENOMEM;
    }
    *out = b->data;
    *out_len = b->len;
    b->data = NULL;
    b->len = b->cap = 0;
    return SKP_OK;
}

void export_buf_cleanup(struct export_buf *b)
{
    skpx_free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* ---- interned strings ---- */


static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

static skp_err intern_grow(struct export_intern *in)
{
    size_t cap = in->cap ? in->cap * 2 : 256;
    const char **keys = skpx_calloc(cap, sizeof(*keys));
    uint32_t *ids = skpx_calloc(cap, sizeof(*ids));
    if (!keys || !ids) {
        skpx_free(keys);
        skpx_free(ids);
        return SKP_ENOMEM;
    }
    for (size_t i = 0; i < in->cap; i++) {
        if (!in->keys[i])
            continue;
        size_t j = fnv1a(in->keys[i]) & (cap - 1);
        while (keys[j])
            j = (j + 1) & (cap - 1);
        keys[j] = in->keys[i];
        ids[j] = in->ids[i];
    }
    skpx_free(in->keys);
    skpx_free(in->ids);
    in->keys = keys;
    in->ids = ids;
    in->cap = cap;
    return SKP_OK;
}

skp_err export_intern_get(struct export_intern *in, const char *s, uint32_t *id)
{
    if (!s)
        s = "";
    if ((in->n + 1) * 2 > in->cap) {
        skp_err err = intern_grow(in);
        if (err)
            return err;
    }
    size_t j = fnv1a(s) & (in->cap - 1);
    while (in->keys[j]) {
        if (strcmp(in->keys[j], s) == 0) {
            *id = in->ids[j];
            return SKP_OK;
        }
        j = (j + 1) & (in->cap - 1);
    }
    if (in->n == in->order_cap) {
        size_t oc = in->order_cap ? in->order_cap * 2 : 256;
        const char **o = skpx_realloc(in->order, oc * sizeof(*o));
        if (!o)
            return SKP_ENOMEM;
        in->order = o;
        in->order_cap = oc;
    }
    in->keys[j] = s;
    in->ids[j] = (uint32_t)in->n;
    in->order[in->n] = s;
    *id = (uint32_t)in->n++;
    return SKP_OK;
}

void export_intern_cleanup(struct export_intern *in)
{
    skpx_free(in->keys);
    skpx_free(in->ids);
    skpx_free(in->order);
}

/* ---- JSON strings ---- */

/* Length of the valid UTF-8 sequence at p (1-4), or 0 if the bytes there are not one. */
static size_t utf8_seq_len(const unsigned char *p)
{
    if (p[0] < 0x80)
        return 1;
    size_t n = (p[0] & 0xE0) == 0xC0 ? 2 : (p[0] & 0xF0) == 0xE0 ? 3 : (p[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || (n == 2 && p[0] < 0xC2) || (n == 4 && p[0] > 0xF4))
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80)
            return 0;
    if (n == 3 && ((p[0] == 0xE0 && p[1] < 0xA0) || (p[0] == 0xED && p[1] >= 0xA0)))
        return 0; /* overlong or surrogate */
    if (n == 4 && ((p[0] == 0xF0 && p[1] < 0x90) || (p[0] == 0xF4 && p[1] >= 0x90)))
        return 0;
    return n;
}

json_t *export_json_string(const char *s)
{
    if (!s)
        s = "";
    json_t *j = json_string(s);
    if (j)
        return j;
    size_t len = strlen(s);
    char *copy = skpx_malloc(len + 1);
    if (!copy)
        return NULL;
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0;
    while (*p) {
        size_t n = utf8_seq_len(p);
        if (n == 0) {
            copy[o++] = '?';
            p++;
        } else {
            memcpy(copy + o, p, n);
            o += n;
            p += n;
        }
    }
    copy[o] = 0;
    j = json_string(copy);
    skpx_free(copy);
    return j;
}

/* ---- tree helpers ---- */

uint64_t export_node_self_count(const struct analysis_tree *t, const struct analysis_node *n)
{
    uint64_t children = 0;
    uint32_t c = n->first_child;
    size_t guard = 0;
    while (c != UINT32_MAX && c < t->n_nodes && guard++ < t->n_nodes) {
        children += t->nodes[c].count;
        c = t->nodes[c].next_sibling;
    }
    return children >= n->count ? 0 : n->count - children;
}

int export_period_ms(const struct export_meta *meta)
{
    if (meta && meta->dump_period_ms > 0)
        return meta->dump_period_ms;
    return EXPORT_DEFAULT_DUMP_PERIOD_MS;
}

skp_err export_walk(const struct analysis *a, export_visit_cb cb, void *ud)
{
    skp_err err = SKP_OK;
    const struct analysis_node **path = NULL;

    if (!a || a->n_trees == 0)
        return SKP_OK;
    path = skpx_calloc(EXPORT_MAX_DEPTH, sizeof(*path));
    if (!path)
        return SKP_ENOMEM;
    for (size_t ti = 0; ti < a->n_trees; ti++) {
        const struct analysis_tree *t = &a->trees[ti];
        if (t->n_nodes == 0 || !t->nodes)
            continue;
        size_t visited = 0;
        size_t depth = 0;
        path[0] = &t->nodes[0];
        for (;;) {
            if (++visited > t->n_nodes) {
                err = SKP_EINVAL; /* a cycle in first_child/next_sibling */
                goto out;
            }
            err = cb(ud, t, path, depth);
            if (err)
                goto out;
            const struct analysis_node *n = path[depth];
            if (n->first_child != UINT32_MAX && depth + 1 < EXPORT_MAX_DEPTH) {
                if (n->first_child >= t->n_nodes) {
                    err = SKP_EINVAL;
                    goto out;
                }
                path[++depth] = &t->nodes[n->first_child];
                continue;
            }
            /* No child to enter: move to the next sibling, climbing as needed. The root's
             * siblings are never followed (each tree has exactly one root). */
            for (;;) {
                if (depth == 0)
                    goto tree_done;
                uint32_t sib = path[depth]->next_sibling;
                if (sib != UINT32_MAX) {
                    if (sib >= t->n_nodes) {
                        err = SKP_EINVAL;
                        goto out;
                    }
                    path[depth] = &t->nodes[sib];
                    break;
                }
                depth--;
            }
        }
    tree_done:;
    }
out:
    skpx_free(path);
    return err;
}

static int dump_to_buf(const char *p, size_t n, void *ud)
{
    struct export_buf *b = ud;
    export_buf_put(b, p, n);
    return b->err ? -1 : 0;
}

/* ---- dispatch ---- */

skp_err export_render(const struct analysis *a, enum export_format f,
                      const struct export_meta *meta, uint8_t **out, size_t *out_len)
{
    struct export_buf b = {0};
    struct export_meta none = {0};
    skp_err err = SKP_OK;

    *out = NULL;
    *out_len = 0;
    if (!a)
        return SKP_EINVAL;
    if (!meta)
        meta = &none;
    switch (f) {
    case EXPORT_PPROF:
        err = export_render_pprof(a, meta, &b);
        break;
    case EXPORT_COLLAPSED:
        err = export_render_collapsed(a, meta, &b);
        break;
    case EXPORT_SPEEDSCOPE:
        err = export_render_speedscope(a, meta, &b);
        break;
    case EXPORT_HTML:
        err = export_render_html(a, meta, &b);
        break;
    case EXPORT_JSON: {
        json_t *j = analysis_to_json(a);
        if (!j) {
            err = SKP_ENOMEM;
            break;
        }
        if (json_dump_callback(j, dump_to_buf, &b, JSON_COMPACT) != 0 && !b.err)
            b.err = SKP_ENOMEM;
        json_decref(j);
        break;
    }
    default:
        err = SKP_EINVAL;
        break;
    }
    if (err) {
        export_buf_cleanup(&b);
        return err;
    }
    return export_buf_take(&b, out, out_len);
}
