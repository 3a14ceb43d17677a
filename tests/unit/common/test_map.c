/* Unit tests for src/common/map.c: growth, replace, clear, the key-ownership rule (string keys
 * are copied), stable hashes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "common/map.h"

static void maps_grow_and_clear(void **state)
{
    (void)state;
    struct skpx_u64map m = {0};
    struct skpx_strmap sm = {0};
    char key[32];
    for (uint64_t i = 0; i < 10000; i++) {
        assert_int_equal(skpx_u64map_put(&m, i * 0x10001, i), SKP_OK);
        snprintf(key, sizeof(key), "frame-%llu", (unsigned long long)i);
        assert_int_equal(skpx_strmap_put(&sm, key, (uint32_t)i), SKP_OK);
    }
    assert_int_equal(skpx_u64map_put(&m, 5 * 0x10001, 77), SKP_OK); /* replace */
    assert_int_equal(m.n, 10000);
    for (uint64_t i = 0; i < 10000; i++) {
        uint64_t v;
        uint32_t v32;
        assert_true(skpx_u64map_get(&m, i * 0x10001, &v));
        assert_int_equal(v, i == 5 ? 77 : i);
        snprintf(key, sizeof(key), "frame-%llu", (unsigned long long)i);
        assert_true(skpx_strmap_get(&sm, key, &v32));
        assert_int_equal(v32, i);
    }
    uint64_t v;
    uint32_t v32;
    assert_false(skpx_u64map_get(&m, 3, &v));
    assert_false(skpx_strmap_get(&sm, "frame-x", &v32));
    skpx_u64map_clear(&m);
    skpx_strmap_clear(&sm);
    assert_false(skpx_u64map_get(&m, 0x10001, &v));
    assert_false(skpx_strmap_get(&sm, "frame-1", &v32));
    assert_int_equal(skpx_strmap_put(&sm, "again", 1), SKP_OK);
    assert_true(skpx_strmap_get(&sm, "again", &v32));
    skpx_u64map_cleanup(&m);
    skpx_strmap_cleanup(&sm);
    /* the stored stack hash is stable across builds */
    const uint32_t ids[] = {1, 2, 3};
    assert_true(skpx_hash_u32s(ids, 3) == UINT64_C(0xef3be20049355402));
}

static void strmap_owns_its_keys(void **state)
{
    (void)state;
    struct skpx_strmap m = {0};
    char key[16];
    strcpy(key, "caller");
    assert_int_equal(skpx_strmap_put(&m, key, 7), SKP_OK);
    memset(key, 'x', sizeof(key) - 1); /* the caller's buffer changes: the map kept a copy */
    uint32_t v = 0;
    const char *stored = NULL;
    assert_true(skpx_strmap_find(&m, "caller", &v, &stored));
    assert_int_equal(v, 7);
    assert_non_null(stored);
    assert_string_equal(stored, "caller");
    assert_ptr_not_equal(stored, key);
    /* the stored copy survives growth (rehash moves slots, not keys) */
    for (int i = 0; i < 1000; i++) {
        char k[32];
        snprintf(k, sizeof(k), "k%d", i);
        assert_int_equal(skpx_strmap_put(&m, k, (uint32_t)i), SKP_OK);
    }
    const char *again = NULL;
    assert_true(skpx_strmap_find(&m, "caller", &v, &again));
    assert_ptr_equal(again, stored);
    assert_false(skpx_strmap_find(&m, "nope", &v, &again));
    int64_t live = skpx_alloc_live_bytes();
    skpx_strmap_cleanup(&m);
    assert_true(skpx_alloc_live_bytes() < live);
    skpx_strmap_cleanup(NULL);
    skpx_u64map_cleanup(NULL);
}

static void maps_fail_cleanly_without_memory(void **state)
{
    (void)state;
    struct skpx_strmap m = {0};
    struct skpx_u64map u = {0};
    skpx_alloc_fail_after(0);
    assert_int_equal(skpx_strmap_put(&m, "a", 1), SKP_ENOMEM);
    assert_int_equal(skpx_u64map_put(&u, 1, 1), SKP_ENOMEM);
    skpx_alloc_fail_after(1); /* slot array ok, key copy fails */
    assert_int_equal(skpx_strmap_put(&m, "a", 1), SKP_ENOMEM);
    skpx_alloc_fail_after(-1);
    uint32_t v;
    assert_false(skpx_strmap_get(&m, "a", &v));
    assert_int_equal(m.n, 0);
    skpx_strmap_cleanup(&m);
    skpx_u64map_cleanup(&u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(maps_grow_and_clear),
        cmocka_unit_test(strmap_owns_its_keys),
        cmocka_unit_test(maps_fail_cleanly_without_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
