/* cli.h - shared state and helpers of the `skyprof` command-line tool: global options, the exit
 * codes scripts rely on, API calls that print a clear message on stderr and return the exit
 * code to use, and small output helpers. Single-threaded. */
#ifndef SKP_CLI_CLI_H
#define SKP_CLI_CLI_H

#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/http_client.h"

/* Exit codes (documented in docs/cli.md; never renumber). */
enum cli_exit {
    CLI_EXIT_OK = 0,
    CLI_EXIT_API = 1,      /* the server answered with an error (validation, 5xx, ...) */
    CLI_EXIT_USAGE = 2,    /* bad command line */
    CLI_EXIT_CONNECT = 3,  /* cannot reach the server */
    CLI_EXIT_NOTFOUND = 4, /* no such task / segment / service / process */
    CLI_EXIT_ATTACH = 5,   /* cannot read a local process (permission, unsupported Python) */
    CLI_EXIT_NODATA = 6,   /* nothing yet: no profile data to analyse, no instance took a task */
};

#define CLI_DEFAULT_SERVER "http://127.0.0.1:12800"
#define CLI_DEFAULT_TIMEOUT_MS 60000
/* Pages of one listing the CLI follows (X-Next-Cursor) before it stops. */
#define CLI_MAX_PAGES 1000

struct cli {
    const char *server; /* URL as given */
    struct http_url url;
    const char *token; /* NULL for none */
    int timeout_ms;
    bool json; /* print raw JSON instead of tables */
};

/* Every command: parses its own argv (argv[0] is the command name) and returns an exit code. */
typedef int (*cli_command_fn)(struct cli *c, int argc, char **argv);

int cmd_task(struct cli *c, int argc, char **argv);
int cmd_segments(struct cli *c, int argc, char **argv);
int cmd_analyze(struct cli *c, int argc, char **argv);
int cmd_compare(struct cli *c, int argc, char **argv); /* cmd_compare.c */
int cmd_services(struct cli *c, int argc, char **argv);
int cmd_endpoints(struct cli *c, int argc, char **argv);
int cmd_jfr(struct cli *c, int argc, char **argv);
int cmd_pprof(struct cli *c, int argc, char **argv);
int cmd_policy(struct cli *c, int argc, char **argv);   /* cmd_policy.c */
int cmd_triggers(struct cli *c, int argc, char **argv); /* cmd_policy.c */
int cmd_ebpf(struct cli *c, int argc, char **argv);     /* cmd_ebpf.c */
/* Out-of-process commands (src/attach): read a local process, talk to no server. */
int cmd_dump(struct cli *c, int argc, char **argv);
int cmd_record(struct cli *c, int argc, char **argv);
int cmd_attach(struct cli *c, int argc, char **argv); /* cmd_attach.c: links libskyprof */
int cmd_top(struct cli *c, int argc, char **argv);    /* cmd_top.c */
/* Exit code for an attach error (SKP_ENOTFOUND -> CLI_EXIT_NOTFOUND, else CLI_EXIT_ATTACH). */
int cli_attach_exit(skp_err err);

/* Handles the options every command accepts (--server, --token, --timeout, --json) from
 * getopt_long's `opt` value; returns true if it was one of them. Sets *bad on a bad value. */
bool cli_global_option(struct cli *c, int opt, const char *arg, bool *bad);
/* getopt values of the global options, and their long options (cli_parse_table puts them before a
 * command's own; main.c reads them before the command name). */
enum {
    CLI_OPT_SERVER = 1000,
    CLI_OPT_TOKEN,
    CLI_OPT_TIMEOUT,
    CLI_OPT_JSON,
    CLI_OPT_HELP,
};
// clang-format off
#define CLI_GLOBAL_LONGOPTS                                                                        \
    {"server", required_argument, NULL, CLI_OPT_SERVER},                                           \
    {"token", required_argument, NULL, CLI_OPT_TOKEN},                                             \
    {"timeout", required_argument, NULL, CLI_OPT_TIMEOUT},                                         \
    {"json", no_argument, NULL, CLI_OPT_JSON},                                                     \
    {"help", no_argument, NULL, 'h'}
// clang-format on

/* What a command's option callback returns, besides an exit code (>= 0) to stop with. */
enum {
    CLI_PARSE_NEXT = -1,    /* handled: go on (also cli_parse_table's "all parsed") */
    CLI_PARSE_UNKNOWN = -2, /* not an option of this command: report it as unknown */
};
/* Handles one command-specific option `opt` (getopt_long's value) with its argument `arg`. */
typedef int (*cli_option_fn)(void *ud, int opt, const char *arg);

/* A command's options as one table (cli_parse_table): each row names a long option and its
 * getopt value, and says what it does: store its value in the command's options struct (`ud`),
 * or go to the command's callback (CLI_STORE_OWN). */
