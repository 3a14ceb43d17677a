/* continuous_policy.c - continuous-profiling policies: the model, validation with OAP's texts and
 * our additions, the three JSON shapes and the SHA-512 uuid (see continuous_policy.h). */
#include "server/continuous/continuous_policy.h"

#include <errno.h>
#include <math.h>
#include <openssl/sha.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/uri_regex.h"

static const char *const k_targets[CONT_TARGET_COUNT] = {
    "ON_CPU", "OFF_CPU", "NETWORK", "TRACE", "PPROF_CPU", "PPROF_WALL",
};
static const char *const k_monitors[CONT_MON_COUNT] = {
    "PROCESS_CPU",
    "PROCESS_THREAD_COUNT",
    "SYSTEM_LOAD",
    "HTTP_ERROR_RATE",
    "HTTP_AVG_RESPONSE_TIME",
    "ENDPOINT_AVG_RESPONSE_TIME",
    "ENDPOINT_P90_RESPONSE_TIME",
    "ENDPOINT_P99_RESPONSE_TIME",
    "ENDPOINT_ERROR_RATE",
};

const char *cont_target_name(enum cont_target t)
{
    return (unsigned)t < CONT_TARGET_COUNT ? k_targets[t] : "?";
}

const char *cont_monitor_name(enum cont_monitor m)
{
    return (unsigned)m < CONT_MON_COUNT ? k_monitors[m] : "?";
}

bool cont_target_parse(const char *s, enum cont_target *out)
{
    for (int i = 0; s && i < CONT_TARGET_COUNT; i++)
        if (strcmp(s, k_targets[i]) == 0) {
            *out = (enum cont_target)i;
            return true;
        }
    return false;
}

bool cont_monitor_parse(const char *s, enum cont_monitor *out)
{
    for (int i = 0; s && i < CONT_MON_COUNT; i++)
        if (strcmp(s, k_monitors[i]) == 0) {
            *out = (enum cont_monitor)i;
            return true;
        }
    return false;
}

bool cont_monitor_server_side(enum cont_monitor m)
{
    return m >= CONT_MON_ENDPOINT_AVG_RESPONSE_TIME && m < CONT_MON_COUNT;
}

static bool monitor_has_uris(enum cont_monitor m)
{
    return m == CONT_MON_HTTP_ERROR_RATE || m == CONT_MON_HTTP_AVG_RESPONSE_TIME ||
           cont_monitor_server_side(m);
}

const char *cont_monitor_unit(enum cont_monitor m)
{
    switch (m) {
    case CONT_MON_PROCESS_CPU:
    case CONT_MON_HTTP_ERROR_RATE:
    case CONT_MON_ENDPOINT_ERROR_RATE:
        return "%";
    case CONT_MON_HTTP_AVG_RESPONSE_TIME:
    case CONT_MON_ENDPOINT_AVG_RESPONSE_TIME:
    case CONT_MON_ENDPOINT_P90_RESPONSE_TIME:
    case CONT_MON_ENDPOINT_P99_RESPONSE_TIME:
        return "ms";
    default:
        return "";
    }
}

void cont_sha512_hex(const void *data, size_t len, char out[129])
{
    unsigned char md[SHA512_DIGEST_LENGTH];
    SHA512(data, len, md);
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof(md); i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[128] = '\0';
}

static void item_cleanup(struct cont_item *it)
{
    skpx_free(it->threshold_text);
    for (size_t i = 0; i < it->n_uris; i++)
        skpx_free(it->uri_list[i]);
    skpx_free(it->uri_list);
    skpx_free(it->uri_regex);
    if (it->has_re)
        regfree(&it->re);
    memset(it, 0, sizeof(*it));
}

void cont_policy_cleanup(struct cont_policy *p)
{
    if (!p)
        return;
    for (size_t t = 0; t < p->n_targets; t++) {
        for (size_t i = 0; i < p->targets[t].n_items; i++)
            item_cleanup(&p->targets[t].items[i]);
        skpx_free(p->targets[t].items);
    }
    SKPX_FREE_ALL(p->targets, p->service, p->json);
    memset(p, 0, sizeof(*p));
}

bool cont_item_matches(const struct cont_item *it, const char *uri)
{
    if (it->n_uris) {
        for (size_t i = 0; i < it->n_uris; i++)
            if (strcmp(it->uri_list[i], uri) == 0)
                return true;
        return false;
    }
    if (it->has_re)
        return regexec(&it->re, uri, 0, NULL, 0) == 0;
    return true;
}

