/* pprof_analyze.c - value-weighted stack trees from pprof profiles (see pprof_analyze.h).
 *
 * Design: add() reduces a profile to its distinct stacks: a sample costs one hash of its
 * location indices (a stack seen before only adds its value), and each distinct stack is turned
 * once into its path of frame ids, root first (a location's frames, caller first, are interned
 * on first use and cached by location index), appended to one pool with its self value.
 * finish() sorts the paths (all profiles' together) so that paths sharing a prefix are
 * adjacent, and builds the tree in one pass: a path shares the nodes of its longest common
 * prefix with the previous one and creates the rest, so no node is ever looked up in a map.
 * It then lays each root's subtree out breadth-first into its own analysis_tree and makes the
 * values inclusive in one backward pass. (Issue 10: 30 MiB of pprof with 2.3 M tree nodes went
 * from 2.3 s to the figures in docs/performance.md.) */
#include "server/analysis/pprof_analyze.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/grow.h"
#include "common/map.h"
#include "common/sat.h"

/* Longest frame signature built (longer function or file names are cut). */
#define FRAME_MAX PPROF_FRAME_MAX

/* A node while building. build_tree() creates them in depth-first preorder, so a root's subtree
 * is the run of nodes up to the next root. */
struct bnode {
    uint32_t frame;
    uint32_t parent; /* UINT32_MAX for a root */
    uint32_t depth;  /* 0 for a root */
    uint64_t value;  /* self */
    uint64_t samples;
};

/* One distinct stack: its frames pool[off .. off+len), root first, and its self value. */
struct pstack {
    size_t off;
    uint32_t len;
    uint32_t first_sample; /* while its profile is added: a sample with these locations */
    uint64_t value, samples;
};

/* Frame ids of all distinct stacks together, at most (a bound on memory: 128 MiB). */
#define POOL_MAX ((size_t)32 * 1024 * 1024)

struct pprof_analyze {
    char *type; /* chosen sample type (NULL until fixed) */
    char *unit;
    bool by_function;
    struct skpx_strmap frame_ids; /* signature -> frame id */
    char **frames;                /* frame id -> signature (owned) */
    size_t n_frames, cap_frames;
    struct bnode *nodes; /* built by finish() */
    size_t n_nodes, cap_nodes;
    uint32_t *pool; /* frame ids of every distinct stack, root first */
    size_t pool_len, pool_cap;
    struct pstack *stacks; /* distinct stacks of every profile added */
    size_t n_stacks, cap_stacks;
    char *types[PPROF_ANALYZE_MAX_TYPES];
    size_t n_types;
    int64_t total;
    uint64_t n_samples;
    size_t n_skipped;
    /* per-profile scratch */
    struct skpx_u64map stack_of; /* hash of a sample's location indices -> stacks[] index + 1 */
    uint32_t *pos;               /* finish(): BFS position of each build node in its tree */
    uint32_t *loc_frames;        /* frame ids, caller first, per location */
    uint32_t *loc_off;           /* n_locations + 1 offsets; UINT32_MAX = not computed */
    size_t loc_frames_len, loc_frames_cap;
    uint32_t *path;
    size_t path_cap;
};

skp_err pprof_analyze_new(const char *sample_type, bool by_function, struct pprof_analyze **out)
{
    *out = NULL;
    struct pprof_analyze *a = skpx_calloc(1, sizeof(*a));
    if (!a)
        return SKP_ENOMEM;
    a->by_function = by_function;
    if (sample_type && sample_type[0] && !(a->type = skpx_strdup(sample_type))) {
        skpx_free(a);
        return SKP_ENOMEM;
    }
    *out = a;
    return SKP_OK;
}

void pprof_analyze_free(struct pprof_analyze *a)
{
    if (!a)
        return;
    skpx_free(a->type);
    skpx_free(a->unit);
    skpx_strmap_cleanup(&a->frame_ids);
    for (size_t i = 0; i < a->n_frames; i++)
        skpx_free(a->frames[i]);
    SKPX_FREE_ALL(a->frames, a->nodes, a->pool, a->stacks);
    for (size_t i = 0; i < a->n_types; i++)
        skpx_free(a->types[i]);
    skpx_free(a->loc_frames);
    skpx_free(a->loc_off);
    skpx_u64map_cleanup(&a->stack_of);
    SKPX_FREE_ALL(a->pos, a->path, a);
}

const char *pprof_analyze_type(const struct pprof_analyze *a)
{
    return a->type ? a->type : "";
}

