/* profile.c - the call-tree aggregator. Two open-addressing tables keep adds O(depth): labels
 * (string -> id) and children ((parent node, label) -> node). Both grow at 50% load. */
#include "attach/profile.h"

#include <stdbool.h>
#include <string.h>

#include "common/alloc.h"
#include "common/grow.h"

static uint64_t fnv(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) {
        h ^= (uint8_t)*s;
        h *= 1099511628211ull;
    }
    return h;
}

static uint64_t mix(uint64_t a, uint64_t b)
{
    uint64_t h = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull + (a << 6));
    h ^= h >> 29;
    return h * 0xBF58476D1CE4E5B9ull;
}

skp_err attach_profile_init(struct attach_profile *p)
{
    memset(p, 0, sizeof(*p));
    p->cap_nodes = 1024;
    p->nodes = skpx_malloc(p->cap_nodes * sizeof(*p->nodes));
    p->cap_labels = 256;
    p->labels = skpx_malloc(p->cap_labels * sizeof(*p->labels));
    p->label_index_cap = 1024;
    p->label_index = skpx_calloc(p->label_index_cap, sizeof(uint32_t));
    p->child_index_cap = 4096;
    p->child_index = skpx_calloc(p->child_index_cap, sizeof(uint32_t));
    if (!p->nodes || !p->labels || !p->label_index || !p->child_index) {
        attach_profile_cleanup(p);
        return SKP_ENOMEM;
    }
    p->nodes[0] = (struct attach_pnode){ATTACH_PROFILE_NONE, ATTACH_PROFILE_NONE,
                                        ATTACH_PROFILE_NONE, ATTACH_PROFILE_NONE, 0};
    p->n_nodes = 1;
    return SKP_OK;
}

void attach_profile_cleanup(struct attach_profile *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_labels; i++)
        skpx_free(p->labels[i]);
    SKPX_FREE_ALL(p->labels, p->nodes, p->label_index, p->child_index);
    memset(p, 0, sizeof(*p));
}

/* Where entry i (of the labels or of the nodes) goes in the index idx of cap slots. */
typedef size_t (*index_slot_fn)(const struct attach_profile *p, size_t i, const uint32_t *idx,
                                size_t cap);

/* Doubles an index (*index of *cap slots; a slot holds entry + 1, 0 is empty) and places entries
 * first..n-1 in it by slot_of. False when out of memory: the old index stays in use. */
static bool index_double(struct attach_profile *p, uint32_t **index, size_t *cap, size_t first,
                         size_t n, index_slot_fn slot_of)
{
    size_t new_cap = *cap * 2;
    uint32_t *idx = skpx_calloc(new_cap, sizeof(uint32_t));
    if (!idx)
        return false;
    for (size_t i = first; i < n; i++)
        idx[slot_of(p, i, idx, new_cap)] = (uint32_t)i + 1;
    skpx_free(*index);
    *index = idx;
    *cap = new_cap;
    return true;
}

static size_t label_entry_slot(const struct attach_profile *p, size_t i, const uint32_t *idx,
                               size_t cap)
{
    size_t h = (size_t)(fnv(p->labels[i]) & (cap - 1));
    while (idx[h])
        h = (h + 1) & (cap - 1);
    return h;
}

/* Id of `s`, adding it when new; ATTACH_PROFILE_NONE on a bound or allocation failure. */
static uint32_t label_id(struct attach_profile *p, const char *s)
{
    size_t mask = p->label_index_cap - 1;
    size_t h = (size_t)(fnv(s) & mask);
    while (p->label_index[h]) {
        uint32_t id = p->label_index[h] - 1;
        if (strcmp(p->labels[id], s) == 0)
            return id;
        h = (h + 1) & mask;
    }
    size_t len = strlen(s);
    if (p->label_bytes + len > ATTACH_PROFILE_MAX_LABEL_BYTES)
        return ATTACH_PROFILE_NONE;
    if (skpx_grow(&p->labels, &p->cap_labels, p->n_labels + 1, sizeof(*p->labels), 256))
        return ATTACH_PROFILE_NONE;
    char *copy = skpx_strndup(s, len);
    if (!copy)
        return ATTACH_PROFILE_NONE;
    uint32_t id = (uint32_t)p->n_labels++;
    p->labels[id] = copy;
    p->label_bytes += len;
    p->label_index[h] = id + 1;
    /* on failure the table still works above 50% load, only slower; the next add retries */
    if (p->n_labels * 2 > p->label_index_cap)
        (void)index_double(p, &p->label_index, &p->label_index_cap, 0, p->n_labels,
                           label_entry_slot);
    return id;
}