bool cont_policy_has_server_items(const struct cont_policy *p)
{
    for (size_t t = 0; p && t < p->n_targets; t++)
        for (size_t i = 0; i < p->targets[t].n_items; i++)
            if (cont_monitor_server_side(p->targets[t].items[i].type))
                return true;
    return false;
}

/* ---------------------------------------------------------------- validation */

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        snprintf(reason, cap, __VA_ARGS__);                                                        \
        return SKP_EINVAL;                                                                         \
    } while (0)

/* OAP parses the threshold with Integer.parseInt; we accept decimals (strtod, finite, the whole
 * string). */
static bool parse_threshold(const char *s, double *out)
{
    if (!s || !*s)
        return false;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v))
        return false;
    *out = v;
    return true;
}

/* OAP's per-type threshold rule (and ours for ENDPOINT_*); NULL when valid. */
static const char *threshold_rule(enum cont_monitor m, double v)
{
    switch (m) {
    case CONT_MON_PROCESS_CPU:
        return v < 0 || v > 100 ? "the process CPU percent should in [0-100]" : NULL;
    case CONT_MON_PROCESS_THREAD_COUNT:
        return v < 0 ? "the process thread count must bigger than zero" : NULL;
    case CONT_MON_SYSTEM_LOAD:
        return v < 0 ? "the system load must bigger than zero" : NULL;
    case CONT_MON_HTTP_ERROR_RATE:
        return v < 0 || v > 100 ? "the HTTP error rate should in [0-100]" : NULL;
    case CONT_MON_HTTP_AVG_RESPONSE_TIME:
        return v < 0 ? "the HTTP average response time must bigger than zero" : NULL;
    case CONT_MON_ENDPOINT_ERROR_RATE:
        return v < 0 || v > 100 ? "the endpoint error rate should in [0-100]" : NULL;
    default:
        return v < 0 ? "the endpoint response time must bigger than zero" : NULL;
    }
}

static const char *str_field(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* An integer field: absent/null = 0 (as OAP's int), else a JSON integer (or a whole real). */
static bool int_field(const json_t *o, const char *k, int64_t *out, bool *present)
{
    const json_t *v = json_object_get(o, k);
    *present = v && !json_is_null(v);
    *out = 0;
    if (!*present)
        return true;
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return true;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d != floor(d) || fabs(d) > 1e15)
            return false;
        *out = (int64_t)d;
        return true;
    }
    return false;
}

/* The item's fields into *it (type already set); OAP's order: windows, then threshold; then our
 * rules. `where` is "X in Y". */
static skp_err item_from_input(const json_t *ji, struct cont_item *it, const char *where,
                               char *reason, size_t cap)
{
    bool present;
    if (!int_field(ji, "period", &it->period_s, &present))
        FAIL("check %s error: period must be an integer", where);
    if (!int_field(ji, "count", &it->count, &present))
        FAIL("check %s error: count must be an integer", where);
    if (it->period_s <= 0)
        FAIL("check %s error: period must be bigger than zero", where);
    /* OAP tests count < 0; a count of 0 would fire on an empty window, so 0 is refused too. */
    if (it->count <= 0)
        FAIL("check %s error: count must bigger than zero", where);
    if (it->count > it->period_s)
        FAIL("check %s error: count must be equal to or smaller than period", where);
    const json_t *jt = json_object_get(ji, "threshold");
    char num[64];
    const char *ts = NULL;
    if (json_is_string(jt)) {
        ts = json_string_value(jt);
    } else if (json_is_number(jt)) { /* a bare number is taken as its text */
        if (json_is_integer(jt))
            snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(jt));
        else
            snprintf(num, sizeof(num), "%.17g", json_real_value(jt));
        ts = num;
    }
    if (!parse_threshold(ts, &it->threshold))
        FAIL("check %s error: parsing threshold error", where);
    const char *rule = threshold_rule(it->type, it->threshold);
    if (rule)
        FAIL("check %s error: %s", where, rule);
    it->threshold_text = skpx_strdup(ts);
    if (!it->threshold_text)
        return SKP_ENOMEM;
    /* ours */
    if (it->period_s > CONT_PERIOD_MAX_S)
        FAIL("check %s error: period must be at most %d seconds", where, CONT_PERIOD_MAX_S);
    const json_t *ul = json_object_get(ji, "uriList");
    const char *rx = str_field(ji, "uriRegex");
    if (ul && !json_is_null(ul) && !json_is_array(ul))
        FAIL("check %s error: uriList must be a list of strings", where);
    size_t n_ul = json_is_array(ul) ? json_array_size(ul) : 0;
    if (rx && !*rx)
        rx = NULL;
    if ((n_ul || rx) && !monitor_has_uris(it->type))
        FAIL("check %s error: uriList and uriRegex apply to HTTP and ENDPOINT items only", where);
    if (n_ul && rx)
        FAIL("check %s error: uriList and uriRegex cannot be set at the same time", where);
    if (n_ul > CONT_MAX_URIS)
        FAIL("check %s error: uriList has more than %d entries", where, CONT_MAX_URIS);
    if (n_ul) {
        it->uri_list = skpx_calloc(n_ul, sizeof(char *));
        if (!it->uri_list)
            return SKP_ENOMEM;
        for (size_t i = 0; i < n_ul; i++) {
            const json_t *u = json_array_get(ul, i);
            if (!json_is_string(u) || !json_string_length(u) ||
                json_string_length(u) > CONT_URI_MAX)
                FAIL("check %s error: uriList entries must be non-empty strings of at most %d "
                     "bytes",
                     where, CONT_URI_MAX);
            it->uri_list[i] = skpx_strdup(json_string_value(u));
            if (!it->uri_list[i])
                return SKP_ENOMEM;
            it->n_uris = i + 1;
        }
    }
    if (rx) {
        if (strlen(rx) > CONT_URI_MAX)
            FAIL("check %s error: uriRegex longer than %d bytes", where, CONT_URI_MAX);
        char why[160];
        skp_err re_err = skpx_uri_regex_compile(&it->re, rx, why, sizeof(why));
        if (re_err == SKP_ENOMEM)
            return SKP_ENOMEM;
        if (re_err)
            FAIL("check %s error: parsing uriRegex error: %s", where, why);
        it->has_re = true;
        it->uri_regex = skpx_strdup(rx);
        if (!it->uri_regex)
            return SKP_ENOMEM;
    }
    return SKP_OK;
}

