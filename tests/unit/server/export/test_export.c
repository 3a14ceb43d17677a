/* Unit tests for src/server/export/ on hand-built analyses: the collapsed lines and their
 * totals, the pprof message (gunzipped and decoded here field by field), the speedscope schema
 * fields, the HTML file's embedded data and lack of external references, format names,
 * malformed trees and allocation failures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <zlib.h>

#include "common/alloc.h"
#include "harness/skp_alloc_faults.h"
#include "server/export/export.h"
#include "server/export/export_int.h"

#define NONE UINT32_MAX

/* The worked example of spec §5.6 (A>B>{C,D}) plus a second tree X>Y, and a third tree whose
 * signatures carry the characters exporters must escape. */
static struct analysis_node g_t1[] = {
    {1, 0, "A", 40, 0, 5, 1, NONE},
    {2, 1, "B", 40, 30, 5, 2, NONE},
    {3, 2, "method3 (demo.c:42)", 10, 10, 3, NONE, 3},
    {4, 2, "/srv/app.py.handler: 50", 0, 0, 1, NONE, NONE},
};
static struct analysis_node g_t2[] = {
    {1, 0, "X", 10, 0, 2, 1, NONE},
    {2, 1, "Y", 10, 10, 2, NONE, NONE},
};
static struct analysis_node g_t3[] = {
    {1, 0, "evil;frame\nname</script><img src=x>", 0, 0, 1, NONE, NONE},
};
static struct analysis_tree g_trees[] = {{g_t1, 4}, {g_t2, 2}, {g_t3, 1}};
static struct analysis g_an = {.tip = NULL, .trees = g_trees, .n_trees = 3, .n_snapshots = 8};

static const struct export_meta g_meta = {
    .title = "task t1 /orders",
    .task_id = "t1",
    .segment_id = "seg-1",
    .trace_id = "trace-1",
    .endpoint = "/orders",
    .dump_period_ms = 20,
    .time_ms = 1700000000000,
};

static void render(enum export_format f, const struct export_meta *m, uint8_t **out, size_t *len)
{
    skp_err err = export_render(&g_an, f, m, out, len);
    assert_int_equal(err, SKP_OK);
    assert_non_null(*out);
}

static char *as_string(const uint8_t *p, size_t n)
{
    char *s = skpx_xmalloc(n + 1);
    memcpy(s, p, n);
    s[n] = 0;
    return s;
}

static void format_names_round_trip(void **state)
{
    (void)state;
    static const char *names[] = {"pprof", "collapsed", "speedscope", "html", "json"};
    for (size_t i = 0; i < 5; i++) {
        enum export_format f;
        assert_int_equal(export_format_parse(names[i], &f), SKP_OK);
        assert_int_equal((int)f, (int)i);
        assert_non_null(export_content_type(f));
        assert_non_null(export_file_ext(f));
    }
    enum export_format f;
    assert_int_equal(export_format_parse("svg", &f), SKP_EINVAL);
    assert_int_equal(export_format_parse(NULL, &f), SKP_EINVAL);
    assert_string_equal(export_content_type(EXPORT_HTML), "text/html; charset=utf-8");
    assert_string_equal(export_file_ext(EXPORT_PPROF), "pb.gz");
}

static void self_counts_follow_children(void **state)
{
    (void)state;
    assert_int_equal(export_node_self_count(&g_trees[0], &g_t1[0]), 0);
    assert_int_equal(export_node_self_count(&g_trees[0], &g_t1[1]), 1);
    assert_int_equal(export_node_self_count(&g_trees[0], &g_t1[2]), 3);
    assert_int_equal(export_node_self_count(&g_trees[0], &g_t1[3]), 1);
}

static void collapsed_lines_and_totals(void **state)
{
    (void)state;
    uint8_t *out;
    size_t len;
    render(EXPORT_COLLAPSED, NULL, &out, &len);
    char *s = as_string(out, len);
    assert_string_equal(s, "A;B 1\n"
                           "A;B;method3 (demo.c:42) 3\n"
                           "A;B;/srv/app.py.handler:50 1\n"
                           "X;Y 2\n"
                           "evil,frame name</script><img src=x> 1\n");
    /* Parsed back, the counts add up to the snapshots analysed. */
    unsigned long total = 0;
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n"))
        total += strtoul(strrchr(line, ' ') + 1, NULL, 10);
    assert_int_equal(total, g_an.n_snapshots);
    skpx_free(s);
    skpx_free(out);
}

