/* analyzer.c - stored snapshots → stack trees (spec §5.6's tree, with OAP's cross-segment
 * defects fixed and its duration estimate replaced, docs/accuracy.md). Single-threaded; all
 * memory is per call.
 *
 * Design: samples are (segment, sequence, time, stack id). They are sorted by (segment,
 * sequence) and de-duplicated on that pair, so overlapping query windows count once and two
 * segments with equal sequence numbers stay apart. The trie is built once per distinct stack
 * id (the root→leaf node path is memoised), grouped into one tree per root frame, children
 * found through a (parent, key) hash. A key is a frame id (frame ids are unique per signature in
 * the store, so matching children by frame id is matching by signature) or, by function, the id
 * of the frame's function name (the signature without its line, interned here).
 *
 * Durations: the samples of one segment are folded together once its last sample is known.
 * Its typical period is the median step between dumps of consecutive sequence numbers. A
 * sample's interval is the step to the segment's next sample when that dump is the next
 * sequence and the step is at most twice the typical period, or longer but with the same stack
 * on both sides (a late dump: the stack most likely stayed); a late dump after a different
 * stack splits the step in halves between the two samples; a missing dump (a sequence gap: its
 * stack is unknown, or it lies outside the analysed windows) caps the interval at the typical
 * period. The last sample gets the typical period. Every node on the sample's path gets the
 * interval; a node is on a path once, so a recursive function's frames are separate nodes each
 * counted once. Self durations (duration − children's) then equal the intervals of the samples
 * whose leaf the node is. The old estimate (OAP's runs) stays selectable for bench/accuracy.
 *
 * Weights: a row of weight w (a goProfileReport sample of count w, stored once) stands for w
 * dumps of its stack in a row, one period apart, and the next row comes w periods later. It
 * counts w, and the rules above apply with its step read per dump: the typical period is the
 * median of step / w, the row's own span is w periods (w × the period when it is the last, or
 * a dump after it is missing), it is on time up to (w + 1) periods, and a late step after it
 * splits only what exceeds its first w − 1 periods. With w = 1 everything is as above; w rows
 * of weight 1 and one row of weight w give the same counts and durations (docs/accuracy.md). */
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
    uint32_t weight; /* >= 1 */
};

/* period × weight, saturated (weights are at most UINT32_MAX). */
static int64_t mul_weight(int64_t period, uint32_t w)
{
    if (w == 0)
        return 0;
    if (period > 0 && (uint64_t)period > (uint64_t)INT64_MAX / w)
        return INT64_MAX;
    if (period < 0 && period < INT64_MIN / (int64_t)w)
        return INT64_MIN;
    return period * (int64_t)w;
}

