/* test_codecache.c - unit tests of the Python stack reader's C parts that need no interpreter:
 * the code cache (lookup, key validation, LRU eviction, ownership, allocation failure) and the
 * fault-free reader (process_vm_readv on ourselves and the memfd region: unmapped memory, partial
 * batches, fork, the region's fd closed and reused by the host). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
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

/* A batch over enough pages goes through the memfd region, with the same results as
 * process_vm_readv: every pair read, or the pairs before the first fault. */
static void test_safe_read_region(void **state)
{
    (void)state;
    assert_true(skp__safe_read_init());
    long page = sysconf(_SC_PAGESIZE);
    uint8_t *p = pattern_pages(page);
    uint8_t d[4][200];
    memset(d, 0, sizeof(d));
    struct iovec loc[4] = {{d[0], 200}, {d[1], 200}, {d[2], 200}, {d[3], 200}};
    struct iovec rem[4];
    for (int i = 0; i < 4; i++)
        rem[i] = (struct iovec){p + page * i + 100, 200};
    uint64_t before = skp__safe_read_region_calls();
    assert_int_equal(skp__safe_readv(loc, rem, 4), 4);
    assert_int_equal(skp__safe_read_region_calls(), before + 1);
    for (int i = 0; i < 4; i++)
        assert_memory_equal(d[i], p + page * i + 100, 200);
    /* a pair on the inaccessible page: the ones before it are read, it and the rest are not */
    memset(d, 0, sizeof(d));
    rem[2] = (struct iovec){p + page * 4 + 8, 200};
    assert_int_equal(skp__safe_readv(loc, rem, 4), 2);
    assert_memory_equal(d[1], p + page + 100, 200);
    assert_int_equal(skp__safe_read_region_calls(), before + 2);
    /* a pair that starts readable and runs into the inaccessible page is not read either */
    rem[2] = (struct iovec){p + page * 4 - 50, 200};
    assert_int_equal(skp__safe_readv(loc, rem, 4), 2);
    /* the first pair faulting: nothing */
    rem[0] = (struct iovec){p + page * 4, 8};
    assert_int_equal(skp__safe_readv(loc, rem, 4), 0);
    munmap(p, (size_t)page * 5);
}

/* The fd number of our memfd (from /proc/self/fd), or -1. */
static int region_fd(void)
{
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int found = -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[300];
        char target[256];
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(path, target, sizeof(target) - 1);
        if (n <= 0)
            continue;
        target[n] = 0;
        if (strstr(target, "memfd:skyprof-safe-read"))
            found = atoi(e->d_name);
    }
    closedir(d);
    return found;
}

/* A forked child drops the parent's memfd and makes its own: reads in the child and in the
 * parent at the same time never see each other's bytes. */
static void test_safe_read_region_fork(void **state)
{
    (void)state;
    long page = sysconf(_SC_PAGESIZE);
    uint8_t *p = pattern_pages(page);
    struct iovec rem[3];
    for (int i = 0; i < 3; i++)
        rem[i] = (struct iovec){p + page * i, 64};
    uint8_t d[3][64];
    struct iovec loc[3] = {{d[0], 64}, {d[1], 64}, {d[2], 64}};
    assert_int_equal(skp__safe_readv(loc, rem, 3), 3); /* the parent's region exists */
    int parent_fd = region_fd();
    assert_true(parent_fd >= 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        skp__safe_read_after_fork_child();
        int ok = region_fd() == -1; /* the parent's fd is closed in the child */
        for (int i = 0; i < 3; i++)
            p[page * i] = 0xA5; /* the child's copy of the pages differs from the parent's */
        uint64_t rc0 = skp__safe_read_region_calls();
        for (int k = 0; k < 2000 && ok; k++) {
            memset(d, 0, sizeof(d));
            ok = skp__safe_readv(loc, rem, 3) == 3 && d[0][0] == 0xA5 && d[2][0] == 0xA5;
        }
        ok = ok && skp__safe_read_region_calls() > rc0 && region_fd() >= 0;
        _exit(ok ? 0 : 1);
    }
    bool same = true;
    for (int k = 0; k < 2000; k++) {
        memset(d, 0, sizeof(d));
        same = same && skp__safe_readv(loc, rem, 3) == 3 && memcmp(d[0], p, 64) == 0;
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_true(same);
    munmap(p, (size_t)page * 5);
}

/* The host closes our fd and opens a file of its own that gets the same number: the next batch
 * never writes into that file; reads go on through process_vm_readv. Runs last: the region is
 * off for good afterwards. */
static void test_safe_read_region_fd_taken(void **state)
{
    (void)state;
    long page = sysconf(_SC_PAGESIZE);
    uint8_t *p = pattern_pages(page);
    struct iovec rem[3];
    for (int i = 0; i < 3; i++)
        rem[i] = (struct iovec){p + page * i, 64};
    uint8_t d[3][64];
    struct iovec loc[3] = {{d[0], 64}, {d[1], 64}, {d[2], 64}};
    assert_int_equal(skp__safe_readv(loc, rem, 3), 3);
    int fd = region_fd();
    assert_true(fd >= 0);
    assert_int_equal(close(fd), 0);
    char tmpl[] = "/tmp/skp_safe_read_XXXXXX";
    int host = mkstemp(tmpl);
    assert_true(host >= 0);
    unlink(tmpl);
    if (host != fd) { /* not the lowest free number here: put the file at our number */
        assert_int_equal(dup2(host, fd), fd);
        close(host);
    }
    uint64_t rc0 = skp__safe_read_region_calls();
    memset(d, 0, sizeof(d));
    assert_int_equal(skp__safe_readv(loc, rem, 3), 3);
    assert_memory_equal(d[2], p + page * 2, 64);
    assert_int_equal(skp__safe_read_region_calls(), rc0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_size, 0); /* nothing written into the host's file */
    assert_int_equal(skp__safe_readv(loc, rem, 3), 3);
    assert_int_equal(skp__safe_read_region_calls(), rc0);
    close(fd);
    munmap(p, (size_t)page * 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find_insert_validate),
        cmocka_unit_test(test_lru_eviction_bounded),
        cmocka_unit_test(test_init_out_of_memory),
        cmocka_unit_test(test_safe_read),
        cmocka_unit_test(test_safe_read_region),
        cmocka_unit_test(test_safe_read_region_fork),
        cmocka_unit_test(test_safe_read_region_fd_taken),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
