/* store_rows.c - the descriptions of the stored row types (store_rows.h) and the accessors the
 * backends' bind and read functions share. */
#include "server/store/store_rows.h"

#include <string.h>

#include "common/alloc.h"
#include "server/store/store.h"
#include "server/store/store_codec.h"
#include "server/store/store_ebpf.h"
#include "server/store/store_proc.h"

/* Integer columns are read and written through their width: enums stored as numbers are int. */
_Static_assert(sizeof(int) == sizeof(int32_t), "STORE_COL_INT32 holds int fields");
_Static_assert(sizeof(enum store_task_op) == sizeof(int32_t), "enums are int");
_Static_assert(sizeof(enum proc_kind) == sizeof(int32_t), "enums are int");
_Static_assert(sizeof(enum store_ebpf_kind) == sizeof(int32_t), "enums are int");

size_t store_row_n_bound(const struct store_row_desc *d)
{
    size_t n = 0;
    for (size_t i = 0; i < d->n_cols; i++)
        n += !(d->cols[i].flags & STORE_COL_READ);
    return n;
}

int64_t store_col_int(const struct store_col *c, const void *row)
{
    const void *f = store_col_cfield(c, row);
    switch (c->type) {
    case STORE_COL_INT64: {
        int64_t v;
        memcpy(&v, f, sizeof(v));
        return v;
    }
    case STORE_COL_INT32:
    case STORE_COL_NAME: {
        int32_t v;
        memcpy(&v, f, sizeof(v));
        return v;
    }
    case STORE_COL_BOOL:
        return *(const bool *)f ? 1 : 0;
    default:
        return 0;
    }
}

void store_col_set_int(const struct store_col *c, void *row, int64_t v)
{
    void *f = store_col_field(c, row);
    switch (c->type) {
    case STORE_COL_INT64:
        memcpy(f, &v, sizeof(v));
        break;
    case STORE_COL_INT32:
    case STORE_COL_NAME: {
        int32_t w = (int32_t)v;
        memcpy(f, &w, sizeof(w));
        break;
    }
    case STORE_COL_BOOL:
        *(bool *)f = v != 0;
        break;
    default:
        break;
    }
}

double store_col_double(const struct store_col *c, const void *row)
{
    double v;
    memcpy(&v, store_col_cfield(c, row), sizeof(v));
    return v;
}

void store_col_set_double(const struct store_col *c, void *row, double v)
{
    memcpy(store_col_field(c, row), &v, sizeof(v));
}

const char *store_col_name_of(const struct store_col *c, int64_t v)
{
    return v >= 0 && v < c->n_names ? c->names[v] : c->names[0];
}

int64_t store_col_value_of(const struct store_col *c, const char *name)
{
    for (int i = 0; name && i < c->n_names; i++)
        if (strcmp(c->names[i], name) == 0)
            return i;
    return 0;
}

const char *store_col_text(const struct store_col *c, const void *row)
{
    const char *s;
    memcpy(&s, store_col_cfield(c, row), sizeof(s));
    return s || !(c->flags & STORE_COL_EMPTY) ? s : "";
}

void store_row_cleanup(const struct store_row_desc *d, void *row)
{
    if (d->cleanup) {
        d->cleanup(row);
    } else {
        for (size_t i = 0; i < d->n_cols; i++) {
            const struct store_col *c = &d->cols[i];
            if (c->type != STORE_COL_TEXT && c->type != STORE_COL_BLOB)
                continue;
            void *v;
            memcpy(&v, store_col_cfield(c, row), sizeof(v));
            skpx_free(v);
        }
    }
    memset(row, 0, d->size);
}

/* ---- bind and read ---- */

void store_row_bind(const struct store_row_desc *d, const void *row,
                    const struct store_row_sink *sink)
{
    for (size_t i = 0; i < d->n_cols; i++) {
        const struct store_col *c = &d->cols[i];
        if (c->flags & STORE_COL_READ)
            continue;
        switch (c->type) {
        case STORE_COL_TEXT:
            sink->text(sink->ctx, store_col_text(c, row));
            break;
        case STORE_COL_NAME:
            sink->text(sink->ctx, store_col_name_of(c, store_col_int(c, row)));
            break;
        case STORE_COL_BOOL:
            sink->boolean(sink->ctx, store_col_int(c, row) != 0);
            break;
        case STORE_COL_DOUBLE:
            sink->dbl(sink->ctx, store_col_double(c, row));
            break;
        case STORE_COL_BLOB: {
            const uint8_t *b;
            size_t len;
            memcpy(&b, store_col_cfield(c, row), sizeof(b));
            memcpy(&len, (const char *)row + c->len_off, sizeof(len));
            sink->blob(sink->ctx, b, len);
            break;
        }
        default:
            sink->int64(sink->ctx, store_col_int(c, row));
            break;
        }
    }
}