/* No frame may end in blanks + a number: flamegraph.pl would read it as a count column. */
static void collapsed_frames_never_end_in_a_count(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"slow_b: 8", "slow_b:8"},
        {"/srv/app.py.handler:   50", "/srv/app.py.handler:50"},
        {"worker 7", "worker_7"},
        {"pool\t 12.5", "pool_12.5"},
        {"method3 (demo.c:42)", "method3 (demo.c:42)"},
        {"tick 8 ", "tick_8"},
        {"a;b\nc", "a,b c"},
        {"8", "8"},
        {"  ", "?"},
        {"", "?"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct skpx_buf b;
        skpx_buf_init(&b, 1024);
        export_put_collapsed_frame(&b, cases[i][0]);
        skpx_buf_put(&b, "", 1);
        assert_int_equal(b.err, SKP_OK);
        assert_string_equal((const char *)b.data, cases[i][1]);
        skpx_buf_cleanup(&b);
    }
}

/* ---- a minimal protobuf reader for the pprof checks ---- */

struct pb {
    const uint8_t *p, *end;
};

static uint64_t pb_varint(struct pb *r)
{
    uint64_t v = 0;
    for (int shift = 0; r->p < r->end && shift < 64; shift += 7) {
        uint8_t c = *r->p++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            return v;
    }
    fail_msg("truncated varint");
    return 0;
}

/* Next field: returns 0 at end; *field / *wire set; for LEN fields *sub covers the payload,
 * for varints *val holds the value. */
static int pb_next(struct pb *r, uint32_t *field, uint32_t *wire, uint64_t *val, struct pb *sub)
{
    if (r->p >= r->end)
        return 0;
    uint64_t tag = pb_varint(r);
    *field = (uint32_t)(tag >> 3);
    *wire = (uint32_t)(tag & 7);
    if (*wire == 0) {
        *val = pb_varint(r);
    } else if (*wire == 2) {
        uint64_t n = pb_varint(r);
        assert_true(n <= (uint64_t)(r->end - r->p));
        sub->p = r->p;
        sub->end = r->p + n;
        r->p += n;
    } else {
        fail_msg("unexpected wire type %u", *wire);
    }
    return 1;
}

static uint8_t *gunzip(const uint8_t *in, size_t n, size_t *out_len)
{
    size_t cap = 1 << 20;
    uint8_t *out = skpx_xmalloc(cap);
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    assert_int_equal(inflateInit2(&zs, 15 + 16), Z_OK);
    zs.next_in = (uint8_t *)in;
    zs.avail_in = (uInt)n;
    zs.next_out = out;
    zs.avail_out = (uInt)cap;
    assert_int_equal(inflate(&zs, Z_FINISH), Z_STREAM_END);
    *out_len = cap - zs.avail_out;
    inflateEnd(&zs);
    return out;
}

static void pprof_decodes_with_samples_and_labels(void **state)
{
    (void)state;
    uint8_t *gz;
    size_t gz_len;
    render(EXPORT_PPROF, &g_meta, &gz, &gz_len);
    assert_true(gz_len > 18);
    assert_int_equal(gz[0], 0x1f);
    assert_int_equal(gz[1], 0x8b);
    size_t len;
    uint8_t *raw = gunzip(gz, gz_len, &len);

    const char *strings[64];
    size_t strings_len[64];
    size_t n_strings = 0, n_samples = 0, n_functions = 0, n_locations = 0, n_sample_types = 0;
    uint64_t sum_count = 0, sum_ns = 0, period = 0, n_labels = 0;
    uint64_t label_keys[16], label_vals[16];
    struct pb r = {raw, raw + len}, sub, sub2;
    uint32_t field, wire;
    uint64_t val;
    while (pb_next(&r, &field, &wire, &val, &sub)) {
        switch (field) {
        case 1:
            n_sample_types++;
            break;
        case 2: { /* Sample */
            n_samples++;
            size_t depth = 0;
            while (pb_next(&sub, &field, &wire, &val, &sub2)) {
                if (field == 1) {
                    while (sub2.p < sub2.end) {
                        pb_varint(&sub2);
                        depth++;
                    }
                } else if (field == 2) {
                    sum_count += pb_varint(&sub2);
                    sum_ns += pb_varint(&sub2);
                } else if (field == 3 && n_samples == 1) {
                    struct pb lab = sub2, unused;
                    uint32_t lf, lw;
                    uint64_t lv;
                    while (pb_next(&lab, &lf, &lw, &lv, &unused)) {
                        if (lf == 1)
                            label_keys[n_labels] = lv;
                        else if (lf == 2)
                            label_vals[n_labels] = lv;
                    }
                    n_labels++;
                }
            }
            assert_true(depth >= 1);
            break;
        }
        case 4:
            n_locations++;
            break;
        case 5:
            n_functions++;
            break;
        case 6:
            assert_true(n_strings < 64);
            strings[n_strings] = (const char *)sub.p;
            strings_len[n_strings++] = (size_t)(sub.end - sub.p);
            break;
        case 12:
            period = val;
            break;
        default:
            break;
        }
    }
    assert_int_equal(n_sample_types, 2);
    assert_int_equal(n_samples, 5); /* nodes with a self count */
    assert_int_equal(sum_count, 8); /* = snapshots */
    assert_int_equal(sum_ns, 8ull * 20 * 1000000);
    assert_int_equal(period, 20ull * 1000000);
    /* One function and one location per distinct code signature: A B C D X Y evil. */
    assert_int_equal(n_functions, 7);
    assert_int_equal(n_locations, 7);
    assert_int_equal(strings_len[0], 0);
    assert_int_equal(n_labels, 4);
#define STR_IS(i, lit) (strings_len[i] == strlen(lit) && memcmp(strings[i], lit, strlen(lit)) == 0)
    assert_true(STR_IS(label_keys[0], "trace_id") && STR_IS(label_vals[0], "trace-1"));
    assert_true(STR_IS(label_keys[1], "segment_id") && STR_IS(label_vals[1], "seg-1"));
    assert_true(STR_IS(label_keys[2], "endpoint") && STR_IS(label_vals[2], "/orders"));
    /* Function names are the functions alone; file and line have their own fields. */
    int saw_c = 0, saw_py = 0, saw_fn = 0, saw_whole = 0;
    for (size_t i = 0; i < n_strings; i++) {
        saw_c |= STR_IS(i, "demo.c");
        saw_py |= STR_IS(i, "/srv/app.py");
        saw_fn += STR_IS(i, "method3") + STR_IS(i, "handler");
        saw_whole |= STR_IS(i, "method3 (demo.c:42)") || STR_IS(i, "/srv/app.py.handler: 50");
    }
    assert_true(saw_c && saw_py);
    assert_int_equal(saw_fn, 2);
    assert_false(saw_whole);
#undef STR_IS
    skpx_free(raw);
    skpx_free(gz);
}

