/* export_pprof.c - an analysis as pprof's profile.proto (package perftools.profiles),
 * gzip-compressed, as `go tool pprof` and the pprof web UI read it, built with the wire pprof
 * builder (wire/pprof_encode.h), which interns, encodes and compresses.
 *
 * Design: one Location per distinct code signature (its function, file and line) with the
 * signature's line, one Function per distinct function and file (name = the function alone,
 * file in `filename`: the signature is split by signature_parts), so pprof's function views merge
 * the lines of one function; one Sample per tree node with a non-zero self count, its location
 * ids leaf first, values [self count, self count x dump period in ns] for the sample types
 * samples/count (the default) and wall/nanoseconds (thread dumps see running and waiting threads
 * alike, so the time is wall time); string labels trace_id, segment_id, endpoint and task_id
 * from the export meta. The walk is pre-order, so the nodes of the current path sit in slots
 * indexed from the end by depth: a node's stack, leaf first, is the contiguous run of slots from
 * its own to the root's; each node's signature is split and resolved to a location id once, when
 * a sample first needs it, and samples are added by location ids. The builder's byte budget is
 * sized from the trees (an upper bound of what they can need) with a cap; a profile past it
 * fails with SKP_ETOOBIG. */
#include "server/export/export_int.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "wire/pprof_encode.h"

/* Most builder memory one export may take (tables and text; the encoded profile comes on top). */
#define EXPORT_PPROF_MAX_BUILDER_BYTES (2 * EXPORT_MAX_OUTPUT_BYTES)

/* ---- code signatures ---- */

/* What a code signature says: the function, and the file and line when it carries them. The
 * pointers point into the signature. */
struct sig_parts {
    const char *name;
    size_t name_len;
    const char *file; /* NULL = no file */
    size_t file_len;
    int64_t line; /* 0 = no line */
};

/* Splits "file.py.func: 50" (Python agents: file "file.py", function "func", which may be a
 * qualified "Class.method"), "func (file.c:42)" (native frames) and "func: 7" (function and line
 * only). Anything else is a function name alone. */
static void signature_parts(const char *sig, struct sig_parts *p)
{
    size_t n = strlen(sig);
    *p = (struct sig_parts){.name = sig, .name_len = n};
    size_t end = n;
    if (end > 0 && sig[end - 1] == ')')
        end--;
    size_t d = end;
    while (d > 0 && sig[d - 1] >= '0' && sig[d - 1] <= '9')
        d--;
    if (d == end || d == 0 || end - d > 9)
        return;
    size_t colon = d;
    while (colon > 0 && sig[colon - 1] == ' ')
        colon--;
    if (colon == 0 || sig[colon - 1] != ':')
        return;
    colon--;
    int64_t line = strtoll(sig + d, NULL, 10);
    if (end < n) {
        /* Native form: the file sits between " (" and the colon, the function before " (". */
        for (size_t i = colon; i > 0; i--) {
            if (sig[i - 1] == '(') {
                size_t name_end = i - 1;
                while (name_end > 0 && sig[name_end - 1] == ' ')
                    name_end--;
                if (name_end == 0 || i == colon)
                    return;
                *p = (struct sig_parts){.name = sig,
                                        .name_len = name_end,
                                        .file = sig + i,
                                        .file_len = colon - i,
                                        .line = line};
                return;
            }
        }
        return;
    }
    p->line = line;
    p->name_len = colon;
    /* Python form "/path/app.py.Class.method": the file ends at the last ".py." */
    const char *py = NULL;
    for (const char *q = sig; q + 4 <= sig + colon; q++)
        if (memcmp(q, ".py.", 4) == 0)
            py = q;
    if (py && py + 4 < sig + colon) {
        p->file = sig;
        p->file_len = (size_t)(py + 3 - sig);
        p->name = py + 4;
        p->name_len = (size_t)(sig + colon - p->name);
    }
}

/* ---- rendering ---- */

