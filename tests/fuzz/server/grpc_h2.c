/* Fuzz target of skyprofd's gRPC port from the first byte after the HTTP/2 client preface:
 * frames (nghttp2), HPACK headers, routing, gRPC message framing, protobuf decoding of every
 * method's messages and the collectors with a real SQLite store behind them. The seeds are
 * whole agent conversations (collector.c writes them, see README.md). */
#include <stdint.h>

#include "harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (256u << 10))
        return 0;
    fuzz_server_start();
    fuzz_server_grpc_exchange(data, size);
    return 0;
}
