/* cmd_pprof.c - `skyprof pprof create|list|show|analyze|download`: process-profiling (pprof)
 * tasks over the HTTP API (/api/v1/pprof/tasks, docs/process-profiling.md). Tables for people,
 * --json for scripts; `pprof create` prints only the new id on stdout. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/proc_task_cmd.h"
#include "cli/tree_print.h"
#include "common/alloc.h"

#define API "/api/v1/pprof/tasks"
/* Instances one `pprof create` may name. */
#define PPROF_CLI_MAX_INSTANCES 1000

static const char g_pprof_usage[] =
    "Usage:\n"
    "  skyprof pprof create --service S --event E [options]\n"
    "      --event E                 cpu, wall, heap, allocs, block, mutex, goroutine,\n"
    "                                threadcreate\n"
    "      --instance I              an instance to profile (repeat; default: every live one)\n"
    "      --duration MIN            sampling time in minutes for cpu/wall/block/mutex\n"
    "                                (default 1)\n"
    "      --dump-period N           block: rate in ns; mutex: contention fraction\n"
    "      --sampling-rate HZ        samples per second asked of the agent (default: its own)\n"
    "  skyprof pprof list [--service S]\n"
    "  skyprof pprof show ID\n"
    "  skyprof pprof analyze ID [--sample-type T] [--instances A,B] [--functions]\n"
    "                           [--all-frames] [--wait S]\n"
    "      exit 6 while no instance uploaded a file; --wait S asks again every second first\n"
    "  skyprof pprof download ID [--file FILE_ID | --format pprof|collapsed|speedscope|html]\n"
    "                            [--sample-type T] [--instances A,B] [--functions] [-o OUT]\n"
    "Global options --server, --token, --timeout, --json are accepted too.\n";

struct pprof_opts {
    const char *service, *event, *sample_type, *instances, *format, *output, *file;
    const char *inst[PPROF_CLI_MAX_INSTANCES];
    size_t n_inst;
    long long duration, dump_period, sampling_rate, wait_s;
    bool functions, all_frames;
};

#define PPROF_INT_OPT(name, opt, member)                                                           \
    CLI_INT_OPT(name, opt, struct pprof_opts, member, -1000000000000LL, 1000000000000LL,           \
                "expected an integer, got '%s'")
static const struct cli_stored_opt g_options[] = {
    CLI_STR_OPT("service", 's', struct pprof_opts, service),
    CLI_STR_OPT("event", 'e', struct pprof_opts, event),
    CLI_OWN_OPT("instance", 'i'),
    CLI_STR_OPT("instances", 'I', struct pprof_opts, instances),
    PPROF_INT_OPT("duration", 'd', duration),
    PPROF_INT_OPT("dump-period", 'p', dump_period),
    PPROF_INT_OPT("sampling-rate", 'r', sampling_rate),
    CLI_STR_OPT("sample-type", 'T', struct pprof_opts, sample_type),
    CLI_STR_OPT("format", 'f', struct pprof_opts, format),
    CLI_STR_OPT("file", 'F', struct pprof_opts, file),
    CLI_STR_OPT("output", 'o', struct pprof_opts, output),
    CLI_FLAG_OPT("functions", 'g', struct pprof_opts, functions),
    CLI_FLAG_OPT("all-frames", 'A', struct pprof_opts, all_frames),
    CLI_INT_OPT("wait", 'w', struct pprof_opts, wait_s, 0, 3600,
                "--wait: expected seconds (0-3600), got '%s'"),
};

static int pprof_option(void *ud, int opt, const char *arg)
{
    struct pprof_opts *o = ud;
    if (opt == 'i') {
        if (o->n_inst == PPROF_CLI_MAX_INSTANCES)
            return cli_usage_error("--instance: at most %d", PPROF_CLI_MAX_INSTANCES);
        o->inst[o->n_inst++] = arg;
        return CLI_PARSE_NEXT;
    }
    return CLI_PARSE_UNKNOWN;
}

static int parse(struct cli *c, int argc, char **argv, struct pprof_opts *o)
{
    return cli_parse_table(c, argc, argv, ":ho:", g_options, CLI_ROWS(g_options), g_pprof_usage,
                           "pprof", argv[0], pprof_option, o);
}

