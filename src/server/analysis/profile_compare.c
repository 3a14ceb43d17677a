/* profile_compare.c - the merge of two analyses into one tree with both weights per node, and
 * the per-signature list of largest changes (profile_compare.h).
 *
 * Design: signatures are interned to small ids (a string map), and a child is found by the key
 * (parent index + 1) << 32 | signature id in a u64 map, so merging is linear in the inputs' nodes
 * whatever the fan-out. The change list walks the merged tree depth first with a per-signature
 * "on the current stack" counter, so a recursive frame's inclusive weight is counted once. */
#include "server/analysis/profile_compare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/sat.h"
#include "common/buf.h"
#include "common/frame_sig.h"
#include "common/grow.h"
#include "common/map.h"

#define NONE UINT32_MAX

struct merger {
    struct compare_result *r;
    bool by_function;
    struct skpx_strmap *names; /* names made here -> id (the result owns it): reduced (by
                                * function) and lambda-normalised signatures */
    char *buf;                 /* by function: the name being reduced */
    size_t buf_cap;
    size_t cap;
    struct skpx_strmap sigs;  /* signature -> id */
    struct skpx_u64map child; /* (parent + 1) << 32 | sig id -> node index */
    uint32_t *node_sig;       /* signature id per node (parallel to r->nodes) */
    size_t sig_cap;
    const char **sig_text; /* id -> a borrowed signature */
    size_t sig_text_cap;
};

static skp_err intern(struct merger *m, const char *sig, uint32_t *id)
{
    if (skpx_strmap_get(&m->sigs, sig, id))
        return SKP_OK;
    if (m->sigs.n >= NONE - 1)
        return SKP_ETOOBIG;
    uint32_t nid = (uint32_t)m->sigs.n;
    skp_err err =
        skpx_grow(&m->sig_text, &m->sig_text_cap, (size_t)nid + 1, sizeof(*m->sig_text), 256);
    if (err)
        return err;
    err = skpx_strmap_put(&m->sigs, sig, nid);
    if (err)
        return err;
    m->sig_text[nid] = sig;
    *id = nid;
    return SKP_OK;
}

size_t compare_function_len(const char *sig, bool *close_paren)
{
    return analysis_function_len(sig, close_paren); /* one rule for every trace analysis */
}

/* `text` (NUL-terminated) as a name owned by m->names (stable until compare_free). */
static skp_err own_name(struct merger *m, const char *text, const char **out)
{
    uint32_t v;
    if (skpx_strmap_find(m->names, text, &v, out))
        return SKP_OK;
    skp_err err = skpx_strmap_put(m->names, text, (uint32_t)m->names->n);
    if (err)
        return err;
    skpx_strmap_find(m->names, text, &v, out);
    return SKP_OK;
}

/* A JFR lambda frame names its hidden class with an id of the recording
 * ("pkg.Outer$$Lambda$88+0x00007fb024007a08.846947180.run:-1"): the same lambda has another id
 * in another recording, so it is matched by the name without it ("pkg.Outer$$Lambda.run:-1", what
 * the UI shows, see frame_sig.h). Other signatures are left as they are. */
static skp_err normalize_lambda(struct merger *m, const char *sig, const char **out)
{
    *out = sig;
    if (!strstr(sig, "$$Lambda$"))
        return SKP_OK;
    size_t len = strlen(sig);
    struct skpx_frame_sig f;
    skpx_frame_sig_parse(sig, len, &f);
    if (f.cut_len == 0)
        return SKP_OK;
    skp_err err = skpx_grow(&m->buf, &m->buf_cap, len + 1, 1, 256);
    if (err)
        return err;
    memcpy(m->buf, sig, f.cut_off);
    memcpy(m->buf + f.cut_off, sig + f.cut_off + f.cut_len, len - f.cut_off - f.cut_len);
    m->buf[len - f.cut_len] = '\0';
    return own_name(m, m->buf, out);
}

/* By function: the reduced name of `sig`, owned by m->names (stable until compare_free). */
static skp_err reduce(struct merger *m, const char *sig, const char **out)
{
    bool paren;
    size_t len = compare_function_len(sig, &paren);
    skp_err err = skpx_grow(&m->buf, &m->buf_cap, len + 2, 1, 256);
    if (err)
        return err;
    memcpy(m->buf, sig, len);
    if (paren)
        m->buf[len++] = ')';
    m->buf[len] = '\0';
    return own_name(m, m->buf, out);
}

