/* store_rows.h - one description per stored row type: its columns (name, type, and the field of
 * the C struct each one comes from), from which both backends bind an insert's parameters
 * (store__bind_row in SQLite, pgp_row in PostgreSQL) and read a select's columns into the
 * struct (store__read_row, pg__read_row). The SQL stays written out in each backend; it names
 * the columns and their placeholders through the lists below (<ROW>_COLS, the SELECT list
 * <ROW>_READ, the VALUES lists <ROW>_SQ for SQLite and <ROW>_PG for PostgreSQL), so adding a
 * column is: the struct's field, its line in the description (store_rows.c) and in the lists
 * here, and each backend's schema step.
 *
 * A description lists the columns in the order a SELECT reads them. Columns marked
 * STORE_COL_READ are only read (a select's computed value, e.g. coalesce(cancelled_ms, 0), or
 * a key the database assigns); the others are the insert's parameters, in order.
 * tests/unit/server/store/test_store_rows.c checks that every list below names the columns of
 * its description.
 *
 * Pure data and pure functions: no thread or store state. */
#ifndef SKP_SERVER_STORE_ROWS_H
#define SKP_SERVER_STORE_ROWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/store/store.h"
#include "server/store/store_continuous.h"
#include "server/store/store_ebpf.h"
#include "server/store/store_templates.h"

enum store_col_type {
    STORE_COL_TEXT,   /* const char * (NULL: SQL NULL, or "" with STORE_COL_EMPTY) */
    STORE_COL_INT64,  /* int64_t or uint64_t (stored as its 64 bits) */
    STORE_COL_INT32,  /* int32_t, int or an enum stored as its number */
    STORE_COL_BOOL,   /* bool: SQLite 0/1, PostgreSQL boolean */
    STORE_COL_DOUBLE, /* double: SQLite REAL, PostgreSQL double precision (%.17g text) */
    STORE_COL_BLOB,   /* const uint8_t * with its size_t length at len_off; PostgreSQL bytea */
    STORE_COL_NAME,   /* an enum stored as its name: names[value] */
};

#define STORE_COL_EMPTY 1u /* a NULL text is written as "" (a NOT NULL column) */
/* read: SQL NULL gives a NULL pointer (else ""); with STORE_COL_EMPTY, so does "" */
#define STORE_COL_NULLABLE 2u
#define STORE_COL_READ 4u /* only read (a select's expression), never bound */

struct store_col {
    const char *name; /* as the SQL writes it */
    enum store_col_type type;
    unsigned flags;
    size_t off;               /* of the field in the row's struct */
    size_t len_off;           /* STORE_COL_BLOB: of its length field */
    const char *const *names; /* STORE_COL_NAME: value → name; unknown names read as 0 */
    int n_names;
};

/* The largest row struct a description may describe (a visit reads into a buffer this big). */
#define STORE_ROW_MAX 256

struct store_row_desc {
    const char *what; /* for logs */
    size_t size;      /* of the row's struct */
    /* Frees what an owned read allocated (NULL: the text and blob columns). */
    void (*cleanup)(void *row);
    const struct store_col *cols;
    size_t n_cols;
};

/* Frees an owned row's texts and blobs (d->cleanup when set); the row is zeroed. */
void store_row_cleanup(const struct store_row_desc *d, void *row);
/* The columns bound by an insert (those without STORE_COL_READ). */
size_t store_row_n_bound(const struct store_row_desc *d);
/* The field of column c in row (a pointer of the field's own type, by the column's type). */
static inline void *store_col_field(const struct store_col *c, void *row)
{
    return (char *)row + c->off;
}
static inline const void *store_col_cfield(const struct store_col *c, const void *row)
{
    return (const char *)row + c->off;
}
/* The value of an integer-like column (INT32, INT64, BOOL, NAME) of row. */
int64_t store_col_int(const struct store_col *c, const void *row);
/* Sets an integer-like column of row. */
void store_col_set_int(const struct store_col *c, void *row, int64_t v);
/* A STORE_COL_DOUBLE column's value / setter. */
double store_col_double(const struct store_col *c, const void *row);
void store_col_set_double(const struct store_col *c, void *row, double v);
/* The name of a STORE_COL_NAME value (names[0] when out of range). */
const char *store_col_name_of(const struct store_col *c, int64_t v);
/* The value of a STORE_COL_NAME name (0 when unknown). */
int64_t store_col_value_of(const struct store_col *c, const char *name);
/* A text column's value as it is written (NULL, or "" for STORE_COL_EMPTY). */
const char *store_col_text(const struct store_col *c, const void *row);

/* ---- binding and reading by a description (each backend gives its own value functions) ---- */

