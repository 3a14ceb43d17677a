/* cli.c - helpers shared by the commands: global options, API calls with error reporting and
 * exit-code mapping, time/number parsing and formatting. */
#include "cli/cli.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli_pid.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/escape.h"

bool cli_global_option(struct cli *c, int opt, const char *arg, bool *bad)
{
    long long v;
    switch (opt) {
    case CLI_OPT_SERVER:
        c->server = arg;
        if (http_url_parse(arg, &c->url) != SKP_OK) {
            cli_usage_error("--server: expected http://HOST[:PORT], got '%s'", arg);
            *bad = true;
        }
        return true;
    case CLI_OPT_TOKEN:
        c->token = arg;
        return true;
    case CLI_OPT_TIMEOUT:
        if (!cli_parse_int(arg, 1, 3600, &v)) {
            cli_usage_error("--timeout: expected seconds (1-3600), got '%s'", arg);
            *bad = true;
        } else {
            c->timeout_ms = (int)v * 1000;
        }
        return true;
    case CLI_OPT_JSON:
        c->json = true;
        return true;
    default:
        return false;
    }
}

/* Stores `arg` as the row of table[0..n) for `opt` says, in the options struct at `ud`. Returns
 * CLI_PARSE_NEXT, CLI_EXIT_USAGE (a bad integer, said on stderr), or CLI_PARSE_UNKNOWN when no
 * row stores `opt`. */
static int store_option(const struct cli_stored_opt *table, size_t n, void *ud, int opt,
                        const char *arg);

/* cli_parse_table's getopt loop over `longopts` (the global options and the table's). */
static int parse_loop(struct cli *c, int argc, char **argv, const char *shortopts,
                      const struct option *longopts, const struct cli_stored_opt *table, size_t n,
                      const char *usage, const char *cmd, const char *sub, cli_option_fn on_opt,
                      void *ud)
{
    int opt;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        bool bad = false;
        if (cli_global_option(c, opt, optarg, &bad)) {
            if (bad)
                return CLI_EXIT_USAGE;
            continue;
        }
        if (opt == 'h') {
            fputs(usage, stdout);
            return CLI_EXIT_OK;
        }
        if (opt == ':')
            return cli_usage_error("option '%s' needs a value", argv[optind - 1]);
        int rc = CLI_PARSE_UNKNOWN;
        if (opt != '?' && ud)
            rc = store_option(table, n, ud, opt, optarg);
        if (opt != '?' && rc == CLI_PARSE_UNKNOWN && on_opt)
            rc = on_opt(ud, opt, optarg);
        if (rc == CLI_PARSE_NEXT)
            continue;
        if (rc != CLI_PARSE_UNKNOWN)
            return rc;
        return cli_usage_error("%s%s%s: unknown option '%s' (see skyprof %s --help)", cmd,
                               sub ? " " : "", sub ? sub : "", argv[optind - 1], cmd);
    }
    return CLI_PARSE_NEXT;
}

int cli_parse_table(struct cli *c, int argc, char **argv, const char *shortopts,
                    const struct cli_stored_opt *table, size_t n, const char *usage,
                    const char *cmd, const char *sub, cli_option_fn on_opt, void *ud)
{
    static const struct option globals[] = {CLI_GLOBAL_LONGOPTS};
    enum { N_GLOBALS = sizeof(globals) / sizeof(globals[0]) };
    struct option longopts[N_GLOBALS + CLI_TABLE_MAX + 1];
    if (n > CLI_TABLE_MAX) {
        fprintf(stderr, "skyprof: %s: more than %d options\n", cmd, CLI_TABLE_MAX);
        return CLI_EXIT_USAGE;
    }
    memcpy(longopts, globals, sizeof(globals));
    for (size_t i = 0; i < n; i++) {
        bool has_arg = table[i].how != CLI_STORE_FLAG;
        longopts[N_GLOBALS + i] = (struct option){
            table[i].name, has_arg ? required_argument : no_argument, NULL, table[i].opt};
    }
    longopts[N_GLOBALS + n] = (struct option){NULL, 0, NULL, 0};
    return parse_loop(c, argc, argv, shortopts, longopts, table, n, usage, cmd, sub, on_opt, ud);
}

