/* metrics.c - Prometheus text rendering of skyprofd's counters (see metrics.h). */
#include "server/stats/metrics.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/clock.h"
#include "server/formats/pprof_decode.h"

/* The rendered text is a few KB; this cap only guards against a runaway loop. */
#define METRICS_TEXT_MAX (1u << 20)

static void counter(struct skpx_buf *b, const char *name, const char *help, uint64_t v)
{
    skpx_buf_printf(b, "# HELP %s %s\n# TYPE %s counter\n%s %" PRIu64 "\n", name, help, name, name,
                    v);
}

static void gauge(struct skpx_buf *b, const char *name, const char *help, double v)
{
    skpx_buf_printf(b, "# HELP %s %s\n# TYPE %s gauge\n%s %.17g\n", name, help, name, name, v);
}

uint64_t metrics_rss_bytes(void)
{
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char buf[128];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    unsigned long long size = 0, resident = 0;
    if (sscanf(buf, "%llu %llu", &size, &resident) != 2)
        return 0;
    long page = sysconf(_SC_PAGESIZE);
    return (uint64_t)resident * (uint64_t)(page > 0 ? page : 4096);
}

/* One row per value rendered straight from a struct field (every such field is a uint64_t):
 * the metric's name, its help text, the field's offset and whether it is a gauge. */
struct metric_row {
    const char *name;
    const char *help;
    size_t offset;
    bool gauge;
};

/* The array's size is -1 (a compile error) unless the field is a uint64_t. */
#define U64_FIELD_OFFSET(type, field)                                                              \
    (offsetof(type, field) +                                                                       \
     0 * sizeof(char[sizeof(((type *)0)->field) == sizeof(uint64_t) ? 1 : -1]))
#define ROW(type, field, name, help, is_gauge)                                                     \
    {                                                                                              \
        name, help, U64_FIELD_OFFSET(type, field), is_gauge                                        \
    }

