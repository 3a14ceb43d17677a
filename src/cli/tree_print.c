/* tree_print.c - see tree_print.h. Elements arrive flat (BFS order, parentId 0 for the root);
 * they are linked into child lists by id, folded (hidden frames give way to their children,
 * equal siblings merged by signature) into a second node array, and printed depth-first with an
 * explicit stack. */
#include "cli/tree_print.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/alloc.h"
#include "common/buf.h"
#include "common/frame_sig.h"
#include "common/map.h"

#define NONE SIZE_MAX
/* Longest label printed (a signature is cut to this many bytes). */
#define LABEL_MAX 4096

struct tnode {
    const char *sig;
    int64_t duration, self, count;
    size_t first_child, next_sibling, last_child; /* NONE = none */
    bool top;
};

static int cmp_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

static int64_t jint(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    if (json_is_integer(v))
        return json_integer_value(v);
    if (json_is_string(v))
        return strtoll(json_string_value(v), NULL, 10);
    if (json_is_real(v))
        return (int64_t)json_real_value(v);
    return 0;
}

static size_t columns(const char *s, size_t len)
{
    size_t cols = 0;
    for (size_t i = 0; i < len; i++)
        cols += ((unsigned char)s[i] & 0xC0) != 0x80;
    return cols;
}

/* Copies s[0..len) into dst (cap bytes) as at most `avail` display columns, cutting the middle
 * with "..." and never splitting a UTF-8 sequence. Counts bytes as columns except continuation
 * bytes. */
static void shorten(char *dst, size_t cap, const char *s, size_t len, size_t avail)
{
    if (columns(s, len) <= avail || avail < 8) {
        snprintf(dst, cap, "%.*s", (int)len, s);
        return;
    }
    size_t tail_cols = avail / 2;
    size_t head_cols = avail - tail_cols - 3;
    size_t head = 0, c = 0;
    while (head < len && (c < head_cols || ((unsigned char)s[head] & 0xC0) == 0x80)) {
        c += ((unsigned char)s[head] & 0xC0) != 0x80;
        head++;
    }
    if (c > head_cols && head > 0) {
        /* Back off the last full character. */
        do
            head--;
        while (head > 0 && ((unsigned char)s[head] & 0xC0) == 0x80);
    }
    size_t tail = len, tc = 0;
    while (tail > 0 && tc < tail_cols) {
        tail--;
        tc += ((unsigned char)s[tail] & 0xC0) != 0x80;
    }
    while (tail < len && ((unsigned char)s[tail] & 0xC0) == 0x80)
        tail++;
    snprintf(dst, cap, "%.*s...%.*s", (int)head, s, (int)(len - tail), s + tail);
}

void tree_print_label(char *dst, size_t cap, const char *sig, size_t avail)
{
    struct skpx_frame_sig f;
    size_t n = strnlen(sig, LABEL_MAX);
    skpx_frame_sig_parse(sig, n, &f);
    struct skpx_buf func, loc;
    skpx_buf_init(&func, LABEL_MAX);
    skpx_buf_init(&loc, LABEL_MAX);
    skpx_frame_sig_put_func(&func, &f);
    skpx_frame_sig_put_loc(&loc, &f);
    if (func.err || loc.err || !func.data) {
        shorten(dst, cap, sig, n, avail); /* cannot happen within LABEL_MAX; the raw text then */
    } else {
        size_t loc_cols = loc.len ? columns((const char *)loc.data, loc.len) + 2 : 0;
        size_t func_avail = avail > loc_cols + 12 ? avail - loc_cols : 12;
        shorten(dst, cap, (const char *)func.data, func.len, func_avail);
        if (loc.len) {
            size_t used = strlen(dst);
            snprintf(dst + used, cap - used, "  %.*s", (int)loc.len, (const char *)loc.data);
        }
    }
    skpx_buf_cleanup(&func);
    skpx_buf_cleanup(&loc);
}

/* The runner: runpy's frames below `python -m MODULE` (a file runpy.py, or 3.11+'s frozen
 * "<frozen runpy>.func: N"). */
static bool runner_frame(const char *sig, const struct skpx_frame_sig *f)
{
    static const char frozen[] = "<frozen runpy>.";
    if (strncmp(sig, frozen, sizeof(frozen) - 1) == 0)
        return true;
    if (f->lang != SKPX_FRAME_PYTHON || f->file_len < 8)
        return false;
    const char *file = f->sig + f->file_off;
    return memcmp(file + f->file_len - 8, "runpy.py", 8) == 0 &&
           (f->file_len == 8 || file[f->file_len - 9] == '/');
}