/* Lines of one function are locations of one Function (what `go tool pprof -functions` merges):
 * "app.py.C.run: 10" and "app.py.C.run: 12" share function "C.run" in file "app.py". */
static void pprof_lines_of_a_function_share_it(void **state)
{
    (void)state;
    struct analysis_node nodes[] = {
        {1, 0, "/w/app.py.C.run: 10", 0, 0, 3, 1, NONE},
        {2, 1, "/w/app.py.C.run: 12", 0, 0, 2, NONE, 2},
        {3, 1, "leaf (lib.c:7)", 0, 0, 1, NONE, NONE},
    };
    struct analysis_tree tree = {nodes, 3};
    struct analysis an = {.trees = &tree, .n_trees = 1, .n_snapshots = 3};
    uint8_t *gz;
    size_t gz_len, len;
    assert_int_equal(export_render(&an, EXPORT_PPROF, &g_meta, &gz, &gz_len), SKP_OK);
    uint8_t *raw = gunzip(gz, gz_len, &len);
    struct pb r = {raw, raw + len}, sub, sub2;
    uint32_t field, wire;
    uint64_t val;
    size_t n_fn = 0, n_loc = 0, n_str = 0;
    uint64_t loc_fn[8], loc_line[8], fn_name[8], fn_file[8];
    const char *str[64];
    size_t str_len[64];
    while (pb_next(&r, &field, &wire, &val, &sub)) {
        if (field == 5) { /* Function */
            while (pb_next(&sub, &field, &wire, &val, &sub2)) {
                if (field == 2)
                    fn_name[n_fn] = val;
                else if (field == 4)
                    fn_file[n_fn] = val;
            }
            n_fn++;
        } else if (field == 4) { /* Location */
            while (pb_next(&sub, &field, &wire, &val, &sub2)) {
                if (field != 4)
                    continue;
                struct pb ln = sub2, unused;
                while (pb_next(&ln, &field, &wire, &val, &unused)) {
                    if (field == 1)
                        loc_fn[n_loc] = val;
                    else if (field == 2)
                        loc_line[n_loc] = val;
                }
            }
            n_loc++;
        } else if (field == 6) {
            str[n_str] = (const char *)sub.p;
            str_len[n_str++] = (size_t)(sub.end - sub.p);
        }
    }
#define STR_IS(i, lit) (str_len[i] == strlen(lit) && memcmp(str[i], lit, strlen(lit)) == 0)
    assert_int_equal(n_loc, 3);
    assert_int_equal(n_fn, 2);
    uint64_t fn_of_line[13] = {0};
    for (size_t i = 0; i < n_loc; i++) {
        assert_true(loc_line[i] == 7 || loc_line[i] == 10 || loc_line[i] == 12);
        fn_of_line[loc_line[i]] = loc_fn[i];
    }
    assert_int_equal(fn_of_line[10], fn_of_line[12]);
    assert_int_not_equal(fn_of_line[10], fn_of_line[7]);
    /* Function ids are 1..n in the order written. */
    size_t run = fn_of_line[10] - 1, leaf = fn_of_line[7] - 1;
    assert_true(STR_IS(fn_name[run], "C.run") && STR_IS(fn_file[run], "/w/app.py"));
    assert_true(STR_IS(fn_name[leaf], "leaf") && STR_IS(fn_file[leaf], "lib.c"));
#undef STR_IS
    skpx_free(raw);
    skpx_free(gz);
}

