/* Unit tests for src/wire/pprof_encode.c: merging of identical samples, the byte budget, labels,
 * gzip framing, allocation faults, and a top-level scan of the encoded protobuf. With
 * SKP_PPROF_OUT=<path> set, test_write_file also writes a gzip profile there for `go tool pprof`
 * (the ctest pprof_encode_gotool reads it back with the real tool). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "harness/skp_alloc_faults.h"
#include "wire/pprof_encode.h"

static const struct skpx_pprof_type TYPES[2] = {{"samples", "count"}, {"cpu", "nanoseconds"}};

static struct skpx_pprof_frame fr(const char *func, const char *file, int64_t line)
{
    struct skpx_pprof_frame f = {func, strlen(func), file, strlen(file), line};
    return f;
}

/* Reads a varint at *i; returns false at the end or on a bad varint. */
static bool rd_varint(const uint8_t *b, size_t n, size_t *i, uint64_t *v)
{
    *v = 0;
    for (int s = 0; s < 64 && *i < n; s += 7) {
        uint8_t c = b[(*i)++];
        *v |= (uint64_t)(c & 0x7f) << s;
        if (!(c & 0x80))
            return true;
    }
    return false;
}

/* Counts top-level fields by number (1..15) of a raw profile; fails on malformed framing. */
static void scan_top(const uint8_t *b, size_t n, unsigned counts[16])
{
    memset(counts, 0, 16 * sizeof(unsigned));
    size_t i = 0;
    while (i < n) {
        uint64_t tag, v;
        assert_true(rd_varint(b, n, &i, &tag));
        unsigned field = (unsigned)(tag >> 3);
        assert_true(field >= 1 && field <= 15);
        counts[field]++;
        if ((tag & 7) == 0) {
            assert_true(rd_varint(b, n, &i, &v));
        } else {
            assert_int_equal(tag & 7, 2);
            assert_true(rd_varint(b, n, &i, &v));
            assert_true(v <= n - i);
            i += v;
        }
    }
    assert_int_equal(i, n);
}

static bool contains(const uint8_t *b, size_t n, const char *s)
{
    size_t k = strlen(s);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(b + i, s, k) == 0)
            return true;
    return false;
}

static void test_merge_and_scan(void **state)
{
    (void)state;
    struct skpx_pprof *p = NULL;
    assert_int_equal(skpx_pprof_new(TYPES, 2, 1 << 20, &p), SKP_OK);
    struct skpx_pprof_frame a[3] = {fr("burn", "app.py", 10), fr("run", "app.py", 20),
                                    fr("main", "app.py", 30)};
    struct skpx_pprof_label lab[2] = {{.key = "thread_name", .str = "worker-1"},
                                      {.key = "thread_id", .num = 42}};
    int64_t v[2] = {1, 10000000};
    assert_int_equal(skpx_pprof_add(p, a, 3, v, lab, 2), SKP_OK);
    assert_int_equal(skpx_pprof_add(p, a, 3, v, lab, 2), SKP_OK); /* merged */
    assert_int_equal(skpx_pprof_n_samples(p), 1);
    lab[1].num = 43; /* other thread: its own sample */
    assert_int_equal(skpx_pprof_add(p, a, 3, v, lab, 2), SKP_OK);
    assert_int_equal(skpx_pprof_add(p, a + 1, 2, v, NULL, 0), SKP_OK);
    assert_int_equal(skpx_pprof_add(p, NULL, 0, v, NULL, 0), SKP_OK); /* empty stack */
    assert_int_equal(skpx_pprof_n_samples(p), 4);
    assert_int_equal(skpx_pprof_set_period(p, &TYPES[1], 10000000), SKP_OK);
    skpx_pprof_set_time(p, 1700000000000000000LL, 60000000000LL);
    assert_int_equal(skpx_pprof_add_comment(p, "skyprof test"), SKP_OK);

    uint8_t *raw = NULL;
    size_t raw_len = 0;
    assert_int_equal(skpx_pprof_encode(p, false, &raw, &raw_len), SKP_OK);
    unsigned c[16];
    scan_top(raw, raw_len, c);
    assert_int_equal(c[1], 2);  /* sample types */
    assert_int_equal(c[2], 4);  /* samples */
    assert_int_equal(c[4], 3);  /* locations: burn, run, main */
    assert_int_equal(c[5], 3);  /* functions */
    assert_int_equal(c[9], 1);  /* time */
    assert_int_equal(c[10], 1); /* duration */
    assert_int_equal(c[11], 1); /* period type */
    assert_int_equal(c[12], 1); /* period */
    assert_int_equal(c[13], 1); /* comment */
    assert_true(contains(raw, raw_len, "burn"));
    assert_true(contains(raw, raw_len, "worker-1"));
    assert_true(contains(raw, raw_len, "nanoseconds"));
    /* string table: "" first */
    assert_true(c[6] >= 10);

    uint8_t *gz = NULL;
    size_t gz_len = 0;
    assert_int_equal(skpx_pprof_encode(p, true, &gz, &gz_len), SKP_OK);
    assert_true(gz_len > 18);
    assert_int_equal(gz[0], 0x1f);
    assert_int_equal(gz[1], 0x8b);
    skpx_free(gz);
    skpx_free(raw);
    skpx_pprof_free(p);
}

