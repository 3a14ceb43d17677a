/* jfr_tree.c - folds the samples of one JFR event kind into a trie and flattens it into
 * struct analysis (BFS order, ids 1..n per tree, one tree per root frame).
 *
 * Design: frames arrive interned (equal names ⇔ equal pointers, see jfr.h), so a child is
 * found through a hash on (parent node, name id). Each stack id is walked once: the node its
 * path ends at is memoised, and a sample only adds its weight to that node's self weight;
 * inclusive weights are summed bottom-up at the end (children always have higher indexes than
 * their parent). Allocation samples of the TLAB events and of jdk.ObjectAllocationSample go
 * to two separate tries, because a recording with both would count the same bytes twice; the
 * TLAB trie wins when it has any weight (it sees every TLAB, the other only a throttled
 * sample). */
#include "server/analysis/jfr_tree.h"

#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/grow.h"
#include "server/formats/jfr_int.h"

#define ROOT_MAIN 0u
#define ROOT_TLAB 1u
#define NO_NODE UINT32_MAX
#define JFR_TREE_MAX_NODES (1u << 26) /* 64 Mi nodes: far beyond any real recording */

struct tnode {
    const char *name;
    uint32_t parent;
    uint32_t first_child, next_sibling, last_child;
    uint64_t self;
    uint64_t total;
    uint64_t n_self; /* samples ending here */
};

struct thr {
    const char *name;
    uint64_t n, weight;
};

struct builder {
    struct jfr_analyze_opts opts;
    const char *thread_match; /* interned pointer equal to opts.thread, once seen */
    struct tnode *nodes;
    uint32_t n_nodes, cap_nodes;
    struct skpx_u64map child;    /* parent << 32 | name id → node */
    struct skpx_u64map name_ids; /* interned pointer → name id */
    uint32_t n_names;
    struct skpx_u64map stack_node[2]; /* stack id → node (per root) */
    struct skpx_u64map thread_idx;    /* interned thread pointer → index in thr */
    struct thr *thr;
    size_t n_thr, cap_thr;
    uint64_t n_samples[2]; /* samples folded under each root */
    struct jfr_summary *sum;
    const char *no_stack; /* "[no stack trace]" */
};

const char *jfr_kind_unit(enum jfr_kind k)
{
    switch (k) {
    case JFR_KIND_ALLOC:
    case JFR_KIND_LIVE:
        return "bytes";
    case JFR_KIND_LOCK:
        return "nanoseconds";
    default:
        return "samples";
    }
}

static skp_err new_node(struct builder *b, const char *name, uint32_t parent, uint32_t *out)
{
    if (b->n_nodes >= JFR_TREE_MAX_NODES)
        return SKP_ETOOBIG;
    if (b->n_nodes == b->cap_nodes) {
        uint32_t cap = b->cap_nodes ? b->cap_nodes * 2 : 1024;
        struct tnode *n = skpx_realloc(b->nodes, (size_t)cap * sizeof(*n));
        if (!n)
            return SKP_ENOMEM;
        b->nodes = n;
        b->cap_nodes = cap;
    }
    uint32_t id = b->n_nodes++;
    b->nodes[id] = (struct tnode){.name = name,
                                  .parent = parent,
                                  .first_child = NO_NODE,
                                  .next_sibling = NO_NODE,
                                  .last_child = NO_NODE};
    if (parent != NO_NODE) {
        struct tnode *p = &b->nodes[parent];
        if (p->last_child == NO_NODE)
            p->first_child = id;
        else
            b->nodes[p->last_child].next_sibling = id;
        p->last_child = id;
    }
    *out = id;
    return SKP_OK;
}

static skp_err child_of(struct builder *b, uint32_t parent, const char *name, uint32_t *out)
{
    uint64_t nid = 0;
    bool ins = false;
    if (!skpx_u64map_get(&b->name_ids, (uint64_t)(uintptr_t)name, &nid)) {
        nid = b->n_names++;
        skp_err err = jfr_map_put_new(&b->name_ids, (uint64_t)(uintptr_t)name, nid, &ins);
        if (err)
            return err;
    }
    uint64_t key = (uint64_t)parent << 32 | nid;
    uint64_t v = 0;
    if (skpx_u64map_get(&b->child, key, &v)) {
        *out = (uint32_t)v;
        return SKP_OK;
    }
    skp_err err = new_node(b, name, parent, out);
    if (err)
        return err;
    return jfr_map_put_new(&b->child, key, *out, &ins);
}