/* The profile's top-level scalars and its string table, and per sample the number of frames,
 * the values and the labels (key, value) as strings. */
struct pp_top {
    uint64_t field_count[16];
    uint64_t scalar[16]; /* last value of each varint field */
    uint64_t period_type[2];
    const char *str[8200];
    size_t str_len[8200];
    size_t n_str;
    size_t n_samples;
    size_t depth[16];
    uint64_t values[16][2];
    size_t n_values[16];
    uint64_t label[16][8][2];
    size_t n_label[16];
};

static void pp_read(const uint8_t *raw, size_t len, struct pp_top *o)
{
    memset(o, 0, sizeof(*o));
    struct pb r = {raw, raw + len}, sub, sub2;
    uint32_t field, wire;
    uint64_t val;
    while (pb_next(&r, &field, &wire, &val, &sub)) {
        assert_true(field < 16);
        o->field_count[field]++;
        if (wire == 0)
            o->scalar[field] = val;
        if (field == 6) {
            assert_true(o->n_str < 8200);
            o->str[o->n_str] = (const char *)sub.p;
            o->str_len[o->n_str++] = (size_t)(sub.end - sub.p);
        } else if (field == 11) {
            while (pb_next(&sub, &field, &wire, &val, &sub2))
                o->period_type[field - 1] = val;
        } else if (field == 2 && o->n_samples < 16) {
            size_t s = o->n_samples++;
            while (pb_next(&sub, &field, &wire, &val, &sub2)) {
                if (field == 1) {
                    while (sub2.p < sub2.end) {
                        pb_varint(&sub2);
                        o->depth[s]++;
                    }
                } else if (field == 2) {
                    while (sub2.p < sub2.end && o->n_values[s] < 2)
                        o->values[s][o->n_values[s]++] = pb_varint(&sub2);
                } else if (field == 3 && o->n_label[s] < 8) {
                    struct pb lab = sub2, unused;
                    uint32_t lf, lw;
                    uint64_t lv;
                    while (pb_next(&lab, &lf, &lw, &lv, &unused))
                        if (lf == 1 || lf == 2)
                            o->label[s][o->n_label[s]][lf - 1] = lv;
                    o->n_label[s]++;
                }
            }
        }
    }
}

static bool pp_str_is(const struct pp_top *o, uint64_t i, const char *lit)
{
    return i < o->n_str && o->str_len[i] == strlen(lit) && memcmp(o->str[i], lit, strlen(lit)) == 0;
}

/* Renders `a` as pprof with `m`, gunzipped and read into *o; returns the raw profile (o's
 * strings point into it; caller frees). */
static uint8_t *pp_render(const struct analysis *a, const struct export_meta *m, struct pp_top *o)
{
    uint8_t *gz;
    size_t gz_len, len;
    assert_int_equal(export_render(a, EXPORT_PPROF, m, &gz, &gz_len), SKP_OK);
    uint8_t *raw = gunzip(gz, gz_len, &len);
    skpx_free(gz);
    pp_read(raw, len, o);
    return raw;
}

/* The documented header: default sample type "samples", period type wall/nanoseconds, time =
 * the window start, duration = snapshots x period, the title as a comment, and the fourth label
 * task_id on every sample. */
static void pprof_header_labels_and_time(void **state)
{
    (void)state;
    static struct pp_top o;
    uint8_t *raw = pp_render(&g_an, &g_meta, &o);
    assert_int_equal(o.field_count[1], 2);
    assert_true(pp_str_is(&o, o.scalar[14], "samples"));
    assert_true(pp_str_is(&o, o.period_type[0], "wall"));
    assert_true(pp_str_is(&o, o.period_type[1], "nanoseconds"));
    assert_int_equal(o.scalar[12], 20ull * 1000000);
    assert_int_equal(o.scalar[9], 1700000000000ull * 1000000);
    assert_int_equal(o.scalar[10], 8ull * 20 * 1000000);
    assert_int_equal(o.field_count[13], 1);
    assert_true(pp_str_is(&o, o.scalar[13], "task t1 /orders"));
    assert_int_equal(o.n_samples, 5);
    for (size_t s = 0; s < o.n_samples; s++) {
        assert_int_equal(o.n_label[s], 4);
        assert_true(pp_str_is(&o, o.label[s][3][0], "task_id"));
        assert_true(pp_str_is(&o, o.label[s][3][1], "t1"));
        assert_int_equal(o.values[s][1], o.values[s][0] * 20 * 1000000);
    }
    skpx_free(raw);
}