const char *pprof_analyze_unit(const struct pprof_analyze *a)
{
    return a->unit ? a->unit : "";
}

size_t pprof_analyze_types(const struct pprof_analyze *a, const char *const **out)
{
    *out = (const char *const *)a->types;
    return a->n_types;
}

void pprof_analyze_totals(const struct pprof_analyze *a, int64_t *total, uint64_t *n_samples,
                          size_t *n_skipped)
{
    *total = a->total;
    *n_samples = a->n_samples;
    *n_skipped = a->n_skipped;
}

/* Weights add up saturating at INT64_MAX (common/sat.h): a hostile file's values (each up to
 * INT64_MAX) must not wrap a total or a node's count, which are reported as signed figures. Every
 * weight is in [0, INT64_MAX], so the unsigned ones convert exactly. */
static uint64_t add_weight(uint64_t x, uint64_t y)
{
    return (uint64_t)skpx_sat_add_i64((int64_t)x, (int64_t)y);
}

static skp_err frame_intern(struct pprof_analyze *a, const char *sig, uint32_t *id)
{
    if (skpx_strmap_get(&a->frame_ids, sig, id))
        return SKP_OK;
    if (skpx_grow(&a->frames, &a->cap_frames, a->n_frames + 1, sizeof(*a->frames), 256))
        return SKP_ENOMEM;
    char *copy = skpx_strdup(sig);
    if (!copy)
        return SKP_ENOMEM;
    if (skpx_strmap_put(&a->frame_ids, sig, (uint32_t)a->n_frames) != SKP_OK) {
        skpx_free(copy);
        return SKP_ENOMEM;
    }
    a->frames[a->n_frames] = copy;
    *id = (uint32_t)a->n_frames++;
    return SKP_OK;
}

static void frame_sig(const struct pprof_analyze *a, const struct pprof_profile *p,
                      const struct pprof_location *l, const struct pprof_line *ln, char *out)
{
    pprof_frame_signature(p, l, ln, a->by_function, out);
}

void pprof_frame_signature(const struct pprof_profile *p, const struct pprof_location *l,
                           const struct pprof_line *ln, bool by_function, char out[PPROF_FRAME_MAX])
{
    const struct pprof_function *f =
        ln && ln->function != PPROF_NONE ? &p->functions[ln->function] : NULL;
    if (f && f->name[0]) {
        if (!f->filename[0])
            snprintf(out, FRAME_MAX, by_function ? "%.500s" : "%.500s:%" PRId64, f->name, ln->line);
        else if (by_function)
            snprintf(out, FRAME_MAX, "%.500s (%.500s)", f->name, f->filename);
        else
            snprintf(out, FRAME_MAX, "%.500s (%.480s:%" PRId64 ")", f->name, f->filename, ln->line);
        return;
    }
    const struct pprof_mapping *m = l->mapping != PPROF_NONE ? &p->mappings[l->mapping] : NULL;
    if (m && m->filename[0]) {
        const char *base = strrchr(m->filename, '/');
        snprintf(out, FRAME_MAX, "%.500s+0x%" PRIx64, base ? base + 1 : m->filename,
                 l->address - m->memory_start + m->file_offset);
    } else {
        snprintf(out, FRAME_MAX, "0x%" PRIx64, l->address);
    }
}

/* Frames of location `li`, caller first: computed once per profile (loc_frames_compute) and
 * then only looked up. */
static skp_err loc_frames_compute(struct pprof_analyze *a, const struct pprof_profile *p,
                                  uint32_t li);

static inline skp_err loc_frames(struct pprof_analyze *a, const struct pprof_profile *p,
                                 uint32_t li, const uint32_t **out, size_t *n)
{
    if (a->loc_off[li] == UINT32_MAX) {
        skp_err err = loc_frames_compute(a, p, li);
        if (err)
            return err;
    }
    *out = a->loc_frames + a->loc_off[li];
    const struct pprof_location *l = &p->locations[li];
    *n = l->n_lines ? l->n_lines : 1;
    return SKP_OK;
}