/* Where store_row_bind puts an insert's parameters, in order. */
struct store_row_sink {
    void *ctx;
    void (*text)(void *ctx, const char *s); /* NULL: SQL NULL */
    void (*int64)(void *ctx, int64_t v);
    void (*dbl)(void *ctx, double v);
    void (*boolean)(void *ctx, bool v);
    void (*blob)(void *ctx, const uint8_t *p, size_t n);
};
/* Hands the bound columns of row to the sink, in the description's order. */
void store_row_bind(const struct store_row_desc *d, const void *row,
                    const struct store_row_sink *sink);

/* Where store_row_read takes one result row's values from (col: the result's column). */
struct store_row_src {
    void *ctx;
    bool (*is_null)(void *ctx, int col);
    const char *(*text)(void *ctx, int col); /* "" for NULL; borrowed */
    int64_t (*int64)(void *ctx, int col);
    double (*dbl)(void *ctx, int col);
    bool (*boolean)(void *ctx, int col);
    /* The bytes of a blob: borrowed, or (own) a skpx_malloc'd copy that is never NULL.
     * Errors: SKP_ENOMEM, SKP_EPROTO (a value that is no blob). */
    skp_err (*blob)(void *ctx, int col, bool own, const uint8_t **p, size_t *n);
};
/* Reads columns col0.. into out (d's struct, zeroed first). own: texts and blobs are copies
 * (store_row_cleanup frees them; on an error nothing is left to free), else borrowed from the
 * source. Errors: SKP_ENOMEM, the source's blob errors. */
skp_err store_row_read(const struct store_row_desc *d, const struct store_row_src *src, int col0,
                       void *out, bool own);

/* ---- visiting rows: store.h's typed callbacks behind one signature ---- */

/* A listing's callback with its user data; call(v, row) calls it with a row of its type. Made
 * with STORE_VISIT(kind, cb, ud), kind one of the union's members. */