static skp_err count_thread(struct builder *b, const struct jfr_sample *s)
{
    if (!s->thread)
        return SKP_OK;
    uint64_t idx = 0;
    bool ins = false;
    if (!skpx_u64map_get(&b->thread_idx, (uint64_t)(uintptr_t)s->thread, &idx)) {
        if (skpx_grow(&b->thr, &b->cap_thr, b->n_thr + 1, sizeof(*b->thr), 64))
            return SKP_ENOMEM;
        idx = b->n_thr++;
        b->thr[idx] = (struct thr){.name = s->thread};
        skp_err err = jfr_map_put_new(&b->thread_idx, (uint64_t)(uintptr_t)s->thread, idx, &ins);
        if (err)
            return err;
    }
    b->thr[idx].n++;
    b->thr[idx].weight += s->weight;
    return SKP_OK;
}

static skp_err on_sample(void *ctx, const struct jfr_sample *s)
{
    struct builder *b = ctx;
    if ((unsigned)s->kind < JFR_KIND_COUNT) {
        b->sum->n_events[s->kind]++;
        b->sum->weight[s->kind] += s->weight;
    }
    if (s->kind != b->opts.kind)
        return SKP_OK;
    skp_err err = count_thread(b, s);
    if (err)
        return err;
    if (b->opts.thread) {
        if (!s->thread)
            return SKP_OK;
        if (s->thread != b->thread_match) {
            if (b->thread_match || strcmp(s->thread, b->opts.thread) != 0)
                return SKP_OK;
            b->thread_match = s->thread;
        }
    }
    if (b->opts.has_range &&
        (s->time_ms == 0 || s->time_ms < b->opts.from_ms || s->time_ms > b->opts.to_ms))
        return SKP_OK;
    unsigned r = s->kind == JFR_KIND_ALLOC && s->is_tlab ? ROOT_TLAB : ROOT_MAIN;
    uint32_t node = r;
    uint64_t v = 0;
    if (s->n_frames == 0) {
        err = child_of(b, r, b->no_stack, &node);
        if (err)
            return err;
    } else if (skpx_u64map_get(&b->stack_node[r], s->stack_id, &v)) {
        node = (uint32_t)v;
    } else {
        for (uint32_t i = 0; i < s->n_frames; i++) {
            err = child_of(b, node, s->frames[i], &node);
            if (err)
                return err;
        }
        bool ins = false;
        err = jfr_map_put_new(&b->stack_node[r], s->stack_id, node, &ins);
        if (err)
            return err;
    }
    if (s->object_class) {
        err = child_of(b, node, s->object_class, &node);
        if (err)
            return err;
    }
    b->nodes[node].self += s->weight;
    b->nodes[node].n_self++;
    b->n_samples[r]++;
    return SKP_OK;
}

static int cmp_thr(const void *a, const void *b)
{
    const struct thr *x = a, *y = b;
    if (x->weight != y->weight)
        return x->weight < y->weight ? 1 : -1;
    return strcmp(x->name, y->name);
}

static int cmp_root(const void *a, const void *b, void *nodes)
{
    const struct tnode *n = nodes;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (n[x].total != n[y].total)
        return n[x].total < n[y].total ? 1 : -1;
    return x < y ? -1 : 1;
}

/* Flattens the subtree under `root` into one analysis tree, names copied into arena. */
static skp_err flatten(struct builder *b, uint32_t root, uint32_t *queue, char *arena,
                       size_t *arena_off, struct analysis_tree *out)
{
    /* Count first, then BFS: out index i holds queue[i]. */
    size_t n = 0;
    queue[n++] = root;
    for (size_t i = 0; i < n; i++)
        for (uint32_t c = b->nodes[queue[i]].first_child; c != NO_NODE;
             c = b->nodes[c].next_sibling)
            queue[n++] = c;
    struct analysis_node *nodes = skpx_calloc(n, sizeof(*nodes));
    if (!nodes)
        return SKP_ENOMEM;
    bool lock = b->opts.kind == JFR_KIND_LOCK;
    /* Out index of each trie node, recorded in n_self's place is not possible (it is data),
     * so parents are found through the BFS property: a node's parent precedes it. */
    size_t parent_out = 0;
    for (size_t i = 0; i < n; i++) {
        const struct tnode *t = &b->nodes[queue[i]];
        size_t len = strlen(t->name);
        memcpy(arena + *arena_off, t->name, len + 1);
        struct analysis_node *o = &nodes[i];
        o->id = (uint32_t)(i + 1);
        o->code_signature = arena + *arena_off;
        *arena_off += len + 1;
        o->count = t->total;
        o->duration = lock ? (int64_t)(t->total / 1000000u) : 0;
        o->duration_child_excluded = lock ? (int64_t)(t->self / 1000000u) : 0;
        o->first_child = UINT32_MAX;
        o->next_sibling = UINT32_MAX;
        if (i == 0) {
            o->parent_id = 0;
            continue;
        }
        while (queue[parent_out] != t->parent)
            parent_out++;
        o->parent_id = (uint32_t)(parent_out + 1);
    }
    /* Links: children of one parent are contiguous in BFS order. */
    for (size_t i = n; i-- > 1;) {
        struct analysis_node *par = &nodes[nodes[i].parent_id - 1];
        nodes[i].next_sibling = par->first_child;
        par->first_child = (uint32_t)i;
    }
    out->nodes = nodes;
    out->n_nodes = n;
    return SKP_OK;
}