static skp_err loc_frames_compute(struct pprof_analyze *a, const struct pprof_profile *p,
                                  uint32_t li)
{
    {
        const struct pprof_location *l = &p->locations[li];
        size_t need = l->n_lines ? l->n_lines : 1;
        if (skpx_grow(&a->loc_frames, &a->loc_frames_cap, a->loc_frames_len + need,
                      sizeof(*a->loc_frames), 1024))
            return SKP_ENOMEM;
        char sig[FRAME_MAX];
        size_t off = a->loc_frames_len;
        if (!l->n_lines) {
            frame_sig(a, p, l, NULL, sig);
            skp_err err = frame_intern(a, sig, &a->loc_frames[off]);
            if (err)
                return err;
        }
        for (uint32_t k = 0; k < l->n_lines; k++) {
            /* lines[0] is the innermost: the last frame of this location. */
            const struct pprof_line *ln = &p->lines[l->line_off + l->n_lines - 1 - k];
            frame_sig(a, p, l, ln, sig);
            skp_err err = frame_intern(a, sig, &a->loc_frames[off + k]);
            if (err)
                return err;
        }
        a->loc_off[li] = (uint32_t)off;
        a->loc_frames_len += need;
    }
    return SKP_OK;
}

/* Appends a node of `frame` at `depth` under `parent` (UINT32_MAX: a new root). */
static skp_err new_node(struct pprof_analyze *a, uint32_t parent, uint32_t depth, uint32_t frame,
                        uint32_t *out)
{
    if (a->n_nodes >= PPROF_ANALYZE_MAX_NODES)
        return SKP_ETOOBIG;
    if (skpx_grow(&a->nodes, &a->cap_nodes, a->n_nodes + 1, sizeof(*a->nodes), 1024))
        return SKP_ENOMEM;
    uint32_t idx = (uint32_t)a->n_nodes++;
    a->nodes[idx] = (struct bnode){.frame = frame, .parent = parent, .depth = depth};
    *out = idx;
    return SKP_OK;
}

static void note_types(struct pprof_analyze *a, const struct pprof_profile *p)
{
    for (size_t i = 0; i < p->n_sample_types; i++) {
        char buf[256];
        snprintf(buf, sizeof(buf), "%.120s/%.120s", p->sample_types[i].type,
                 p->sample_types[i].unit);
        bool seen = false;
        for (size_t k = 0; k < a->n_types && !seen; k++)
            seen = strcmp(a->types[k], buf) == 0;
        if (!seen && a->n_types < PPROF_ANALYZE_MAX_TYPES) {
            char *c = skpx_strdup(buf);
            if (c)
                a->types[a->n_types++] = c;
        }
    }
}

skp_err pprof_analyze_add(struct pprof_analyze *a, const struct pprof_profile *p)
{
    note_types(a, p);
    if (!a->type && p->n_sample_types) {
        int def = p->default_sample_type >= 0 ? p->default_sample_type : (int)p->n_sample_types - 1;
        a->type = skpx_strdup(p->sample_types[def].type);
        if (!a->type)
            return SKP_ENOMEM;
    }
    int ti = a->type ? pprof_sample_type_index(p, a->type) : -1;
    if (ti < 0) {
        a->n_skipped++;
        return SKP_OK;
    }
    if (!a->unit && !(a->unit = skpx_strdup(p->sample_types[ti].unit)))
        return SKP_ENOMEM;
    skpx_free(a->loc_off);
    a->loc_off = skpx_malloc((p->n_locations + 1) * sizeof(*a->loc_off));
    if (!a->loc_off)
        return SKP_ENOMEM;
    memset(a->loc_off, 0xff, (p->n_locations + 1) * sizeof(*a->loc_off));
    a->loc_frames_len = 0;
    /* Pass 1: the distinct stacks (by location indices) with their summed values. Samples often
     * repeat a stack (Go writes one sample per stack and label set). */
    skpx_u64map_clear(&a->stack_of);
    size_t first = a->n_stacks;
    for (size_t si = 0; si < p->n_samples; si++) {
        const struct pprof_sample *s = &p->samples[si];
        int64_t v = p->values[si * p->n_sample_types + (size_t)ti];
        if (v <= 0 || s->n_locs == 0)
            continue; /* nothing to weigh (e.g. an object freed since: inuse 0) */
        const uint32_t *locs = p->sample_locs + s->loc_off;
        uint64_t h = skpx_hash_u32s(locs, s->n_locs), k = 0;
        bool known = skpx_u64map_get(&a->stack_of, h, &k);
        if (known) {
            struct pstack *o = &a->stacks[k - 1];
            const struct pprof_sample *os = &p->samples[o->first_sample];
            if (os->n_locs == s->n_locs &&
                !memcmp(p->sample_locs + os->loc_off, locs, s->n_locs * sizeof(*locs))) {
                o->value = add_weight(o->value, (uint64_t)v);
                o->samples++;
                a->total = skpx_sat_add_i64(a->total, v);
                a->n_samples++;
                continue;
            }
        }
        /* New (or a hash collision: then a stack of its own; finish() merges equal paths). */
        if (skpx_grow(&a->stacks, &a->cap_stacks, a->n_stacks + 1, sizeof(*a->stacks), 1024))
            return SKP_ENOMEM;
        a->stacks[a->n_stacks] =
            (struct pstack){.first_sample = (uint32_t)si, .value = (uint64_t)v, .samples = 1};
        if (!known && skpx_u64map_put(&a->stack_of, h, a->n_stacks + 1) != SKP_OK)
            return SKP_ENOMEM;
        a->n_stacks++;
        a->total = skpx_sat_add_i64(a->total, v);
        a->n_samples++;
    }
    /* Pass 2: each new distinct stack's path of frames, root first (locations are stored leaf
     * first), into the pool. */
    for (size_t i = first; i < a->n_stacks; i++) {
        struct pstack *st = &a->stacks[i];
        const struct pprof_sample *s = &p->samples[st->first_sample];
        st->off = a->pool_len;
        for (uint32_t k = s->n_locs; k-- > 0;) {
            const uint32_t *fr = NULL;
            size_t nf = 0;
            skp_err err = loc_frames(a, p, p->sample_locs[s->loc_off + k], &fr, &nf);
            if (err)
                return err;
            if (a->pool_len + nf > POOL_MAX)
                return SKP_ETOOBIG;
            if (skpx_grow(&a->pool, &a->pool_cap, a->pool_len + nf, sizeof(*a->pool), 4096))
                return SKP_ENOMEM;
            memcpy(a->pool + a->pool_len, fr, nf * sizeof(*fr));
            a->pool_len += nf;
        }
        st->len = (uint32_t)(a->pool_len - st->off);
    }
    return SKP_OK;
}

