/* export.c - format selection and the pieces every exporter shares: the self-count rule and a
 * non-recursive depth-first walk over struct analysis.
 * The formats themselves live in export_pprof.c, export_collapsed.c, export_speedscope.c and
 * export_html.c; EXPORT_JSON reuses the analyzer's own serialisation so it is byte-for-byte
 * what the HTTP API returns. Pure functions, single-threaded. */
#include "server/export/export.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/grow.h"
#include "common/map.h"
#include "common/sat.h"
#include "server/export/export_int.h"

static skp_err render_json(const struct analysis *a, const struct export_meta *m,
                           struct skpx_buf *b);

struct format_info {
    const char *name;
    enum export_format format;
    const char *content_type;
    const char *ext;
    skp_err (*render)(const struct analysis *a, const struct export_meta *m, struct skpx_buf *b);
};

static const struct format_info g_formats[] = {
    {"pprof", EXPORT_PPROF, "application/octet-stream", "pb.gz", export_render_pprof},
    {"collapsed", EXPORT_COLLAPSED, "text/plain; charset=utf-8", "collapsed.txt",
     export_render_collapsed},
    {"speedscope", EXPORT_SPEEDSCOPE, "application/json", "speedscope.json",
     export_render_speedscope},
    {"html", EXPORT_HTML, "text/html; charset=utf-8", "html", export_render_html},
    {"json", EXPORT_JSON, "application/json", "json", render_json},
};

/* The row of format f; NULL for a value that is no format. */
static const struct format_info *format_info(enum export_format f)
{
    for (size_t i = 0; i < sizeof(g_formats) / sizeof(g_formats[0]); i++)
        if (g_formats[i].format == f)
            return &g_formats[i];
    return NULL;
}

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
    const struct format_info *fi = format_info(f);
    return fi ? fi->content_type : "application/octet-stream";
}

