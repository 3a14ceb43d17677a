/* store.h - skyprofd's storage interface. Callers (collectors, task service, HTTP API,
 * analyzer, retention) see only these functions. store.c forwards each one to the store's
 * backend through an ops table (store_backend.h says how a backend registers); store_open picks
 * the backend from its argument: a postgresql:// or postgres:// URL opens the PostgreSQL backend
 * (store_pg*.c), anything else is an SQLite file path. The SQLite
 * backend (store_sqlite*.c) uses WAL + synchronous=NORMAL, one transaction per batch, versioned
 * schema migrations, and de-duplicated stacks: every distinct frame string and every distinct
 * stack (sequence of frame ids) is stored once, and a snapshot row refers to its stack.
 *
 * The interface speaks plain C: row structs in, row structs out through callbacks. It knows no
 * wire format (protobuf is decoded by the collectors) and no JSON (the HTTP layer builds it), so
 * a second backend implements storage only. Strings in rows handed to a callback are borrowed:
 * valid during the call only, NUL-terminated, possibly not valid UTF-8 (they are agent bytes;
 * whoever emits JSON sanitizes them). A callback returning non-OK stops the listing and that
 * error is returned.
 *
 * Adding a feature's tables (read this before you add one):
 *   1. declare the feature's functions in its own section here (or in a header of its own that
 *      includes this one), taking and returning plain row structs / callbacks as below: no
 *      json_t, no protobuf-c types, no sqlite3 types;
 *   2. implement them in their own file, store_sqlite_<feature>.c (store_int.h gives the
 *      connection, transactions, prepared statements and the row loop), add one member per
 *      function to struct store_backend_ops (store_backend.h, feature group), its forwarding
 *      function to store.c, and the PostgreSQL side in store_pg_<feature>.c (or leave the
 *      member NULL there: the function then answers SKP_ENOTSUP on PostgreSQL);
 *   3. add ONE migration step at the end of k_migrations in store_schema.c (never edit a
 *      released step); if a rebase shows your number taken, renumber yours after it;
 *   4. extend store_purge_before (store_sqlite_retention.c) if the rows age out, and add the
 *      cases to the conformance suite (tests/unit/server/test_store_conformance.c).
 *
 * Threading: a store object is used from one thread at a time (the server's event loop, or a
 * worker with its own store object). */
#ifndef SKP_SERVER_STORE_H
#define SKP_SERVER_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "skyprof/skp_err.h"

struct store;

struct store_opts {
    bool read_only;         /* open read-only (fails writes with SKP_EIO) */
    int schema_version_max; /* tests only: stop migrating at this version (0 = latest) */
};

/* Opens `path` (an SQLite file, created but not its folder; or a postgresql:// URL, see
 * docs/server.md) and migrates the schema.
 * On success *out owns the store; release with store_close(). *out is NULL on failure.
 * Errors: SKP_EIO (cannot open / migrate; detail logged), SKP_ENOMEM. */
SKP_MUST_CHECK skp_err store_open(const char *path, const struct store_opts *opts,
                                  struct store **out);
/* Whether store_open takes `target` as an SQLite file path (else a postgresql:// or
 * postgres:// URL of a database server). Pure; NULL is a path. */
bool store_target_is_file(const char *target);
/* `target` fit for a log line: a URL's password replaced by "***". Pure; out is always
 * NUL-terminated (cap >= 1), truncated when short. */
void store_target_shown(const char *target, char *out, size_t cap);
/* Checkpoints and closes. NULL ok. */
void store_close(struct store *st);
/* Schema version this build writes (for tests and /metrics). */
int store_schema_version(void);

/* ---- services and instances ---- */

struct store_kv {
    const char *key;
    const char *value;
};

/* Registers/updates an instance (and its service) with properties (replacing older ones) and
 * last-seen time. `language` is taken from the "language" property when present. */
SKP_MUST_CHECK skp_err store_upsert_instance(struct store *st, const char *service,
                                             const char *instance, const char *layer,
                                             const struct store_kv *props, size_t n_props,
                                             int64_t now_ms);
/* Updates last-seen (creating service/instance rows if unknown). */
SKP_MUST_CHECK skp_err store_touch_instance(struct store *st, const char *service,
                                            const char *instance, int64_t now_ms);