static skp_err finish(struct builder *b, struct analysis **out)
{
    *out = NULL;
    for (uint32_t i = b->n_nodes; i-- > 0;) {
        struct tnode *t = &b->nodes[i];
        t->total += t->self;
        if (t->parent != NO_NODE)
            b->nodes[t->parent].total += t->total;
    }
    uint32_t root = ROOT_MAIN;
    if (b->opts.kind == JFR_KIND_ALLOC) {
        bool tlab = b->nodes[ROOT_TLAB].total > 0;
        root = tlab ? ROOT_TLAB : ROOT_MAIN;
        b->sum->alloc_source = tlab ? "tlab" : "sample";
    }
    struct analysis *a = skpx_calloc(1, sizeof(*a));
    if (!a)
        return SKP_ENOMEM;
    size_t n_roots = 0, arena_len = 0;
    for (uint32_t c = b->nodes[root].first_child; c != NO_NODE; c = b->nodes[c].next_sibling)
        n_roots++;
    /* Only nodes under the chosen root are output; size the arena over all (an upper bound). */
    for (uint32_t i = 2; i < b->n_nodes; i++)
        arena_len += strlen(b->nodes[i].name) + 1;
    uint32_t *roots = skpx_malloc((n_roots + 1) * sizeof(*roots));
    uint32_t *queue = skpx_malloc(((size_t)b->n_nodes + 1) * sizeof(*queue));
    char *arena = skpx_malloc(arena_len + 1);
    a->trees = skpx_calloc(n_roots + 1, sizeof(*a->trees));
    skp_err err = SKP_OK;
    if (!roots || !queue || !arena || !a->trees) {
        skpx_free(arena);
        err = SKP_ENOMEM;
        goto out;
    }
    a->_arena = arena;
    size_t k = 0;
    for (uint32_t c = b->nodes[root].first_child; c != NO_NODE; c = b->nodes[c].next_sibling)
        roots[k++] = c;
    qsort_r(roots, n_roots, sizeof(*roots), cmp_root, b->nodes);
    size_t arena_off = 0;
    for (size_t i = 0; i < n_roots; i++) {
        err = flatten(b, roots[i], queue, arena, &arena_off, &a->trees[i]);
        if (err)
            goto out;
        a->n_trees++;
    }
    a->n_snapshots = b->n_samples[root];
out:
    skpx_free(roots);
    skpx_free(queue);
    if (err) {
        analysis_free(a);
        return err;
    }
    *out = a;
    return SKP_OK;
}

static skp_err summary_threads(struct builder *b)
{
    struct jfr_summary *s = b->sum;
    s->unit = jfr_kind_unit(b->opts.kind);
    if (!b->n_thr)
        return SKP_OK;
    qsort(b->thr, b->n_thr, sizeof(*b->thr), cmp_thr);
    size_t n = b->n_thr < JFR_SUMMARY_MAX_THREADS ? b->n_thr : JFR_SUMMARY_MAX_THREADS;
    s->threads = skpx_calloc(n, sizeof(*s->threads));
    if (!s->threads)
        return SKP_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        s->threads[i].name = skpx_strdup(b->thr[i].name);
        if (!s->threads[i].name)
            return SKP_ENOMEM;
        s->threads[i].n_events = b->thr[i].n;
        s->threads[i].weight = b->thr[i].weight;
        s->n_threads++;
    }
    s->n_threads_dropped = b->n_thr - n;
    return SKP_OK;
}

