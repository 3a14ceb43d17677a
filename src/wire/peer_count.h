/* peer_count.h - open connections per peer IP address, for per-peer connection caps on the
 * server listeners (gRPC and HTTP). Keys are 64-bit hashes of the address without its port
 * (an IPv4-mapped IPv6 address counts as the IPv4 one); two addresses sharing a hash share a
 * cap, which only makes the cap stricter. Memory is bounded: entries that dropped to zero are
 * purged once they outnumber the live ones. Not thread-safe (one loop thread). */
#ifndef SKP_WIRE_PEER_COUNT_H
#define SKP_WIRE_PEER_COUNT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/map.h"
#include "skyprof/skp_err.h"

struct skpx_peer_count {
    struct skpx_u64map map; /* key -> open connections (0 = purgeable) */
    uint64_t n_open;        /* sum of the counts */
};

/* The key of `sa` (AF_INET/AF_INET6; anything else shares the key 0). `sa` is borrowed. */
uint64_t skpx_peer_key(const struct sockaddr *sa);
/* Takes one slot for `key` if it holds fewer than `max` (0 = no cap): true when taken.
 * False when the peer is at its cap or on SKP_ENOMEM (then *err is set, if not NULL). */
bool skpx_peer_count_take(struct skpx_peer_count *pc, uint64_t key, uint64_t max, skp_err *err);
/* Gives back a slot taken for `key`. */
void skpx_peer_count_give(struct skpx_peer_count *pc, uint64_t key);
/* Open connections of `key`. */
uint64_t skpx_peer_count_get(const struct skpx_peer_count *pc, uint64_t key);
/* Frees the map. Zero-initialised storage is a valid empty counter. NULL ok. */
void skpx_peer_count_cleanup(struct skpx_peer_count *pc);

#endif