/* struct metrics: skyprofd's own counters. */
#define COUNTER(field, name, help) ROW(struct metrics, field, name, help, false)
#define GAUGE(field, name, help) ROW(struct metrics, field, name, help, true)
static const struct metric_row server_rows[] = {
    COUNTER(snapshots_received, "skyprof_snapshots_received_total",
            "Thread snapshots received from agents."),
    COUNTER(snapshots_stored, "skyprof_snapshots_stored_total",
            "Thread snapshots committed as new rows."),
    COUNTER(snapshots_duplicate, "skyprof_snapshots_duplicate_total",
            "Thread snapshots ignored because the same (task, segment, sequence) was stored."),
    COUNTER(snapshots_rejected, "skyprof_snapshots_rejected_total",
            "Thread snapshots not stored (storage failure or aborted stream)."),
    COUNTER(snapshots_unknown_task, "skyprof_snapshots_unknown_task_total",
            "Thread snapshots stored for a task id the server does not know."),
    COUNTER(snapshot_streams, "skyprof_snapshot_streams_total", "collectSnapshot streams started."),
    COUNTER(snapshot_streams_failed, "skyprof_snapshot_streams_failed_total",
            "collectSnapshot streams that ended without an OK answer."),
    COUNTER(snapshot_batches, "skyprof_snapshot_batches_total",
            "Snapshot batches written to the store."),
    GAUGE(snapshot_buffer_bytes, "skyprof_snapshot_buffer_bytes",
          "Bytes held in the batch buffers of open snapshot streams."),
    COUNTER(segments_received, "skyprof_segments_received_total", "Trace segments received."),
    COUNTER(segments_stored, "skyprof_segments_stored_total",
            "Trace segments written to the store."),
    COUNTER(segments_refused, "skyprof_segments_refused_total",
            "Trace segments refused: more spans than --max-segment-spans, or decoding past "
            "--max-decoded-bytes."),
    COUNTER(goprofile_refused, "skyprof_goprofile_refused_total",
            "goProfileReport files refused: unknown task, over a size, row or memory budget, "
            "or the decode queue full."),
    COUNTER(ebpf_refused, "skyprof_ebpf_refused_total",
            "eBPF collectProfilingData streams refused: the gRPC memory budget reached."),
    COUNTER(ebpf_store_batches, "skyprof_ebpf_store_batches_total",
            "Transactions that stored collectProfilingData stacks (a long stream takes several, "
            "one per loop turn)."),
    COUNTER(names_refused, "skyprof_names_refused_total",
            "API requests refused with 400 because a name was not UTF-8."),
    COUNTER(policies_refused, "skyprof_policies_refused_total",
            "Continuous-profiling policy writes refused: --max-policies reached."),
    COUNTER(endpoints_untracked, "skyprof_endpoints_untracked_total",
            "Endpoint statistics not kept: --max-endpoints-per-service reached."),
    COUNTER(segments_dropped, "skyprof_segments_dropped_total",
            "Trace segments not stored by the keep policy (their statistics are kept)."),
    COUNTER(continuous_triggers, "skyprof_continuous_triggers_total",
            "Continuous-profiling triggers fired by skyprofd's evaluator."),
    GAUGE(cont_evaluator, "skyprof_continuous_evaluator",
          "1 when this collector judges the continuous-profiling policies (alone, or holding the "
          "cluster's evaluator lease), else 0."),
    COUNTER(cont_lease_takeovers, "skyprof_continuous_lease_takeovers_total",
            "Times this collector took the cluster's evaluator lease."),
    COUNTER(cont_shares_written, "skyprof_continuous_shares_written_total",
            "Endpoint statistics' slot shares this collector stored for the cluster."),
    COUNTER(cont_shares_read, "skyprof_continuous_shares_read_total",
            "Slot shares of every collector read to merge the cluster's statistics."),
    COUNTER(cont_claims_lost, "skyprof_continuous_claims_lost_total",
            "Firings not recorded here because another collector had claimed them."),
    COUNTER(cont_cluster_errors, "skyprof_continuous_cluster_errors_total",
            "Store calls of the cluster's evaluator (shares, lease, claims) that failed."),
    COUNTER(segment_errors, "skyprof_segment_errors_total",
            "Trace segment batches the store refused."),
    COUNTER(tasks_created, "skyprof_tasks_created_total", "Profile tasks created."),
    COUNTER(tasks_rejected, "skyprof_tasks_rejected_total",
            "Profile task creations refused by validation."),
    COUNTER(task_queries, "skyprof_task_queries_total", "getProfileTaskCommands calls."),
    COUNTER(task_commands_sent, "skyprof_task_commands_sent_total",
            "ProfileTaskQuery commands sent to agents."),
    COUNTER(task_finish_reports, "skyprof_task_finish_reports_total", "reportTaskFinish calls."),
    COUNTER(heartbeats, "skyprof_heartbeats_total",
            "keepAlive and reportInstanceProperties calls."),
    COUNTER(dropped_messages, "skyprof_dropped_messages_total",
            "Messages of accepted-and-dropped services (logs, meters, JVM, events...)."),
    COUNTER(auth_failures, "skyprof_auth_failures_total",
            "gRPC calls refused with UNAUTHENTICATED."),
    GAUGE(http_conns_open, "skyprof_http_connections_open", "HTTP connections open."),
    COUNTER(http_conns_refused, "skyprof_http_connections_refused_total",
            "HTTP connections refused: connection cap or per-peer cap."),
    COUNTER(http_accept_pauses, "skyprof_http_accept_pauses_total",
            "Times accepting HTTP connections paused for lack of file descriptors."),
    COUNTER(http_framing_errors, "skyprof_http_framing_errors_total",
            "HTTP requests refused by strict framing, then the connection closed."),
    COUNTER(http_timeouts, "skyprof_http_timeouts_total",
            "HTTP requests whose line, headers and body did not arrive in time (408)."),
    COUNTER(http_early_unauthorized, "skyprof_http_early_unauthorized_total",
            "HTTP requests refused for the API token before their body was read (401)."),
    COUNTER(http_budget_refused, "skyprof_http_budget_refused_total",
            "HTTP requests refused: bodies held at once over --http-body-budget (503)."),
    GAUGE(http_body_bytes, "skyprof_http_body_bytes",
          "HTTP body bytes reserved against the budget."),
    COUNTER(http_guard_refused, "skyprof_http_guard_refused_total",
            "HTTP requests refused by the Host/Origin/Content-Type checks (421/403/415)."),
    COUNTER(tasks_cancelled, "skyprof_tasks_cancelled_total",
            "Tasks cancelled through the HTTP API."),
    COUNTER(retention_runs, "skyprof_retention_runs_total", "Retention purges run."),
    COUNTER(retention_batches, "skyprof_retention_batches_total",
            "Batches (short transactions) of the retention purges."),
    COUNTER(retention_deleted, "skyprof_retention_deleted_rows_total",
            "Rows deleted by retention."),
    COUNTER(retention_errors, "skyprof_retention_errors_total", "Retention purges that failed."),
};
#undef COUNTER
#undef GAUGE

