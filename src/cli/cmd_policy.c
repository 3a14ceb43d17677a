/* cmd_policy.c - continuous profiling from the command line: `skyprof policy set|get|delete`
 * (a service's policy: SkyWalking's input shape as JSON, from a file, stdin or built from
 * --target/--item options) and `skyprof triggers` (what fired, why, and the task it started). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static const char g_usage[] =
    "Usage: skyprof policy set SERVICE (--file FILE | --file - |\n"
    "                          TARGET:TYPE:THRESHOLD:PERIOD:COUNT[:URI]...)\n"
    "                          [--execute S] [--silence S] [--max-per-hour N]\n"
    "       skyprof policy get SERVICE | skyprof policy delete SERVICE | skyprof policy list\n"
    "A continuous-profiling policy: when a check crosses its threshold in COUNT of PERIOD\n"
    "seconds, the target's profiling starts by itself. --file takes SkyWalking's input JSON\n"
    "({\"targets\": [{\"targetType\", \"checkItems\": [...]}], ...}); or give items as\n"
    "  TRACE:ENDPOINT_AVG_RESPONSE_TIME:200:10:3:/checkout   (URI optional; ~ before it = regex)\n"
    "Targets: TRACE PPROF_CPU PPROF_WALL ON_CPU OFF_CPU NETWORK.\n"
    "Types: ENDPOINT_AVG_RESPONSE_TIME ENDPOINT_P90_RESPONSE_TIME ENDPOINT_P99_RESPONSE_TIME\n"
    "ENDPOINT_ERROR_RATE (skyprofd checks them); PROCESS_CPU PROCESS_THREAD_COUNT SYSTEM_LOAD\n"
    "HTTP_ERROR_RATE HTTP_AVG_RESPONSE_TIME (agents check them).\n"
    "See docs/continuous-profiling.md.\n"
    "Global options --server, --token, --timeout, --json are accepted too.\n";

static const char g_trig_usage[] =
    "Usage: skyprof triggers [--service S] [--task ID] [--limit N]\n"
    "Continuous-profiling triggers, newest first: when, target, the task started and why.\n"
    "Global options --server, --token, --timeout, --json are accepted too.\n";

struct pol_opts {
    const char *file;
    const char *execute, *silence, *per_hour;
};

enum { OPT_FILE = 1100, OPT_EXECUTE, OPT_SILENCE, OPT_PER_HOUR, OPT_SERVICE, OPT_TASK, OPT_LIMIT };

static const struct cli_stored_opt g_pol_options[] = {
    CLI_STR_OPT("file", OPT_FILE, struct pol_opts, file),
    CLI_STR_OPT("execute", OPT_EXECUTE, struct pol_opts, execute),
    CLI_STR_OPT("silence", OPT_SILENCE, struct pol_opts, silence),
    CLI_STR_OPT("max-per-hour", OPT_PER_HOUR, struct pol_opts, per_hour),
};

static json_t *read_file_json(const char *path)
{
    json_error_t e;
    json_t *j = strcmp(path, "-") == 0 ? json_loadf(stdin, 0, &e) : json_load_file(path, 0, &e);
    if (!j)
        fprintf(stderr, "skyprof: %s: %s (line %d)\n", strcmp(path, "-") ? path : "stdin", e.text,
                e.line);
    return j;
}

/* "TARGET:TYPE:THRESHOLD:PERIOD:COUNT[:URI]" appended to body's targets. */
static bool add_item(json_t *targets, const char *spec)
{
    char buf[1024];
    if (strlen(spec) >= sizeof(buf))
        return false;
    memcpy(buf, spec, strlen(spec) + 1);
    char *f[6] = {0};
    size_t n = 0;
    char *p = buf;
    while (n < 6 && p) {
        f[n++] = p;
        char *c = n < 6 ? strchr(p, ':') : NULL;
        if (c)
            *c++ = '\0';
        p = c;
    }
    long long period, count;
    if (n < 5 || !cli_parse_int(f[3], 1, 1000000, &period) ||
        !cli_parse_int(f[4], 0, 1000000, &count))
        return false;
    json_t *item = json_pack("{s:s, s:s, s:I, s:I}", "type", f[1], "threshold", f[2], "period",
                             (json_int_t)period, "count", (json_int_t)count);
    if (!item)
        return false;
    if (n == 6 && f[5][0] == '~')
        json_object_set_new(item, "uriRegex", json_string(f[5] + 1));
    else if (n == 6 && f[5][0])
        json_object_set_new(item, "uriList", json_pack("[s]", f[5]));
    size_t i;
    json_t *t;
    json_array_foreach(targets, i, t) {
        if (strcmp(cli_json_str(t, "targetType"), f[0]) == 0) {
            json_array_append_new(json_object_get(t, "checkItems"), item);
            return true;
        }
    }
    json_array_append_new(targets,
                          json_pack("{s:s, s:[o]}", "targetType", f[0], "checkItems", item));
    return true;
}

