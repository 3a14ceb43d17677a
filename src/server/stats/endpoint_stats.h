/* endpoint_stats.h - per service/instance/endpoint request statistics from every reported
 * segment's entry span: request count, error count and a latency histogram, kept in memory for
 * a bounded window and rolled up per minute into the store.
 *
 * Resolution: per-second slots (count, errors) for the last ES_SECOND_SLOTS seconds; per-minute
 * slots (count, errors, histogram) for the window (default 15 minutes). Histograms are
 * log-linear (exact below 128 ms, then 128 sub-buckets per power of two), so a quantile read
 * from them is within 0.4 % of the exact sample quantile. They are sparse (only the buckets
 * seen), so memory follows the distinct latencies seen, bounded by ES_HIST_BUCKETS per slot and
 * by a global bucket budget; everything beyond a bound is dropped and counted.
 * Single-threaded (the server's event loop). */
#ifndef SKP_SERVER_ENDPOINT_STATS_H
#define SKP_SERVER_ENDPOINT_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "skyprof/skp_err.h"

#define ES_SUB_BITS 7                    /* 128 sub-buckets per power of two */
#define ES_HIST_BUCKETS (128 + 25 * 128) /* values up to 2^32 ms */
#define ES_SECOND_SLOTS 64               /* per-second resolution kept (s) */
#define ES_DEFAULT_WINDOW_MIN 15
#define ES_MAX_WINDOW_MIN 60
/* Distinct (service, instance, endpoint) keys kept; more are dropped and counted. 100,000
 * keys take about 200 MB at full per-minute histograms, well above what one service sends. */
#define ES_DEFAULT_MAX_KEYS 100000
/* Distinct endpoints tracked per service (all instances together); requests of a service's
 * further endpoints are not tracked, and counted (issue 25: 100k endpoints of one service made
 * a 111 MB listing). */
#define ES_DEFAULT_MAX_ENDPOINTS_PER_SERVICE 1000
/* Histogram buckets (8 bytes each) of all slots together: 64 MB. */
#define ES_DEFAULT_MAX_BUCKETS (8u << 20)

/* ---- histogram ---- */

struct es_bucket {
    uint16_t idx;
    uint32_t n;
};
/* A sparse histogram: buckets sorted by idx. Zero-initialised = empty. */
struct es_hist {
    struct es_bucket *b;
    uint32_t n, cap;
    uint64_t total;
};

/* Bucket index of a value (ms). Pure. */
size_t es_bucket_of(uint64_t v);
/* Smallest value of a bucket and the value reported for it (its midpoint). Pure. */
uint64_t es_bucket_lo(size_t idx);
uint64_t es_bucket_mid(size_t idx);
/* Adds n samples of value v. *budget (may be NULL) is decremented by new buckets and the add
 * fails with SKP_EFULL (nothing added) when it is 0. Errors: SKP_EFULL, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err es_hist_add(struct es_hist *h, uint64_t v, uint32_t n, size_t *budget);
/* Adds every sample of src to dst (same errors; on failure dst holds part of src). */
SKP_MUST_CHECK skp_err es_hist_merge(struct es_hist *dst, const struct es_hist *src,
                                     size_t *budget);
/* Nearest-rank quantile (q in [0,1]) as its bucket's midpoint; 0 when empty. */
uint64_t es_hist_quantile(const struct es_hist *h, double q);
/* Frees the buckets; *h becomes empty. NULL ok. */
void es_hist_cleanup(struct es_hist *h);
/* Encoding for storage: varint (idx delta, count) pairs. es_hist_encode writes at most
 * es_hist_encoded_max(h) bytes and returns the length; es_hist_decode fails with SKP_EINVAL
 * on a malformed blob (h then empty). */
size_t es_hist_encoded_max(const struct es_hist *h);
size_t es_hist_encode(const struct es_hist *h, uint8_t *out);
SKP_MUST_CHECK skp_err es_hist_decode(const uint8_t *b, size_t len, struct es_hist *h);

/* ---- statistics ---- */

struct endpoint_stats;

struct endpoint_stats_opts {
    int window_min;                   /* 0 = ES_DEFAULT_WINDOW_MIN */
    size_t max_keys;                  /* 0 = ES_DEFAULT_MAX_KEYS */
    size_t max_buckets;               /* 0 = ES_DEFAULT_MAX_BUCKETS */
    size_t max_endpoints_per_service; /* 0 = ES_DEFAULT_MAX_ENDPOINTS_PER_SERVICE */
};

