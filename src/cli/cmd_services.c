/* cmd_services.c - `skyprof services [NAME]`: the services that reported to skyprofd, or the
 * instances of one service with language, last heartbeat and properties. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const char g_usage[] =
    "Usage: skyprof services [NAME]\n"
    "Without NAME: every service (layer, instance count, last seen).\n"
    "With NAME: the service's instances (language, last heartbeat, properties).\n"
    "Global options --server, --token, --timeout, --json are accepted too.\n";

int cmd_services(struct cli *c, int argc, char **argv)
{
    int prc = cli_parse_global_options(c, argc, argv, g_usage, "services");
    if (prc != CLI_PARSE_NEXT)
        return prc;
    if (argc - optind > 1)
        return cli_usage_error("services: at most one service NAME");
    const char *name = optind < argc ? argv[optind] : NULL;
    json_t *list = NULL;
    int rc = cli_service_get(c, name, "/instances", &list);
    if (!list)
        return rc;
    size_t i;
    json_t *e;
    char tb[32];
    if (json_array_size(list) == 0) {
        printf(name ? "no instances\n" : "no services yet (no agent has reported)\n");
    } else if (!name) {
        printf("%-32s %-10s %9s  %s\n", "NAME", "LAYER", "INSTANCES", "LAST SEEN");
        json_array_foreach(list, i, e) {
            printf("%-32s %-10s %9lld  %s\n", cli_json_str(e, "name"), cli_json_str(e, "layer"),
                   (long long)cli_json_int(e, "instances"),
                   cli_fmt_time(cli_json_int(e, "lastSeen"), tb, sizeof(tb)));
        }
    } else {
        printf("%-36s %-10s %-19s  %s\n", "INSTANCE", "LANGUAGE", "LAST HEARTBEAT", "PROPERTIES");
        json_array_foreach(list, i, e) {
            printf("%-36s %-10s %-19s ", cli_json_str(e, "name"), cli_json_str(e, "language"),
                   cli_fmt_time(cli_json_int(e, "lastHeartbeat"), tb, sizeof(tb)));
            const char *k;
            json_t *v;
            bool first = true;
            json_object_foreach(json_object_get(e, "properties"), k, v) {
                printf("%s%s=%s", first ? " " : ", ", k,
                       json_is_string(v) ? json_string_value(v) : "?");
                first = false;
            }
            putchar('\n');
        }
    }
    json_decref(list);
    return CLI_EXIT_OK;
}
