/* grpc_frame.c - gRPC length-prefixed message framing, grpc-message percent-encoding and
 * grpc-timeout values. Pure functions and one small state machine; no I/O, no HTTP/2.
 *
 * Design: the reader hands a message to its callback straight out of the caller's buffer when
 * the whole message lies inside one feed (the common case for small messages packed into large
 * DATA frames), and only copies into its own assembly buffer when a message straddles feeds.
 * The assembly buffer grows to the largest message seen, never beyond max_msg. */
#include "wire/grpc_frame.h"

#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/err.h"
#include "common/grow.h"

/* grpc-timeout: "TimeoutValue → {positive integer as ASCII string of at most 8 digits}". */
#define GRPC_TIMEOUT_MAX_DIGITS 8
#define GRPC_TIMEOUT_MAX_VALUE 99999999LL

void skpx_grpc_prefix_write(uint8_t out[SKPX_GRPC_PREFIX_LEN], uint32_t len)
{
    out[0] = 0;
    out[1] = (uint8_t)(len >> 24);
    out[2] = (uint8_t)(len >> 16);
    out[3] = (uint8_t)(len >> 8);
    out[4] = (uint8_t)len;
}

void skpx_grpc_reader_init(struct skpx_grpc_reader *r, size_t max_msg)
{
    memset(r, 0, sizeof(*r));
    r->max_msg = max_msg ? max_msg : SKPX_GRPC_DEFAULT_MAX_MSG;
}

void skpx_grpc_reader_cleanup(struct skpx_grpc_reader *r)
{
    skpx_free(r->buf);
    skpx_grpc_reader_init(r, r->max_msg); /* empty again, with its limit */
}

bool skpx_grpc_reader_idle(const struct skpx_grpc_reader *r)
{
    return r->prefix_have == 0 && r->buf_have == 0;
}

/* Validates a complete prefix and records the message length. */
static skp_err prefix_parse(struct skpx_grpc_reader *r, const uint8_t *p)
{
    if (p[0] == 1)
        return SKP_ENOTSUP;
    if (p[0] != 0)
        return SKP_EPROTO;
    uint32_t len =
        ((uint32_t)p[1] << 24) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 8) | (uint32_t)p[4];
    if ((size_t)len > r->max_msg)
        return SKP_ETOOBIG;
    r->msg_len = len;
    return SKP_OK;
}

/* Makes room for `need` bytes, growing geometrically but never past `limit` (the length of the
 * message being assembled, itself <= max_msg; need <= limit). Growth follows the bytes that
 * actually arrived, so a peer announcing a large message and sending little costs little. */
static skp_err buf_reserve(struct skpx_grpc_reader *r, size_t need, size_t limit)
{
    return skpx_grow_capped(&r->buf, &r->buf_cap, need, 1, 256, limit);
}

/* Hands one complete message to cb and readies the reader for the next prefix. `msg` is either
 * inside the caller's feed (zero-copy) or r->buf (assembled across feeds). */
static skp_err deliver(struct skpx_grpc_reader *r, const uint8_t *msg, size_t mlen,
                       skpx_grpc_msg_cb cb, void *ud)
{
    r->buf_have = 0;
    r->prefix_have = 0;
    r->msg_len = 0;
    return cb(ud, msg, mlen);
}