/* Value mode (process profiles): one sample type, the meta's, values = self counts as they are,
 * period 1 of that type, no default type and no duration. */
static void pprof_value_mode_has_one_type(void **state)
{
    (void)state;
    struct export_meta m = g_meta;
    m.value_type = "alloc_space";
    m.value_unit = "bytes";
    static struct pp_top o;
    uint8_t *raw = pp_render(&g_an, &m, &o);
    assert_int_equal(o.field_count[1], 1);
    assert_int_equal(o.field_count[14], 0);
    assert_int_equal(o.field_count[10], 0);
    assert_true(pp_str_is(&o, o.period_type[0], "alloc_space"));
    assert_true(pp_str_is(&o, o.period_type[1], "bytes"));
    assert_int_equal(o.scalar[12], 1);
    uint64_t sum = 0;
    for (size_t s = 0; s < o.n_samples; s++) {
        assert_int_equal(o.n_values[s], 1);
        sum += o.values[s][0];
    }
    assert_int_equal(sum, 8);
    skpx_free(raw);
}

/* A stack deeper than the wire builder's default 1,024 frames keeps every frame (stored stacks
 * hold up to 4,096). */
static void pprof_deep_stack_is_whole(void **state)
{
    (void)state;
    enum { DEEP = 3000 };
    struct analysis_node *n = skpx_xcalloc(DEEP, sizeof(*n));
    static char sigs[DEEP][24];
    for (uint32_t i = 0; i < DEEP; i++) {
        snprintf(sigs[i], sizeof(sigs[i]), "f%u (deep.c:%u)", i, i + 1);
        n[i] =
            (struct analysis_node){i + 1, i, sigs[i], 0, 0, 1, i + 1 < DEEP ? i + 1 : NONE, NONE};
    }
    struct analysis_tree t = {n, DEEP};
    struct analysis a = {.trees = &t, .n_trees = 1, .n_snapshots = 1};
    static struct pp_top o;
    uint8_t *raw = pp_render(&a, &g_meta, &o);
    assert_int_equal(o.n_samples, 1);
    assert_int_equal(o.depth[0], DEEP);
    assert_int_equal(o.field_count[4], DEEP); /* locations */
    assert_int_equal(o.field_count[5], DEEP); /* functions */
    skpx_free(raw);
    skpx_free(n);
}

/* Issue 25 #10: a stack deeper than 4,096 frames came out empty in every export. Now its outer
 * frames are cut under a "(truncated N frames)" root: one chain of 5,000 frames (1 sample at the
 * leaf) beside a shallow sample of its first 2 frames. */
static void deep_stacks_are_truncated_with_a_marker(void **state)
{
    (void)state;
    enum { DEEP = 5000 };
    struct analysis_node *n = skpx_xcalloc(DEEP + 1, sizeof(*n));
    static char sigs[DEEP][24];
    for (uint32_t i = 0; i < DEEP; i++) {
        snprintf(sigs[i], sizeof(sigs[i]), "f%u", i);
        /* f0 holds both samples, the others the deep one */
        n[i] = (struct analysis_node){
            i + 1, i, sigs[i], 0, 0, i == 0 ? 2 : 1, i + 1 < DEEP ? i + 1 : NONE, NONE};
    }
    /* f0's second child: "shallow", after the chain's f1 */
    n[DEEP] = (struct analysis_node){DEEP + 1, 1, "shallow", 0, 0, 1, NONE, NONE};
    n[0].count = 2;
    n[1].next_sibling = DEEP;
    struct analysis_tree t = {n, DEEP + 1};
    struct analysis a = {.trees = &t, .n_trees = 1, .n_snapshots = 2};
    uint8_t *out;
    size_t len;
    assert_int_equal(export_render(&a, EXPORT_COLLAPSED, NULL, &out, &len), SKP_OK);
    char *s = as_string(out, len);
    /* 5,000 frames: the outer 905 cut, the marker + the innermost 4,095 kept. */
    assert_non_null(strstr(s, "f0;shallow 1\n"));
    char *deep = strstr(s, "(truncated 905 frames);f905;f906;");
    assert_non_null(deep);
    assert_non_null(strstr(deep, ";f4998;f4999 1\n"));
    size_t semis = 0;
    for (char *p = deep; *p && *p != '\n'; p++)
        semis += *p == ';';
    assert_int_equal(semis + 1, 4096);
    skpx_free(s);
    skpx_free(out);
    /* pprof: two samples, the deep one 4,096 frames whose root is the marker. */
    static struct pp_top o;
    uint8_t *raw = pp_render(&a, &g_meta, &o);
    assert_int_equal(o.n_samples, 2);
    assert_true((o.depth[0] == 4096 && o.depth[1] == 2) || (o.depth[0] == 2 && o.depth[1] == 4096));
    bool found = false;
    for (size_t i = 0; i < o.n_str; i++)
        found =
            found || (o.str_len[i] == 22 && memcmp(o.str[i], "(truncated 905 frames)", 22) == 0);
    assert_true(found);
    skpx_free(raw);
    /* speedscope and HTML carry the marker too (they were empty). */
    for (int f = EXPORT_SPEEDSCOPE; f <= EXPORT_HTML; f++) {
        if (f == EXPORT_COLLAPSED)
            continue;
        assert_int_equal(export_render(&a, (enum export_format)f, &g_meta, &out, &len), SKP_OK);
        s = as_string(out, len);
        assert_non_null(strstr(s, "(truncated 905 frames)"));
        assert_non_null(strstr(s, "f4999"));
        skpx_free(s);
        skpx_free(out);
    }
    skpx_free(n);
}

