/* task_service.h - profile task rules shared by the HTTP API and the gRPC collector:
 * creation with SkyWalking OAP's validation (spec §5.1: same checks, same order, same texts),
 * the one-task-per-service overlap rule, OAP-style task ids, and the ProfileTaskQuery command
 * an agent receives (spec §3.1: nine args as decimal strings, a fresh random UUID
 * SerialNumber per response). Single-threaded (the server loop). */
#ifndef SKP_SERVER_TASK_SERVICE_H
#define SKP_SERVER_TASK_SERVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/Command.pb-c.h"
#include "server/store/store.h"
#include "skyprof/skp_err.h"

/* OAP's ProfileConstants. */
#define TASK_DURATION_MIN_MINUTE 1
#define TASK_DURATION_MAX_MINUTE 15
#define TASK_DUMP_PERIOD_MIN_MS 10
#define TASK_MAX_SAMPLING_COUNT 10
/* Longest endpoint name OAP stores (profile_task.endpoint_name). */
#define TASK_ENDPOINT_MAX 512
/* Latest start time accepted (9999-12-31T23:59:59.999Z), so start + duration never overflows. */
#define TASK_START_MAX_MS INT64_C(253402300799999)
/* Number of args of a ProfileTaskQuery command. */
#define TASK_COMMAND_N_ARGS 9
/* A task id: 20-digit time + '_' + base64 of a service name we accept (<= 1024 bytes) + ".1". */
#define TASK_SERVICE_MAX 1024
#define TASK_ID_MAX (24 + ((TASK_SERVICE_MAX + 2) / 3) * 4 + 4)

/* A creation request as the API received it (borrowed strings; NULL service = missing). */
struct task_request {
    const char *service;
    const char *endpoint; /* trimmed by task_create, as OAP's resolver does */
    int64_t start_time;   /* ms epoch; <= 0 means "now" */
    int64_t duration_min;
    int64_t min_duration_threshold;
    int64_t dump_period;
    int64_t max_sampling_count;
};

/* Why a request was refused: OAP's errorReason text and the request field it concerns
 * (static strings). */
struct task_error {
    const char *reason;
    const char *field;
};

/* Checks the field rules only (no store), in OAP's order; returns true if valid, else fills
 * *e with the first violated rule. Pure. */
bool task_validate(const struct task_request *r, struct task_error *e);

/* OAP's overlap rule against the latest task of the service starting before the new task's
 * end: conflict iff existing.start + existing.duration·60000 >= new_start; for a cancelled
 * task, iff it was cancelled after new_start. Pure. */
bool task_overlaps(const struct store_task *existing, int64_t new_start);

/* Writes "<create_time>_<base64(service)>.1" into out (cap >= TASK_ID_MAX). Returns false
 * if it does not fit. Pure. */
bool task_make_id(int64_t create_time, const char *service, char *out, size_t cap);

/* Validates, applies the overlap rule and stores the task (create time = now_ms, start
 * defaults to now_ms). On success *id_out is the new id (caller frees with skpx_free).
 * Errors: SKP_EINVAL (a rule refused it: *e says why), SKP_EEXIST (overlap: *e says so),
 * SKP_EIO (store failure), SKP_ENOMEM. */
SKP_MUST_CHECK skp_err task_create(struct store *st, const struct task_request *r, int64_t now_ms,
                                   struct task_error *e, char **id_out);

/* "pending" | "running" | "finished" for a task window [start, start+duration) at now_ms. */
const char *task_status(int64_t start_time, int duration_min, int64_t now_ms);

/* A ProfileTaskQuery command with its storage (no allocation). `cmd` is ready to be put in a
 * Commands message; it borrows the task's id and endpoint strings. */
struct task_command {
    Skywalking__V3__Command cmd;
    Skywalking__V3__KeyStringValuePair kv[TASK_COMMAND_N_ARGS];
    Skywalking__V3__KeyStringValuePair *kvp[TASK_COMMAND_N_ARGS];
    char serial[37];
    char nums[7][24];
};
/* Builds the command for `t` (borrowed until the command is sent) with a new random UUID. */
void task_command_build(struct task_command *tc, const struct store_task *t);
/* Writes a random (version 4) UUID string into out (37 bytes with the NUL). */
void task_uuid(char out[37]);

#endif
