/* cmd_segments.c - `skyprof segments TASK`: the sampled trace segments of a task, one row per
 * segment group, with the profiled segment id to pass to `skyprof analyze --segment`. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const char g_usage[] =
    "Usage: skyprof segments TASK_ID [--wait S]\n"
    "Lists the trace segments sampled by a task: segment id (profiled), trace id, instance,\n"
    "endpoint, start time, duration and how many of its spans are profiled.\n"
    "  --wait S   none yet: ask again every second for up to S seconds (then exit 6)\n"
    "Global options --server, --token, --timeout, --json are accepted too.\n";

/* The id of the first profiled span's segment, else the group's own segmentId. */
static const char *profiled_segment(json_t *seg)
{
    size_t i;
    json_t *sp;
    json_array_foreach(json_object_get(seg, "spans"), i, sp) {
        if (json_is_true(json_object_get(sp, "profiled")))
            return cli_json_str(sp, "segmentId");
    }
    return cli_json_str(seg, "segmentId");
}

struct segments_opts {
    long long wait_s; /* -1: no --wait */
};

static const struct cli_stored_opt g_options[] = {
    CLI_INT_OPT("wait", 'w', struct segments_opts, wait_s, 0, 3600,
                "--wait: expected seconds (0-3600), got '%s'"),
};

static bool has_segments(json_t *segs)
{
    return json_array_size(segs) > 0;
}

int cmd_segments(struct cli *c, int argc, char **argv)
{
    struct segments_opts o = {.wait_s = -1};
    int prc = cli_parse_table(c, argc, argv, ":h", g_options, CLI_ROWS(g_options), g_usage,
                              "segments", NULL, NULL, &o);
    long long wait_s = o.wait_s;
    if (prc != CLI_PARSE_NEXT)
        return prc;
    if (optind != argc - 1)
        return cli_usage_error(
            "segments: expected exactly one TASK_ID (see skyprof segments --help)");
    char target[CLI_HTTP_MAX_TARGET];
    if (!cli_target(target, sizeof(target), "/api/v1/profile/tasks", argv[optind], "/segments"))
        return cli_usage_error("task id too long");
    /* --wait S: an agent reports a segment when its request ended; ask again until then. */
    json_t *segs = NULL;
    int rc =
        cli_api_json_wait(c, "GET", target, NULL, wait_s > 0 ? wait_s : 0, has_segments, &segs);
    if (rc)
        return rc;
    if (wait_s >= 0 && json_array_size(segs) == 0) {
        fprintf(stderr, "skyprof: no sampled segment of task %s within %lld s\n",
                cli_safe(argv[optind]), wait_s);
        json_decref(segs);
        return CLI_EXIT_NODATA;
    }
    if (c->json) {
        cli_print_json(segs);
    } else if (json_array_size(segs) == 0) {
        printf("no sampled segments yet\n");
    } else {
        printf("%-40s %-40s %-20s %-24s %-19s %8s %7s\n", "SEGMENT", "TRACE", "INSTANCE",
               "ENDPOINT", "START", "DURATION", "PROFILED");
        size_t i;
        json_t *s;
        json_array_foreach(segs, i, s) {
            char tb[32];
            json_t *eps = json_object_get(s, "endpointNames");
            const char *ep = json_string_value(json_array_get(eps, 0));
            size_t n_spans = json_array_size(json_object_get(s, "spans")), n_prof = 0, k;
            json_t *sp;
            json_array_foreach(json_object_get(s, "spans"), k, sp)
                n_prof += json_is_true(json_object_get(sp, "profiled"));
            char prof[32];
            snprintf(prof, sizeof(prof), "%zu/%zu", n_prof, n_spans);
            printf("%-40s %-40s %-20s %-24s %-19s %6lldms %7s\n", profiled_segment(s),
                   cli_json_str(s, "traceId"), cli_json_str(s, "instanceName"), ep ? ep : "-",
                   cli_fmt_time(cli_json_int(s, "start"), tb, sizeof(tb)),
                   (long long)cli_json_int(s, "duration"), prof);
        }
    }
    json_decref(segs);
    return CLI_EXIT_OK;
}