enum cli_store {
    CLI_STORE_STR,  /* const char * member = the argument (borrowed from argv) */
    CLI_STORE_FLAG, /* bool member = true (no argument) */
    CLI_STORE_INT,  /* long long member = the argument, a whole number in [lo, hi] (else the
                       usage error `bad`, a format with one %s: the argument) */
    CLI_STORE_PID,  /* long member = the argument, a process id (cli_parse_pid; else `bad`) */
    CLI_STORE_OWN,  /* the callback's (with an argument) */
};
struct cli_stored_opt {
    const char *name; /* --name */
    int opt;          /* getopt_long's value */
    enum cli_store how;
    size_t offset; /* of the member in the options struct */
    long long lo, hi;
    const char *bad;
};
/* Offset of `member` in `type`, which must have type T (checked at compile time). */
// clang-format off
#define CLI_MEMBER(type, member, T)                                                                \
    (offsetof(type, member) + 0 * sizeof(_Generic(((type *)0)->member, T: 1)))
#define CLI_STR_OPT(name, opt, type, member)                                                       \
    {(name), (opt), CLI_STORE_STR, CLI_MEMBER(type, member, const char *), 0, 0, NULL}
#define CLI_FLAG_OPT(name, opt, type, member)                                                      \
    {(name), (opt), CLI_STORE_FLAG, CLI_MEMBER(type, member, bool), 0, 0, NULL}
#define CLI_INT_OPT(name, opt, type, member, lo, hi, bad)                                          \
    {(name), (opt), CLI_STORE_INT, CLI_MEMBER(type, member, long long), (lo), (hi), (bad)}
#define CLI_PID_OPT(name, opt, type, member, bad)                                                  \
    {(name), (opt), CLI_STORE_PID, CLI_MEMBER(type, member, long), 0, 0, (bad)}
#define CLI_OWN_OPT(name, opt) {(name), (opt), CLI_STORE_OWN, 0, 0, 0, NULL}
// clang-format on
/* Most rows of one command's table. */
#define CLI_TABLE_MAX 24
/* Number of rows of a table array. */
#define CLI_ROWS(table) (sizeof(table) / sizeof((table)[0]))

/* Runs getopt_long (opterr off) over a command's argv with `shortopts` (which should start with
 * ':') and the long options of the global options and of table[0..n) (n <= CLI_TABLE_MAX),
 * handling what every command handles alike: the global options, -h/--help (prints `usage` on
 * stdout: CLI_EXIT_OK), a missing value, and an unknown option ("<cmd>[ <sub>]: unknown option
 * 'X' (see skyprof <cmd> --help)"). A row that stores does so in `ud` (none when ud is NULL: the
 * option is then unknown); any other option goes to on_opt(ud, ...) (none when on_opt is NULL).
 * Returns CLI_PARSE_NEXT when every option is parsed (optind is then at the first operand), else
 * the exit code to return. */
int cli_parse_table(struct cli *c, int argc, char **argv, const char *shortopts,
                    const struct cli_stored_opt *table, size_t n, const char *usage,
                    const char *cmd, const char *sub, cli_option_fn on_opt, void *ud);
/* cli_parse_table for a command that reads a local process (dump, record, top, attach): no
 * subcommand, and --pid is required: when *pid (the table's CLI_PID_OPT member in ud) is still 0
 * once every option is parsed, says "<cmd>: --pid is required (see skyprof <cmd> --help)" and
 * returns CLI_EXIT_USAGE. */
int cli_parse_pid_table(struct cli *c, int argc, char **argv, const char *shortopts,
                        const struct cli_stored_opt *table, size_t n, const char *usage,
                        const char *cmd, cli_option_fn on_opt, void *ud, const long *pid);
/* cli_parse_table for a command with no option of its own (only the global ones and -h). */
int cli_parse_global_options(struct cli *c, int argc, char **argv, const char *usage,
                             const char *cmd);
/* The head of a command that takes a subcommand (`skyprof CMD SUB ...`, argv[0] is CMD): with
 * no SUB prints `usage` on stderr and returns CLI_EXIT_USAGE; with --help, -h or help as SUB
 * prints it on stdout and returns CLI_EXIT_OK; else sets *sub to SUB, drops CMD from *argc and
 * *argv (argv[0] is then SUB) and returns CLI_PARSE_NEXT. */
int cli_subcommand(int *argc, char ***argv, const char *usage, const char **sub);

/* Output hygiene (issue 15, finding 8): every string a server or a read process supplied is
 * printed through one of these, so escape sequences in a code signature, service, instance or
 * property cannot reach the terminal. Control bytes, C1 controls and broken UTF-8 become
 * visible escapes (common/escape.h). */
/* Escaped copy of `s` (NULL prints as ""), in one of CLI_SAFE_SLOTS static buffers reused in
 * turn: valid until as many further calls (enough for one printf). Truncated to
 * CLI_SAFE_MAX - 1 bytes. Not thread-safe (the CLI is single-threaded). */
#define CLI_SAFE_SLOTS 16
#define CLI_SAFE_MAX 4096
const char *cli_safe(const char *s);
/* Replaces, in place, every string value and object key of `j` (borrowed) that holds something
 * to escape with its escaped form. cli_api_json applies it to every answer it returns for
 * text output; an allocation failure leaves that string out (replaced by ""). */
void cli_json_make_safe(json_t *j);

