/* cmd_ebpf.c - `skyprof ebpf list|show|analyze|download|processes`: the profiles an agent-side
 * continuous-profiling policy started by itself (ON_CPU, OFF_CPU and NETWORK targets; their
 * stacks arrive through SkyWalking's EBPFProfilingService and are stored under /api/v1/ebpf/...,
 * docs/continuous-profiling.md). Such a task exists only as the trigger that started it and the
 * stacks uploaded for it, so `list` and `show` read the triggers (/api/v1/profile/triggers, kind
 * "ebpf"), and `analyze`/`download` the task's stacks. Tables for people, --json for scripts. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/proc_task_cmd.h"
#include "cli/tree_print.h"

#define API "/api/v1/ebpf/tasks"

static const char g_usage[] =
    "Usage:\n"
    "  skyprof ebpf list [--service S]   profiles agents started by a policy (ON_CPU, OFF_CPU,\n"
    "                                    NETWORK targets), newest first\n"
    "  skyprof ebpf show ID              the trigger that started it and what was uploaded\n"
    "  skyprof ebpf analyze ID [--process P] [--from MS --to MS] [--all-frames]\n"
    "                                    the uploaded stacks as a tree (exit 6: none yet)\n"
    "  skyprof ebpf download ID [--format pprof|collapsed|speedscope|html] [--process P]\n"
    "                       [--from MS --to MS] [-o FILE]\n"
    "  skyprof ebpf processes [--service S]   processes registered by the agents\n"
    "Global options --server, --token, --timeout, --json are accepted too.\n";

struct ebpf_opts {
    const char *service, *process, *format, *output, *from, *to;
    bool all_frames;
};

static const struct cli_stored_opt g_options[] = {
    CLI_STR_OPT("service", 's', struct ebpf_opts, service),
    CLI_STR_OPT("process", 'p', struct ebpf_opts, process),
    CLI_STR_OPT("format", 'f', struct ebpf_opts, format),
    CLI_STR_OPT("output", 'o', struct ebpf_opts, output),
    CLI_OWN_OPT("from", 'F'),
    CLI_OWN_OPT("to", 'T'),
    CLI_FLAG_OPT("all-frames", 'A', struct ebpf_opts, all_frames),
};

static int ebpf_option(void *ud, int opt, const char *arg)
{
    struct ebpf_opts *o = ud;
    if (opt == 'F' || opt == 'T') { /* checked here, passed on as given */
        long long v;
        if (!cli_parse_int(arg, 0, INT64_MAX / 2, &v))
            return cli_usage_error("--%s: expected ms since the epoch, got '%s'",
                                   opt == 'F' ? "from" : "to", arg);
        if (opt == 'F')
            o->from = arg;
        else
            o->to = arg;
        return CLI_PARSE_NEXT;
    }
    return CLI_PARSE_UNKNOWN;
}

/* GETs the triggers of kind "ebpf" (of `service` / `task` when given) into *out (the array,
 * a new reference). Returns a CLI_EXIT_ code. */
static int ebpf_triggers(struct cli *c, const char *service, const char *task, json_t **out)
{
    char target[CLI_HTTP_MAX_TARGET] = "/api/v1/profile/triggers";
    if (!proc_task_add_query(target, sizeof(target), "service", service) ||
        !proc_task_add_query(target, sizeof(target), "task", task) ||
        !proc_task_add_query(target, sizeof(target), "limit", "10000"))
        return cli_usage_error("ebpf: options too long");
    json_t *doc = NULL;
    int rc = cli_api_json(c, "GET", target, NULL, &doc);
    if (rc)
        return rc;
    json_t *list = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(doc, "triggers"), i, t) {
        if (strcmp(cli_json_str(t, "taskKind"), "ebpf") == 0 && *cli_json_str(t, "taskId"))
            json_array_append(list, t);
    }
    json_decref(doc);
    *out = list;
    return CLI_EXIT_OK;
}

static int ebpf_list(struct cli *c, const struct ebpf_opts *o, int argc, char **argv)
{
    if (optind != argc)
        return cli_usage_error("ebpf list: unexpected argument '%s'", argv[optind]);
    json_t *list = NULL;
    int rc = ebpf_triggers(c, o->service, NULL, &list);
    if (rc)
        return rc;
    if (c->json) {
        cli_print_json(list);
    } else if (json_array_size(list) == 0) {
        printf("no profile was started by an agent-side policy%s%s\n", o->service ? " of " : "",
               o->service ? cli_safe(o->service) : "");
    } else {
        printf("%-36s %-8s %-16s %-24s %-19s %s\n", "ID", "TARGET", "SERVICE", "INSTANCE",
               "TRIGGERED", "WHY");
        size_t i;
        json_t *t;
        json_array_foreach(list, i, t) {
            char tb[32];
            printf("%-36s %-8s %-16s %-24s %-19s %s\n", cli_json_str(t, "taskId"),
                   cli_json_str(t, "target"), cli_json_str(t, "service"),
                   cli_json_str(t, "instance"),
                   cli_fmt_time(cli_json_int(t, "time"), tb, sizeof(tb)), cli_json_str(t, "text"));
        }
    }
    json_decref(list);
    return CLI_EXIT_OK;
}