skp_err skpx_grpc_reader_feed(struct skpx_grpc_reader *r, const uint8_t *data, size_t len,
                              skpx_grpc_msg_cb cb, void *ud)
{
    skp_err err = SKP_OK;
    size_t pos = 0;

    while (pos < len) {
        size_t avail = len - pos;
        if (r->prefix_have < SKPX_GRPC_PREFIX_LEN) {
            if (r->prefix_have == 0 && avail >= SKPX_GRPC_PREFIX_LEN) {
                err = prefix_parse(r, data + pos);
                if (err)
                    return err;
                pos += SKPX_GRPC_PREFIX_LEN;
                r->prefix_have = SKPX_GRPC_PREFIX_LEN;
            } else {
                size_t take = SKPX_GRPC_PREFIX_LEN - r->prefix_have;
                if (take > avail)
                    take = avail;
                memcpy(r->prefix + r->prefix_have, data + pos, take);
                r->prefix_have += take;
                pos += take;
                if (r->prefix_have < SKPX_GRPC_PREFIX_LEN)
                    break;
                err = prefix_parse(r, r->prefix);
                if (err)
                    return err;
            }
            avail = len - pos;
            /* An empty message is complete now, even at the very end of the feed. */
            if (avail == 0 && r->msg_len > 0)
                break;
        }
        if (r->buf_have == 0 && avail >= r->msg_len) {
            /* The whole body is inside this feed (whichever feed carried the prefix):
             * zero-copy. */
            const uint8_t *msg = data + pos;
            pos += r->msg_len;
            err = deliver(r, msg, r->msg_len, cb, ud);
            if (err)
                return err;
            continue;
        }
        /* Assembling a message split across feeds. */
        size_t need = r->msg_len - r->buf_have;
        size_t take = need < avail ? need : avail;
        err = buf_reserve(r, r->buf_have + take, r->msg_len);
        if (err)
            return err;
        memcpy(r->buf + r->buf_have, data + pos, take);
        r->buf_have += take;
        pos += take;
        if (r->buf_have == r->msg_len) {
            err = deliver(r, r->buf, r->buf_have, cb, ud);
            if (err)
                return err;
        }
    }
    return SKP_OK;
}

static bool pct_must_encode(unsigned char c)
{
    return c < 0x20 || c > 0x7E || c == '%';
}

size_t skpx_grpc_percent_encode(const char *in, size_t in_len, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t need = 0;
    size_t w = 0;
    bool full = cap == 0;

    for (size_t i = 0; i < in_len; i++) {
        unsigned char c = (unsigned char)in[i];
        size_t unit = pct_must_encode(c) ? 3 : 1;
        need += unit;
        /* Only whole units are written, so a truncated result never ends in half an escape. */
        if (full || w + unit > cap - 1) {
            full = true;
            continue;
        }
        if (unit == 3) {
            out[w++] = '%';
            out[w++] = hex[c >> 4];
            out[w++] = hex[c & 0xF];
        } else {
            out[w++] = (char)c;
        }
    }
    if (cap)
        out[w] = '\0';
    return need;
}

void skpx_grpc_timeout_format(int64_t timeout_ms, char *out, size_t cap)
{
    /* Pick the finest unit whose value fits in 8 digits, rounding up so the peer never sees a
     * shorter deadline than ours. */
    static const struct {
        int64_t ms;
        char unit;
    } units[] = {{1, 'm'}, {1000, 'S'}, {60000, 'M'}, {3600000, 'H'}};
    if (cap == 0)
        return;
    if (timeout_ms < 0)
        timeout_ms = 0;
    int64_t v = timeout_ms;
    char unit = 'H';
    for (size_t i = 0; i < SKP_ARRAY_LEN(units); i++) {
        v = timeout_ms / units[i].ms + (timeout_ms % units[i].ms != 0);
        unit = units[i].unit;
        if (v <= GRPC_TIMEOUT_MAX_VALUE)
            break;
    }
    if (v > GRPC_TIMEOUT_MAX_VALUE)
        v = GRPC_TIMEOUT_MAX_VALUE;
    snprintf(out, cap, "%lld%c", (long long)v, unit);
}

skp_err skpx_grpc_timeout_parse(const char *s, size_t len, int64_t *out_ms)
{
    *out_ms = 0;
    if (!s || len < 2 || len > GRPC_TIMEOUT_MAX_DIGITS + 1)
        return SKP_EINVAL;
    int64_t v = 0;
    for (size_t i = 0; i + 1 < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return SKP_EINVAL;
        v = v * 10 + (s[i] - '0');
    }
    int64_t ms;
    switch (s[len - 1]) {
    case 'H':
        ms = v * 3600000;
        break;
    case 'M':
        ms = v * 60000;
        break;
    case 'S':
        ms = v * 1000;
        break;
    case 'm':
        ms = v;
        break;
    case 'u':
        ms = (v + 999) / 1000;
        break;
    case 'n':
        ms = (v + 999999) / 1000000;
        break;
    default:
        return SKP_EINVAL;
    }
    *out_ms = ms;
    return SKP_OK;
}

const char *skpx_grpc_status_name(int status)
{
    static const char *const names[] = {
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    };
    if (status < 0 || (size_t)status >= SKP_ARRAY_LEN(names))
        return "UNKNOWN_STATUS";
    return names[status];
}
