/* export_collapsed.c - Brendan Gregg's collapsed ("folded") stacks: one line per node that was
 * the innermost frame of at least one snapshot, "root;child;leaf N" with N = the node's self
 * count (snapshots, not milliseconds), so the counts of all lines add up to the number of
 * snapshots analysed. Loaded by flamegraph.pl, inferno, speedscope and most flame graph tools. */
#include "server/export_int.h"

void export_put_collapsed_frame(struct skpx_buf *b, const char *sig)
{
    const char *s = sig ? sig : "(null)";
    const char *run = s;
    for (; *s; s++) {
        char repl;
        if (*s == ';')
            repl = ',';
        else if (*s == '\n' || *s == '\r' || *s == '\t')
            repl = ' ';
        else
            continue;
        skpx_buf_put(b, run, (size_t)(s - run));
        skpx_buf_put(b, &repl, 1);
        run = s + 1;
    }
    skpx_buf_put(b, run, (size_t)(s - run));
}

static skp_err visit(void *ud, const struct analysis_tree *t,
                     const struct analysis_node *const *path, size_t depth)
{
    struct skpx_buf *b = ud;
    uint64_t self = export_node_self_count(t, path[depth]);
    if (self == 0)
        return b->err;
    for (size_t i = 0; i <= depth; i++) {
        if (i)
            skpx_buf_put(b, ";", 1);
        export_put_collapsed_frame(b, path[i]->code_signature);
    }
    skpx_buf_printf(b, " %llu\n", (unsigned long long)self);
    return b->err;
}

skp_err export_render_collapsed(const struct analysis *a, const struct export_meta *m,
                                struct skpx_buf *b)
{
    (void)m;
    skp_err err = export_walk(a, visit, b);
    return err ? err : b->err;
}
