/* sha256.h - SHA-256 (FIPS 180-4) of a byte string, as lower-case hex. Used where the wire needs
 * the ids SkyWalking's OAP derives by hashing (the eBPF process id). Pure, reentrant. */
#ifndef SKP_COMMON_SHA256_H
#define SKP_COMMON_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SKPX_SHA256_BYTES 32
#define SKPX_SHA256_HEX (2 * SKPX_SHA256_BYTES + 1)

struct skpx_sha256 {
    uint32_t h[8];
    uint64_t n_bytes;
    uint8_t block[64];
    size_t used;
};

void skpx_sha256_init(struct skpx_sha256 *s);
/* Adds `len` bytes of `data` (borrowed; NULL ok when len is 0). */
void skpx_sha256_update(struct skpx_sha256 *s, const void *data, size_t len);
/* Writes the digest; `s` must be initialised again before reuse. */
void skpx_sha256_final(struct skpx_sha256 *s, uint8_t out[SKPX_SHA256_BYTES]);
/* The digest of `data` as 64 lower-case hex digits and a NUL. */
void skpx_sha256_hex(const void *data, size_t len, char out[SKPX_SHA256_HEX]);

#endif