/* A text or blob column's value into its field (and length field). */
static skp_err read_bytes(const struct store_col *c, const struct store_row_src *src, int col,
                          void *out, bool own)
{
    if ((c->flags & STORE_COL_NULLABLE) && src->is_null(src->ctx, col))
        return SKP_OK; /* the field stays NULL */
    if (c->type == STORE_COL_TEXT) {
        const char *v = src->text(src->ctx, col);
        if (!*v && (c->flags & STORE_COL_NULLABLE) && (c->flags & STORE_COL_EMPTY))
            return SKP_OK;
        const char *t = own ? skpx_strdup(v) : v;
        memcpy(store_col_field(c, out), &t, sizeof(t));
        return t ? SKP_OK : SKP_ENOMEM;
    }
    const uint8_t *b = NULL;
    size_t len = 0;
    skp_err err = src->blob(src->ctx, col, own, &b, &len);
    if (err)
        return err;
    memcpy(store_col_field(c, out), &b, sizeof(b));
    memcpy((char *)out + c->len_off, &len, sizeof(len));
    return SKP_OK;
}

skp_err store_row_read(const struct store_row_desc *d, const struct store_row_src *src, int col0,
                       void *out, bool own)
{
    memset(out, 0, d->size);
    skp_err err = SKP_OK;
    for (size_t k = 0; k < d->n_cols && !err; k++) {
        const struct store_col *c = &d->cols[k];
        int col = col0 + (int)k;
        switch (c->type) {
        case STORE_COL_TEXT:
        case STORE_COL_BLOB:
            err = read_bytes(c, src, col, out, own);
            break;
        case STORE_COL_NAME:
            store_col_set_int(c, out, store_col_value_of(c, src->text(src->ctx, col)));
            break;
        case STORE_COL_BOOL:
            store_col_set_int(c, out, src->boolean(src->ctx, col));
            break;
        case STORE_COL_DOUBLE:
            store_col_set_double(c, out, src->dbl(src->ctx, col));
            break;
        default:
            store_col_set_int(c, out, src->int64(src->ctx, col));
            break;
        }
    }
    if (err && own)
        store_row_cleanup(d, out);
    return err;
}

/* ---- visits ---- */

#define VISIT(kind, type)                                                                          \
    skp_err store_visit_##kind(const struct store_visit *v, const void *row)                       \
    {                                                                                              \
        return v->cb.kind(v->ud, (const type *)row);                                               \
    }
VISIT(task, struct store_task)
VISIT(task_log, struct store_task_log)
VISIT(service, struct store_service_row)

skp_err store_visit_instance(const struct store_visit *v, const void *row)
{
    const struct store_instance_text *t = row;
    struct store_props props;
    skp_err err = store_props_parse(t->properties, &props);
    if (!err) {
        const struct store_instance_row r = {
            .name = t->name,
            .language = t->language,
            .last_heartbeat_ms = t->last_seen_ms,
            .props = props.kv,
            .n_props = props.n,
        };
        err = v->cb.instance(v->ud, &r);
    }
    store_props_cleanup(&props);
    return err;
}
VISIT(endpoint_minute, struct store_endpoint_minute)
VISIT(ebpf_process, struct store_ebpf_process)
VISIT(ebpf_stack, struct store_ebpf_stack)
VISIT(cont_policy, struct store_cont_policy_row)
VISIT(cont_trigger, struct store_cont_trigger)
VISIT(template_row, struct store_template_row)

skp_err store_profiled_segment_visit(struct store_profiled_segment *p, const char *spans,
                                     store_profiled_segment_cb cb, void *ud)
{
    p->spans = NULL;
    p->n_spans = 0;
    if (!p->has_object) {
        p->trace_id = p->instance = p->endpoint = "";
        if (p->end_ms < p->start_ms)
            p->end_ms = p->start_ms;
        return cb(ud, p);
    }
    struct store_span_rows sr;
    skp_err err = store_span_rows_parse(p->segment_id, spans, &sr);
    if (!err) {
        p->spans = sr.spans;
        p->n_spans = sr.n_spans;
        err = cb(ud, p);
    }
    store_span_rows_cleanup(&sr);
    return err;
}