const char *export_file_ext(enum export_format f)
{
    const struct format_info *fi = format_info(f);
    return fi ? fi->ext : "bin";
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

/* ---- deep stacks (issue 25 #10) ----
 * A stack deeper than EXPORT_MAX_DEPTH used to come out empty: the walk stopped at that depth,
 * where every node's self count is 0 (its children hold the samples). Such trees are rebuilt
 * first: a sample whose stack has d > EXPORT_MAX_DEPTH frames keeps its innermost
 * EXPORT_MAX_DEPTH - 1 frames under a root marker "(truncated N frames)" (N = the outer frames
 * cut off); shallower samples keep their stacks. Counts and durations are the samples' own
 * (self) values summed up each rebuilt path, so totals do not change. */

#define NO_IDX UINT32_MAX

/* The deepest path of t (frames), or 0 for a malformed tree (the walk reports it). */
static size_t tree_depth(const struct analysis_tree *t, uint32_t **stack, size_t *cap)
{
    size_t top = 0, deepest = 0, visited = 0;
    if (t->n_nodes == 0 || !t->nodes)
        return 0;
    if (skpx_grow(stack, cap, 1, sizeof(**stack), 64))
        return 0;
    (*stack)[top++] = 0; /* the index of the node whose subtree is next; depth = position */
    /* Iterative DFS keeping the path: stack[i] is the node at depth i. */
    for (;;) {
        if (++visited > t->n_nodes)
            return 0;
        if (top > deepest)
            deepest = top;
        const struct analysis_node *n = &t->nodes[(*stack)[top - 1]];
        if (n->first_child != NO_IDX) {
            if (n->first_child >= t->n_nodes || skpx_grow(stack, cap, top + 1, sizeof(**stack), 64))
                return 0;
            (*stack)[top++] = n->first_child;
            continue;
        }
        for (;;) {
            if (top == 1)
                return deepest;
            uint32_t sib = t->nodes[(*stack)[top - 1]].next_sibling;
            if (sib != NO_IDX) {
                if (sib >= t->n_nodes)
                    return 0;
                (*stack)[top - 1] = sib;
                break;
            }
            top--;
        }
    }
}

struct rebuilt {
    struct analysis_node *nodes; /* one pool for every rebuilt tree */
    size_t n, cap;
    struct skpx_strmap sig_ids; /* signature -> id (for child lookups) */
    struct skpx_u64map child;   /* (parent + 1) << 32 | sig id -> pool index */
    char **markers;             /* owned "(truncated N frames)" strings */
    size_t n_markers, cap_markers;
    uint32_t *last_child; /* pool index -> its last child, for appending siblings */
    size_t cap_last;
};

static skp_err pool_child(struct rebuilt *r, uint32_t parent, const char *sig, uint32_t *out)
{
    uint32_t sid;
    const char *stored = NULL;
    if (!skpx_strmap_find(&r->sig_ids, sig, &sid, &stored)) {
        sid = (uint32_t)r->sig_ids.n;
        skp_err err = skpx_strmap_put(&r->sig_ids, sig, sid);
        if (err)
            return err;
        if (!skpx_strmap_find(&r->sig_ids, sig, &sid, &stored))
            return SKP_ENOMEM;
    }
    uint64_t key = ((uint64_t)(parent == NO_IDX ? 0 : parent + 1) << 32) | sid, v;
    if (skpx_u64map_get(&r->child, key, &v)) {
        *out = (uint32_t)v;
        return SKP_OK;
    }
    if (r->n >= NO_IDX - 1 || skpx_grow(&r->nodes, &r->cap, r->n + 1, sizeof(*r->nodes), 256) ||
        skpx_grow(&r->last_child, &r->cap_last, r->n + 1, sizeof(*r->last_child), 256))
        return SKP_ENOMEM;
    uint32_t idx = (uint32_t)r->n++;
    r->nodes[idx] = (struct analysis_node){.parent_id = parent, /* pool index until the end */
                                           .code_signature = stored,
                                           .first_child = NO_IDX,
                                           .next_sibling = NO_IDX};
    r->last_child[idx] = NO_IDX;
    if (parent != NO_IDX) {
        if (r->last_child[parent] == NO_IDX)
            r->nodes[parent].first_child = idx;
        else
            r->nodes[r->last_child[parent]].next_sibling = idx;
        r->last_child[parent] = idx;
    }
    skp_err err = skpx_u64map_put(&r->child, key, idx);
    if (err)
        return err;
    *out = idx;
    return SKP_OK;
}

static const char *marker(struct rebuilt *r, size_t cut)
{
    char text[48];
    snprintf(text, sizeof(text), "(truncated %zu frames)", cut);
    for (size_t i = 0; i < r->n_markers; i++)
        if (strcmp(r->markers[i], text) == 0)
            return r->markers[i];
    if (skpx_grow(&r->markers, &r->cap_markers, r->n_markers + 1, sizeof(*r->markers), 8))
        return NULL;
    char *m = skpx_strdup(text);
    if (m)
        r->markers[r->n_markers++] = m;
    return m;
}

/* Adds the sample values of path[0..depth] (node pointers) along its rebuilt path. */
static skp_err add_stack(struct rebuilt *r, const struct analysis_node *const *path, size_t depth,
                         uint64_t self, int64_t self_ms)
{
    size_t frames = depth + 1, first = 0;
    uint32_t at = NO_IDX;
    skp_err err = SKP_OK;
    if (frames > EXPORT_MAX_DEPTH) {
        first = frames - (EXPORT_MAX_DEPTH - 1);
        const char *m = marker(r, first);
        err = m ? pool_child(r, NO_IDX, m, &at) : SKP_ENOMEM;
    }
    for (size_t i = first; i <= depth && !err; i++)
        err = pool_child(r, at, path[i]->code_signature ? path[i]->code_signature : "", &at);
    if (err)
        return err;
    r->nodes[at].duration_child_excluded =
        skpx_sat_add_i64(r->nodes[at].duration_child_excluded, self_ms);
    for (uint32_t k = at; k != NO_IDX; k = r->nodes[k].parent_id) {
        r->nodes[k].count = r->nodes[k].count + self < self ? UINT64_MAX : r->nodes[k].count + self;
        r->nodes[k].duration = skpx_sat_add_i64(r->nodes[k].duration, self_ms);
    }
    return SKP_OK;
}

static void rebuilt_cleanup(struct rebuilt *r)
{
    skpx_free(r->nodes);
    skpx_free(r->last_child);
    skpx_strmap_cleanup(&r->sig_ids);
    skpx_u64map_cleanup(&r->child);
    for (size_t i = 0; i < r->n_markers; i++)
        skpx_free(r->markers[i]);
    skpx_free(r->markers);
}

/* The node after `cur` in a pre-order walk of the pool's tree under `root`; NO_IDX after the
 * last. */
static uint32_t preorder_next(const struct rebuilt *r, uint32_t root, uint32_t cur)
{
    if (r->nodes[cur].first_child != NO_IDX)
        return r->nodes[cur].first_child;
    while (cur != root && r->nodes[cur].next_sibling == NO_IDX)
        cur = r->nodes[cur].parent_id;
    return cur == root ? NO_IDX : r->nodes[cur].next_sibling;
}

/* Copies the pool's tree under `root` into t (nodes in pre-order, ids 1.., the walk's links). */
static skp_err pool_tree(const struct rebuilt *r, uint32_t root, struct analysis_tree *t,
                         uint32_t *map)
{
    size_t n = 0;
    /* Pre-order numbering: map[pool index] = position in t. */
    for (uint32_t cur = root; cur != NO_IDX; cur = preorder_next(r, root, cur))
        map[cur] = (uint32_t)n++;
    t->nodes = skpx_calloc(n, sizeof(*t->nodes));
    if (!t->nodes)
        return SKP_ENOMEM;
    t->n_nodes = n;
    for (uint32_t cur = root; cur != NO_IDX; cur = preorder_next(r, root, cur)) {
        const struct analysis_node *src = &r->nodes[cur];
        struct analysis_node *d = &t->nodes[map[cur]];
        *d = *src;
        d->id = map[cur] + 1;
        d->parent_id = cur == root ? 0 : map[src->parent_id] + 1;
        d->first_child = src->first_child == NO_IDX ? NO_IDX : map[src->first_child];
        d->next_sibling =
            cur == root || src->next_sibling == NO_IDX ? NO_IDX : map[src->next_sibling];
    }
    return SKP_OK;
}

/* The walk's callback that feeds add_stack with every node's own samples. */
static skp_err rebuild_visit(void *ud, const struct analysis_tree *t,
                             const struct analysis_node *const *path, size_t depth)
{
    struct rebuilt *r = ud;
    const struct analysis_node *n = path[depth];
    uint64_t self = export_node_self_count(t, n);
    int64_t self_ms = n->duration_child_excluded > 0 ? n->duration_child_excluded : 0;
    if (self == 0 && self_ms == 0)
        return SKP_OK;
    return add_stack(r, path, depth, self, self_ms);
}

static skp_err walk_depth(const struct analysis *a, size_t max_depth, export_visit_cb cb, void *ud);

/* *out: a copy of `a` whose trees are at most EXPORT_MAX_DEPTH deep (see above), or NULL when
 * `a` is already. Free with truncated_free. */
static skp_err truncate_deep(const struct analysis *a, struct analysis **out)
{
    *out = NULL;
    uint32_t *stack = NULL;
    size_t cap = 0;
    bool deep = false;
    for (size_t i = 0; i < a->n_trees && !deep; i++)
        deep = tree_depth(&a->trees[i], &stack, &cap) > EXPORT_MAX_DEPTH;
    skpx_free(stack);
    if (!deep)
        return SKP_OK;
    struct rebuilt r = {0};
    skp_err err = walk_depth(a, SIZE_MAX, rebuild_visit, &r);
    struct analysis *c = NULL;
    uint32_t *map = NULL;
    size_t n_roots = 0;
    for (size_t i = 0; i < r.n; i++)
        n_roots += r.nodes[i].parent_id == NO_IDX;
    if (!err) {
        c = skpx_calloc(1, sizeof(*c));
        map = skpx_calloc(r.n ? r.n : 1, sizeof(*map));
        if (c)
            c->trees = skpx_calloc(n_roots ? n_roots : 1, sizeof(*c->trees));
        if (!c || !map || !c->trees)
            err = SKP_ENOMEM;
    }
    for (size_t i = 0; i < r.n && !err; i++)
        if (r.nodes[i].parent_id == NO_IDX)
            err = pool_tree(&r, (uint32_t)i, &c->trees[c->n_trees++], map);
    skpx_free(map);
    if (!err) {
        /* The strings now live in the pool's maps: hand them over through _arena. */
        struct rebuilt *keep = skpx_malloc(sizeof(*keep));
        if (!keep) {
            err = SKP_ENOMEM;
        } else {
            skpx_free(r.nodes);
            skpx_free(r.last_child);
            skpx_u64map_cleanup(&r.child);
            memset(&r.child, 0, sizeof(r.child));
            r.nodes = NULL;
            r.last_child = NULL;
            *keep = r;
            c->_arena = keep;
            c->n_snapshots = a->n_snapshots;
            *out = c;
            return SKP_OK;
        }
    }
    rebuilt_cleanup(&r);
    if (c) {
        for (size_t i = 0; i < c->n_trees; i++)
            skpx_free(c->trees[i].nodes);
        skpx_free(c->trees);
        skpx_free(c);
    }
    return err;
}

static void truncated_free(struct analysis *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n_trees; i++)
        skpx_free(c->trees[i].nodes);
    skpx_free(c->trees);
    if (c->_arena) {
        rebuilt_cleanup(c->_arena);
        skpx_free(c->_arena);
    }
    skpx_free(c);
}

