/* task_service.c - profile task creation rules and command building (see task_service.h). */
#include "server/tasks/task_service.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"

#define MS_PER_MIN 60000

/* OAP's texts (ProfileTaskMutationService.checkDataSuccess), kept verbatim so users searching
 * for them find SkyWalking's documentation. */
#define R_SERVICE "service cannot be null"
#define R_ENDPOINT "endpoint name cannot be empty"
#define R_DURATION_MIN "monitor duration must greater than 1 minutes"
#define R_THRESHOLD "min duration threshold must greater than or equals zero"
#define R_COUNT_MIN "max sampling count must greater than zero"
#define R_DURATION_MAX "The duration of the monitoring task cannot be greater than 15 minutes"
#define R_DUMP "dump period must be greater than or equals 10 milliseconds"
#define R_COUNT_MAX "max sampling count must less than 10"
#define R_OVERLAP "current service already has monitor task execute at this time"
/* Ours (OAP has no limit but a 512-character column). */
#define R_ENDPOINT_LONG "endpoint name cannot be longer than 512 bytes"
#define R_SERVICE_LONG "service name cannot be longer than 1024 bytes"
#define R_RANGE_INT "value out of range"

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* Trimmed extent of s. */
static void trim(const char *s, const char **b, size_t *n)
{
    const char *e = s + strlen(s);
    while (s < e && is_space(*s))
        s++;
    while (e > s && is_space(e[-1]))
        e--;
    *b = s;
    *n = (size_t)(e - s);
}

static bool fail(struct task_error *e, const char *reason, const char *field)
{
    e->reason = reason;
    e->field = field;
    return false;
}

bool task_validate(const struct task_request *r, struct task_error *e)
{
    const char *ep = NULL;
    size_t ep_len = 0;
    if (r->endpoint)
        trim(r->endpoint, &ep, &ep_len);
    e->reason = NULL;
    e->field = NULL;
    if (!r->service || !r->service[0])
        return fail(e, R_SERVICE, "service");
    if (ep_len == 0)
        return fail(e, R_ENDPOINT, "endpointName");
    if (r->duration_min < TASK_DURATION_MIN_MINUTE)
        return fail(e, R_DURATION_MIN, "duration");
    if (r->min_duration_threshold < 0)
        return fail(e, R_THRESHOLD, "minDurationThreshold");
    if (r->max_sampling_count <= 0)
        return fail(e, R_COUNT_MIN, "maxSamplingCount");
    if (r->duration_min > TASK_DURATION_MAX_MINUTE)
        return fail(e, R_DURATION_MAX, "duration");
    if (r->dump_period < TASK_DUMP_PERIOD_MIN_MS)
        return fail(e, R_DUMP, "dumpPeriod");
    if (r->max_sampling_count >= TASK_MAX_SAMPLING_COUNT)
        return fail(e, R_COUNT_MAX, "maxSamplingCount");
    /* Our own limits come after OAP's so OAP's message wins whenever both apply. */
    if (strlen(r->service) > TASK_SERVICE_MAX)
        return fail(e, R_SERVICE_LONG, "service");
    if (ep_len > TASK_ENDPOINT_MAX)
        return fail(e, R_ENDPOINT_LONG, "endpointName");
    if (r->min_duration_threshold > INT32_MAX)
        return fail(e, R_RANGE_INT, "minDurationThreshold");
    if (r->dump_period > INT32_MAX)
        return fail(e, R_RANGE_INT, "dumpPeriod");
    if (r->start_time > TASK_START_MAX_MS)
        return fail(e, R_RANGE_INT, "startTime");
    return true;
}