/* ---- the descriptions ---- */

#define COL(st, field, ty, fl)                                                                     \
    {                                                                                              \
#field, ty, fl, offsetof(st, field), 0, NULL, 0                                            \
    }
#define COL_AS(name, st, field, ty, fl)                                                            \
    {                                                                                              \
        name, ty, fl, offsetof(st, field), 0, NULL, 0                                              \
    }
#define DESC(what, st, cleanup, cols)                                                              \
    {                                                                                              \
        what, sizeof(st), cleanup, cols, sizeof(cols) / sizeof(cols[0])                            \
    }

static const struct store_col task_cols[] = {
    COL(struct store_task, id, STORE_COL_TEXT, 0),
    COL(struct store_task, service, STORE_COL_TEXT, 0),
    COL(struct store_task, endpoint, STORE_COL_TEXT, 0),
    COL(struct store_task, start_time, STORE_COL_INT64, 0),
    COL(struct store_task, duration_min, STORE_COL_INT32, 0),
    COL(struct store_task, min_duration_threshold, STORE_COL_INT32, 0),
    COL(struct store_task, dump_period, STORE_COL_INT32, 0),
    COL(struct store_task, max_sampling_count, STORE_COL_INT32, 0),
    COL(struct store_task, create_time, STORE_COL_INT64, 0),
    COL_AS("coalesce(cancelled_ms, 0)", struct store_task, cancelled_ms, STORE_COL_INT64,
           STORE_COL_READ),
};
const struct store_row_desc store_task_row = DESC("task", struct store_task, NULL, task_cols);

static const struct store_col task_log_cols[] = {
    COL(struct store_task_log, task_id, STORE_COL_TEXT, 0),
    COL(struct store_task_log, instance, STORE_COL_TEXT, 0),
    COL(struct store_task_log, op, STORE_COL_INT32, 0),
    COL_AS("time", struct store_task_log, time_ms, STORE_COL_INT64, 0),
};
const struct store_row_desc store_task_log_row =
    DESC("task log", struct store_task_log, NULL, task_log_cols);

static const struct store_col service_cols[] = {
    COL_AS("s.name", struct store_service_row, name, STORE_COL_TEXT, STORE_COL_READ),
    COL_AS("s.layer", struct store_service_row, layer, STORE_COL_TEXT,
           STORE_COL_READ | STORE_COL_NULLABLE),
    COL_AS("s.last_seen", struct store_service_row, last_seen_ms, STORE_COL_INT64, STORE_COL_READ),
    COL_AS("(SELECT count(*) FROM instances i WHERE i.service_id = s.id)", struct store_service_row,
           n_instances, STORE_COL_INT64, STORE_COL_READ),
};
const struct store_row_desc store_service_row =
    DESC("service", struct store_service_row, NULL, service_cols);

static const struct store_col instance_text_cols[] = {
    COL_AS("i.name", struct store_instance_text, name, STORE_COL_TEXT, STORE_COL_READ),
    COL_AS("i.language", struct store_instance_text, language, STORE_COL_TEXT,
           STORE_COL_READ | STORE_COL_NULLABLE),
    COL_AS("i.last_seen", struct store_instance_text, last_seen_ms, STORE_COL_INT64,
           STORE_COL_READ),
    COL_AS("i.properties", struct store_instance_text, properties, STORE_COL_TEXT, STORE_COL_READ),
};
const struct store_row_desc store_instance_text_row =
    DESC("instance", struct store_instance_text, NULL, instance_text_cols);

static void proc_task_cleanup(void *row)
{
    store_proc_task_cleanup(row);
}