static size_t child_slot(const struct attach_profile *p, uint32_t parent, uint32_t label,
                         const uint32_t *idx, size_t cap)
{
    size_t h = (size_t)(mix(parent, label) & (cap - 1));
    while (idx[h]) {
        const struct attach_pnode *n = &p->nodes[idx[h] - 1];
        if (n->parent == parent && n->label == label)
            return h;
        h = (h + 1) & (cap - 1);
    }
    return h;
}

static size_t node_entry_slot(const struct attach_profile *p, size_t i, const uint32_t *idx,
                              size_t cap)
{
    return child_slot(p, p->nodes[i].parent, p->nodes[i].label, idx, cap);
}

/* The child of `parent` with `label`, created when missing; NONE on a bound or OOM. */
static uint32_t child_of(struct attach_profile *p, uint32_t parent, uint32_t label)
{
    size_t h = child_slot(p, parent, label, p->child_index, p->child_index_cap);
    if (p->child_index[h])
        return p->child_index[h] - 1;
    if (p->n_nodes >= ATTACH_PROFILE_MAX_NODES)
        return ATTACH_PROFILE_NONE;
    if (skpx_grow(&p->nodes, &p->cap_nodes, p->n_nodes + 1, sizeof(*p->nodes), 1024))
        return ATTACH_PROFILE_NONE;
    uint32_t id = (uint32_t)p->n_nodes++;
    struct attach_pnode *n = &p->nodes[id];
    n->label = label;
    n->parent = parent;
    n->first_child = ATTACH_PROFILE_NONE;
    n->count = 0;
    /* append at the end of the sibling list: first-seen order, stable output */
    n->next_sibling = ATTACH_PROFILE_NONE;
    uint32_t *link = &p->nodes[parent].first_child;
    while (*link != ATTACH_PROFILE_NONE)
        link = &p->nodes[*link].next_sibling;
    *link = id;
    p->child_index[h] = id + 1;
    /* on failure the table works on, slower */
    if (p->n_nodes * 2 > p->child_index_cap)
        (void)index_double(p, &p->child_index, &p->child_index_cap, 1, p->n_nodes, node_entry_slot);
    return id;
}

void attach_profile_add(struct attach_profile *p, const char *const *labels, size_t n)
{
    (void)attach_profile_add_n(p, labels, n, 1);
}

void attach_profile_add_at(struct attach_profile *p, uint32_t node, uint64_t count)
{
    if (node == ATTACH_PROFILE_NONE || node == 0 || node >= p->n_nodes)
        return;
    for (size_t guard = 0; node != ATTACH_PROFILE_NONE && guard <= p->n_nodes; guard++) {
        p->nodes[node].count += count;
        node = node == 0 ? ATTACH_PROFILE_NONE : p->nodes[node].parent;
    }
    p->n_samples += count;
}

uint32_t attach_profile_add_n(struct attach_profile *p, const char *const *labels, size_t n,
                              uint64_t count)
{
    uint32_t path[4096];
    if (n > sizeof(path) / sizeof(path[0]))
        n = sizeof(path) / sizeof(path[0]); /* deeper stacks keep their outermost frames */
    uint32_t node = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t id = label_id(p, labels[i]);
        uint32_t child = id == ATTACH_PROFILE_NONE ? id : child_of(p, node, id);
        if (child == ATTACH_PROFILE_NONE) {
            p->n_dropped++;
            return ATTACH_PROFILE_NONE; /* nodes created so far keep count 0 for this sample */
        }
        path[i] = child;
        node = child;
    }
    p->nodes[0].count += count;
    for (size_t i = 0; i < n; i++)
        p->nodes[path[i]].count += count;
    p->n_samples += count;
    return n ? node : ATTACH_PROFILE_NONE;
}