/* Orders paths so that paths sharing a prefix are adjacent (byte order of the frame ids: any
 * total order that compares element by element does). */
static int cmp_paths(const void *x, const void *y, void *ud)
{
    const uint32_t *pool = ud;
    const struct pstack *a = x, *b = y;
    uint32_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(pool + a->off, pool + b->off, (size_t)n * sizeof(*pool));
    if (c)
        return c;
    return a->len < b->len ? -1 : a->len > b->len;
}

/* The tree of every distinct stack: each path shares the nodes of its common prefix with the
 * previous (sorted) path and creates the rest; the value goes to its last node (self). */
static skp_err build_tree(struct pprof_analyze *a)
{
    if (a->n_stacks > 1)
        qsort_r(a->stacks, a->n_stacks, sizeof(*a->stacks), cmp_paths, a->pool);
    uint32_t *at = NULL; /* at[d]: node of depth d on the previous path */
    size_t at_cap = 0;
    const struct pstack *prev = NULL;
    skp_err err = SKP_OK;
    for (size_t i = 0; i < a->n_stacks && !err; i++) {
        const struct pstack *st = &a->stacks[i];
        if (st->len == 0)
            continue;
        const uint32_t *path = a->pool + st->off;
        size_t lcp = 0;
        if (prev) {
            const uint32_t *pp = a->pool + prev->off;
            size_t n = prev->len < st->len ? prev->len : st->len;
            while (lcp < n && pp[lcp] == path[lcp])
                lcp++;
        }
        err = skpx_grow(&at, &at_cap, st->len, sizeof(*at), 256);
        for (size_t d = lcp; d < st->len && !err; d++)
            err = new_node(a, d ? at[d - 1] : UINT32_MAX, (uint32_t)d, path[d], &at[d]);
        if (err)
            break;
        struct bnode *leaf = &a->nodes[at[st->len - 1]];
        leaf->value = add_weight(leaf->value, st->value);
        leaf->samples += st->samples;
        prev = st;
    }
    skpx_free(at);
    return err;
}

/* Lays the subtree of build nodes [lo, hi) (a root and its preorder run) out breadth first
 * into `t`: a stable counting sort of the preorder by depth is a BFS order (nodes of one depth
 * keep their preorder, which follows their parents' order). */
