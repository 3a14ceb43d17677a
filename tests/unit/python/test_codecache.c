/* test_codecache.c - unit tests of the Python stack reader's C parts that need no interpreter:
 * the code cache (lookup, key validation, LRU eviction, ownership, allocation failure) and the
 * fault-free reader (process_vm_readv on ourselves: unmapped memory, partial batches). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "python/codecache.h"
#include "python/safe_read.h"

static char *dup_label(const char *s)
{
    return skpx_strdup(s);
}

static struct skp__pycode_key key_of(uintptr_t code)
{
    struct skp__pycode_key k = {.code = code, .filename = 0x1000, .name = 0x2000,
                                .linetable = 0x3000, .firstlineno = 7};
    return k;
}

static void test_find_insert_validate(void **state)
{
    (void)state;
    int64_t before = skpx_alloc_live_bytes();
    struct skp__pycode_cache c;
    assert_int_equal(skp__pycode_cache_init(&c), SKP_OK);
    struct skp__pycode_key k = key_of(0x7f0000001000);
    assert_null(skp__pycode_cache_find(&c, &k));
    struct skp__pycode_entry *e =
        skp__pycode_cache_insert(&c, &k, 3, dup_label("/a.py.f"), 7, NULL, 0);
    assert_non_null(e);
    assert_ptr_equal(skp__pycode_cache_find(&c, &k), e);
    assert_int_equal(e->firsttraceable, 3);
    assert_memory_equal(e->label, "/a.py.f", 7);
    /* a code object reallocated at the same address with another name is a miss */
    struct skp__pycode_key k2 = k;
    k2.name = 0x2008;
    assert_null(skp__pycode_cache_find(&c, &k2));
    k2 = k;
    k2.firstlineno = 8;
    assert_null(skp__pycode_cache_find(&c, &k2));
    k2 = k;
    k2.linetable = 0x3010;
    assert_null(skp__pycode_cache_find(&c, &k2));
    assert_int_equal(skp__pycode_cache_count(&c), 1);
    skp__pycode_cache_cleanup(&c);
    assert_int_equal(skpx_alloc_live_bytes(), before);  /* labels and tables freed */
}

static void test_lru_eviction_bounded(void **state)
{
    (void)state;
    int64_t before = skpx_alloc_live_bytes();
    struct skp__pycode_cache c;
    assert_int_equal(skp__pycode_cache_init(&c), SKP_OK);
    /* many more code objects than slots: the cache stays bounded and evicts */
    size_t n = SKP_PY_CODE_CACHE_SETS * SKP_PY_CODE_CACHE_WAYS * 4;
    for (size_t i = 0; i < n; i++) {
        struct skp__pycode_key k = key_of(0x7f0000000000 + i * 0x40);
        uint8_t *table = skpx_malloc(16);
        assert_non_null(skp__pycode_cache_insert(&c, &k, 0, dup_label("/x.py.g"), 7, table, 16));
        assert_non_null(skp__pycode_cache_find(&c, &k));
    }
    assert_true(skp__pycode_cache_count(&c) <= SKP_PY_CODE_CACHE_SETS * SKP_PY_CODE_CACHE_WAYS);
    assert_true(c.evictions >= n - SKP_PY_CODE_CACHE_SETS * SKP_PY_CODE_CACHE_WAYS);
    /* a recently used entry survives insertions into its set; the LRU one goes */
    struct skp__pycode_key hot = key_of(0x7e0000000000);
    assert_non_null(skp__pycode_cache_insert(&c, &hot, 0, dup_label("hot"), 3, NULL, 0));
    for (size_t i = 0; i < 64; i++) {
        assert_non_null(skp__pycode_cache_find(&c, &hot));
        struct skp__pycode_key k = key_of(0x7d0000000000 + i * 0x40);
        assert_non_null(skp__pycode_cache_insert(&c, &k, 0, dup_label("cold"), 4, NULL, 0));
    }
    assert_non_null(skp__pycode_cache_find(&c, &hot));
    skp__pycode_cache_cleanup(&c);
    skp__pycode_cache_cleanup(&c);  /* idempotent */
    assert_int_equal(skpx_alloc_live_bytes(), before);
}

static void test_init_out_of_memory(void **state)
{
    (void)state;
    struct skp__pycode_cache c;
    skpx_alloc_fail_after(0);
    skp_err err = skp__pycode_cache_init(&c);
    skpx_alloc_fail_after(-1);
    assert_int_equal(err, SKP_ENOMEM);
    skp__pycode_cache_cleanup(&c);
}

static void test_safe_read(void **state)
{
    (void)state;
    assert_true(skp__safe_read_init());
    uint64_t src[4] = {1, 2, 3, 4};
    uint64_t dst[4] = {0};
    assert_true(skp__safe_read((uintptr_t)src, dst, sizeof(src)));
    assert_memory_equal(src, dst, sizeof(src));
    /* unmapped memory: a clean failure, no fault */
    long page = sysconf(_SC_PAGESIZE);
    void *p = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    munmap(p, (size_t)page);
    assert_false(skp__safe_read((uintptr_t)p, dst, 8));
    assert_false(skp__safe_read(0, dst, 8));
    assert_false(skp__safe_read(8, dst, 8));
    /* batch: the pairs before the faulting one are read, the rest are not */
    uint64_t a = 11, b = 22, ra = 0, rb = 0, rc = 0;
    struct iovec loc[3] = {{&ra, 8}, {&rb, 8}, {&rc, 8}};
    struct iovec rem[3] = {{&a, 8}, {p, 8}, {&b, 8}};
    assert_int_equal(skp__safe_readv(loc, rem, 3), 1);
    assert_int_equal(ra, 11);
    rem[1].iov_base = &b;
    assert_int_equal(skp__safe_readv(loc, rem, 3), 3);
    assert_int_equal(rb, 22);
    assert_true(skp__safe_read_calls() >= 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find_insert_validate),
        cmocka_unit_test(test_lru_eviction_bounded),
        cmocka_unit_test(test_init_out_of_memory),
        cmocka_unit_test(test_safe_read),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
