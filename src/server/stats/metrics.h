/* metrics.h - skyprofd's counters and their Prometheus text rendering (/metrics).
 * Counters are plain integers: every writer runs on the server's event loop thread. */
#ifndef SKP_SERVER_METRICS_H
#define SKP_SERVER_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "server/store/store.h"
#include "skyprof/skp_err.h"
#include "wire/grpc_server.h"

struct metrics {
    uint64_t snapshots_received;     /* ThreadSnapshot messages decoded */
    uint64_t snapshots_stored;       /* committed as new rows */
    uint64_t snapshots_duplicate;    /* committed batch already held them */
    uint64_t snapshots_rejected;     /* lost with a failed batch or an aborted stream */
    uint64_t snapshots_unknown_task; /* stored although their task id is unknown */
    uint64_t snapshot_streams;       /* collectSnapshot calls started */
    uint64_t snapshot_streams_failed;
    uint64_t snapshot_batches; /* store_insert_snapshots calls */
    uint64_t segments_received;
    uint64_t segments_stored;
    uint64_t segments_refused;    /* over --max-segment-spans: RESOURCE_EXHAUSTED, not decoded */
    uint64_t segments_dropped;    /* not stored by the keep policy (--keep-segments) */
    uint64_t continuous_triggers; /* continuous-profiling policies fired by skyprofd */
    /* The evaluator across collectors (continuous_cluster.h), copied at each tick. */
    uint64_t cont_evaluator;       /* gauge: 1 when this collector judges the policies */
    uint64_t cont_lease_takeovers; /* times this collector took the evaluator's lease */
    uint64_t cont_shares_written;  /* statistics' slot shares stored by this collector */
    uint64_t cont_shares_read;     /* slot shares read (every collector's) */
    uint64_t cont_claims_lost;     /* firings another collector had claimed first */
    uint64_t cont_cluster_errors;  /* the cluster's store calls that failed */
    uint64_t segment_errors;
    uint64_t tasks_created;
    uint64_t tasks_rejected;
    uint64_t task_commands_sent;
    uint64_t task_queries;
    uint64_t task_finish_reports;
    uint64_t heartbeats;
    uint64_t dropped_messages; /* accept-and-drop services (logs, meters, JVM...) */
    uint64_t auth_failures;
    uint64_t http_requests[6];        /* by status class: [1]=1xx ... [5]=5xx, [0]=other */
    uint64_t http_conns_open;         /* gauge: HTTP connections open (http_conn.c) */
    uint64_t http_conns_refused;      /* over --http-max-connections or the per-peer cap */
    uint64_t http_accept_pauses;      /* accept() ran out of fds: accepting paused */
    uint64_t http_framing_errors;     /* refused by strict framing (400/413/414/431/501/505) */
    uint64_t http_timeouts;           /* requests not read within --http-request-timeout-ms */
    uint64_t http_early_unauthorized; /* 401 before the body was read */
    uint64_t http_budget_refused;     /* bodies over --http-body-budget: 503 */
    uint64_t http_body_bytes;         /* gauge: body bytes reserved against the budget */
    uint64_t snapshot_buffer_bytes;   /* gauge: batch buffers of open snapshot streams */
    uint64_t http_guard_refused;      /* foreign Host, cross-site Origin, non-JSON mutation */
    uint64_t tasks_cancelled;
    uint64_t retention_runs;
    uint64_t retention_batches; /* store_purge_step calls (transactions) of the purges */
    uint64_t retention_deleted;
    uint64_t retention_errors;
    /* Hostile-input refusals (issue 25). */
    uint64_t goprofile_refused;   /* goProfileReport files: unknown task, over a budget, queue */
    uint64_t ebpf_refused;        /* collectProfilingData streams: the gRPC memory budget */
    uint64_t ebpf_store_batches;  /* collectProfilingData transactions */
    uint64_t names_refused;       /* API names that are not UTF-8: 400 */
    uint64_t policies_refused;    /* policy writes over --max-policies: 4xx */
    uint64_t endpoints_untracked; /* endpoints past --max-endpoints-per-service: not tracked */
    int64_t start_ms;
};

/* Resident set size of this process in bytes (0 if unknown). */
uint64_t metrics_rss_bytes(void);

/* Renders all counters, the gRPC server's and the store's stats (either may be NULL) in the
 * Prometheus text exposition format. *out (caller frees with skpx_free) holds *out_len bytes.
 * Errors: SKP_ENOMEM, SKP_ETOOBIG (text past METRICS_TEXT_MAX: a bug). */
SKP_MUST_CHECK skp_err metrics_render(const struct metrics *m,
                                      const struct skpx_grpc_server_stats *grpc,
                                      const struct store_stats *store, char **out, size_t *out_len);

#endif
