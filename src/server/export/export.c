/* export.c - format selection and the pieces every exporter shares: the self-count rule and a
 * non-recursive depth-first walk over struct analysis.
 * The formats themselves live in export_pprof.c, export_collapsed.c, export_speedscope.c and
 * export_html.c; EXPORT_JSON reuses the analyzer's own serialisation so it is byte-for-byte
 * what the HTTP API returns. Pure functions, single-threaded. */
#include "server/export/export.h"

#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/grow.h"
#include "server/export/export_int.h"

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

/* ---- interned strings ---- */

skp_err export_intern_get(struct export_intern *in, const char *s, uint32_t *id)
{
    if (!s)
        s = "";
    if (skpx_strmap_get(&in->map, s, id))
        return SKP_OK;
    if (in->map.n >= UINT32_MAX)
        return SKP_ETOOBIG;
    uint32_t next = (uint32_t)in->map.n;
    skp_err err = skpx_grow(&in->order, &in->order_cap, in->map.n + 1, sizeof(*in->order), 256);
    if (!err)
        err = skpx_strmap_put(&in->map, s, next);
    if (err)
        return err;
    /* The map owns its copy of the key; order[] points at it. */
    (void)skpx_strmap_find(&in->map, s, id, &in->order[next]);
    in->n = in->map.n;
    return SKP_OK;
}

void export_intern_cleanup(struct export_intern *in)
{
    skpx_strmap_cleanup(&in->map);
    skpx_free(in->order);
    in->order = NULL;
    in->order_cap = in->n = 0;
}

/* ---- JSON strings ---- */

/* Length of the valid UTF-8 sequence at p (1-4), or 0 if the bytes there are not one. */
static size_t utf8_seq_len(const unsigned char *p)
{
    if (p[0] < 0x80)
        return 1;
    size_t n = (p[0] & 0xE0) == 0xC0   ? 2
               : (p[0] & 0xF0) == 0xE0 ? 3
               : (p[0] & 0xF8) == 0xF0 ? 4
                                       : 0;
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
    struct skpx_buf *b = ud;
    skpx_buf_put(b, p, n);
    return b->err ? -1 : 0;
}

/* ---- dispatch ---- */

skp_err export_render_pprof_labelled(const struct export_part *parts, size_t n_parts,
                                     const struct export_meta *meta, uint8_t **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    if (!parts || n_parts == 0)
        return SKP_EINVAL;
    for (size_t i = 0; i < n_parts; i++)
        if (!parts[i].a)
            return SKP_EINVAL;
    struct export_meta none = {0};
    struct skpx_buf b;
    skpx_buf_init(&b, EXPORT_MAX_OUTPUT_BYTES);
    skp_err err = export_render_pprof_parts(parts, n_parts, meta ? meta : &none, &b);
    if (err) {
        skpx_buf_cleanup(&b);
        return err;
    }
    return skpx_buf_take(&b, out, out_len);
}

skp_err export_render(const struct analysis *a, enum export_format f,
                      const struct export_meta *meta, uint8_t **out, size_t *out_len)
{
    struct skpx_buf b;
    struct export_meta none = {0};
    skp_err err = SKP_OK;

    *out = NULL;
    *out_len = 0;
    if (!a)
        return SKP_EINVAL;
    skpx_buf_init(&b, EXPORT_MAX_OUTPUT_BYTES);
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
        skpx_buf_cleanup(&b);
        return err;
    }
    return skpx_buf_take(&b, out, out_len);
}
