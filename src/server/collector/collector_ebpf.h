/* collector_ebpf.h - SkyWalking's v3 EBPFProcessService and EBPFProfilingService in skyprofd
 * (collector_ebpf.c): process registration with OAP's process ids, and the profile stacks of
 * threshold-triggered tasks, stored through store_ebpf.h. Event loop only. */
#ifndef SKP_SERVER_COLLECTOR_EBPF_H
#define SKP_SERVER_COLLECTOR_EBPF_H

#include <stdbool.h>

#include "server/collector/collector.h"

/* A process id: sha256 in hex and a NUL. */
#define COLLECTOR_EBPF_ID_HEX 65
/* Longest service, instance, process name or task id accepted (bytes). */
#define COLLECTOR_EBPF_NAME_MAX 1024
/* Longest symbol kept (longer ones are cut), symbols per stack. */
#define COLLECTOR_EBPF_SYMBOL_MAX 1024
#define COLLECTOR_EBPF_FRAMES_MAX 4096
/* Stacks and copied bytes one collectProfilingData stream may carry. */
#define COLLECTOR_EBPF_STACKS_MAX 200000
#define COLLECTOR_EBPF_STREAM_BYTES (64u << 20)

/* Registers reportProcesses, keepAlive, queryTasks and collectProfilingData under the packaged
 * and compat paths. Errors: SKP_EEXIST, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err collector_ebpf_register(struct collector *c, struct skpx_grpc_server *srv);
/* A stream's stacks are stored this many rows per transaction, one transaction per turn of the
 * event loop (a 200,000-row stream stored at once held the loop for 0.9 s). */
#define COLLECTOR_EBPF_STORE_BATCH 250
/* OAP's process id: sha256 hex of processName + "_" + base64(service) + ".1_" + base64(instance).
 * Returns false when a name is longer than COLLECTOR_EBPF_NAME_MAX. Pure. */
bool collector_ebpf_process_id(const char *service, const char *instance, const char *process,
                               char out[COLLECTOR_EBPF_ID_HEX]);

#endif
