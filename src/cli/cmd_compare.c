/* cmd_compare.c - `skyprof compare A B`: two analyses (segments, trace tasks, either cut to a time
 * range, pprof or JFR tasks) compared by POST /api/v1/profile/compare, printed as the frames
 * whose share of their profile changed most (docs/compare.md). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static const char g_usage[] =
    "Usage: skyprof compare [--limit N] [--granularity lines|functions] BASE TARGET\n"
    "Compares two profiles and prints the frames whose share changed most (largest first).\n"
    "BASE and TARGET are KIND:ID[@FROM..TO][#TYPE]:\n"
    "  segment:ID        a profiled segment (a bare ID means a segment)\n"
    "  task:ID           every profiled segment of a trace task\n"
    "  pprof:ID#TYPE     a pprof task's files merged, weighted by sample type TYPE (optional)\n"
    "  jfr:ID#EVENT      an async-profiler task's tree of EVENT (execution, alloc, lock, ...)\n"
    "  @FROM..TO         (segment, task) only the dumps between FROM and TO, ms since the epoch\n"
    "  --limit N         rows to print (default 20)\n"
    "  --granularity G   pprof/jfr: lines (default) or functions\n"
    "Shares are a frame's weight over its profile's total, so profiles of different lengths\n"
    "compare. Global options --server, --token, --timeout, --json are accepted too.\n";

struct compare_opts {
    long long limit;
    const char *granularity;
};

static const struct cli_stored_opt g_options[] = {
    CLI_INT_OPT("limit", 'n', struct compare_opts, limit, 1, 10000,
                "--limit: expected 1..10000, got '%s'"),
    CLI_OWN_OPT("granularity", 'g'),
};

static int compare_option(void *ud, int opt, const char *arg)
{
    if (opt != 'g')
        return CLI_PARSE_UNKNOWN;
    if (strcmp(arg, "lines") != 0 && strcmp(arg, "functions") != 0)
        return cli_usage_error("--granularity: expected lines or functions, got '%s'", arg);
    ((struct compare_opts *)ud)->granularity = arg;
    return CLI_PARSE_NEXT;
}

/* Parses KIND:ID[@FROM..TO][#TYPE] into a selector object; NULL (after a message) if bad. */
static json_t *parse_selector(const char *arg, const char *which)
{
    static const char *const kinds[] = {"segment", "task", "pprof", "jfr"};
    char buf[4096];
    if (strlen(arg) >= sizeof(buf)) {
        cli_usage_error("compare: %s selector too long", which);
        return NULL;
    }
    snprintf(buf, sizeof(buf), "%s", arg);
    const char *kind = "segment";
    char *id = buf;
    char *colon = strchr(buf, ':');
    if (colon) {
        *colon = '\0';
        size_t k = 0;
        while (k < 4 && strcmp(buf, kinds[k]) != 0)
            k++;
        if (k == 4) {
            cli_usage_error("compare: %s: unknown kind '%s' (segment, task, pprof, jfr)", which,
                            buf);
            return NULL;
        }
        kind = kinds[k];
        id = colon + 1;
    }
    char *type = strchr(id, '#');
    if (type)
        *type++ = '\0';
    char *range = strchr(id, '@');
    if (range)
        *range++ = '\0';
    if (!*id) {
        cli_usage_error("compare: %s: empty id", which);
        return NULL;
    }
    bool trace = strcmp(kind, "segment") == 0 || strcmp(kind, "task") == 0;
    if ((range && !trace) || (type && trace)) {
        cli_usage_error("compare: %s: @FROM..TO is for segment/task, #TYPE for pprof/jfr", which);
        return NULL;
    }
    json_t *sel = json_pack("{s:s,s:s}", "kind", kind,
                            strcmp(kind, "segment") == 0 ? "segmentId" : "taskId", id);
    if (!sel) {
        fprintf(stderr, "skyprof: out of memory\n");
        return NULL;
    }
    if (range) {
        char *dots = strstr(range, "..");
        int64_t from = 0, to = 0;
        if (dots)
            *dots = '\0';
        if (!dots || !cli_parse_time(range, &from) || !cli_parse_time(dots + 2, &to) || from > to) {
            cli_usage_error("compare: %s: expected @FROM..TO (ms since the epoch, FROM <= TO)",
                            which);
            json_decref(sel);
            return NULL;
        }
        json_object_set_new(
            sel, "timeRange",
            json_pack("{s:I,s:I}", "start", (json_int_t)from, "end", (json_int_t)to));
    }
    if (type && *type)
        json_object_set_new(sel, strcmp(kind, "pprof") == 0 ? "sampleType" : "eventType",
                            json_string(type));
    return sel;
}

static double num(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : 0.0;
}

static void print_side(const char *label, json_t *s)
{
    printf("%-7s %s %s: %lld %s\n", label, cli_json_str(s, "kind"), cli_json_str(s, "id"),
           (long long)cli_json_int(s, "total"), cli_json_str(s, "unit"));
}

static void print_changes(json_t *doc)
{
    print_side("base:", json_object_get(doc, "base"));
    print_side("target:", json_object_get(doc, "target"));
    json_t *ch = json_object_get(doc, "changes");
    if (json_array_size(ch) == 0) {
        printf("both profiles are empty\n");
        return;
    }
    int width = cli_term_width();
    int sig_w = width - 44;
    if (sig_w < 20)
        sig_w = 20;
    printf("%8s %8s %8s %8s  %s\n", "CHANGE", "BASE", "TARGET", "SELF CH", "FRAME");
    size_t i;
    json_t *e;
    json_array_foreach(ch, i, e) {
        const char *sig = cli_json_str(e, "codeSignature");
        printf("%+7.1f%% %7.1f%% %7.1f%% %+7.1f%%  %.*s\n", 100 * num(e, "delta"),
               100 * num(e, "baseShare"), 100 * num(e, "targetShare"), 100 * num(e, "selfDelta"),
               sig_w, sig);
    }
    long long total = (long long)cli_json_int(doc, "changesTotal");
    if ((size_t)total > json_array_size(ch))
        printf("(%zu of %lld frames; --limit shows more)\n", json_array_size(ch), total);
}

int cmd_compare(struct cli *c, int argc, char **argv)
{
    struct compare_opts o = {.limit = 20};
    int prc = cli_parse_table(c, argc, argv, ":hn:g:", g_options, CLI_ROWS(g_options), g_usage,
                              "compare", NULL, compare_option, &o);
    if (prc != CLI_PARSE_NEXT)
        return prc;
    if (optind != argc - 2)
        return cli_usage_error("compare: expected BASE and TARGET (see skyprof compare --help)");
    json_t *base = parse_selector(argv[optind], "BASE");
    json_t *target = base ? parse_selector(argv[optind + 1], "TARGET") : NULL;
    if (!base || !target) {
        json_decref(base);
        return CLI_EXIT_USAGE;
    }
    json_t *body =
        json_pack("{s:o,s:o,s:I}", "base", base, "target", target, "limit", (json_int_t)o.limit);
    if (body && o.granularity)
        json_object_set_new(body, "granularity", json_string(o.granularity));
    if (!body) {
        fprintf(stderr, "skyprof: out of memory\n");
        return CLI_EXIT_API;
    }
    json_t *doc = NULL;
    int rc = cli_api_json(c, "POST", "/api/v1/profile/compare", body, &doc);
    json_decref(body);
    if (rc)
        return rc;
    return cli_print_answer(c, doc, print_changes);
}