static bool set_int(json_t *body, const char *key, const char *v)
{
    long long x;
    if (!v)
        return true;
    if (!cli_parse_int(v, 0, 100000000, &x))
        return false;
    json_object_set_new(body, key, json_integer(x));
    return true;
}

static void print_policy(json_t *p)
{
    printf("policy of %s (uuid %.16s…)  execute %llds, silence %llds, at most %lld/hour\n",
           cli_json_str(p, "service"), cli_json_str(p, "uuid"),
           (long long)cli_json_int(p, "executeDuration"),
           (long long)cli_json_int(p, "silenceDuration"),
           (long long)cli_json_int(p, "maxTriggersPerHour"));
    size_t i, k;
    json_t *t, *it;
    json_array_foreach(json_object_get(p, "targets"), i, t) {
        json_array_foreach(json_object_get(t, "checkItems"), k, it) {
            printf("  %-10s %-28s >= %-8s in %lld of %llds", cli_json_str(t, "targetType"),
                   cli_json_str(it, "type"), cli_json_str(it, "threshold"),
                   (long long)cli_json_int(it, "count"), (long long)cli_json_int(it, "period"));
            json_t *ul = json_object_get(it, "uriList");
            size_t u;
            json_t *uv;
            json_array_foreach(ul, u, uv)
                printf("%s%s", u ? "," : "  uri ", json_string_value(uv));
            if (*cli_json_str(it, "uriRegex"))
                printf("  uri ~%s", cli_json_str(it, "uriRegex"));
            printf("\n");
        }
    }
}

static int policy_target(const char *service, char *out, size_t cap)
{
    if (!cli_target(out, cap, "/api/v1/continuous/policies", service, ""))
        return cli_usage_error("service name too long");
    return 0;
}

int cmd_policy(struct cli *c, int argc, char **argv)
{
    struct pol_opts o = {0};
    int prc = cli_parse_table(c, argc, argv, ":h", g_pol_options, CLI_ROWS(g_pol_options), g_usage,
                              "policy", NULL, NULL, &o);
    if (prc != CLI_PARSE_NEXT)
        return prc;
    if (argc - optind < 1)
        return cli_usage_error("policy: set, get, delete or list");
    const char *sub = argv[optind++];
    json_t *out = NULL;
    int rc;
    char target[CLI_HTTP_MAX_TARGET];
    if (strcmp(sub, "list") == 0) {
        rc = cli_api_json(c, "GET", "/api/v1/continuous/policies", NULL, &out);
        if (rc)
            return rc;
        if (c->json) {
            cli_print_json(out);
        } else {
            size_t i;
            json_t *p;
            json_array_foreach(json_object_get(out, "policies"), i, p)
                print_policy(p);
            if (json_array_size(json_object_get(out, "policies")) == 0)
                printf("no policy\n");
        }
        json_decref(out);
        return CLI_EXIT_OK;
    }
    if (argc - optind < 1)
        return cli_usage_error("policy %s: SERVICE needed", sub);
    const char *service = argv[optind++];
    if ((rc = policy_target(service, target, sizeof(target))))
        return rc;
    if (strcmp(sub, "get") == 0 || strcmp(sub, "delete") == 0) {
        if (optind != argc)
            return cli_usage_error("policy %s: only SERVICE", sub);
        rc = cli_api_json(c, sub[0] == 'g' ? "GET" : "DELETE", target, NULL, &out);
        if (rc)
            return rc;
        if (c->json)
            cli_print_json(out);
        else if (sub[0] == 'g')
            print_policy(out);
        else
            printf("policy of %s deleted\n", service);
        json_decref(out);
        return CLI_EXIT_OK;
    }
    if (strcmp(sub, "set") != 0)
        return cli_usage_error("policy: unknown subcommand '%s'", sub);
    json_t *body;
    if (o.file) {
        if (optind != argc)
            return cli_usage_error("policy set: --file or items, not both");
        body = read_file_json(o.file);
        if (!body)
            return CLI_EXIT_USAGE;
    } else {
        if (optind == argc)
            return cli_usage_error("policy set: --file FILE or at least one item");
        body = json_pack("{s:[]}", "targets");
        for (int i = optind; i < argc; i++)
            if (!add_item(json_object_get(body, "targets"), argv[i])) {
                json_decref(body);
                return cli_usage_error("policy set: '%s' is not "
                                       "TARGET:TYPE:THRESHOLD:PERIOD:COUNT[:URI]",
                                       argv[i]);
            }
    }
    if (!set_int(body, "executeDuration", o.execute) ||
        !set_int(body, "silenceDuration", o.silence) ||
        !set_int(body, "maxTriggersPerHour", o.per_hour)) {
        json_decref(body);
        return cli_usage_error("policy set: --execute, --silence, --max-per-hour take integers");
    }
    rc = cli_api_json(c, "PUT", target, body, &out);
    json_decref(body);
    if (rc)
        return rc;
    return cli_print_answer(c, out, print_policy);
}

