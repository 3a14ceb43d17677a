/* cmd_jfr.c - `skyprof jfr`: Java async-profiler tasks (docs/java.md) over the HTTP API
 * /api/v1/async-profiler/tasks: create, list, show (per-instance progress and files), analyze
 * (a tree per JFR event kind: top frames by self weight, the API's JSON, or an export format)
 * and file (the uploaded .jfr). The subcommands are shaped for every process-profile kind
 * (create/list/show/analyze/file), so pprof tasks can take the same form. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/proc_task_cmd.h"
#include "cli/tree_print.h"
#include "common/alloc.h"

#define API "/api/v1/async-profiler/tasks"
#define MAX_LIST 64 /* --instance / --event occurrences */
#define TOP_FRAMES 25

static const char g_usage[] =
    "Usage: skyprof jfr SUBCOMMAND ...   (Java async-profiler tasks, see docs/java.md)\n"
    "  create --service S --duration SEC --event E [--event E ...] [--instance I ...]\n"
    "         [--exec-args ARGS]   create a task (events: CPU WALL LOCK ALLOC CTIMER ITIMER;\n"
    "                              no --instance = every live instance); prints its id\n"
    "  list [--service S]          tasks with status and uploads\n"
    "  show ID                     one task: instances' progress, logs, uploaded files\n"
    "  analyze ID [--event-type K] [--thread T] [--instances a,b] [--functions]\n"
    "             [--format top|json|collapsed|pprof|speedscope|html] [-o FILE]\n"
    "                              the JFR files' tree of one kind (execution, native, alloc,\n"
    "                              lock, live; default: the task's first event); 'top' lists\n"
    "                              the heaviest frames by self weight\n"
    "  file ID FILE_ID -o FILE     download an uploaded JFR file\n"
    "Global options --server, --token, --timeout, --json are accepted too.\n";

struct jfr_opts {
    const char *service, *exec_args, *event_type, *thread, *instances_csv, *format, *output;
    const char *instances[MAX_LIST];
    size_t n_instances;
    const char *events[MAX_LIST];
    size_t n_events;
    long long duration;
    bool functions;
};

static const struct cli_stored_opt g_options[] = {
    CLI_STR_OPT("service", 's', struct jfr_opts, service),
    CLI_INT_OPT("duration", 'd', struct jfr_opts, duration, 1, 3600,
                "--duration: expected seconds in 1..3600, got '%s'"),
    CLI_OWN_OPT("event", 'e'),
    CLI_OWN_OPT("instance", 'i'),
    CLI_STR_OPT("exec-args", 'x', struct jfr_opts, exec_args),
    CLI_STR_OPT("event-type", 'k', struct jfr_opts, event_type),
    CLI_STR_OPT("thread", 't', struct jfr_opts, thread),
    CLI_STR_OPT("instances", 'I', struct jfr_opts, instances_csv),
    CLI_FLAG_OPT("functions", 'F', struct jfr_opts, functions),
    CLI_STR_OPT("format", 'f', struct jfr_opts, format),
    CLI_STR_OPT("output", 'o', struct jfr_opts, output),
};

static int on_option(void *ud, int opt, const char *arg)
{
    struct jfr_opts *o = ud;
    switch (opt) {
    case 'e':
        if (o->n_events == MAX_LIST)
            return cli_usage_error("too many --event");
        o->events[o->n_events++] = arg;
        return CLI_PARSE_NEXT;
    case 'i':
        if (o->n_instances == MAX_LIST)
            return cli_usage_error("too many --instance");
        o->instances[o->n_instances++] = arg;
        return CLI_PARSE_NEXT;
    default:
        return CLI_PARSE_UNKNOWN;
    }
}

