/* Unit tests for src/wire/grpc_frame.c: message reassembly across arbitrary feed boundaries,
 * zero-copy delivery, limits, flags, percent-encoding and grpc-timeout values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/pct.h"
#include "wire/grpc_frame.h"

#define MAX_COLLECT 64

struct collected {
    size_t n;
    size_t len[MAX_COLLECT];
    uint8_t data[MAX_COLLECT][512];
    const uint8_t *ptr[MAX_COLLECT];
    int fail_at; /* return SKP_EFULL on this message index (-1 = never) */
};

static skp_err collect_cb(void *ud, const uint8_t *msg, size_t len)
{
    struct collected *c = ud;
    if ((int)c->n == c->fail_at)
        return SKP_EFULL;
    assert_true(c->n < MAX_COLLECT);
    assert_true(len <= sizeof(c->data[0]));
    if (len)
        memcpy(c->data[c->n], msg, len);
    c->len[c->n] = len;
    c->ptr[c->n] = msg;
    c->n++;
    return SKP_OK;
}

/* Builds prefix+payload frames for `n` messages into `out`; message i is `lens[i]` bytes of
 * value (i * 7 + j). Returns the total size. */
static size_t build_stream(uint8_t *out, const size_t *lens, size_t n)
{
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        skpx_grpc_prefix_write(out + w, (uint32_t)lens[i]);
        w += SKPX_GRPC_PREFIX_LEN;
        for (size_t j = 0; j < lens[i]; j++)
            out[w++] = (uint8_t)(i * 7 + j);
    }
    return w;
}

static void check_stream(const struct collected *c, const size_t *lens, size_t n)
{
    assert_int_equal(c->n, n);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(c->len[i], lens[i]);
        for (size_t j = 0; j < lens[i]; j++)
            assert_int_equal(c->data[i][j], (uint8_t)(i * 7 + j));
    }
}

static void prefix_layout_is_big_endian(void **state)
{
    (void)state;
    uint8_t p[SKPX_GRPC_PREFIX_LEN];
    skpx_grpc_prefix_write(p, 0x01020304u);
    static const uint8_t want[] = {0, 1, 2, 3, 4};
    assert_memory_equal(p, want, sizeof(want));
}

static const size_t k_lens[] = {3, 0, 200, 1, 0, 0, 77, 5};

static void split_byte_by_byte(void **state)
{
    (void)state;
    uint8_t buf[1024];
    size_t total = build_stream(buf, k_lens, SKP_ARRAY_LEN(k_lens));
    struct collected c = {.fail_at = -1};
    struct skpx_grpc_reader r;
    skpx_grpc_reader_init(&r, 0);
    assert_int_equal(r.max_msg, SKPX_GRPC_DEFAULT_MAX_MSG);
    for (size_t i = 0; i < total; i++) {
        assert_int_equal(skpx_grpc_reader_feed(&r, buf + i, 1, collect_cb, &c), SKP_OK);
        /* Idle exactly at message boundaries. */
        size_t off = 0;
        bool boundary = false;
        for (size_t k = 0; k < SKP_ARRAY_LEN(k_lens); k++) {
            off += SKPX_GRPC_PREFIX_LEN + k_lens[k];
            if (off == i + 1)
                boundary = true;
        }
        assert_int_equal(skpx_grpc_reader_idle(&r), boundary);
    }
    check_stream(&c, k_lens, SKP_ARRAY_LEN(k_lens));
    skpx_grpc_reader_cleanup(&r);
    skpx_grpc_reader_cleanup(&r); /* twice is fine */
}

static void every_two_and_three_way_split(void **state)
{
    (void)state;
    uint8_t buf[1024];
    size_t total = build_stream(buf, k_lens, SKP_ARRAY_LEN(k_lens));
    for (size_t a = 0; a <= total; a++) {
        for (size_t b = a; b <= total; b += 7) {
            struct collected c = {.fail_at = -1};
            struct skpx_grpc_reader r;
            skpx_grpc_reader_init(&r, 1024);
            assert_int_equal(skpx_grpc_reader_feed(&r, buf, a, collect_cb, &c), SKP_OK);
            assert_int_equal(skpx_grpc_reader_feed(&r, buf + a, b - a, collect_cb, &c), SKP_OK);
            assert_int_equal(skpx_grpc_reader_feed(&r, buf + b, total - b, collect_cb, &c), SKP_OK);
            check_stream(&c, k_lens, SKP_ARRAY_LEN(k_lens));
            assert_true(skpx_grpc_reader_idle(&r));
            skpx_grpc_reader_cleanup(&r);
        }
    }
}