struct trig_opts {
    const char *service, *task, *limit;
};

static const struct cli_stored_opt g_trig_options[] = {
    CLI_STR_OPT("service", OPT_SERVICE, struct trig_opts, service),
    CLI_STR_OPT("task", OPT_TASK, struct trig_opts, task),
    CLI_STR_OPT("limit", OPT_LIMIT, struct trig_opts, limit),
};

static bool add_query(char *t, size_t cap, const char *key, const char *v)
{
    if (!v)
        return true;
    size_t n = strlen(t);
    if (n + strlen(key) + 3 >= cap)
        return false;
    snprintf(t + n, cap - n, "%s%s=", strchr(t, '?') ? "&" : "?", key);
    return http_path_escape(t, cap, v);
}

int cmd_triggers(struct cli *c, int argc, char **argv)
{
    struct trig_opts o = {0};
    int prc = cli_parse_table(c, argc, argv, ":h", g_trig_options, CLI_ROWS(g_trig_options),
                              g_trig_usage, "triggers", NULL, NULL, &o);
    if (prc != CLI_PARSE_NEXT)
        return prc;
    if (optind != argc)
        return cli_usage_error("triggers: no arguments besides the options");
    char target[CLI_HTTP_MAX_TARGET] = "/api/v1/profile/triggers";
    if (!add_query(target, sizeof(target), "service", o.service) ||
        !add_query(target, sizeof(target), "task", o.task) ||
        !add_query(target, sizeof(target), "limit", o.limit))
        return cli_usage_error("triggers: options too long");
    json_t *out = NULL;
    int rc = cli_api_json(c, "GET", target, NULL, &out);
    if (rc)
        return rc;
    json_t *list = json_object_get(out, "triggers");
    if (c->json) {
        cli_print_json(out);
    } else if (json_array_size(list) == 0) {
        printf("no trigger\n");
    } else {
        size_t i;
        json_t *t;
        char tb[32];
        json_array_foreach(list, i, t) {
            printf("%s  %-16s %-10s %-6s %s\n",
                   cli_fmt_time(cli_json_int(t, "time"), tb, sizeof(tb)),
                   cli_json_str(t, "service"), cli_json_str(t, "target"), cli_json_str(t, "source"),
                   cli_json_str(t, "text"));
            if (*cli_json_str(t, "taskId"))
                printf("    task %s (%s)\n", cli_json_str(t, "taskId"),
                       cli_json_str(t, "taskKind"));
            else if (*cli_json_str(t, "note"))
                printf("    no task: %s\n", cli_json_str(t, "note"));
            size_t k;
            json_t *cz;
            json_array_foreach(json_object_get(t, "causes"), k, cz)
                if (k > 0)
                    printf("    also %s\n", cli_json_str(cz, "text"));
        }
    }
    json_decref(out);
    return CLI_EXIT_OK;
}