struct store_service_row {
    const char *name;
    const char *layer; /* NULL when no agent named one */
    int64_t last_seen_ms;
    int64_t n_instances;
};
typedef skp_err (*store_service_cb)(void *ud, const struct store_service_row *r);
/* Visits every service, ordered by name. */
SKP_MUST_CHECK skp_err store_list_services(struct store *st, store_service_cb cb, void *ud);

struct store_instance_row {
    const char *name;
    const char *language; /* NULL when unknown */
    int64_t last_heartbeat_ms;
    const struct store_kv *props; /* in the order the agent reported them, keys unique */
    size_t n_props;
};
typedef skp_err (*store_instance_cb)(void *ud, const struct store_instance_row *r);
/* Visits the instances of `service` ordered by name; SKP_ENOTFOUND (cb never runs) if the
 * service is unknown. */
SKP_MUST_CHECK skp_err store_list_instances(struct store *st, const char *service,
                                            store_instance_cb cb, void *ud);

/* ---- tasks ---- */

struct store_task {
    char *id; /* "<createTime>_<base64(service)>.1" as OAP builds task ids */
    char *service;
    char *endpoint;
    int64_t start_time;         /* ms epoch */
    int duration_min;           /* 1..15 */
    int min_duration_threshold; /* ms */
    int dump_period;            /* ms */
    int max_sampling_count;     /* 1..9 */
    int64_t create_time;        /* ms epoch */
    int64_t cancelled_ms;       /* when it was cancelled (its window ends there); 0 = never */
};
/* Frees the strings of *t (not t itself). NULL ok. */
void store_task_cleanup(struct store_task *t);

SKP_MUST_CHECK skp_err store_insert_task(struct store *st, const struct store_task *t);
/* SKP_ENOTFOUND if no such task. On success the caller cleans *out up. */
SKP_MUST_CHECK skp_err store_get_task(struct store *st, const char *id, struct store_task *out);
/* The task of `service` with the greatest start_time <= `start_before` (OAP's overlap probe);
 * SKP_ENOTFOUND if none. */
SKP_MUST_CHECK skp_err store_latest_task_before(struct store *st, const char *service,
                                                int64_t start_before, struct store_task *out);
/* Cancels a task at `now_ms`: its window ends there, agents are no longer handed it.
 * Errors: SKP_ENOTFOUND (no such task), SKP_ESTATE (already cancelled or its window already
 * ended: nothing to cancel), SKP_EIO. */
SKP_MUST_CHECK skp_err store_cancel_task(struct store *st, const char *id, int64_t now_ms);
/* Tasks of `service` whose create_time > after_create_time, not cancelled, and whose window has
 * not ended at `now_ms` (start + duration > now), ordered by create_time. Caller frees each with
 * store_task_cleanup and the array with skpx_free. */
SKP_MUST_CHECK skp_err store_tasks_for_agent(struct store *st, const char *service,
                                             int64_t after_create_time, int64_t now_ms,
                                             struct store_task **out, size_t *n_out);
typedef skp_err (*store_task_cb)(void *ud, const struct store_task *t);
/* Visits tasks ordered by start_time desc, then create_time desc, then id desc; NULL filters
 * match all.
 * *t is borrowed for the call. */
SKP_MUST_CHECK skp_err store_list_tasks(struct store *st, const char *service, const char *endpoint,
                                        store_task_cb cb, void *ud);

/* Makes a caller's check-then-insert of tasks of `service` atomic against every other writer
 * of the database (other store objects, other collectors on a shared database): between
 * store_tasks_lock and store_tasks_unlock, no other store object's store_tasks_lock of the same
 * service returns, so the overlap probe (store_latest_task_before) and store_insert_task see and
 * make one consistent state. In between, only this object's task reads and inserts may run
 * (store_latest_task_before, store_get_task, store_insert_task and the store_proc_ task reads
 * and inserts); unlock commits them (commit true) or rolls them back.
 * Errors: SKP_ESTATE (already locked / not locked), SKP_EIO. */
SKP_MUST_CHECK skp_err store_tasks_lock(struct store *st, const char *service);
SKP_MUST_CHECK skp_err store_tasks_unlock(struct store *st, bool commit);

enum store_task_op {
    STORE_TASK_NOTIFIED = 1,
    STORE_TASK_EXECUTION_FINISHED = 2,
};
/* Adds a log row; a second row of the same (task, instance, op) is ignored (SKP_OK): the first
 * time is kept, so agents polling again and again do not grow the table. */