static void whole_messages_are_zero_copy(void **state)
{
    (void)state;
    uint8_t buf[1024];
    size_t total = build_stream(buf, k_lens, SKP_ARRAY_LEN(k_lens));
    struct collected c = {.fail_at = -1};
    struct skpx_grpc_reader r;
    skpx_grpc_reader_init(&r, 0);
    assert_int_equal(skpx_grpc_reader_feed(&r, buf, total, collect_cb, &c), SKP_OK);
    check_stream(&c, k_lens, SKP_ARRAY_LEN(k_lens));
    size_t off = 0;
    for (size_t i = 0; i < c.n; i++) {
        off += SKPX_GRPC_PREFIX_LEN;
        if (c.len[i])
            assert_ptr_equal(c.ptr[i], buf + off);
        off += c.len[i];
    }
    assert_null(r.buf); /* nothing was copied */
    skpx_grpc_reader_cleanup(&r);
}

static void prefix_at_end_of_feed_body_whole_in_next(void **state)
{
    (void)state;
    uint8_t buf[64];
    size_t lens[] = {20};
    build_stream(buf, lens, 1);
    struct collected c = {.fail_at = -1};
    struct skpx_grpc_reader r;
    skpx_grpc_reader_init(&r, 0);
    assert_int_equal(skpx_grpc_reader_feed(&r, buf, SKPX_GRPC_PREFIX_LEN, collect_cb, &c), SKP_OK);
    assert_false(skpx_grpc_reader_idle(&r));
    assert_int_equal(skpx_grpc_reader_feed(&r, buf + 5, 20, collect_cb, &c), SKP_OK);
    check_stream(&c, lens, 1);
    assert_ptr_equal(c.ptr[0], buf + 5);
    skpx_grpc_reader_cleanup(&r);
}

static void max_size_enforced(void **state)
{
    (void)state;
    uint8_t buf[512];
    size_t lens[] = {100};
    size_t total = build_stream(buf, lens, 1);
    struct collected c = {.fail_at = -1};
    struct skpx_grpc_reader r;

    skpx_grpc_reader_init(&r, 100); /* exactly the limit: accepted */
    assert_int_equal(skpx_grpc_reader_feed(&r, buf, total, collect_cb, &c), SKP_OK);
    assert_int_equal(c.n, 1);
    skpx_grpc_reader_cleanup(&r);

    skpx_grpc_reader_init(&r, 99); /* one over: refused from the prefix alone */
    assert_int_equal(skpx_grpc_reader_feed(&r, buf, 3, collect_cb, &c), SKP_OK);
    assert_int_equal(skpx_grpc_reader_feed(&r, buf + 3, 2, collect_cb, &c), SKP_ETOOBIG);
    skpx_grpc_reader_cleanup(&r);

    uint8_t huge[5];
    skpx_grpc_prefix_write(huge, UINT32_MAX);
    skpx_grpc_reader_init(&r, 0);
    assert_int_equal(skpx_grpc_reader_feed(&r, huge, 5, collect_cb, &c), SKP_ETOOBIG);
    assert_null(r.buf);
    skpx_grpc_reader_cleanup(&r);
}

static void flag_byte_checked(void **state)
{
    (void)state;
    uint8_t buf[16] = {1, 0, 0, 0, 2, 'h', 'i'};
    struct collected c = {.fail_at = -1};
    struct skpx_grpc_reader r;
    skpx_grpc_reader_init(&r, 0);
    assert_int_equal(skpx_grpc_reader_feed(&r, buf, 7, collect_cb, &c), SKP_ENOTSUP);
    skpx_grpc_reader_cleanup(&r);

    buf[0] = 2;
    skpx_grpc_reader_init(&r, 0);
    assert_int_equal(skpx_grpc_reader_feed(&r, buf, 1, collect_cb, &c), SKP_OK);
    assert_int_equal(skpx_grpc_reader_feed(&r, buf + 1, 6, collect_cb, &c), SKP_EPROTO);
    skpx_grpc_reader_cleanup(&r);
    assert_int_equal(c.n, 0);
}

static void callback_error_stops_feed(void **state)
{
    (void)state;
    uint8_t buf[1024];
    size_t total = build_stream(buf, k_lens, SKP_ARRAY_LEN(k_lens));
    struct collected c = {.fail_at = 2};
    struct skpx_grpc_reader r;
    skpx_grpc_reader_init(&r, 0);
    assert_int_equal(skpx_grpc_reader_feed(&r, buf, total, collect_cb, &c), SKP_EFULL);
    assert_int_equal(c.n, 2);
    skpx_grpc_reader_cleanup(&r);
}

