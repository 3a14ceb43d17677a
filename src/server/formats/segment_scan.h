/* segment_scan.h - reads the few fields of an encoded SkyWalking SegmentObject (spec §5.4) that
 * the endpoint statistics and the keep decision need, straight from the protobuf wire bytes:
 * no allocation, no decoding of spans beyond their entry fields. The full decode (protobuf-c)
 * runs only for segments that are stored. Pure; thread-safe. Fuzzed (tests/fuzz/segment_scan). */
#ifndef SKP_SERVER_SEGMENT_SCAN_H
#define SKP_SERVER_SEGMENT_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "skyprof/skp_err.h"

/* A byte range inside the scanned buffer (not NUL-terminated). */
struct segment_slice {
    const char *ptr;
    size_t len;
};

struct segment_scan {
    struct segment_slice segment_id;
    struct segment_slice trace_id;
    struct segment_slice service;
    struct segment_slice instance;
    size_t n_spans;
    bool has_entry;                /* a span of type Entry (the protocol's default type) */
    struct segment_slice endpoint; /* first Entry span's operationName, else first span's */
    int64_t entry_start_ms;        /* of that first Entry span */
    int64_t entry_end_ms;
    bool entry_is_error;
};

/* Scans buf[0..len). Strings point into buf (borrowed). Protobuf rules: unknown fields are
 * skipped, the last value of a repeated scalar wins. Errors: SKP_EPROTO (malformed wire data:
 * truncated varint or length, a length past the end, group or reserved wire types). */
SKP_MUST_CHECK skp_err segment_scan(const uint8_t *buf, size_t len, struct segment_scan *out);

#endif
