/* config.c - agent configuration: defaults (SkyWalking's), environment (SkyWalking's variable
 * names, plus SKYPROF_* for our extras) and validation. Never writes the environment. */
#include "agent/config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "agent/transport.h"
#include "common/log.h"

static void set_str(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src);
}

void skyprof_config_init_defaults(struct skyprof_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    set_str(cfg->service, sizeof(cfg->service), "skyprof-service");
    set_str(cfg->backend, sizeof(cfg->backend), SKYPROF_DEFAULT_BACKEND);
    set_str(cfg->language, sizeof(cfg->language), "C");
    cfg->poll_interval_ms = SKYPROF_DEFAULT_POLL_INTERVAL_MS;
    cfg->heartbeat_period_ms = SKYPROF_DEFAULT_HEARTBEAT_MS;
    cfg->max_parallel = SKYPROF_DEFAULT_MAX_PARALLEL;
    cfg->max_stack_depth = SKYPROF_DEFAULT_MAX_STACK_DEPTH;
    cfg->snapshot_buffer_size = SKYPROF_DEFAULT_SNAPSHOT_BUFFER;
    cfg->segment_buffer_size = SKYPROF_DEFAULT_SEGMENT_BUFFER;
    cfg->max_profiling_ms = SKYPROF_DEFAULT_MAX_PROFILING_MS;
    cfg->min_dump_period_ms = SKYPROF_DEFAULT_MIN_DUMP_PERIOD_MS;
    cfg->profile_active = true;
    cfg->report_segments = true;
    cfg->restart_in_child = false;
    cfg->log_level = SKYPROF_LOG_WARN;
}

int skp__config_parse_bool(const char *s)
{
    static const char *const no[] = {"false", "0", "no", "off"};
    static const char *const yes[] = {"true", "1", "yes", "on"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(s, no[i]) == 0)
            return 0;
        if (strcasecmp(s, yes[i]) == 0)
            return 1;
    }
    return -1;
}

bool skp__config_parse_i64(const char *s, long long *out)
{
    if (!s || !*s)
        return false;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end != '\0')
        return false;
    *out = v;
    return true;
}

/* One environment variable -> one field. */
enum env_kind { ENV_STR, ENV_SECONDS, ENV_MS, ENV_INT, ENV_BOOL, ENV_LOGLEVEL, ENV_BACKEND };

struct env_field {
    const char *name;
    enum env_kind kind;
    size_t offset;
    size_t size;
};

#define F(name, kind, field)                                                                       \
    {                                                                                              \
        name, kind, offsetof(struct skyprof_config, field),                                        \
            sizeof(((struct skyprof_config *)0)->field)                                            \
    }

static const struct env_field env_fields[] = {
    F("SW_AGENT_NAME", ENV_STR, service),
    F("SW_AGENT_INSTANCE_NAME", ENV_STR, instance),
    F("SW_AGENT_COLLECTOR_BACKEND_SERVICES", ENV_BACKEND, backend),
    F("SW_AGENT_AUTHENTICATION", ENV_STR, authentication),
    F("SW_AGENT_PROFILE_ACTIVE", ENV_BOOL, profile_active),
    F("SW_AGENT_PROFILE_MAX_PARALLEL", ENV_INT, max_parallel),
    F("SW_AGENT_PROFILE_DUMP_MAX_STACK_DEPTH", ENV_INT, max_stack_depth),
    F("SW_AGENT_PROFILE_SNAPSHOT_TRANSPORT_BUFFER_SIZE", ENV_INT, snapshot_buffer_size),
    F("SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL", ENV_SECONDS, poll_interval_ms),
    F("SW_AGENT_COLLECTOR_HEARTBEAT_PERIOD", ENV_SECONDS, heartbeat_period_ms),
    F("SKYPROF_LANGUAGE", ENV_STR, language),
    F("SKYPROF_MAX_PROFILING_MS", ENV_MS, max_profiling_ms),
    F("SKYPROF_MIN_DUMP_PERIOD_MS", ENV_MS, min_dump_period_ms),
    F("SKYPROF_SEGMENT_BUFFER_SIZE", ENV_INT, segment_buffer_size),
    F("SKYPROF_REPORT_SEGMENTS", ENV_BOOL, report_segments),
    F("SKYPROF_RESTART_IN_CHILD", ENV_BOOL, restart_in_child),
    F("SKYPROF_LOG_LEVEL", ENV_LOGLEVEL, log_level),
};

