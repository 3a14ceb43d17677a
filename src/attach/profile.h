/* profile.h - aggregation of sampled stacks into a call tree (a trie keyed by frame label):
 * what `skyprof record` accumulates before rendering a file. Labels are interned once; every
 * node counts the samples whose stack passes through it. Bounded: past ATTACH_PROFILE_MAX_NODES
 * nodes or ATTACH_PROFILE_MAX_LABEL_BYTES of labels, new stacks are dropped and counted.
 * Single-threaded. */
#ifndef SKP_ATTACH_PROFILE_H
#define SKP_ATTACH_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "skyprof/skp_err.h"

/* A 60 s recording of a large service at 100 Hz stays far below this. */
#define ATTACH_PROFILE_MAX_NODES (1u << 21)
#define ATTACH_PROFILE_MAX_LABEL_BYTES ((size_t)64 * 1024 * 1024)
#define ATTACH_PROFILE_NONE UINT32_MAX

struct attach_pnode {
    uint32_t label; /* index into labels; node 0 (the virtual root) has none */
    uint32_t parent;
    uint32_t first_child, next_sibling; /* ATTACH_PROFILE_NONE when none */
    uint64_t count;                     /* samples through this node */
};

struct attach_profile {
    struct attach_pnode *nodes; /* owned; nodes[0] is the virtual root */
    size_t n_nodes, cap_nodes;
    char **labels; /* owned, NUL-terminated */
    size_t n_labels, cap_labels, label_bytes;
    uint32_t *label_index; /* open addressing over labels (hash -> id+1) */
    size_t label_index_cap;
    uint32_t *child_index; /* open addressing over (parent, label) -> node+1 */
    size_t child_index_cap;
    uint64_t n_samples; /* stacks added */
    uint64_t n_dropped; /* stacks dropped because a bound was reached */
};

/* Creates an empty profile (release with attach_profile_cleanup). Errors: SKP_ENOMEM. */
SKP_MUST_CHECK skp_err attach_profile_init(struct attach_profile *p);
void attach_profile_cleanup(struct attach_profile *p);

/* Adds one sample whose stack is labels[0..n) from the OUTERMOST frame to the innermost (labels
 * borrowed, copied when new). A stack that does not fit the bounds (or meets an allocation
 * failure) is dropped and counted in n_dropped; frames past the 4096th are left out. */
void attach_profile_add(struct attach_profile *p, const char *const *labels, size_t n);
/* The same with `count` samples at once (count > 0); returns the stack's innermost node (to add
 * more to the same stack with attach_profile_add_at), or ATTACH_PROFILE_NONE when it was dropped
 * (or n is 0). */
uint32_t attach_profile_add_n(struct attach_profile *p, const char *const *labels, size_t n,
                              uint64_t count);
/* Adds `count` samples to the stack that ends at `node` (a node attach_profile_add_n returned):
 * every node from it to the root. NONE or an unknown node: nothing. */
void attach_profile_add_at(struct attach_profile *p, uint32_t node, uint64_t count);

#endif
