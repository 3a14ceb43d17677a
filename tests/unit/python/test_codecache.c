/* test_codecache.c - unit tests of the Python stack reader's C parts that need no interpreter:
 * the code cache (lookup, key validation, LRU eviction, ownership, allocation failure) and the
 * fault-free reader (process_vm_readv on ourselves and the memfd region: unmapped memory, partial
 * batches, fork, the region's fd closed and reused by the host). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
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
    struct skp__pycode_key k = {
        .code = code, .filename = 0x1000, .name = 0x2000, .linetable = 0x3000, .firstlineno = 7};
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
    assert_int_equal(skpx_alloc_live_bytes(), before); /* labels and tables freed */
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
    skp__pycode_cache_cleanup(&c); /* idempotent */
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
    /* inaccessible memory: a clean failure, no fault (PROT_NONE rather than unmapped: a later
     * mapping, e.g. the memfd region's, could take an unmapped address) */
    long page = sysconf(_SC_PAGESIZE);
    void *p = mmap(NULL, (size_t)page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
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
    munmap(p, (size_t)page);
}

/* Four readable pages with a known pattern, and an inaccessible one after them. */
static uint8_t *pattern_pages(long page)
{
    uint8_t *p =
        mmap(NULL, (size_t)page * 5, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    for (long i = 0; i < page * 4; i++)
        p[i] = (uint8_t)(i * 7 + 3);
    assert_int_equal(mprotect(p + page * 4, (size_t)page, PROT_NONE), 0);
    return p;
}

/* Reads the pairs of `rem` into `loc` and checks what came: `want` leading pairs complete, the
 * bytes of the pairs after them left as they were (0). */
static void check_readv(struct iovec *loc, const struct iovec *rem, size_t n, size_t want)
{
    for (size_t i = 0; i < n; i++)
        memset(loc[i].iov_base, 0, loc[i].iov_len);
    assert_int_equal(skp__safe_readv(loc, rem, n), want);
    for (size_t i = 0; i < want; i++)
        assert_memory_equal(loc[i].iov_base, rem[i].iov_base, rem[i].iov_len);
}

/* The three ways a batch is written (one adjacent destination, the bounce buffer, one pinned
 * destination per pair for a batch larger than the bounce buffer) give the same results: every
 * pair read, or the pairs before the first fault. */
static void test_safe_read_paths(void **state)
{
    (void)state;
    assert_true(skp__safe_read_init());
    long page = sysconf(_SC_PAGESIZE);
    uint8_t *p = pattern_pages(page);
    size_t big = SKP_PY_SAFE_READ_BOUNCE_BYTES / 2 + 64; /* two of them: more than the buffer */
    uint8_t *src_big = skpx_malloc(big * 2);
    uint8_t *dst = skpx_malloc(big * 4);
    assert_non_null(src_big);
    assert_non_null(dst);
    for (size_t i = 0; i < big * 2; i++)
        src_big[i] = (uint8_t)(i * 13 + 1);
    for (int layout = 0; layout < 2; layout++) {
        /* layout 0: destinations adjacent, in order; 1: apart (the bounce buffer) */
        size_t stride = layout == 0 ? 200 : 333;
        struct iovec loc[4];
        struct iovec rem[4];
        for (int i = 0; i < 4; i++) {
            loc[i] = (struct iovec){dst + stride * (size_t)i, 200};
            rem[i] = (struct iovec){p + page * i + 100, 200};
        }
        uint64_t bounce0 = skp__safe_read_bounce_calls();
        check_readv(loc, rem, 4, 4);
        assert_int_equal(skp__safe_read_bounce_calls() - bounce0, layout == 0 ? 0 : 1);
        /* a pair on the inaccessible page: the ones before it are read, it and the rest are not */
        rem[2] = (struct iovec){p + page * 4 + 8, 200};
        check_readv(loc, rem, 4, 2);
        assert_true(((uint8_t *)loc[3].iov_base)[0] == 0);
        /* a pair that starts readable and runs into the inaccessible page is not read either */
        rem[2] = (struct iovec){p + page * 4 - 50, 200};
        check_readv(loc, rem, 4, 2);
        /* the first pair faulting: nothing */
        rem[0] = (struct iovec){p + page * 4, 8};
        check_readv(loc, rem, 4, 0);
    }
    /* larger than the bounce buffer, destinations apart: one destination per pair */
    struct iovec loc[3] = {{dst, big}, {dst + big + 7, big}, {dst + 2 * big + 14, 8}};
    struct iovec rem[3] = {{src_big, big}, {src_big + big, big}, {p + page * 4, 8}};
    uint64_t bounce0 = skp__safe_read_bounce_calls();
    check_readv(loc, rem, 2, 2);
    check_readv(loc, rem, 3, 2); /* the third faults */
    assert_int_equal(skp__safe_read_bounce_calls(), bounce0);
    skpx_free(src_big);
    skpx_free(dst);
    munmap(p, (size_t)page * 5);
}

/* A child made without fork()'s handlers (as by a raw clone) has the parent's pid cached: a read
 * there would copy into the PARENT's memory. skp__safe_read_check_pid (what every host-thread
 * entry calls) re-takes the pid: the child reads its own pages into its own buffer, and the
 * parent's buffer at the same address is never written. */
static void test_safe_read_check_pid_after_fork(void **state)
{
    (void)state;
    assert_true(skp__safe_read_init());
    long page = sysconf(_SC_PAGESIZE);
    uint8_t *p = pattern_pages(page);
    uint8_t *dst = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
                        0); /* shared: the parent sees what lands in it */
    assert_true(dst != MAP_FAILED);
    uint8_t *mine = skpx_malloc(64); /* private: the child's copy is its own */
    assert_non_null(mine);
    memset(mine, 0x11, 64);
    pid_t pid = fork(); /* this test registers no fork handler: the child keeps the stale pid */
    assert_true(pid >= 0);
    if (pid == 0) {
        p[0] = 0xA5; /* the child's copy of the page differs from the parent's */
        skp__safe_read_check_pid();
        int ok = skp__safe_read((uintptr_t)p, mine, 64) && mine[0] == 0xA5 && mine[1] == p[1];
        for (int k = 0; k < 2000 && ok; k++) {
            struct iovec loc[2] = {{dst, 32}, {dst + 100, 32}};
            struct iovec rem[2] = {{p, 32}, {p + page, 32}};
            ok = skp__safe_readv(loc, rem, 2) == 2 && dst[0] == 0xA5;
        }
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    for (int i = 0; i < 64; i++)
        assert_int_equal(mine[i], 0x11); /* the child never wrote into the parent */
    assert_int_equal(p[0], 3);
    skpx_free(mine);
    munmap(dst, (size_t)page);
    munmap(p, (size_t)page * 5);
}

/* Installs a seccomp filter on the calling thread answering EPERM to the listed syscalls. */
static bool deny_syscalls(const long *nrs, size_t n)
{
    struct sock_filter prog[16];
    size_t k = 0;
    prog[k++] =
        (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
    for (size_t i = 0; i < n; i++) {
        prog[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nrs[i], 0, 1);
        prog[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
    }
    prog[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    struct sock_fprog fp = {.len = (unsigned short)k, .filter = prog};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
           prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fp) == 0;
}

/* Runs `deny` syscalls refused from now on in a child (the filter stays with it); the child
 * checks that reads still work (want_ok) or fail cleanly. */
static void check_after_seccomp(const long *deny, size_t n_deny, bool want_ok)
{
    assert_true(skp__safe_read_init());
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        skp__safe_read_after_fork_child();
        int ok = deny_syscalls(deny, n_deny);
        uint64_t src[4] = {1, 2, 3, 4};
        uint64_t dst[4] = {0};
        for (int k = 0; k < 3 && ok; k++) {
            memset(dst, 0, sizeof(dst));
            bool got = skp__safe_read((uintptr_t)src, dst, sizeof(dst));
            ok = want_ok ? got && memcmp(src, dst, sizeof(dst)) == 0 : !got;
        }
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* A seccomp filter installed after the probe: refusing process_vm_writev makes the reads go on
 * through process_vm_readv; refusing both makes them fail (false), never crash. */
static void test_safe_read_seccomp_later(void **state)
{
    (void)state;
    const long writev_only[] = {SYS_process_vm_writev};
    check_after_seccomp(writev_only, 1, true);
    const long both[] = {SYS_process_vm_writev, SYS_process_vm_readv};
    check_after_seccomp(both, 2, false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find_insert_validate),
        cmocka_unit_test(test_lru_eviction_bounded),
        cmocka_unit_test(test_init_out_of_memory),
        cmocka_unit_test(test_safe_read),
        cmocka_unit_test(test_safe_read_paths),
        cmocka_unit_test(test_safe_read_check_pid_after_fork),
        cmocka_unit_test(test_safe_read_seccomp_later),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