/* struct skpx_grpc_server_stats: the gRPC listener's. */
#define COUNTER(field, name, help) ROW(struct skpx_grpc_server_stats, field, name, help, false)
#define GAUGE(field, name, help) ROW(struct skpx_grpc_server_stats, field, name, help, true)
static const struct metric_row grpc_rows[] = {
    COUNTER(connections_accepted, "skyprof_grpc_connections_accepted_total",
            "gRPC connections accepted."),
    GAUGE(connections_open, "skyprof_grpc_connections_open", "gRPC connections open."),
    COUNTER(calls_started, "skyprof_grpc_calls_started_total", "gRPC calls started."),
    COUNTER(calls_failed, "skyprof_grpc_calls_failed_total",
            "gRPC calls ended with a non-OK status."),
    COUNTER(messages_received, "skyprof_grpc_messages_received_total",
            "gRPC request messages received."),
    COUNTER(protocol_errors, "skyprof_grpc_protocol_errors_total",
            "gRPC connections closed for protocol violations."),
    COUNTER(connections_refused, "skyprof_grpc_connections_refused_total",
            "gRPC connections refused: connection cap or per-peer cap."),
    COUNTER(accept_pauses, "skyprof_grpc_accept_pauses_total",
            "Times accepting gRPC connections paused for lack of file descriptors."),
    COUNTER(idle_closed, "skyprof_grpc_idle_closed_total",
            "gRPC connections closed by the idle timeout."),
    COUNTER(streams_idle_cancelled, "skyprof_grpc_streams_idle_cancelled_total",
            "gRPC calls cancelled by the stream idle timeout."),
    COUNTER(budget_refused, "skyprof_grpc_budget_refused_total",
            "gRPC calls or connections refused: memory budget reached."),
    COUNTER(decode_refused, "skyprof_grpc_decode_refused_total",
            "gRPC messages refused: they decode past --max-decoded-bytes."),
    GAUGE(buffered_bytes, "skyprof_grpc_buffered_bytes",
          "Bytes gRPC calls hold, counted against --grpc-memory-budget."),
    GAUGE(buffered_peak, "skyprof_grpc_buffered_bytes_peak",
          "The largest skyprof_grpc_buffered_bytes since the start."),
    COUNTER(turn_yields, "skyprof_grpc_loop_yields_total",
            "gRPC reads put off to the event loop's next turn: the connections had their "
            "share of one turn."),
    GAUGE(nghttp2_bytes, "skyprof_grpc_nghttp2_bytes",
          "Bytes nghttp2 holds for the gRPC connections (part of skyprof_grpc_buffered_bytes)."),
};
#undef COUNTER
#undef GAUGE

/* struct store_stats: the store's. */
#define COUNTER(field, name, help) ROW(struct store_stats, field, name, help, false)
#define GAUGE(field, name, help) ROW(struct store_stats, field, name, help, true)
static const struct metric_row store_rows[] = {
    GAUGE(snapshots, "skyprof_store_snapshots", "Snapshot rows in the store."),
    GAUGE(stacks, "skyprof_store_stacks", "Distinct stacks in the store."),
    GAUGE(frames, "skyprof_store_frames", "Distinct frames in the store."),
    GAUGE(segments, "skyprof_store_segments", "Trace segments in the store."),
    GAUGE(tasks, "skyprof_store_tasks", "Profile tasks in the store."),
    GAUGE(file_bytes, "skyprof_store_file_bytes", "Database plus WAL size in bytes."),
    COUNTER(commits, "skyprof_store_commits_total", "Store transactions committed."),
};
#undef COUNTER
#undef GAUGE

#define N_ROWS(a) (sizeof(a) / sizeof((a)[0]))

static void render_rows(struct skpx_buf *b, const struct metric_row *rows, size_t n,
                        const void *base)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t v;
        memcpy(&v, (const char *)base + rows[i].offset, sizeof(v));
        if (rows[i].gauge)
            gauge(b, rows[i].name, rows[i].help, (double)v);
        else
            counter(b, rows[i].name, rows[i].help, v);
    }
}

skp_err metrics_render(const struct metrics *m, const struct skpx_grpc_server_stats *grpc,
                       const struct store_stats *store, char **out, size_t *out_len)
{
    struct skpx_buf b;
    skpx_buf_init(&b, METRICS_TEXT_MAX);
    *out = NULL;
    *out_len = 0;
    render_rows(&b, server_rows, N_ROWS(server_rows), m);
    counter(&b, "skyprof_pprof_decode_refused_total",
            "pprof decodes refused for a limit (decompressed size, decoder memory, samples).",
            pprof_decode_refusals());
    skpx_buf_printf(&b, "# HELP skyprof_http_requests_total HTTP API requests by status class.\n"
                        "# TYPE skyprof_http_requests_total counter\n");
    static const char *cls[] = {"other", "1xx", "2xx", "3xx", "4xx", "5xx"};
    for (int i = 0; i < 6; i++)
        skpx_buf_printf(&b, "skyprof_http_requests_total{code=\"%s\"} %" PRIu64 "\n", cls[i],
                        m->http_requests[i]);
    if (grpc)
        render_rows(&b, grpc_rows, N_ROWS(grpc_rows), grpc);
    if (store) {
        render_rows(&b, store_rows, N_ROWS(store_rows), store);
        gauge(&b, "skyprof_store_commit_seconds_total", "Time spent committing, in seconds.",
              (double)store->commit_ns_total / 1e9);
        gauge(&b, "skyprof_store_commit_seconds_avg", "Mean commit latency in seconds.",
              store->commits ? (double)store->commit_ns_total / 1e9 / (double)store->commits : 0.0);
    }
    gauge(&b, "skyprof_process_resident_memory_bytes", "Resident set size of skyprofd.",
          (double)metrics_rss_bytes());
    gauge(&b, "skyprof_process_uptime_seconds", "Seconds since skyprofd started.",
          m->start_ms ? (double)(skpx_now_ms() - m->start_ms) / 1000.0 : 0.0);
    uint8_t *text = NULL;
    skp_err err = skpx_buf_take(&b, &text, out_len);
    *out = (char *)text;
    return err;
}
