/* http_continuous.c - continuous-profiling routes: policies per service (PUT with SkyWalking's
 * input shape, 400 {"errorReason"} with OAP's texts; GET; DELETE), the list of policies, the
 * evaluator's recent slot values per check (for the UI's charts), and the triggers with their
 * causes (GET /api/v1/profile/triggers?service=&task=). A policy change is stored, then handed
 * to the evaluator. Loop thread, except the list's pages, which a worker job builds from its
 * own store connection (policies_run). */
#include <math.h>
#include <string.h>

#include "common/alloc.h"

#include "server/continuous/continuous_eval.h"
#include "server/continuous/continuous_policy.h"
#include "server/continuous/continuous_trigger.h"
#include "server/formats/utf8.h"
#include "server/http/http_int.h"
#include "server/http/http_page.h"
#include "server/store/store_continuous.h"

static void reply_reason(struct http_ctx *cx, int code, const char *reason)
{
    http_reply_json(cx, code, json_pack("{s:s}", "errorReason", reason));
}

struct policies_acc {
    json_t *list;
    skp_err err;
    const char *after; /* the cursor: list services after it (NULL = from the first) */
    size_t limit;      /* 0 = all */
    bool more;         /* a row past the page was seen */
    char last[1024];   /* the last service listed, for X-Next-Cursor */
};

static skp_err policy_push(void *ud, const struct store_cont_policy_row *r)
{
    struct policies_acc *a = ud;
    if (a->after && strcmp(r->service, a->after) <= 0)
        return SKP_OK; /* before the page */
    if (a->limit && json_array_size(a->list) == a->limit) {
        a->more = true;
        return SKP_OK;
    }
    if (!skp_utf8_valid(r->service, strlen(r->service))) {
        /* Stored before names were checked at the API edge (issue 25): not listed, so one
         * such row cannot fail the whole list. */
        static struct skpx_log_limit lim;
        skpx_log_limited(&lim, SKPX_LOG_WARN,
                         "policy of a service whose name is not UTF-8 "
                         "(%s) skipped in the list",
                         r->service);
        return SKP_OK;
    }
    struct cont_policy p;
    skp_err err = cont_policy_from_stored(r->service, r->json, &p);
    if (err == SKP_EINVAL)
        return SKP_OK; /* unreadable row: not listed */
    if (err)
        return err;
    json_t *j = cont_policy_input_json(&p);
    cont_policy_cleanup(&p);
    if (j && json_object_set_new(j, "updateTime", json_integer(r->updated_ms))) {
        json_decref(j);
        j = NULL;
    }
    snprintf(a->last, sizeof(a->last), "%s", r->service);
    return http_push_json(a->list, j);
}

/* Pages of the policy list (issue 25): the default holds every policy under the default
 * --max-policies, so the UI reads one page; larger caps page. */
#define POLICIES_PAGE_DEFAULT 1000
#define POLICIES_PAGE_MAX 1000

/* The policy list as a worker job (issue 25: a page of 1000 policies is parsed and serialised
 * off the loop, from the worker's own read-only store connection). */
struct policies_job {
    struct http_job base;
    struct http_page pg; /* parsed in place: its parts point into its buffer */
};

static void policies_destroy(struct http_job *j)
{
    http_response_cleanup(&j->res);
    skpx_free(j);
}

/* Worker thread. */
static void policies_run(struct http_job *j, struct store *st)
{
    struct policies_job *p = (struct policies_job *)j;
    struct policies_acc a = {.list = json_array(),
                             .after = p->pg.has_cursor ? p->pg.part[0] : NULL,
                             .limit = p->pg.limit};
    skp_err err = a.list ? store_cont_list_policies(st, NULL, policy_push, &a) : SKP_ENOMEM;
    if (err) {
        json_decref(a.list);
        http_job_set_store_error(j, err, "policies");
        return;
    }
    http_job_set_json(j, 200, json_pack("{s:o}", "policies", a.list));
    char cursor[HTTP_CURSOR_MAX];
    const char *parts[1] = {a.last};
    if (a.more && http_cursor_encode(cursor, sizeof(cursor), parts, 1))
        j->res.next_cursor = skpx_strdup(cursor); /* after the body: it resets the reply */
}

