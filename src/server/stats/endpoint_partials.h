/* endpoint_partials.h - endpoint statistics merged across collectors (issue 27, item 1).
 *
 * On a database shared by several skyprofd collectors (PostgreSQL), each collector sees only the
 * requests its load balancer gave it. Every collector writes its partial aggregates - per
 * (service, instance, endpoint, minute): count, errors and the latency histogram, the current
 * minute included - to the store's endpoint_minutes table once a second under its own writer id
 * (collector_tracing.c, collector_segments_tick; one multi-row statement). A reader merges the
 * rows of every writer: counts add up and the histograms, having the same buckets
 * (endpoint_stats.h), merge exactly, so every collector answers what one collector receiving all
 * the traffic would answer (to within the last second's writes). A stopped collector's rows stay:
 * they are requests that happened in the window.
 *
 * The SQLite (single-collector) path keeps reading endpoint_stats' memory. */
#ifndef SKP_SERVER_ENDPOINT_PARTIALS_H
#define SKP_SERVER_ENDPOINT_PARTIALS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/stats/endpoint_stats.h"
#include "server/store/store.h"

/* As endpoint_stats_query_page, from the partials of every collector stored in `st`: the
 * endpoints of `service` over the window's whole minutes (the current one included; at most
 * ES_DEFAULT_WINDOW_MIN), ordered by name, after `after` (NULL = from the first), at most
 * `limit` (0 = all); *more (may be NULL) says whether endpoints follow. A summary's
 * last_seen_ms has minute resolution (the end of its last minute, at most now_ms).
 * Errors: SKP_EINVAL, SKP_ENOMEM, the store's, or the callback's. */
SKP_MUST_CHECK skp_err endpoint_partials_query_page(struct store *st, const char *service,
                                                    int window_s, int64_t now_ms, const char *after,
                                                    size_t limit, es_summary_cb cb, void *ud,
                                                    bool *more);

#endif