static uint64_t add_u64_sat(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* The sample of a scanned row (a weight of 0 from a backend reads as 1). */
static struct sample sample_of(const struct store_sample *s)
{
    return (struct sample){.seg = s->segment,
                           .seq = s->sequence,
                           .time = s->time_ms,
                           .stack = s->stack,
                           .weight = s->weight ? s->weight : 1};
}

struct work_node {
    uint32_t key; /* frame id, or function id when by function */
    uint32_t parent;
    uint32_t first_child, last_child, next_sibling;
    uint32_t out; /* index in the output tree (flatten) */
    uint64_t count;
    int64_t duration;
    /* OAP's runs (ANALYZE_EST_OAP_RUNS only) */
    int64_t last_time;
    uint32_t last_seg;
    int32_t last_seq;
    bool has_last;
};

struct actx {
    struct store *st;
    skp_err err; /* first failure inside a scan callback */
    bool by_function;
    enum analyze_estimator est;
    struct sample *samples;
    size_t n_samples, cap_samples;

    struct work_node *nodes;
    size_t n_nodes, cap_nodes;
    struct skpx_u64map root_by_key; /* key → root node */
    struct skpx_u64map child_of;    /* parent node << 32 | key → child node */
    uint32_t *roots;                /* root nodes in first-seen order */
    size_t n_roots, cap_roots;
    struct skpx_u64map path_by_stack; /* stack id → offset << 24 | length in paths */
    uint32_t *paths;
    size_t n_paths, cap_paths;
    /* by function */
    struct skpx_u64map func_of_frame; /* frame id → function id */
    struct skpx_strmap func_ids;      /* function name → id (owns the names) */
    const char **func_names;          /* id → the map's copy of the name */
    size_t cap_func_names;
    uint32_t *frame_copy; /* a stack's frames, copied before looking signatures up */
    size_t cap_frame_copy;
    char *name_buf;
    size_t cap_name_buf;
    /* intervals */
    int64_t *steps; /* one segment's steps between consecutive dumps (median) */
    size_t cap_steps;
    /* the fallback period of a segment without steps of its own, looked up when needed (after
     * the scans: no store call inside a scan callback) */
    const struct analyze_query *queries; /* analyze_segments: the queries... */
    struct skpx_u64map query_of_seg;     /* ...segment → index of a query that scanned it */
    size_t cur_query;                    /* the query being scanned */
    bool scan_started;                   /* its first sample was seen */
    const char *segment_id;              /* analyze_segment_all: the segment */
    int64_t task_period;                 /* analyze_task: the task's dump period (0 = none) */

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
    skpx_u64map_cleanup(&c->root_by_key);
    skpx_u64map_cleanup(&c->child_of);
    skpx_free(c->roots);
    skpx_u64map_cleanup(&c->path_by_stack);
    skpx_free(c->paths);
    skpx_u64map_cleanup(&c->func_of_frame);
    skpx_strmap_cleanup(&c->func_ids);
    SKPX_FREE_ALL(c->func_names, c->frame_copy, c->name_buf, c->steps);
    skpx_u64map_cleanup(&c->query_of_seg);
}

static void actx_init(struct actx *c, struct store *st, const struct analyze_opts *opts)
{
    *c = (struct actx){.st = st};
    if (opts) {
        c->max = opts->max_snapshots;
        c->by_function = opts->by_function;
        c->est = opts->estimator;
    }
}

/* Notes the query that scanned a segment (all samples of one scan are of one segment). */
static skp_err note_query(struct actx *c, uint32_t seg)
{
    uint64_t v;
    if (c->scan_started)
        return SKP_OK;
    c->scan_started = true;
    if (skpx_u64map_get(&c->query_of_seg, seg, &v))
        return SKP_OK;
    return skpx_u64map_put(&c->query_of_seg, seg, c->cur_query);
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
    c->err = note_query(c, s->segment);
    c->samples[c->n_samples++] = sample_of(s);
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

static skp_err new_node(struct actx *c, uint32_t key, uint32_t parent, uint32_t *out)
{
    if (c->n_nodes >= NO_NODE - 1)
        return SKP_ENOMEM;
    if (skpx_grow(&c->nodes, &c->cap_nodes, c->n_nodes + 1, sizeof(*c->nodes), 64))
        return SKP_ENOMEM;
    uint32_t idx = (uint32_t)c->n_nodes;
    c->nodes[idx] = (struct work_node){.key = key,
                                       .parent = parent,
                                       .first_child = NO_NODE,
                                       .last_child = NO_NODE,
                                       .next_sibling = NO_NODE};
    if (parent != NO_NODE) {
        skp_err err = skpx_u64map_put(&c->child_of, (uint64_t)parent << 32 | key, idx);
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

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

size_t analysis_function_len(const char *sig, bool *close_paren)
{
    size_t n = strlen(sig);
    *close_paren = false;
    /* "<name>: 12" / "<name>:12" (Python, Java): the name ends before the spaces and colon */
    size_t i = n;
    while (i > 0 && is_digit(sig[i - 1]))
        i--;
    if (i < n && i > 0) {
        size_t c = i;
        while (c > 0 && sig[c - 1] == ' ')
            c--;
        if (c > 0 && sig[c - 1] == ':') {
            size_t e = c - 1;
            while (e > 0 && sig[e - 1] == ' ')
                e--;
            if (e > 0)
                return e;
        }
    }
    /* "<name> (<file>:12)" (native, Go): drop ":12" inside the last parentheses */
    if (n > 2 && sig[n - 1] == ')') {
        size_t j = n - 1;
        while (j > 0 && is_digit(sig[j - 1]))
            j--;
        if (j < n - 1 && j > 0 && sig[j - 1] == ':') {
            size_t k = j - 1;
            while (k > 0 && sig[k - 1] != '(' && sig[k - 1] != ')')
                k--;
            if (k > 0 && sig[k - 1] == '(') {
                *close_paren = true;
                return j - 1;
            }
        }
    }
    return n;
}

/* By function: the id of the function `frame` belongs to (its signature without the line,
 * analysis_function_len's rule, also the compare page's and the web UI's frames.js). */
static skp_err function_key(struct actx *c, uint32_t frame, uint32_t *key)
{
    uint64_t v;
    if (skpx_u64map_get(&c->func_of_frame, frame, &v)) {
        *key = (uint32_t)v;
        return SKP_OK;
    }
    const char *sig = NULL;
    skp_err err = store_get_frame(c->st, frame, &sig);
    if (err)
        return err;
    bool paren;
    size_t len = analysis_function_len(sig, &paren);
    if (skpx_grow(&c->name_buf, &c->cap_name_buf, len + 2, 1, 256))
        return SKP_ENOMEM;
    memcpy(c->name_buf, sig, len);
    if (paren)
        c->name_buf[len++] = ')';
    c->name_buf[len] = '\0';
    uint32_t id;
    if (!skpx_strmap_get(&c->func_ids, c->name_buf, &id)) {
        if (c->func_ids.n >= NO_NODE - 1)
            return SKP_ENOMEM;
        id = (uint32_t)c->func_ids.n;
        err = skpx_grow(&c->func_names, &c->cap_func_names, (size_t)id + 1, sizeof(*c->func_names),
                        64);
        if (!err)
            err = skpx_strmap_put(&c->func_ids, c->name_buf, id);
        if (err)
            return err;
        (void)skpx_strmap_find(&c->func_ids, c->name_buf, &id, &c->func_names[id]);
    }
    *key = id;
    return skpx_u64map_put(&c->func_of_frame, frame, id);
}

/* The keys of a stack's frames: the frame ids, or (by function) their function ids in
 * c->frame_copy. */
static skp_err stack_keys(struct actx *c, uint32_t stack, const uint32_t **keys, size_t *n)
{
    skp_err err = store_get_stack(c->st, stack, keys, n);
    if (err || !c->by_function || *n == 0)
        return err;
    /* store_get_frame invalidates the store's frames: copy them first */
    if (skpx_grow(&c->frame_copy, &c->cap_frame_copy, *n, sizeof(*c->frame_copy), 64))
        return SKP_ENOMEM;
    memcpy(c->frame_copy, *keys, *n * sizeof(*c->frame_copy));
    for (size_t i = 0; i < *n; i++) {
        err = function_key(c, c->frame_copy[i], &c->frame_copy[i]);
        if (err)
            return err;
    }
    *keys = c->frame_copy;
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
    const uint32_t *keys = NULL;
    size_t n = 0;
    skp_err err = stack_keys(c, stack, &keys, &n);
    if (err)
        return err;
    if (n >= (1u << PATH_LEN_BITS))
        n = (1u << PATH_LEN_BITS) - 1;
    if (skpx_grow(&c->paths, &c->cap_paths, c->n_paths + n + 1, sizeof(*c->paths), 64))
        return SKP_ENOMEM;
    size_t off = c->n_paths;
    uint32_t *p = c->paths + off;
    if (n > 0) {
        /* `keys` stays valid: nothing below calls into the store */
        uint64_t v;
        uint32_t cur;
        if (skpx_u64map_get(&c->root_by_key, keys[0], &v)) {
            cur = (uint32_t)v;
        } else {
            err = new_node(c, keys[0], NO_NODE, &cur);
            if (!err)
                err = skpx_u64map_put(&c->root_by_key, keys[0], cur);
            if (!err)
                err = skpx_grow(&c->roots, &c->cap_roots, c->n_roots + 1, sizeof(*c->roots), 64);
            if (err)
                return err;
            c->roots[c->n_roots++] = cur;
        }
        p[0] = cur;
        for (size_t d = 1; d < n; d++) {
            if (skpx_u64map_get(&c->child_of, (uint64_t)cur << 32 | keys[d], &v)) {
                cur = (uint32_t)v;
            } else {
                err = new_node(c, keys[d], cur, &cur);
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

/* OAP's estimate: a sample with the same segment and the next sequence as the last sample that
 * reached a node extends the node's run by its time step, which sums to Σ(last.time −
 * first.time) over runs. Samples must arrive in (segment, sequence) order without repeats. A
 * row of weight w is w dumps one period apart: a run through it also spans its w − 1 inner
 * steps (`inner`, w − 1 periods). */
static void fold_runs(struct work_node *nd, const struct sample *s, int64_t inner)
{
    if (nd->has_last && nd->last_seg == s->seg && nd->last_seq != INT32_MAX &&
        nd->last_seq + 1 == s->seq)
        nd->duration = skpx_sat_add_i64(nd->duration, skpx_sat_sub_i64(s->time, nd->last_time));
    nd->duration = skpx_sat_add_i64(nd->duration, inner);
    nd->has_last = true;
    nd->last_seg = s->seg;
    nd->last_seq = s->seq;
    nd->last_time = s->time;
}

/* Folds one sample into the trie: its count (its weight) and either its interval (intervals)
 * or its run step (OAP; `interval` is then its inner steps, fold_runs). Counts the dumps of
 * non-empty stacks in c->used. */
static skp_err fold(struct actx *c, const struct sample *s, int64_t interval)
{
    const uint32_t *path = NULL;
    size_t len = 0;
    skp_err err = stack_path(c, s->stack, &path, &len);
    if (err)
        return err;
    if (len == 0)
        return SKP_OK; /* empty stacks are dropped, as in OAP (their time goes to nothing) */
    c->used = add_u64_sat(c->used, s->weight);
    for (size_t d = 0; d < len; d++) {
        struct work_node *nd = &c->nodes[path[d]];
        nd->count = add_u64_sat(nd->count, s->weight);
        if (c->est == ANALYZE_EST_OAP_RUNS)
            fold_runs(nd, s, interval);
        else
            nd->duration = skpx_sat_add_i64(nd->duration, interval);
    }
    return SKP_OK;
}

/* The k-th smallest of v[0..n) (k < n), reordering v: quickselect, linear on average. */
static int64_t kth_smallest(int64_t *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        int64_t pivot = v[lo + (hi - lo) / 2];
        size_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                int64_t t = v[i];
                v[i] = v[j];
                v[j] = t;
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return v[k];
    }
    return v[k];
}

static bool next_in_sequence(const struct sample *a, const struct sample *b)
{
    return a->seq != INT32_MAX && a->seq + 1 == b->seq;
}

/* The dump period of the task of a segment's snapshots (0 when unknown). */
static skp_err segment_period(struct store *st, const char *segment_id, int64_t *out)
{
    struct store_segment_info info = {0};
    skp_err err = store_get_segment_info(st, segment_id, &info);
    *out = !err && info.dump_period > 0 ? info.dump_period : 0;
    store_segment_info_cleanup(&info);
    return err == SKP_ENOTFOUND ? SKP_OK : err;
}

/* The fallback period of local segment `seg`: its task's dump period. */
static skp_err fallback_period(struct actx *c, uint32_t seg, int64_t *out)
{
    uint64_t v;
    *out = 0;
    if (c->queries && skpx_u64map_get(&c->query_of_seg, seg, &v))
        return segment_period(c->st, c->queries[v].segment_id, out);
    if (c->segment_id)
        return segment_period(c->st, c->segment_id, out);
    *out = c->task_period;
    return SKP_OK;
}

/* The segment's typical dump period: the median positive step between dumps of consecutive
 * sequences, per dump (a row of weight w is w dumps: its step / w); without one, its task's
 * dump period (0 when unknown). */
static skp_err typical_period(struct actx *c, const struct sample *s, size_t n, int64_t *out)
{
    size_t k = 0;
    if (n > 1 && skpx_grow(&c->steps, &c->cap_steps, n - 1, sizeof(*c->steps), 64))
        return SKP_ENOMEM;
    for (size_t i = 0; i + 1 < n; i++) {
        int64_t step = skpx_sat_sub_i64(s[i + 1].time, s[i].time) / s[i].weight;
        if (next_in_sequence(&s[i], &s[i + 1]) && step > 0)
            c->steps[k++] = step;
    }
    if (k > 0) {
        *out = kth_smallest(c->steps, k, k / 2);
        return SKP_OK;
    }
    return n > 0 ? fallback_period(c, s[0].seg, out) : SKP_OK;
}

/* The interval sample s[i] stands for (file comment); *carry is what the step to s[i + 1]
 * hands to s[i + 1] (half of a late step between different stacks), 0 otherwise. A row of
 * weight w spans w periods (`span`); its late part is what its last dump's step exceeds. */
static int64_t interval_of(const struct sample *s, size_t n, size_t i, int64_t period,
                           int64_t *carry)
{
    *carry = 0;
    int64_t span = mul_weight(period, s[i].weight);
    if (i + 1 >= n)
        return span;
    int64_t step = skpx_sat_sub_i64(s[i + 1].time, s[i].time);
    if (step < 0)
        return span; /* the agent's clock went back */
    if (!next_in_sequence(&s[i], &s[i + 1]))
        return step < span ? step : span; /* a dump in between is missing: unknown stack */
    if (period <= 0 || step <= skpx_sat_add_i64(span, period) || s[i].stack == s[i + 1].stack)
        return step; /* on time, or late with the same stack on both sides */
    /* late, and the stack changed somewhere in the last dump's step */
    int64_t inner = span - period, last = step - inner;
    *carry = last - last / 2;
    return inner + last / 2;
}

/* Folds the samples of one segment (ordered by sequence, no repeats). */
static skp_err fold_segment(struct actx *c, const struct sample *s, size_t n)
{
    int64_t period = 0;
    skp_err err = SKP_OK;
    bool weighted = false;
    for (size_t i = 0; i < n && !weighted; i++)
        weighted = s[i].weight > 1;
    /* OAP's runs need the period only for the inner steps of weighted rows */
    if (c->est != ANALYZE_EST_OAP_RUNS || weighted)
        err = typical_period(c, s, n, &period);
    int64_t carry = 0, next_carry = 0;
    for (size_t i = 0; i < n && !err; i++) {
        int64_t interval = 0;
        if (c->est != ANALYZE_EST_OAP_RUNS)
            interval = skpx_sat_add_i64(interval_of(s, n, i, period, &next_carry), carry);
        else
            interval = mul_weight(period, s[i].weight - 1);
        err = fold(c, &s[i], interval);
        carry = next_carry;
    }
    return err;
}

/* Folds c->samples (ordered by (segment, sequence), no repeats) one segment at a time. */
static skp_err fold_all(struct actx *c)
{
    size_t lo = 0;
    skp_err err = SKP_OK;
    for (size_t i = 1; i <= c->n_samples && !err; i++) {
        if (i == c->n_samples || c->samples[i].seg != c->samples[lo].seg) {
            err = fold_segment(c, c->samples + lo, i - lo);
            lo = i;
        }
    }
    c->n_samples = 0;
    return err;
}

/* Whole-task and whole-segment scans arrive ordered by (segment, sequence): each segment's
 * samples are buffered and folded when the next segment starts (or the scan ends), so memory
 * stays O(trie + distinct stacks + one segment's dumps) whatever the task's size. */
static void stream_cb(void *ud, const struct store_sample *ss)
{
    struct actx *c = ud;
    if (c->err)
        return;
    struct sample s = sample_of(ss);
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
    if (c->n_samples > 0 && c->samples[0].seg != s.seg)
        c->err = fold_all(c);
    if (!c->err &&
        skpx_grow(&c->samples, &c->cap_samples, c->n_samples + 1, sizeof(*c->samples), 64))
        c->err = SKP_ENOMEM;
    if (!c->err)
        c->samples[c->n_samples++] = s;
}

/* Signatures are copied into one arena block owned by the analysis. */
struct sig_ref {
    uint32_t key;
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

static const char *sig_of(const struct sig_table *t, uint32_t key)
{
    uint64_t v = 0;
    (void)skpx_u64map_get(&t->idx, key, &v);
    return t->arena + t->refs[v].off;
}

/* Step 1: distinct keys → signatures (borrowed from the store's cache or the function names,
 * then copied). */
static skp_err collect_signatures(struct actx *c, struct sig_table *t)
{
    size_t total = 0;
    for (size_t i = 0; i < c->n_nodes; i++) {
        uint64_t v;
        uint32_t key = c->nodes[i].key;
        if (skpx_u64map_get(&t->idx, key, &v))
            continue;
        const char *sig = NULL;
        skp_err err = SKP_OK;
        if (c->by_function)
            sig = c->func_names[key];
        else
            err = store_get_frame(c->st, key, &sig);
        if (err)
            return err;
        if (skpx_grow(&t->refs, &t->cap_refs, t->n_refs + 1, sizeof(*t->refs), 64))
            return SKP_ENOMEM;
        t->refs[t->n_refs] = (struct sig_ref){.key = key, .sig = sig, .off = total};
        total += strlen(sig) + 1;
        err = skpx_u64map_put(&t->idx, key, t->n_refs);
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
                                       .sig = sig_of(t, c->nodes[c->roots[i]].key),
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
        o->code_signature = sig_of(t, w->key);
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

static skp_err task_period(struct store *st, const char *task_id, int64_t *out)
{
    struct store_task t = {0};
    skp_err err = store_get_task(st, task_id, &t);
    *out = !err && t.dump_period > 0 ? t.dump_period : 0;
    store_task_cleanup(&t);
    return err == SKP_ENOTFOUND ? SKP_OK : err;
}

skp_err analyze_segments(struct store *st, const struct analyze_query *q, size_t n,
                         const struct analyze_opts *opts, struct analysis **out)
{
    *out = NULL;
    if (!st || (n && !q))
        return SKP_EINVAL;
    struct actx c;
    actx_init(&c, st, opts);
    uint64_t max = c.max;
    uint64_t found = 0, budget = max;
    bool any = false, capped = false;
    skp_err err = SKP_OK;
    c.queries = q;
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
        c.cur_query = i;
        c.scan_started = false;
        err = store_scan_segment(st, q[i].segment_id, lo, hi, collect_cb, &c);
        if (!err)
            err = c.err;
        if (err)
            goto out;
    }
    sort_dedupe(&c);
    err = fold_all(&c);
    if (!err)
        err = build_result(&c, found, max, capped, any, out);
out:
    actx_cleanup(&c);
    return err;
}

static skp_err streamed_result(struct actx *c, struct analysis **out)
{
    skp_err err = fold_all(c);
    if (err)
        return err;
    bool capped = c->max && c->found > c->max;
    return build_result(c, c->found, c->max, capped, c->found > 0, out);
}

/* After a streamed scan that ended with `err`: the result into *out, then c is cleaned up. */
static skp_err scanned_result(struct actx *c, skp_err err, struct analysis **out)
{
    if (!err)
        err = c->err;
    if (!err)
        err = streamed_result(c, out);
    actx_cleanup(c);
    return err;
}

skp_err analyze_task(struct store *st, const char *task_id, const struct analyze_opts *opts,
                     struct analysis **out)
{
    *out = NULL;
    if (!st || !task_id)
        return SKP_EINVAL;
    struct actx c;
    actx_init(&c, st, opts);
    skp_err err = task_period(st, task_id, &c.task_period);
    if (!err)
        err = store_scan_task(st, task_id, stream_cb, &c);
    return scanned_result(&c, err, out);
}

skp_err analyze_segment_all(struct store *st, const char *segment_id,
                            const struct analyze_opts *opts, struct analysis **out)
{
    *out = NULL;
    if (!st || !segment_id)
        return SKP_EINVAL;
    struct actx c;
    actx_init(&c, st, opts);
    c.segment_id = segment_id; /* one segment: folded after the scan (streamed_result) */
    skp_err err = store_scan_segment(st, segment_id, INT32_MIN, INT32_MAX, stream_cb, &c);
    return scanned_result(&c, err, out);
}

void analysis_free(struct analysis *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->n_trees; i++)
        skpx_free(a->trees[i].nodes);
    SKPX_FREE_ALL(a->trees, a->tip, a->_arena, a);
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