/* Comments past the first capacity (4): the array doubles and every comment is encoded. */
static void test_many_comments(void **state)
{
    (void)state;
    struct skpx_pprof *p = NULL;
    assert_int_equal(skpx_pprof_new(TYPES, 1, 1 << 20, &p), SKP_OK);
    char text[32];
    for (int i = 0; i < 40; i++) {
        snprintf(text, sizeof(text), "comment-%d", i);
        assert_int_equal(skpx_pprof_add_comment(p, text), SKP_OK);
    }
    uint8_t *raw = NULL;
    size_t raw_len = 0;
    assert_int_equal(skpx_pprof_encode(p, false, &raw, &raw_len), SKP_OK);
    unsigned c[16];
    scan_top(raw, raw_len, c);
    assert_int_equal(c[13], 40);
    assert_true(contains(raw, raw_len, "comment-0"));
    assert_true(contains(raw, raw_len, "comment-39"));
    skpx_free(raw);
    skpx_pprof_free(p);
}

static void test_budget(void **state)
{
    (void)state;
    struct skpx_pprof *p = NULL;
    assert_int_equal(skpx_pprof_new(TYPES, 1, 64 * 1024, &p), SKP_OK);
    int64_t v[1] = {1};
    char name[64];
    size_t added = 0;
    skp_err err = SKP_OK;
    for (int i = 0; i < 100000 && !err; i++) {
        snprintf(name, sizeof(name), "function_number_%d", i);
        struct skpx_pprof_frame f = fr(name, "file.c", i);
        err = skpx_pprof_add(p, &f, 1, v, NULL, 0);
        if (!err)
            added++;
    }
    assert_int_equal(err, SKP_EFULL);
    assert_true(added > 100);
    assert_true(skpx_pprof_bytes(p) <= 64 * 1024);
    /* merging into an existing sample still works when full */
    struct skpx_pprof_frame f0 = fr("function_number_0", "file.c", 0);
    size_t before = skpx_pprof_n_samples(p);
    assert_int_equal(skpx_pprof_add(p, &f0, 1, v, NULL, 0), SKP_OK);
    assert_int_equal(skpx_pprof_n_samples(p), before);
    uint8_t *out = NULL;
    size_t len = 0;
    assert_int_equal(skpx_pprof_encode(p, true, &out, &len), SKP_OK);
    skpx_free(out);
    skpx_pprof_free(p);
}

