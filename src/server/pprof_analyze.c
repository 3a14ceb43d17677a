/* pprof_analyze.c - value-weighted stack trees from pprof profiles (see pprof_analyze.h).
 *
 * Design: frames are interned once per profile location (a location's frames, caller first,
 * are computed on first use and cached by location index), so a sample costs one map lookup
 * per frame on its path, and a stack seen before costs one hash of its location indices (its
 * leaf is remembered). Values are added at the leaf only (self); finish() lays each root's
 * subtree out breadth-first into its own analysis_tree and makes them inclusive in one backward
 * pass. Nodes live in one growing array while building; a node's children are found through
 * one hash map keyed by (parent index + 1) << 32 | frame id. */
#include "server/pprof_analyze.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/map.h"

/* Longest frame signature built (longer function or file names are cut). */
#define FRAME_MAX PPROF_FRAME_MAX

struct bnode {
    uint32_t frame;
    uint32_t parent;           /* UINT32_MAX for a root */
    uint32_t first_child, next_sibling;
    uint64_t value;            /* self while building; made inclusive by finish() */
    uint64_t samples;          /* likewise */
};

struct pprof_analyze {
    char *type;                /* chosen sample type (NULL until fixed) */
    char *unit;
    bool by_function;
    struct skpx_strmap frame_ids;   /* signature -> frame id */
    char **frames;             /* frame id -> signature (owned) */
    size_t n_frames, cap_frames;
    struct bnode *nodes;
    size_t n_nodes, cap_nodes;
    struct skpx_u64map children;    /* (parent+1)<<32 | frame -> node index */
    uint32_t first_root;       /* list of roots through next_sibling */
    uint32_t last_root;
    char *types[PPROF_ANALYZE_MAX_TYPES];
    size_t n_types;
    int64_t total;
    uint64_t n_samples;
    size_t n_skipped;
    /* per-profile scratch */
    struct skpx_u64map stack_leaf; /* hash of a sample's location indices -> sample index + 1 */
    uint32_t *sample_leaf;     /* per sample: its leaf node, UINT32_MAX if none */
    uint32_t *pos;             /* finish(): BFS position of each build node in its tree */
    size_t cap_sample_leaf;
    uint32_t *loc_frames;      /* frame ids, caller first, per location */
    uint32_t *loc_off;         /* n_locations + 1 offsets; UINT32_MAX = not computed */
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
    a->first_root = a->last_root = UINT32_MAX;
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
    skpx_free(a->frames);
    skpx_free(a->nodes);
    skpx_u64map_cleanup(&a->children);
    for (size_t i = 0; i < a->n_types; i++)
        skpx_free(a->types[i]);
    skpx_free(a->loc_frames);
    skpx_free(a->loc_off);
    skpx_u64map_cleanup(&a->stack_leaf);
    skpx_free(a->sample_leaf);
    skpx_free(a->pos);
    skpx_free(a->path);
    skpx_free(a);
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

static skp_err frame_intern(struct pprof_analyze *a, const char *sig, uint32_t *id)
{
    if (skpx_strmap_get(&a->frame_ids, sig, id))
        return SKP_OK;
    if (a->n_frames == a->cap_frames) {
        size_t ncap = a->cap_frames ? a->cap_frames * 2 : 256;
        char **nf = skpx_realloc(a->frames, ncap * sizeof(*nf));
        if (!nf)
            return SKP_ENOMEM;
        a->frames = nf;
        a->cap_frames = ncap;
    }
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
                           const struct pprof_line *ln, bool by_function,
                           char out[PPROF_FRAME_MAX])
{
    const struct pprof_function *f =
        ln && ln->function != PPROF_NONE ? &p->functions[ln->function] : NULL;
    if (f && f->name[0]) {
        if (!f->filename[0])
            snprintf(out, FRAME_MAX, by_function ? "%.500s" : "%.500s:%" PRId64, f->name,
                     ln->line);
        else if (by_function)
            snprintf(out, FRAME_MAX, "%.500s (%.500s)", f->name, f->filename);
        else
            snprintf(out, FRAME_MAX, "%.500s (%.480s:%" PRId64 ")", f->name, f->filename,
                     ln->line);
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

/* Frames of location `li`, caller first: computed once per profile. */
static skp_err loc_frames(struct pprof_analyze *a, const struct pprof_profile *p, uint32_t li,
                          const uint32_t **out, size_t *n)
{
    if (a->loc_off[li] == UINT32_MAX) {
        const struct pprof_location *l = &p->locations[li];
        size_t need = l->n_lines ? l->n_lines : 1;
        if (a->loc_frames_len + need > a->loc_frames_cap) {
            size_t ncap = a->loc_frames_cap ? a->loc_frames_cap * 2 : 1024;
            while (ncap < a->loc_frames_len + need)
                ncap *= 2;
            uint32_t *nv = skpx_realloc(a->loc_frames, ncap * sizeof(*nv));
            if (!nv)
                return SKP_ENOMEM;
            a->loc_frames = nv;
            a->loc_frames_cap = ncap;
        }
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
    *out = a->loc_frames + a->loc_off[li];
    const struct pprof_location *l = &p->locations[li];
    *n = l->n_lines ? l->n_lines : 1;
    return SKP_OK;
}

static skp_err child(struct pprof_analyze *a, uint32_t parent, uint32_t frame, uint32_t *out)
{
    uint64_t key = ((uint64_t)(parent == UINT32_MAX ? 0 : parent + 1) << 32) | frame;
    uint64_t v;
    if (skpx_u64map_get(&a->children, key, &v)) {
        *out = (uint32_t)v;
        return SKP_OK;
    }
    if (a->n_nodes >= PPROF_ANALYZE_MAX_NODES)
        return SKP_ETOOBIG;
    if (a->n_nodes == a->cap_nodes) {
        size_t ncap = a->cap_nodes ? a->cap_nodes * 2 : 1024;
        struct bnode *nn = skpx_realloc(a->nodes, ncap * sizeof(*nn));
        if (!nn)
            return SKP_ENOMEM;
        a->nodes = nn;
        a->cap_nodes = ncap;
    }
    uint32_t idx = (uint32_t)a->n_nodes;
    if (skpx_u64map_put(&a->children, key, idx) != SKP_OK)
        return SKP_ENOMEM;
    struct bnode *n = &a->nodes[a->n_nodes++];
    memset(n, 0, sizeof(*n));
    n->frame = frame;
    n->parent = parent;
    n->first_child = UINT32_MAX;
    if (parent == UINT32_MAX) {
        n->next_sibling = UINT32_MAX;
        if (a->last_root == UINT32_MAX)
            a->first_root = idx;
        else
            a->nodes[a->last_root].next_sibling = idx;
        a->last_root = idx;
    } else {
        n->next_sibling = a->nodes[parent].first_child;
        a->nodes[parent].first_child = idx;
    }
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
        int def = p->default_sample_type >= 0 ? p->default_sample_type
                                              : (int)p->n_sample_types - 1;
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
    /* Samples often repeat a stack (Go writes one sample per stack and label set): the leaf of
     * a stack seen before is found by hashing its location indices, and the path is then
     * credited by walking parent links, with no frame or child lookups. */
    skpx_u64map_clear(&a->stack_leaf);
    if (p->n_samples > a->cap_sample_leaf) {
        uint32_t *nl = skpx_realloc(a->sample_leaf, p->n_samples * sizeof(*nl));
        if (!nl)
            return SKP_ENOMEM;
        a->sample_leaf = nl;
        a->cap_sample_leaf = p->n_samples;
    }
    for (size_t si = 0; si < p->n_samples; si++) {
        const struct pprof_sample *s = &p->samples[si];
        int64_t v = p->values[si * p->n_sample_types + (size_t)ti];
        a->sample_leaf[si] = UINT32_MAX;
        if (v <= 0)
            continue; /* nothing to weigh (e.g. an object freed since: inuse 0) */
        const uint32_t *locs = p->sample_locs + s->loc_off;
        uint64_t h = skpx_hash_u32s(locs, s->n_locs), prev = 0;
        if (skpx_u64map_get(&a->stack_leaf, h, &prev)) {
            const struct pprof_sample *o = &p->samples[prev - 1];
            if (o->n_locs == s->n_locs &&
                !memcmp(p->sample_locs + o->loc_off, locs, s->n_locs * sizeof(*locs)) &&
                a->sample_leaf[prev - 1] != UINT32_MAX) {
                uint32_t leaf = a->sample_leaf[prev - 1];
                a->nodes[leaf].value += (uint64_t)v;
                a->nodes[leaf].samples++;
                a->sample_leaf[si] = leaf;
                a->total += v;
                a->n_samples++;
                continue;
            }
        }
        /* Path of frames, root first: locations are stored leaf first. */
        size_t depth = 0;
        for (uint32_t k = s->n_locs; k-- > 0;) {
            const uint32_t *fr = NULL;
            size_t nf = 0;
            skp_err err = loc_frames(a, p, p->sample_locs[s->loc_off + k], &fr, &nf);
            if (err)
                return err;
            if (depth + nf > a->path_cap) {
                size_t ncap = a->path_cap ? a->path_cap * 2 : 256;
                while (ncap < depth + nf)
                    ncap *= 2;
                uint32_t *np = skpx_realloc(a->path, ncap * sizeof(*np));
                if (!np)
                    return SKP_ENOMEM;
                a->path = np;
                a->path_cap = ncap;
            }
            memcpy(a->path + depth, fr, nf * sizeof(*fr));
            depth += nf;
        }
        if (depth == 0)
            continue;
        uint32_t node = UINT32_MAX;
        for (size_t d = 0; d < depth; d++) {
            skp_err err = child(a, node, a->path[d], &node);
            if (err)
                return err;
        }
        /* Self value at the leaf only; finish() sums subtrees into inclusive values. */
        a->nodes[node].value += (uint64_t)v;
        a->nodes[node].samples++;
        a->sample_leaf[si] = node;
        if (!skpx_u64map_get(&a->stack_leaf, h, &prev) &&
            skpx_u64map_put(&a->stack_leaf, h, si + 1) != SKP_OK)
            return SKP_ENOMEM;
        a->total += v;
        a->n_samples++;
    }
    return SKP_OK;
}

/* Lays the subtree of build node `root` out breadth first into `t`. */
static skp_err layout(struct pprof_analyze *a, uint32_t root, const uint32_t *frame_off,
                      const char *arena, struct analysis_tree *t)
{
    size_t cap = 64, n = 0;
    uint32_t *order = skpx_malloc(cap * sizeof(*order));
    if (!order)
        return SKP_ENOMEM;
    order[n++] = root;
    for (size_t i = 0; i < n; i++) {
        for (uint32_t c = a->nodes[order[i]].first_child; c != UINT32_MAX;
             c = a->nodes[c].next_sibling) {
            if (n == cap) {
                uint32_t *no = skpx_realloc(order, cap * 2 * sizeof(*no));
                if (!no) {
                    skpx_free(order);
                    return SKP_ENOMEM;
                }
                order = no;
                cap *= 2;
            }
            order[n++] = c;
        }
    }
    t->nodes = skpx_calloc(n, sizeof(*t->nodes));
    if (!t->nodes) {
        skpx_free(order);
        return SKP_ENOMEM;
    }
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
        an->count = b->value;                           /* self for now */
        an->duration_child_excluded = (int64_t)b->value;
        an->first_child = UINT32_MAX;
        an->next_sibling = UINT32_MAX;
    }
    /* Children come after their parent in BFS order: one backward pass makes the values
     * inclusive and links the children in order of appearance. */
    for (size_t i = n; i-- > 1;) {
        uint32_t parent = t->nodes[i].parent_id - 1;
        t->nodes[parent].count += t->nodes[i].count;
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
    struct analysis *r = skpx_calloc(1, sizeof(*r));
    if (!r)
        return SKP_ENOMEM;
    size_t total = 0;
    for (size_t i = 0; i < a->n_frames; i++)
        total += strlen(a->frames[i]) + 1;
    uint32_t *frame_off = skpx_malloc((a->n_frames ? a->n_frames : 1) * sizeof(*frame_off));
    char *arena = skpx_malloc(total ? total : 1);
    size_t n_roots = 0;
    for (uint32_t c = a->first_root; c != UINT32_MAX; c = a->nodes[c].next_sibling)
        n_roots++;
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
    for (uint32_t c = a->first_root; c != UINT32_MAX && !err; c = a->nodes[c].next_sibling) {
        err = layout(a, c, frame_off, arena, &r->trees[r->n_trees]);
        if (!err)
            r->n_trees++;
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
