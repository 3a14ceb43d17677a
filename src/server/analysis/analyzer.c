/* analyzer.c - stored snapshots → stack trees (spec §5.6, with OAP's cross-segment defects
 * fixed). Single-threaded; all memory is per call.
 *
 * Design: samples are (segment, sequence, time, stack id). They are sorted by (segment,
 * sequence) and de-duplicated on that pair, so overlapping query windows count once and two
 * segments with equal sequence numbers stay apart. The trie is built once per distinct stack
 * id (the root→leaf node path is memoised), grouped into one tree per root frame, children
 * found through a (parent, frame) hash. Frame ids are unique per signature in the store, so
 * matching children by frame id is matching by signature. Durations are computed in the same
 * single pass: each node remembers the (segment, sequence, time) of the last sample that
 * reached it; a sample with the same segment and the next sequence extends the run and adds
 * its time step, which sums to Σ(last.time − first.time) over runs without per-node lists. */
#include "server/analysis/analyzer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/grow.h"
#include "common/map.h"
#include "common/sat.h"
#include "server/formats/utf8.h"

#define NO_NODE UINT32_MAX
#define PATH_LEN_BITS 24 /* memo value = offset << 24 | length (STORE_MAX_FRAMES fits) */

struct sample {
    uint32_t seg;
    int32_t seq;
    int64_t time;
    uint32_t stack;
};

struct work_node {
    uint32_t frame;
    uint32_t parent;
    uint32_t first_child, last_child, next_sibling;
    uint32_t out; /* index in the output tree (flatten) */
    uint64_t count;
    int64_t duration;
    int64_t last_time;
    uint32_t last_seg;
    int32_t last_seq;
    bool has_last;
};

struct actx {
    struct store *st;
    skp_err err; /* first failure inside a scan callback */
    struct sample *samples;
    size_t n_samples, cap_samples;

    struct work_node *nodes;
    size_t n_nodes, cap_nodes;
    struct skpx_u64map root_by_frame; /* frame id → root node */
    struct skpx_u64map child_of;      /* parent node << 32 | frame id → child node */
    uint32_t *roots;                  /* root nodes in first-seen order */
    size_t n_roots, cap_roots;
    struct skpx_u64map path_by_stack; /* stack id → offset << 24 | length in paths */
    uint32_t *paths;
    size_t n_paths, cap_paths;

    uint64_t used; /* samples folded with a non-empty stack */
    /* streaming (stream_cb) */
    uint64_t max;   /* cap, 0 = none */
    uint64_t found; /* distinct samples seen */
    struct sample prev;
    bool has_prev;
};

static void actx_cleanup(struct actx *c)
{
    skpx_free(c->samples);
    skpx_free(c->nodes);
    skpx_u64map_cleanup(&c->root_by_frame);
    skpx_u64map_cleanup(&c->child_of);
    skpx_free(c->roots);
    skpx_u64map_cleanup(&c->path_by_stack);
    skpx_free(c->paths);
}

static void collect_cb(void *ud, const struct store_sample *s)
{
    struct actx *c = ud;
    if (c->err)
        return;
    if (skpx_grow(&c->samples, &c->cap_samples, c->n_samples + 1, sizeof(*c->samples), 64)) {
        c->err = SKP_ENOMEM;
        return;
    }
    c->samples[c->n_samples++] = (struct sample){
        .seg = s->segment, .seq = s->sequence, .time = s->time_ms, .stack = s->stack};
}

static int cmp_sample(const void *a, const void *b)
{
    const struct sample *x = a, *y = b;
    if (x->seg != y->seg)
        return x->seg < y->seg ? -1 : 1;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return 0;
}

/* Sorts by (segment, sequence) unless already sorted, then drops repeated pairs. */
static void sort_dedupe(struct actx *c)
{
    bool sorted = true;
    for (size_t i = 1; i < c->n_samples && sorted; i++)
        sorted = cmp_sample(&c->samples[i - 1], &c->samples[i]) <= 0;
    if (!sorted)
        qsort(c->samples, c->n_samples, sizeof(*c->samples), cmp_sample);
    size_t w = 0;
    for (size_t i = 0; i < c->n_samples; i++) {
        if (w > 0 && cmp_sample(&c->samples[w - 1], &c->samples[i]) == 0)
            continue;
        c->samples[w++] = c->samples[i];
    }
    c->n_samples = w;
}