/* Prints `j` as indented JSON and a newline on stdout (the commands' --json output). */
void cli_print_json(json_t *j);
/* A command's answer (owned, NULL ok): with --json printed by cli_print_json, otherwise by the
 * command's print(answer); then json_decref'd. Returns CLI_EXIT_OK. */
int cli_print_answer(struct cli *c, json_t *answer, void (*print)(json_t *answer));
/* Writes len bytes of data to the file at path (NULL = stdout). Returns CLI_EXIT_OK,
 * CLI_EXIT_USAGE (cannot open; said on stderr) or CLI_EXIT_API (write failed; said). */
int cli_write_out(const char *path, const char *data, size_t len);

/* Prints "skyprof: <message>" on stderr and returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* CLI_EXIT_OK when `format` is one of names[0..n); otherwise says "skyprof: <cmd>: unknown format
 * 'F' (name, name, ...)" on stderr and returns CLI_EXIT_USAGE. */
int cli_check_format(const char *cmd, const char *format, const char *const *names, size_t n);

/* Calls the API. `body` (borrowed, may be NULL) is sent as JSON. On 2xx and a JSON body,
 * *out receives it (caller json_decref's). Otherwise prints the reason on stderr and returns the
 * exit code: 3 when the server cannot be reached, 4 on 404, 1 on any other error (the
 * server's {"error"} or {"errorReason", "field"} is printed). */
int cli_api_json(struct cli *c, const char *method, const char *target, json_t *body, json_t **out);
/* Writes "<api>/<escaped id><suffix>" into target (cap bytes): the route of one item of a
 * collection, id escaped with http_path_escape. False when it does not fit. */
bool cli_target(char *target, size_t cap, const char *api, const char *id, const char *suffix);
/* GETs target (cli_api_json). With --json prints the answer and hands back *out = NULL: the
 * command is done (CLI_EXIT_OK); otherwise *out receives the answer (caller json_decref's). */
int cli_api_get(struct cli *c, const char *target, json_t **out);
/* cli_api_get of the services collection (name NULL) or of "/api/v1/services/<escaped name>
 * <suffix>" (a service's instances, endpoints): the listings of `services` and `endpoints`. A name
 * too long for the route is a usage error (exit 2, *out = NULL). */
int cli_service_get(struct cli *c, const char *name, const char *suffix, json_t **out);
/* cli_api_json for the commands' --wait S: while the answer holds nothing yet (`has_data` says
 * so) and fewer than wait_s seconds have passed since the first call, drops it and asks again a
 * second later. Returns what the last call returned (*out: its answer, or NULL). */
int cli_api_json_wait(struct cli *c, const char *method, const char *target, json_t *body,
                      long long wait_s, bool (*has_data)(json_t *answer), json_t **out);
/* Same, but returns the raw body (for exports); *resp owns it on CLI_EXIT_OK. */
int cli_api_raw(struct cli *c, const char *method, const char *target, const char *body,
                struct http_response *resp);

/* Says on stderr that there is nothing to show: "skyprof: no profile data for WHAT[: the
 * server's tip]", then `hint` (NULL: none) on a line of its own; returns CLI_EXIT_NODATA. */
int cli_no_data(const char *what, json_t *analysis, const char *hint);

/* Formats ms since the epoch as local "YYYY-MM-DD HH:MM:SS" into buf (>= 24 bytes); "-" for
 * <= 0. */
const char *cli_fmt_time(int64_t ms, char *buf, size_t cap);
/* Parses a time: ms since the epoch, "now", or local "YYYY-MM-DD HH:MM[:SS]" / "...THH:MM[:SS]".
 * Returns false if unparsable. */
bool cli_parse_time(const char *s, int64_t *out_ms);
/* Parses a whole decimal integer in [lo, hi]. */
bool cli_parse_int(const char *s, long long lo, long long hi, long long *out);
/* Integer member of an object, accepting numbers or numeric strings ("start" is a string). */
int64_t cli_json_int(json_t *obj, const char *key);
/* String member or "" (never NULL). */
const char *cli_json_str(json_t *obj, const char *key);
/* Width of the terminal for stdout, or $COLUMNS, or 120 when not a terminal. */
int cli_term_width(void);

/* Long-running commands (record, top, attach) stop cleanly on Ctrl-C: cli_catch_stop_signals
 * installs a handler for SIGINT and SIGTERM (and SIGHUP when `hup`) that only sets a flag, which
 * cli_stop_requested reads (async-signal-safe). The handler does not restart interrupted sleeps,
 * so a loop waiting in clock_nanosleep sees EINTR and can check the flag. */
void cli_catch_stop_signals(bool hup);
bool cli_stop_requested(void);
/* The pace of a sampling loop (record, top): moves the tick deadline *next (skpx_mono_ns time) on
 * by period_ns; when that is a whole period or more in the past, skips the ticks missed (added to
 * *missed) instead of bursting to catch up (a tick less than a period late is taken at once);
 * then sleeps until the deadline, or until a stop is requested. */
void cli_wait_tick(int64_t *next, int64_t period_ns, uint64_t *missed);

#endif