static const char *const proc_kinds[] = {"pprof", "async-profiler"};
static const struct store_col proc_task_cols[] = {
    COL(struct proc_task, id, STORE_COL_TEXT, 0),
    {"kind", STORE_COL_NAME, 0, offsetof(struct proc_task, kind), 0, proc_kinds, 2},
    COL(struct proc_task, service, STORE_COL_TEXT, 0),
    COL(struct proc_task, all_live, STORE_COL_BOOL, 0),
    COL(struct proc_task, events, STORE_COL_TEXT, 0),
    COL(struct proc_task, duration_s, STORE_COL_INT64, 0),
    COL(struct proc_task, dump_period, STORE_COL_INT64, 0),
    COL(struct proc_task, sampling_hz, STORE_COL_INT64, 0),
    COL(struct proc_task, exec_args, STORE_COL_TEXT, STORE_COL_NULLABLE),
    COL(struct proc_task, create_time, STORE_COL_INT64, 0),
    COL_AS("coalesce(cancelled_ms, 0)", struct proc_task, cancelled_ms, STORE_COL_INT64,
           STORE_COL_READ),
};
const struct store_row_desc store_proc_task_row =
    DESC("process task", struct proc_task, proc_task_cleanup, proc_task_cols);

static const struct store_col proc_log_cols[] = {
    COL(struct proc_log, instance, STORE_COL_TEXT, 0),
    COL(struct proc_log, op, STORE_COL_TEXT, 0),
    COL_AS("time", struct proc_log, time_ms, STORE_COL_INT64, 0),
    COL(struct proc_log, message, STORE_COL_TEXT, STORE_COL_NULLABLE),
};
const struct store_row_desc store_proc_log_row =
    DESC("process task log", struct proc_log, NULL, proc_log_cols);

static const struct store_col proc_file_cols[] = {
    COL(struct proc_file, id, STORE_COL_INT64, STORE_COL_READ),
    COL(struct proc_file, instance, STORE_COL_TEXT, 0),
    COL_AS("time", struct proc_file, time_ms, STORE_COL_INT64, 0),
    COL_AS("size", struct proc_file, size_bytes, STORE_COL_INT64, 0),
};
const struct store_row_desc store_proc_file_row =
    DESC("process file", struct proc_file, NULL, proc_file_cols);

struct name_row {
    char *name;
};
static const struct store_col name_cols[] = {
    COL(struct name_row, name, STORE_COL_TEXT, 0),
};
const struct store_row_desc store_name_row = DESC("name", struct name_row, NULL, name_cols);

#define TEXT_EMPTY(st, field) COL(st, field, STORE_COL_TEXT, STORE_COL_EMPTY)

static const struct store_col proc_instance_cols[] = {
    COL(struct store_proc_instance_row, task_id, STORE_COL_TEXT, 0),
    COL(struct store_proc_instance_row, instance, STORE_COL_TEXT, 0),
};
const struct store_row_desc store_proc_instance_row =
    DESC("process task instance", struct store_proc_instance_row, NULL, proc_instance_cols);

static const struct store_col proc_piece_cols[] = {
    COL(struct store_proc_piece_row, file_id, STORE_COL_INT64, 0),
    COL(struct store_proc_piece_row, seq, STORE_COL_INT32, 0),
    {"data", STORE_COL_BLOB, 0, offsetof(struct store_proc_piece_row, data),
     offsetof(struct store_proc_piece_row, len), NULL, 0},
};
const struct store_row_desc store_proc_piece_row =
    DESC("process file piece", struct store_proc_piece_row, NULL, proc_piece_cols);

static const struct store_col ebpf_process_cols[] = {
    TEXT_EMPTY(struct store_ebpf_process, id),
    TEXT_EMPTY(struct store_ebpf_process, service),
    TEXT_EMPTY(struct store_ebpf_process, instance),
    TEXT_EMPTY(struct store_ebpf_process, process_name),
    TEXT_EMPTY(struct store_ebpf_process, layer),
    COL(struct store_ebpf_process, pid, STORE_COL_INT32, 0),
    TEXT_EMPTY(struct store_ebpf_process, labels),
    TEXT_EMPTY(struct store_ebpf_process, properties),
    TEXT_EMPTY(struct store_ebpf_process, agent_id),
    COL(struct store_ebpf_process, first_ms, STORE_COL_INT64, 0),
    COL(struct store_ebpf_process, last_ping_ms, STORE_COL_INT64, 0),
};
const struct store_row_desc store_ebpf_process_row =
    DESC("eBPF process", struct store_ebpf_process, NULL, ebpf_process_cols);