struct endpoint_stats_counters {
    uint64_t recorded;
    uint64_t dropped_late;      /* older than the window */
    uint64_t dropped_keys;      /* key limit reached */
    uint64_t dropped_endpoints; /* a service's endpoint limit reached (part of dropped_keys) */
    uint64_t dropped_buckets;   /* counted, but its latency not kept (bucket budget) */
    size_t keys;
    size_t buckets; /* histogram buckets held */
    size_t bytes;   /* memory held (approximate) */
};

/* *out owns the object; free with endpoint_stats_free. Errors: SKP_EINVAL, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err endpoint_stats_new(const struct endpoint_stats_opts *opts,
                                          struct endpoint_stats **out);
void endpoint_stats_free(struct endpoint_stats *es);

/* One finished request: its entry span ended at end_ms after latency_ms. Borrows the strings
 * (NULL = ""). A request older than the window is dropped and counted; one in the future
 * (beyond now + 1 min, a skewed agent clock) is counted at now. Hot path: no allocation once
 * the key and its buckets exist. Errors: only SKP_ENOMEM (counted as dropped). */
skp_err endpoint_stats_record(struct endpoint_stats *es, const char *service, const char *instance,
                              const char *endpoint, int64_t end_ms, int64_t latency_ms,
                              bool is_error, int64_t now_ms);

/* Per-minute point of an endpoint (all instances together). */
struct es_point {
    int64_t minute_ms;
    uint64_t count;
    uint64_t errors;
    uint64_t p50_ms, p99_ms;
};
/* An endpoint of a service over a window, all instances together. */
struct es_summary {
    const char *endpoint;
    uint64_t count;
    uint64_t errors;
    uint64_t p50_ms, p90_ms, p99_ms;
    int64_t last_seen_ms;
    size_t n_instances;
    const struct es_point *points; /* one per minute of the window, oldest first */
    size_t n_points;
};
typedef skp_err (*es_summary_cb)(void *ud, const struct es_summary *s);
/* Visits the endpoints of `service` seen in the last window_s seconds (1..window; whole
 * minutes, the current one included), ordered by endpoint name. Errors: SKP_EINVAL,
 * SKP_ENOMEM, or the callback's. */
SKP_MUST_CHECK skp_err endpoint_stats_query(struct endpoint_stats *es, const char *service,
                                            int window_s, int64_t now_ms, es_summary_cb cb,
                                            void *ud);
/* One page of endpoint_stats_query: the endpoints whose name sorts after `after` (NULL = from
 * the first), at most `limit` of them (0 = all); *more (may be NULL) says whether endpoints
 * follow the page. */
SKP_MUST_CHECK skp_err endpoint_stats_query_page(struct endpoint_stats *es, const char *service,
                                                 int window_s, int64_t now_ms, const char *after,
                                                 size_t limit, es_summary_cb cb, void *ud,
                                                 bool *more);
/* Requests per second of the last `seconds` (<= ES_SECOND_SLOTS) whole seconds. */
void endpoint_stats_rate(struct endpoint_stats *es, const char *service, const char *endpoint,
                         int seconds, int64_t now_ms, uint64_t *count, uint64_t *errors);

/* One finished minute of one key, as it is rolled up into the store. */
struct es_minute_row {
    const char *service;
    const char *instance;
    const char *endpoint;
    int64_t minute_ms;
    uint64_t count;
    uint64_t errors;
    const struct es_hist *hist;
};
typedef skp_err (*es_minute_cb)(void *ud, const struct es_minute_row *rows, size_t n);
/* Hands every minute that ended at least grace_ms before now_ms and changed since it was last
 * handed over to cb, in batches; a minute is marked clean only when cb returned SKP_OK (else
 * it is offered again next time). */
SKP_MUST_CHECK skp_err endpoint_stats_flush(struct endpoint_stats *es, int64_t now_ms,
                                            int64_t grace_ms, es_minute_cb cb, void *ud);

void endpoint_stats_counters(const struct endpoint_stats *es, struct endpoint_stats_counters *out);

#endif