static void test_bad_args(void **state)
{
    (void)state;
    struct skpx_pprof *p = (void *)1;
    assert_int_equal(skpx_pprof_new(TYPES, 0, 1 << 20, &p), SKP_EINVAL);
    assert_null(p);
    assert_int_equal(skpx_pprof_new(TYPES, 5, 1 << 20, &p), SKP_EINVAL);
    assert_int_equal(skpx_pprof_new(TYPES, 1, 100, &p), SKP_EINVAL);
    assert_int_equal(skpx_pprof_new(TYPES, 1, 1 << 20, &p), SKP_OK);
    int64_t v[1] = {1};
    struct skpx_pprof_label many[SKPX_PPROF_MAX_LABELS + 1];
    memset(many, 0, sizeof(many));
    assert_int_equal(skpx_pprof_add(p, NULL, 1, v, NULL, 0), SKP_EINVAL);
    assert_int_equal(skpx_pprof_add(p, NULL, 0, NULL, NULL, 0), SKP_EINVAL);
    assert_int_equal(skpx_pprof_add(p, NULL, 0, v, many, SKPX_PPROF_MAX_LABELS + 1), SKP_EINVAL);
    /* deeper than the frame cap: the innermost are kept, the call succeeds */
    static struct skpx_pprof_frame deep[SKPX_PPROF_MAX_FRAMES + 10];
    for (size_t i = 0; i < SKPX_PPROF_MAX_FRAMES + 10; i++)
        deep[i] = fr("f", "x.c", (int64_t)i);
    assert_int_equal(skpx_pprof_add(p, deep, SKPX_PPROF_MAX_FRAMES + 10, v, NULL, 0), SKP_OK);
    skpx_pprof_free(p);
    skpx_pprof_free(NULL);
}

/* Every allocation failing in turn: an error or success, never a crash or a leak. One run: a
 * profile of 50 samples encoded (adds that fail for memory drop their sample). */
static skp_err encode_body(void *ctx, long k)
{
    (void)ctx;
    (void)k;
    struct skpx_pprof *p = NULL;
    skp_err err = skpx_pprof_new(TYPES, 2, 1 << 20, &p);
    if (err)
        return err;
    int64_t v[2] = {1, 2};
    struct skpx_pprof_label lab = {.key = "thread_name", .str = "t"};
    for (int i = 0; i < 50; i++) {
        char name[32];
        snprintf(name, sizeof(name), "fn%d", i % 7);
        struct skpx_pprof_frame f[2] = {fr(name, "a.py", i), fr("main", "a.py", 1)};
        skp_err e = skpx_pprof_add(p, f, 2, v, &lab, 1);
        assert_true(e == SKP_OK || e == SKP_ENOMEM);
    }
    uint8_t *out = NULL;
    size_t len = 0;
    err = skpx_pprof_encode(p, true, &out, &len);
    if (err == SKP_OK)
        skpx_free(out);
    else
        assert_null(out);
    skpx_pprof_free(p);
    return err;
}

static void test_alloc_faults(void **state)
{
    (void)state;
    struct skp_alloc_fault_runs runs = skp_test_alloc_faults(encode_body, NULL, 4000);
    assert_true(runs.n_ok > 0 && runs.n_nomem > 0);
}