static skp_err new_node(struct actx *c, uint32_t frame, uint32_t parent, uint32_t *out)
{
    if (c->n_nodes >= NO_NODE - 1)
        return SKP_ENOMEM;
    if (skpx_grow(&c->nodes, &c->cap_nodes, c->n_nodes + 1, sizeof(*c->nodes), 64))
        return SKP_ENOMEM;
    uint32_t idx = (uint32_t)c->n_nodes;
    c->nodes[idx] = (struct work_node){.frame = frame,
                                       .parent = parent,
                                       .first_child = NO_NODE,
                                       .last_child = NO_NODE,
                                       .next_sibling = NO_NODE};
    if (parent != NO_NODE) {
        skp_err err = skpx_u64map_put(&c->child_of, (uint64_t)parent << 32 | frame, idx);
        if (err)
            return err;
        struct work_node *p = &c->nodes[parent];
        if (p->last_child == NO_NODE)
            p->first_child = idx;
        else
            c->nodes[p->last_child].next_sibling = idx;
        p->last_child = idx;
    }
    c->n_nodes++;
    *out = idx;
    return SKP_OK;
}

/* Returns (building it on first use) the node path root→leaf of `stack`. */
static skp_err stack_path(struct actx *c, uint32_t stack, const uint32_t **path, size_t *len)
{
    uint64_t memo;
    if (skpx_u64map_get(&c->path_by_stack, stack, &memo)) {
        *len = (size_t)(memo & ((1u << PATH_LEN_BITS) - 1));
        *path = c->paths + (memo >> PATH_LEN_BITS);
        return SKP_OK;
    }
    const uint32_t *frames = NULL;
    size_t n = 0;
    skp_err err = store_get_stack(c->st, stack, &frames, &n);
    if (err)
        return err;
    if (n >= (1u << PATH_LEN_BITS))
        n = (1u << PATH_LEN_BITS) - 1;
    if (skpx_grow(&c->paths, &c->cap_paths, c->n_paths + n + 1, sizeof(*c->paths), 64))
        return SKP_ENOMEM;
    size_t off = c->n_paths;
    uint32_t *p = c->paths + off;
    if (n > 0) {
        /* `frames` stays valid: nothing below calls into the store */
        uint64_t v;
        uint32_t cur;
        if (skpx_u64map_get(&c->root_by_frame, frames[0], &v)) {
            cur = (uint32_t)v;
        } else {
            err = new_node(c, frames[0], NO_NODE, &cur);
            if (!err)
                err = skpx_u64map_put(&c->root_by_frame, frames[0], cur);
            if (!err)
                err = skpx_grow(&c->roots, &c->cap_roots, c->n_roots + 1, sizeof(*c->roots), 64);
            if (err)
                return err;
            c->roots[c->n_roots++] = cur;
        }
        p[0] = cur;
        for (size_t d = 1; d < n; d++) {
            if (skpx_u64map_get(&c->child_of, (uint64_t)cur << 32 | frames[d], &v)) {
                cur = (uint32_t)v;
            } else {
                err = new_node(c, frames[d], cur, &cur);
                if (err)
                    return err;
            }
            p[d] = cur;
        }
    }
    err = skpx_u64map_put(&c->path_by_stack, stack, (uint64_t)off << PATH_LEN_BITS | n);
    if (err)
        return err;
    c->n_paths += n;
    *path = p;
    *len = n;
    return SKP_OK;
}

/* Folds one sample into the trie: counts and run durations. Samples must arrive in
 * (segment, sequence) order without repeats. Counts non-empty stacks in c->used. */
static skp_err fold(struct actx *c, const struct sample *s)
{
    const uint32_t *path = NULL;
    size_t len = 0;
    skp_err err = stack_path(c, s->stack, &path, &len);
    if (err)
        return err;
    if (len == 0)
        return SKP_OK; /* empty stacks are dropped, as in OAP */
    c->used++;
    for (size_t d = 0; d < len; d++) {
        struct work_node *nd = &c->nodes[path[d]];
        nd->count++;
        if (nd->has_last && nd->last_seg == s->seg && nd->last_seq != INT32_MAX &&
            nd->last_seq + 1 == s->seq)
            nd->duration = skpx_sat_add_i64(nd->duration, skpx_sat_sub_i64(s->time, nd->last_time));
        nd->has_last = true;
        nd->last_seg = s->seg;
        nd->last_seq = s->seq;
        nd->last_time = s->time;
    }
    return SKP_OK;
}