/* The merged node for `sig` under `parent` (NONE = a root), created when missing. */
static skp_err node_for(struct merger *m, uint32_t parent, const char *sig, uint32_t *out)
{
    uint32_t sid;
    skp_err err = normalize_lambda(m, sig, &sig);
    if (!err && m->by_function)
        err = reduce(m, sig, &sig);
    if (!err)
        err = intern(m, sig, &sid);
    if (err)
        return err;
    uint64_t key = ((uint64_t)(parent == NONE ? 0 : parent + 1) << 32) | sid;
    uint64_t v;
    if (skpx_u64map_get(&m->child, key, &v)) {
        *out = (uint32_t)v;
        return SKP_OK;
    }
    struct compare_result *r = m->r;
    if (r->n_nodes >= NONE - 1)
        return SKP_ETOOBIG;
    err = skpx_grow(&r->nodes, &m->cap, r->n_nodes + 1, sizeof(*r->nodes), 1024);
    if (!err)
        err = skpx_grow(&m->node_sig, &m->sig_cap, r->n_nodes + 1, sizeof(*m->node_sig), 1024);
    if (err)
        return err;
    uint32_t idx = (uint32_t)r->n_nodes;
    err = skpx_u64map_put(&m->child, key, idx);
    if (err)
        return err;
    struct compare_node *n = &r->nodes[idx];
    memset(n, 0, sizeof(*n));
    n->sig = sig;
    n->parent = parent;
    n->depth = parent == NONE ? 0 : r->nodes[parent].depth + 1;
    m->node_sig[idx] = sid;
    r->n_nodes++;
    *out = idx;
    return SKP_OK;
}

static skp_err add_side(struct merger *m, const struct analysis *a, int side)
{
    uint32_t *map = NULL; /* analysis node id - 1 -> merged index */
    size_t map_cap = 0;
    skp_err err = SKP_OK;
    for (size_t t = 0; t < a->n_trees && !err; t++) {
        const struct analysis_tree *tr = &a->trees[t];
        if (tr->n_nodes == 0)
            continue;
        err = skpx_grow(&map, &map_cap, tr->n_nodes, sizeof(*map), tr->n_nodes);
        if (err)
            break;
        for (size_t i = 0; i < tr->n_nodes; i++)
            map[i] = NONE;
        for (size_t i = 0; i < tr->n_nodes && !err; i++) {
            const struct analysis_node *an = &tr->nodes[i];
            if (an->id == 0 || an->id > tr->n_nodes || map[an->id - 1] != NONE) {
                err = SKP_EINVAL;
                break;
            }
            uint32_t parent = NONE;
            if (an->parent_id != 0) {
                if (an->parent_id > tr->n_nodes || map[an->parent_id - 1] == NONE) {
                    err = SKP_EINVAL;
                    break;
                }
                parent = map[an->parent_id - 1];
            }
            uint32_t idx;
            err = node_for(m, parent, an->code_signature ? an->code_signature : "", &idx);
            if (err)
                break;
            map[an->id - 1] = idx;
            int64_t w = an->count > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)an->count;
            m->r->nodes[idx].weight[side] = skpx_sat_add_i64(m->r->nodes[idx].weight[side], w);
            if (parent == NONE)
                m->r->total[side] = skpx_sat_add_i64(m->r->total[side], w);
        }
    }
    skpx_free(map);
    return err;
}

static int change_cmp(const void *pa, const void *pb)
{
    const struct compare_change *a = pa, *b = pb;
    double da = fabs(a->delta), db = fabs(b->delta);
    if (da != db)
        return da > db ? -1 : 1;
    double sa = fabs(a->self_delta), sb = fabs(b->self_delta);
    if (sa != sb)
        return sa > sb ? -1 : 1;
    return strcmp(a->sig, b->sig);
}

static double ratio(int64_t w, int64_t total)
{
    return total > 0 ? (double)w / (double)total : 0.0;
}

