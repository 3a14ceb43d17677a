/* tree_print.c - see tree_print.h. Elements arrive flat (BFS order, parentId 0 for the root);
 * they are linked into child lists by id and printed depth-first with an explicit stack. */
#include "cli/tree_print.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"

struct tnode {
    const char *sig;
    int64_t duration, self, count;
    int64_t id, parent;
    size_t first_child, next_sibling, last_child; /* SIZE_MAX = none */
    int depth;
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

/* Copies at most `avail` display columns of `s` into dst, cutting the middle with "..." and never
 * splitting a UTF-8 sequence. Counts bytes as columns except continuation bytes. */
static void shorten(char *dst, size_t cap, const char *s, size_t avail)
{
    size_t len = strlen(s);
    size_t cols = 0;
    for (size_t i = 0; i < len; i++)
        cols += ((unsigned char)s[i] & 0xC0) != 0x80;
    if (cols <= avail || avail < 8) {
        snprintf(dst, cap, "%s", s);
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
    snprintf(dst, cap, "%.*s...%s", (int)head, s, s + tail);
}

static int print_tree(FILE *out, json_t *elements, int width, int64_t self_cut)
{
    size_t n = json_array_size(elements);
    if (n == 0)
        return 0;
    struct tnode *nodes = skpx_xcalloc(n, sizeof(*nodes));
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(elements, i);
        const char *sig = json_string_value(json_object_get(e, "codeSignature"));
        nodes[i] = (struct tnode){sig ? sig : "?",
                                  jint(e, "duration"),
                                  jint(e, "durationChildExcluded"),
                                  jint(e, "count"),
                                  jint(e, "id"),
                                  jint(e, "parentId"),
                                  SIZE_MAX,
                                  SIZE_MAX,
                                  SIZE_MAX,
                                  0,
                                  false};
        nodes[i].top = self_cut > 0 && nodes[i].self >= self_cut;
    }
    /* Link children in input order. Ids are 1..n per tree (BFS order), so a direct index finds
     * a parent; ids outside that range fall back to a linear scan. */
    size_t *by_id = skpx_xcalloc(n + 1, sizeof(*by_id));
    for (size_t i = 0; i <= n; i++)
        by_id[i] = SIZE_MAX;
    for (size_t i = 0; i < n; i++)
        if (nodes[i].id >= 1 && (uint64_t)nodes[i].id <= n && by_id[nodes[i].id] == SIZE_MAX)
            by_id[nodes[i].id] = i;
    size_t *roots = skpx_xcalloc(n, sizeof(*roots));
    size_t n_roots = 0;
    for (size_t i = 0; i < n; i++) {
        size_t p = SIZE_MAX;
        int64_t pid = nodes[i].parent;
        if (pid >= 1 && (uint64_t)pid <= n) {
            p = by_id[pid];
        } else if (pid != 0) {
            for (size_t k = 0; k < n && p == SIZE_MAX; k++)
                if (nodes[k].id == pid)
                    p = k;
        }
        if (p == i)
            p = SIZE_MAX;
        if (p == SIZE_MAX) {
            roots[n_roots++] = i;
            continue;
        }
        if (nodes[p].first_child == SIZE_MAX)
            nodes[p].first_child = i;
        else
            nodes[nodes[p].last_child].next_sibling = i;
        nodes[p].last_child = i;
    }
    skpx_free(by_id);
    size_t *stack = skpx_xcalloc(n + 1, sizeof(*stack));
    int *depth = skpx_xcalloc(n + 1, sizeof(*depth));
    char *line = skpx_xmalloc(4096);
    char *visited = skpx_xcalloc(n, 1);
    size_t *kids = skpx_xcalloc(n, sizeof(*kids));
    for (size_t r = 0; r < n_roots; r++) {
        size_t sp = 0;
        stack[sp] = roots[r];
        depth[sp++] = 0;
        while (sp > 0) {
            sp--;
            size_t i = stack[sp];
            int d = depth[sp];
            if (visited[i])
                continue; /* a malformed (cyclic) input: print each element once */
            visited[i] = 1;
            int lvl = d < TREE_PRINT_MAX_INDENT_LEVELS ? d : TREE_PRINT_MAX_INDENT_LEVELS;
            char prefix[TREE_PRINT_MAX_INDENT_LEVELS * 2 + 16];
            int pl = snprintf(prefix, sizeof(prefix), "%*s", lvl * 2, "");
            if (d > TREE_PRINT_MAX_INDENT_LEVELS)
                pl += snprintf(prefix + pl, sizeof(prefix) - (size_t)pl, "[%d] ", d);
            /* The number columns take 35 characters ("%12 %11+marker %7" and two spaces). */
            int avail = width - 35 - pl;
            if (avail < 20)
                avail = 20;
            shorten(line, 4096, nodes[i].sig, (size_t)avail);
            fprintf(out, "%12lld %11lld%c %7lld  %s%s\n", (long long)nodes[i].duration,
                    (long long)nodes[i].self, nodes[i].top ? '*' : ' ', (long long)nodes[i].count,
                    prefix, line);
            /* Push children in reverse so the first child prints first. */
            size_t nk = 0;
            for (size_t ch = nodes[i].first_child; ch != SIZE_MAX && nk < n;
                 ch = nodes[ch].next_sibling)
                kids[nk++] = ch;
            for (size_t q = nk; q-- > 0 && sp <= n;) {
                stack[sp] = kids[q];
                depth[sp++] = d + 1;
            }
        }
    }
    skpx_free(kids);
    skpx_free(visited);
    skpx_free(line);
    skpx_free(depth);
    skpx_free(stack);
    skpx_free(roots);
    skpx_free(nodes);
    return 0;
}

int tree_print(FILE *out, json_t *analysis, int width)
{
    json_t *trees = json_object_get(analysis, "trees");
    if (!json_is_array(trees))
        return -1;
    if (width < 40)
        width = 40;
    const char *tip = json_string_value(json_object_get(analysis, "tip"));
    if (tip && *tip)
        fprintf(out, "tip: %s\n", tip);

    /* Threshold for the starred "top slow" frames: the 10th largest positive self duration
     * over all trees. */
    size_t total = 0;
    size_t i;
    json_t *t;
    json_array_foreach(trees, i, t)
        total += json_array_size(json_object_get(t, "elements"));
    int64_t cut = 0;
    if (total > 0) {
        int64_t *selfs = skpx_xcalloc(total, sizeof(*selfs));
        size_t k = 0;
        json_array_foreach(trees, i, t) {
            size_t j;
            json_t *e;
            json_array_foreach(json_object_get(t, "elements"), j, e)
                selfs[k++] = jint(e, "durationChildExcluded");
        }
        qsort(selfs, total, sizeof(*selfs), cmp_desc);
        size_t idx = total < TREE_PRINT_TOP_SLOW ? total - 1 : TREE_PRINT_TOP_SLOW - 1;
        cut = selfs[idx] > 0 ? selfs[idx] : 1;
        if (selfs[0] <= 0)
            cut = 0;
        skpx_free(selfs);
    }
    if (json_array_size(trees) == 0) {
        if (!tip || !*tip)
            fprintf(out, "no profile data\n");
        return 0;
    }
    fprintf(out, "%12s %12s %7s  %s\n", "DURATION(ms)", "SELF(ms)", "COUNT", "STACK");
    json_array_foreach(trees, i, t) {
        if (i > 0)
            fputc('\n', out);
        if (print_tree(out, json_object_get(t, "elements"), width, cut) != 0)
            return -1;
    }
    if (cut > 0)
        fprintf(out, "(* = one of the %d largest self durations)\n", TREE_PRINT_TOP_SLOW);
    return 0;
}