static void builder_cleanup(struct builder *b)
{
    skpx_free(b->nodes);
    skpx_free(b->thr);
    skpx_u64map_cleanup(&b->child);
    skpx_u64map_cleanup(&b->name_ids);
    skpx_u64map_cleanup(&b->stack_node[0]);
    skpx_u64map_cleanup(&b->stack_node[1]);
    skpx_u64map_cleanup(&b->thread_idx);
}

struct jfr_tree {
    struct builder b;
    struct jfr_parser *p;
    struct jfr_summary *sum;
};

skp_err jfr_tree_new(const struct jfr_analyze_opts *opts, struct jfr_summary *summary,
                     struct jfr_tree **out)
{
    *out = NULL;
    memset(summary, 0, sizeof(*summary));
    struct jfr_tree *t = skpx_calloc(1, sizeof(*t));
    if (!t)
        return SKP_ENOMEM;
    t->sum = summary;
    t->b.sum = summary;
    t->b.no_stack = "[no stack trace]";
    if (opts)
        t->b.opts = *opts;
    struct jfr_parse_opts po = {.with_lines = !t->b.opts.without_lines,
                                .max_chunk_bytes = t->b.opts.max_chunk_bytes};
    uint32_t r = 0;
    skp_err e = (unsigned)t->b.opts.kind >= JFR_KIND_COUNT ? SKP_EINVAL : SKP_OK;
    if (!e)
        e = new_node(&t->b, "", NO_NODE, &r);
    if (!e)
        e = new_node(&t->b, "", NO_NODE, &r);
    if (!e)
        e = jfr_parser_new(&po, on_sample, &t->b, &t->p);
    if (e) {
        jfr_tree_free(t);
        return e;
    }
    *out = t;
    return SKP_OK;
}

skp_err jfr_tree_add_mem(struct jfr_tree *t, const uint8_t *buf, size_t len, struct jfr_error *err)
{
    skp_err e = jfr_parser_parse_mem(t->p, buf, len, err);
    t->sum->n_chunks = jfr_parser_chunks(t->p);
    return e;
}

skp_err jfr_tree_add_file(struct jfr_tree *t, FILE *f, struct jfr_error *err)
{
    skp_err e = jfr_parser_parse_file(t->p, f, err);
    t->sum->n_chunks = jfr_parser_chunks(t->p);
    return e;
}

skp_err jfr_tree_finish(struct jfr_tree *t, struct analysis **out)
{
    *out = NULL;
    skp_err e = summary_threads(&t->b);
    if (!e)
        e = finish(&t->b, out);
    return e;
}

void jfr_tree_free(struct jfr_tree *t)
{
    if (!t)
        return;
    jfr_parser_free(t->p);
    builder_cleanup(&t->b);
    skpx_free(t);
}

skp_err jfr_analyze_mem(const uint8_t *buf, size_t len, const struct jfr_analyze_opts *opts,
                        struct analysis **out, struct jfr_summary *summary, struct jfr_error *err)
{
    *out = NULL;
    struct jfr_summary local;
    struct jfr_summary *s = summary ? summary : &local;
    struct jfr_tree *t = NULL;
    skp_err e = jfr_tree_new(opts, s, &t);
    if (!e)
        e = jfr_tree_add_mem(t, buf, len, err);
    if (!e)
        e = jfr_tree_finish(t, out);
    jfr_tree_free(t);
    if (e || s == &local)
        jfr_summary_cleanup(s);
    return e;
}

skp_err jfr_analyze_file(const char *path, const struct jfr_analyze_opts *opts,
                         struct analysis **out, struct jfr_summary *summary, struct jfr_error *err)
{
    *out = NULL;
    struct jfr_summary local;
    struct jfr_summary *s = summary ? summary : &local;
    memset(s, 0, sizeof(*s));
    FILE *f = fopen(path, "rb");
    if (!f)
        return SKP_ENOTFOUND;
    struct jfr_tree *t = NULL;
    skp_err e = jfr_tree_new(opts, s, &t);
    if (!e)
        e = jfr_tree_add_file(t, f, err);
    if (!e)
        e = jfr_tree_finish(t, out);
    jfr_tree_free(t);
    fclose(f);
    if (e || s == &local)
        jfr_summary_cleanup(s);
    return e;
}

void jfr_summary_cleanup(struct jfr_summary *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_threads; i++)
        skpx_free(s->threads[i].name);
    skpx_free(s->threads);
    s->threads = NULL;
    s->n_threads = 0;
}