bool tree_print_hidden_frame(const char *sig)
{
    struct skpx_frame_sig f;
    skpx_frame_sig_parse(sig, strlen(sig), &f);
    return f.is_agent || runner_frame(sig, &f);
}

bool tree_print_has_data(json_t *analysis)
{
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(analysis, "trees"), i, t) {
        if (json_array_size(json_object_get(t, "elements")) > 0)
            return true;
    }
    return false;
}

/* Links the elements of one tree into `in` (n nodes, zeroed by the caller's calloc); returns
 * the roots in input order (skpx_free), their number in *n_roots. */
static size_t *link_tree(json_t *elements, struct tnode *in, size_t n, size_t *n_roots)
{
    int64_t *ids = skpx_xcalloc(n, sizeof(*ids));
    int64_t *parents = skpx_xcalloc(n, sizeof(*parents));
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(elements, i);
        const char *sig = json_string_value(json_object_get(e, "codeSignature"));
        in[i] = (struct tnode){sig ? sig : "?",
                               jint(e, "duration"),
                               jint(e, "durationChildExcluded"),
                               jint(e, "count"),
                               NONE,
                               NONE,
                               NONE,
                               false};
        ids[i] = jint(e, "id");
        parents[i] = jint(e, "parentId");
    }
    /* Ids are 1..n per tree (BFS order), so a direct index finds a parent; ids outside that
     * range fall back to a linear scan. */
    size_t *by_id = skpx_xcalloc(n + 1, sizeof(*by_id));
    for (size_t i = 0; i <= n; i++)
        by_id[i] = NONE;
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= 1 && (uint64_t)ids[i] <= n && by_id[ids[i]] == NONE)
            by_id[ids[i]] = i;
    size_t *roots = skpx_xcalloc(n, sizeof(*roots));
    *n_roots = 0;
    for (size_t i = 0; i < n; i++) {
        size_t p = NONE;
        int64_t pid = parents[i];
        if (pid >= 1 && (uint64_t)pid <= n) {
            p = by_id[pid];
        } else if (pid != 0) {
            for (size_t k = 0; k < n && p == NONE; k++)
                if (ids[k] == pid)
                    p = k;
        }
        if (p == i)
            p = NONE;
        if (p == NONE) {
            roots[(*n_roots)++] = i;
            continue;
        }
        if (in[p].first_child == NONE)
            in[p].first_child = i;
        else
            in[in[p].last_child].next_sibling = i;
        in[p].last_child = i;
    }
    SKPX_FREE_ALL(by_id, parents, ids);
    return roots;
}

struct fold {
    struct tnode *out;
    size_t n_out;
    struct skpx_strmap sig_ids;  /* signature -> small id */
    struct skpx_u64map child_of; /* (out parent + 1) << 32 | sig id -> out node */
    size_t *roots;               /* out roots in order */
    size_t n_roots;
    size_t hidden;       /* input frames folded away */
    int64_t hidden_self; /* self weight of hidden roots (no caller to take it) */
};

/* As skpx_xmalloc does when memory runs out: the CLI cannot go on. */
static void oom(void)
{
    fputs("skyprof: out of memory\n", stderr);
    abort();
}

/* The out node for `sig` under out parent `parent` (NONE: a root), created empty when new. */
static size_t out_node(struct fold *fd, size_t parent, const char *sig)
{
    uint32_t sid;
    if (!skpx_strmap_get(&fd->sig_ids, sig, &sid)) {
        sid = (uint32_t)fd->sig_ids.n;
        if (skpx_strmap_put(&fd->sig_ids, sig, sid) != SKP_OK)
            oom();
    }
    uint64_t key = ((uint64_t)(parent == NONE ? 0 : parent + 1) << 32) | sid;
    uint64_t v;
    if (skpx_u64map_get(&fd->child_of, key, &v))
        return (size_t)v;
    size_t k = fd->n_out++;
    fd->out[k] = (struct tnode){sig, 0, 0, 0, NONE, NONE, NONE, false};
    if (skpx_u64map_put(&fd->child_of, key, k) != SKP_OK)
        oom();
    if (parent == NONE) {
        fd->roots[fd->n_roots++] = k;
    } else {
        if (fd->out[parent].first_child == NONE)
            fd->out[parent].first_child = k;
        else
            fd->out[fd->out[parent].last_child].next_sibling = k;
        fd->out[parent].last_child = k;
    }
    return k;
}

/* Copies the tree `in` (n nodes, roots) into fd->out, folding hidden frames unless all. The walk
 * is depth-first in input order, so siblings keep the order they first appear in. */
