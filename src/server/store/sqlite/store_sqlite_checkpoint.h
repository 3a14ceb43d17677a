/* store_sqlite_checkpoint.h - the WAL checkpoints of a writable SQLite store, run by a thread
 * of their own on a connection of their own (store_sqlite_checkpoint.c).
 *
 * SQLite's automatic checkpoint runs inside the commit that takes the WAL past 1000 pages, on
 * the committing thread: the event loop. It copies the WAL into the database file and fsyncs
 * it, 40-140 ms on this machine under other I/O, every ~4 MB of writes, and stalled the loop
 * that long (issue 25). Here the commit only signals (sqlite3_wal_hook, which replaces the
 * automatic checkpoint) and the thread runs a PASSIVE checkpoint, which waits for no reader or
 * writer; the next commit after a complete one starts the WAL over. */
#ifndef SKP_SERVER_STORE_SQLITE_CHECKPOINT_H
#define SKP_SERVER_STORE_SQLITE_CHECKPOINT_H

#include <stdint.h>

#include "common/err.h"

struct sqlite3;
struct sqlite_checkpointer;

/* WAL pages after a commit that ask for a checkpoint (SQLite's own default threshold). */
#define SQLITE_CHECKPOINT_PAGES 1000

/* Starts the thread for the store at `path` whose writing connection is `db` (its WAL hook is
 * taken). Errors: SKP_ENOMEM, SKP_EIO (the connection or the thread could not start: the caller
 * keeps SQLite's automatic checkpoint). */
SKP_MUST_CHECK skp_err sqlite_checkpointer_start(struct sqlite3 *db, const char *path,
                                                 struct sqlite_checkpointer **out);
/* Stops the thread (a checkpoint in progress ends first) and gives the hook back. NULL-safe. */
void sqlite_checkpointer_stop(struct sqlite_checkpointer *ck);
/* Checkpoints run so far (complete or not). */
uint64_t sqlite_checkpointer_runs(struct sqlite_checkpointer *ck);

#endif
