/* store_test_util.h - helpers for the store and analyzer unit tests: a temporary database per
 * test, and snapshots written from "A,B,C" stack strings. Included by one test file each. */
#ifndef SKP_TESTS_STORE_TEST_UTIL_H
#define SKP_TESTS_STORE_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "server/store/store.h"

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

/* Keyset pages of the profiled-segment listing, walked as the HTTP cursor walks them (the
 * store tests of both backends). Needs <cmocka.h> included before this header. */
#define TU_PAGE_ROWS 64

struct page_seen {
    size_t n;
    char id[TU_PAGE_ROWS][32];
    int64_t start[TU_PAGE_ROWS], end[TU_PAGE_ROWS];
    bool has_object[TU_PAGE_ROWS];
};

static inline skp_err page_cb(void *ud, const struct store_profiled_segment *s)
{
    struct page_seen *v = ud;
    assert_true(v->n < TU_PAGE_ROWS);
    snprintf(v->id[v->n], sizeof(v->id[0]), "%s", s->segment_id);
    v->start[v->n] = s->start_ms;
    v->end[v->n] = s->end_ms;
    v->has_object[v->n] = s->has_object;
    v->n++;
    return SKP_OK;
}

/* Walks the listing of `task` in pages of `limit`, following the last row's key as the HTTP
 * cursor does; *all gets every row. Returns the number of pages. */
static inline int walk_pages(struct store *st, const char *task, size_t limit,
                             struct page_seen *all)
{
    memset(all, 0, sizeof(*all));
    struct store_segment_key key = {0};
    char last[32] = "";
    int pages = 0;
    for (bool more = true; more;) {
        struct page_seen pg = {0};
        assert_int_equal(store_list_profiled_segments_page(st, task, pages ? &key : NULL, limit,
                                                           page_cb, &pg, &more),
                         SKP_OK);
        assert_true(pg.n <= limit);
        assert_true(!more || pg.n == limit);
        for (size_t i = 0; i < pg.n; i++) {
            assert_true(all->n < TU_PAGE_ROWS);
            memcpy(all->id[all->n], pg.id[i], sizeof(pg.id[i]));
            all->start[all->n] = pg.start[i];
            all->end[all->n] = pg.end[i];
            all->has_object[all->n] = pg.has_object[i];
            all->n++;
        }
        pages++;
        if (pg.n) {
            snprintf(last, sizeof(last), "%s", pg.id[pg.n - 1]);
            key.start_ms = pg.start[pg.n - 1];
            key.segment_id = last;
        }
        assert_true(pages < 100);
    }
    return pages;
}

#endif
