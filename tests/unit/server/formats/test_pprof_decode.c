/* Unit tests for the limits of src/server/formats/pprof_decode.c (issue 25): a gzip bomb stops
 * while inflating, a file of millions of tiny entries is refused from pass 1's counts before a
 * table is allocated (the stored 0.5 MB gzip that cost 6.6 GB on every analysis), a sample cap,
 * each refusal counted; an ordinary profile still decodes under the default limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "server/formats/pprof_decode.h"
#include "wire/pprof_encode.h"

/* gzip of `n` copies of the two bytes `a b`. */
static uint8_t *gzip_repeat(uint8_t a, uint8_t b, size_t n, size_t *out_len)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    assert_int_equal(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY), Z_OK);
    uint8_t chunk[65536];
    for (size_t i = 0; i < sizeof(chunk); i += 2) {
        chunk[i] = a;
        chunk[i + 1] = b;
    }
    size_t cap = 1 << 22, used = 0;
    uint8_t *out = skpx_malloc(cap);
    assert_non_null(out);
    size_t left = n * 2;
    while (left > 0) {
        size_t k = left < sizeof(chunk) ? left : sizeof(chunk);
        left -= k;
        z.next_in = chunk;
        z.avail_in = (uInt)k;
        do {
            z.next_out = out + used;
            z.avail_out = (uInt)(cap - used);
            assert_int_not_equal(deflate(&z, left ? Z_NO_FLUSH : Z_FINISH), Z_STREAM_ERROR);
            used = cap - z.avail_out;
            assert_true(used < cap);
        } while (z.avail_in > 0 || (left == 0 && z.avail_out == 0));
    }
    deflateEnd(&z);
    *out_len = used;
    return out;
}

/* 20 M empty samples (`12 00`): 40 MB inflated, under the 64 MiB decompressed limit, but their
 * tables take ~0.5 GB. */
static void empty_samples_refused_before_tables(void **state)
{
    (void)state;
    size_t len = 0;
    uint8_t *gz = gzip_repeat(0x12, 0x00, 20000000, &len);
    assert_true(len < 200000);
    uint64_t before = pprof_decode_refusals();
    struct pprof_profile *p = NULL;
    char why[PPROF_ERR_MAX];
    assert_int_equal(pprof_decode(gz, len, 0, &p, why), SKP_ETOOBIG);
    assert_null(p);
    assert_non_null(strstr(why, "memory"));
    assert_int_equal(pprof_decode_refusals(), before + 1);
    skpx_free(gz);
}

/* Empty labels inside one sample: each costs 64 B of tables per 2 encoded bytes. */
static void labels_refused_by_memory(void **state)
{
    (void)state;
    size_t len = 0;
    /* One sample of 1.2 M empty labels: 0x12 <len> { 0x1a 0x00 ... } - built raw. */
    size_t n = 1200000, body = n * 2;
    uint8_t *raw = skpx_malloc(body + 16);
    assert_non_null(raw);
    size_t o = 0;
    raw[o++] = 0x12;
    for (size_t v = body;; v >>= 7) {
        raw[o++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
        if (v < 0x80)
            break;
    }
    for (size_t i = 0; i < n; i++) {
        raw[o++] = 0x1a;
        raw[o++] = 0x00;
    }
    len = o;
    struct pprof_limits lim = {.max_memory = 64u << 20};
    struct pprof_profile *p = NULL;
    char why[PPROF_ERR_MAX];
    assert_int_equal(pprof_decode_limited(raw, len, &lim, &p, why), SKP_ETOOBIG);
    /* Under a budget that fits, the same file decodes. */
    lim.max_memory = 256u << 20;
    assert_int_equal(pprof_decode_limited(raw, len, &lim, &p, why), SKP_OK);
    assert_int_equal(p->n_labels, n);
    assert_true(p->mem_bytes >= n * sizeof(struct pprof_label));
    pprof_free(p);
    skpx_free(raw);
}

/* 100 MiB of zeros: stopped at the 64 MiB default while inflating. */
static void inflate_stops_at_limit(void **state)
{
    (void)state;
    size_t len = 0;
    uint8_t *gz = gzip_repeat(0, 0, 50u << 20, &len);
    uint64_t before = pprof_decode_refusals();
    struct pprof_profile *p = NULL;
    char why[PPROF_ERR_MAX];
    assert_int_equal(pprof_decode(gz, len, 0, &p, why), SKP_ETOOBIG);
    assert_non_null(strstr(why, "inflates to more than 67108864"));
    assert_int_equal(pprof_decode_refusals(), before + 1);
    skpx_free(gz);
}

static void sample_cap(void **state)
{
    (void)state;
    uint8_t raw[2000];
    for (size_t i = 0; i < sizeof(raw); i += 2) {
        raw[i] = 0x12;
        raw[i + 1] = 0x00;
    }
    struct pprof_limits lim = {.max_samples = 999};
    struct pprof_profile *p = NULL;
    char why[PPROF_ERR_MAX];
    assert_int_equal(pprof_decode_limited(raw, sizeof(raw), &lim, &p, why), SKP_ETOOBIG);
    assert_non_null(strstr(why, "more than 999 samples"));
    lim.max_samples = 1000;
    assert_int_equal(pprof_decode_limited(raw, sizeof(raw), &lim, &p, why), SKP_OK);
    assert_int_equal(p->n_samples, 1000);
    pprof_free(p);
}

/* An ordinary gzip profile from our encoder decodes under the defaults. */
static void ordinary_profile_decodes(void **state)
{
    (void)state;
    const struct skpx_pprof_type type = {"cpu", "nanoseconds"};
    struct skpx_pprof *b = NULL;
    assert_int_equal(skpx_pprof_new(&type, 1, 1 << 20, &b), SKP_OK);
    const struct skpx_pprof_frame st[] = {{"a", 1, "a.py", 4, 1}, {"main", 4, "m.py", 4, 1}};
    int64_t v = 7;
    assert_int_equal(skpx_pprof_add(b, st, 2, &v, NULL, 0), SKP_OK);
    uint8_t *bytes = NULL;
    size_t len = 0;
    assert_int_equal(skpx_pprof_encode(b, true, &bytes, &len), SKP_OK);
    skpx_pprof_free(b);
    struct pprof_profile *p = NULL;
    char why[PPROF_ERR_MAX];
    assert_int_equal(pprof_decode(bytes, len, 0, &p, why), SKP_OK);
    assert_int_equal(p->n_samples, 1);
    assert_true(p->mem_bytes > 0 && p->mem_bytes < 65536);
    pprof_free(p);
    skpx_free(bytes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(empty_samples_refused_before_tables),
        cmocka_unit_test(labels_refused_by_memory),
        cmocka_unit_test(inflate_stops_at_limit),
        cmocka_unit_test(sample_cap),
        cmocka_unit_test(ordinary_profile_decodes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