static int do_create(struct cli *c, const struct jfr_opts *o)
{
    if (!o->service || !o->duration || !o->n_events)
        return cli_usage_error("jfr create: --service, --duration and --event are required");
    json_t *ev = json_array(), *inst = json_array();
    for (size_t i = 0; i < o->n_events; i++)
        json_array_append_new(ev, json_string(o->events[i]));
    for (size_t i = 0; i < o->n_instances; i++)
        json_array_append_new(inst, json_string(o->instances[i]));
    json_t *body = json_pack("{s:s?,s:I,s:o,s:o,s:s?}", "service", o->service, "duration",
                             (json_int_t)o->duration, "events", ev, "serviceInstanceIds", inst,
                             "execArgs", o->exec_args);
    if (!body)
        return cli_usage_error("jfr create: arguments must be UTF-8");
    int rc = proc_task_create(c, API, body);
    json_decref(body);
    return rc;
}

static void join_strs(json_t *arr, char *buf, size_t cap)
{
    size_t k = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < json_array_size(arr) && k + 1 < cap; i++) {
        int n = snprintf(buf + k, cap - k, "%s%s", i ? "," : "",
                         json_string_value(json_array_get(arr, i)) ?: "");
        if (n < 0)
            break;
        k += (size_t)n < cap - k ? (size_t)n : cap - k - 1;
    }
}

static size_t count_state(json_t *t, const char *state)
{
    json_t *prog = json_object_get(t, "progress");
    size_t n = 0;
    for (size_t i = 0; i < json_array_size(prog); i++)
        n += strcmp(cli_json_str(json_array_get(prog, i), "state"), state) == 0;
    return n;
}

static int do_list(struct cli *c, const struct jfr_opts *o)
{
    json_t *res = NULL;
    int rc = proc_task_list(c, API, o->service, &res);
    if (rc || !res)
        return rc;
    printf("%-40s %-20s %-22s %6s %-9s %s\n", "ID", "SERVICE", "EVENTS", "SEC", "STATUS",
           "UPLOADED");
    for (size_t i = 0; i < json_array_size(res); i++) {
        json_t *t = json_array_get(res, i);
        char ev[64];
        join_strs(json_object_get(t, "events"), ev, sizeof(ev));
        printf("%-40s %-20s %-22s %6" PRId64 " %-9s %zu/%zu\n", cli_json_str(t, "id"),
               cli_json_str(t, "service"), ev, cli_json_int(t, "duration"),
               cli_json_str(t, "status"), count_state(t, "uploaded"),
               json_array_size(json_object_get(t, "progress")));
    }
    json_decref(res);
    return CLI_EXIT_OK;
}

static int do_show(struct cli *c, const char *id)
{
    json_t *t = NULL;
    int rc = proc_task_get(c, API, id, &t);
    if (rc || !t)
        return rc;
    char ev[64], tb[32];
    join_strs(json_object_get(t, "events"), ev, sizeof(ev));
    printf("task      %s\nservice   %s\nevents    %s\nduration  %" PRId64 " s\nexecArgs  %s\n"
           "created   %s\nstatus    %s\n",
           cli_json_str(t, "id"), cli_json_str(t, "service"), ev, cli_json_int(t, "duration"),
           *cli_json_str(t, "execArgs") ? cli_json_str(t, "execArgs") : "-",
           cli_fmt_time(cli_json_int(t, "createTime"), tb, sizeof(tb)), cli_json_str(t, "status"));
    json_t *prog = json_object_get(t, "progress");
    printf("\n%-32s %-9s %s\n", "INSTANCE", "STATE", "DETAIL");
    for (size_t i = 0; i < json_array_size(prog); i++) {
        json_t *p = json_array_get(prog, i);
        const char *why = cli_json_str(p, "failedReason");
        printf("%-32s %-9s %s%s%s\n", cli_json_str(p, "instanceName"), cli_json_str(p, "state"),
               cli_json_str(p, "failedOperation"), *why ? ": " : "", why);
    }
    json_t *files = json_object_get(t, "files");
    if (json_array_size(files)) {
        printf("\n%-8s %-32s %12s  %s\n", "FILE", "INSTANCE", "BYTES", "UPLOADED");
        for (size_t i = 0; i < json_array_size(files); i++) {
            json_t *f = json_array_get(files, i);
            printf("%-8" PRId64 " %-32s %12" PRId64 "  %s\n", cli_json_int(f, "id"),
                   cli_json_str(f, "instanceName"), cli_json_int(f, "size"),
                   cli_fmt_time(cli_json_int(f, "time"), tb, sizeof(tb)));
        }
    }
    json_decref(t);
    return CLI_EXIT_OK;
}