/* Whole-task and whole-segment scans arrive ordered by (segment, sequence), so they are folded
 * as they stream by: memory stays O(trie + distinct stacks) whatever the task's size. */
static void stream_cb(void *ud, const struct store_sample *ss)
{
    struct actx *c = ud;
    if (c->err)
        return;
    struct sample s = {
        .seg = ss->segment, .seq = ss->sequence, .time = ss->time_ms, .stack = ss->stack};
    if (c->has_prev) {
        int order = cmp_sample(&c->prev, &s);
        if (order == 0)
            return; /* the same dump stored under two tasks */
        if (order > 0) {
            c->err = SKP_EIO; /* the store broke its ordering contract */
            return;
        }
    }
    c->prev = s;
    c->has_prev = true;
    c->found++;
    if (c->max && c->found > c->max)
        return; /* beyond the cap: counted for the tip only */
    c->err = fold(c, &s);
}

/* Signatures are copied into one arena block owned by the analysis. */
struct sig_ref {
    uint32_t frame;
    const char *sig; /* store-owned until copied */
    size_t off;
};

struct root_order {
    uint32_t node;
    uint64_t count;
    const char *sig;
    size_t first_seen;
};

static int cmp_roots(const void *a, const void *b)
{
    const struct root_order *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    int c = strcmp(x->sig, y->sig);
    if (c)
        return c;
    return x->first_seen < y->first_seen ? -1 : (x->first_seen > y->first_seen);
}

/* The distinct frames of the work tree with their signatures, copied into one arena. */
struct sig_table {
    struct skpx_u64map idx; /* frame id → index in refs */
    struct sig_ref *refs;
    size_t n_refs, cap_refs;
    char *arena; /* owned until handed to the analysis */
};

static void sig_table_cleanup(struct sig_table *t)
{
    skpx_u64map_cleanup(&t->idx);
    skpx_free(t->refs);
    skpx_free(t->arena);
}

static const char *sig_of(const struct sig_table *t, uint32_t frame)
{
    uint64_t v = 0;
    (void)skpx_u64map_get(&t->idx, frame, &v);
    return t->arena + t->refs[v].off;
}

/* Step 1: distinct frames → signatures (borrowed from the store's cache, then copied). */
static skp_err collect_signatures(struct actx *c, struct sig_table *t)
{
    size_t total = 0;
    for (size_t i = 0; i < c->n_nodes; i++) {
        uint64_t v;
        if (skpx_u64map_get(&t->idx, c->nodes[i].frame, &v))
            continue;
        const char *sig = NULL;
        skp_err err = store_get_frame(c->st, c->nodes[i].frame, &sig);
        if (err)
            return err;
        if (skpx_grow(&t->refs, &t->cap_refs, t->n_refs + 1, sizeof(*t->refs), 64))
            return SKP_ENOMEM;
        t->refs[t->n_refs] = (struct sig_ref){.frame = c->nodes[i].frame, .sig = sig, .off = total};
        total += strlen(sig) + 1;
        err = skpx_u64map_put(&t->idx, c->nodes[i].frame, t->n_refs);
        if (err)
            return err;
        t->n_refs++;
    }
    t->arena = skpx_malloc(total ? total : 1);
    if (!t->arena)
        return SKP_ENOMEM;
    for (size_t i = 0; i < t->n_refs; i++)
        memcpy(t->arena + t->refs[i].off, t->refs[i].sig, strlen(t->refs[i].sig) + 1);
    return SKP_OK;
}

/* Step 2: tree order: total count desc, then root signature, then first seen. */
static skp_err order_roots(struct actx *c, const struct sig_table *t, struct root_order **out)
{
    struct root_order *order = skpx_calloc(c->n_roots ? c->n_roots : 1, sizeof(*order));
    *out = order;
    if (!order)
        return SKP_ENOMEM;
    for (size_t i = 0; i < c->n_roots; i++)
        order[i] = (struct root_order){.node = c->roots[i],
                                       .count = c->nodes[c->roots[i]].count,
                                       .sig = sig_of(t, c->nodes[c->roots[i]].frame),
                                       .first_seen = i};
    qsort(order, c->n_roots, sizeof(*order), cmp_roots);
    return SKP_OK;
}

/* Step 3, one tree: BFS from `root`, ids 1.., parent 0 for the root; children in first-seen
 * order (which makes each node's children contiguous in the output). `queue` has room for every
 * work node. */