static void fold_tree(struct fold *fd, struct tnode *in, size_t n, const size_t *roots,
                      size_t n_roots, bool all)
{
    size_t *stack = skpx_xcalloc(n + 1, sizeof(*stack));
    size_t *parent = skpx_xcalloc(n + 1, sizeof(*parent));
    char *visited = skpx_xcalloc(n, 1);
    size_t *kids = skpx_xcalloc(n, sizeof(*kids));
    for (size_t r = 0; r < n_roots; r++) {
        size_t sp = 0;
        stack[sp] = roots[r];
        parent[sp++] = NONE;
        while (sp > 0) {
            sp--;
            size_t i = stack[sp], p = parent[sp];
            if (visited[i])
                continue; /* a malformed (cyclic) input: take each element once */
            visited[i] = 1;
            size_t here;
            if (!all && tree_print_hidden_frame(in[i].sig)) {
                fd->hidden++;
                if (p != NONE)
                    fd->out[p].self += in[i].self;
                else
                    fd->hidden_self += in[i].self;
                here = p; /* the children take its place */
            } else {
                here = out_node(fd, p, in[i].sig);
                fd->out[here].duration += in[i].duration;
                fd->out[here].self += in[i].self;
                fd->out[here].count += in[i].count;
            }
            /* Push children in reverse so the first child is taken first. */
            size_t nk = 0;
            for (size_t ch = in[i].first_child; ch != NONE && nk < n; ch = in[ch].next_sibling)
                kids[nk++] = ch;
            for (size_t q = nk; q-- > 0 && sp <= n;) {
                stack[sp] = kids[q];
                parent[sp++] = here;
            }
        }
    }
    SKPX_FREE_ALL(kids, visited, parent, stack);
}

static void print_nodes(FILE *out, const struct fold *fd, int width)
{
    size_t n = fd->n_out;
    size_t *stack = skpx_xcalloc(n + 1, sizeof(*stack));
    int *depth = skpx_xcalloc(n + 1, sizeof(*depth));
    size_t *kids = skpx_xcalloc(n + 1, sizeof(*kids));
    char *line = skpx_xmalloc(LABEL_MAX + 64);
    for (size_t r = 0; r < fd->n_roots; r++) {
        size_t sp = 0;
        stack[sp] = fd->roots[r];
        depth[sp++] = 0;
        while (sp > 0) {
            sp--;
            size_t i = stack[sp];
            int d = depth[sp];
            int lvl = d < TREE_PRINT_MAX_INDENT_LEVELS ? d : TREE_PRINT_MAX_INDENT_LEVELS;
            char prefix[TREE_PRINT_MAX_INDENT_LEVELS * 2 + 16];
            int pl = snprintf(prefix, sizeof(prefix), "%*s", lvl * 2, "");
            if (d > TREE_PRINT_MAX_INDENT_LEVELS)
                pl += snprintf(prefix + pl, sizeof(prefix) - (size_t)pl, "[%d] ", d);
            /* The number columns take 35 characters ("%12 %11+marker %7" and two spaces). */
            int avail = width - 35 - pl;
            if (avail < 20)
                avail = 20;
            tree_print_label(line, LABEL_MAX + 64, fd->out[i].sig, (size_t)avail);
            fprintf(out, "%12lld %11lld%c %7lld  %s%s\n", (long long)fd->out[i].duration,
                    (long long)fd->out[i].self, fd->out[i].top ? '*' : ' ',
                    (long long)fd->out[i].count, prefix, line);
            size_t nk = 0;
            for (size_t ch = fd->out[i].first_child; ch != NONE && nk < n;
                 ch = fd->out[ch].next_sibling)
                kids[nk++] = ch;
            for (size_t q = nk; q-- > 0 && sp <= n;) {
                stack[sp] = kids[q];
                depth[sp++] = d + 1;
            }
        }
    }
    SKPX_FREE_ALL(line, kids, depth, stack);
}

/* The header's short form of an API unit: "ms" for a trace profile (NULL). */
static const char *short_unit(const char *unit)
{
    static const char *const map[][2] = {
        {"nanoseconds", "ns"}, {"microseconds", "us"}, {"milliseconds", "ms"},
        {"seconds", "s"},      {"bytes", "bytes"},     {"count", "count"},
    };
    if (!unit)
        return "ms";
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (strcmp(unit, map[i][0]) == 0)
            return map[i][1];
    return unit;
}