static const struct store_col ebpf_stack_cols[] = {
    TEXT_EMPTY(struct store_ebpf_stack, task_id),
    TEXT_EMPTY(struct store_ebpf_stack, process_id),
    COL(struct store_ebpf_stack, kind, STORE_COL_INT32, 0),
    COL(struct store_ebpf_stack, time_ms, STORE_COL_INT64, 0),
    TEXT_EMPTY(struct store_ebpf_stack, symbols),
    COL(struct store_ebpf_stack, count, STORE_COL_INT64, 0),
    COL(struct store_ebpf_stack, duration_ns, STORE_COL_INT64, 0),
};
const struct store_row_desc store_ebpf_stack_row =
    DESC("eBPF stack", struct store_ebpf_stack, NULL, ebpf_stack_cols);

#define READ_AS(name, st, field, ty) COL_AS(name, st, field, ty, STORE_COL_READ)
static const struct store_col ebpf_sum_cols[] = {
    READ_AS("task_id", struct store_ebpf_stack, task_id, STORE_COL_TEXT),
    READ_AS("process_id", struct store_ebpf_stack, process_id, STORE_COL_TEXT),
    READ_AS("kind", struct store_ebpf_stack, kind, STORE_COL_INT32),
    READ_AS("symbols", struct store_ebpf_stack, symbols, STORE_COL_TEXT),
    READ_AS("SUM(count)", struct store_ebpf_stack, count, STORE_COL_INT64),
    READ_AS("SUM(duration_ns)", struct store_ebpf_stack, duration_ns, STORE_COL_INT64),
    READ_AS("MAX(time_ms)", struct store_ebpf_stack, time_ms, STORE_COL_INT64),
};
const struct store_row_desc store_ebpf_sum_row =
    DESC("eBPF stack sum", struct store_ebpf_stack, NULL, ebpf_sum_cols);

static const struct store_col endpoint_minute_cols[] = {
    TEXT_EMPTY(struct store_endpoint_minute, service),
    TEXT_EMPTY(struct store_endpoint_minute, endpoint),
    TEXT_EMPTY(struct store_endpoint_minute, instance),
    COL(struct store_endpoint_minute, minute_ms, STORE_COL_INT64, 0),
    COL(struct store_endpoint_minute, count, STORE_COL_INT64, 0),
    COL(struct store_endpoint_minute, errors, STORE_COL_INT64, 0),
    {"hist", STORE_COL_BLOB, 0, offsetof(struct store_endpoint_minute, hist),
     offsetof(struct store_endpoint_minute, hist_len), NULL, 0},
    COL(struct store_endpoint_minute, writer, STORE_COL_INT64, 0),
};
const struct store_row_desc store_endpoint_minute_row =
    DESC("endpoint minute", struct store_endpoint_minute, NULL, endpoint_minute_cols);

static const struct store_col cont_policy_cols[] = {
    COL(struct store_cont_policy_row, service, STORE_COL_TEXT, 0),
    COL(struct store_cont_policy_row, uuid, STORE_COL_TEXT, 0),
    COL(struct store_cont_policy_row, json, STORE_COL_TEXT, 0),
    COL(struct store_cont_policy_row, updated_ms, STORE_COL_INT64, 0),
};
const struct store_row_desc store_cont_policy_row =
    DESC("continuous policy", struct store_cont_policy_row, NULL, cont_policy_cols);

#define TEXT_NULLABLE(st, field) COL(st, field, STORE_COL_TEXT, STORE_COL_NULLABLE)
static const struct store_col cont_trigger_cols[] = {
    COL(struct store_cont_trigger, id, STORE_COL_INT64, STORE_COL_READ),
    COL(struct store_cont_trigger, service, STORE_COL_TEXT, 0),
    TEXT_NULLABLE(struct store_cont_trigger, instance),
    TEXT_NULLABLE(struct store_cont_trigger, process),
    COL(struct store_cont_trigger, time_ms, STORE_COL_INT64, 0),
    TEXT_EMPTY(struct store_cont_trigger, target),
    COL(struct store_cont_trigger, source, STORE_COL_TEXT, 0),
    TEXT_NULLABLE(struct store_cont_trigger, task_kind),
    TEXT_NULLABLE(struct store_cont_trigger, task_id),
    TEXT_NULLABLE(struct store_cont_trigger, note),
};
const struct store_row_desc store_cont_trigger_row =
    DESC("continuous trigger", struct store_cont_trigger, NULL, cont_trigger_cols);

