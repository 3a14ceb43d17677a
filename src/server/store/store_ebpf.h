/* store_ebpf.h - storage of what SkyWalking's eBPF services bring (schema step "eBPF processes
 * and profile stacks"): processes registered through EBPFProcessService (reportProcesses,
 * keepAlive) and the stacks of triggered ("continuous") profiling tasks uploaded through
 * EBPFProfilingService.collectProfilingData. Plain C rows in and out (no JSON, no protobuf
 * types); the task a stack belongs to is named by its id only (the continuous-profiling
 * tables own the tasks). Implemented in store_ebpf.c; store_purge_before deletes stacks
 * received and processes last seen before its cutoff.
 *
 * Threading: like every store function, on the thread that owns `st`. */
#ifndef SKP_SERVER_STORE_EBPF_H
#define SKP_SERVER_STORE_EBPF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/store/store.h"
#include "skyprof/skp_err.h"

/* Stack kinds (EBPFProfilingData's profiling oneof). */
enum store_ebpf_kind {
    STORE_EBPF_ON_CPU = 0,
    STORE_EBPF_OFF_CPU = 1,
};

/* One registered process; strings borrowed (in: from the caller; out: from the row, valid during
 * the callback). labels: one per line; properties: "key\tvalue" lines. */
struct store_ebpf_process {
    const char *id; /* sha256 hex, see collector_ebpf.c */
    const char *service;
    const char *instance;
    const char *process_name;
    const char *layer;
    int32_t pid;
    const char *labels;
    const char *properties;
    const char *agent_id;
    int64_t first_ms;     /* out only: first report */
    int64_t last_ping_ms; /* out only: last report or keepAlive */
};

/* One uploaded stack with its weight since the previous upload; strings borrowed. symbols: the
 * frames one per line, the innermost first (the wire's order). */
struct store_ebpf_stack {
    const char *task_id;
    const char *process_id;
    enum store_ebpf_kind kind;
    int64_t time_ms; /* the upload's currentTime */
    const char *symbols;
    int64_t count;       /* ON_CPU dumpCount, OFF_CPU switchCount */
    int64_t duration_ns; /* OFF_CPU duration, 0 for ON_CPU */
};

typedef skp_err (*store_ebpf_process_cb)(void *ud, const struct store_ebpf_process *p);
typedef skp_err (*store_ebpf_stack_cb)(void *ud, const struct store_ebpf_stack *s);

/* Inserts or replaces the process `p` (id key), keeping its first report time; last ping =
 * now_ms. Errors: SKP_EINVAL (no id), SKP_EIO, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err store_ebpf_upsert_process(struct store *st,
                                                 const struct store_ebpf_process *p,
                                                 int64_t now_ms);
/* Sets the last ping of process `id`; *found says whether it exists.
 * Errors: SKP_EIO, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err store_ebpf_touch_process(struct store *st, const char *id, int64_t now_ms,
                                                bool *found);
/* Processes of `service` (NULL = all) by service, instance, name; cb's error stops the listing
 * and is returned. Errors: SKP_EINVAL, SKP_EIO, SKP_ENOMEM, cb's. */
SKP_MUST_CHECK skp_err store_ebpf_list_processes(struct store *st, const char *service,
                                                 store_ebpf_process_cb cb, void *ud);
/* Inserts n stacks in one transaction, received at now_ms. Errors: SKP_EIO, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err store_ebpf_insert_stacks(struct store *st, const struct store_ebpf_stack *v,
                                                size_t n, int64_t now_ms);
/* The stacks of task `task_id` (and of `process_id` unless NULL) with time in [from_ms, to_ms],
 * summed per (process, kind, symbols): cb gets each sum once (time_ms = the latest upload).
 * Errors: SKP_EINVAL, SKP_EIO, SKP_ENOMEM, cb's. */
SKP_MUST_CHECK skp_err store_ebpf_scan_task(struct store *st, const char *task_id,
                                            const char *process_id, int64_t from_ms, int64_t to_ms,
                                            store_ebpf_stack_cb cb, void *ud);
#endif