void http_continuous_list(struct http_ctx *cx)
{
    struct policies_job *p = http_job_new(cx, sizeof(*p), policies_run, policies_destroy);
    if (!p)
        return;
    if (!http_page_parse(cx, POLICIES_PAGE_DEFAULT, POLICIES_PAGE_MAX, &p->pg)) {
        policies_destroy(&p->base);
        return;
    }
    if (p->pg.has_cursor && p->pg.n_parts != 1) {
        policies_destroy(&p->base);
        http_reply_field_error(cx, 400, "cursor", "not a cursor of this listing");
        return;
    }
    http_job_dispatch(cx, &p->base);
}

/* A new JSON array, or NULL after replying 500. */
static json_t *new_list(struct http_ctx *cx)
{
    json_t *list = json_array();
    if (!list)
        http_reply_error(cx, 500, "out of memory");
    return list;
}

static void policy_get(struct http_ctx *cx, const char *service)
{
    struct policies_acc a = {.list = new_list(cx)};
    if (!a.list)
        return;
    skp_err err = store_cont_list_policies(cx->api->store, service, policy_push, &a);
    if (!err && json_array_size(a.list) == 0)
        err = SKP_ENOTFOUND;
    if (err) {
        json_decref(a.list);
        http_reply_store_error(cx, err, "policy");
        return;
    }
    json_t *p = json_incref(json_array_get(a.list, 0));
    json_decref(a.list);
    http_reply_json(cx, 200, p);
}

static void policy_put(struct http_ctx *cx, const char *service)
{
    json_t *in = http_read_json(cx);
    if (!in)
        return;
    struct cont_policy p;
    char reason[256];
    skp_err err = cont_policy_from_input(service, in, &p, reason, sizeof(reason));
    json_decref(in);
    if (err == SKP_EINVAL) {
        reply_reason(cx, 400, reason);
        return;
    }
    if (err) {
        http_reply_error(cx, 500, "out of memory");
        return;
    }
    if (cx->api->cont_eval && !cont_eval_policy_room(cx->api->cont_eval, service)) {
        cont_policy_cleanup(&p);
        cx->api->metrics->policies_refused++;
        reply_reason(cx, 409,
                     "too many continuous-profiling policies: remove one or raise "
                     "skyprofd --max-policies");
        return;
    }
    err = store_cont_put_policy(cx->api->store, service, p.uuid, p.json, http_now(cx->api));
    if (err) {
        cont_policy_cleanup(&p);
        http_reply_store_error(cx, err, "policy");
        return;
    }
    json_t *out = cont_policy_input_json(&p);
    if (cx->api->cont_eval && cont_eval_set_policy(cx->api->cont_eval, &p) != SKP_OK)
        HTTP_LOG(SKPX_LOG_WARN, cx->req_id, "policy of %s stored but not evaluated (no memory)",
                 service);
    cont_policy_cleanup(&p);
    http_reply_json(cx, 200, out);
}

static void policy_delete(struct http_ctx *cx, const char *service)
{
    skp_err err = store_cont_delete_policy(cx->api->store, service);
    if (err) {
        http_reply_store_error(cx, err, "policy");
        return;
    }
    if (cx->api->cont_eval)
        cont_eval_remove_policy(cx->api->cont_eval, service);
    http_reply_json(cx, 200, json_pack("{s:s, s:b}", "service", service, "deleted", 1));
}

void http_continuous_policy(struct http_ctx *cx, const char *service)
{
    if (cx->method == EVHTTP_REQ_PUT)
        policy_put(cx, service);
    else if (cx->method == EVHTTP_REQ_DELETE)
        policy_delete(cx, service);
    else
        policy_get(cx, service);
}

/* ---------------------------------------------------------------- values */

static skp_err series_push(void *ud, const struct cont_series_view *v)
{
    json_t *vals = json_array();
    for (size_t i = 0; vals && i < v->n_values; i++)
        if (json_array_append_new(vals,
                                  isnan(v->values[i]) ? json_null() : json_real(v->values[i])))
            break;
    json_t *o =
        json_pack("{s:s, s:s, s:s, s:f, s:I, s:I, s:I, s:I, s:o*}", "target", v->target, "type",
                  v->type, "uri", v->uri, "threshold", v->threshold, "period",
                  (json_int_t)v->period, "count", (json_int_t)v->count, "firstSlotTime",
                  (json_int_t)v->first_slot_ms, "slotMs", (json_int_t)v->slot_ms, "values", vals);
    return http_push_json(ud, o);
}