skp_err export_walk(const struct analysis *a, export_visit_cb cb, void *ud)
{
    if (!a || a->n_trees == 0)
        return SKP_OK;
    struct analysis *cut = NULL;
    skp_err err = truncate_deep(a, &cut);
    if (err)
        return err;
    err = walk_depth(cut ? cut : a, EXPORT_MAX_DEPTH, cb, ud);
    truncated_free(cut);
    return err;
}

/* The walk itself: nodes deeper than max_depth are not entered (SIZE_MAX: all). */
static skp_err walk_depth(const struct analysis *a, size_t max_depth, export_visit_cb cb, void *ud)
{
    skp_err err = SKP_OK;
    const struct analysis_node **path = NULL;
    size_t path_cap = 0;

    if (!a || a->n_trees == 0)
        return SKP_OK;
    if (skpx_grow(&path, &path_cap, 64, sizeof(*path), 64))
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
            if (n->first_child != UINT32_MAX && depth + 1 < max_depth) {
                if (n->first_child >= t->n_nodes) {
                    err = SKP_EINVAL;
                    goto out;
                }
                if (skpx_grow(&path, &path_cap, depth + 2, sizeof(*path), 64)) {
                    err = SKP_ENOMEM;
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

/* EXPORT_JSON: the analyzer's own serialisation, as the HTTP API returns it. */
static skp_err render_json(const struct analysis *a, const struct export_meta *m,
                           struct skpx_buf *b)
{
    (void)m;
    json_t *j = analysis_to_json(a);
    if (!j)
        return SKP_ENOMEM;
    if (json_dump_callback(j, dump_to_buf, b, JSON_COMPACT) != 0 && !b->err)
        b->err = SKP_ENOMEM;
    json_decref(j);
    return SKP_OK;
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

    *out = NULL;
    *out_len = 0;
    if (!a)
        return SKP_EINVAL;
    skpx_buf_init(&b, EXPORT_MAX_OUTPUT_BYTES);
    if (!meta)
        meta = &none;
    const struct format_info *fi = format_info(f);
    skp_err err = fi ? fi->render(a, meta, &b) : SKP_EINVAL;
    if (err) {
        skpx_buf_cleanup(&b);
        return err;
    }
    return skpx_buf_take(&b, out, out_len);
}