SKP_MUST_CHECK skp_err store_add_task_log(struct store *st, const char *task_id,
                                          const char *service, const char *instance,
                                          enum store_task_op op, int64_t time_ms);
struct store_task_log {
    const char *task_id;
    const char *instance;
    enum store_task_op op;
    int64_t time_ms;
};
typedef skp_err (*store_task_log_cb)(void *ud, const struct store_task_log *l);
/* Visits the logs of a task ordered by (time, op, instance). */
SKP_MUST_CHECK skp_err store_list_task_logs(struct store *st, const char *task_id,
                                            store_task_log_cb cb, void *ud);

/* ---- snapshots ---- */

struct store_snapshot {
    const char *task_id;
    const char *segment_id;
    int64_t time_ms;
    int32_t sequence;
    char *const *frames; /* root first; NUL-terminated strings (protobuf-c layout) */
    size_t n_frames;
    int64_t received_ms; /* when skyprofd received it (retention counts from the first
                          * snapshot's); 0 = unknown, time_ms is used */
    uint32_t weight;     /* how many samples the row stands for (a goProfileReport sample's
                          * count); 0 = 1, every dump of an agent */
};
/* Stores a batch in one transaction and returns after it committed (durable ack). A snapshot
 * with the same (task, segment, sequence) as a stored one is ignored (counted in *n_dup, may be
 * NULL). Errors: SKP_EIO (disk full, read-only...; the whole batch is rolled back). */
SKP_MUST_CHECK skp_err store_insert_snapshots(struct store *st, const struct store_snapshot *v,
                                              size_t n, size_t *n_dup);

/* ---- segments ---- */

/* A trace segment as the collector decoded it (SkyWalking's SegmentObject, spec §5.4). Enum
 * values are the protocol's. */
enum store_span_type {
    STORE_SPAN_ENTRY = 0,
    STORE_SPAN_EXIT = 1,
    STORE_SPAN_LOCAL = 2,
    STORE_SPAN_TYPE_UNKNOWN = 3,
};
enum store_span_layer {
    STORE_LAYER_UNKNOWN = 0,
    STORE_LAYER_DATABASE = 1,
    STORE_LAYER_RPC_FRAMEWORK = 2,
    STORE_LAYER_HTTP = 3,
    STORE_LAYER_MQ = 4,
    STORE_LAYER_CACHE = 5,
    STORE_LAYER_FAAS = 6,
};
struct store_span_ref {
    const char *trace_id;
    const char *parent_segment_id;
    int32_t parent_span_id;
    bool cross_thread; /* else cross-process */
};
struct store_span_log {
    int64_t time_ms;
    const struct store_kv *data;
    size_t n_data;
};
struct store_span {
    int32_t span_id;
    int32_t parent_span_id;
    int64_t start_ms;
    int64_t end_ms;
    const char *operation; /* the endpoint name of an Entry span; NULL = "" */
    const char *peer;      /* NULL = "" */
    enum store_span_type type;
    enum store_span_layer layer;
    int32_t component_id;
    bool is_error;
    const struct store_span_ref *refs;
    size_t n_refs;
    const struct store_kv *tags;
    size_t n_tags;
    const struct store_span_log *logs;
    size_t n_logs;
};
struct store_segment {
    const char *segment_id; /* required, non-empty */
    const char *trace_id;   /* NULL = "" (also for the other strings) */
    const char *service;
    const char *instance;
    const struct store_span *spans;
    size_t n_spans;
};

/* The endpoint of a segment: its first Entry span's operation name, else its first span's
 * (a local-only continuation); NULL when it has no span. Borrowed from seg. Pure. */
const char *store_segment_endpoint(const struct store_segment *seg);

/* Stores segments and their spans in one transaction, durable on return (a resent segment id
 * replaces nothing and is ignored; a segment without id is skipped). Borrows v.
 * Errors: SKP_EINVAL (v NULL with n > 0), SKP_EIO (the whole batch rolled back), SKP_ENOMEM. */
SKP_MUST_CHECK skp_err store_insert_segments(struct store *st, const struct store_segment *v,
                                             size_t n, int64_t received_ms);

/* Whether any snapshot of segment_id is stored (*out false for an unknown id).
 * Errors: SKP_EINVAL, SKP_EIO. */