static void assembly_oom_reported(void **state)
{
    (void)state;
    uint8_t buf[512];
    size_t lens[] = {300};
    size_t total = build_stream(buf, lens, 1);
    struct collected c = {.fail_at = -1};
    struct skpx_grpc_reader r;
    int64_t before = skpx_alloc_live_bytes();
    skpx_grpc_reader_init(&r, 0);
    skpx_alloc_fail_after(0);
    skp_err err = skpx_grpc_reader_feed(&r, buf, 10, collect_cb, &c);
    skpx_alloc_fail_after(-1);
    assert_int_equal(err, SKP_ENOMEM);
    skpx_grpc_reader_cleanup(&r);

    /* A fresh reader succeeds and frees everything at cleanup. */
    skpx_grpc_reader_init(&r, 0);
    assert_int_equal(skpx_grpc_reader_feed(&r, buf, 10, collect_cb, &c), SKP_OK);
    assert_int_equal(skpx_grpc_reader_feed(&r, buf + 10, total - 10, collect_cb, &c), SKP_OK);
    check_stream(&c, lens, 1);
    skpx_grpc_reader_cleanup(&r);
    assert_int_equal(skpx_alloc_live_bytes(), before);
}

struct big_ctx {
    size_t n;
    size_t len;
    bool same;
    const uint8_t *expect;
};

static skp_err big_cb(void *ud, const uint8_t *msg, size_t len)
{
    struct big_ctx *b = ud;
    b->n++;
    b->len = len;
    b->same = memcmp(msg, b->expect, len) == 0;
    return SKP_OK;
}

static void large_message_across_many_feeds(void **state)
{
    (void)state;
    enum { N = 1 << 20, CHUNK = 16384 };
    uint8_t *buf = skpx_malloc(N + 5);
    assert_non_null(buf);
    skpx_grpc_prefix_write(buf, N);
    for (size_t i = 0; i < N; i++)
        buf[5 + i] = (uint8_t)(i * 31);
    struct skpx_grpc_reader r;
    skpx_grpc_reader_init(&r, 0);
    struct big_ctx b = {.expect = buf + 5};
    for (size_t off = 0; off < N + 5; off += CHUNK) {
        size_t n = N + 5 - off < CHUNK ? N + 5 - off : CHUNK;
        assert_int_equal(skpx_grpc_reader_feed(&r, buf + off, n, big_cb, &b), SKP_OK);
    }
    assert_int_equal(b.n, 1);
    assert_int_equal(b.len, N);
    assert_true(b.same);
    assert_true(r.buf_cap <= r.max_msg);
    skpx_grpc_reader_cleanup(&r);
    skpx_free(buf);
}

/* Announcing a large message costs memory in proportion to what is actually sent. */
static void announced_size_is_not_preallocated(void **state)
{
    (void)state;
    uint8_t pfx[5 + 10] = {0};
    skpx_grpc_prefix_write(pfx, 4u * 1024 * 1024);
    struct collected c = {.fail_at = -1};
    struct skpx_grpc_reader r;
    skpx_grpc_reader_init(&r, 0);
    assert_int_equal(skpx_grpc_reader_feed(&r, pfx, sizeof(pfx), collect_cb, &c), SKP_OK);
    assert_true(r.buf_cap <= 256);
    assert_int_equal(r.buf_have, 10);
    skpx_grpc_reader_cleanup(&r);
    /* And the buffer never exceeds the message even when growing by doubling. */
    uint8_t big[5 + 1000];
    skpx_grpc_prefix_write(big, 1000);
    memset(big + 5, 7, 1000);
    struct big_ctx b = {.expect = big + 5};
    skpx_grpc_reader_init(&r, 0);
    for (size_t off = 0; off < sizeof(big); off += 100) {
        size_t n = sizeof(big) - off < 100 ? sizeof(big) - off : 100;
        assert_int_equal(skpx_grpc_reader_feed(&r, big + off, n, big_cb, &b), SKP_OK);
    }
    assert_int_equal(r.buf_cap, 1000);
    assert_int_equal(b.n, 1);
    assert_int_equal(b.len, 1000);
    assert_true(b.same);
    skpx_grpc_reader_cleanup(&r);
}