static json_t *stored_json(const struct cont_policy *p);

static skp_err finish(struct cont_policy *p)
{
    json_t *j = stored_json(p);
    if (!j)
        return SKP_ENOMEM;
    /* json_dumps allocates with jansson's allocator (skpx_malloc in skyprofd, not in every test):
     * copy into our own buffer and give jansson's back to it. */
    char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    if (!text)
        return SKP_ENOMEM;
    json_malloc_t jm;
    json_free_t jf;
    json_get_alloc_funcs(&jm, &jf);
    p->json = skpx_strdup(text);
    jf(text);
    if (!p->json)
        return SKP_ENOMEM;
    cont_sha512_hex(p->json, strlen(p->json), p->uuid);
    return SKP_OK;
}

/* The policy's bounded integers: JSON name, member, default, range, unit of the error text. */
static const struct bounded_field {
    const char *name;
    size_t offset; /* of an int64_t in struct cont_policy */
    int64_t dflt, lo, hi;
    const char *unit; /* "" or " seconds" */
} bounded_fields[] = {
    {"executeDuration", offsetof(struct cont_policy, execute_s), CONT_EXECUTE_DEFAULT_S, 1,
     CONT_EXECUTE_MAX_S, " seconds"},
    {"silenceDuration", offsetof(struct cont_policy, silence_s), CONT_SILENCE_DEFAULT_S, 0,
     CONT_SILENCE_MAX_S, " seconds"},
    {"maxTriggersPerHour", offsetof(struct cont_policy, max_per_hour), CONT_PER_HOUR_DEFAULT, 1,
     CONT_PER_HOUR_MAX, ""},
};

static skp_err durations(const json_t *in, struct cont_policy *p, char *reason, size_t cap)
{
    for (size_t i = 0; i < sizeof(bounded_fields) / sizeof(bounded_fields[0]); i++) {
        const struct bounded_field *f = &bounded_fields[i];
        int64_t *v = (int64_t *)((char *)p + f->offset);
        bool present;
        if (!int_field(in, f->name, v, &present))
            FAIL("%s must be an integer%s", f->name, *f->unit ? " (seconds)" : "");
        if (!present)
            *v = f->dflt;
        if (*v < f->lo || *v > f->hi)
            FAIL("%s must be in [%lld-%lld]%s", f->name, (long long)f->lo, (long long)f->hi,
                 f->unit);
    }
    return SKP_OK;
}