SKP_MUST_CHECK skp_err store_segment_has_snapshots(struct store *st, const char *segment_id,
                                                   bool *out);

/* One profiled segment of a task, as store_list_profiled_segments visits it. */
struct store_profiled_segment {
    const char *segment_id;
    bool has_object;                /* its SegmentObject was stored; else only snapshots arrived */
    const char *trace_id;           /* "" without object */
    const char *service;            /* the segment's, else the task's service ("" if unknown) */
    const char *instance;           /* "" without object */
    const char *endpoint;           /* store_segment_endpoint of the object; "" without object */
    int64_t start_ms;               /* min span start; without object: time of the first dump */
    int64_t end_ms;                 /* max span end (>= start); without object: the last dump's */
    const struct store_span *spans; /* as stored (span order kept); none without object */
    size_t n_spans;
};
typedef skp_err (*store_profiled_segment_cb)(void *ud, const struct store_profiled_segment *s);
/* Visits the profiled segments of a task (those with a snapshot of sequence 0 for it), ordered
 * by start_ms then segment id. Segments whose snapshots arrived but whose SegmentObject did not
 * (yet) are visited with has_object false. */
SKP_MUST_CHECK skp_err store_list_profiled_segments(struct store *st, const char *task_id,
                                                    store_profiled_segment_cb cb, void *ud);

/* A position in that order: the (start_ms, segment id) of the last segment seen. */
struct store_segment_key {
    int64_t start_ms;
    const char *segment_id;
};
/* One page of the same listing: the segments after `after` (NULL = from the first), at most
 * `limit` of them (0 = all); *more (may be NULL) is set when segments remain after the page.
 * Costs O(limit) whatever the task's size: backends keep an index in this order (SQLite: table
 * segment_listing, schema v8) and seek it to `after`. Errors: SKP_EINVAL (task_id or cb NULL,
 * after without segment_id), SKP_EIO, SKP_ENOMEM, or the callback's error (the walk stops). */
SKP_MUST_CHECK skp_err store_list_profiled_segments_page(struct store *st, const char *task_id,
                                                         const struct store_segment_key *after,
                                                         size_t limit, store_profiled_segment_cb cb,
                                                         void *ud, bool *more);

/* What an export of one segment says about it (store_get_segment_info). */
struct store_segment_info {
    char *trace_id;           /* NULL when its SegmentObject was not stored */
    char *endpoint;           /* the segment's endpoint, else its task's; NULL if neither */
    int dump_period;          /* ms, of the task of its snapshots (lowest sequence); 0 if none */
    bool has_window;          /* its SegmentObject was stored: the window below is known */
    int64_t start_ms, end_ms; /* its spans' window: earliest start, latest end */
};
/* Frees the strings of *i (not i itself). NULL ok. */
void store_segment_info_cleanup(struct store_segment_info *i);
/* Trace id, endpoint and dump period of a stored segment. On success the caller cleans *out
 * up. Errors: SKP_ENOTFOUND (no snapshot or SegmentObject of that id), SKP_ENOMEM, SKP_EIO. */
SKP_MUST_CHECK skp_err store_get_segment_info(struct store *st, const char *segment_id,
                                              struct store_segment_info *out);

/* ---- analysis input ---- */

/* One stored snapshot as the analyzer reads it. */
struct store_sample {
    uint32_t segment; /* store-local id of the segment (distinct segments differ) */
    int32_t sequence;
    int64_t time_ms;
    uint32_t stack;  /* store-local id of the de-duplicated stack */
    uint32_t weight; /* samples the row stands for, >= 1 (1 for rows stored before weights) */
};
/* Called once per snapshot, in order. It may call store_get_stack/store_get_frame; a nested
 * store_scan_* fails with SKP_ESTATE (the scan's statement is in use). */
typedef void (*store_sample_cb)(void *ud, const struct store_sample *s);

/* Visits the snapshots of `segment_id` (any task) with lo_seq <= sequence <= hi_seq in
 * sequence order. */
SKP_MUST_CHECK skp_err store_scan_segment(struct store *st, const char *segment_id, int32_t lo_seq,
                                          int32_t hi_seq, store_sample_cb cb, void *ud);
/* min/max sequence of the segment's snapshots with from_ms <= time <= to_ms;
 * SKP_ENOTFOUND if there are none. */