static void speedscope_has_schema_fields(void **state)
{
    (void)state;
    uint8_t *out;
    size_t len;
    render(EXPORT_SPEEDSCOPE, &g_meta, &out, &len);
    json_error_t jerr;
    json_t *j = json_loadb((const char *)out, len, 0, &jerr);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "$schema")),
                        "https://www.speedscope.app/file-format-schema.json");
    json_t *frames = json_object_get(json_object_get(j, "shared"), "frames");
    assert_int_equal(json_array_size(frames), 7);
    assert_string_equal(json_string_value(json_object_get(json_array_get(frames, 0), "name")), "A");
    json_t *p = json_array_get(json_object_get(j, "profiles"), 0);
    assert_string_equal(json_string_value(json_object_get(p, "type")), "sampled");
    assert_string_equal(json_string_value(json_object_get(p, "unit")), "milliseconds");
    assert_string_equal(json_string_value(json_object_get(p, "name")), "task t1 /orders");
    json_t *samples = json_object_get(p, "samples");
    json_t *weights = json_object_get(p, "weights");
    assert_int_equal(json_array_size(samples), 5);
    assert_int_equal(json_array_size(weights), 5);
    json_int_t sum = 0;
    for (size_t i = 0; i < 5; i++)
        sum += json_integer_value(json_array_get(weights, i));
    assert_int_equal(sum, 8 * 20);
    assert_int_equal(json_integer_value(json_object_get(p, "endValue")), 8 * 20);
    assert_int_equal(json_integer_value(json_object_get(p, "startValue")), 0);
    /* A;B;method3 is frames 0,1,2 root first. */
    json_t *s1 = json_array_get(samples, 1);
    assert_int_equal(json_array_size(s1), 3);
    assert_int_equal(json_integer_value(json_array_get(s1, 2)), 2);
    json_decref(j);
    skpx_free(out);
}

static void html_is_self_contained(void **state)
{
    (void)state;
    uint8_t *out;
    size_t len;
    render(EXPORT_HTML, &g_meta, &out, &len);
    char *s = as_string(out, len);
    assert_non_null(strstr(s, "<!DOCTYPE html>"));
    assert_non_null(strstr(s, "method3 (demo.c:42)"));
    assert_non_null(strstr(s, "\\/srv\\/app.py.handler: 50"));
    assert_non_null(strstr(s, "<title>task t1 /orders</title>"));
    assert_null(strstr(s, "http://"));
    assert_null(strstr(s, "https://"));
    assert_null(strstr(s, "<script src"));
    assert_null(strstr(s, "<link"));
    /* The hostile signature cannot close the data block early: exactly two </script>. */
    int closes = 0;
    for (char *p = strstr(s, "</script>"); p; p = strstr(p + 1, "</script>"))
        closes++;
    assert_int_equal(closes, 2);
    skpx_free(s);
    skpx_free(out);
}

/* Readable names (export_meta.readable_names, common/frame_sig.h): collapsed stacks in py-spy's
 * "func (file:line)" form, speedscope frames as name + file + line; the HTML flame graph always
 * carries each frame's function and short location beside the full signature. */