void http_continuous_values(struct http_ctx *cx, const char *service)
{
    if (!cx->api->cont_eval) {
        http_reply_error(cx, 404, "no continuous-profiling evaluator in this daemon");
        return;
    }
    json_t *list = new_list(cx);
    if (!list)
        return;
    int64_t now = http_now(cx->api);
    skp_err err = cont_eval_values(cx->api->cont_eval, service, now, series_push, list);
    if (err == SKP_ENOTFOUND)
        err = SKP_OK; /* no server-side item: no series */
    if (err) {
        json_decref(list);
        http_reply_store_error(cx, err, "values");
        return;
    }
    int64_t quiet = cont_eval_quiet_until(cx->api->cont_eval, service);
    http_reply_json(cx, 200,
                    json_pack("{s:s, s:I, s:I, s:o}", "service", service, "now", (json_int_t)now,
                              "quietUntil", (json_int_t)(quiet > now ? quiet : 0), "series", list));
}

/* ---------------------------------------------------------------- triggers */

static json_t *cause_json(const struct store_cont_cause *c)
{
    char text[320];
    continuous_cause_text(c, text, sizeof(text));
    return json_pack("{s:s, s:s?, s:b, s:f, s:f, s:I, s:I, s:s}", "type", c->type, "uri", c->uri,
                     "uriIsRegex", c->uri_is_regex, "threshold", c->threshold, "current",
                     c->current, "windowSeconds", (json_int_t)c->window_s, "hits",
                     (json_int_t)c->hits, "text", text);
}

json_t *http_trigger_json(const struct store_cont_trigger *t)
{
    json_t *causes = json_array();
    for (size_t i = 0; causes && i < t->n_causes; i++)
        if (http_push_json(causes, cause_json(&t->causes[i])) != SKP_OK) {
            json_decref(causes);
            return NULL;
        }
    char text[400] = "";
    if (t->n_causes) {
        memcpy(text, "triggered by ", 13);
        continuous_cause_text(&t->causes[0], text + 13, sizeof(text) - 13);
    }
    return json_pack("{s:I, s:s, s:s?, s:s?, s:I, s:s, s:s, s:s?, s:s?, s:s?, s:o*, s:s}", "id",
                     (json_int_t)t->id, "service", t->service, "instance", t->instance, "process",
                     t->process, "time", (json_int_t)t->time_ms, "target", t->target, "source",
                     t->source, "taskKind", t->task_kind, "taskId", t->task_id, "note", t->note,
                     "causes", causes, "text", text);
}

static skp_err trigger_push(void *ud, const struct store_cont_trigger *t)
{
    return http_push_json(ud, http_trigger_json(t));
}

void http_triggers_list(struct http_ctx *cx)
{
    bool has_limit = false;
    int64_t limit = 0;
    if (!http_query_int(cx, "limit", &has_limit, &limit))
        return;
    if (has_limit && (limit < 1 || limit > 10000)) {
        http_reply_field_error(cx, 400, "limit", "limit must be in 1..10000");
        return;
    }
    json_t *list = new_list(cx);
    if (!list)
        return;
    skp_err err =
        store_cont_list_triggers(cx->api->store, http_query(cx, "service"), http_query(cx, "task"),
                                 (size_t)limit, trigger_push, list);
    if (err) {
        json_decref(list);
        http_reply_store_error(cx, err, "triggers");
        return;
    }
    http_reply_json(cx, 200, json_pack("{s:o}", "triggers", list));
}

static skp_err first_trigger(void *ud, const struct store_cont_trigger *t)
{
    json_t **out = ud;
    *out = http_trigger_json(t);
    return *out ? SKP_OK : SKP_ENOMEM;
}

skp_err http_task_trigger(struct http_ctx *cx, json_t *task)
{
    const char *id = json_string_value(json_object_get(task, "id"));
    if (!id)
        return SKP_OK;
    json_t *trig = NULL;
    skp_err err = store_cont_list_triggers(cx->api->store, NULL, id, 1, first_trigger, &trig);
    if (err || !trig)
        return err;
    json_object_set(task, "triggeredBy", json_object_get(trig, "text"));
    json_object_set_new(task, "trigger", trig);
    return SKP_OK;
}