/* Writes a small CPU-like profile for the go tool pprof check (only with SKP_PPROF_OUT). */
static void test_write_file(void **state)
{
    (void)state;
    const char *path = getenv("SKP_PPROF_OUT");
    if (!path)
        skip();
    struct skpx_pprof *p = NULL;
    assert_int_equal(skpx_pprof_new(TYPES, 2, 1 << 20, &p), SKP_OK);
    int64_t v[2] = {1, 10000000};
    struct skpx_pprof_label lab[2] = {{.key = "thread_name", .str = "main"},
                                      {.key = "thread_id", .num = 7}};
    for (int i = 0; i < 90; i++) {
        struct skpx_pprof_frame f[3] = {fr("app.burn_cpu", "/srv/app.py", 11 + i % 3),
                                        fr("app.Worker.run", "/srv/app.py", 40),
                                        fr("threading.Thread._bootstrap", "threading.py", 995)};
        assert_int_equal(skpx_pprof_add(p, f, 3, v, lab, 2), SKP_OK);
    }
    for (int i = 0; i < 10; i++) {
        struct skpx_pprof_frame f[2] = {fr("app.sleepy", "/srv/app.py", 60),
                                        fr("threading.Thread._bootstrap", "threading.py", 995)};
        assert_int_equal(skpx_pprof_add(p, f, 2, v, lab, 2), SKP_OK);
    }
    assert_int_equal(skpx_pprof_set_period(p, &TYPES[1], 10000000), SKP_OK);
    skpx_pprof_set_time(p, 1700000000000000000LL, 1000000000LL);
    uint8_t *gz = NULL;
    size_t gz_len = 0;
    assert_int_equal(skpx_pprof_encode(p, true, &gz, &gz_len), SKP_OK);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(gz, 1, gz_len, f), gz_len);
    fclose(f);
    skpx_free(gz);
    skpx_pprof_free(p);
}

/* skpx_pprof_each gives every merged sample once, frames leaf first, with summed values. */
struct each_seen {
    int n;
    int64_t busy_cpu;
    size_t busy_depth;
    char leaf[32];
};

static int each_cb(void *ud, const struct skpx_pprof_frame *f, size_t n, const int64_t *v)
{
    struct each_seen *s = ud;
    s->n++;
    if (n == 2 && f[0].func_len == 4 && memcmp(f[0].func, "busy", 4) == 0) {
        s->busy_cpu = v[1];
        s->busy_depth = n;
        assert_int_equal(f[0].line, 7);
        assert_int_equal(f[1].func_len, 4);
        assert_memory_equal(f[1].func, "main", 4);
        assert_memory_equal(f[0].file, "a.c", 3);
    }
    return 0;
}

static int stop_cb(void *ud, const struct skpx_pprof_frame *f, size_t n, const int64_t *v)
{
    (void)f;
    (void)n;
    (void)v;
    (*(int *)ud)++;
    return 9;
}

static void test_each(void **state)
{
    (void)state;
    struct skpx_pprof *p = NULL;
    assert_int_equal(skpx_pprof_new(TYPES, 2, 1 << 20, &p), SKP_OK);
    struct skpx_pprof_frame busy[2] = {fr("busy", "a.c", 7), fr("main", "a.c", 1)};
    struct skpx_pprof_frame idle[1] = {fr("idle", "", 0)};
    int64_t v1[2] = {1, 10}, v2[2] = {1, 5};
    assert_int_equal(skpx_pprof_add(p, busy, 2, v1, NULL, 0), SKP_OK);
    assert_int_equal(skpx_pprof_add(p, idle, 1, v2, NULL, 0), SKP_OK);
    assert_int_equal(skpx_pprof_add(p, busy, 2, v1, NULL, 0), SKP_OK);
    struct skpx_pprof_frame *scratch = skpx_calloc(SKPX_PPROF_MAX_FRAMES, sizeof(*scratch));
    assert_non_null(scratch);
    struct each_seen s = {0};
    assert_int_equal(skpx_pprof_each(p, scratch, each_cb, &s), 0);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.busy_cpu, 20);
    int calls = 0;
    assert_int_equal(skpx_pprof_each(p, scratch, stop_cb, &calls), 9);
    assert_int_equal(calls, 1);
    skpx_free(scratch);
    skpx_pprof_free(p);
}

/* The value of the last top-level varint field `field` of a raw profile (0 when absent), and
 * string `id` of its table. */
static uint64_t top_varint(const uint8_t *b, size_t n, unsigned field)
{
    uint64_t tag, v, last = 0;
    for (size_t i = 0; i < n;) {
        assert_true(rd_varint(b, n, &i, &tag));
        assert_true(rd_varint(b, n, &i, &v));
        if ((tag & 7) == 2)
            i += v;
        else if ((tag >> 3) == field)
            last = v;
    }
    return last;
}