/* Labels per sample: trace_id, segment_id, endpoint, task_id. */
#define PPROF_LABELS 4

struct pprof_ctx {
    struct skpx_pprof *prof;
    /* The node at depth d of the current path: its signature in sig[EXPORT_MAX_DEPTH - 1 - d],
     * its location id (0 = not resolved yet) in loc[] at the same index (see the file comment). */
    const char **sig;
    uint64_t *loc;
    int64_t period_ns;
    bool value_mode; /* export_meta.value_type set: one sample type, value = self */
    struct skpx_pprof_label labels[PPROF_LABELS];
    size_t n_labels;
    size_t estimate; /* budget estimate, summed by size_visit */
};

/* Builder bytes a map entry may take besides its key: slots (load <= 3/4, doubling), offset,
 * length and hash arrays (doubling). Keys count twice (arenas double). */
#define ENTRY_BYTES 48

/* Adds an upper bound of the builder memory `path[depth]` may need: its function name and file
 * (at most its signature's bytes), its function and location entries, and its sample's key
 * (varints: at most 8 bytes per frame, count and label word) and values (counted for every
 * node: cheaper than finding the self counts twice). */
static skp_err size_visit(void *ud, const struct analysis_tree *t,
                          const struct analysis_node *const *path, size_t depth)
{
    struct pprof_ctx *c = ud;
    (void)t;
    const char *sig = path[depth]->code_signature;
    c->estimate += 2 * (sig ? strlen(sig) : 0) + 2 * (2 * 16 + 2 * ENTRY_BYTES) +
                   2 * 8 * (depth + 1 + 2 + 4 * PPROF_LABELS) + ENTRY_BYTES + 2 * 2 * 8;
    return SKP_OK;
}

static skp_err visit(void *ud, const struct analysis_tree *t,
                     const struct analysis_node *const *path, size_t depth)
{
    struct pprof_ctx *c = ud;
    size_t at = EXPORT_MAX_DEPTH - 1 - depth;
    c->sig[at] = path[depth]->code_signature ? path[depth]->code_signature : "";
    c->loc[at] = 0;
    uint64_t self = export_node_self_count(t, path[depth]);
    if (self == 0)
        return SKP_OK;
    /* Resolve the path's new frames, leaf first: a resolved node's ancestors are resolved. */
    for (size_t i = at; i < EXPORT_MAX_DEPTH && c->loc[i] == 0; i++) {
        struct sig_parts sp;
        signature_parts(c->sig[i], &sp);
        struct skpx_pprof_frame f = {.func = sp.name,
                                     .func_len = sp.name_len,
                                     .file = sp.file ? sp.file : "",
                                     .file_len = sp.file ? sp.file_len : 0,
                                     .line = sp.line};
        skp_err err = skpx_pprof_location(c->prof, &f, &c->loc[i]);
        if (err)
            return err;
    }
    int64_t values[2] = {(int64_t)self, (int64_t)self * c->period_ns};
    return skpx_pprof_add_ids(c->prof, &c->loc[at], depth + 1, values, c->labels, c->n_labels);
}

static void add_label(struct pprof_ctx *c, const char *key, const char *value)
{
    if (value && *value)
        c->labels[c->n_labels++] = (struct skpx_pprof_label){.key = key, .str = value};
}

/* Sample types, period, time and comment of the profile. */
static skp_err describe(struct pprof_ctx *c, const struct export_meta *m, uint64_t n_snapshots)
{
    skp_err err;
    if (c->value_mode) {
        /* Process profiles: the values are already in the sample type's unit. */
        struct skpx_pprof_type vt = {m->value_type, m->value_unit ? m->value_unit : "count"};
        err = skpx_pprof_set_period(c->prof, &vt, 1);
    } else {
        struct skpx_pprof_type wall = {"wall", "nanoseconds"};
        err = skpx_pprof_set_period(c->prof, &wall, c->period_ns);
        if (!err)
            err = skpx_pprof_set_default_type(c->prof, "samples");
    }
    int64_t time_ns = m->time_ms > 0 ? m->time_ms * 1000000 : 0;
    skpx_pprof_set_time(c->prof, time_ns, c->value_mode ? 0 : (int64_t)n_snapshots * c->period_ns);
    if (!err && m->title && *m->title)
        err = skpx_pprof_add_comment(c->prof, m->title);
    return err;
}

