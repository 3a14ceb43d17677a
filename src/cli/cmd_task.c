/* cmd_task.c - `skyprof task create|list|show|logs|cancel`. Tables for people, --json for scripts;
 * `task create` prints only the new id on stdout so `id=$(skyprof task create ...)` works. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"

static const char g_task_usage[] =
    "Usage:\n"
    "  skyprof task create --service S --endpoint E [options]\n"
    "      --duration MIN            monitor duration in minutes, 1-15 (default 5)\n"
    "      --threshold MS            min segment duration to profile, ms (default 0)\n"
    "      --dump-period MS          sampling period, ms, >= 10 (default 10)\n"
    "      --max-sampling-count N    segments to profile per instance, 1-9 (default 5)\n"
    "      --start TIME              'now' (default), ms since the epoch, or local\n"
    "                                'YYYY-MM-DD HH:MM[:SS]'\n"
    "      --wait                    after printing the id, wait until an instance of the\n"
    "                                service fetched the task (agents poll every 20 s by\n"
    "                                default); exit 6 with the instances seen if none did\n"
    "      --wait-timeout S          how long --wait waits, seconds (default 60)\n"
    "  skyprof task list [--service S] [--endpoint E]\n"
    "  skyprof task show ID\n"
    "  skyprof task logs ID\n"
    "  skyprof task cancel ID      end the task now (agents are no longer handed it)\n"
    "Global options --server, --token, --timeout, --json are accepted too.\n";

/* The filters of `task list` (only list takes them; show/logs pass none). */
struct task_filter {
    const char *service, *endpoint;
};

static const struct cli_stored_opt g_filter_options[] = {
    CLI_STR_OPT("service", 's', struct task_filter, service),
    CLI_STR_OPT("endpoint", 'e', struct task_filter, endpoint),
};

/* Parses options common to the read-only subcommands; --service/--endpoint only when `filter`
 * is not NULL. Returns -1 to continue, else an exit code. */
static int parse_simple(struct cli *c, int argc, char **argv, struct task_filter *filter)
{
    return cli_parse_table(c, argc, argv, ":h", g_filter_options, CLI_ROWS(g_filter_options),
                           g_task_usage, "task", argv[0], NULL, filter);
}

static const char *status_of(json_t *t)
{
    const char *s = cli_json_str(t, "status");
    return *s ? s : "-";
}

static const char *service_of(json_t *t)
{
    const char *s = cli_json_str(t, "service");
    return *s ? s : cli_json_str(t, "serviceName");
}

static void print_logs(json_t *logs)
{
    /* Grouped by instance, in the order instances first appear. */
    size_t n = json_array_size(logs);
    if (n == 0) {
        printf("  (no logs: no instance has fetched the task yet)\n");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const char *inst = cli_json_str(json_array_get(logs, i), "instanceName");
        bool seen = false;
        for (size_t k = 0; k < i && !seen; k++)
            seen = strcmp(inst, cli_json_str(json_array_get(logs, k), "instanceName")) == 0;
        if (seen)
            continue;
        printf("  %s\n", *inst ? inst : "(unknown instance)");
        for (size_t k = i; k < n; k++) {
            json_t *l = json_array_get(logs, k);
            if (strcmp(inst, cli_json_str(l, "instanceName")) != 0)
                continue;
            char tb[32];
            printf("    %-19s  %s\n",
                   cli_fmt_time(cli_json_int(l, "operationTime"), tb, sizeof(tb)),
                   cli_json_str(l, "operationType"));
        }
    }
}

struct create_opts {
    const char *service, *endpoint;
    long long duration, threshold, period, max_count, wait_s;
    int64_t start_ms;
    bool wait;
};

/* Numbers are checked for being numbers only: the server validates ranges and its reasons are
 * what the user should see (exit code 1). */
#define CREATE_INT_OPT(name, opt, member)                                                          \
    CLI_INT_OPT(name, opt, struct create_opts, member, -1000000000LL, 1000000000LL,                \
                "--" name ": expected an integer, got '%s'")
static const struct cli_stored_opt g_create_options[] = {
    CLI_STR_OPT("service", 's', struct create_opts, service),
    CLI_STR_OPT("endpoint", 'e', struct create_opts, endpoint),
    CREATE_INT_OPT("duration", 'd', duration),
    CREATE_INT_OPT("threshold", 't', threshold),
    CREATE_INT_OPT("dump-period", 'p', period),
    CREATE_INT_OPT("max-sampling-count", 'm', max_count),
    CLI_OWN_OPT("start", 'S'),
    CLI_FLAG_OPT("wait", 'w', struct create_opts, wait),
    CLI_OWN_OPT("wait-timeout", 'W'),
};

