/* store_codec.h - column formats both store backends share (internal to the store's files):
 * a segment's spans as one compact JSON text, and an instance's properties as a JSON object
 * text (keys in the agent's order). Written from and read back into store.h's rows; the
 * backends keep these texts opaque. */
#ifndef SKP_SERVER_STORE_CODEC_H
#define SKP_SERVER_STORE_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "server/store/store.h"

/* Compact JSON text of a segment's spans; caller frees with skpx_free. NULL on ENOMEM. */
char *store_spans_to_text(const struct store_segment *seg, size_t *len);

/* Rows decoded from a span text: the arrays point into the parsed document (root). */
struct store_span_rows {
    void *root; /* the parsed document, owned */
    struct store_span *spans;
    size_t n_spans;
    struct store_span_ref *refs;
    struct store_kv *kvs;
    struct store_span_log *logs;
};
/* Parses a span text. An unreadable one (never written by a backend) gives no spans, logged
 * with segment_id; only allocation failure is an error (SKP_ENOMEM). Clean up with
 * store_span_rows_cleanup (also after an error). */
SKP_MUST_CHECK skp_err store_span_rows_parse(const char *segment_id, const char *text,
                                             struct store_span_rows *r);
void store_span_rows_cleanup(struct store_span_rows *r);

/* The JSON object text of properties (keys sanitized to UTF-8, later duplicates replace
 * earlier ones); *language (may be NULL) gets the "language" value borrowed from props, NULL if
 * none. Caller frees with skpx_free; NULL on ENOMEM. */
char *store_props_to_text(const struct store_kv *props, size_t n, const char **language);

/* Properties read back from such a text (an unreadable one gives none). */
struct store_props {
    void *root; /* the parsed document, owned */
    struct store_kv *kv;
    size_t n;
};
SKP_MUST_CHECK skp_err store_props_parse(const char *text, struct store_props *out);
void store_props_cleanup(struct store_props *p);

/* A stack's frame ids as stored (LEB128 varints, at most 5 bytes an id): writes n ids into buf
 * (room for 5 * n bytes) and returns the length. Pure. */
size_t store_encode_ids(const uint32_t *ids, size_t n, uint8_t *buf);
/* Decodes such a blob into at most `max` ids; returns the count, or SIZE_MAX if the blob is
 * malformed. Pure. */
size_t store_decode_ids(const uint8_t *b, size_t len, uint32_t *ids, size_t max);

#endif
