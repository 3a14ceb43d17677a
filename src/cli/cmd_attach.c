/* cmd_attach.c - `skyprof attach --pid P --service NAME [--backend HOST:PORT] [--instance NAME]`:
 * profiling with no agent inside the target. Starts libskyprof's agent IN THIS PROCESS (public
 * API only, include/skyprof/skyprof.h), registered as an instance of NAME with skyprofd or
 * SkyWalking's OAP (ManagementService), and gives it a process source that reads process P from
 * outside (attach_source.c over src/attach). The agent then serves process-profiling tasks
 * (PprofTask cpu, wall, goroutine) and the continuous-profiling process checks for P exactly as
 * it does for its own process in an instrumented service.
 * Layering: the CLI uses libskyprof through its public header, like any host application; it
 * includes nothing from src/agent. Runs until Ctrl-C/SIGTERM or until P exits. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attach/pyreader.h"
#include "cli/attach_source.h"
#include "cli/cli.h"
#include "cli/cli_pid.h"
#include "common/procfs.h"
#include "skyprof/skyprof.h"

static const char g_usage[] =
    "Usage: skyprof attach --pid PID --service NAME [--backend HOST:PORT] [--instance NAME]\n"
    "                      [--verbose]\n"
    "Registers process PID (a CPython 3.11-3.14 process with no agent inside it) as an instance\n"
    "of service NAME with skyprofd or SkyWalking's OAP at HOST:PORT (gRPC, default\n"
    "$SW_AGENT_COLLECTOR_BACKEND_SERVICES or 127.0.0.1:11800) and serves its process-profiling\n"
    "tasks (pprof events cpu, wall, goroutine) and continuous-profiling process checks (process\n"
    "CPU %, thread count) by reading the process from outside. The other SW_AGENT_* variables\n"
    "of the agents apply (e.g. SW_AGENT_COLLECTOR_GET_PROFILE_TASK_INTERVAL). Runs until Ctrl-C\n"
    "or until the process exits. Needs ptrace access to the process; see\n"
    "docs/out-of-process.md.\n"
    "  --instance NAME  instance name (default: <32 hex>@<hostname>, as the agents make)\n"
    "  --verbose        log what the agent does (task received, uploads) on stderr\n";

struct attach_opts {
    long pid;
    const char *service, *backend, *instance;
    bool verbose;
};

static const struct cli_stored_opt g_options[] = {
    CLI_PID_OPT("pid", 'p', struct attach_opts, pid, "attach: --pid wants a process id, got '%s'"),
    CLI_STR_OPT("service", 's', struct attach_opts, service),
    CLI_STR_OPT("backend", 'B', struct attach_opts, backend),
    CLI_STR_OPT("instance", 'I', struct attach_opts, instance),
    CLI_FLAG_OPT("verbose", 'v', struct attach_opts, verbose),
};

static void log_line(void *ud, enum skyprof_log_level level, const char *line)
{
    (void)ud;
    static const char *const names[] = {"error", "warn", "info", "debug"};
    fprintf(stderr, "skyprof attach: [%s] %s\n", names[level <= SKYPROF_LOG_DEBUG ? level : 0],
            cli_safe(line));
}

static void *refuse_thread(void *ud)
{
    (void)ud;
    return NULL;
}

static int no_capture(void *ud, void *handle, int tid, struct skyprof_capture *out)
{
    (void)ud;
    (void)handle;
    (void)tid;
    (void)out;
    return -1;
}

static bool set_str(char *dst, const char *v, const char *what)
{
    size_t n = strlen(v);
    if (n >= SKYPROF_STR_MAX) {
        cli_usage_error("attach: %s is longer than %d bytes", what, SKYPROF_STR_MAX - 1);
        return false;
    }
    memcpy(dst, v, n + 1);
    return true;
}

static bool process_alive(pid_t pid)
{
    char path[32];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    char buf[512];
    ssize_t n = skpx_procfs_read(path, buf, sizeof(buf));
    char state = '?';
    return n > 0 && attach_stat_state(buf, (size_t)n, &state) && state != 'Z' && state != 'X';
}

int cmd_attach(struct cli *c, int argc, char **argv)
{
    struct attach_opts o = {0};
    int prc = cli_parse_pid_table(c, argc, argv, ":hp:s:v", g_options, CLI_ROWS(g_options), g_usage,
                                  "attach", NULL, &o, &o.pid);
    if (prc != CLI_PARSE_NEXT)
        return prc;
    if (!o.service || !*o.service)
        return cli_usage_error("attach: --service is required (see skyprof attach --help)");
    if (optind < argc)
        return cli_usage_error("attach: unexpected argument '%s'", argv[optind]);

    struct skyprof_config cfg;
    skyprof_config_init_defaults(&cfg);
    if (skyprof_config_from_env(&cfg) != SKP_OK)
        fprintf(stderr, "skyprof attach: a SW_AGENT_* variable is malformed and was ignored\n");
    if (!set_str(cfg.service, o.service, "--service") ||
        (o.backend && !set_str(cfg.backend, o.backend, "--backend")) ||
        (o.instance && !set_str(cfg.instance, o.instance, "--instance")))
        return CLI_EXIT_USAGE;
    snprintf(cfg.language, sizeof(cfg.language), "Python");
    cfg.log_sink = log_line;
    cfg.log_level = o.verbose ? SKYPROF_LOG_INFO : SKYPROF_LOG_WARN;
    cfg.report_segments = false; /* no requests are traced here */
    char pid_text[24];
    snprintf(pid_text, sizeof(pid_text), "%ld", o.pid);
    const struct skyprof_kv props[] = {
        {"Process No.", pid_text},
        {"agent", "skyprof attach " SKP_VERSION " (out-of-process)"},
    };
    cfg.properties = props;
    cfg.n_properties = sizeof(props) / sizeof(props[0]);
    if (skyprof_config_validate(&cfg) != SKP_OK)
        return cli_usage_error("attach: the agent configuration is invalid (backend '%s')",
                               cfg.backend);

    char why[ATTACH_WHY_MAX];
    struct attach_target *t = NULL;
    skp_err err = attach_target_open((pid_t)o.pid, &t, why, sizeof(why));
    if (err) {
        fprintf(stderr, "skyprof attach: %s\n", cli_safe(why));
        return cli_attach_exit(err);
    }
    char version[32];
    snprintf(version, sizeof(version), "%s", attach_target_version(t));
    struct skyprof_proc_source psrc;
    err = attach_source_init(t, &psrc); /* owns t from here */
    if (err) {
        fprintf(stderr, "skyprof attach: %s\n", skp_strerror(err));
        return CLI_EXIT_ATTACH;
    }
    /* A stack source that never takes a request: trace-profiling tasks need a request thread in
     * this process, and there is none. Without one the agent would default to the native
     * source (signals in this process). */
    static const struct skyprof_stack_source no_requests = {
        .name = "attach",
        .thread_attach = refuse_thread,
        .capture = no_capture,
    };
    skyprof_agent *agent = NULL;
    err = skyprof_agent_start(&cfg, &no_requests, &agent);
    if (err) {
        fprintf(stderr, "skyprof attach: cannot start the agent: %s\n", skp_strerror(err));
        psrc.destroy(psrc.ud);
        return CLI_EXIT_ATTACH;
    }
    err = skyprof_agent_set_proc_source(agent, &psrc);
    if (err) {
        fprintf(stderr, "skyprof attach: cannot set the process source: %s\n", skp_strerror(err));
        psrc.destroy(psrc.ud);
        skyprof_agent_stop(agent, 0);
        return CLI_EXIT_ATTACH;
    }

    cli_catch_stop_signals(false);
    fprintf(stderr,
            "skyprof attach: process %ld (Python %s) is instance %s of service %s at %s; "
            "serving process-profiling tasks (cpu, wall, goroutine). Ctrl-C detaches.\n",
            o.pid, cli_safe(version), cli_safe(skyprof_agent_instance(agent)),
            cli_safe(cfg.service), cli_safe(cfg.backend));
    fflush(stderr);
    int rc = CLI_EXIT_OK;
    while (!cli_stop_requested()) {
        struct timespec ts = {0, 200 * 1000 * 1000};
        nanosleep(&ts, NULL);
        if (!process_alive((pid_t)o.pid)) {
            fprintf(stderr, "skyprof attach: process %ld exited; detaching\n", o.pid);
            break;
        }
    }
    struct skyprof_stats st;
    skyprof_agent_get_stats(agent, &st);
    /* a running task's finish report and upload get a few seconds to go out */
    skyprof_agent_stop(agent, 5000);
    fprintf(stderr, "skyprof attach: detached (%llu commands received, %llu heartbeats)\n",
            (unsigned long long)st.commands_received, (unsigned long long)st.heartbeats_sent);
    return rc;
}