static bool top_string_is(const uint8_t *b, size_t n, uint64_t id, const char *want)
{
    uint64_t tag, v, k = 0;
    for (size_t i = 0; i < n;) {
        assert_true(rd_varint(b, n, &i, &tag));
        assert_true(rd_varint(b, n, &i, &v));
        if ((tag & 7) != 2)
            continue;
        if ((tag >> 3) == 6 && k++ == id)
            return v == strlen(want) && memcmp(b + i, want, v) == 0;
        i += v;
    }
    return false;
}

/* Location ids of the first sample of a raw profile. */
static size_t first_sample_depth(const uint8_t *b, size_t n)
{
    uint64_t tag, v;
    for (size_t i = 0; i < n;) {
        assert_true(rd_varint(b, n, &i, &tag));
        assert_true(rd_varint(b, n, &i, &v));
        if ((tag & 7) != 2)
            continue;
        if ((tag >> 3) == 2) {
            size_t j = i, end = i + v, depth = 0;
            while (j < end) {
                uint64_t t2, l2, id;
                assert_true(rd_varint(b, end, &j, &t2));
                assert_true(rd_varint(b, end, &j, &l2));
                if ((t2 >> 3) == 1) {
                    for (size_t e = j + l2; j < e; depth++)
                        assert_true(rd_varint(b, e, &j, &id));
                } else {
                    j += l2;
                }
            }
            return depth;
        }
        i += v;
    }
    return 0;
}

/* default_sample_type names one of the builder's types; samples added by location id merge
 * with the same stack added by frames; a raised frame cap keeps deep stacks whole. */