static int pprof_create(struct cli *c, struct pprof_opts *o, int argc, char **argv)
{
    if (optind < argc)
        return cli_usage_error("pprof create: unexpected argument '%s'", argv[optind]);
    if (!o->service || !o->event)
        return cli_usage_error("pprof create: --service and --event are required");
    /* The server answers a timed event's zero duration with OAP's "duration cannot be
     * negative"; say what is wrong instead. */
    static const char *const timed[] = {"cpu", "wall", "block", "mutex"};
    for (size_t i = 0; i < sizeof(timed) / sizeof(timed[0]); i++)
        if (strcmp(o->event, timed[i]) == 0 && o->duration < 1)
            return cli_usage_error("pprof create: --duration is the sampling time of %s in "
                                   "minutes: 1 to 15 (got %lld)",
                                   o->event, o->duration);
    json_t *inst = json_array();
    for (size_t i = 0; inst && i < o->n_inst; i++)
        json_array_append_new(inst, json_string(o->inst[i]));
    json_t *body = json_pack("{s:s, s:s, s:I}", "service", o->service, "events", o->event,
                             "duration", (json_int_t)o->duration);
    if (!body || !inst) {
        json_decref(inst);
        json_decref(body);
        return cli_usage_error("pprof create: arguments must be UTF-8");
    }
    if (o->n_inst)
        json_object_set(body, "serviceInstanceIds", inst);
    json_decref(inst);
    if (o->dump_period)
        json_object_set_new(body, "dumpPeriod", json_integer(o->dump_period));
    if (o->sampling_rate)
        json_object_set_new(body, "samplingRate", json_integer(o->sampling_rate));
    int rc = proc_task_create(c, API, body);
    json_decref(body);
    return rc;
}

static int pprof_list(struct cli *c, struct pprof_opts *o, int argc, char **argv)
{
    if (optind < argc)
        return cli_usage_error("pprof list: unexpected argument '%s'", argv[optind]);
    json_t *tasks = NULL;
    int rc = proc_task_list(c, API, o->service, &tasks);
    if (rc || !tasks)
        return rc;
    if (json_array_size(tasks) == 0) {
        printf("no pprof tasks\n");
    } else {
        printf("%-30s %-9s %-16s %-12s %4s %-19s %s\n", "ID", "STATUS", "SERVICE", "EVENT", "MIN",
               "CREATED", "UPLOADED/INSTANCES");
        size_t i;
        json_t *t;
        json_array_foreach(tasks, i, t) {
            char tb[32];
            size_t up = 0, k;
            json_t *p;
            json_array_foreach(json_object_get(t, "progress"), k, p)
                up += strcmp(cli_json_str(p, "state"), "uploaded") == 0;
            printf("%-30s %-9s %-16s %-12s %4lld %-19s %zu/%zu\n", cli_json_str(t, "id"),
                   cli_json_str(t, "status"), cli_json_str(t, "service"), cli_json_str(t, "events"),
                   (long long)cli_json_int(t, "duration"),
                   cli_fmt_time(cli_json_int(t, "createTime"), tb, sizeof(tb)), up,
                   json_array_size(json_object_get(t, "serviceInstanceIds")));
        }
    }
    json_decref(tasks);
    return CLI_EXIT_OK;
}

static int pprof_show(struct cli *c, int argc, char **argv)
{
    if (optind != argc - 1)
        return cli_usage_error("pprof show: expected exactly one task ID");
    json_t *t = NULL;
    int rc = proc_task_get(c, API, argv[optind], &t);
    if (rc || !t)
        return rc;
    char tb[32];
    printf("id:            %s\n", cli_json_str(t, "id"));
    printf("status:        %s\n", cli_json_str(t, "status"));
    printf("service:       %s\n", cli_json_str(t, "service"));
    printf("event:         %s\n", cli_json_str(t, "events"));
    printf("duration:      %lld min\n", (long long)cli_json_int(t, "duration"));
    printf("dump period:   %lld\n", (long long)cli_json_int(t, "dumpPeriod"));
    printf("created:       %s\n", cli_fmt_time(cli_json_int(t, "createTime"), tb, sizeof(tb)));
    printf("instances:%s\n", json_is_true(json_object_get(t, "allLiveInstances"))
                                 ? "     (every live instance at creation)"
                                 : "");
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(t, "progress"), i, p) {
        const char *state = cli_json_str(p, "state");
        printf("  %-28s %-9s", cli_json_str(p, "instanceName"), state);
        if (!strcmp(state, "failed"))
            printf(" %s: %s", cli_json_str(p, "failedOperation"), cli_json_str(p, "failedReason"));
        else if (!strcmp(state, "uploaded"))
            printf(" at %s", cli_fmt_time(cli_json_int(p, "uploadedTime"), tb, sizeof(tb)));
        printf("\n");
    }
    json_t *files = json_object_get(t, "files");
    printf("files:%s\n", json_array_size(files) ? "" : "         (none yet)");
    json_array_foreach(files, i, p)
        printf("  #%-6lld %-28s %10lld bytes  %s\n", (long long)cli_json_int(p, "id"),
               cli_json_str(p, "instanceName"), (long long)cli_json_int(p, "size"),
               cli_fmt_time(cli_json_int(p, "time"), tb, sizeof(tb)));
    json_decref(t);
    return CLI_EXIT_OK;
}