bool task_overlaps(const struct store_task *existing, int64_t new_start)
{
    int64_t end = existing->start_time + (int64_t)existing->duration_min * MS_PER_MIN;
    /* A cancelled task's window ended when it was cancelled: the service is free again. */
    if (existing->cancelled_ms && existing->cancelled_ms <= end)
        return existing->cancelled_ms > new_start;
    return end >= new_start;
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

bool task_make_id(int64_t create_time, const char *service, char *out, size_t cap)
{
    size_t n = strlen(service);
    int k = snprintf(out, cap, "%" PRId64 "_", create_time);
    if (k < 0 || (size_t)k >= cap)
        return false;
    size_t need = (size_t)k + (n + 2) / 3 * 4 + 2 + 1;
    if (need > cap)
        return false;
    char *o = out + k;
    const unsigned char *s = (const unsigned char *)service;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        *o++ = b64[v >> 18];
        *o++ = b64[(v >> 12) & 63];
        *o++ = b64[(v >> 6) & 63];
        *o++ = b64[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)s[i] << 16;
        *o++ = b64[v >> 18];
        *o++ = b64[(v >> 12) & 63];
        *o++ = '=';
        *o++ = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8;
        *o++ = b64[v >> 18];
        *o++ = b64[(v >> 12) & 63];
        *o++ = b64[(v >> 6) & 63];
        *o++ = '=';
    }
    memcpy(o, ".1", 3);
    return true;
}

/* How many consecutive create times task_create tries when an id is taken. */
#define TASK_ID_ATTEMPTS 16

static skp_err create_locked(struct store *st, const struct task_request *r, int64_t start,
                             int64_t end, int64_t now_ms, struct task_error *e, char **id_out);

skp_err task_create(struct store *st, const struct task_request *r, int64_t now_ms,
                    struct task_error *e, char **id_out)
{
    *id_out = NULL;
    if (!task_validate(r, e))
        return SKP_EINVAL;
    int64_t start = r->start_time > 0 ? r->start_time : now_ms;
    int64_t end = start + r->duration_min * MS_PER_MIN;

    /* The probe and the insert are one step for every collector sharing the database. */
    skp_err err = store_tasks_lock(st, r->service);
    if (err)
        return err;
    err = create_locked(st, r, start, end, now_ms, e, id_out);
    skp_err end_err = store_tasks_unlock(st, err == SKP_OK);
    if (!err && end_err) {
        skpx_free(*id_out);
        *id_out = NULL;
        err = end_err;
    }
    return err;
}

static skp_err max_create_time(void *ud, const struct store_task *t)
{
    int64_t *m = ud;
    if (t->create_time > *m)
        *m = t->create_time;
    return SKP_OK;
}

/* task_create's probe and insert, under store_tasks_lock. */
static skp_err create_locked(struct store *st, const struct task_request *r, int64_t start,
                             int64_t end, int64_t now_ms, struct task_error *e, char **id_out)
{
    struct store_task prev = {0};
    skp_err err = store_latest_task_before(st, r->service, end, &prev);
    if (err == SKP_OK) {
        bool clash = task_overlaps(&prev, start);
        store_task_cleanup(&prev);
        if (clash) {
            e->reason = R_OVERLAP;
            e->field = "startTime";
            return SKP_EEXIST;
        }
    } else if (err != SKP_ENOTFOUND) {
        return err;
    }

    const char *ep = NULL;
    size_t ep_len = 0;
    trim(r->endpoint, &ep, &ep_len);
    char *endpoint = skpx_strndup(ep, ep_len);
    if (!endpoint)
        return SKP_ENOMEM;
    struct store_task t = {
        .service = (char *)r->service,
        .endpoint = endpoint,
        .start_time = start,
        .duration_min = (int)r->duration_min,
        .min_duration_threshold = (int)r->min_duration_threshold,
        .dump_period = (int)r->dump_period,
        .max_sampling_count = (int)r->max_sampling_count,
    };
    /* A service's create times only grow, in the order the tasks are committed: agents poll
     * with the greatest create time they have seen (lastCommandTime) and get only tasks created
     * after it. now_ms was read before the lock; a collector that read its clock earlier but
     * got the lock later (or whose clock is behind) would otherwise commit a task older than
     * one an agent already saw, and that agent would never get it. */
    int64_t last_create = 0;
    err = store_list_tasks(st, r->service, NULL, max_create_time, &last_create);
    if (err)
        return err;
    if (now_ms <= last_create)
        now_ms = last_create + 1;
    /* Ids are "<createTime>_<service id>" as OAP builds them, so two tasks of one service
     * created in the same millisecond (possible when the first is for a later window) would
     * share an id: take the next free millisecond as the create time instead. */
    char *id_copy = NULL;
    for (int attempt = 0; attempt < TASK_ID_ATTEMPTS; attempt++) {
        char id[TASK_ID_MAX];
        if (!task_make_id(now_ms + attempt, r->service, id, sizeof(id))) {
            err = SKP_EINVAL; /* unreachable: validate bounds the service length */
            break;
        }
        id_copy = skpx_strdup(id);
        if (!id_copy) {
            err = SKP_ENOMEM;
            break;
        }
        t.id = id_copy;
        t.create_time = now_ms + attempt;
        err = store_insert_task(st, &t);
        if (err != SKP_EEXIST)
            break;
        skpx_free(id_copy);
        id_copy = NULL;
    }
    skpx_free(endpoint);
    if (err == SKP_EEXIST) {
        e->reason = "too many tasks created for this service at the same time; retry";
        e->field = "service";
    }
    if (err) {
        skpx_free(id_copy);
        return err;
    }
    *id_out = id_copy;
    return SKP_OK;
}