static int store_option(const struct cli_stored_opt *table, size_t n, void *ud, int opt,
                        const char *arg)
{
    for (size_t i = 0; i < n; i++) {
        const struct cli_stored_opt *t = &table[i];
        if (t->opt != opt)
            continue;
        char *member = (char *)ud + t->offset;
        switch (t->how) {
        case CLI_STORE_STR:
            memcpy(member, &arg, sizeof(arg));
            return CLI_PARSE_NEXT;
        case CLI_STORE_FLAG: {
            bool yes = true;
            memcpy(member, &yes, sizeof(yes));
            return CLI_PARSE_NEXT;
        }
        case CLI_STORE_INT: {
            long long v;
            if (!cli_parse_int(arg, t->lo, t->hi, &v))
                return cli_usage_error(t->bad, arg);
            memcpy(member, &v, sizeof(v));
            return CLI_PARSE_NEXT;
        }
        case CLI_STORE_PID: {
            long pid;
            if (!cli_parse_pid(arg, &pid))
                return cli_usage_error(t->bad, arg);
            memcpy(member, &pid, sizeof(pid));
            return CLI_PARSE_NEXT;
        }
        case CLI_STORE_OWN:
            return CLI_PARSE_UNKNOWN;
        }
    }
    return CLI_PARSE_UNKNOWN;
}

int cli_parse_pid_table(struct cli *c, int argc, char **argv, const char *shortopts,
                        const struct cli_stored_opt *table, size_t n, const char *usage,
                        const char *cmd, cli_option_fn on_opt, void *ud, const long *pid)
{
    int rc = cli_parse_table(c, argc, argv, shortopts, table, n, usage, cmd, NULL, on_opt, ud);
    if (rc == CLI_PARSE_NEXT && !*pid)
        return cli_usage_error("%s: --pid is required (see skyprof %s --help)", cmd, cmd);
    return rc;
}

int cli_parse_global_options(struct cli *c, int argc, char **argv, const char *usage,
                             const char *cmd)
{
    return cli_parse_table(c, argc, argv, ":h", NULL, 0, usage, cmd, NULL, NULL, NULL);
}

int cli_subcommand(int *argc, char ***argv, const char *usage, const char **sub)
{
    const char *s = *argc < 2 ? NULL : (*argv)[1];
    if (!s || strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0 || strcmp(s, "help") == 0) {
        fputs(usage, s ? stdout : stderr);
        return s ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    *sub = s;
    (*argc)--;
    (*argv)++;
    return CLI_PARSE_NEXT;
}

const char *cli_safe(const char *s)
{
    static char slots[CLI_SAFE_SLOTS][CLI_SAFE_MAX];
    static unsigned next;
    char *b = slots[next++ % CLI_SAFE_SLOTS];
    skpx_escape_ctl(s ? s : "", s ? strlen(s) : 0, b, CLI_SAFE_MAX);
    return b;
}

/* A new jansson string holding the escaped text[0..len), or NULL (allocation failure). */
static json_t *safe_string(const char *text, size_t len)
{
    size_t cap = len * SKPX_ESCAPE_MAX_EXPANSION + 1;
    char *b = skpx_malloc(cap);
    if (!b)
        return NULL;
    skpx_escape_ctl(text, len, b, cap);
    json_t *r = json_string(b);
    skpx_free(b);
    return r;
}

void cli_json_make_safe(json_t *j)
{
    if (json_is_array(j)) {
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v) {
            if (json_is_string(v) &&
                skpx_escape_needed(json_string_value(v), json_string_length(v))) {
                json_t *r = safe_string(json_string_value(v), json_string_length(v));
                json_array_set_new(j, i, r ? r : json_string(""));
            } else {
                cli_json_make_safe(v);
            }
        }
        return;
    }
    if (!json_is_object(j))
        return;
    /* Keys first: an object with a key to escape is rebuilt (rare: property names). */
    const char *k;
    json_t *v;
    bool bad_key = false;
    json_object_foreach(j, k, v) {
        bad_key = bad_key || skpx_escape_needed(k, strlen(k));
    }
    if (bad_key) {
        json_t *copy = json_object();
        json_object_foreach(j, k, v) {
            char kb[CLI_SAFE_MAX];
            skpx_escape_ctl(k, strlen(k), kb, sizeof(kb));
            if (copy)
                json_object_set(copy, kb, v);
        }
        json_object_clear(j);
        if (copy)
            json_object_update(j, copy);
        json_decref(copy);
    }
    json_object_foreach(j, k, v) {
        if (json_is_string(v) && skpx_escape_needed(json_string_value(v), json_string_length(v))) {
            json_t *r = safe_string(json_string_value(v), json_string_length(v));
            json_object_set_new(j, k, r ? r : json_string(""));
        } else {
            cli_json_make_safe(v);
        }
    }
}

