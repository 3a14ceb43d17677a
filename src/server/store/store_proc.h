/* store_proc.h - storage of process-profiling tasks (pprof and async-profiler tasks, see
 * proc_task.h): the tasks, the instances each one asks for, per-instance logs, and the files the
 * agents uploaded (kept as BLOBs, so they survive restarts; store_purge_before deletes tasks
 * created before its cutoff with their instances, logs and files).
 * Plain C rows in and out (no JSON, no protobuf types). Implemented in store_sqlite_proc.c.
 *
 * Threading: like every store function, on the thread that owns `st` (the loop's write
 * connection, or a worker's read-only one for the read functions). */
#ifndef SKP_SERVER_STORE_PROC_H
#define SKP_SERVER_STORE_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/store/store.h"
#include "skyprof/skp_err.h"

/* What kind of agent task it is; stored as the text names below. */
enum proc_kind {
    PROC_KIND_PPROF = 0,          /* skywalking.v10.PprofTask (pprof files) */
    PROC_KIND_ASYNC_PROFILER = 1, /* skywalking.v10.AsyncProfilerTask (JFR files) */
};

/* One task row. All strings owned by the row (store_proc_task_cleanup frees them). */
struct proc_task {
    char *id;
    enum proc_kind kind;
    char *service;
    char **instances; /* instance names the task was created for */
    size_t n_instances;
    bool all_live;       /* the request named none: `instances` are the live ones then */
    char *events;        /* pprof: one event; async-profiler: comma-joined events */
    int64_t duration_s;  /* sampling time (pprof: minutes x 60) */
    int64_t dump_period; /* pprof DumpPeriod (block: ns rate, mutex: fraction), else 0 */
    /* our extension: samples per second asked of the agent, 0 = its default */
    int64_t sampling_hz;
    char *exec_args;      /* async-profiler execArgs, NULL if none */
    int64_t create_time;  /* ms epoch */
    int64_t cancelled_ms; /* when it was cancelled (no longer handed out); 0 = never */
};

/* One log row (NOTIFIED, EXECUTION_FINISHED, ..._UPLOAD_FILE_TOO_LARGE_ERROR,
 * EXECUTION_TASK_ERROR, UPLOAD_INCOMPLETE). */
struct proc_log {
    char *instance;
    char *op;
    int64_t time_ms;
    char *message; /* NULL when the operation carries none */
};

/* One stored file (metadata; the bytes come from store_proc_get_file). */
struct proc_file {
    int64_t id;
    char *instance;
    int64_t time_ms;
    int64_t size_bytes;
};

void store_proc_task_cleanup(struct proc_task *t);
/* Frees an array of n rows as returned by the list functions (NULL ok). */
void store_proc_tasks_free(struct proc_task *v, size_t n);
void store_proc_logs_free(struct proc_log *v, size_t n);
void store_proc_files_free(struct proc_file *v, size_t n);

/* Inserts a task and its instance rows in one transaction (t borrowed).
 * Errors: SKP_EEXIST (id taken), SKP_EIO, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err store_proc_insert_task(struct store *st, const struct proc_task *t);
/* Reads one task into *out (caller cleans up with store_proc_task_cleanup).
 * Errors: SKP_ENOTFOUND, SKP_EIO, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err store_proc_get_task(struct store *st, const char *id, struct proc_task *out);
/* Tasks of `kind` (and of `service` unless NULL), newest first, at most `limit` (0 = 1000).
 * *out (n rows) freed with store_proc_tasks_free. Errors: SKP_EIO, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err store_proc_list_tasks(struct store *st, enum proc_kind kind,
                                             const char *service, size_t limit,
                                             struct proc_task **out, size_t *n);
/* The task of `kind`, `service` and `events` with the greatest create time (OAP's overlap
 * probe). Errors: SKP_ENOTFOUND, SKP_EIO, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err store_proc_latest_task(struct store *st, enum proc_kind kind,
                                              const char *service, const char *events,
                                              struct proc_task *out);
/* The earliest task of `kind` for `service` created after `after_ms`, not cancelled, that lists
 * `instance` and whose window (create time + duration + grace_ms) has not ended at now_ms.
 * Errors: SKP_ENOTFOUND (none), SKP_EIO, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err store_proc_next_task(struct store *st, enum proc_kind kind,
                                            const char *service, const char *instance,
                                            int64_t after_ms, int64_t now_ms, int64_t grace_ms,
                                            struct proc_task *out);
/* Instance names of `service` seen (heartbeat or report) at or after since_ms, by name.
 * *out is an array of n strings; free with store_proc_names_free. Errors: SKP_EIO, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err store_proc_live_instances(struct store *st, const char *service,
                                                 int64_t since_ms, char ***out, size_t *n);
void store_proc_names_free(char **v, size_t n);

/* Cancels a task at now_ms: agents are no longer handed it. Errors: SKP_ENOTFOUND, SKP_ESTATE
 * (already cancelled, or past create + duration + grace_ms: nothing to cancel), SKP_EIO. */