SKP_MUST_CHECK skp_err store_segment_seq_window(struct store *st, const char *segment_id,
                                                int64_t from_ms, int64_t to_ms, int32_t *lo,
                                                int32_t *hi);
/* Visits every snapshot of a task, ordered by (segment, sequence). */
SKP_MUST_CHECK skp_err store_scan_task(struct store *st, const char *task_id, store_sample_cb cb,
                                       void *ud);
/* Frame ids of a stack (root first). *frames is owned by the store and valid until the next
 * store call. */
SKP_MUST_CHECK skp_err store_get_stack(struct store *st, uint32_t stack, const uint32_t **frames,
                                       size_t *n);
/* Code signature of a frame id, valid until the store is closed (cached). */
SKP_MUST_CHECK skp_err store_get_frame(struct store *st, uint32_t frame, const char **sig);

/* ---- endpoint statistics (rolled up per minute; endpoint_stats.c builds them) ---- */

struct store_endpoint_minute {
    uint64_t writer; /* the process that rolled it up: each skyprofd (and each run
                      * of it) writes its own rows, readers add them up */
    const char *service;
    const char *instance;
    const char *endpoint;
    int64_t minute_ms; /* start of the minute */
    uint64_t count;
    uint64_t errors;
    const uint8_t *hist; /* latency histogram, endpoint_stats' encoding (opaque here) */
    size_t hist_len;
};
/* Stores (or replaces, per writer: a minute may be rolled up again after late requests)
 * minutes in one transaction. Errors: SKP_EINVAL, SKP_EIO (batch rolled back), SKP_ENOMEM. */
SKP_MUST_CHECK skp_err store_put_endpoint_minutes(struct store *st,
                                                  const struct store_endpoint_minute *v, size_t n);
typedef skp_err (*store_endpoint_minute_cb)(void *ud, const struct store_endpoint_minute *m);
/* Visits the minutes of `service` with from_ms <= minute_ms < to_ms, ordered by endpoint,
 * instance, minute (one row per writer of a minute). */
SKP_MUST_CHECK skp_err store_list_endpoint_minutes(struct store *st, const char *service,
                                                   int64_t from_ms, int64_t to_ms,
                                                   store_endpoint_minute_cb cb, void *ud);

/* ---- maintenance and stats ---- */

/* Deletes snapshots, segments, task logs, tasks and endpoint minutes whose time is older than
 * `before_ms` (a segment's and its snapshots' by the time skyprofd first received one of them,
 * never by the agent's clock), and
 * stacks/frames no snapshot refers to any more. *n_deleted (may be NULL) counts rows. */
SKP_MUST_CHECK skp_err store_purge_before(struct store *st, int64_t before_ms, uint64_t *n_deleted);
/* One step of that purge, in one short transaction: deletes at most about max_rows rows (0 = no
 * bound: the whole purge, as store_purge_before), oldest segments first. *done is true when
 * nothing older than before_ms is left to delete; until then the caller calls again (each step
 * starts where the data left by the last one is). Steps leave exactly what store_purge_before
 * would (frames still referenced kept, a segment's rows going together). *n_deleted (may be
 * NULL) counts the step's rows. Errors: SKP_EIO (read-only or a database error: nothing of
 * this step is deleted), SKP_ENOMEM. */
SKP_MUST_CHECK skp_err store_purge_step(struct store *st, int64_t before_ms, uint64_t max_rows,
                                        uint64_t *n_deleted, bool *done);

/* Checks the database's structure (SQLite's PRAGMA quick_check: every page, b-tree and record
 * format, not the index contents). On a problem returns SKP_EIO with the first findings in
 * `detail` (cap bytes, NUL-terminated; "" when fine). Takes time linear in the file size.
 * Errors: SKP_EIO (corrupt, or the check could not run: detail says which). */
SKP_MUST_CHECK skp_err store_check(struct store *st, char *detail, size_t cap);

struct store_stats {
    uint64_t snapshots; /* rows */
    uint64_t stacks;
    uint64_t frames;
    uint64_t segments;
    uint64_t tasks;
    uint64_t file_bytes; /* database + WAL size */
    uint64_t commits;
    uint64_t commit_ns_total; /* time spent in COMMIT, for latency reporting */
};
SKP_MUST_CHECK skp_err store_get_stats(struct store *st, struct store_stats *out);

#endif
