/* http_tasks.c - profile task routes: create (OAP's validation via task_service), list with
 * status and logs, get one, logs, profiled segments. */
#include <event2/http.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/log.h"
#include "server/http/http_int.h"
#include "server/http/http_page.h"
#include "server/tasks/task_service.h"
#include "server/formats/utf8.h"

skp_err http_task_decorate(struct http_ctx *cx, json_t *task)
{
    json_int_t start = json_integer_value(json_object_get(task, "startTime"));
    json_int_t dur = json_integer_value(json_object_get(task, "duration"));
    const char *id = json_string_value(json_object_get(task, "id"));
    bool cancelled = json_integer_value(json_object_get(task, "cancelledTime")) != 0;
    json_object_set_new(
        task, "status",
        json_string(cancelled ? "cancelled" : task_status(start, (int)dur, http_now(cx->api))));
    json_t *logs = json_array();
    if (!logs)
        return SKP_ENOMEM;
    skp_err err = id ? store_list_task_logs(cx->api->store, id, http_task_log_push, logs) : SKP_OK;
    if (err) {
        json_decref(logs);
        return err;
    }
    json_object_set_new(task, "logs", logs);
    err = http_task_trigger(cx, task);
    if (err)
        return err;
    return http_task_explain(cx, task);
}

json_t *http_task_json(const struct store_task *t)
{
    json_t *j = json_pack(
        "{s:o, s:o, s:o, s:I, s:i, s:i, s:i, s:i, s:I}", "id", skp_json_str(t->id), "service",
        skp_json_str(t->service), "endpointName", skp_json_str(t->endpoint), "startTime",
        (json_int_t)t->start_time, "duration", t->duration_min, "minDurationThreshold",
        t->min_duration_threshold, "dumpPeriod", t->dump_period, "maxSamplingCount",
        t->max_sampling_count, "createTime", (json_int_t)t->create_time);
    if (j && t->cancelled_ms)
        json_object_set_new(j, "cancelledTime", json_integer((json_int_t)t->cancelled_ms));
    return j;
}

skp_err http_task_push(void *ud, const struct store_task *t)
{
    return http_push_json(ud, http_task_json(t));
}

json_t *http_task_log_json(const struct store_task_log *l)
{
    char id[512];
    snprintf(id, sizeof(id), "%s_%s_%d_%lld", l->task_id, l->instance, (int)l->op,
             (long long)l->time_ms);
    return json_pack("{s:o, s:o, s:o, s:s, s:I}", "id", skp_json_str(id), "taskId",
                     skp_json_str(l->task_id), "instanceName", skp_json_str(l->instance),
                     "operationType",
                     l->op == STORE_TASK_NOTIFIED ? "NOTIFIED" : "EXECUTION_FINISHED",
                     "operationTime", (json_int_t)l->time_ms);
}

skp_err http_task_log_push(void *ud, const struct store_task_log *l)
{
    return http_push_json(ud, http_task_log_json(l));
}

static bool member_str(struct http_ctx *cx, json_t *body, const char *name, const char **out)
{
    json_t *v = json_object_get(body, name);
    *out = NULL;
    if (!v || json_is_null(v))
        return true; /* missing: the validation rules name it, as OAP does */
    if (!json_is_string(v)) {
        char msg[96];
        snprintf(msg, sizeof(msg), "'%s' must be a string", name);
        http_reply_field_error(cx, 400, name, msg);
        return false;
    }
    const char *s = json_string_value(v);
    if (strlen(s) != json_string_length(v)) {
        char msg[96];
        snprintf(msg, sizeof(msg), "'%s' must not contain NUL characters", name);
        http_reply_field_error(cx, 400, name, msg);
        return false;
    }
    *out = s;
    return true;
}

void http_tasks_create(struct http_ctx *cx)
{
    json_t *body = http_read_json(cx);
    if (!body)
        return;
    struct task_request r = {0};
    if (!json_is_object(body)) {
        http_reply_error(cx, 400, "request body must be a JSON object");
        goto out;
    }
    if (!member_str(cx, body, "service", &r.service) ||
        !member_str(cx, body, "endpointName", &r.endpoint) ||
        !http_body_int(cx, body, "startTime", false, &r.start_time) ||
        !http_body_int(cx, body, "duration", true, &r.duration_min) ||
        !http_body_int(cx, body, "minDurationThreshold", true, &r.min_duration_threshold) ||
        !http_body_int(cx, body, "dumpPeriod", true, &r.dump_period) ||
        !http_body_int(cx, body, "maxSamplingCount", true, &r.max_sampling_count))
        goto out;
    struct task_error e = {0};
    char *id = NULL;
    skp_err err = task_create(cx->api->store, &r, http_now(cx->api), &e, &id);
    if ((err == SKP_EINVAL || err == SKP_EEXIST) && e.reason) {
        cx->api->metrics->tasks_rejected++;
        http_reply_json(cx, 400,
                        json_pack("{s:s,s:s?}", "errorReason", e.reason, "field", e.field));
        goto out;
    }
    if (err) {
        http_reply_store_error(cx, err, "task");
        goto out;
    }
    cx->api->metrics->tasks_created++;
    HTTP_LOG(SKPX_LOG_INFO, cx->req_id,
             "task %s created: service=%s endpoint=%s duration=%" PRId64 "min", id, r.service,
             r.endpoint, r.duration_min);
    http_reply_json(cx, 201, json_pack("{s:s}", "id", id));
    skpx_free(id);
out:
    json_decref(body);
}

