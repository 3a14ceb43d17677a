/* test_procfs.c - small /proc reads (common/procfs.h): this thread's name as pthread_setname_np
 * set it, through /proc/self and through /proc/<pid>; the running state of the calling thread;
 * a cut to the buffer; a missing file reads as "" with -1; the stat line's state after a comm
 * that holds ") ". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/procfs.h"

static pid_t my_tid(void)
{
    return (pid_t)syscall(SYS_gettid);
}

static void test_comm_of_this_thread(void **state)
{
    (void)state;
    assert_int_equal(pthread_setname_np(pthread_self(), "skp-procfs-t"), 0);
    char name[16];
    skpx_procfs_task_comm(0, my_tid(), name, sizeof(name));
    assert_string_equal(name, "skp-procfs-t");
    char wide[64];
    skpx_procfs_task_comm(getpid(), my_tid(), wide, sizeof(wide));
    assert_string_equal(wide, "skp-procfs-t"); /* the newline is dropped */
    char small[5];
    skpx_procfs_task_comm(0, my_tid(), small, sizeof(small));
    assert_string_equal(small, "skp-");
}

static void test_stat_state_of_this_thread(void **state)
{
    (void)state;
    char buf[512];
    assert_true(skpx_procfs_read_task(0, my_tid(), "stat", buf, sizeof(buf)) > 0);
    assert_int_equal(skpx_procfs_stat_state(buf), 'R'); /* it is running: it reads */
}

static void test_missing_file(void **state)
{
    (void)state;
    char buf[32];
    memcpy(buf, "junk", 5);
    assert_int_equal(skpx_procfs_read("/proc/self/no-such-file", buf, sizeof(buf)), -1);
    assert_string_equal(buf, "");
    char name[16] = "junk";
    skpx_procfs_task_comm(0, 0x7ffffff0, name, sizeof(name));
    assert_string_equal(name, "");
    assert_int_equal(skpx_procfs_stat_state(""), '?');
}

static void test_stat_state_parsing(void **state)
{
    (void)state;
    assert_int_equal(skpx_procfs_stat_state("42 (a) b) S 1 2 3"), 'S');
    assert_int_equal(skpx_procfs_stat_state("42 (name) R 1"), 'R');
    assert_int_equal(skpx_procfs_stat_state("42 (name)"), '?');
    assert_int_equal(skpx_procfs_stat_state("42 (name"), '?');
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_comm_of_this_thread),
        cmocka_unit_test(test_stat_state_of_this_thread),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_stat_state_parsing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
