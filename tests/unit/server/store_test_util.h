/* store_test_util.h - helpers for the store and analyzer unit tests: a temporary database per
 * test, and snapshots written from "A,B,C" stack strings. Included by one test file each. */
#ifndef SKP_TESTS_STORE_TEST_UTIL_H
#define SKP_TESTS_STORE_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "server/store.h"

#define TU_MAX_FRAMES 64

struct tu_db {
    char dir[256];
    char path[300];
};

/* Creates a fresh directory under TMPDIR (or /tmp) and a database path inside it. */
static inline void tu_db_init(struct tu_db *d)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(d->dir, sizeof(d->dir), "%s/skp_store_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(d->dir)) {
        perror("mkdtemp");
        abort();
    }
    snprintf(d->path, sizeof(d->path), "%s/skyprof.db", d->dir);
}

static inline void tu_db_cleanup(struct tu_db *d)
{
    char p[400];
    static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
        snprintf(p, sizeof(p), "%s%s", d->path, suffixes[i]);
        unlink(p);
    }
    rmdir(d->dir);
}

static inline struct store *tu_open(const char *path)
{
    struct store *st = NULL;
    struct store_opts o = {0};
    if (store_open(path, &o, &st) != SKP_OK) {
        fprintf(stderr, "store_open(%s) failed\n", path);
        abort();
    }
    return st;
}

/* cmocka fixture shared by the store and analyzer tests: a fresh store per test. */
struct fixture {
    struct tu_db db;
    struct store *st;
};

static inline int setup(void **state)
{
    struct fixture *f = skpx_calloc(1, sizeof(*f));
    tu_db_init(&f->db);
    f->st = tu_open(f->db.path);
    *state = f;
    return 0;
}

static inline int teardown(void **state)
{
    struct fixture *f = *state;
    store_close(f->st);
    tu_db_cleanup(&f->db);
    skpx_free(f);
    return 0;
}

/* Splits "A,B,C" (root first) into frames; "" gives an empty stack. Returns the count. */
static inline size_t tu_split(const char *stack, char *buf, size_t buflen, char **frames)
{
    size_t n = 0;
    snprintf(buf, buflen, "%s", stack);
    if (!*buf)
        return 0;
    char *p = buf;
    for (;;) {
        frames[n++] = p;
        char *c = strchr(p, ',');
        if (!c || n == TU_MAX_FRAMES)
            break;
        *c = '\0';
        p = c + 1;
    }
    return n;
}

/* Inserts one snapshot; returns the store's error. */
static inline skp_err tu_add(struct store *st, const char *task, const char *seg, int32_t seq,
                             int64_t time_ms, const char *stack)
{
    char buf[1024];
    char *frames[TU_MAX_FRAMES];
    size_t n = tu_split(stack, buf, sizeof(buf), frames);
    struct store_snapshot s = {.task_id = task,
                               .segment_id = seg,
                               .time_ms = time_ms,
                               .sequence = seq,
                               .frames = frames,
                               .n_frames = n};
    size_t dup = 0;
    return store_insert_snapshots(st, &s, 1, &dup);
}

#endif