struct frame_w {
    const char *sig;
    int64_t self;
};

static int cmp_frame(const void *a, const void *b)
{
    const struct frame_w *x = a, *y = b;
    return x->self < y->self ? 1 : x->self > y->self ? -1 : strcmp(x->sig, y->sig);
}

/* The heaviest frames by self weight (summed over the tree nodes with that signature). */
static void print_top(json_t *res)
{
    json_t *trees = json_object_get(res, "trees");
    size_t cap = 0;
    for (size_t t = 0; t < json_array_size(trees); t++)
        cap += json_array_size(json_object_get(json_array_get(trees, t), "elements"));
    struct frame_w *v = skpx_xcalloc(cap + 1, sizeof(*v));
    size_t n = 0;
    for (size_t t = 0; t < json_array_size(trees); t++) {
        json_t *els = json_object_get(json_array_get(trees, t), "elements");
        size_t m = json_array_size(els);
        /* self = count - children's counts; ids are 1..m in order. */
        int64_t *kids = skpx_xcalloc(m + 1, sizeof(*kids));
        for (size_t i = 0; i < m; i++) {
            int64_t parent = cli_json_int(json_array_get(els, i), "parentId");
            if (parent > 0 && (size_t)parent <= m)
                kids[parent] += cli_json_int(json_array_get(els, i), "count");
        }
        for (size_t i = 0; i < m; i++) {
            json_t *e = json_array_get(els, i);
            int64_t self = cli_json_int(e, "count") - kids[cli_json_int(e, "id")];
            const char *sig = cli_json_str(e, "codeSignature");
            size_t k = 0;
            while (k < n && strcmp(v[k].sig, sig) != 0)
                k++;
            if (k == n)
                v[n++] = (struct frame_w){.sig = sig};
            v[k].self += self;
        }
        skpx_free(kids);
    }
    qsort(v, n, sizeof(*v), cmp_frame);
    int64_t total = cli_json_int(res, "total");
    const char *thread = cli_json_str(res, "thread");
    printf("%s tree of %zu file(s)%s%s: total %" PRId64 " %s in %" PRId64 " samples\n",
           cli_json_str(res, "eventType"), json_array_size(json_object_get(res, "files")),
           *thread ? ", thread " : "", thread, total, cli_json_str(res, "unit"),
           cli_json_int(res, "samples"));
    /* The self column's unit in its header, as the API names it (samples, bytes, ns). */
    const char *unit = cli_json_str(res, "unit");
    char self_h[48];
    snprintf(self_h, sizeof(self_h), "SELF(%.32s)",
             strcmp(unit, "nanoseconds") == 0 ? "ns"
             : *unit                          ? unit
                                              : "count");
    printf("%7s %16s  %s\n", "SELF%", self_h, "FRAME");
    for (size_t i = 0; i < n && i < TOP_FRAMES && v[i].self > 0; i++)
        printf("%6.2f%% %16" PRId64 "  %s\n", total ? 100.0 * (double)v[i].self / (double)total : 0,
               v[i].self, v[i].sig);
    json_t *errors = json_object_get(res, "errors");
    for (size_t i = 0; i < json_array_size(errors); i++)
        fprintf(stderr, "skyprof: file %" PRId64 " (%s) left out: %s\n",
                cli_json_int(json_array_get(errors, i), "fileId"),
                cli_json_str(json_array_get(errors, i), "instanceName"),
                cli_json_str(json_array_get(errors, i), "error"));
    skpx_free(v);
}