SKP_MUST_CHECK skp_err store_proc_cancel_task(struct store *st, const char *id, int64_t now_ms,
                                              int64_t grace_ms);
/* Appends a log row (message may be NULL); a second NOTIFIED of the same task and instance is
 * ignored (SKP_OK: the first time is kept). Errors: SKP_EIO, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err store_proc_add_log(struct store *st, const char *task_id,
                                          const char *instance, const char *op, int64_t time_ms,
                                          const char *message);
/* Logs of a task in time order. Errors: SKP_EIO, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err store_proc_list_logs(struct store *st, const char *task_id,
                                            struct proc_log **out, size_t *n);

/* An uploaded file is stored in pieces of at most STORE_PROC_FILE_PIECE bytes, each in its own
 * transaction, so that no statement carries a whole file (30 MiB in one statement held the
 * event loop 0.1-0.4 s and passed --db-stall-ms on PostgreSQL). store_proc_file_begin inserts
 * the file's row (*id_out), hidden from listings and reads until store_proc_file_finish shows
 * it and logs `op` (may be NULL; e.g. EXECUTION_FINISHED) for the instance in one transaction;
 * store_proc_file_append stores piece `seq` (0, 1, ...; data borrowed);
 * store_proc_file_abort deletes the row and its pieces. Errors: SKP_EIO, SKP_ENOMEM. */
#define STORE_PROC_FILE_PIECE ((size_t)256 << 10)
SKP_MUST_CHECK skp_err store_proc_file_begin(struct store *st, const char *task_id,
                                             const char *instance, int64_t time_ms, size_t size,
                                             int64_t *id_out);
SKP_MUST_CHECK skp_err store_proc_file_append(struct store *st, int64_t id, int seq,
                                              const uint8_t *data, size_t len);
SKP_MUST_CHECK skp_err store_proc_file_finish(struct store *st, const char *task_id,
                                              const char *instance, int64_t id, int64_t time_ms,
                                              const char *op);
SKP_MUST_CHECK skp_err store_proc_file_abort(struct store *st, int64_t id);
/* The four steps above at once, for a caller that may hold its thread (data borrowed; *id_out
 * may be NULL). Errors: as above; nothing is left of a file that failed. */
SKP_MUST_CHECK skp_err store_proc_insert_file(struct store *st, const char *task_id,
                                              const char *instance, int64_t time_ms,
                                              const uint8_t *data, size_t len, const char *op,
                                              int64_t *id_out);
/* Files of a task by id. Errors: SKP_EIO, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err store_proc_list_files(struct store *st, const char *task_id,
                                             struct proc_file **out, size_t *n);
/* The bytes of file `id` of task `task_id` (*data freed with skpx_free) and its instance
 * (*instance_out, may be NULL; skpx_free). Errors: SKP_ENOTFOUND, SKP_EIO, SKP_ENOMEM. */
SKP_MUST_CHECK skp_err store_proc_get_file(struct store *st, const char *task_id, int64_t id,
                                           uint8_t **data, size_t *len, char **instance_out);

#endif