/* One page of the task list: rows after the cursor's (start, create, id), in the store's order
 * (start desc, create desc, id desc), at most pg->limit, then one more to know there is more. */
struct task_page {
    struct http_page *pg;
    json_t *arr;
    size_t n;
    bool more;
    char last[HTTP_CURSOR_MAX];
    int64_t c_start, c_create;
};

static skp_err task_page_row(void *ud, const struct store_task *t)
{
    struct task_page *p = ud;
    if (p->pg->has_cursor) {
        int c = t->start_time != p->c_start     ? (t->start_time > p->c_start ? -1 : 1)
                : t->create_time != p->c_create ? (t->create_time > p->c_create ? -1 : 1)
                                                : -strcmp(t->id, p->pg->part[2]);
        if (c <= 0)
            return SKP_OK; /* at or before the cursor */
    }
    if (p->n == p->pg->limit) {
        p->more = true;
        return SKP_EFULL;
    }
    char s[24], c[24];
    snprintf(s, sizeof(s), "%" PRId64, t->start_time);
    snprintf(c, sizeof(c), "%" PRId64, t->create_time);
    const char *parts[] = {s, c, t->id};
    if (!http_cursor_encode(p->last, sizeof(p->last), parts, 3))
        p->last[0] = '\0';
    p->n++;
    return http_task_push(p->arr, t);
}

void http_tasks_list(struct http_ctx *cx)
{
    struct http_page pg;
    if (!http_page_parse(cx, HTTP_PAGE_TASKS_DEFAULT, HTTP_PAGE_TASKS_MAX, &pg))
        return;
    struct task_page tp = {.pg = &pg};
    if (pg.has_cursor) {
        char *e1 = NULL, *e2 = NULL;
        if (pg.n_parts == 3) {
            tp.c_start = strtoll(pg.part[0], &e1, 10);
            tp.c_create = strtoll(pg.part[1], &e2, 10);
        }
        if (pg.n_parts != 3 || !e1 || *e1 || !e2 || *e2) {
            http_reply_field_error(cx, 400, "cursor", "malformed cursor for this listing");
            return;
        }
    }
    json_t *list = json_array();
    tp.arr = list;
    const char *service = http_query(cx, "service");
    const char *endpoint = http_query(cx, "endpointName");
    skp_err err =
        list ? store_list_tasks(cx->api->store, service && *service ? service : NULL,
                                endpoint && *endpoint ? endpoint : NULL, task_page_row, &tp)
             : SKP_ENOMEM;
    if (err == SKP_EFULL)
        err = SKP_OK;
    if (err) {
        json_decref(list);
        http_reply_store_error(cx, err, "tasks");
        return;
    }
    size_t i;
    json_t *t;
    json_array_foreach(list, i, t) {
        err = http_task_decorate(cx, t);
        if (err) {
            json_decref(list);
            http_reply_store_error(cx, err, "task logs");
            return;
        }
    }
    if (tp.more && tp.last[0])
        http_page_set_next(cx, tp.last);
    http_reply_json(cx, 200, list);
}

/* Loads a task or replies 404/503; returns false if it replied. */
static bool load_task(struct http_ctx *cx, const char *id, struct store_task *t)
{
    skp_err err = store_get_task(cx->api->store, id, t);
    if (err) {
        http_reply_store_error(cx, err, "task");
        return false;
    }
    return true;
}

void http_tasks_get(struct http_ctx *cx, const char *id)
{
    struct store_task t = {0};
    if (!load_task(cx, id, &t))
        return;
    json_t *j = http_task_json(&t);
    store_task_cleanup(&t);
    http_reply_answer(cx, j ? http_task_decorate(cx, j) : SKP_ENOMEM, j, "task logs");
}

void http_tasks_logs(struct http_ctx *cx, const char *id)
{
    http_page_task_logs(cx, id);
}

void http_tasks_segments(struct http_ctx *cx, const char *id)
{
    http_page_segments(cx, id);
}