static const struct store_col cont_cause_cols[] = {
    TEXT_EMPTY(struct store_cont_cause, type),
    TEXT_NULLABLE(struct store_cont_cause, uri),
    COL(struct store_cont_cause, uri_is_regex, STORE_COL_BOOL, 0),
    COL(struct store_cont_cause, threshold, STORE_COL_DOUBLE, 0),
    COL(struct store_cont_cause, current, STORE_COL_DOUBLE, 0),
    COL(struct store_cont_cause, window_s, STORE_COL_INT64, 0),
    COL(struct store_cont_cause, hits, STORE_COL_INT64, 0),
};
const struct store_row_desc store_cont_cause_row =
    DESC("continuous trigger cause", struct store_cont_cause, NULL, cont_cause_cols);

static const struct store_col template_cols[] = {
    COL(struct store_template_row, id, STORE_COL_TEXT, 0),
    COL(struct store_template_row, configuration, STORE_COL_TEXT, 0),
    COL(struct store_template_row, disabled, STORE_COL_BOOL, 0),
    COL(struct store_template_row, updated_ms, STORE_COL_INT64, 0),
};
const struct store_row_desc store_template_row =
    DESC("template", struct store_template_row, NULL, template_cols);

static const struct store_col segment_cols[] = {
    COL(struct store_segment_row, seg, STORE_COL_INT64, 0),
    TEXT_EMPTY(struct store_segment_row, trace_id),
    TEXT_EMPTY(struct store_segment_row, service),
    TEXT_EMPTY(struct store_segment_row, instance),
    TEXT_EMPTY(struct store_segment_row, endpoint),
    COL(struct store_segment_row, start_ms, STORE_COL_INT64, 0),
    COL(struct store_segment_row, end_ms, STORE_COL_INT64, 0),
    COL(struct store_segment_row, received_ms, STORE_COL_INT64, 0),
    COL(struct store_segment_row, spans, STORE_COL_TEXT, 0),
};
const struct store_row_desc store_segment_row =
    DESC("segment", struct store_segment_row, NULL, segment_cols);

/* "" reads as NULL (no SegmentObject, no endpoint), as SQL NULL does. */
#define TEXT_OR_NULL(name, field)                                                                  \
    COL_AS(name, struct store_segment_info, field, STORE_COL_TEXT,                                 \
           STORE_COL_READ | STORE_COL_NULLABLE | STORE_COL_EMPTY)
static const struct store_col segment_info_cols[] = {
    TEXT_OR_NULL("g.trace_id", trace_id),
    TEXT_OR_NULL("COALESCE(NULLIF(g.endpoint, ''), t.endpoint)", endpoint),
    READ_AS("t.dump_period", struct store_segment_info, dump_period, STORE_COL_INT32),
    READ_AS("g.start_ms IS NOT NULL", struct store_segment_info, has_window, STORE_COL_BOOL),
    READ_AS("g.start_ms", struct store_segment_info, start_ms, STORE_COL_INT64),
    READ_AS("g.end_ms", struct store_segment_info, end_ms, STORE_COL_INT64),
};
const struct store_row_desc store_segment_info_row =
    DESC("segment info", struct store_segment_info, NULL, segment_info_cols);

bool store_segment_storable(const struct store_segment *seg)
{
    return seg->segment_id && seg->segment_id[0] && (seg->n_spans == 0 || seg->spans);
}

skp_err store_segment_row_of(const struct store_segment *seg, int64_t received_ms,
                             struct store_segment_row *out)
{
    int64_t start = INT64_MAX, end = INT64_MIN;
    for (size_t i = 0; i < seg->n_spans; i++) {
        if (seg->spans[i].start_ms < start)
            start = seg->spans[i].start_ms;
        if (seg->spans[i].end_ms > end)
            end = seg->spans[i].end_ms;
    }
    if (seg->n_spans == 0)
        start = end = received_ms;
    if (end < start)
        end = start;
    size_t len = 0;
    *out = (struct store_segment_row){
        .trace_id = seg->trace_id,
        .service = seg->service,
        .instance = seg->instance,
        .endpoint = store_segment_endpoint(seg),
        .start_ms = start,
        .end_ms = end,
        .received_ms = received_ms,
        .spans = store_spans_to_text(seg, &len),
    };
    return out->spans ? SKP_OK : SKP_ENOMEM;
}
