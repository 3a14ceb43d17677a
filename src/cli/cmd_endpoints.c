/* cmd_endpoints.c - `skyprof endpoints SERVICE`: the endpoint names skyprofd has seen in the
 * service's reported segments (most requests first), i.e. the names a profile task can match. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const char g_usage[] =
    "Usage: skyprof endpoints SERVICE\n"
    "The endpoint names seen in SERVICE's trace segments, with request count, first and last\n"
    "seen: a profile task for one of these names matches requests.\n"
    "Global options --server, --token, --timeout, --json are accepted too.\n";

int cmd_endpoints(struct cli *c, int argc, char **argv)
{
    int prc = cli_parse_global_options(c, argc, argv, g_usage, "endpoints");
    if (prc != CLI_PARSE_NEXT)
        return prc;
    if (argc - optind != 1)
        return cli_usage_error("endpoints: exactly one SERVICE");
    const char *name = argv[optind];
    json_t *list = NULL;
    int rc = cli_service_get(c, name, "/endpoints", &list);
    if (!list)
        return rc;
    size_t i;
    json_t *e;
    char tb[32];
    char tb2[32];
    if (json_array_size(list) == 0) {
        printf("no endpoint seen for %s (no trace segment reported yet)\n", name);
    } else {
        printf("%-48s %9s  %-19s  %s\n", "ENDPOINT", "REQUESTS", "FIRST SEEN", "LAST SEEN");
        json_array_foreach(list, i, e) {
            printf("%-48s %9lld  %-19s  %s\n", cli_json_str(e, "name"),
                   (long long)cli_json_int(e, "count"),
                   cli_fmt_time(cli_json_int(e, "firstSeen"), tb, sizeof(tb)),
                   cli_fmt_time(cli_json_int(e, "lastSeen"), tb2, sizeof(tb2)));
        }
    }
    json_decref(list);
    return CLI_EXIT_OK;
}