static uint64_t rng_next(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

struct seq_ctx {
    size_t n;
    bool ok;
    const size_t *lens;
    uint64_t seed; /* content of message i byte j is a hash of (seed, i, j) */
};

static uint8_t content_byte(uint64_t seed, size_t i, size_t j)
{
    return (uint8_t)((seed * 31 + i * 131 + j * 7) >> 3);
}

static skp_err seq_cb(void *ud, const uint8_t *msg, size_t len)
{
    struct seq_ctx *q = ud;
    if (len != q->lens[q->n])
        q->ok = false;
    for (size_t j = 0; j < len && q->ok; j++)
        q->ok = msg[j] == content_byte(q->seed, q->n, j);
    q->n++;
    return SKP_OK;
}

/* Property: for random message sequences cut at random points, the reader delivers exactly the
 * messages that were written, in order, and is idle only at the end. */
static void random_sequences_random_cuts(void **state)
{
    (void)state;
    enum { ROUNDS = 300, MAX_MSGS = 24, MAX_LEN = 700 };
    static uint8_t wire[MAX_MSGS * (MAX_LEN + 5)];
    uint64_t rng = 0x9E3779B97F4A7C15ULL;
    for (int round = 0; round < ROUNDS; round++) {
        size_t n = rng_next(&rng) % (MAX_MSGS + 1);
        size_t lens[MAX_MSGS];
        size_t total = 0;
        for (size_t i = 0; i < n; i++) {
            /* Mostly small, sometimes empty, sometimes large. */
            uint64_t r = rng_next(&rng);
            lens[i] = (r % 5 == 0) ? 0 : (size_t)(r >> 8) % ((r % 3 == 0) ? MAX_LEN : 40);
            skpx_grpc_prefix_write(wire + total, (uint32_t)lens[i]);
            total += 5;
            for (size_t j = 0; j < lens[i]; j++)
                wire[total++] = content_byte((uint64_t)round, i, j);
        }
        struct seq_ctx q = {.ok = true, .lens = lens, .seed = (uint64_t)round};
        struct skpx_grpc_reader r;
        skpx_grpc_reader_init(&r, MAX_LEN);
        size_t off = 0;
        while (off < total) {
            size_t cut = 1 + rng_next(&rng) % (rng_next(&rng) % 2 ? 8 : 900);
            if (cut > total - off)
                cut = total - off;
            assert_int_equal(skpx_grpc_reader_feed(&r, wire + off, cut, seq_cb, &q), SKP_OK);
            off += cut;
        }
        assert_true(q.ok);
        assert_int_equal(q.n, n);
        assert_true(skpx_grpc_reader_idle(&r));
        assert_true(r.buf_cap <= MAX_LEN);
        skpx_grpc_reader_cleanup(&r);
    }
}

static void percent_encode_cases(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        const char *out;
    } cases[] = {
        {"", ""},
        {"plain text ~!", "plain text ~!"},
        {"100%", "100%25"},
        {"a\nb\tc", "a%0Ab%09c"},
        {"caf\xc3\xa9", "caf%C3%A9"},
        {"\x7f\x80\xff", "%7F%80%FF"},
    };
    for (size_t i = 0; i < SKP_ARRAY_LEN(cases); i++) {
        char out[64];
        size_t n = skpx_grpc_percent_encode(cases[i].in, strlen(cases[i].in), out, sizeof(out));
        assert_int_equal(n, strlen(cases[i].out));
        assert_string_equal(out, cases[i].out);
        char back[64];
        size_t m = skpx_pct_decode(out, n, back, sizeof(back), NULL);
        assert_int_equal(m, strlen(cases[i].in));
        assert_string_equal(back, cases[i].in);
    }
}

static void percent_round_trip_all_bytes(void **state)
{
    (void)state;
    char in[256];
    for (int i = 0; i < 256; i++)
        in[i] = (char)i;
    char enc[1024];
    size_t n = skpx_grpc_percent_encode(in, sizeof(in), enc, sizeof(enc));
    assert_true(n < sizeof(enc));
    for (size_t i = 0; i < n; i++)
        assert_true(enc[i] >= 0x20 && enc[i] <= 0x7e);
    char dec[300];
    size_t m = skpx_pct_decode(enc, n, dec, sizeof(dec), NULL);
    assert_int_equal(m, 256);
    assert_memory_equal(dec, in, 256);
}

static void percent_truncation_and_invalid(void **state)
{
    (void)state;
    char out[6];
    /* "ab%25cd" needs 7; with cap 6 only whole units fit: "ab%25c" would be 6 + NUL. */
    size_t n = skpx_grpc_percent_encode("ab%cd", 5, out, sizeof(out));
    assert_int_equal(n, 7);
    assert_string_equal(out, "ab%25");
    assert_int_equal(skpx_grpc_percent_encode("abc", 3, NULL, 0), 3);

    char dec[32];
    static const struct {
        const char *in;
        const char *out;
    } cases[] = {
        {"%", "%"},     {"%4", "%4"},   {"%zz1", "%zz1"}, {"%41%4a", "AJ"},
        {"x%2", "x%2"}, {"%%41", "%A"}, {"a%20b", "a b"},
    };
    for (size_t i = 0; i < SKP_ARRAY_LEN(cases); i++) {
        size_t m = skpx_pct_decode(cases[i].in, strlen(cases[i].in), dec, sizeof(dec), NULL);
        assert_int_equal(m, strlen(cases[i].out));
        assert_string_equal(dec, cases[i].out);
    }
    char small[3];
    assert_int_equal(skpx_pct_decode("abcdef", 6, small, sizeof(small), NULL), 6);
    assert_string_equal(small, "ab");
}

