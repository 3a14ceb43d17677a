/* store_stall.h - the stall bound of a store object on a database server: how long a call may
 * wait for the server's answer. skyprofd sets it on the event loop's store (--db-stall-ms) so
 * that a server or network path that stops answering (without closing the connection) costs
 * the loop at most that long once: the statement fails with SKP_EIO, the connection is dropped
 * and reconnected without waiting (calls fail at once until it is back). On SQLite (a local
 * file) it does nothing. 0 (the default of every store object) = wait as long as it takes.
 * docs/internals/store.md, "Stalled database". */
#ifndef SKP_SERVER_STORE_STALL_H
#define SKP_SERVER_STORE_STALL_H

#include <stdint.h>

#include "server/store/store.h"

void store_set_stall_ms(struct store *st, int64_t ms);
/* The bound set (0 on SQLite and when none). */
int64_t store_get_stall_ms(struct store *st);

#endif