/* "<API>/<id>/<what>" with the options' filters as the query. */
static bool analysis_target(char *target, size_t cap, const char *id, const char *what,
                            const struct ebpf_opts *o)
{
    return cli_target(target, cap, API, id, what) &&
           proc_task_add_query(target, cap, "processId", o->process) &&
           proc_task_add_query(target, cap, "from", o->from) &&
           proc_task_add_query(target, cap, "to", o->to);
}

/* GETs the analysis of task `id`; a 404 (the task has no stacks) comes back as *out = NULL with
 * CLI_EXIT_OK, so the caller can say so in its own words. */
static int ebpf_analysis(struct cli *c, const char *id, const struct ebpf_opts *o, json_t **out)
{
    char target[CLI_HTTP_MAX_TARGET];
    *out = NULL;
    if (!analysis_target(target, sizeof(target), id, "/analyze", o))
        return cli_usage_error("ebpf: arguments too long");
    struct http_response r;
    skp_err err = http_request(&c->url, "GET", target, c->token, NULL, 0, c->timeout_ms, &r);
    if (err == SKP_OK && (r.status == 404 || (r.status >= 200 && r.status <= 299))) {
        *out = r.status == 404 ? NULL : json_loadb(r.body, r.body_len, 0, NULL);
        bool bad = r.status != 404 && !*out;
        http_response_cleanup(&r);
        if (bad) {
            fprintf(stderr, "skyprof: the server sent invalid JSON\n");
            return CLI_EXIT_API;
        }
        if (*out && !c->json)
            cli_json_make_safe(*out);
        return CLI_EXIT_OK;
    }
    if (err == SKP_OK)
        http_response_cleanup(&r);
    /* Any other answer: ask again through the reporting call, which says what went wrong. */
    return cli_api_json(c, "GET", target, NULL, out);
}

static int no_stacks(const char *id)
{
    char what[200];
    snprintf(what, sizeof(what), "profile %.160s", id);
    json_t *empty = json_object();
    int rc = cli_no_data(what, empty,
                         "no stacks were uploaded for it (in this window / of this process); "
                         "'skyprof ebpf list' shows the profiles agents started");
    json_decref(empty);
    return rc;
}

static int ebpf_show(struct cli *c, const struct ebpf_opts *o, int argc, char **argv)
{
    if (optind != argc - 1)
        return cli_usage_error("ebpf show: expected exactly one profile ID");
    const char *id = argv[optind];
    json_t *trig = NULL, *an = NULL;
    int rc = ebpf_triggers(c, NULL, id, &trig);
    if (!rc)
        rc = ebpf_analysis(c, id, o, &an);
    if (rc) {
        json_decref(trig);
        return rc;
    }
    if (json_array_size(trig) == 0 && !an) {
        json_decref(trig);
        fprintf(stderr,
                "skyprof: no profile %s: no trigger started it and no stacks were "
                "uploaded for it ('skyprof ebpf list' shows them)\n",
                cli_safe(id));
        return CLI_EXIT_NOTFOUND;
    }
    if (c->json) {
        json_t *doc = json_pack("{s:s, s:O, s:O?}", "id", id, "triggers", trig, "analysis", an);
        cli_print_json(doc);
        json_decref(doc);
    } else {
        char tb[32], te[32];
        printf("id:             %s\n", cli_safe(id));
        size_t i;
        json_t *t;
        json_array_foreach(trig, i, t) {
            printf("target:         %s\n", cli_json_str(t, "target"));
            printf("service:        %s\n", cli_json_str(t, "service"));
            printf("instance:       %s\n", cli_json_str(t, "instance"));
            if (*cli_json_str(t, "process"))
                printf("process:        %s\n", cli_json_str(t, "process"));
            printf("triggered:      %s, %s\n",
                   cli_fmt_time(cli_json_int(t, "time"), tb, sizeof(tb)), cli_json_str(t, "text"));
        }
        if (!an) {
            printf("uploads:        none yet\n");
        } else {
            printf("uploads:        %s .. %s\n",
                   cli_fmt_time(cli_json_int(an, "firstUpload"), tb, sizeof(tb)),
                   cli_fmt_time(cli_json_int(an, "lastUpload"), te, sizeof(te)));
            printf("total:          %lld %s (%s), %lld distinct stack(s)%s\n",
                   (long long)cli_json_int(an, "total"), cli_json_str(an, "unit"),
                   cli_json_str(an, "sampleType"), (long long)cli_json_int(an, "stacks"),
                   json_is_true(json_object_get(an, "partial")) ? ", partial" : "");
            const char *pid;
            json_t *p;
            json_object_foreach(json_object_get(an, "processes"), pid, p) {
                printf("  process %s: %lld on-CPU, %lld off-CPU stack(s)\n", cli_safe(pid),
                       (long long)cli_json_int(p, "onCpuStacks"),
                       (long long)cli_json_int(p, "offCpuStacks"));
            }
        }
    }
    json_decref(trig);
    json_decref(an);
    return CLI_EXIT_OK;
}