int tree_print(FILE *out, json_t *analysis, const struct tree_print_opts *opts)
{
    json_t *trees = json_object_get(analysis, "trees");
    if (!json_is_array(trees))
        return -1;
    int width = opts->width < 40 ? 40 : opts->width;
    const char *tip = json_string_value(json_object_get(analysis, "tip"));
    if (tip && *tip)
        fprintf(out, "tip: %s\n", tip);
    if (!tree_print_has_data(analysis)) {
        if (!tip || !*tip)
            fprintf(out, "no profile data\n");
        return 0;
    }
    size_t total = 0, i;
    json_t *t;
    json_array_foreach(trees, i, t)
        total += json_array_size(json_object_get(t, "elements"));

    struct fold fd;
    memset(&fd, 0, sizeof(fd));
    fd.out = skpx_xcalloc(total, sizeof(*fd.out));
    fd.roots = skpx_xcalloc(total, sizeof(*fd.roots));
    size_t *tree_start = skpx_xcalloc(json_array_size(trees) + 1, sizeof(*tree_start));
    json_array_foreach(trees, i, t) {
        json_t *elements = json_object_get(t, "elements");
        size_t n = json_array_size(elements);
        tree_start[i] = fd.n_roots;
        if (n == 0)
            continue;
        struct tnode *in = skpx_xcalloc(n, sizeof(*in));
        size_t n_roots;
        size_t *roots = link_tree(elements, in, n, &n_roots);
        /* Each tree folds on its own: its roots never merge with another tree's. */
        skpx_u64map_clear(&fd.child_of);
        fold_tree(&fd, in, n, roots, n_roots, opts->all_frames);
        skpx_free(roots);
        skpx_free(in);
    }
    tree_start[json_array_size(trees)] = fd.n_roots;

    /* Threshold for the starred "top slow" frames: the 10th largest positive self value. */
    int64_t cut = 0;
    if (fd.n_out > 0) {
        int64_t *selfs = skpx_xcalloc(fd.n_out, sizeof(*selfs));
        for (size_t k = 0; k < fd.n_out; k++)
            selfs[k] = fd.out[k].self;
        qsort(selfs, fd.n_out, sizeof(*selfs), cmp_desc);
        size_t idx = fd.n_out < TREE_PRINT_TOP_SLOW ? fd.n_out - 1 : TREE_PRINT_TOP_SLOW - 1;
        cut = selfs[0] <= 0 ? 0 : selfs[idx] > 0 ? selfs[idx] : 1;
        skpx_free(selfs);
    }
    for (size_t k = 0; k < fd.n_out; k++)
        fd.out[k].top = cut > 0 && fd.out[k].self >= cut;

    const char *u = short_unit(opts->unit);
    char h_total[32], h_self[32];
    snprintf(h_total, sizeof(h_total), "%s(%s)", opts->unit ? "TOTAL" : "DURATION", u);
    snprintf(h_self, sizeof(h_self), "SELF(%s)", u);
    fprintf(out, "%12s %12s %7s  %s\n", h_total, h_self, "COUNT", "STACK");
    size_t all_roots = fd.n_roots;
    for (size_t k = 0; k < json_array_size(trees); k++) {
        if (tree_start[k] == tree_start[k + 1])
            continue;
        if (tree_start[k] > 0)
            fputc('\n', out);
        fd.roots += tree_start[k];
        fd.n_roots = tree_start[k + 1] - tree_start[k];
        print_nodes(out, &fd, width);
        fd.roots -= tree_start[k];
    }
    fd.n_roots = all_roots;
    if (cut > 0)
        fprintf(out, "(* = one of the %d largest self %s)\n", TREE_PRINT_TOP_SLOW,
                opts->unit ? "values" : "durations");
    if (fd.hidden > 0) {
        fprintf(out, "(%zu frame(s) of the agent and the runner folded into their callers",
                fd.hidden);
        if (fd.hidden_self > 0)
            fprintf(out, "; %lld %s of self time in hidden root frames", (long long)fd.hidden_self,
                    u);
        fprintf(out, "; --all-frames shows them)\n");
    }
    SKPX_FREE_ALL(tree_start, fd.roots, fd.out);
    skpx_strmap_cleanup(&fd.sig_ids);
    skpx_u64map_cleanup(&fd.child_of);
    return 0;
}

int tree_print_exit(FILE *out, json_t *analysis, const struct tree_print_opts *opts)
{
    if (tree_print(out, analysis, opts) == 0)
        return CLI_EXIT_OK;
    fprintf(stderr, "skyprof: the server's analysis has an unexpected shape\n");
    return CLI_EXIT_API;
}

int tree_print_profile(json_t *analysis, bool all_frames)
{
    const char *unit = cli_json_str(analysis, "unit");
    struct tree_print_opts opts = {
        .width = cli_term_width(), .unit = *unit ? unit : "count", .all_frames = all_frames};
    return tree_print_exit(stdout, analysis, &opts);
}