static int do_analyze(struct cli *c, const char *id, const struct jfr_opts *o)
{
    static const char *const formats[] = {"top",   "json",       "collapsed",
                                          "pprof", "speedscope", "html"};
    const char *format = o->format ? o->format : "top";
    int rc = cli_check_format("jfr analyze", format, formats, sizeof(formats) / sizeof(formats[0]));
    if (rc)
        return rc;
    if (strcmp(format, "pprof") == 0 && !o->output && isatty(STDOUT_FILENO))
        return cli_usage_error("jfr analyze: pprof output is binary; use -o FILE or redirect");
    bool api_json = strcmp(format, "top") == 0 || strcmp(format, "json") == 0;
    char target[CLI_HTTP_MAX_TARGET];
    if (!cli_target(target, sizeof(target), API, id, api_json ? "/analyze" : "/download") ||
        !proc_task_add_query(target, sizeof(target), "format", api_json ? NULL : format) ||
        !proc_task_add_query(target, sizeof(target), "eventType", o->event_type) ||
        !proc_task_add_query(target, sizeof(target), "thread", o->thread) ||
        !proc_task_add_query(target, sizeof(target), "instances", o->instances_csv) ||
        !proc_task_add_query(target, sizeof(target), "granularity",
                             o->functions ? "functions" : NULL))
        return cli_usage_error("jfr analyze: arguments too long");
    if (!api_json)
        return proc_task_download(c, target, o->output);
    json_t *res = NULL;
    rc = cli_api_json(c, "GET", target, NULL, &res);
    if (rc)
        return rc;
    if (strcmp(format, "json") == 0 || c->json) {
        char *text = json_dumps(res, JSON_INDENT(2));
        rc = text ? proc_task_write_out(o->output, text, strlen(text)) : CLI_EXIT_API;
        if (text && rc == CLI_EXIT_OK && !o->output)
            putchar('\n');
        free(text); /* lint:allow - json_dumps: the CLI keeps jansson's default allocator */
    } else if (!tree_print_has_data(res)) {
        char what[200];
        snprintf(what, sizeof(what), "async-profiler task %.150s", id);
        rc = cli_no_data(what, res,
                         "'skyprof jfr show ID' shows each instance's progress (an instance "
                         "uploads its JFR file when the recording is over)");
    } else {
        print_top(res);
    }
    json_decref(res);
    return rc;
}

static int do_file(struct cli *c, const char *id, const char *file_id, const char *output)
{
    if (!output && isatty(STDOUT_FILENO))
        return cli_usage_error("jfr file: a JFR file is binary; use -o FILE or redirect");
    char target[CLI_HTTP_MAX_TARGET];
    if (!cli_target(target, sizeof(target), API, id, "/files/") ||
        !http_path_escape(target, sizeof(target), file_id))
        return cli_usage_error("id too long");
    return proc_task_download(c, target, output);
}

int cmd_jfr(struct cli *c, int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(g_usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
    }
    const char *sub = argv[1];
    struct jfr_opts o = {0};
    int prc = cli_parse_table(c, argc - 1, argv + 1, ":ho:f:", g_options, CLI_ROWS(g_options),
                              g_usage, "jfr", sub, on_option, &o);
    if (prc != CLI_PARSE_NEXT)
        return prc;
    int n_ops = argc - 1 - optind;
    char **ops = argv + 1 + optind;
    if (strcmp(sub, "create") == 0 && n_ops == 0)
        return do_create(c, &o);
    if (strcmp(sub, "list") == 0 && n_ops == 0)
        return do_list(c, &o);
    if (strcmp(sub, "show") == 0 && n_ops == 1)
        return do_show(c, ops[0]);
    if (strcmp(sub, "analyze") == 0 && n_ops == 1)
        return do_analyze(c, ops[0], &o);
    if (strcmp(sub, "file") == 0 && n_ops == 2)
        return do_file(c, ops[0], ops[1], o.output);
    if (strcmp(sub, "create") && strcmp(sub, "list") && strcmp(sub, "show") &&
        strcmp(sub, "analyze") && strcmp(sub, "file"))
        return cli_usage_error("jfr: unknown subcommand '%s' (create, list, show, analyze, file)",
                               sub);
    return cli_usage_error("jfr %s: wrong number of arguments (see skyprof jfr --help)", sub);
}