static skp_err layout(struct pprof_analyze *a, uint32_t lo, uint32_t hi, const uint32_t *frame_off,
                      const char *arena, struct analysis_tree *t)
{
    size_t n = hi - lo;
    uint32_t max_depth = 0;
    for (uint32_t i = lo; i < hi; i++)
        if (a->nodes[i].depth > max_depth)
            max_depth = a->nodes[i].depth;
    size_t *start = skpx_calloc((size_t)max_depth + 2, sizeof(*start));
    uint32_t *order = skpx_malloc(n * sizeof(*order));
    t->nodes = skpx_calloc(n, sizeof(*t->nodes));
    if (!start || !order || !t->nodes) {
        SKPX_FREE_ALL(start, order, t->nodes);
        t->nodes = NULL;
        return SKP_ENOMEM;
    }
    for (uint32_t i = lo; i < hi; i++)
        start[a->nodes[i].depth + 1]++;
    for (uint32_t d = 1; d <= max_depth + 1; d++)
        start[d] += start[d - 1];
    for (uint32_t i = lo; i < hi; i++)
        order[start[a->nodes[i].depth]++] = i;
    skpx_free(start);
    t->n_nodes = n;
    /* BFS position of each build node (a->pos), to turn parent indices into parent ids. */
    for (size_t i = 0; i < n; i++)
        a->pos[order[i]] = (uint32_t)i;
    for (size_t i = 0; i < n; i++) {
        const struct bnode *b = &a->nodes[order[i]];
        struct analysis_node *an = &t->nodes[i];
        an->id = (uint32_t)i + 1;
        an->parent_id = i == 0 ? 0 : a->pos[b->parent] + 1;
        an->code_signature = arena + frame_off[b->frame];
        an->count = b->value; /* self for now */
        an->duration_child_excluded = (int64_t)b->value;
        an->first_child = UINT32_MAX;
        an->next_sibling = UINT32_MAX;
    }
    /* Children come after their parent in BFS order: one backward pass makes the values
     * inclusive and links the children in order of appearance. */
    for (size_t i = n; i-- > 1;) {
        uint32_t parent = t->nodes[i].parent_id - 1;
        t->nodes[parent].count = add_weight(t->nodes[parent].count, t->nodes[i].count);
        t->nodes[i].next_sibling = t->nodes[parent].first_child;
        t->nodes[parent].first_child = (uint32_t)i;
    }
    for (size_t i = 0; i < n; i++)
        t->nodes[i].duration = (int64_t)t->nodes[i].count;
    skpx_free(order);
    return SKP_OK;
}

skp_err pprof_analyze_finish(struct pprof_analyze *a, struct analysis **out)
{
    *out = NULL;
    if (a->n_nodes == 0) {
        skp_err berr = build_tree(a);
        if (berr)
            return berr;
    }
    struct analysis *r = skpx_calloc(1, sizeof(*r));
    if (!r)
        return SKP_ENOMEM;
    size_t total = 0;
    for (size_t i = 0; i < a->n_frames; i++)
        total += strlen(a->frames[i]) + 1;
    uint32_t *frame_off = skpx_malloc((a->n_frames ? a->n_frames : 1) * sizeof(*frame_off));
    char *arena = skpx_malloc(total ? total : 1);
    size_t n_roots = 0;
    for (size_t i = 0; i < a->n_nodes; i++)
        n_roots += a->nodes[i].parent == UINT32_MAX;
    r->trees = skpx_calloc(n_roots ? n_roots : 1, sizeof(*r->trees));
    if (!frame_off || !arena || !r->trees) {
        skpx_free(frame_off);
        skpx_free(arena);
        analysis_free(r);
        return SKP_ENOMEM;
    }
    r->_arena = arena;
    size_t off = 0;
    for (size_t i = 0; i < a->n_frames; i++) {
        size_t l = strlen(a->frames[i]) + 1;
        memcpy(arena + off, a->frames[i], l);
        frame_off[i] = (uint32_t)off;
        off += l;
    }
    skpx_free(a->pos);
    a->pos = skpx_malloc((a->n_nodes ? a->n_nodes : 1) * sizeof(*a->pos));
    if (!a->pos) {
        skpx_free(frame_off);
        analysis_free(r);
        return SKP_ENOMEM;
    }
    skp_err err = SKP_OK;
    for (uint32_t lo = 0; lo < a->n_nodes && !err;) {
        uint32_t hi = lo + 1;
        while (hi < a->n_nodes && a->nodes[hi].parent != UINT32_MAX)
            hi++;
        err = layout(a, lo, hi, frame_off, arena, &r->trees[r->n_trees]);
        if (!err)
            r->n_trees++;
        lo = hi;
    }
    skpx_free(frame_off);
    r->n_snapshots = a->n_samples;
    if (err) {
        analysis_free(r);
        return err;
    }
    *out = r;
    return SKP_OK;
}
