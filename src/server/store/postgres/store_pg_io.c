/* store_pg_io.c - PostgreSQL backend: the stall bound. libpq's blocking calls wait for the
 * server without a limit: a server (or a network path) that stops answering without closing
 * the connection, a host that drops packets, would hold the caller for ever, and the caller
 * is skyprofd's event loop (gRPC, HTTP, timers). With a bound set (store_set_stall_ms), every
 * wait for the server goes through here: the statement is sent without blocking, and when no
 * answer (nor room to send) comes within the bound the connection's socket is shut down, so
 * libpq fails the statement at once (the caller sees SKP_EIO, a transaction is rolled back by
 * the server when it notices) and the next call reconnects. A reconnect never waits: it starts
 * with PQconnectStartParams and each later call advances it by what the socket allows
 * (PQconnectPoll with a zero wait); until it is done calls answer SKP_EIO at once, and one
 * that takes longer than the connect timeout is abandoned (backoff, as before). Without a
 * bound (0, the default: the HTTP worker's connection, tools, tests) the calls are libpq's
 * blocking ones, as they were. The reason the connection was last lost is kept for
 * /healthz (pg_store_check). */
#include "server/store/postgres/store_pg_int.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "common/clock.h"
#include "common/log.h"
#include "server/store/store_stall.h"

#define PG_CONNECT_TIMEOUT_MS 10000 /* as connect_timeout=10 of the first connection */

void store_set_stall_ms(struct store *base, int64_t ms)
{
    if (!base || base->ops != &pg_store_ops)
        return; /* SQLite: a local file, nothing to bound */
    pg_store_of(base)->stall_ms = ms > 0 ? ms : 0;
}

int64_t store_get_stall_ms(struct store *base)
{
    if (!base || base->ops != &pg_store_ops)
        return 0;
    return pg_store_of(base)->stall_ms;
}

/* The connection stopped answering: shut its socket down so that libpq's next read fails at
 * once (the PGconn stays valid for the callers' PQstatus / PQgetResult). */
static void stalled(struct pg_store *st, const char *what)
{
    snprintf(st->down, sizeof(st->down), "no answer within %lld ms (%s)", (long long)st->stall_ms,
             what);
    SKPX_WARN("store: %s: %s; connection dropped", st->shown ? st->shown : "postgresql", st->down);
    int fd = PQsocket(st->conn);
    if (fd >= 0)
        shutdown(fd, SHUT_RDWR);
    PQconsumeInput(st->conn); /* reads the end: libpq marks the connection bad now */
}

/* Waits for `events` on the connection's socket until end_ms (monotonic). Returns the events
 * that came, or 0 after stalled() when none came in time. */
static short wait_sock(struct pg_store *st, short events, int64_t end_ms, const char *what)
{
    int fd = PQsocket(st->conn);
    if (fd < 0)
        return POLLERR; /* no socket: libpq's call reports it */
    for (;;) {
        int64_t left = end_ms - skpx_mono_ms();
        if (left < 0)
            left = 0;
        struct pollfd p = {.fd = fd, .events = events};
        int rc = poll(&p, 1, (int)left);
        if (rc > 0)
            return p.revents ? p.revents : events;
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc < 0)
            return POLLERR;
        stalled(st, what);
        return 0;
    }
}

bool pg__io_flush(struct pg_store *st)
{
    if (!st->conn)
        return false;
    int64_t end = skpx_mono_ms() + st->stall_ms;
    for (;;) {
        int rc = PQflush(st->conn);
        if (rc <= 0)
            return rc == 0;
        if (!st->stall_ms) /* blocking mode flushes all: not reached */
            return false;
        short ev = wait_sock(st, POLLIN | POLLOUT, end, "sending");
        if (!ev)
            return false;
        /* the server may be answering while we send: read, or both sides wait */
        if ((ev & POLLIN) && !PQconsumeInput(st->conn))
            return false;
    }
}

PGresult *pg__io_result(struct pg_store *st)
{
    if (st->stall_ms && st->conn && PQstatus(st->conn) == CONNECTION_OK) {
        int64_t end = skpx_mono_ms() + st->stall_ms;
        while (PQisBusy(st->conn)) {
            if (!wait_sock(st, POLLIN, end, "waiting for a result"))
                break; /* shut down: PQgetResult reports the lost connection */
            if (!PQconsumeInput(st->conn))
                break;
        }
    }
    return PQgetResult(st->conn);
}

bool pg__io_nonblocking(struct pg_store *st, bool on)
{
    if (!st->stall_ms || !st->conn)
        return true;
    return PQsetnonblocking(st->conn, on ? 1 : 0) == 0;
}

/* Collects a sent command's results as PQexec does: the last one, or the first failure (a
 * COPY's result ends the collection: the caller goes on with the copy). */