static bool filters(char *target, size_t cap, const struct pprof_opts *o)
{
    return proc_task_add_query(target, cap, "sampleType", o->sample_type) &&
           proc_task_add_query(target, cap, "instances", o->instances) &&
           proc_task_add_query(target, cap, "granularity", o->functions ? "functions" : NULL);
}

static int pprof_analyze(struct cli *c, struct pprof_opts *o, int argc, char **argv)
{
    if (optind != argc - 1)
        return cli_usage_error("pprof analyze: expected exactly one task ID");
    char target[CLI_HTTP_MAX_TARGET];
    if (!cli_target(target, sizeof(target), API, argv[optind], "/analyze") ||
        !filters(target, sizeof(target), o))
        return cli_usage_error("arguments too long");
    /* --wait S: no file yet (an instance uploads once its sampling is over): ask again
     * every second until there is one or S seconds passed. */
    json_t *a = NULL;
    int rc = cli_api_json_wait(c, "GET", target, NULL, o->wait_s, tree_print_has_data, &a);
    if (rc)
        return rc;
    if (c->json) {
        cli_print_json(a);
        rc = tree_print_has_data(a) ? CLI_EXIT_OK : CLI_EXIT_NODATA;
        json_decref(a);
        return rc;
    }
    if (!tree_print_has_data(a)) {
        char what[160];
        snprintf(what, sizeof(what), "pprof task %.120s", argv[optind]);
        rc = cli_no_data(what, a,
                         "'skyprof pprof show ID' shows each instance's progress (an instance "
                         "uploads when its sampling time is over)");
        json_decref(a);
        return rc;
    }
    printf("sample type %s (%s), total %lld over %lld sample(s) from %zu file(s); types:",
           cli_json_str(a, "sampleType"), cli_json_str(a, "unit"),
           (long long)cli_json_int(a, "total"), (long long)cli_json_int(a, "samples"),
           json_array_size(json_object_get(a, "files")));
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(a, "sampleTypes"), i, v)
        printf(" %s", json_string_value(v));
    printf("\n(columns: total and self value in %s; the count column repeats the total)\n",
           cli_json_str(a, "unit"));
    json_array_foreach(json_object_get(a, "errors"), i, v)
        fprintf(stderr, "skyprof: file %lld of %s left out: %s\n",
                (long long)cli_json_int(v, "fileId"), cli_json_str(v, "instanceName"),
                cli_json_str(v, "error"));
    rc = tree_print_profile(a, o->all_frames);
    json_decref(a);
    return rc;
}

static int pprof_download(struct cli *c, struct pprof_opts *o, int argc, char **argv)
{
    if (optind != argc - 1)
        return cli_usage_error("pprof download: expected exactly one task ID");
    if (o->file && o->format)
        return cli_usage_error("pprof download: --file and --format exclude each other");
    char target[CLI_HTTP_MAX_TARGET];
    bool ok;
    if (o->file) {
        char suffix[64];
        long long fid;
        if (!cli_parse_int(o->file, 1, INT64_MAX, &fid))
            return cli_usage_error("--file: expected a file id, got '%s'", o->file);
        snprintf(suffix, sizeof(suffix), "/files/%lld", fid);
        ok = cli_target(target, sizeof(target), API, argv[optind], suffix);
    } else {
        ok = cli_target(target, sizeof(target), API, argv[optind], "/download") &&
             proc_task_add_query(target, sizeof(target), "format",
                                 o->format ? o->format : "pprof") &&
             filters(target, sizeof(target), o);
    }
    if (!ok)
        return cli_usage_error("arguments too long");
    return proc_task_download(c, target, o->output);
}

int cmd_pprof(struct cli *c, int argc, char **argv)
{
    const char *sub = NULL;
    int prc = cli_subcommand(&argc, &argv, g_pprof_usage, &sub);
    if (prc != CLI_PARSE_NEXT)
        return prc;
    static const char *const subs[] = {"create", "list", "ls", "show", "analyze", "download"};
    bool known = false;
    for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
        known = known || strcmp(sub, subs[i]) == 0;
    if (!known)
        return cli_usage_error("pprof: unknown subcommand '%s' (create, list, show, analyze, "
                               "download)",
                               sub);
    struct pprof_opts *o = skpx_xcalloc(1, sizeof(*o));
    o->duration = 1;
    int rc = parse(c, argc, argv, o);
    if (rc == CLI_PARSE_NEXT) {
        if (!strcmp(sub, "create"))
            rc = pprof_create(c, o, argc, argv);
        else if (!strcmp(sub, "list") || !strcmp(sub, "ls"))
            rc = pprof_list(c, o, argc, argv);
        else if (!strcmp(sub, "show"))
            rc = pprof_show(c, argc, argv);
        else if (!strcmp(sub, "analyze"))
            rc = pprof_analyze(c, o, argc, argv);
        else
            rc = pprof_download(c, o, argc, argv);
    }
    skpx_free(o);
    return rc;
}