void cli_print_json(json_t *j)
{
    /* JSON escapes C0 controls itself; on a terminal, ASCII-only output also keeps C1 controls
     * (U+0080..U+009F) from being interpreted. Files and pipes get the text as it is. */
    json_dumpf(j, stdout, JSON_INDENT(2) | (isatty(STDOUT_FILENO) ? JSON_ENSURE_ASCII : 0));
    putchar('\n');
}

int cli_print_answer(struct cli *c, json_t *answer, void (*print)(json_t *answer))
{
    if (c->json)
        cli_print_json(answer);
    else
        print(answer);
    json_decref(answer);
    return CLI_EXIT_OK;
}

int cli_usage_error(const char *fmt, ...)
{
    va_list ap;
    fputs("skyprof: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\n", stderr);
    return CLI_EXIT_USAGE;
}

static int report_transport(struct cli *c, skp_err err)
{
    if (err == SKP_EUNAVAILABLE || err == SKP_ETIMEDOUT) {
        fprintf(stderr,
                "skyprof: cannot connect to %s (%s); is skyprofd running? "
                "(set --server or SKYPROF_SERVER)\n",
                c->server, err == SKP_ETIMEDOUT ? "timed out" : "connection failed");
        return CLI_EXIT_CONNECT;
    }
    fprintf(stderr, "skyprof: request to %s failed: %s\n", c->server, skp_strerror(err));
    return CLI_EXIT_API;
}

/* Prints the server's error body and maps the status to an exit code. */
static int report_status(const struct http_response *r)
{
    json_t *j = r->body ? json_loadb(r->body, r->body_len, 0, NULL) : NULL;
    cli_json_make_safe(j);
    const char *reason = j ? cli_json_str(j, "errorReason") : "";
    const char *field = j ? cli_json_str(j, "field") : "";
    const char *error = j ? cli_json_str(j, "error") : "";
    if (*reason && *field)
        fprintf(stderr, "skyprof: %s: %s\n", field, reason);
    else if (*reason)
        fprintf(stderr, "skyprof: %s\n", reason);
    else if (*error)
        fprintf(stderr, "skyprof: %s (HTTP %d)\n", error, r->status);
    else
        fprintf(stderr, "skyprof: server answered HTTP %d\n", r->status);
    json_decref(j);
    if (r->status == 404)
        return CLI_EXIT_NOTFOUND;
    if (r->status == 401 || r->status == 403)
        fprintf(stderr, "skyprof: the server needs an API token (--token or SKYPROF_API_TOKEN)\n");
    return CLI_EXIT_API;
}

int cli_check_format(const char *cmd, const char *format, const char *const *names, size_t n)
{
    char list[256] = "";
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(format, names[i]) == 0)
            return CLI_EXIT_OK;
        int k = snprintf(list + len, sizeof(list) - len, "%s%s", i ? ", " : "", names[i]);
        if (k > 0)
            len = len + (size_t)k < sizeof(list) ? len + (size_t)k : sizeof(list) - 1;
    }
    return cli_usage_error("%s: unknown format '%s' (%s)", cmd, format, list);
}

