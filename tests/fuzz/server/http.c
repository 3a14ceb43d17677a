/* Fuzz target of skyprofd's HTTP API as a client reaches it: the bytes are one connection's
 * worth of requests (libevent's HTTP/1.x parser, then our routing, path/query decoding, token
 * check, JSON bodies of every mutating route and the handlers with a real SQLite store behind
 * them). The server must answer or close, never hang (harness deadline) or touch bad memory. */
#include <stdint.h>

#include "harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (256u << 10))
        return 0;
    fuzz_server_start();
    (void)fuzz_server_http_exchange(data, size);
    return 0;
}