/* The analysis of `ebpf <sub>`'s one operand, a profile ID, into *an (the caller json_decref's
 * it). Returns CLI_EXIT_OK, or the exit code to stop with: a wrong operand count, the API's
 * error, or no stacks (said on stderr; *an is then NULL). */
static int operand_analysis(struct cli *c, const struct ebpf_opts *o, int argc, char **argv,
                            const char *sub, json_t **an)
{
    *an = NULL;
    if (optind != argc - 1)
        return cli_usage_error("ebpf %s: expected exactly one profile ID", sub);
    int rc = ebpf_analysis(c, argv[optind], o, an);
    if (rc)
        return rc;
    if (!*an || !tree_print_has_data(*an)) {
        json_decref(*an);
        *an = NULL;
        return no_stacks(argv[optind]);
    }
    return CLI_EXIT_OK;
}

static int ebpf_analyze(struct cli *c, const struct ebpf_opts *o, int argc, char **argv)
{
    json_t *an = NULL;
    int rc = operand_analysis(c, o, argc, argv, "analyze", &an);
    if (rc)
        return rc;
    if (c->json) {
        cli_print_json(an);
        json_decref(an);
        return CLI_EXIT_OK;
    }
    printf("%s, sample type %s, total %lld %s over %lld distinct stack(s)\n",
           cli_json_str(an, "target"), cli_json_str(an, "sampleType"),
           (long long)cli_json_int(an, "total"), cli_json_str(an, "unit"),
           (long long)cli_json_int(an, "stacks"));
    rc = tree_print_profile(an, o->all_frames);
    json_decref(an);
    return rc;
}

static int ebpf_download(struct cli *c, const struct ebpf_opts *o, int argc, char **argv)
{
    json_t *an = NULL;
    int rc = operand_analysis(c, o, argc, argv, "download", &an);
    json_decref(an);
    if (rc)
        return rc;
    char target[CLI_HTTP_MAX_TARGET];
    if (!analysis_target(target, sizeof(target), argv[optind], "/download", o) ||
        !proc_task_add_query(target, sizeof(target), "format", o->format ? o->format : "pprof"))
        return cli_usage_error("ebpf: arguments too long");
    return proc_task_download(c, target, o->output);
}

static int ebpf_processes(struct cli *c, const struct ebpf_opts *o, int argc, char **argv)
{
    if (optind != argc)
        return cli_usage_error("ebpf processes: unexpected argument '%s'", argv[optind]);
    char target[CLI_HTTP_MAX_TARGET] = "/api/v1/ebpf/processes";
    if (!proc_task_add_query(target, sizeof(target), "service", o->service))
        return cli_usage_error("ebpf: options too long");
    json_t *list = NULL;
    int rc = cli_api_get(c, target, &list);
    if (!list)
        return rc;
    if (json_array_size(list) == 0) {
        printf("no process registered\n");
    } else {
        printf("%-16s %-24s %-16s %8s  %-19s %s\n", "SERVICE", "INSTANCE", "PROCESS", "PID",
               "LAST PING", "ID");
        size_t i;
        json_t *p;
        json_array_foreach(list, i, p) {
            char tb[32];
            printf("%-16s %-24s %-16s %8lld  %-19s %s\n", cli_json_str(p, "serviceName"),
                   cli_json_str(p, "instanceName"), cli_json_str(p, "processName"),
                   (long long)cli_json_int(p, "pid"),
                   cli_fmt_time(cli_json_int(p, "lastPing"), tb, sizeof(tb)),
                   cli_json_str(p, "id"));
        }
    }
    json_decref(list);
    return CLI_EXIT_OK;
}

int cmd_ebpf(struct cli *c, int argc, char **argv)
{
    const char *sub = NULL;
    int prc = cli_subcommand(&argc, &argv, g_usage, &sub);
    if (prc != CLI_PARSE_NEXT)
        return prc;
    static const struct {
        const char *name;
        int (*fn)(struct cli *, const struct ebpf_opts *, int, char **);
    } subs[] = {
        {"list", ebpf_list},       {"ls", ebpf_list},           {"show", ebpf_show},
        {"analyze", ebpf_analyze}, {"download", ebpf_download}, {"processes", ebpf_processes},
    };
    for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
        if (strcmp(sub, subs[i].name) != 0)
            continue;
        struct ebpf_opts o = {0};
        int rc = cli_parse_table(c, argc, argv, ":ho:", g_options, CLI_ROWS(g_options), g_usage,
                                 "ebpf", sub, ebpf_option, &o);
        if (rc != CLI_PARSE_NEXT)
            return rc;
        return subs[i].fn(c, &o, argc, argv);
    }
    return cli_usage_error("ebpf: unknown subcommand '%s' (list, show, analyze, download, "
                           "processes)",
                           sub);
}