static void readable_names_in_exports(void **state)
{
    (void)state;
    struct export_meta m = g_meta;
    m.readable_names = true;
    uint8_t *out;
    size_t len;
    render(EXPORT_COLLAPSED, &m, &out, &len);
    char *s = as_string(out, len);
    assert_non_null(strstr(s, "A;B;method3 (demo.c:42) 3\n"));
    assert_non_null(strstr(s, "A;B;handler (app.py:50) 1\n"));
    assert_null(strstr(s, "/srv/app.py"));
    skpx_free(s);
    skpx_free(out);

    render(EXPORT_SPEEDSCOPE, &m, &out, &len);
    json_error_t jerr;
    json_t *doc = json_loadb((const char *)out, len, 0, &jerr);
    assert_non_null(doc);
    json_t *frames = json_object_get(json_object_get(doc, "shared"), "frames");
    bool seen_py = false, seen_c = false;
    for (size_t i = 0; i < json_array_size(frames); i++) {
        json_t *f = json_array_get(frames, i);
        const char *name = json_string_value(json_object_get(f, "name"));
        const char *file = json_string_value(json_object_get(f, "file"));
        json_int_t line = json_integer_value(json_object_get(f, "line"));
        if (strcmp(name, "handler") == 0) {
            assert_string_equal(file, "/srv/app.py");
            assert_int_equal(line, 50);
            seen_py = true;
        } else if (strcmp(name, "method3") == 0) {
            assert_string_equal(file, "demo.c");
            assert_int_equal(line, 42);
            seen_c = true;
        } else if (strcmp(name, "A") == 0) {
            assert_null(json_object_get(f, "file"));
            assert_null(json_object_get(f, "line"));
        }
    }
    assert_true(seen_py && seen_c);
    json_decref(doc);
    skpx_free(out);

    /* Without the flag the full signatures stay (what `skyprof record` writes). */
    render(EXPORT_COLLAPSED, &g_meta, &out, &len);
    s = as_string(out, len);
    assert_non_null(strstr(s, "A;B;/srv/app.py.handler:50 1\n"));
    skpx_free(s);
    skpx_free(out);

    render(EXPORT_HTML, &g_meta, &out, &len);
    s = as_string(out, len);
    assert_non_null(
        strstr(s, "\"n\":\"\\/srv\\/app.py.handler: 50\",\"f\":\"handler\",\"l\":\"app.py:50\""));
    assert_non_null(strstr(s, "\"f\":\"method3\",\"l\":\"demo.c:42\""));
    assert_non_null(strstr(s, "function label(n)"));
    skpx_free(s);
    skpx_free(out);
}

/* Finding 13: "<!--<script>" in a frame name put the HTML tokenizer in "script data double
 * escaped" state, where the data block's own "</script>" no longer closes it, and the page
 * rendered blank. No '<' may reach the data block. */
static void html_comment_script_in_a_frame_cannot_blank_it(void **state)
{
    (void)state;
    struct analysis_node nodes[] = {{1, 0, "<!--<script>x&y", 5, 5, 2, NONE, NONE}};
    struct analysis_tree tree = {nodes, 1};
    struct analysis an = {.trees = &tree, .n_trees = 1, .n_snapshots = 2};
    uint8_t *out;
    size_t len;
    assert_int_equal(export_render(&an, EXPORT_HTML, &g_meta, &out, &len), SKP_OK);
    char *s = as_string(out, len);
    const char *open = strstr(s, "<script type=\"application/json\" id=\"skp-data\">");
    assert_non_null(open);
    open = strchr(open, '>') + 1;
    const char *close = strstr(open, "</script>");
    assert_non_null(close);
    /* The data block holds no '<' at all, and the name comes back intact from its JSON. */
    assert_null(memchr(open, '<', (size_t)(close - open)));
    assert_non_null(strstr(open, "\\u003c!--\\u003cscript\\u003ex\\u0026y"));
    json_error_t jerr;
    json_t *j = json_loadb(open, (size_t)(close - open), 0, &jerr);
    assert_non_null(j);
    json_t *k = json_object_get(json_array_get(json_object_get(j, "k"), 0), "n");
    assert_string_equal(json_string_value(k), "<!--<script>x&y");
    json_decref(j);
    skpx_free(s);
    skpx_free(out);
}

static void empty_analysis_renders(void **state)
{
    (void)state;
    struct analysis empty = {
        .tip = "Data not found", .trees = NULL, .n_trees = 0, .n_snapshots = 0};
    for (int f = EXPORT_PPROF; f <= EXPORT_HTML; f++) {
        uint8_t *out;
        size_t len;
        assert_int_equal(export_render(&empty, (enum export_format)f, NULL, &out, &len), SKP_OK);
        if (f == EXPORT_COLLAPSED)
            assert_int_equal(len, 0);
        else
            assert_true(len > 0);
        skpx_free(out);
    }
}