static skp_err from_input(const char *service, const json_t *in, struct cont_policy *p,
                          char *reason, size_t cap)
{
    if (!service || !*service)
        FAIL("the service id cannot be empty");
    p->service = skpx_strdup(service);
    if (!p->service)
        return SKP_ENOMEM;
    if (!json_is_object(in))
        FAIL("the policy must be a JSON object");
    const json_t *targets = json_object_get(in, "targets");
    if (targets && !json_is_null(targets) && !json_is_array(targets))
        FAIL("targets must be a list");
    size_t nt = json_is_array(targets) ? json_array_size(targets) : 0;
    if (nt > CONT_TARGET_COUNT * 2)
        FAIL("too many targets");
    p->targets = skpx_calloc(nt ? nt : 1, sizeof(*p->targets));
    if (!p->targets)
        return SKP_ENOMEM;
    bool seen_t[CONT_TARGET_COUNT] = {0};
    for (size_t t = 0; t < nt; t++) {
        const json_t *jt = json_array_get(targets, t);
        const char *tn = str_field(jt, "targetType");
        enum cont_target tt;
        if (!cont_target_parse(tn, &tt))
            FAIL("unknown target type: %s", tn ? tn : "(none)");
        if (seen_t[tt])
            FAIL("contains multiple same target type: %s", tn);
        seen_t[tt] = true;
        struct cont_target_spec *ts = &p->targets[p->n_targets++];
        ts->type = tt;
        const json_t *items = json_object_get(jt, "checkItems");
        size_t ni = json_is_array(items) ? json_array_size(items) : 0;
        if (ni > CONT_MON_COUNT * 2)
            FAIL("too many check items in %s", tn);
        ts->items = skpx_calloc(ni ? ni : 1, sizeof(*ts->items));
        if (!ts->items)
            return SKP_ENOMEM;
        bool seen_m[CONT_MON_COUNT] = {0};
        for (size_t i = 0; i < ni; i++) {
            const json_t *ji = json_array_get(items, i);
            const char *mn = str_field(ji, "type");
            enum cont_monitor mt;
            if (!cont_monitor_parse(mn, &mt))
                FAIL("unknown monitor type: %s", mn ? mn : "(none)");
            if (seen_m[mt])
                FAIL("contains multiple same monitor type %s in %s", mn, tn);
            seen_m[mt] = true;
            struct cont_item *it = &ts->items[ts->n_items++];
            it->type = mt;
            char where[96];
            snprintf(where, sizeof(where), "%s in %s", mn, tn);
            skp_err err = item_from_input(ji, it, where, reason, cap);
            if (err)
                return err;
        }
    }
    skp_err err = durations(in, p, reason, cap);
    if (err)
        return err;
    return finish(p);
}

skp_err cont_policy_from_input(const char *service, const json_t *in, struct cont_policy *out,
                               char *reason, size_t cap)
{
    memset(out, 0, sizeof(*out));
    if (cap)
        reason[0] = '\0';
    skp_err err = from_input(service, in, out, reason, cap);
    if (err)
        cont_policy_cleanup(out);
    return err;
}

/* ---------------------------------------------------------------- JSON out */

static json_t *item_json(const struct cont_item *it, bool agent)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    int bad =
        json_object_set_new(o, agent ? "Threshold" : "threshold", json_string(it->threshold_text));
    bad |= json_object_set_new(o, agent ? "Period" : "period", json_integer(it->period_s));
    bad |= json_object_set_new(o, agent ? "Count" : "count", json_integer(it->count));
    if (it->n_uris) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < it->n_uris; i++)
            bad |= json_array_append_new(a, json_string(it->uri_list[i]));
        bad |= json_object_set_new(o, agent ? "URIList" : "uriList", a);
    }
    if (it->uri_regex)
        bad |= json_object_set_new(o, agent ? "URIRegex" : "uriRegex", json_string(it->uri_regex));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* {"<TARGET>": {"<TYPE>": item}} with agent or stored key names; agent keeps agent-side items
 * only (and drops targets left empty). */
static json_t *checkers_json(const struct cont_policy *p, bool agent)
{
    json_t *tc = json_object();
    int bad = tc ? 0 : 1;
    for (size_t t = 0; !bad && t < p->n_targets; t++) {
        const struct cont_target_spec *ts = &p->targets[t];
        json_t *m = json_object();
        bad |= m ? 0 : 1;
        for (size_t i = 0; m && !bad && i < ts->n_items; i++) {
            if (agent && cont_monitor_server_side(ts->items[i].type))
                continue;
            bad |= json_object_set_new(m, cont_monitor_name(ts->items[i].type),
                                       item_json(&ts->items[i], agent));
        }
        if (m && agent && json_object_size(m) == 0)
            json_decref(m);
        else
            bad |= json_object_set_new(tc, cont_target_name(ts->type), m);
    }
    if (bad) {
        json_decref(tc);
        return NULL;
    }
    return tc;
}