static skp_err emit_tree(struct actx *c, const struct sig_table *t, uint32_t root, uint32_t *queue,
                         struct analysis_tree *tree)
{
    size_t head = 0, tail = 0;
    queue[tail++] = root;
    while (head < tail) {
        uint32_t w = queue[head];
        c->nodes[w].out = (uint32_t)head;
        head++;
        for (uint32_t ch = c->nodes[w].first_child; ch != NO_NODE; ch = c->nodes[ch].next_sibling)
            queue[tail++] = ch;
    }
    tree->nodes = skpx_calloc(tail, sizeof(*tree->nodes));
    if (!tree->nodes)
        return SKP_ENOMEM;
    tree->n_nodes = tail;
    for (size_t i = 0; i < tail; i++) {
        const struct work_node *w = &c->nodes[queue[i]];
        struct analysis_node *o = &tree->nodes[i];
        int64_t children = 0;
        for (uint32_t ch = w->first_child; ch != NO_NODE; ch = c->nodes[ch].next_sibling)
            children = skpx_sat_add_i64(children, c->nodes[ch].duration);
        o->id = (uint32_t)i + 1;
        o->parent_id = w->parent == NO_NODE ? 0 : c->nodes[w->parent].out + 1;
        o->code_signature = sig_of(t, w->frame);
        o->duration = w->duration;
        o->duration_child_excluded = skpx_sat_sub_i64(w->duration, children);
        o->count = w->count;
        o->first_child = w->first_child == NO_NODE ? UINT32_MAX : c->nodes[w->first_child].out;
        o->next_sibling = w->next_sibling == NO_NODE ? UINT32_MAX : c->nodes[w->next_sibling].out;
    }
    return SKP_OK;
}

/* The work tree → the analysis' trees (signatures in an arena the analysis owns). */
static skp_err flatten(struct actx *c, struct analysis *a)
{
    struct sig_table t = {0};
    struct root_order *order = NULL;
    uint32_t *queue = NULL;
    skp_err err = collect_signatures(c, &t);
    if (!err)
        err = order_roots(c, &t, &order);
    if (err)
        goto out;
    queue = skpx_malloc((c->n_nodes ? c->n_nodes : 1) * sizeof(*queue));
    a->trees = skpx_calloc(c->n_roots ? c->n_roots : 1, sizeof(*a->trees));
    if (!queue || !a->trees) {
        err = SKP_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < c->n_roots && !err; i++) {
        err = emit_tree(c, &t, order[i].node, queue, &a->trees[i]);
        if (!err)
            a->n_trees = i + 1;
    }
out:
    a->_arena = t.arena; /* the trees point into it; analysis_free releases it */
    t.arena = NULL;
    sig_table_cleanup(&t);
    skpx_free(order);
    skpx_free(queue);
    return err;
}

static char *tip_limit(uint64_t found, uint64_t max)
{
    char buf[160];
    snprintf(buf, sizeof(buf),
             "Out of snapshot analyze limit, %llu snapshots found, but analysis first %llu "
             "snapshots only.",
             (unsigned long long)found, (unsigned long long)max);
    return skpx_strdup(buf);
}

/* Builds the result from the folded trie. `found` = snapshots found before the cap (for the
 * tip), `capped` = whether the cap cut anything, `any` = whether anything was found. */
static skp_err build_result(struct actx *c, uint64_t found, uint64_t max, bool capped, bool any,
                            struct analysis **out)
{
    skp_err err = SKP_OK;
    struct analysis *a = skpx_calloc(1, sizeof(*a));
    if (!a)
        return SKP_ENOMEM;
    if (!any) {
        a->tip = skpx_strdup("Data not found");
        if (!a->tip)
            err = SKP_ENOMEM;
        goto out;
    }
    if (capped) {
        a->tip = tip_limit(found, max);
        if (!a->tip) {
            err = SKP_ENOMEM;
            goto out;
        }
    }
    a->n_snapshots = c->used;
    err = flatten(c, a);
out:
    if (err) {
        analysis_free(a);
        return err;
    }
    *out = a;
    return SKP_OK;
}

