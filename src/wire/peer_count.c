/* peer_count.c - per-peer open connection counts (see peer_count.h). */
#include "wire/peer_count.h"

#include <netinet/in.h>
#include <string.h>

#include "common/alloc.h"

/* Purge zero entries when there are more of them than this plus the live peers: bounds the map
 * against a peer that rotates through many addresses (IPv6) without rehashing on every close. */
#define PEER_COUNT_SLACK 4096u

uint64_t skpx_peer_key(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        return skpx_hash_bytes(&in->sin_addr, sizeof(in->sin_addr));
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
            return skpx_hash_bytes(in6->sin6_addr.s6_addr + 12, 4);
        return skpx_hash_bytes(&in6->sin6_addr, sizeof(in6->sin6_addr));
    }
    return 0;
}

uint64_t skpx_peer_count_get(const struct skpx_peer_count *pc, uint64_t key)
{
    uint64_t v = 0;
    return skpx_u64map_get(&pc->map, key, &v) ? v : 0;
}

/* Rebuilds the map with the non-zero entries only. On allocation failure the old map stays. */
static void purge(struct skpx_peer_count *pc)
{
    struct skpx_u64map fresh = {0};
    for (size_t i = 0; i < pc->map.cap; i++) {
        if (!pc->map.used[i] || pc->map.vals[i] == 0)
            continue;
        if (skpx_u64map_put(&fresh, pc->map.keys[i], pc->map.vals[i]) != SKP_OK) {
            skpx_u64map_cleanup(&fresh);
            return;
        }
    }
    skpx_u64map_cleanup(&pc->map);
    pc->map = fresh;
}

bool skpx_peer_count_take(struct skpx_peer_count *pc, uint64_t key, uint64_t max, skp_err *err)
{
    if (err)
        *err = SKP_OK;
    uint64_t v = skpx_peer_count_get(pc, key);
    if (max && v >= max)
        return false;
    if (pc->map.n > PEER_COUNT_SLACK + 2 * pc->n_open)
        purge(pc);
    skp_err e = skpx_u64map_put(&pc->map, key, v + 1);
    if (e) {
        if (err)
            *err = e;
        return false;
    }
    pc->n_open++;
    return true;
}

void skpx_peer_count_give(struct skpx_peer_count *pc, uint64_t key)
{
    uint64_t v = skpx_peer_count_get(pc, key);
    if (v == 0)
        return;
    pc->n_open--;
    if (skpx_u64map_put(&pc->map, key, v - 1) == SKP_OK)
        return;
    /* The map wanted to grow and could not: decrement in place (a scan, only after OOM). */
    for (size_t i = 0; i < pc->map.cap; i++) {
        if (pc->map.used[i] && pc->map.keys[i] == key) {
            pc->map.vals[i] = v - 1;
            return;
        }
    }
}

void skpx_peer_count_cleanup(struct skpx_peer_count *pc)
{
    if (!pc)
        return;
    skpx_u64map_cleanup(&pc->map);
    pc->n_open = 0;
}
