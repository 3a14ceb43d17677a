/* command_dispatch.c - executors by command name; the ProfileTaskQuery executor.
 * Java parses a missing numeric arg as 0 and Python crashes its dispatcher on it; we reject the
 * command with a reason and carry on. */
#include "agent/command_dispatch.h"

#include <stdio.h>
#include <string.h>

#include "agent/config.h"

void skp__command_dispatch_init(struct skp__command_dispatch *d)
{
    memset(d, 0, sizeof(*d));
}

skp_err skp__command_dispatch_register(struct skp__command_dispatch *d, const char *name,
                                       skp__command_exec_cb fn, void *ud)
{
    if (d->n >= SKP_COMMAND_EXECUTORS_MAX)
        return SKP_EFULL;
    d->execs[d->n].name = name;
    d->execs[d->n].fn = fn;
    d->execs[d->n].ud = ud;
    d->n++;
    return SKP_OK;
}

bool skp__command_dispatch_knows(const struct skp__command_dispatch *d, const char *name)
{
    for (int i = 0; name && i < d->n; i++)
        if (strcmp(d->execs[i].name, name) == 0)
            return true;
    return false;
}

skp_err skp__command_dispatch_run(const struct skp__command_dispatch *d,
                                  const Skywalking__V3__Command *cmd, char *reason, size_t cap)
{
    for (int i = 0; cmd->command && i < d->n; i++)
        if (strcmp(d->execs[i].name, cmd->command) == 0)
            return d->execs[i].fn(d->execs[i].ud, cmd, reason, cap);
    snprintf(reason, cap, "unsupported command");
    return SKP_ENOTFOUND;
}

const char *skp__command_arg(const Skywalking__V3__Command *cmd, const char *key)
{
    for (size_t i = 0; i < cmd->n_args; i++) {
        const Skywalking__V3__KeyStringValuePair *kv = cmd->args[i];
        if (kv && kv->key && strcmp(kv->key, key) == 0)
            return kv->value;
    }
    return NULL;
}

static skp_err copy_arg(const Skywalking__V3__Command *cmd, const char *key, char *dst, size_t cap,
                        bool may_be_empty, char *reason, size_t rcap)
{
    const char *v = skp__command_arg(cmd, key);
    if (!v || (!may_be_empty && !*v) || strlen(v) >= cap) {
        snprintf(reason, rcap, "malformed command: %s %s", key,
                 v ? "too long or empty" : "missing");
        return SKP_EINVAL;
    }
    memcpy(dst, v, strlen(v) + 1);
    return SKP_OK;
}

static skp_err num_arg(const Skywalking__V3__Command *cmd, const char *key, long long lo,
                       long long hi, long long *out, char *reason, size_t rcap)
{
    const char *v = skp__command_arg(cmd, key);
    long long n = 0;
    if (!v || !skp__config_parse_i64(v, &n) || n < lo || n > hi) {
        snprintf(reason, rcap, "malformed command: %s %s", key, v ? "is not a number" : "missing");
        return SKP_EINVAL;
    }
    *out = n;
    return SKP_OK;
}

/* num_arg for an int field within -lim..lim; *out is written only when the value is good. */
static skp_err int_arg(const Skywalking__V3__Command *cmd, const char *key, long long lim, int *out,
                       char *reason, size_t rcap)
{
    long long n;
    skp_err err = num_arg(cmd, key, -lim, lim, &n, reason, rcap);
    if (!err)
        *out = (int)n;
    return err;
}

skp_err skp__profile_command_parse(const Skywalking__V3__Command *cmd, struct skp__task *out,
                                   char *reason, size_t cap)
{
    long long n;
    skp_err err;
    memset(out, 0, sizeof(*out));
    out->create_time_ms = -1;
    /* CreateTime first, so a command malformed elsewhere still moves the cursor. */
    err = num_arg(cmd, "CreateTime", 0, INT64_MAX, &n, reason, cap);
    if (err)
        return err;
    out->create_time_ms = n;
    err = copy_arg(cmd, "TaskId", out->task_id, sizeof(out->task_id), false, reason, cap);
    if (!err)
        err =
            copy_arg(cmd, "EndpointName", out->endpoint, sizeof(out->endpoint), true, reason, cap);
    if (err)
        return err;
    /* Ranges here only keep the values representable; the task service applies the rules. */
    if ((err = int_arg(cmd, "Duration", 1000000, &out->duration_min, reason, cap)) ||
        (err = int_arg(cmd, "MinDurationThreshold", 1000000000, &out->min_duration_threshold_ms,
                       reason, cap)) ||
        (err = int_arg(cmd, "DumpPeriod", 1000000000, &out->dump_period_ms, reason, cap)) ||
        (err = int_arg(cmd, "MaxSamplingCount", 1000000, &out->max_sampling_count, reason, cap)) ||
        (err = num_arg(cmd, "StartTime", 0, INT64_MAX, &n, reason, cap)))
        return err;
    out->start_time_ms = n;
    return SKP_OK;
}

skp_err skp__profile_command_exec(void *ud, const Skywalking__V3__Command *cmd, char *reason,
                                  size_t cap)
{
    struct skp__task_service *ts = ud;
    struct skp__task t;
    skp_err err = skp__profile_command_parse(cmd, &t, reason, cap);
    if (err) {
        if (t.create_time_ms > ts->last_command_time)
            ts->last_command_time = t.create_time_ms;
        ts->n_rejected++;
        snprintf(ts->last_reject_reason, sizeof(ts->last_reject_reason), "%s", reason);
        return err;
    }
    err = skp__task_service_add(ts, &t);
    if (err)
        snprintf(reason, cap, "%s", ts->last_reject_reason);
    return err;
}
