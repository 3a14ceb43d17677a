/* store_sqlite_checkpoint.c - WAL checkpoints off the writing thread (see the header). One
 * thread per writable store, asleep until a commit leaves SQLITE_CHECKPOINT_PAGES or more in
 * the WAL. The thread owns its connection; the writing connection only calls the hook. */
#include "server/store/sqlite/store_sqlite_checkpoint.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>

#include "common/alloc.h"
#include "common/log.h"

/* How long the checkpoint's connection waits for a lock it needs to start. */
#define CHECKPOINT_BUSY_MS 1000

struct sqlite_checkpointer {
    sqlite3 *writer; /* borrowed: its WAL hook points here */
    sqlite3 *db;     /* owned, used by the thread only */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool wanted;
    bool stopping;
    uint64_t runs;
    bool logged_failure;
};

/* The writing connection's commit: ask for a checkpoint past the threshold. Never blocks for
 * longer than the mutex is held (a flag and a signal). */
static int on_commit(void *ud, sqlite3 *db, const char *name, int pages)
{
    (void)db;
    (void)name;
    struct sqlite_checkpointer *ck = ud;
    if (pages >= SQLITE_CHECKPOINT_PAGES) {
        pthread_mutex_lock(&ck->mu);
        ck->wanted = true;
        pthread_cond_signal(&ck->cv);
        pthread_mutex_unlock(&ck->mu);
    }
    return SQLITE_OK;
}

static void *run(void *ud)
{
    struct sqlite_checkpointer *ck = ud;
    pthread_mutex_lock(&ck->mu);
    for (;;) {
        while (!ck->wanted && !ck->stopping)
            pthread_cond_wait(&ck->cv, &ck->mu);
        if (ck->stopping)
            break;
        ck->wanted = false;
        pthread_mutex_unlock(&ck->mu);
        int rc = sqlite3_wal_checkpoint_v2(ck->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        if (rc != SQLITE_OK && rc != SQLITE_BUSY && !ck->logged_failure) {
            ck->logged_failure = true; /* once: the next commits ask again */
            SKPX_WARN("store: WAL checkpoint failed (sqlite %d: %s)", rc, sqlite3_errmsg(ck->db));
        }
        pthread_mutex_lock(&ck->mu);
        ck->runs++;
    }
    pthread_mutex_unlock(&ck->mu);
    return NULL;
}

skp_err sqlite_checkpointer_start(sqlite3 *writer, const char *path,
                                  struct sqlite_checkpointer **out)
{
    *out = NULL;
    struct sqlite_checkpointer *ck = skpx_calloc(1, sizeof(*ck));
    if (!ck)
        return SKP_ENOMEM;
    ck->writer = writer;
    if (sqlite3_open_v2(path, &ck->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) !=
        SQLITE_OK) {
        SKPX_WARN("store: checkpoint connection to %s: %s", path,
                  ck->db ? sqlite3_errmsg(ck->db) : "out of memory");
        sqlite3_close_v2(ck->db);
        skpx_free(ck);
        return SKP_EIO;
    }
    sqlite3_busy_timeout(ck->db, CHECKPOINT_BUSY_MS);
    /* A connection learns that the file is in WAL mode when it first reads it; until then a
     * checkpoint does nothing (and says so with -1 frames). */
    if (sqlite3_exec(ck->db, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL) != SQLITE_OK) {
        SKPX_WARN("store: checkpoint connection to %s: %s", path, sqlite3_errmsg(ck->db));
        sqlite3_close_v2(ck->db);
        skpx_free(ck);
        return SKP_EIO;
    }
    pthread_mutex_init(&ck->mu, NULL);
    pthread_cond_init(&ck->cv, NULL);
    if (pthread_create(&ck->thread, NULL, run, ck) != 0) {
        pthread_cond_destroy(&ck->cv);
        pthread_mutex_destroy(&ck->mu);
        sqlite3_close_v2(ck->db);
        skpx_free(ck);
        return SKP_EIO;
    }
    sqlite3_wal_hook(writer, on_commit, ck);
    *out = ck;
    return SKP_OK;
}

void sqlite_checkpointer_stop(struct sqlite_checkpointer *ck)
{
    if (!ck)
        return;
    sqlite3_wal_hook(ck->writer, NULL, NULL);
    pthread_mutex_lock(&ck->mu);
    ck->stopping = true;
    pthread_cond_signal(&ck->cv);
    pthread_mutex_unlock(&ck->mu);
    pthread_join(ck->thread, NULL);
    pthread_cond_destroy(&ck->cv);
    pthread_mutex_destroy(&ck->mu);
    sqlite3_close_v2(ck->db);
    skpx_free(ck);
}

uint64_t sqlite_checkpointer_runs(struct sqlite_checkpointer *ck)
{
    if (!ck)
        return 0;
    pthread_mutex_lock(&ck->mu);
    uint64_t n = ck->runs;
    pthread_mutex_unlock(&ck->mu);
    return n;
}