skp_err analyze_segments(struct store *st, const struct analyze_query *q, size_t n,
                         const struct analyze_opts *opts, struct analysis **out)
{
    *out = NULL;
    if (!st || (n && !q))
        return SKP_EINVAL;
    uint64_t max = opts ? opts->max_snapshots : 0;
    struct actx c = {.st = st};
    uint64_t found = 0, budget = max;
    bool any = false, capped = false;
    skp_err err = SKP_OK;
    for (size_t i = 0; i < n; i++) {
        if (!q[i].segment_id)
            continue;
        int32_t lo = 0, hi = 0;
        err = store_segment_seq_window(st, q[i].segment_id, q[i].start_ms, q[i].end_ms, &lo, &hi);
        if (err == SKP_ENOTFOUND) {
            err = SKP_OK;
            continue;
        }
        if (err)
            goto out;
        any = true;
        uint64_t window = (uint64_t)((int64_t)hi - lo + 1);
        found += window;
        if (max) {
            /* the cap applies to the first `max` sequences over all windows, in query order */
            if (budget == 0) {
                capped = true;
                continue;
            }
            if (window > budget) {
                hi = (int32_t)(lo + (int64_t)budget - 1);
                capped = true;
                window = budget;
            }
            budget -= window;
        }
        err = store_scan_segment(st, q[i].segment_id, lo, hi, collect_cb, &c);
        if (!err)
            err = c.err;
        if (err)
            goto out;
    }
    sort_dedupe(&c);
    for (size_t i = 0; i < c.n_samples && !err; i++)
        err = fold(&c, &c.samples[i]);
    if (!err)
        err = build_result(&c, found, max, capped, any, out);
out:
    actx_cleanup(&c);
    return err;
}

static skp_err streamed_result(struct actx *c, struct analysis **out)
{
    bool capped = c->max && c->found > c->max;
    return build_result(c, c->found, c->max, capped, c->found > 0, out);
}

skp_err analyze_task(struct store *st, const char *task_id, const struct analyze_opts *opts,
                     struct analysis **out)
{
    *out = NULL;
    if (!st || !task_id)
        return SKP_EINVAL;
    struct actx c = {.st = st, .max = opts ? opts->max_snapshots : 0};
    skp_err err = store_scan_task(st, task_id, stream_cb, &c);
    if (!err)
        err = c.err;
    if (!err)
        err = streamed_result(&c, out);
    actx_cleanup(&c);
    return err;
}

skp_err analyze_segment_all(struct store *st, const char *segment_id,
                            const struct analyze_opts *opts, struct analysis **out)
{
    *out = NULL;
    if (!st || !segment_id)
        return SKP_EINVAL;
    struct actx c = {.st = st, .max = opts ? opts->max_snapshots : 0};
    skp_err err = store_scan_segment(st, segment_id, INT32_MIN, INT32_MAX, stream_cb, &c);
    if (!err)
        err = c.err;
    if (!err)
        err = streamed_result(&c, out);
    actx_cleanup(&c);
    return err;
}

void analysis_free(struct analysis *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->n_trees; i++)
        skpx_free(a->trees[i].nodes);
    skpx_free(a->trees);
    skpx_free(a->tip);
    skpx_free(a->_arena);
    skpx_free(a);
}

json_t *analysis_to_json(const struct analysis *a)
{
    json_t *root = json_object();
    json_t *trees = json_array();
    if (!root || !trees)
        goto fail;
    if (json_object_set_new(root, "tip", a->tip ? json_string(a->tip) : json_null()) != 0)
        goto fail;
    for (size_t t = 0; t < a->n_trees; t++) {
        json_t *elems = json_array();
        json_t *tree = elems ? json_pack("{s:o}", "elements", elems) : NULL;
        if (!tree || json_array_append_new(trees, tree) != 0)
            goto fail;
        const struct analysis_tree *tr = &a->trees[t];
        for (size_t i = 0; i < tr->n_nodes; i++) {
            const struct analysis_node *nd = &tr->nodes[i];
            json_t *e = json_pack(
                "{s:I, s:I, s:o, s:I, s:I, s:I}", "id", (json_int_t)nd->id, "parentId",
                (json_int_t)nd->parent_id, "codeSignature", skp_json_str(nd->code_signature),
                "duration", (json_int_t)nd->duration, "durationChildExcluded",
                (json_int_t)nd->duration_child_excluded, "count", (json_int_t)nd->count);
            if (!e || json_array_append_new(elems, e) != 0)
                goto fail;
        }
    }
    if (json_object_set_new(root, "trees", trees) != 0) {
        trees = NULL;
        goto fail;
    }
    return root;
fail:
    json_decref(trees);
    json_decref(root);
    return NULL;
}