struct store_visit {
    skp_err (*call)(const struct store_visit *v, const void *row);
    union {
        store_task_cb task;
        store_task_log_cb task_log;
        store_service_cb service;
        store_instance_cb instance;
        store_endpoint_minute_cb endpoint_minute;
        store_ebpf_process_cb ebpf_process;
        store_ebpf_stack_cb ebpf_stack;
        store_cont_policy_cb cont_policy;
        store_cont_trigger_cb cont_trigger;
        store_template_cb template_row;
    } cb;
    void *ud;
};
#define STORE_VISIT(kind, fn, data)                                                                \
    ((const struct store_visit){store_visit_##kind, {.kind = (fn)}, (data)})
skp_err store_visit_task(const struct store_visit *v, const void *row);
skp_err store_visit_task_log(const struct store_visit *v, const void *row);
skp_err store_visit_service(const struct store_visit *v, const void *row);
/* row: a struct store_instance_text; its properties are parsed for the callback. */
skp_err store_visit_instance(const struct store_visit *v, const void *row);
skp_err store_visit_endpoint_minute(const struct store_visit *v, const void *row);
skp_err store_visit_ebpf_process(const struct store_visit *v, const void *row);
skp_err store_visit_ebpf_stack(const struct store_visit *v, const void *row);
skp_err store_visit_cont_policy(const struct store_visit *v, const void *row);
skp_err store_visit_cont_trigger(const struct store_visit *v, const void *row);
skp_err store_visit_template_row(const struct store_visit *v, const void *row);

/* Visits one row of the profiled-segment listing: p as a backend read it, its spans still the
 * stored text `spans` (store_codec.h), parsed here when p->has_object. Without object its texts
 * but segment_id and service are "" and its end is at least its start. Errors: the span text's
 * (store_span_rows_parse), cb's. */
SKP_MUST_CHECK skp_err store_profiled_segment_visit(struct store_profiled_segment *p,
                                                    const char *spans, store_profiled_segment_cb cb,
                                                    void *ud);

/* ---- the row types ---- */

/* Profile tasks (store.h struct store_task), table tasks. */
#define STORE_TASK_COLS                                                                            \
    "id, service, endpoint, start_time, duration_min, min_duration_threshold, dump_period, "       \
    "max_sampling_count, create_time"
#define STORE_TASK_READ STORE_TASK_COLS ", coalesce(cancelled_ms, 0)"
#define STORE_TASK_SQ "?, ?, ?, ?, ?, ?, ?, ?, ?"
#define STORE_TASK_PG "$1, $2, $3, $4, $5, $6, $7, $8, $9"
extern const struct store_row_desc store_task_row;

/* A task's log rows (store.h struct store_task_log), table task_logs (service bound after). */
#define STORE_TASK_LOG_COLS "task_id, instance, op, time"
#define STORE_TASK_LOG_READ STORE_TASK_LOG_COLS
#define STORE_TASK_LOG_SQ "?, ?, ?, ?"
#define STORE_TASK_LOG_PG "$1, $2, $3, $4"
extern const struct store_row_desc store_task_log_row;

/* The services listing (store.h struct store_service_row), read from services s. */
#define STORE_SERVICE_READ                                                                         \
    "s.name, s.layer, s.last_seen, "                                                               \
    "(SELECT count(*) FROM instances i WHERE i.service_id = s.id)"
extern const struct store_row_desc store_service_row;

/* The instances listing (store.h struct store_instance_row) as read from instances i: the
 * properties as stored (store_codec.h's JSON text), parsed by STORE_VISIT(instance, ...). */
struct store_instance_text {
    const char *name;
    const char *language; /* NULL when unknown */
    int64_t last_seen_ms;
    const char *properties;
};
#define STORE_INSTANCE_READ "i.name, i.language, i.last_seen, i.properties"
extern const struct store_row_desc store_instance_text_row;

/* Process-profiling tasks (store_proc.h struct proc_task; its instances are rows of their own),
 * table proc_tasks. */
#define STORE_PROC_TASK_COLS                                                                       \
    "id, kind, service, all_live, events, duration_s, dump_period, sampling_hz, exec_args, "       \
    "create_time"
#define STORE_PROC_TASK_READ STORE_PROC_TASK_COLS ", coalesce(cancelled_ms, 0)"
#define STORE_PROC_TASK_SQ "?, ?, ?, ?, ?, ?, ?, ?, ?, ?"
#define STORE_PROC_TASK_PG "$1, $2, $3, $4, $5, $6, $7, $8, $9, $10"
extern const struct store_row_desc store_proc_task_row;

/* A process task's log (struct proc_log), table proc_task_logs (its task_id is bound after). */
#define STORE_PROC_LOG_COLS "instance, op, time, message"
#define STORE_PROC_LOG_READ STORE_PROC_LOG_COLS
#define STORE_PROC_LOG_SQ "?, ?, ?, ?"
#define STORE_PROC_LOG_PG "$1, $2, $3, $4"
extern const struct store_row_desc store_proc_log_row;

/* An uploaded file's metadata (struct proc_file), table proc_files (task_id and data bound
 * after). */
#define STORE_PROC_FILE_COLS "instance, time, size"
#define STORE_PROC_FILE_READ "id, " STORE_PROC_FILE_COLS
#define STORE_PROC_FILE_SQ "?, ?, ?"
#define STORE_PROC_FILE_PG "$1, $2, $3"
extern const struct store_row_desc store_proc_file_row;

/* One text column read as an array of strings (char **: a row is one char *). */
extern const struct store_row_desc store_name_row;

/* A process task's instance, table proc_task_instances (read back as names: store_name_row). */
struct store_proc_instance_row {
    const char *task_id;
    const char *instance;
};
#define STORE_PROC_INSTANCE_COLS "task_id, instance"
#define STORE_PROC_INSTANCE_SQ "?, ?"
#define STORE_PROC_INSTANCE_PG "$1, $2"
extern const struct store_row_desc store_proc_instance_row;

/* A piece of an uploaded file, table proc_file_pieces (read back in seq order as the file's
 * bytes). */
struct store_proc_piece_row {
    int64_t file_id;
    int32_t seq;
    const uint8_t *data;
    size_t len;
};
#define STORE_PROC_PIECE_COLS "file_id, seq, data"
#define STORE_PROC_PIECE_SQ "?, ?, ?"
#define STORE_PROC_PIECE_PG "$1, $2, $3"
extern const struct store_row_desc store_proc_piece_row;

/* eBPF processes (store_ebpf.h struct store_ebpf_process), table ebpf_processes. */
#define STORE_EBPF_PROCESS_COLS                                                                    \
    "id, service, instance, process_name, layer, pid, labels, properties, agent_id, first_ms, "    \
    "last_ping_ms"
#define STORE_EBPF_PROCESS_READ STORE_EBPF_PROCESS_COLS
#define STORE_EBPF_PROCESS_SQ "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?"
#define STORE_EBPF_PROCESS_PG "$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11"
extern const struct store_row_desc store_ebpf_process_row;

/* eBPF stacks as uploaded (struct store_ebpf_stack), table ebpf_stacks (received_ms bound
 * after); a scan reads their sums per (process, kind, symbols) through store_ebpf_sum_row. */
#define STORE_EBPF_STACK_COLS "task_id, process_id, kind, time_ms, symbols, count, duration_ns"
#define STORE_EBPF_STACK_SQ "?, ?, ?, ?, ?, ?, ?"
#define STORE_EBPF_STACK_PG "$1, $2, $3, $4, $5, $6, $7"
extern const struct store_row_desc store_ebpf_stack_row;
#define STORE_EBPF_SUM_READ                                                                        \
    "task_id, process_id, kind, symbols, SUM(count), SUM(duration_ns), MAX(time_ms)"
extern const struct store_row_desc store_ebpf_sum_row;

/* Endpoint statistics minutes (store.h struct store_endpoint_minute), table endpoint_minutes. */
#define STORE_ENDPOINT_MINUTE_COLS                                                                 \
    "service, endpoint, instance, minute_ms, count, errors, hist, writer"
#define STORE_ENDPOINT_MINUTE_READ STORE_ENDPOINT_MINUTE_COLS
#define STORE_ENDPOINT_MINUTE_SQ "?, ?, ?, ?, ?, ?, ?, ?"
#define STORE_ENDPOINT_MINUTE_PG "$1, $2, $3, $4, $5, $6, $7, $8"
extern const struct store_row_desc store_endpoint_minute_row;

/* Continuous-profiling policies (store_continuous.h struct store_cont_policy_row), table
 * continuous_policies. */
#define STORE_CONT_POLICY_COLS "service, uuid, json, updated_ms"
#define STORE_CONT_POLICY_READ STORE_CONT_POLICY_COLS
#define STORE_CONT_POLICY_SQ "?, ?, ?, ?"
#define STORE_CONT_POLICY_PG "$1, $2, $3, $4"
extern const struct store_row_desc store_cont_policy_row;

/* Continuous-profiling triggers (struct store_cont_trigger without its causes), table
 * continuous_triggers (id assigned by the database). */
#define STORE_CONT_TRIGGER_COLS                                                                    \
    "service, instance, process, time_ms, target, source, task_kind, task_id, note"
#define STORE_CONT_TRIGGER_READ "id, " STORE_CONT_TRIGGER_COLS
#define STORE_CONT_TRIGGER_SQ "?, ?, ?, ?, ?, ?, ?, ?, ?"
#define STORE_CONT_TRIGGER_PG "$1, $2, $3, $4, $5, $6, $7, $8, $9"
extern const struct store_row_desc store_cont_trigger_row;

/* A trigger's causes (struct store_cont_cause), table continuous_trigger_causes (trigger_id and
 * seq bound after). */
#define STORE_CONT_CAUSE_COLS "type, uri, uri_is_regex, threshold, current, window_s, hits"
#define STORE_CONT_CAUSE_READ STORE_CONT_CAUSE_COLS
#define STORE_CONT_CAUSE_SQ "?, ?, ?, ?, ?, ?, ?"
#define STORE_CONT_CAUSE_PG "$1, $2, $3, $4, $5, $6, $7"
extern const struct store_row_desc store_cont_cause_row;

/* Dashboards (store_templates.h struct store_template_row), table ui_templates. */
#define STORE_TEMPLATE_COLS "id, configuration, disabled, updated_ms"
#define STORE_TEMPLATE_READ STORE_TEMPLATE_COLS
#define STORE_TEMPLATE_SQ "?, ?, ?, ?"
#define STORE_TEMPLATE_PG "$1, $2, $3, $4"
extern const struct store_row_desc store_template_row;

/* A trace segment as its row stores it (table segments): the span window and the spans as the
 * shared JSON text (store_codec.h), made by store_segment_row_of. */
struct store_segment_row {
    int64_t seg; /* its segids id (set by the backend) */
    const char *trace_id;
    const char *service;
    const char *instance;
    const char *endpoint;
    int64_t start_ms, end_ms; /* earliest span start, latest end (received_ms without spans) */
    int64_t received_ms;
    char *spans; /* owned: skpx_free */
};
#define STORE_SEGMENT_COLS                                                                         \
    "seg, trace_id, service, instance, endpoint, start_ms, end_ms, received_ms, spans"
#define STORE_SEGMENT_READ STORE_SEGMENT_COLS
#define STORE_SEGMENT_SQ "?, ?, ?, ?, ?, ?, ?, ?, ?"
#define STORE_SEGMENT_PG "$1, $2, $3, $4, $5, $6, $7, $8, $9"
extern const struct store_row_desc store_segment_row;
/* Whether a segment can be stored (an id to key it by, spans when it counts some): others are
 * skipped (the collector counts malformed input). */
bool store_segment_storable(const struct store_segment *seg);

/* A segment's info (store.h struct store_segment_info), read from segids si joined to its
 * segment g and to the task t of its first snapshot. */
#define STORE_SEGMENT_INFO_READ                                                                    \
    "g.trace_id, COALESCE(NULLIF(g.endpoint, ''), t.endpoint), t.dump_period, "                    \
    "g.start_ms IS NOT NULL, g.start_ms, g.end_ms"
extern const struct store_row_desc store_segment_info_row;
/* The row of seg received at received_ms (out->seg 0). Errors: SKP_ENOMEM. */
SKP_MUST_CHECK skp_err store_segment_row_of(const struct store_segment *seg, int64_t received_ms,
                                            struct store_segment_row *out);

#endif
