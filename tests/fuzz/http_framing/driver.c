/* Fuzz target of the strict HTTP/1.1 request framing scanner (src/server/http/http_framing.c): any
 * byte stream is framed without reading outside the input, every call makes progress or reports
 * an event, an error is final, and the events do not depend on how the stream was split into
 * reads (the first input byte picks a split size): whole, in chunks and byte by byte agree, and
 * so do the bytes the scanner rewrote (a chunk extension's `;`). Chunked bodies: the chunk sizes
 * of a request add up to at most the maximum body, and a rewrite only ever turns a `;` into a
 * space. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/http/http_framing.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            __builtin_trap();                                                                      \
    } while (0)

#define MAX_EVENTS 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_BODY (1u << 20)

/* Events (with the byte offset after each) of the stream fed in pieces of `chunk` bytes; the
 * stream is copied to `buf` first, where the scanner may rewrite bytes. */
static size_t run(const uint8_t *in, size_t size, size_t chunk, int *evs, size_t *offs,
                  uint64_t *bodies, uint8_t *buf)
{
    static struct http_framing f;
    memcpy(buf, in, size);
    uint8_t *data = buf;
    http_framing_init(&f, MAX_BODY);
    uint64_t chunked_sum = 0;
    size_t n_ev = 0, off = 0;
    while (off < size && n_ev < MAX_EVENTS) {
        size_t end = off + chunk < size ? off + chunk : size;
        while (off < end && n_ev < MAX_EVENTS) {
            enum http_framing_event ev;
            size_t used = http_framing_feed(&f, data + off, end - off, &ev);
            CHECK(used <= end - off);
            CHECK(used > 0 || ev == HTTP_FRAMING_ERROR);
            off += used;
            if (ev == HTTP_FRAMING_MORE) {
                CHECK(off == end);
                continue;
            }
            evs[n_ev] = (int)ev;
            offs[n_ev] = off;
            bodies[n_ev] = ev == HTTP_FRAMING_HEAD_DONE ? f.body_len
                           : ev == HTTP_FRAMING_CHUNK   ? f.chunk_len
                                                        : 0;
            if (ev == HTTP_FRAMING_HEAD_DONE) {
                chunked_sum = 0;
                CHECK(!f.chunked || f.body_len == 0);
            }
            if (ev == HTTP_FRAMING_CHUNK) {
                CHECK(f.chunked);
                chunked_sum += f.chunk_len;
                CHECK(chunked_sum <= MAX_BODY);
            }
            n_ev++;
            if (ev == HTTP_FRAMING_ERROR) {
                CHECK(f.status >= 400 && f.status < 600 && f.reason);
                enum http_framing_event again;
                CHECK(http_framing_feed(&f, data, size, &again) == 0);
                CHECK(again == HTTP_FRAMING_ERROR);
                return n_ev;
            }
        }
    }
    return n_ev;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    static int e1[MAX_EVENTS], e2[MAX_EVENTS], e3[MAX_EVENTS];
    static size_t o1[MAX_EVENTS], o2[MAX_EVENTS], o3[MAX_EVENTS];
    static uint64_t b1[MAX_EVENTS], b2[MAX_EVENTS], b3[MAX_EVENTS];
    static uint8_t w1[1 << 16], w2[1 << 16], w3[1 << 16];
    size_t chunk = size ? (size_t)data[0] % 64 + 1 : 1;
    size_t n1 = run(data, size, size ? size : 1, e1, o1, b1, w1);
    size_t n2 = run(data, size, chunk, e2, o2, b2, w2);
    size_t n3 = run(data, size, 1, e3, o3, b3, w3);
    CHECK(n1 == n2 && n2 == n3);
    CHECK(memcmp(w1, w2, size) == 0 && memcmp(w2, w3, size) == 0);
    for (size_t i = 0; i < size; i++)
        CHECK(w1[i] == data[i] || (data[i] == ';' && w1[i] == ' '));
    for (size_t i = 0; i < n1; i++) {
        CHECK(e1[i] == e2[i] && e2[i] == e3[i]);
        CHECK(o1[i] == o2[i] && o2[i] == o3[i]);
        CHECK(b1[i] == b2[i] && b2[i] == b3[i]);
    }
    return 0;
}
