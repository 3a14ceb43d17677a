/* export_collapsed.c - Brendan Gregg's collapsed ("folded") stacks: one line per node that was
 * the innermost frame of at least one snapshot, "root;child;leaf N" with N = the node's self
 * count (snapshots, not milliseconds), so the counts of all lines add up to the number of
 * snapshots analysed. Loaded by flamegraph.pl, inferno, speedscope and most flame graph tools.
 * Frames are rewritten so no tool mistakes a part of one for a count (see
 * export_put_collapsed_frame). With export_meta.readable_names each frame is first given its
 * readable name (py-spy's "do_POST (seed_app.py:44)", common/frame_sig.h). */
#include "server/export/export_int.h"

#include <stdbool.h>
#include <string.h>

#include "common/frame_sig.h"

/* Length of the trailing number of `s[0..n)` ("8", "12.5"), 0 if it does not end in a digit. */
static size_t trailing_number(const char *s, size_t n)
{
    size_t d = n;
    while (d > 0 && s[d - 1] >= '0' && s[d - 1] <= '9')
        d--;
    if (d == n)
        return 0;
    if (d > 1 && s[d - 1] == '.' && s[d - 2] >= '0' && s[d - 2] <= '9') {
        d--;
        while (d > 0 && s[d - 1] >= '0' && s[d - 1] <= '9')
            d--;
    }
    return n - d;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

void export_put_collapsed_frame(struct skpx_buf *b, const char *sig)
{
    const char *s = sig ? sig : "(null)";
    size_t n = strlen(s);
    /* A frame ending in blanks + a number ("slow_b: 8") reads as a count column to the tools
     * (flamegraph.pl takes "a;slow_b: 8 39" as a differential profile), so that blank run goes:
     * dropped after ':' ("slow_b:8"), one '_' otherwise ("worker_7"). Trailing blanks alone go
     * too. */
    while (n > 0 && is_blank(s[n - 1]))
        n--;
    size_t keep_end = n - trailing_number(s, n); /* where the trailing number starts */
    size_t blank = keep_end;                     /* where the blanks before it start */
    while (blank > 0 && is_blank(s[blank - 1]))
        blank--;
    for (size_t i = 0; i < n;) {
        if (i == blank && blank < keep_end) {
            if (blank > 0 && s[blank - 1] != ':')
                skpx_buf_put(b, "_", 1);
            i = keep_end;
            continue;
        }
        char c = s[i];
        if (c == ';')
            c = ',';
        else if (is_blank(c))
            c = ' ';
        skpx_buf_put(b, &c, 1);
        i++;
    }
    if (n == 0)
        skpx_buf_put(b, "?", 1); /* an empty frame would merge with its neighbour's ';' */
}

struct collapsed_ctx {
    struct skpx_buf *out;
    bool readable;
    struct skpx_buf name; /* scratch: one frame's readable name */
};

static skp_err visit(void *ud, const struct analysis_tree *t,
                     const struct analysis_node *const *path, size_t depth)
{
    struct collapsed_ctx *c = ud;
    struct skpx_buf *b = c->out;
    uint64_t self = export_node_self_count(t, path[depth]);
    if (self == 0)
        return b->err;
    for (size_t i = 0; i <= depth; i++) {
        if (i)
            skpx_buf_put(b, ";", 1);
        const char *sig = path[i]->code_signature;
        if (c->readable && sig) {
            struct skpx_frame_sig f;
            skpx_frame_sig_parse(sig, strlen(sig), &f);
            skpx_buf_reset(&c->name);
            skpx_frame_sig_put_name(&c->name, &f);
            skpx_buf_putc(&c->name, '\0');
            if (c->name.err)
                return c->name.err;
            sig = (const char *)c->name.data;
        }
        export_put_collapsed_frame(b, sig);
    }
    skpx_buf_printf(b, " %llu\n", (unsigned long long)self);
    return b->err;
}

skp_err export_render_collapsed(const struct analysis *a, const struct export_meta *m,
                                struct skpx_buf *b)
{
    struct collapsed_ctx c = {.out = b, .readable = m->readable_names};
    skpx_buf_init(&c.name, EXPORT_MAX_OUTPUT_BYTES);
    skp_err err = export_walk(a, visit, &c);
    skpx_buf_cleanup(&c.name);
    return err ? err : b->err;
}
