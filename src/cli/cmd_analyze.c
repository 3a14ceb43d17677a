/* cmd_analyze.c - `skyprof analyze`: a segment's or a whole task's stack tree. A segment is
 * analysed over its spans' window by default, as the web UI does (the server's ?window=span),
 * over its whole life with --whole (agents may keep sampling a thread after its request
 * ended), or over --from/--to. The tree is printed as a terminal tree or fetched in an export
 * format from the server's export endpoints (the server renders pprof/collapsed/speedscope/html).
 * --functions asks for the tree built on functions (?granularity=functions: durations computed
 * by the server on that tree, docs/accuracy.md).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/alloc.h"
#include "cli/tree_print.h"

static const char g_usage[] =
    "Usage: skyprof analyze (--segment ID [--whole | --from MS --to MS] | --task ID)\n"
    "                       [--format FORMAT] [-o FILE] [--functions] [--all-frames] [--wait S]\n"
    "  --segment ID   analyse one profiled segment over its spans' window (as the web UI does)\n"
    "  --whole        ...over the segment's whole life (every dump, also after the request)\n"
    "  --from/--to    ...over this window (ms since the epoch, inclusive)\n"
    "  --task ID      analyse every snapshot of a task\n"
    "  --format F     tree (default: indented tree with duration, self duration, count),\n"
    "                 json (the API's analysis), collapsed, pprof (gzipped profile.proto),\n"
    "                 speedscope, html (self-contained flame graph)\n"
    "  -o FILE        write to FILE instead of stdout (required for pprof on a terminal)\n"
    "  --functions    tree, json: frames are functions (a function's lines merged, durations\n"
    "                 computed on that tree)\n"
    "  --all-frames   tree: also show the agent's and the runner's (runpy) frames\n"
    "  --wait S       no data yet: ask again every second, up to S seconds\n"
    "Exits 6 with a sentence on stderr (and writes no file) when there is no profile data.\n"
    "Global options --server, --token, --timeout, --json are accepted too.\n";

static const char *const g_formats[] = {"tree", "json", "collapsed", "pprof", "speedscope", "html"};

struct analyze_opts {
    const char *segment, *task, *format, *output;
    int64_t from, to;
    bool whole, all_frames, functions;
    long long wait_s;
};

static const struct cli_stored_opt g_options[] = {
    CLI_STR_OPT("segment", 's', struct analyze_opts, segment),
    CLI_STR_OPT("task", 't', struct analyze_opts, task),
    CLI_OWN_OPT("from", 'F'),
    CLI_OWN_OPT("to", 'T'),
    CLI_FLAG_OPT("whole", 'W', struct analyze_opts, whole),
    CLI_FLAG_OPT("all-frames", 'A', struct analyze_opts, all_frames),
    CLI_FLAG_OPT("functions", 'U', struct analyze_opts, functions),
    CLI_INT_OPT("wait", 'w', struct analyze_opts, wait_s, 0, 3600,
                "--wait: expected seconds (0-3600), got '%s'"),
    CLI_STR_OPT("format", 'f', struct analyze_opts, format),
    CLI_STR_OPT("output", 'o', struct analyze_opts, output),
};

static int analyze_option(void *ud, int opt, const char *arg)
{
    struct analyze_opts *o = ud;
    if (opt == 'F' || opt == 'T') {
        if (!cli_parse_time(arg, opt == 'F' ? &o->from : &o->to))
            return cli_usage_error("--%s: expected ms since the epoch, got '%s'",
                                   opt == 'F' ? "from" : "to", arg);
        return CLI_PARSE_NEXT;
    }
    return CLI_PARSE_UNKNOWN;
}

int cmd_analyze(struct cli *c, int argc, char **argv)
{
    struct analyze_opts o = {.format = "tree", .from = -1, .to = -1};
    int prc = cli_parse_table(c, argc, argv, ":ho:f:", g_options, CLI_ROWS(g_options), g_usage,
                              "analyze", NULL, analyze_option, &o);
    if (prc != CLI_PARSE_NEXT)
        return prc;
    const char *segment = o.segment, *task = o.task, *format = o.format, *output = o.output;
    int64_t from = o.from, to = o.to;
    if (optind < argc)
        return cli_usage_error("analyze: unexpected argument '%s'", argv[optind]);
    if (!segment == !task)
        return cli_usage_error("analyze: give exactly one of --segment ID or --task ID");
    if ((segment && !*segment) || (task && !*task))
        return cli_usage_error("analyze: --%s got an empty id ('skyprof %s' lists them)",
                               segment ? "segment" : "task",
                               segment ? "segments TASK" : "task list");
    if (task && (from >= 0 || to >= 0 || o.whole))
        return cli_usage_error("analyze: --from/--to/--whole apply to --segment only");
    if (o.whole && (from >= 0 || to >= 0))
        return cli_usage_error("analyze: give --whole or --from/--to, not both");
    if (from >= 0 && to >= 0 && from > to)
        return cli_usage_error("analyze: --from is after --to");
    int frc =
        cli_check_format("analyze", format, g_formats, sizeof(g_formats) / sizeof(g_formats[0]));
    if (frc)
        return frc;
    if (o.functions && strcmp(format, "tree") != 0 && strcmp(format, "json") != 0)
        return cli_usage_error("analyze: --functions applies to --format tree and json");
    if (strcmp(format, "pprof") == 0 && !output && isatty(STDOUT_FILENO))
        return cli_usage_error("analyze: pprof output is binary; use -o FILE or redirect stdout");

    bool windowed = segment && (from >= 0 || to >= 0);
    if (windowed) {
        if (from < 0)
            from = 0;
        if (to < 0)
            to = INT64_MAX / 2;
    }
    char target[CLI_HTTP_MAX_TARGET];
    snprintf(target, sizeof(target), "/api/v1/profile/%s/", segment ? "segments" : "tasks");
    if (!http_path_escape(target, sizeof(target) - 128, segment ? segment : task))
        return cli_usage_error("id too long");

    bool tree = strcmp(format, "tree") == 0;
    bool json_fmt = strcmp(format, "json") == 0 || (tree && c->json);
    /* The analysis first, whatever the format: with no data there is nothing to write, and
     * the user gets a sentence and exit code 6 instead of an empty tree or file. */
    /* --wait S: no data yet (the agent reports a request's snapshots after it): ask again
     * every second until there is some or S seconds passed. */
    json_t *res = NULL;
    int rc;
    if (windowed) {
        json_t *q = json_pack("[{s:s, s:{s:I, s:I}}]", "segmentId", segment, "timeRange", "start",
                              (json_int_t)from, "end", (json_int_t)to);
        if (!q)
            return cli_usage_error("analyze: --segment must be UTF-8");
        rc = cli_api_json_wait(c, "POST",
                               o.functions ? "/api/v1/profile/analyze?granularity=functions"
                                           : "/api/v1/profile/analyze",
                               q, o.wait_s, tree_print_has_data, &res);
        json_decref(q);
    } else {
        char an[CLI_HTTP_MAX_TARGET + 64];
        snprintf(an, sizeof(an), "%s%s%s", target,
                 segment && !o.whole ? "/analyze?window=span" : "/analyze",
                 !o.functions          ? ""
                 : segment && !o.whole ? "&granularity=functions"
                                       : "?granularity=functions");
        rc = cli_api_json_wait(c, "GET", an, NULL, o.wait_s, tree_print_has_data, &res);
    }
    if (rc)
        return rc;
    bool has_data = tree_print_has_data(res);
    if (json_fmt) {
        size_t len = json_dumpb(res, NULL, 0, JSON_INDENT(2));
        char *text = skpx_xmalloc(len + 2);
        if (json_dumpb(res, text, len, JSON_INDENT(2)) != len)
            len = 0;
        text[len++] = '\n';
        rc = cli_write_out(output, text, len);
        skpx_free(text);
    }
    if (!has_data) {
        char what[160];
        snprintf(what, sizeof(what), "%s %.120s", segment ? "segment" : "task",
                 segment ? segment : task);
        rc = cli_no_data(what, res,
                         segment ? "'skyprof segments TASK' lists the profiled segments"
                                 : "agents profile only requests to the task's endpoint that "
                                   "start after they fetched the task (they poll every 20 s by "
                                   "default; 'skyprof task create --wait' waits for it); "
                                   "'skyprof task show ID' says why a finished task has none");
        json_decref(res);
        return rc;
    }
    if (json_fmt) {
        json_decref(res);
        return rc;
    }
    if (tree) {
        FILE *f = output ? fopen(output, "w") : stdout;
        if (!f) {
            fprintf(stderr, "skyprof: cannot write %s: %s\n", output, strerror(errno));
            json_decref(res);
            return CLI_EXIT_USAGE;
        }
        struct tree_print_opts topts = {.width = output ? 160 : cli_term_width(),
                                        .all_frames = o.all_frames};
        rc = tree_print_exit(f, res, &topts);
        if (output)
            fclose(f);
        json_decref(res);
        return rc;
    }
    json_decref(res);

    /* Export formats. */
    size_t n = strlen(target);
    if (windowed)
        snprintf(target + n, sizeof(target) - n, "/export?format=%s&start=%lld&end=%lld", format,
                 (long long)from, (long long)to);
    else
        snprintf(target + n, sizeof(target) - n, "/export?format=%s%s", format,
                 segment && !o.whole ? "&window=span" : "");
    struct http_response r;
    rc = cli_api_raw(c, "GET", target, NULL, &r);
    if (rc)
        return rc;
    rc = cli_write_out(output, r.body, r.body_len);
    http_response_cleanup(&r);
    if (rc == CLI_EXIT_OK && output)
        fprintf(stderr, "skyprof: wrote %s\n", output);
    return rc;
}