skp_err export_render_pprof(const struct analysis *a, const struct export_meta *m,
                            struct skpx_buf *b)
{
    struct export_part one = {.a = a, .segment_id = m->segment_id, .trace_id = m->trace_id};
    return export_render_pprof_parts(&one, 1, m, b);
}

/* Labels of every sample of part `p`: its trace_id and segment_id, then the common ones. */
static void part_labels(struct pprof_ctx *c, const struct export_part *p,
                        const struct export_meta *m)
{
    c->n_labels = 0;
    add_label(c, "trace_id", p->trace_id);
    add_label(c, "segment_id", p->segment_id);
    add_label(c, "endpoint", m->endpoint);
    add_label(c, "task_id", m->task_id);
}

skp_err export_render_pprof_parts(const struct export_part *parts, size_t n_parts,
                                  const struct export_meta *m, struct skpx_buf *b)
{
    struct pprof_ctx c;
    skp_err err = SKP_OK;
    uint8_t *out = NULL;
    size_t out_len = 0;

    memset(&c, 0, sizeof(c));
    c.value_mode = m->value_type != NULL;
    c.period_ns = c.value_mode ? 1 : (int64_t)export_period_ms(m) * 1000000;
    /* Budget: what the trees can need (strings, tables, keys), the labels, fixed room. */
    c.estimate = (size_t)1 << 20;
    uint64_t n_snapshots = 0;
    for (size_t i = 0; i < n_parts && !err; i++) {
        n_snapshots += parts[i].a->n_snapshots;
        part_labels(&c, &parts[i], m);
        for (size_t l = 0; l < c.n_labels; l++)
            c.estimate += 2 * strlen(c.labels[l].str) + 2 * ENTRY_BYTES;
        err = export_walk(parts[i].a, size_visit, &c);
    }
    if (err)
        return err;
    size_t budget =
        c.estimate < EXPORT_PPROF_MAX_BUILDER_BYTES ? c.estimate : EXPORT_PPROF_MAX_BUILDER_BYTES;

    static const struct skpx_pprof_type snapshot_types[2] = {{"samples", "count"},
                                                             {"wall", "nanoseconds"}};
    struct skpx_pprof_type value_type = {m->value_type, m->value_unit ? m->value_unit : "count"};
    err = c.value_mode ? skpx_pprof_new(&value_type, 1, budget, &c.prof)
                       : skpx_pprof_new(snapshot_types, 2, budget, &c.prof);
    if (!err)
        err = skpx_pprof_set_max_frames(c.prof, EXPORT_MAX_DEPTH);
    c.sig = skpx_calloc(EXPORT_MAX_DEPTH, sizeof(*c.sig));
    c.loc = skpx_calloc(EXPORT_MAX_DEPTH, sizeof(*c.loc));
    if (!err && (!c.sig || !c.loc))
        err = SKP_ENOMEM;
    if (!err)
        err = describe(&c, m, n_snapshots);
    for (size_t i = 0; i < n_parts && !err; i++) {
        part_labels(&c, &parts[i], m);
        err = export_walk(parts[i].a, visit, &c);
    }
    if (!err)
        err = skpx_pprof_encode(c.prof, true, &out, &out_len);
    if (!err) {
        skpx_buf_put(b, out, out_len);
        err = b->err;
    }
    SKPX_FREE_ALL(out, c.sig, c.loc);
    skpx_pprof_free(c.prof);
    /* Past the budget: a profile larger than the export serves (export_int.h). */
    return err == SKP_EFULL ? SKP_ETOOBIG : err;
}
