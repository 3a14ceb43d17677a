/* main.c - `skyprof`, the command-line client of skyprofd's HTTP API: global options, then one
 * command (every one is listed in --help). Exit codes are listed in cli.h and docs/cli.md. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static const char g_usage[] =
    "Usage: skyprof [--server URL] [--token TOKEN] [--timeout S] [--json] COMMAND [ARGS]\n"
    "\n"
    "Trace profiling (profile tasks on one endpoint):\n"
    "  task create --service S --endpoint E [--duration MIN] [--threshold MS]\n"
    "              [--dump-period MS] [--max-sampling-count N] [--start TIME]\n"
    "              [--wait [--wait-timeout S]]\n"
    "                               create a profile task (prints its id); --wait returns\n"
    "                               once an instance of S fetched it\n"
    "  task list [--service S] [--endpoint E]   list tasks with their status\n"
    "  task show ID                 one task with its logs\n"
    "  task logs ID                 a task's logs, grouped by instance\n"
    "  task cancel ID               end a task now\n"
    "  segments TASK                the sampled segments of a task\n"
    "  analyze (--segment ID [--whole | --from MS --to MS] | --task ID) [--all-frames]\n"
    "          [--format tree|json|collapsed|pprof|speedscope|html] [-o FILE]\n"
    "                               stack tree / flame graph data of a segment or task\n"
    "  compare [--limit N] [--granularity lines|functions] BASE TARGET\n"
    "                               the frames whose share changed most between two profiles\n"
    "  services [NAME]              services, or the instances of service NAME\n"
    "  endpoints SERVICE            endpoint names seen in SERVICE's segments\n"
    "\n"
    "Process profiling:\n"
    "  pprof create --service S --event E [--instance I]... [--duration MIN]\n"
    "               [--dump-period N] [--sampling-rate HZ]\n"
    "                               create a process-profiling task (prints its id)\n"
    "  pprof list [--service S] | pprof show ID\n"
    "                               process tasks, per-instance progress and files\n"
    "  pprof analyze ID [--sample-type T] [--instances A,B] [--functions] [--all-frames]\n"
    "  pprof download ID [--file N | --format pprof|collapsed|speedscope|html] [-o FILE]\n"
    "  jfr create|list|show|analyze|file ...\n"
    "                               Java async-profiler tasks and their JFR trees\n"
    "\n"
    "Continuous profiling:\n"
    "  policy set SERVICE (--file F | TARGET:TYPE:THRESHOLD:PERIOD:COUNT[:URI]...)\n"
    "             [--execute S] [--silence S] [--max-per-hour N]\n"
    "  policy get|delete SERVICE | policy list\n"
    "                               continuous-profiling policies\n"
    "  triggers [--service S] [--task ID] [--limit N]\n"
    "                               what started profiling by itself, and why\n"
    "  ebpf list [--service S] | ebpf show ID | ebpf analyze ID | ebpf download ID\n"
    "       | ebpf processes       profiles agents started by a policy (ON_CPU, OFF_CPU)\n"
    "\n"
    "Out-of-process (a local Python process, no agent inside it):\n"
    "  dump --pid P [--json]        every Python thread's stack now\n"
    "  record --pid P [--duration S] [--rate HZ] [--idle] [--subprocesses] -o FILE\n"
    "         [--format pprof|collapsed|speedscope|html]   sample it into a profile\n"
    "  top --pid P [--rate HZ] [--idle] [--once N]\n"
    "                               its hottest functions, refreshed every second\n"
    "  attach --pid P --service NAME [--backend HOST:PORT] [--instance NAME]\n"
    "                               serve its process-profiling tasks to skyprofd or OAP\n"
    "\n"
    "Global options (also accepted after the command):\n"
    "  --server URL    skyprofd's HTTP address (default $SKYPROF_SERVER or " CLI_DEFAULT_SERVER
    ")\n"
    "  --token TOKEN   API token for mutating calls (default $SKYPROF_API_TOKEN)\n"
    "  --timeout S     give up on a request after S seconds (default 60)\n"
    "  --json          print the API's JSON instead of tables\n"
    "  --help, --version\n"
    "\n"
    "Exit codes: 0 ok, 1 server/API error, 2 usage error, 3 cannot connect, 4 not found,\n"
    "5 cannot read the process (permission, unsupported Python), 6 no data yet (nothing\n"
    "profiled to analyse; task create --wait: no instance fetched the task in time).\n"
    "Run 'skyprof COMMAND --help' for a command's options.\n";

static const struct {
    const char *name;
    cli_command_fn fn;
} g_commands[] = {
    {"task", cmd_task},           {"tasks", cmd_task},        {"segments", cmd_segments},
    {"analyze", cmd_analyze},     {"compare", cmd_compare},   {"services", cmd_services},
    {"endpoints", cmd_endpoints}, {"jfr", cmd_jfr},           {"pprof", cmd_pprof},
    {"policy", cmd_policy},       {"triggers", cmd_triggers}, {"dump", cmd_dump},
    {"record", cmd_record},       {"attach", cmd_attach},     {"top", cmd_top},
    {"ebpf", cmd_ebpf},
};

int main(int argc, char **argv)
{
    struct cli c;
    memset(&c, 0, sizeof(c));
    c.timeout_ms = CLI_DEFAULT_TIMEOUT_MS;
    const char *env_server = getenv("SKYPROF_SERVER");
    c.server = env_server && *env_server ? env_server : CLI_DEFAULT_SERVER;
    if (http_url_parse(c.server, &c.url) != SKP_OK)
        return cli_usage_error("SKYPROF_SERVER: expected http://HOST[:PORT], got '%s'", c.server);
    const char *env_token = getenv("SKYPROF_API_TOKEN");
    c.token = env_token && *env_token ? env_token : NULL;

    static const struct option longopts[] = {
        CLI_GLOBAL_LONGOPTS,
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int opt;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "+hV", longopts, NULL)) != -1) {
        bool bad = false;
        if (cli_global_option(&c, opt, optarg, &bad)) {
            if (bad)
                return CLI_EXIT_USAGE;
            continue;
        }
        switch (opt) {
        case 'h':
            fputs(g_usage, stdout);
            return CLI_EXIT_OK;
        case 'V':
            printf("skyprof %s\n", SKP_VERSION);
            return CLI_EXIT_OK;
        case ':':
            return cli_usage_error("option '%s' needs a value (see skyprof --help)",
                                   argv[optind - 1]);
        default:
            return cli_usage_error("unknown option '%s' (see skyprof --help)", argv[optind - 1]);
        }
    }
    if (optind >= argc) {
        fputs(g_usage, stderr);
        return CLI_EXIT_USAGE;
    }
    const char *name = argv[optind];
    if (strcmp(name, "help") == 0) {
        fputs(g_usage, stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(name, "version") == 0) {
        printf("skyprof %s\n", SKP_VERSION);
        return CLI_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof(g_commands) / sizeof(g_commands[0]); i++) {
        if (strcmp(name, g_commands[i].name) == 0) {
            int sub_argc = argc - optind;
            char **sub_argv = argv + optind;
            optind = 0; /* glibc: re-initialise getopt for the command's own parsing */
            return g_commands[i].fn(&c, sub_argc, sub_argv);
        }
    }
    return cli_usage_error("unknown command '%s' (see skyprof --help)", name);
}