int cli_api_raw(struct cli *c, const char *method, const char *target, const char *body,
                struct http_response *resp)
{
    skp_err err = http_request(&c->url, method, target, c->token, body, body ? strlen(body) : 0,
                               c->timeout_ms, resp);
    if (err)
        return report_transport(c, err);
    if (resp->status < 200 || resp->status > 299) {
        int rc = report_status(resp);
        http_response_cleanup(resp);
        return rc;
    }
    return CLI_EXIT_OK;
}

int cli_api_json(struct cli *c, const char *method, const char *target, json_t *body, json_t **out)
{
    struct http_response r;
    char *text = NULL;
    *out = NULL;
    if (body) {
        size_t n = json_dumpb(body, NULL, 0, JSON_COMPACT);
        text = n ? skpx_malloc(n + 1) : NULL;
        if (!text || json_dumpb(body, text, n, JSON_COMPACT) != n) {
            skpx_free(text);
            fprintf(stderr, "skyprof: cannot encode the request\n");
            return CLI_EXIT_API;
        }
        text[n] = 0;
    }
    int rc = cli_api_raw(c, method, target, text, &r);
    skpx_free(text);
    if (rc)
        return rc;
    json_error_t jerr;
    *out = json_loadb(r.body, r.body_len, JSON_DECODE_ANY, &jerr);
    /* A listing answers one page at a time: follow X-Next-Cursor and join the pages. */
    for (int page = 1; *out && json_is_array(*out) && r.next_cursor[0] && page < CLI_MAX_PAGES;
         page++) {
        char next[CLI_HTTP_MAX_TARGET];
        size_t n = (size_t)snprintf(next, sizeof(next), "%s%ccursor=", target,
                                    strchr(target, '?') ? '&' : '?');
        if (n >= sizeof(next) || !http_path_escape(next, sizeof(next), r.next_cursor))
            break;
        http_response_cleanup(&r);
        rc = cli_api_raw(c, method, next, NULL, &r);
        if (rc) {
            json_decref(*out);
            *out = NULL;
            return rc;
        }
        json_t *more = json_loadb(r.body, r.body_len, JSON_DECODE_ANY, &jerr);
        if (!more || !json_is_array(more) || json_array_extend(*out, more) != 0) {
            json_decref(more);
            json_decref(*out);
            *out = NULL;
            break;
        }
        json_decref(more);
    }
    http_response_cleanup(&r);
    if (!*out) {
        fprintf(stderr, "skyprof: the server sent invalid JSON: %s\n", cli_safe(jerr.text));
        return CLI_EXIT_API;
    }
    if (!c->json)
        cli_json_make_safe(*out);
    return CLI_EXIT_OK;
}

bool cli_target(char *target, size_t cap, const char *api, const char *id, const char *suffix)
{
    if ((size_t)snprintf(target, cap, "%s/", api) >= cap)
        return false;
    if (!http_path_escape(target, cap, id) || strlen(target) + strlen(suffix) >= cap)
        return false;
    strcat(target, suffix);
    return true;
}

int cli_api_get(struct cli *c, const char *target, json_t **out)
{
    *out = NULL;
    json_t *res = NULL;
    int rc = cli_api_json(c, "GET", target, NULL, &res);
    if (rc)
        return rc;
    if (c->json) {
        cli_print_json(res);
        json_decref(res);
        return CLI_EXIT_OK;
    }
    *out = res;
    return CLI_EXIT_OK;
}

int cli_service_get(struct cli *c, const char *name, const char *suffix, json_t **out)
{
    *out = NULL;
    char target[CLI_HTTP_MAX_TARGET] = "/api/v1/services";
    if (name && !cli_target(target, sizeof(target), "/api/v1/services", name, suffix))
        return cli_usage_error("service name too long");
    return cli_api_get(c, target, out);
}

