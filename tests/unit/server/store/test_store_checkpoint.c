/* Unit tests for store_sqlite_checkpoint.c: WAL checkpoints run on the checkpointer's thread,
 * not in the commit that passes the threshold (issue 25: that commit, on the event loop, took
 * 40-140 ms every ~4 MB written). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "common/clock.h"
#include "server/store/sqlite/store_sqlite_checkpoint.h"

static void exec_ok(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("%s: %s", sql, msg ? msg : "?");
}

static off_t file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_size : -1;
}

/* Commits `pages` pages of blobs in one transaction. */
static void write_pages(sqlite3 *db, int pages)
{
    exec_ok(db, "BEGIN");
    sqlite3_stmt *s = NULL;
    assert_int_equal(
        sqlite3_prepare_v2(db, "INSERT INTO t(b) VALUES(zeroblob(3500))", -1, &s, NULL), SQLITE_OK);
    for (int i = 0; i < pages; i++) {
        assert_int_equal(sqlite3_step(s), SQLITE_DONE);
        sqlite3_reset(s);
    }
    sqlite3_finalize(s);
    exec_ok(db, "COMMIT");
}

static void checkpoints_on_their_thread(void **state)
{
    (void)state;
    char dir[] = "/tmp/skp-ckpt-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128], wal[140];
    snprintf(path, sizeof(path), "%s/db", dir);
    snprintf(wal, sizeof(wal), "%s-wal", path);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    exec_ok(db, "PRAGMA journal_mode = WAL");
    exec_ok(db, "CREATE TABLE t(b BLOB)");
    struct sqlite_checkpointer *ck = NULL;
    assert_int_equal(sqlite_checkpointer_start(db, path, &ck), SKP_OK);
    off_t before = file_size(path);

    /* Below the threshold: no checkpoint asked for; the rows stay in the WAL. */
    write_pages(db, SQLITE_CHECKPOINT_PAGES / 4);
    assert_int_equal(sqlite_checkpointer_runs(ck), 0);
    assert_int_equal(file_size(path), before);

    /* Past it: the commit returns at once and the thread copies the WAL into the file. */
    write_pages(db, SQLITE_CHECKPOINT_PAGES);
    int64_t deadline = skpx_mono_ms() + 20000;
    while (sqlite_checkpointer_runs(ck) == 0) {
        if (skpx_mono_ms() > deadline)
            fail_msg("no checkpoint ran within 20 s");
        usleep(1000);
    }
    assert_true(file_size(path) > before + (off_t)SQLITE_CHECKPOINT_PAGES * 3500);

    /* The next commit starts the WAL over: it does not grow past what one round wrote. */
    off_t wal_size = file_size(wal);
    write_pages(db, 10);
    assert_true(file_size(wal) <= wal_size);

    sqlite_checkpointer_stop(ck);
    sqlite3_close(db);
    unlink(wal);
    char shm[140];
    snprintf(shm, sizeof(shm), "%s-shm", path);
    unlink(shm);
    unlink(path);
    rmdir(dir);
}

static void stop_is_null_safe(void **state)
{
    (void)state;
    sqlite_checkpointer_stop(NULL);
    assert_int_equal(sqlite_checkpointer_runs(NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(checkpoints_on_their_thread),
        cmocka_unit_test(stop_is_null_safe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
