/* collector_drop.c - services a real agent calls whose data skyprof does not use (logs,
 * meters, JVM and CLR metrics, events, configuration discovery, browser performance). They
 * are accepted and answered with an empty Commands, never UNIMPLEMENTED: the Java agent turns
 * a feature off for good on UNIMPLEMENTED and logs errors for other failures (spec §1.3, §8).
 * Messages are not decoded (raw mode) and only counted. */
#include "common/log.h"
#include "server/collector/collector.h"

static int drop_on_message(struct skpx_grpc_call *call, void *ud, const ProtobufCMessage *msg,
                           const uint8_t *raw, size_t raw_len)
{
    (void)call;
    (void)msg;
    (void)raw;
    (void)raw_len;
    struct collector *c = ud;
    c->metrics->dropped_messages++;
    return SKPX_GRPC_OK;
}

static void drop_on_end(struct skpx_grpc_call *call, void *ud)
{
    (void)ud;
    skpx_grpc_call_finish(call, collector_empty_commands(), SKPX_GRPC_OK, NULL);
}

struct drop_path {
    const char *packaged;
    const char *compat; /* NULL where OAP registers no compat handler */
    bool streaming;
};

static const struct drop_path drops[] = {
    {"/skywalking.v3.LogReportService/collect", NULL, true},
    {"/skywalking.v3.MeterReportService/collect", "/MeterReportService/collect", true},
    {"/skywalking.v3.MeterReportService/collectBatch", "/MeterReportService/collectBatch", true},
    {"/skywalking.v3.JVMMetricReportService/collect", "/JVMMetricReportService/collect", false},
    {"/skywalking.v3.CLRMetricReportService/collect", "/CLRMetricReportService/collect", false},
    {"/skywalking.v3.EventService/collect", NULL, true},
    {"/skywalking.v3.ConfigurationDiscoveryService/fetchConfigurations", NULL, false},
    {"/skywalking.v3.BrowserPerfService/collectPerfData", "/BrowserPerfService/collectPerfData",
     false},
    {"/skywalking.v3.BrowserPerfService/collectErrorLogs", "/BrowserPerfService/collectErrorLogs",
     true},
};

skp_err collector_drop_register(struct collector *c, struct skpx_grpc_server *srv)
{
    for (size_t i = 0; i < sizeof(drops) / sizeof(drops[0]); i++) {
        struct skpx_grpc_method m = {
            .client_streaming = drops[i].streaming,
            .request_desc = NULL,
            .on_start = collector_on_start,
            .on_message = drop_on_message,
            .on_end = drop_on_end,
            .ud = c,
        };
        skp_err err = collector_add(srv, drops[i].packaged, drops[i].compat, m);
        if (err)
            return err;
    }
    return SKP_OK;
}
