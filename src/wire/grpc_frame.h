/* grpc_frame.h - gRPC message framing shared by client and server (no I/O, no HTTP/2).
 * A gRPC message on the wire is: 1 byte compressed-flag, 4 bytes big-endian length, payload.
 * The reader reassembles messages split across DATA frames, enforces a per-message maximum and
 * refuses compressed messages (we advertise `grpc-accept-encoding: identity`). Also here:
 * grpc-message percent-encoding and grpc-timeout encoding/parsing. Not thread-safe per object. */
#ifndef SKP_WIRE_GRPC_FRAME_H
#define SKP_WIRE_GRPC_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "skyprof/skp_err.h"

#define SKPX_GRPC_PREFIX_LEN 5
/* Default per-message maximum, as gRPC's default receive limit (4 MiB). */
#define SKPX_GRPC_DEFAULT_MAX_MSG (4u * 1024 * 1024)

/* gRPC status codes (grpc/status.h numbering). */
enum skpx_grpc_status {
    SKPX_GRPC_OK = 0,
    SKPX_GRPC_CANCELLED = 1,
    SKPX_GRPC_UNKNOWN = 2,
    SKPX_GRPC_INVALID_ARGUMENT = 3,
    SKPX_GRPC_DEADLINE_EXCEEDED = 4,
    SKPX_GRPC_NOT_FOUND = 5,
    SKPX_GRPC_ALREADY_EXISTS = 6,
    SKPX_GRPC_PERMISSION_DENIED = 7,
    SKPX_GRPC_RESOURCE_EXHAUSTED = 8,
    SKPX_GRPC_FAILED_PRECONDITION = 9,
    SKPX_GRPC_ABORTED = 10,
    SKPX_GRPC_OUT_OF_RANGE = 11,
    SKPX_GRPC_UNIMPLEMENTED = 12,
    SKPX_GRPC_INTERNAL = 13,
    SKPX_GRPC_UNAVAILABLE = 14,
    SKPX_GRPC_DATA_LOSS = 15,
    SKPX_GRPC_UNAUTHENTICATED = 16,
};

/* Writes the 5-byte prefix for a `len`-byte uncompressed message. */
void skpx_grpc_prefix_write(uint8_t out[SKPX_GRPC_PREFIX_LEN], uint32_t len);

/* Called once per complete message; `msg` is borrowed for the duration of the call.
 * Return SKP_OK to continue, anything else stops the feed and is returned by it. */
typedef skp_err (*skpx_grpc_msg_cb)(void *ud, const uint8_t *msg, size_t len);

struct skpx_grpc_reader {
    size_t max_msg; /* per-message maximum in bytes */
    uint8_t prefix[SKPX_GRPC_PREFIX_LEN];
    size_t prefix_have; /* bytes of the prefix received so far */
    uint32_t msg_len;   /* length of the message being assembled */
    uint8_t *buf;       /* owned; assembly buffer for messages split across feeds */
    size_t buf_have;
    size_t buf_cap;
};

/* Initialises a reader with `max_msg` (0 = SKPX_GRPC_DEFAULT_MAX_MSG). Never fails. */
void skpx_grpc_reader_init(struct skpx_grpc_reader *r, size_t max_msg);
/* Frees the assembly buffer. Safe to call twice. */
void skpx_grpc_reader_cleanup(struct skpx_grpc_reader *r);
/* Consumes `len` bytes, calling `cb` for each complete message (zero-copy when a message lies
 * whole inside `data`). Errors: SKP_ETOOBIG (message over max_msg), SKP_ENOTSUP (compressed
 * flag set), SKP_EPROTO (flag byte other than 0/1), SKP_ENOMEM, or the callback's error.
 * After an error the reader must not be fed again. */
SKP_MUST_CHECK skp_err skpx_grpc_reader_feed(struct skpx_grpc_reader *r, const uint8_t *data,
                                             size_t len, skpx_grpc_msg_cb cb, void *ud);
/* True when no partial message is buffered (a stream may end cleanly here). */
bool skpx_grpc_reader_idle(const struct skpx_grpc_reader *r);

/* Percent-encodes `in` for a grpc-message header (RFC: bytes outside 0x20..0x7E and '%' are
 * encoded as %XX). Writes at most `cap` bytes including the NUL; returns the length the full
 * encoding needs (excluding NUL), like snprintf. */
size_t skpx_grpc_percent_encode(const char *in, size_t in_len, char *out, size_t cap);
/* Decoding is common/pct.h's skpx_pct_decode (invalid sequences kept literally, same return
 * convention). */

/* Formats a grpc-timeout value for `timeout_ms` (e.g. "1500m", at most 8 digits + unit) into
 * `out` (cap >= 12). */
void skpx_grpc_timeout_format(int64_t timeout_ms, char *out, size_t cap);
/* Parses a grpc-timeout header value ("100m", "5S", "3M"...) into ms (rounded up).
 * Errors: SKP_EINVAL. */
SKP_MUST_CHECK skp_err skpx_grpc_timeout_parse(const char *s, size_t len, int64_t *out_ms);

/* Human name of a status code ("UNIMPLEMENTED"), "UNKNOWN_STATUS" if out of range. */
const char *skpx_grpc_status_name(int status);

#endif
