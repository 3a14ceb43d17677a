/* metrics.c - Prometheus text rendering of skyprofd's counters (see metrics.h). */
#include "server/stats/metrics.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
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

skp_err metrics_render(const struct metrics *m, const struct skpx_grpc_server_stats *grpc,
                       const struct store_stats *store, char **out, size_t *out_len)
{
    struct skpx_buf b;
    skpx_buf_init(&b, METRICS_TEXT_MAX);
    *out = NULL;
    *out_len = 0;
    counter(&b, "skyprof_snapshots_received_total", "Thread snapshots received from agents.",
            m->snapshots_received);
    counter(&b, "skyprof_snapshots_stored_total", "Thread snapshots committed as new rows.",
            m->snapshots_stored);
    counter(&b, "skyprof_snapshots_duplicate_total",
            "Thread snapshots ignored because the same (task, segment, sequence) was stored.",
            m->snapshots_duplicate);
    counter(&b, "skyprof_snapshots_rejected_total",
            "Thread snapshots not stored (storage failure or aborted stream).",
            m->snapshots_rejected);
    counter(&b, "skyprof_snapshots_unknown_task_total",
            "Thread snapshots stored for a task id the server does not know.",
            m->snapshots_unknown_task);
    counter(&b, "skyprof_snapshot_streams_total", "collectSnapshot streams started.",
            m->snapshot_streams);
    counter(&b, "skyprof_snapshot_streams_failed_total",
            "collectSnapshot streams that ended without an OK answer.", m->snapshot_streams_failed);
    counter(&b, "skyprof_snapshot_batches_total", "Snapshot batches written to the store.",
            m->snapshot_batches);
    gauge(&b, "skyprof_snapshot_buffer_bytes",
          "Bytes held in the batch buffers of open snapshot streams.",
          (double)m->snapshot_buffer_bytes);
    counter(&b, "skyprof_segments_received_total", "Trace segments received.",
            m->segments_received);
    counter(&b, "skyprof_segments_stored_total", "Trace segments written to the store.",
            m->segments_stored);
    counter(&b, "skyprof_segments_refused_total",
            "Trace segments refused: more spans than --max-segment-spans, or decoding past "
            "--max-decoded-bytes.",
            m->segments_refused);
    counter(&b, "skyprof_goprofile_refused_total",
            "goProfileReport files refused: unknown task, over a size, row or memory budget, "
            "or the decode queue full.",
            m->goprofile_refused);
    counter(&b, "skyprof_ebpf_refused_total",
            "eBPF collectProfilingData streams refused: the gRPC memory budget reached.",
            m->ebpf_refused);
    counter(&b, "skyprof_ebpf_store_batches_total",
            "Transactions that stored collectProfilingData stacks (a long stream takes several, "
            "one per loop turn).",
            m->ebpf_store_batches);
    counter(&b, "skyprof_pprof_decode_refused_total",
            "pprof decodes refused for a limit (decompressed size, decoder memory, samples).",
            pprof_decode_refusals());
    counter(&b, "skyprof_names_refused_total",
            "API requests refused with 400 because a name was not UTF-8.", m->names_refused);
    counter(&b, "skyprof_policies_refused_total",
            "Continuous-profiling policy writes refused: --max-policies reached.",
            m->policies_refused);
    counter(&b, "skyprof_endpoints_untracked_total",
            "Endpoint statistics not kept: --max-endpoints-per-service reached.",
            m->endpoints_untracked);
    counter(&b, "skyprof_segments_dropped_total",
            "Trace segments not stored by the keep policy (their statistics are kept).",
            m->segments_dropped);
    counter(&b, "skyprof_continuous_triggers_total",
            "Continuous-profiling triggers fired by skyprofd's evaluator.", m->continuous_triggers);
    gauge(&b, "skyprof_continuous_evaluator",
          "1 when this collector judges the continuous-profiling policies (alone, or holding the "
          "cluster's evaluator lease), else 0.",
          (double)m->cont_evaluator);
    counter(&b, "skyprof_continuous_lease_takeovers_total",
            "Times this collector took the cluster's evaluator lease.", m->cont_lease_takeovers);
    counter(&b, "skyprof_continuous_shares_written_total",
            "Endpoint statistics' slot shares this collector stored for the cluster.",
            m->cont_shares_written);
    counter(&b, "skyprof_continuous_shares_read_total",
            "Slot shares of every collector read to merge the cluster's statistics.",
            m->cont_shares_read);
    counter(&b, "skyprof_continuous_claims_lost_total",
            "Firings not recorded here because another collector had claimed them.",
            m->cont_claims_lost);
    counter(&b, "skyprof_continuous_cluster_errors_total",
            "Store calls of the cluster's evaluator (shares, lease, claims) that failed.",
            m->cont_cluster_errors);
    counter(&b, "skyprof_segment_errors_total", "Trace segment batches the store refused.",
            m->segment_errors);
    counter(&b, "skyprof_tasks_created_total", "Profile tasks created.", m->tasks_created);
    counter(&b, "skyprof_tasks_rejected_total", "Profile task creations refused by validation.",
            m->tasks_rejected);
    counter(&b, "skyprof_task_queries_total", "getProfileTaskCommands calls.", m->task_queries);
    counter(&b, "skyprof_task_commands_sent_total", "ProfileTaskQuery commands sent to agents.",
            m->task_commands_sent);
    counter(&b, "skyprof_task_finish_reports_total", "reportTaskFinish calls.",
            m->task_finish_reports);
    counter(&b, "skyprof_heartbeats_total", "keepAlive and reportInstanceProperties calls.",
            m->heartbeats);
    counter(&b, "skyprof_dropped_messages_total",
            "Messages of accepted-and-dropped services (logs, meters, JVM, events...).",
            m->dropped_messages);
    counter(&b, "skyprof_auth_failures_total", "gRPC calls refused with UNAUTHENTICATED.",
            m->auth_failures);
    gauge(&b, "skyprof_http_connections_open", "HTTP connections open.",
          (double)m->http_conns_open);
    counter(&b, "skyprof_http_connections_refused_total",
            "HTTP connections refused: connection cap or per-peer cap.", m->http_conns_refused);
    counter(&b, "skyprof_http_accept_pauses_total",
            "Times accepting HTTP connections paused for lack of file descriptors.",
            m->http_accept_pauses);
    counter(&b, "skyprof_http_framing_errors_total",
            "HTTP requests refused by strict framing, then the connection closed.",
            m->http_framing_errors);
    counter(&b, "skyprof_http_timeouts_total",
            "HTTP requests whose line, headers and body did not arrive in time (408).",
            m->http_timeouts);
    counter(&b, "skyprof_http_early_unauthorized_total",
            "HTTP requests refused for the API token before their body was read (401).",
            m->http_early_unauthorized);
    counter(&b, "skyprof_http_budget_refused_total",
            "HTTP requests refused: bodies held at once over --http-body-budget (503).",
            m->http_budget_refused);
    gauge(&b, "skyprof_http_body_bytes", "HTTP body bytes reserved against the budget.",
          (double)m->http_body_bytes);
    skpx_buf_printf(&b, "# HELP skyprof_http_requests_total HTTP API requests by status class.\n"
                        "# TYPE skyprof_http_requests_total counter\n");
    static const char *cls[] = {"other", "1xx", "2xx", "3xx", "4xx", "5xx"};
    for (int i = 0; i < 6; i++)
        skpx_buf_printf(&b, "skyprof_http_requests_total{code=\"%s\"} %" PRIu64 "\n", cls[i],
                        m->http_requests[i]);
    counter(&b, "skyprof_http_guard_refused_total",
            "HTTP requests refused by the Host/Origin/Content-Type checks (421/403/415).",
            m->http_guard_refused);
    counter(&b, "skyprof_tasks_cancelled_total", "Tasks cancelled through the HTTP API.",
            m->tasks_cancelled);
    counter(&b, "skyprof_retention_runs_total", "Retention purges run.", m->retention_runs);
    counter(&b, "skyprof_retention_batches_total",
            "Batches (short transactions) of the retention purges.", m->retention_batches);
    counter(&b, "skyprof_retention_deleted_rows_total", "Rows deleted by retention.",
            m->retention_deleted);
    counter(&b, "skyprof_retention_errors_total", "Retention purges that failed.",
            m->retention_errors);
    if (grpc) {
        counter(&b, "skyprof_grpc_connections_accepted_total", "gRPC connections accepted.",
                grpc->connections_accepted);
        gauge(&b, "skyprof_grpc_connections_open", "gRPC connections open.",
              (double)grpc->connections_open);
        counter(&b, "skyprof_grpc_calls_started_total", "gRPC calls started.", grpc->calls_started);
        counter(&b, "skyprof_grpc_calls_failed_total", "gRPC calls ended with a non-OK status.",
                grpc->calls_failed);
        counter(&b, "skyprof_grpc_messages_received_total", "gRPC request messages received.",
                grpc->messages_received);
        counter(&b, "skyprof_grpc_protocol_errors_total",
                "gRPC connections closed for protocol violations.", grpc->protocol_errors);
        counter(&b, "skyprof_grpc_connections_refused_total",
                "gRPC connections refused: connection cap or per-peer cap.",
                grpc->connections_refused);
        counter(&b, "skyprof_grpc_accept_pauses_total",
                "Times accepting gRPC connections paused for lack of file descriptors.",
                grpc->accept_pauses);
        counter(&b, "skyprof_grpc_idle_closed_total",
                "gRPC connections closed by the idle timeout.", grpc->idle_closed);
        counter(&b, "skyprof_grpc_streams_idle_cancelled_total",
                "gRPC calls cancelled by the stream idle timeout.", grpc->streams_idle_cancelled);
        counter(&b, "skyprof_grpc_budget_refused_total",
                "gRPC calls or connections refused: memory budget reached.", grpc->budget_refused);
        counter(&b, "skyprof_grpc_decode_refused_total",
                "gRPC messages refused: they decode past --max-decoded-bytes.",
                grpc->decode_refused);
        gauge(&b, "skyprof_grpc_buffered_bytes",
              "Bytes gRPC calls hold, counted against --grpc-memory-budget.",
              (double)grpc->buffered_bytes);
        gauge(&b, "skyprof_grpc_buffered_bytes_peak",
              "The largest skyprof_grpc_buffered_bytes since the start.",
              (double)grpc->buffered_peak);
        counter(&b, "skyprof_grpc_loop_yields_total",
                "gRPC reads put off to the event loop's next turn: the connections had their "
                "share of one turn.",
                grpc->turn_yields);
        gauge(&b, "skyprof_grpc_nghttp2_bytes",
              "Bytes nghttp2 holds for the gRPC connections (part of skyprof_grpc_buffered_bytes).",
              (double)grpc->nghttp2_bytes);
    }
    if (store) {
        gauge(&b, "skyprof_store_snapshots", "Snapshot rows in the store.",
              (double)store->snapshots);
        gauge(&b, "skyprof_store_stacks", "Distinct stacks in the store.", (double)store->stacks);
        gauge(&b, "skyprof_store_frames", "Distinct frames in the store.", (double)store->frames);
        gauge(&b, "skyprof_store_segments", "Trace segments in the store.",
              (double)store->segments);
        gauge(&b, "skyprof_store_tasks", "Profile tasks in the store.", (double)store->tasks);
        gauge(&b, "skyprof_store_file_bytes", "Database plus WAL size in bytes.",
              (double)store->file_bytes);
        counter(&b, "skyprof_store_commits_total", "Store transactions committed.", store->commits);
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