static void malformed_tree_is_rejected(void **state)
{
    (void)state;
    struct analysis_node cyc[] = {
        {1, 0, "R", 0, 0, 2, 1, NONE},
        {2, 1, "S", 0, 0, 1, 2, 1}, /* S's sibling is itself-ish: 1 -> 2 -> 1 ... */
        {3, 1, "T", 0, 0, 1, NONE, 1},
    };
    struct analysis_tree t = {cyc, 3};
    struct analysis a = {.trees = &t, .n_trees = 1, .n_snapshots = 2};
    uint8_t *out = (uint8_t *)1;
    size_t len;
    assert_int_equal(export_render(&a, EXPORT_COLLAPSED, NULL, &out, &len), SKP_EINVAL);
    assert_null(out);
    struct analysis_node oob[] = {{1, 0, "R", 0, 0, 1, 7, NONE}};
    struct analysis_tree t2 = {oob, 1};
    struct analysis a2 = {.trees = &t2, .n_trees = 1, .n_snapshots = 1};
    assert_int_equal(export_render(&a2, EXPORT_PPROF, NULL, &out, &len), SKP_EINVAL);
    assert_int_equal(export_render(NULL, EXPORT_PPROF, NULL, &out, &len), SKP_EINVAL);
    assert_int_equal(export_render(&g_an, (enum export_format)42, NULL, &out, &len), SKP_EINVAL);
}

/* Signatures are not validated by the agents' protocol: invalid UTF-8 must not fail an export. */
static void invalid_utf8_signature_is_replaced(void **state)
{
    (void)state;
    struct analysis_node n[] = {{1, 0, "ok\xff\xfe-\xc3\xa9-\xed\xa0\x80", 0, 0, 2, NONE, NONE}};
    struct analysis_tree t = {n, 1};
    struct analysis a = {.trees = &t, .n_trees = 1, .n_snapshots = 2};
    static const enum export_format fs[] = {EXPORT_SPEEDSCOPE, EXPORT_HTML, EXPORT_COLLAPSED,
                                            EXPORT_PPROF};
    for (size_t i = 0; i < sizeof(fs) / sizeof(fs[0]); i++) {
        uint8_t *out;
        size_t len;
        assert_int_equal(export_render(&a, fs[i], NULL, &out, &len), SKP_OK);
        if (fs[i] == EXPORT_SPEEDSCOPE || fs[i] == EXPORT_HTML) {
            char *s = as_string(out, len);
            /* Bad bytes become '?', the valid "é" stays (jansson escapes nothing by default). */
            assert_non_null(strstr(s, "ok?"
                                      "?-\xc3\xa9-?"
                                      "?"
                                      "?"));
            skpx_free(s);
        }
        skpx_free(out);
    }
}

/* Every allocation of the C exporters fails in turn: each render ends OK or ENOMEM and the
 * byte counter returns to where it was (nothing leaks). jansson's own allocations are not
 * counted (it uses the libc allocator). */
/* One export with the k-th allocation failing (skp_test_alloc_faults). */
static skp_err render_body(void *ctx, long k)
{
    (void)k;
    uint8_t *out = NULL;
    size_t len = 0;
    skp_err err = export_render(&g_an, *(enum export_format *)ctx, &g_meta, &out, &len);
    if (err == SKP_OK)
        skpx_free(out);
    else
        assert_null(out);
    return err;
}

static void allocation_failures_are_clean(void **state)
{
    (void)state;
    for (int f = EXPORT_PPROF; f <= EXPORT_HTML; f++) {
        enum export_format fmt = (enum export_format)f;
        struct skp_alloc_fault_runs runs = skp_test_alloc_faults(render_body, &fmt, 2000);
        assert_true(runs.n_ok > 0 && runs.n_nomem > 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(format_names_round_trip),
        cmocka_unit_test(self_counts_follow_children),
        cmocka_unit_test(collapsed_lines_and_totals),
        cmocka_unit_test(pprof_decodes_with_samples_and_labels),
        cmocka_unit_test(speedscope_has_schema_fields),
        cmocka_unit_test(html_is_self_contained),
        cmocka_unit_test(collapsed_frames_never_end_in_a_count),
        cmocka_unit_test(pprof_lines_of_a_function_share_it),
        cmocka_unit_test(pprof_header_labels_and_time),
        cmocka_unit_test(pprof_value_mode_has_one_type),
        cmocka_unit_test(pprof_deep_stack_is_whole),
        cmocka_unit_test(deep_stacks_are_truncated_with_a_marker),
        cmocka_unit_test(html_comment_script_in_a_frame_cannot_blank_it),
        cmocka_unit_test(readable_names_in_exports),
        cmocka_unit_test(empty_analysis_renders),
        cmocka_unit_test(malformed_tree_is_rejected),
        cmocka_unit_test(invalid_utf8_signature_is_replaced),
        cmocka_unit_test(allocation_failures_are_clean),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