static PGresult *collect(struct pg_store *st)
{
    PGresult *keep = NULL, *r;
    while ((r = pg__io_result(st)) != NULL) {
        ExecStatusType s = PQresultStatus(r);
        bool kept_failed = keep && (PQresultStatus(keep) == PGRES_FATAL_ERROR ||
                                    PQresultStatus(keep) == PGRES_BAD_RESPONSE);
        if (kept_failed) {
            PQclear(r);
        } else {
            PQclear(keep);
            keep = r;
        }
        if (s == PGRES_COPY_IN || s == PGRES_COPY_OUT || s == PGRES_COPY_BOTH)
            break;
        if (PQstatus(st->conn) != CONNECTION_OK)
            break;
    }
    return keep;
}

/* Sends with the socket non-blocking, then flushes within the bound. */
static PGresult *sent_then_collect(struct pg_store *st, bool sent)
{
    if (sent)
        sent = pg__io_flush(st);
    if (sent)
        pg__io_nonblocking(st, false); /* output drained: switching back cannot block */
    if (!sent)
        return NULL; /* the caller reports PQerrorMessage */
    return collect(st);
}

PGresult *pg__io_exec(struct pg_store *st, const char *sql, int n, const char *const *v)
{
    if (!st->stall_ms)
        return PQexecParams(st->conn, sql, n, NULL, v, NULL, NULL, 0);
    bool sent =
        pg__io_nonblocking(st, true) && PQsendQueryParams(st->conn, sql, n, NULL, v, NULL, NULL, 0);
    return sent_then_collect(st, sent);
}

PGresult *pg__io_exec_prepared(struct pg_store *st, const char *name, int n, const char *const *v)
{
    if (!st->stall_ms)
        return PQexecPrepared(st->conn, name, n, v, NULL, NULL, 0);
    bool sent =
        pg__io_nonblocking(st, true) && PQsendQueryPrepared(st->conn, name, n, v, NULL, NULL, 0);
    return sent_then_collect(st, sent);
}

PGresult *pg__io_prepare(struct pg_store *st, const char *name, const char *sql)
{
    if (!st->stall_ms)
        return PQprepare(st->conn, name, sql, 0, NULL);
    bool sent = pg__io_nonblocking(st, true) && PQsendPrepare(st->conn, name, sql, 0, NULL);
    return sent_then_collect(st, sent);
}

PGresult *pg__io_exec_simple(struct pg_store *st, const char *sql)
{
    if (!st->stall_ms)
        return PQexec(st->conn, sql);
    bool sent = pg__io_nonblocking(st, true) && PQsendQuery(st->conn, sql);
    return sent_then_collect(st, sent);
}

/* ---- reconnect without waiting ---- */

skp_err pg__io_reconnect(struct pg_store *st, bool *done)
{
    *done = false;
    int64_t now = skpx_mono_ms();
    if (!st->connecting) {
        if (st->conn)
            PQfinish(st->conn);
        const char *keys[] = {"connect_timeout", "application_name", "dbname", NULL};
        const char *vals[] = {"10", "skyprofd", st->url, NULL};
        st->conn = PQconnectStartParams(keys, vals, 1);
        if (!st->conn)
            return SKP_ENOMEM;
        if (PQstatus(st->conn) == CONNECTION_BAD)
            return SKP_EIO;
        st->connecting = true;
        st->connect_poll = PGRES_POLLING_WRITING;
        st->connect_began_ms = now;
    }
    /* Advance by what the socket allows now; never wait. */
    for (;;) {
        if (st->connect_poll == PGRES_POLLING_OK) {
            st->connecting = false;
            *done = true;
            return SKP_OK;
        }
        if (st->connect_poll == PGRES_POLLING_FAILED)
            break;
        int fd = PQsocket(st->conn);
        if (fd < 0)
            break;
        struct pollfd p = {.fd = fd,
                           .events = st->connect_poll == PGRES_POLLING_READING ? POLLIN : POLLOUT};
        int rc = poll(&p, 1, 0);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc == 0) {
            if (now - st->connect_began_ms < PG_CONNECT_TIMEOUT_MS)
                return SKP_OK; /* still connecting: a later call goes on */
            snprintf(st->down, sizeof(st->down), "no connection within %d ms",
                     PG_CONNECT_TIMEOUT_MS);
            st->connecting = false;
            return SKP_EIO;
        }
        st->connect_poll = (int)PQconnectPoll(st->conn);
    }
    snprintf(st->down, sizeof(st->down), "%s", PQerrorMessage(st->conn));
    size_t n = strlen(st->down);
    while (n && (st->down[n - 1] == '\n' || st->down[n - 1] == ' '))
        st->down[--n] = '\0';
    st->connecting = false;
    return SKP_EIO;
}