/* Self weights, then the per-signature totals by a depth-first walk. */
static skp_err build_changes(struct merger *m)
{
    struct compare_result *r = m->r;
    size_t n = r->n_nodes, n_sigs = m->sigs.n;
    skp_err err = SKP_OK;
    uint32_t *first = skpx_malloc((n ? n : 1) * sizeof(*first));
    uint32_t *next = skpx_malloc((n ? n : 1) * sizeof(*next));
    uint32_t *stack = skpx_malloc((n ? n : 1) * sizeof(*stack));
    uint32_t *on_stack = skpx_calloc(n_sigs ? n_sigs : 1, sizeof(*on_stack));
    r->changes = skpx_calloc(n_sigs ? n_sigs : 1, sizeof(*r->changes));
    if (!first || !next || !stack || !on_stack || !r->changes) {
        err = SKP_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        first[i] = next[i] = NONE;
        for (int s = 0; s < 2; s++)
            r->nodes[i].self[s] = r->nodes[i].weight[s];
    }
    /* Children linked in reverse creation order, then each list is walked as is: the order
     * only matters for the walk, not for the result. */
    uint32_t roots = NONE;
    for (size_t i = n; i-- > 0;) {
        uint32_t p = r->nodes[i].parent;
        if (p == NONE) {
            next[i] = roots;
            roots = (uint32_t)i;
        } else {
            next[i] = first[p];
            first[p] = (uint32_t)i;
            for (int s = 0; s < 2; s++)
                r->nodes[p].self[s] = skpx_sat_sub_i64(r->nodes[p].self[s], r->nodes[i].weight[s]);
        }
    }
    for (size_t i = 0; i < n; i++)
        for (int s = 0; s < 2; s++)
            if (r->nodes[i].self[s] < 0)
                r->nodes[i].self[s] = 0;
    for (size_t i = 0; i < n_sigs; i++)
        r->changes[i].sig = m->sig_text[i];
    r->n_changes = n_sigs;
    /* Iterative DFS: a node is pushed when entered; its signature stays "on the stack" until
     * the walk leaves it. `stack` holds the path; a
     * finished node's walk goes on at its next sibling. */
    size_t depth = 0;
    uint32_t cur = roots;
    while (cur != NONE || depth > 0) {
        if (cur != NONE) {
            const struct compare_node *nd = &r->nodes[cur];
            uint32_t sid = m->node_sig[cur];
            struct compare_change *c = &r->changes[sid];
            for (int s = 0; s < 2; s++) {
                if (on_stack[sid] == 0)
                    c->weight[s] = skpx_sat_add_i64(c->weight[s], nd->weight[s]);
                c->self[s] = skpx_sat_add_i64(c->self[s], nd->self[s]);
            }
            on_stack[sid]++;
            stack[depth++] = cur;
            cur = first[cur];
        } else {
            uint32_t done = stack[--depth];
            on_stack[m->node_sig[done]]--;
            cur = next[done];
        }
    }
    for (size_t i = 0; i < n_sigs; i++) {
        struct compare_change *c = &r->changes[i];
        for (int s = 0; s < 2; s++) {
            c->share[s] = ratio(c->weight[s], r->total[s]);
            c->self_share[s] = ratio(c->self[s], r->total[s]);
        }
        c->delta = c->share[COMPARE_TARGET] - c->share[COMPARE_BASE];
        c->self_delta = c->self_share[COMPARE_TARGET] - c->self_share[COMPARE_BASE];
    }
    if (n_sigs > 1)
        qsort(r->changes, n_sigs, sizeof(*r->changes), change_cmp);
out:
    SKPX_FREE_ALL(first, next, stack, on_stack);
    return err;
}

skp_err compare_analyses(const struct analysis *base, const struct analysis *target,
                         bool by_function, struct compare_result **out)
{
    if (!out)
        return SKP_EINVAL;
    *out = NULL;
    if (!base || !target)
        return SKP_EINVAL;
    struct merger m = {.by_function = by_function};
    m.r = skpx_calloc(1, sizeof(*m.r));
    if (!m.r)
        return SKP_ENOMEM;
    m.names = skpx_calloc(1, sizeof(*m.names));
    if (!m.names) {
        skpx_free(m.r);
        return SKP_ENOMEM;
    }
    m.r->_names = m.names;
    skp_err err = add_side(&m, base, COMPARE_BASE);
    if (!err)
        err = add_side(&m, target, COMPARE_TARGET);
    if (!err)
        err = build_changes(&m);
    skpx_strmap_cleanup(&m.sigs);
    skpx_u64map_cleanup(&m.child);
    SKPX_FREE_ALL(m.node_sig, m.sig_text, m.buf);
    if (err) {
        compare_free(m.r);
        return err;
    }
    *out = m.r;
    return SKP_OK;
}

double compare_share(const struct compare_result *r, const struct compare_node *n, int side)
{
    return ratio(n->weight[side], r->total[side]);
}

void compare_free(struct compare_result *r)
{
    if (!r)
        return;
    skpx_free(r->nodes);
    skpx_free(r->changes);
    if (r->_names) {
        skpx_strmap_cleanup(r->_names);
        skpx_free(r->_names);
    }
    skpx_free(r);
}
