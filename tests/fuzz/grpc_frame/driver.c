/* Fuzz target of the gRPC message framing (src/wire/grpc_frame.c): the length-prefixed message
 * reader fed in pieces of every size, and the grpc-timeout / grpc-message header helpers.
 * Input: byte 0 picks the per-message limit, byte 1 the piece size; the rest is the stream.
 * Oracle: the messages delivered, concatenated with their prefixes, are exactly the bytes fed
 * up to the point where the reader stopped, and none is above the limit. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/grpc_frame.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

struct seen {
    const uint8_t *stream;
    size_t stream_len;
    size_t pos; /* bytes of the stream accounted for by delivered messages */
    size_t max_msg;
};

static skp_err on_msg(void *ud, const uint8_t *msg, size_t len)
{
    struct seen *s = ud;
    CHECK(len <= s->max_msg);
    CHECK(s->pos + SKPX_GRPC_PREFIX_LEN + len <= s->stream_len);
    const uint8_t *p = s->stream + s->pos;
    CHECK(p[0] == 0);
    CHECK(((uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4]) == len);
    CHECK(len == 0 || memcmp(p + SKPX_GRPC_PREFIX_LEN, msg, len) == 0);
    s->pos += SKPX_GRPC_PREFIX_LEN + len;
    /* A message whose first byte is 0xEE stops the feed, as a handler refusing it would. */
    return len > 0 && msg[0] == 0xEE ? SKP_ESTATE : SKP_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    struct seen s = {.stream = data + 2, .stream_len = size - 2, .max_msg = (size_t)data[0] * 64};
    size_t piece = (size_t)data[1] + 1;
    struct skpx_grpc_reader r;
    skpx_grpc_reader_init(&r, s.max_msg);
    if (s.max_msg == 0)
        s.max_msg = SKPX_GRPC_DEFAULT_MAX_MSG;
    skp_err err = SKP_OK;
    size_t fed = 0;
    while (fed < s.stream_len && !err) {
        size_t n = s.stream_len - fed < piece ? s.stream_len - fed : piece;
        err = skpx_grpc_reader_feed(&r, s.stream + fed, n, on_msg, &s);
        fed += n;
    }
    if (!err)
        CHECK(skpx_grpc_reader_idle(&r) == (s.pos == s.stream_len));
    else
        CHECK(err == SKP_ETOOBIG || err == SKP_ENOTSUP || err == SKP_EPROTO || err == SKP_ESTATE ||
              err == SKP_ENOMEM);
    skpx_grpc_reader_cleanup(&r);
    skpx_grpc_reader_cleanup(&r);

    /* The header helpers on the same bytes as text. */
    char text[256];
    size_t tn = s.stream_len < sizeof(text) ? s.stream_len : sizeof(text);
    memcpy(text, s.stream, tn);
    int64_t ms = -1;
    if (skpx_grpc_timeout_parse(text, tn, &ms) == SKP_OK)
        CHECK(ms >= 0);
    char enc[sizeof(text) * 3 + 1];
    size_t en = skpx_grpc_percent_encode(text, tn, enc, sizeof(enc));
    CHECK(en < sizeof(enc) && enc[en] == '\0');
    for (size_t i = 0; i < en; i++)
        CHECK(enc[i] >= 0x20 && enc[i] <= 0x7e);
    return 0;
}
