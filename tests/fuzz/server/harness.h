/* harness.h - one skyprofd inside a fuzz target: a SQLite store in a temporary folder, the
 * metrics, the gRPC collector listening on 127.0.0.1 and the HTTP API, all on one libevent loop
 * run by the target itself (no threads: analyses run inline). The targets of this folder feed it
 * bytes as a peer would and run the loop until the exchange settles. */
#ifndef SKP_TESTS_FUZZ_SERVER_HARNESS_H
#define SKP_TESTS_FUZZ_SERVER_HARNESS_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct http_api;

#define FUZZ_CHECK(c)                                                                              \
    do {                                                                                           \
        if (!(c))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

/* Starts the daemon once per process (later calls return at once); every
 * FUZZ_SERVER_STORE_ROUNDS-th call starts over with an empty store so state stays bounded. */
#define FUZZ_SERVER_STORE_ROUNDS 2048
void fuzz_server_start(void);

/* Connects to the gRPC port over TCP, writes the HTTP/2 client preface and then `data`, runs
 * the loop until the server has answered everything it will (or closed), and resets the
 * connection (no TIME_WAIT left behind). Traps if the server never settles. */
void fuzz_server_grpc_exchange(const uint8_t *data, size_t len);

/* Connects to the HTTP API (a unix socket), writes `data` and
 * half-closes; runs the loop until the server closes its end. Traps on a hang. Returns the
 * number of response bytes read. */
size_t fuzz_server_http_exchange(const uint8_t *data, size_t len);

#endif