static void test_default_type_ids_and_deep(void **state)
{
    (void)state;
    struct skpx_pprof *p = NULL;
    assert_int_equal(skpx_pprof_new(TYPES, 2, 1 << 20, &p), SKP_OK);
    assert_int_equal(skpx_pprof_set_default_type(p, "wall"), SKP_EINVAL);
    assert_int_equal(skpx_pprof_set_default_type(p, NULL), SKP_EINVAL);
    assert_int_equal(skpx_pprof_set_default_type(p, "samples"), SKP_OK);
    assert_int_equal(skpx_pprof_set_default_type(p, "cpu"), SKP_OK);

    struct skpx_pprof_frame st[2] = {fr("burn", "a.py", 3), fr("main", "a.py", 9)};
    uint64_t ids[2];
    assert_int_equal(skpx_pprof_location(p, &st[0], &ids[0]), SKP_OK);
    assert_int_equal(skpx_pprof_location(p, &st[1], &ids[1]), SKP_OK);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 2);
    int64_t v[2] = {1, 10};
    assert_int_equal(skpx_pprof_add_ids(p, ids, 2, v, NULL, 0), SKP_OK);
    assert_int_equal(skpx_pprof_add(p, st, 2, v, NULL, 0), SKP_OK);
    assert_int_equal(skpx_pprof_n_samples(p), 1);
    uint64_t bad[1] = {3};
    assert_int_equal(skpx_pprof_add_ids(p, bad, 1, v, NULL, 0), SKP_EINVAL);
    bad[0] = 0;
    assert_int_equal(skpx_pprof_add_ids(p, bad, 1, v, NULL, 0), SKP_EINVAL);
    assert_int_equal(skpx_pprof_add_ids(p, NULL, 1, v, NULL, 0), SKP_EINVAL);
    assert_int_equal(skpx_pprof_location(p, NULL, &ids[0]), SKP_EINVAL);

    /* Frame cap: only raised, at most the limit; deep stacks then keep every frame. */
    assert_int_equal(skpx_pprof_set_max_frames(p, SKPX_PPROF_MAX_FRAMES - 1), SKP_EINVAL);
    assert_int_equal(skpx_pprof_set_max_frames(p, SKPX_PPROF_MAX_FRAMES_LIMIT + 1), SKP_EINVAL);
    assert_int_equal(skpx_pprof_set_max_frames(p, 2000), SKP_OK);
    assert_int_equal(skpx_pprof_set_max_frames(p, 3000), SKP_OK);
    assert_int_equal(skpx_pprof_set_max_frames(p, 2500), SKP_EINVAL);
    static struct skpx_pprof_frame deep[3100];
    for (size_t i = 0; i < 3100; i++)
        deep[i] = fr("f", "x.c", (int64_t)i + 1);
    assert_int_equal(skpx_pprof_add(p, deep, 3100, v, NULL, 0), SKP_OK);
    /* Read back: the innermost SKPX_PPROF_MAX_FRAMES of them. */
    struct skpx_pprof_frame *scratch = skpx_calloc(SKPX_PPROF_MAX_FRAMES, sizeof(*scratch));
    assert_non_null(scratch);
    size_t nf = 0;
    const int64_t *vals = NULL;
    assert_true(skpx_pprof_sample(p, 1, scratch, &nf, &vals));
    assert_int_equal(nf, SKPX_PPROF_MAX_FRAMES);
    assert_int_equal(scratch[0].line, 1);
    skpx_free(scratch);
    /* Keys are varints: a string label and a numeric one of the same key stay apart, a negative
     * number (ten bytes) round-trips, and the same labels again merge. */
    struct skpx_pprof_label ls = {.key = "k", .str = "1"};
    struct skpx_pprof_label ln = {.key = "k", .num = -5, .num_unit = "bytes"};
    assert_int_equal(skpx_pprof_add(p, st, 2, v, &ls, 1), SKP_OK);
    assert_int_equal(skpx_pprof_add(p, st, 2, v, &ln, 1), SKP_OK);
    assert_int_equal(skpx_pprof_add(p, st, 2, v, &ln, 1), SKP_OK);
    assert_int_equal(skpx_pprof_n_samples(p), 4);

    uint8_t *raw = NULL;
    size_t raw_len = 0;
    assert_int_equal(skpx_pprof_encode(p, false, &raw, &raw_len), SKP_OK);
    unsigned c[16];
    scan_top(raw, raw_len, c);
    assert_int_equal(c[2], 4);
    assert_true(contains(raw, raw_len, "\x18\xfb\xff\xff\xff\xff\xff\xff\xff\xff\x01"));
    assert_true(top_string_is(raw, raw_len, top_varint(raw, raw_len, 14), "cpu"));
    skpx_pprof_free(p);
    skpx_free(raw);

    /* The deep sample alone: 3000 location ids in the encoded sample. */
    assert_int_equal(skpx_pprof_new(TYPES, 2, 1 << 20, &p), SKP_OK);
    assert_int_equal(skpx_pprof_set_max_frames(p, 3000), SKP_OK);
    assert_int_equal(skpx_pprof_add(p, deep, 3100, v, NULL, 0), SKP_OK);
    assert_int_equal(skpx_pprof_encode(p, false, &raw, &raw_len), SKP_OK);
    assert_int_equal(first_sample_depth(raw, raw_len), 3000);
    assert_int_equal(top_varint(raw, raw_len, 14), 0); /* no default type set */
    skpx_free(raw);
    skpx_pprof_free(p);

    /* The deep-key scratch counts against the budget. */
    assert_int_equal(skpx_pprof_new(TYPES, 1, 8192, &p), SKP_OK);
    assert_int_equal(skpx_pprof_set_max_frames(p, 4096), SKP_EFULL);
    skpx_pprof_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_and_scan), cmocka_unit_test(test_many_comments),
        cmocka_unit_test(test_budget),         cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_alloc_faults),   cmocka_unit_test(test_write_file),
        cmocka_unit_test(test_each),           cmocka_unit_test(test_default_type_ids_and_deep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