static skp_err apply_env(struct skyprof_config *cfg, const struct env_field *f, const char *v)
{
    char *field = (char *)cfg + f->offset;
    long long n = 0;
    int b;
    switch (f->kind) {
    case ENV_BACKEND: {
        /* SkyWalking's comma-separated list of collectors, kept whole: the transport connects to
         * one and fails over to the next (transport_grpc.c). */
        char targets[SKP_TRANSPORT_MAX_TARGETS][256];
        if (strlen(v) >= f->size ||
            skp__transport_split_targets(v, targets, SKP_TRANSPORT_MAX_TARGETS) <= 0)
            return SKP_EINVAL;
        memcpy(field, v, strlen(v) + 1);
        return SKP_OK;
    }
    case ENV_STR:
        if (strlen(v) >= f->size)
            return SKP_EINVAL;
        memcpy(field, v, strlen(v) + 1);
        return SKP_OK;
    case ENV_SECONDS:
    case ENV_MS:
        if (!skp__config_parse_i64(v, &n) || n <= 0 || n > 86400000LL)
            return SKP_EINVAL;
        *(int64_t *)(void *)field = f->kind == ENV_SECONDS ? (int64_t)n * 1000 : (int64_t)n;
        return SKP_OK;
    case ENV_INT:
        if (!skp__config_parse_i64(v, &n) || n <= 0 || n > 1000000)
            return SKP_EINVAL;
        *(int *)(void *)field = (int)n;
        return SKP_OK;
    case ENV_BOOL:
        b = skp__config_parse_bool(v);
        if (b < 0)
            return SKP_EINVAL;
        *(bool *)(void *)field = b != 0;
        return SKP_OK;
    case ENV_LOGLEVEL:
        b = skpx_log_level_parse(v);
        if (b < 0)
            return SKP_EINVAL;
        *(enum skyprof_log_level *)(void *)field = (enum skyprof_log_level)b;
        return SKP_OK;
    }
    return SKP_EINVAL;
}

skp_err skyprof_config_from_env(struct skyprof_config *cfg)
{
    skp_err first = SKP_OK;
    for (size_t i = 0; i < sizeof(env_fields) / sizeof(env_fields[0]); i++) {
        const char *v = getenv(env_fields[i].name);
        if (!v)
            continue;
        skp_err err = apply_env(cfg, &env_fields[i], v);
        if (err) {
            SKPX_WARN("skyprof: ignoring malformed %s", env_fields[i].name);
            if (!first)
                first = err;
        }
    }
    return first;
}

static bool str_ok(const char *s, size_t cap, bool may_be_empty)
{
    size_t n = strnlen(s, cap);
    return n < cap && (may_be_empty || n > 0);
}

skp_err skyprof_config_validate(const struct skyprof_config *cfg)
{
    if (!cfg)
        return SKP_EINVAL;
    if (!str_ok(cfg->service, sizeof(cfg->service), false) ||
        !str_ok(cfg->instance, sizeof(cfg->instance), true) ||
        !str_ok(cfg->backend, sizeof(cfg->backend), false) ||
        !str_ok(cfg->authentication, sizeof(cfg->authentication), true) ||
        !str_ok(cfg->language, sizeof(cfg->language), true))
        return SKP_EINVAL;
    char targets[SKP_TRANSPORT_MAX_TARGETS][256];
    if (skp__transport_split_targets(cfg->backend, targets, SKP_TRANSPORT_MAX_TARGETS) <= 0)
        return SKP_EINVAL;
    if (cfg->poll_interval_ms < 10 || cfg->heartbeat_period_ms < 10)
        return SKP_EINVAL;
    if (cfg->max_parallel < 1 || cfg->max_parallel > SKYPROF_MAX_PARALLEL_CAP)
        return SKP_EINVAL;
    if (cfg->max_stack_depth < 1 || cfg->max_stack_depth > SKYPROF_MAX_STACK_DEPTH_CAP)
        return SKP_EINVAL;
    if (cfg->snapshot_buffer_size < 1 || cfg->snapshot_buffer_size > 1000000)
        return SKP_EINVAL;
    if (cfg->segment_buffer_size < 1 || cfg->segment_buffer_size > 1000000)
        return SKP_EINVAL;
    if (cfg->max_profiling_ms < 1 || cfg->min_dump_period_ms < 1)
        return SKP_EINVAL;
    if ((int)cfg->log_level < SKYPROF_LOG_ERROR || cfg->log_level > SKYPROF_LOG_DEBUG)
        return SKP_EINVAL;
    if (cfg->n_properties > 0 && !cfg->properties)
        return SKP_EINVAL;
    for (size_t i = 0; i < cfg->n_properties; i++)
        if (!cfg->properties[i].key || !cfg->properties[i].value)
            return SKP_EINVAL;
    return SKP_OK;
}

void skp__config_random_hex(char *buf, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char raw[16];
    if (getrandom(raw, sizeof(raw), GRND_NONBLOCK) != (ssize_t)sizeof(raw)) {
        /* No entropy yet (early boot): mix time and pid; uniqueness is what matters. */
        uint64_t a = (uint64_t)skpx_mono_ns() ^ ((uint64_t)getpid() << 32);
        uint64_t b = (uint64_t)skpx_now_ms() * 2654435761u ^ (uint64_t)(uintptr_t)buf;
        memcpy(raw, &a, 8);
        memcpy(raw + 8, &b, 8);
    }
    size_t j = 0;
    for (size_t i = 0; i < sizeof(raw) && j + 2 < cap; i++) {
        buf[j++] = hex[raw[i] >> 4];
        buf[j++] = hex[raw[i] & 15];
    }
    if (cap)
        buf[j < cap ? j : cap - 1] = '\0';
}

void skp__config_gen_instance(char *buf, size_t cap)
{
    char id[33];
    char host[128];
    skp__config_random_hex(id, sizeof(id));
    if (gethostname(host, sizeof(host)) != 0)
        snprintf(host, sizeof(host), "localhost");
    host[sizeof(host) - 1] = '\0';
    snprintf(buf, cap, "%s@%s", id, host);
}