static void timeout_format_cases(void **state)
{
    (void)state;
    static const struct {
        int64_t ms;
        const char *out;
    } cases[] = {
        {0, "0m"},
        {-5, "0m"},
        {1500, "1500m"},
        {99999999, "99999999m"},
        {100000000, "100000S"},
        {100000001, "100001S"},
        {99999999LL * 1000 + 1, "1666667M"},
        {INT64_MAX, "99999999H"},
    };
    for (size_t i = 0; i < SKP_ARRAY_LEN(cases); i++) {
        char out[16];
        skpx_grpc_timeout_format(cases[i].ms, out, sizeof(out));
        assert_string_equal(out, cases[i].out);
        if (cases[i].ms >= 0 && cases[i].ms < INT64_MAX) {
            int64_t back = 0;
            assert_int_equal(skpx_grpc_timeout_parse(out, strlen(out), &back), SKP_OK);
            assert_true(back >= cases[i].ms);
        }
    }
}

static void timeout_parse_cases(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        skp_err err;
        int64_t ms;
    } cases[] = {
        {"100m", SKP_OK, 100},
        {"5S", SKP_OK, 5000},
        {"3M", SKP_OK, 180000},
        {"2H", SKP_OK, 7200000},
        {"1500u", SKP_OK, 2},
        {"1000u", SKP_OK, 1},
        {"1n", SKP_OK, 1},
        {"0n", SKP_OK, 0},
        {"99999999H", SKP_OK, 99999999LL * 3600000},
        {"12345678m", SKP_OK, 12345678},
        {"123456789m", SKP_EINVAL, 0}, /* 9 digits */
        {"m", SKP_EINVAL, 0},
        {"", SKP_EINVAL, 0},
        {"10", SKP_EINVAL, 0},
        {"10x", SKP_EINVAL, 0},
        {"-1m", SKP_EINVAL, 0},
        {"1 m", SKP_EINVAL, 0},
    };
    for (size_t i = 0; i < SKP_ARRAY_LEN(cases); i++) {
        int64_t ms = -1;
        assert_int_equal(skpx_grpc_timeout_parse(cases[i].in, strlen(cases[i].in), &ms),
                         cases[i].err);
        assert_int_equal(ms, cases[i].ms);
    }
}

static void status_names(void **state)
{
    (void)state;
    assert_string_equal(skpx_grpc_status_name(SKPX_GRPC_OK), "OK");
    assert_string_equal(skpx_grpc_status_name(SKPX_GRPC_UNIMPLEMENTED), "UNIMPLEMENTED");
    assert_string_equal(skpx_grpc_status_name(SKPX_GRPC_UNAUTHENTICATED), "UNAUTHENTICATED");
    assert_string_equal(skpx_grpc_status_name(SKPX_GRPC_RESOURCE_EXHAUSTED), "RESOURCE_EXHAUSTED");
    assert_string_equal(skpx_grpc_status_name(17), "UNKNOWN_STATUS");
    assert_string_equal(skpx_grpc_status_name(-1), "UNKNOWN_STATUS");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(prefix_layout_is_big_endian),
        cmocka_unit_test(split_byte_by_byte),
        cmocka_unit_test(every_two_and_three_way_split),
        cmocka_unit_test(whole_messages_are_zero_copy),
        cmocka_unit_test(prefix_at_end_of_feed_body_whole_in_next),
        cmocka_unit_test(max_size_enforced),
        cmocka_unit_test(flag_byte_checked),
        cmocka_unit_test(callback_error_stops_feed),
        cmocka_unit_test(assembly_oom_reported),
        cmocka_unit_test(large_message_across_many_feeds),
        cmocka_unit_test(announced_size_is_not_preallocated),
        cmocka_unit_test(random_sequences_random_cuts),
        cmocka_unit_test(percent_encode_cases),
        cmocka_unit_test(percent_round_trip_all_bytes),
        cmocka_unit_test(percent_truncation_and_invalid),
        cmocka_unit_test(timeout_format_cases),
        cmocka_unit_test(timeout_parse_cases),
        cmocka_unit_test(status_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