static int create_option(void *ud, int opt, const char *arg)
{
    struct create_opts *o = ud;
    switch (opt) {
    case 'W':
        if (!cli_parse_int(arg, 1, 3600, &o->wait_s))
            return cli_usage_error("--wait-timeout: expected seconds (1-3600), got '%s'", arg);
        o->wait = true;
        return CLI_PARSE_NEXT;
    case 'S':
        if (!cli_parse_time(arg, &o->start_ms))
            return cli_usage_error("--start: expected 'now', ms since the epoch or "
                                   "'YYYY-MM-DD HH:MM[:SS]', got '%s'",
                                   arg);
        return CLI_PARSE_NEXT;
    default:
        return CLI_PARSE_UNKNOWN;
    }
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* GET /api/v1/profile/tasks/{id}[suffix]. */
static int get_task_thing(struct cli *c, const char *id, const char *suffix, json_t **out);

/* After the timeout of --wait: which instances of `service` the server knows and when each was
 * last heard of, and how often agents poll. Returns CLI_EXIT_NODATA. */
static int wait_timed_out(struct cli *c, const char *id, const char *service, long long secs)
{
    fprintf(stderr, "skyprof: no instance of %s fetched task %s within %lld s\n", cli_safe(service),
            cli_safe(id), secs);
    char target[CLI_HTTP_MAX_TARGET];
    json_t *inst = NULL;
    if (cli_target(target, sizeof(target), "/api/v1/services", service, "/instances")) {
        struct http_response r;
        /* A plain request: a 404 (service never seen) is an answer here, not an error. */
        if (http_request(&c->url, "GET", target, c->token, NULL, 0, c->timeout_ms, &r) == SKP_OK) {
            if (r.status == 200)
                inst = json_loadb(r.body, r.body_len, 0, NULL);
            http_response_cleanup(&r);
        }
    }
    if (json_array_size(inst) == 0) {
        fprintf(stderr,
                "skyprof: no instance of %s has registered with this server: is the agent "
                "running with SW_AGENT_NAME=%s and SW_AGENT_COLLECTOR_BACKEND_SERVICES pointing "
                "at skyprofd's gRPC address (default 127.0.0.1:11800)?\n",
                cli_safe(service), cli_safe(service));
    } else {
        fprintf(stderr, "skyprof: instances of %s this server knows:\n", cli_safe(service));
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t wall = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
        size_t i;
        json_t *in;
        json_array_foreach(inst, i, in) {
            int64_t hb = cli_json_int(in, "lastHeartbeat");
            fprintf(stderr, "  %-40s last heartbeat %lld s ago\n",
                    cli_safe(cli_json_str(in, "name")),
                    hb > 0 ? (long long)((wall - hb) / 1000) : -1LL);
        }
        fprintf(stderr,
                "skyprof: agents fetch tasks every SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL "
                "seconds (20 by default); an instance whose heartbeat is old is gone. The task "
                "stays active: 'skyprof task logs %s' shows when an instance fetches it.\n",
                cli_safe(id));
    }
    json_decref(inst);
    return CLI_EXIT_NODATA;
}

/* --wait: polls the task's logs twice a second until an instance logged NOTIFIED. */
static int wait_notified(struct cli *c, const char *id, const char *service, const char *endpoint,
                         long long secs)
{
    fprintf(stderr,
            "skyprof: waiting up to %lld s for an instance of %s to fetch the task (agents poll "
            "every 20 s by default)\n",
            secs, cli_safe(service));
    int64_t deadline = now_ms() + secs * 1000;
    for (;;) {
        json_t *logs = NULL;
        int rc = get_task_thing(c, id, "/logs", &logs);
        if (rc)
            return rc;
        size_t i;
        json_t *l;
        json_array_foreach(logs, i, l) {
            if (strcmp(cli_json_str(l, "operationType"), "NOTIFIED") != 0)
                continue;
            fprintf(stderr,
                    "skyprof: %s fetched the task; requests to %s that start from now on are "
                    "profiled\n",
                    cli_json_str(l, "instanceName"), cli_safe(endpoint));
            json_decref(logs);
            return CLI_EXIT_OK;
        }
        json_decref(logs);
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return wait_timed_out(c, id, service, secs);
        struct timespec nap = {.tv_sec = 0, .tv_nsec = (left < 500 ? left : 500) * 1000000L};
        nanosleep(&nap, NULL);
    }
}

static int task_create(struct cli *c, int argc, char **argv)
{
    struct create_opts o = {
        .duration = 5, .threshold = 0, .period = 10, .max_count = 5, .wait_s = 60};
    int prc = cli_parse_table(c, argc, argv, ":h", g_create_options, CLI_ROWS(g_create_options),
                              g_task_usage, "task", "create", create_option, &o);
    if (prc != CLI_PARSE_NEXT)
        return prc;
    const char *service = o.service, *endpoint = o.endpoint;
    long long duration = o.duration, threshold = o.threshold, period = o.period;
    long long max_count = o.max_count;
    int64_t start_ms = o.start_ms;
    if (optind < argc)
        return cli_usage_error("task create: unexpected argument '%s'", argv[optind]);
    if (!service || !endpoint)
        return cli_usage_error("task create: --service and --endpoint are required");

    json_t *body =
        json_pack("{s:s, s:s, s:I, s:I, s:I, s:I}", "service", service, "endpointName", endpoint,
                  "duration", (json_int_t)duration, "minDurationThreshold", (json_int_t)threshold,
                  "dumpPeriod", (json_int_t)period, "maxSamplingCount", (json_int_t)max_count);
    if (!body)
        return cli_usage_error("task create: arguments must be UTF-8");
    if (start_ms > 0)
        json_object_set_new(body, "startTime", json_integer(start_ms));
    json_t *res = NULL;
    int rc = cli_api_json(c, "POST", "/api/v1/profile/tasks", body, &res);
    json_decref(body);
    if (rc)
        return rc;
    if (c->json) {
        cli_print_json(res);
    } else {
        printf("%s\n", cli_json_str(res, "id"));
    }
    fflush(stdout);
    if (o.wait && *cli_json_str(res, "id"))
        rc = wait_notified(c, cli_json_str(res, "id"), service, endpoint, o.wait_s);
    json_decref(res);
    return rc;
}

static int task_list(struct cli *c, int argc, char **argv)
{
    struct task_filter filter = {0};
    int rc = parse_simple(c, argc, argv, &filter);
    if (rc >= 0)
        return rc;
    const char *service = filter.service, *endpoint = filter.endpoint;
    if (optind < argc)
        return cli_usage_error("task list: unexpected argument '%s'", argv[optind]);
    char target[CLI_HTTP_MAX_TARGET] = "/api/v1/profile/tasks";
    char sep = '?';
    if (service) {
        size_t n = strlen(target);
        snprintf(target + n, sizeof(target) - n, "%cservice=", sep);
        if (!http_path_escape(target, sizeof(target), service))
            return cli_usage_error("--service too long");
        sep = '&';
    }
    if (endpoint) {
        size_t n = strlen(target);
        snprintf(target + n, sizeof(target) - n, "%cendpointName=", sep);
        if (!http_path_escape(target, sizeof(target), endpoint))
            return cli_usage_error("--endpoint too long");
    }
    json_t *tasks = NULL;
    rc = cli_api_get(c, target, &tasks);
    if (!tasks)
        return rc;
    if (json_array_size(tasks) == 0) {
        printf("no tasks\n");
        json_decref(tasks);
        return CLI_EXIT_OK;
    }
    printf("%-28s %-9s %-16s %-24s %-19s %4s %7s %6s %3s\n", "ID", "STATUS", "SERVICE", "ENDPOINT",
           "START", "MIN", "THRESH", "PERIOD", "MAX");
    size_t i;
    json_t *t;
    json_array_foreach(tasks, i, t) {
        char tb[32];
        printf("%-28s %-9s %-16s %-24s %-19s %4lld %5lldms %4lldms %3lld\n", cli_json_str(t, "id"),
               status_of(t), service_of(t), cli_json_str(t, "endpointName"),
               cli_fmt_time(cli_json_int(t, "startTime"), tb, sizeof(tb)),
               (long long)cli_json_int(t, "duration"),
               (long long)cli_json_int(t, "minDurationThreshold"),
               (long long)cli_json_int(t, "dumpPeriod"),
               (long long)cli_json_int(t, "maxSamplingCount"));
    }
    json_decref(tasks);
    return CLI_EXIT_OK;
}

/* GET /api/v1/profile/tasks/{id}[suffix]. */
static int get_task_thing(struct cli *c, const char *id, const char *suffix, json_t **out)
{
    char target[CLI_HTTP_MAX_TARGET];
    if (!cli_target(target, sizeof(target), "/api/v1/profile/tasks", id, suffix))
        return cli_usage_error("task id too long");
    return cli_api_json(c, "GET", target, NULL, out);
}

static int task_show_or_logs(struct cli *c, int argc, char **argv, bool logs_only)
{
    int rc = parse_simple(c, argc, argv, NULL);
    if (rc >= 0)
        return rc;
    if (optind != argc - 1)
        return cli_usage_error("task %s: expected exactly one task ID", argv[0]);
    const char *id = argv[optind];
    json_t *j = NULL;
    rc = get_task_thing(c, id, logs_only ? "/logs" : "", &j);
    if (rc)
        return rc;
    if (c->json) {
        cli_print_json(j);
    } else if (logs_only) {
        print_logs(j);
    } else {
        char tb[32], te[32];
        int64_t start = cli_json_int(j, "startTime");
        int64_t dur = cli_json_int(j, "duration");
        printf("id:                   %s\n", cli_json_str(j, "id"));
        printf("status:               %s\n", status_of(j));
        if (*cli_json_str(j, "statusReason"))
            printf("why no data:          %s\n", cli_json_str(j, "statusReason"));
        printf("service:              %s\n", service_of(j));
        printf("endpoint:             %s\n", cli_json_str(j, "endpointName"));
        printf("monitor time:         %s .. %s\n", cli_fmt_time(start, tb, sizeof(tb)),
               cli_fmt_time(start > 0 ? start + dur * 60000 : 0, te, sizeof(te)));
        printf("duration:             %lld min\n", (long long)dur);
        printf("min duration:         %lld ms\n",
               (long long)cli_json_int(j, "minDurationThreshold"));
        printf("dump period:          %lld ms\n", (long long)cli_json_int(j, "dumpPeriod"));
        printf("max sampling count:   %lld\n", (long long)cli_json_int(j, "maxSamplingCount"));
        printf("logs:\n");
        json_t *logs = json_object_get(j, "logs");
        if (logs) {
            print_logs(logs);
        } else {
            json_t *l = NULL;
            rc = get_task_thing(c, id, "/logs", &l);
            if (!rc)
                print_logs(l);
            json_decref(l);
        }
    }
    json_decref(j);
    return rc;
}

/* The answer of a cancel: "cancelled ID". */
static void print_cancelled(json_t *res)
{
    printf("cancelled %s\n", cli_json_str(res, "id"));
}

/* POST /api/v1/profile/tasks/{id}/cancel; prints "cancelled ID". */
static int task_cancel(struct cli *c, int argc, char **argv)
{
    int rc = parse_simple(c, argc, argv, NULL);
    if (rc >= 0)
        return rc;
    if (optind != argc - 1)
        return cli_usage_error("task cancel: expected exactly one task ID");
    char target[CLI_HTTP_MAX_TARGET];
    if (!cli_target(target, sizeof(target), "/api/v1/profile/tasks", argv[optind], "/cancel"))
        return cli_usage_error("task id too long");
    json_t *body = json_object();
    json_t *res = NULL;
    rc = body ? cli_api_json(c, "POST", target, body, &res) : CLI_EXIT_API;
    json_decref(body);
    if (rc)
        return rc;
    return cli_print_answer(c, res, print_cancelled);
}

int cmd_task(struct cli *c, int argc, char **argv)
{
    const char *sub = NULL;
    int prc = cli_subcommand(&argc, &argv, g_task_usage, &sub);
    if (prc != CLI_PARSE_NEXT)
        return prc;
    if (strcmp(sub, "create") == 0)
        return task_create(c, argc, argv);
    if (strcmp(sub, "list") == 0 || strcmp(sub, "ls") == 0)
        return task_list(c, argc, argv);
    if (strcmp(sub, "show") == 0)
        return task_show_or_logs(c, argc, argv, false);
    if (strcmp(sub, "logs") == 0)
        return task_show_or_logs(c, argc, argv, true);
    if (strcmp(sub, "cancel") == 0)
        return task_cancel(c, argc, argv);
    return cli_usage_error("task: unknown subcommand '%s' (create, list, show, logs, cancel)", sub);
}