const char *task_status(int64_t start_time, int duration_min, int64_t now_ms)
{
    if (now_ms < start_time)
        return "pending";
    if (now_ms < start_time + (int64_t)duration_min * MS_PER_MIN)
        return "running";
    return "finished";
}

void task_uuid(char out[37])
{
    uint8_t b[16];
    size_t got = 0;
    while (got < sizeof(b)) {
        ssize_t n = getrandom(b + got, sizeof(b) - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            /* No entropy source: fall back to time mixing; serials only need to differ. */
            uint64_t t = (uint64_t)skpx_mono_ns() ^ ((uint64_t)skpx_now_ms() << 20);
            for (size_t i = got; i < sizeof(b); i++) {
                t = t * 6364136223846793005ull + 1442695040888963407ull;
                b[i] = (uint8_t)(t >> 56);
            }
            break;
        }
        got += (size_t)n;
    }
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    static const char hex[] = "0123456789abcdef";
    char *o = out;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            *o++ = '-';
        *o++ = hex[b[i] >> 4];
        *o++ = hex[b[i] & 15];
    }
    *o = '\0';
}

static void kv_set(Skywalking__V3__KeyStringValuePair *kv, const char *k, const char *v)
{
    skywalking__v3__key_string_value_pair__init(kv);
    kv->key = (char *)k;
    kv->value = (char *)v;
}

void task_command_build(struct task_command *tc, const struct store_task *t)
{
    skywalking__v3__command__init(&tc->cmd);
    task_uuid(tc->serial);
    snprintf(tc->nums[0], sizeof(tc->nums[0]), "%d", t->duration_min);
    snprintf(tc->nums[1], sizeof(tc->nums[1]), "%d", t->min_duration_threshold);
    snprintf(tc->nums[2], sizeof(tc->nums[2]), "%d", t->dump_period);
    snprintf(tc->nums[3], sizeof(tc->nums[3]), "%d", t->max_sampling_count);
    snprintf(tc->nums[4], sizeof(tc->nums[4]), "%" PRId64, t->start_time);
    snprintf(tc->nums[5], sizeof(tc->nums[5]), "%" PRId64, t->create_time);
    /* Order as OAP serialises them: SerialNumber first (spec §3.1). */
    kv_set(&tc->kv[0], "SerialNumber", tc->serial);
    kv_set(&tc->kv[1], "TaskId", t->id);
    kv_set(&tc->kv[2], "EndpointName", t->endpoint);
    kv_set(&tc->kv[3], "Duration", tc->nums[0]);
    kv_set(&tc->kv[4], "MinDurationThreshold", tc->nums[1]);
    kv_set(&tc->kv[5], "DumpPeriod", tc->nums[2]);
    kv_set(&tc->kv[6], "MaxSamplingCount", tc->nums[3]);
    kv_set(&tc->kv[7], "StartTime", tc->nums[4]);
    kv_set(&tc->kv[8], "CreateTime", tc->nums[5]);
    for (int i = 0; i < TASK_COMMAND_N_ARGS; i++)
        tc->kvp[i] = &tc->kv[i];
    tc->cmd.command = (char *)"ProfileTaskQuery";
    tc->cmd.n_args = TASK_COMMAND_N_ARGS;
    tc->cmd.args = tc->kvp;
}
