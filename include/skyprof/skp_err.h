/* skp_err.h - the one error enum of skyprof (agent, wire, server, cli).
 * Values are append-only; skp_strerror() names each. SKP_OK is 0 so `if (err)` tests failure. */
#ifndef SKYPROF_SKP_ERR_H
#define SKYPROF_SKP_ERR_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum skp_err {
    SKP_OK = 0,
    SKP_EINVAL = 1,       /* invalid argument or malformed input */
    SKP_ENOMEM = 2,       /* allocation failed or a budget was exhausted */
    SKP_EIO = 3,          /* system call / storage failure */
    SKP_ETIMEDOUT = 4,    /* a deadline expired */
    SKP_EUNAVAILABLE = 5, /* peer unreachable, connection lost, or backing off */
    SKP_EPROTO = 6,       /* peer violated HTTP/2, gRPC or protobuf framing */
    SKP_ETOOBIG = 7,      /* a message or buffer exceeded its configured maximum */
    SKP_ENOTFOUND = 8,    /* no such object */
    SKP_EEXIST = 9,       /* object already exists / conflicts with another */
    SKP_ESTATE = 10,      /* call not valid in the current state (not started, forked child...) */
    SKP_ENOTSUP = 11,     /* feature not available on this platform or build */
    SKP_EGRPC = 12,       /* the peer answered with a non-OK grpc-status */
    SKP_EFULL = 13,       /* a bounded queue was full; the item was dropped and counted */
} skp_err;

/* Static, never NULL, e.g. "invalid argument". Thread-safe, async-signal-safe.
 * Exported by libskyprof.so. */
__attribute__((visibility("default"))) const char *skp_strerror(skp_err err);

#if defined(__GNUC__)
#define SKP_MUST_CHECK __attribute__((warn_unused_result))
#else
#define SKP_MUST_CHECK
#endif

#ifdef __cplusplus
}
#endif
#endif