static json_t *stored_json(const struct cont_policy *p)
{
    json_t *tc = checkers_json(p, false);
    if (!tc)
        return NULL;
    return json_pack("{s:o, s:I, s:I, s:I}", "targetCheckers", tc, "executeDuration",
                     (json_int_t)p->execute_s, "silenceDuration", (json_int_t)p->silence_s,
                     "maxTriggersPerHour", (json_int_t)p->max_per_hour);
}

json_t *cont_policy_input_json(const struct cont_policy *p)
{
    json_t *targets = json_array();
    int bad = targets ? 0 : 1;
    for (size_t t = 0; !bad && t < p->n_targets; t++) {
        const struct cont_target_spec *ts = &p->targets[t];
        json_t *items = json_array();
        bad |= items ? 0 : 1;
        for (size_t i = 0; !bad && i < ts->n_items; i++) {
            json_t *o = item_json(&ts->items[i], false);
            bad |= !o || json_object_set_new(o, "type",
                                             json_string(cont_monitor_name(ts->items[i].type)));
            bad |= json_array_append_new(items, o);
        }
        bad |= json_array_append_new(
            targets,
            json_pack("{s:s, s:o}", "targetType", cont_target_name(ts->type), "checkItems", items));
    }
    if (bad) {
        json_decref(targets);
        return NULL;
    }
    return json_pack("{s:s, s:s, s:o, s:I, s:I, s:I}", "service", p->service, "uuid", p->uuid,
                     "targets", targets, "executeDuration", (json_int_t)p->execute_s,
                     "silenceDuration", (json_int_t)p->silence_s, "maxTriggersPerHour",
                     (json_int_t)p->max_per_hour);
}

json_t *cont_policy_agent_json(const char *service, const struct cont_policy *p)
{
    if (!p)
        return json_pack("{s:s, s:s}", "ServiceName", service, "UUID", "");
    json_t *prof = checkers_json(p, true);
    if (!prof)
        return NULL;
    /* ExecuteDuration/SilenceDuration (s): our extension, read by skyprof's agents (rover has
     * its own settings and ignores unknown keys). */
    return json_pack("{s:s, s:s, s:o, s:I, s:I}", "ServiceName", service, "UUID", p->uuid,
                     "Profiling", prof, "ExecuteDuration", (json_int_t)p->execute_s,
                     "SilenceDuration", (json_int_t)p->silence_s);
}

/* ---------------------------------------------------------------- from stored */

/* The stored JSON back into the input shape, then validated like an input (so a stored policy
 * is rebuilt with the same rules, and its uuid recomputed equal). */
skp_err cont_policy_from_stored(const char *service, const char *json, struct cont_policy *out)
{
    memset(out, 0, sizeof(*out));
    json_t *j = json_loads(json, 0, NULL);
    if (!j)
        return SKP_EINVAL;
    json_t *in = json_object();
    json_t *targets = json_array();
    skp_err err = in && targets ? SKP_OK : SKP_ENOMEM;
    const json_t *tc = json_object_get(j, "targetCheckers");
    const char *tk;
    json_t *tv;
    json_object_foreach((json_t *)tc, tk, tv) {
        json_t *items = json_array();
        const char *mk;
        json_t *mv;
        json_object_foreach(tv, mk, mv) {
            json_t *c = json_deep_copy(mv);
            if (!c || json_object_set_new(c, "type", json_string(mk)) ||
                json_array_append_new(items, c))
                err = SKP_ENOMEM;
        }
        if (json_array_append_new(targets,
                                  json_pack("{s:s, s:o}", "targetType", tk, "checkItems", items)))
            err = SKP_ENOMEM;
    }
    if (!err &&
        (json_object_set_new(in, "targets", targets) ||
         json_object_set(in, "executeDuration", json_object_get(j, "executeDuration")) ||
         json_object_set(in, "silenceDuration", json_object_get(j, "silenceDuration")) ||
         json_object_set(in, "maxTriggersPerHour", json_object_get(j, "maxTriggersPerHour"))))
        err = SKP_EINVAL;
    else if (err)
        json_decref(targets);
    char reason[256];
    if (!err)
        err = cont_policy_from_input(service, in, out, reason, sizeof(reason));
    json_decref(in);
    json_decref(j);
    return err;
}