int cli_api_json_wait(struct cli *c, const char *method, const char *target, json_t *body,
                      long long wait_s, bool (*has_data)(json_t *answer), json_t **out)
{
    /* Milliseconds, not the clock's whole seconds: comparing tv_sec fields ended the wait up to
     * a second early (a start at x.95 s "reached" 2 s at x+2.0 s). */
    int64_t t0 = skpx_mono_ms(), wait_ms = (int64_t)wait_s * 1000;
    for (;;) {
        int rc = cli_api_json(c, method, target, body, out);
        if (rc)
            return rc;
        int64_t left = wait_ms - (skpx_mono_ms() - t0);
        if (has_data(*out) || left <= 0)
            return CLI_EXIT_OK;
        json_decref(*out);
        *out = NULL;
        int64_t nap_ms = left < 1000 ? left : 1000;
        struct timespec nap = {.tv_sec = (time_t)(nap_ms / 1000),
                               .tv_nsec = (long)(nap_ms % 1000) * 1000000L};
        nanosleep(&nap, NULL);
    }
}

int cli_no_data(const char *what, json_t *analysis, const char *hint)
{
    const char *tip = cli_json_str(analysis, "tip");
    fprintf(stderr, "skyprof: no profile data for %s%s%s\n", cli_safe(what), *tip ? ": " : "",
            cli_safe(tip));
    if (hint)
        fprintf(stderr, "skyprof: %s\n", hint);
    return CLI_EXIT_NODATA;
}

int cli_write_out(const char *path, const char *data, size_t len)
{
    FILE *f = path ? fopen(path, "wb") : stdout;
    if (!f) {
        fprintf(stderr, "skyprof: cannot write %s: %s\n", path, strerror(errno));
        return CLI_EXIT_USAGE;
    }
    size_t w = fwrite(data, 1, len, f);
    int bad = w != len || fflush(f) != 0;
    if (path && fclose(f) != 0)
        bad = 1;
    if (bad) {
        fprintf(stderr, "skyprof: write to %s failed\n", path ? path : "stdout");
        return CLI_EXIT_API;
    }
    return CLI_EXIT_OK;
}

const char *cli_fmt_time(int64_t ms, char *buf, size_t cap)
{
    if (ms <= 0) {
        snprintf(buf, cap, "-");
        return buf;
    }
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(buf, cap, "%Y-%m-%d %H:%M:%S", &tm);
    return buf;
}

bool cli_parse_int(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    if (!s || !*s)
        return false;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

bool cli_parse_time(const char *s, int64_t *out_ms)
{
    long long v;
    if (!s)
        return false;
    if (strcmp(s, "now") == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        *out_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
        return true;
    }
    if (cli_parse_int(s, 1, INT64_MAX / 2, &v)) {
        *out_ms = v;
        return true;
    }
    static const char *const formats[] = {"%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S",
                                          "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M"};
    for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
        struct tm tm;
        memset(&tm, 0, sizeof(tm));
        const char *end = strptime(s, formats[i], &tm);
        if (end && *end == 0) {
            tm.tm_isdst = -1;
            time_t t = mktime(&tm);
            if (t == (time_t)-1)
                return false;
            *out_ms = (int64_t)t * 1000;
            return true;
        }
    }
    return false;
}

int64_t cli_json_int(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    if (json_is_integer(v))
        return json_integer_value(v);
    if (json_is_real(v))
        return (int64_t)json_real_value(v);
    if (json_is_string(v))
        return strtoll(json_string_value(v), NULL, 10);
    return 0;
}

const char *cli_json_str(json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : "";
}

int cli_term_width(void)
{
    struct winsize ws;
    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40)
        return ws.ws_col;
    const char *cols = getenv("COLUMNS");
    long long v;
    if (cols && cli_parse_int(cols, 40, 1000, &v))
        return (int)v;
    return 120;
}

static volatile sig_atomic_t g_stop;

static void on_stop_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

void cli_catch_stop_signals(bool hup)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (hup)
        sigaction(SIGHUP, &sa, NULL);
}

bool cli_stop_requested(void)
{
    return g_stop != 0;
}

void cli_wait_tick(int64_t *next, int64_t period_ns, uint64_t *missed)
{
    *next += period_ns;
    int64_t now = skpx_mono_ns();
    if (now - *next >= period_ns) {
        int64_t behind = (now - *next) / period_ns;
        *missed += (uint64_t)behind;
        *next += behind * period_ns;
    }
    struct timespec ts = {(time_t)(*next / 1000000000LL), (long)(*next % 1000000000LL)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR &&
           !cli_stop_requested()) {
    }
}
