/* cmd_top.c - `skyprof top --pid P [--rate HZ] [--idle] [--once N]`: a live view of the hottest
 * Python functions of a running process, read from outside (src/attach), like py-spy top.
 * Every refresh (1 s) shows, per function, its own share (the thread was executing it) and its
 * total share (it was anywhere on the stack) of that second's sampling ticks, plus both as
 * cumulative seconds since the start.
 * Terminal: on a tty (and without --once) the view takes the alternate screen with plain ANSI
 * sequences (no curses), reads single keys (q quits) with the terminal in non-canonical mode, and
 * restores both on every way out (q, Ctrl-C, SIGTERM, the target exiting). Elsewhere, or with
 * --once N, it prints N refreshes (until the end without --once) as plain text.
 * Single-threaded: one loop samples to absolute deadlines and redraws once a second. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "attach/pyreader.h"
#include "cli/cli.h"
#include "cli/cli_pid.h"
#include "common/alloc.h"
#include "common/clock.h"

static const char g_usage[] =
    "Usage: skyprof top --pid PID [--rate HZ] [--idle] [--once N]\n"
    "Shows the hottest Python functions of process PID, refreshed every second: %Own (the\n"
    "function itself was executing) and %Total (it was anywhere on the stack) of the last\n"
    "second's samples, and the same as seconds since the start (OwnTime, TotalTime). 100 % is\n"
    "one thread all the time; several threads add up (like top's %CPU). Press q or Ctrl-C to\n"
    "quit.\n"
    "  --rate HZ   samples per second (default 100, 1..1000)\n"
    "  --idle      also count threads that are not running (sleeping, waiting)\n"
    "  --once N    print N refreshes as plain text and exit (also the output when stdout is\n"
    "              not a terminal: then without --once it prints until the process exits)\n"
    "Needs ptrace access to the process; see docs/out-of-process.md.\n";

/* Distinct functions remembered; later ones are counted as "(other functions)". */
#define TOP_MAX_FUNCS 65536
/* Longest function label "name (file)". */
#define TOP_LABEL_MAX (ATTACH_NAME_MAX + ATTACH_FILE_MAX + 4)
/* Rows printed in plain-text mode. */
#define TOP_TEXT_ROWS 40
#define TOP_REFRESH_NS 1000000000LL

struct top_opts {
    long pid;
    long long rate_hz;
    bool idle;
    long long once;
};

struct func {
    char *label;                 /* owned */
    uint64_t own, total;         /* this refresh */
    uint64_t own_all, total_all; /* since the start */
    uint64_t stamp;              /* last stack that counted this function in `total` */
};

struct top {
    struct top_opts o;
    struct attach_target *t;
    struct attach_sample *s;
    struct func *funcs; /* TOP_MAX_FUNCS + 1 (the last one is "other") */
    size_t n_funcs;
    uint32_t *index; /* open addressing: hash -> func + 1 */
    size_t index_cap;
    uint64_t stack_seq;
    uint64_t ticks, ticks_all, stacks, torn, missed;
    uint64_t active_threads, idle_threads; /* in the last sample */
    const struct func **order;
};

static const struct cli_stored_opt g_options[] = {
    CLI_PID_OPT("pid", 'p', struct top_opts, pid, "top: --pid wants a process id, got '%s'"),
    CLI_INT_OPT("rate", 'r', struct top_opts, rate_hz, 1, 1000,
                "top: --rate wants 1..1000 samples/s, got '%s'"),
    CLI_FLAG_OPT("idle", 'i', struct top_opts, idle),
    CLI_INT_OPT("once", 'n', struct top_opts, once, 1, 100000,
                "top: --once wants a number of refreshes >= 1, got '%s'"),
};

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* The function entry of `label`, added when new; the "other" entry when the table is full. */
static struct func *func_of(struct top *tp, const char *label)
{
    size_t mask = tp->index_cap - 1;
    size_t i = (size_t)hash_str(label) & mask;
    for (;; i = (i + 1) & mask) {
        uint32_t v = tp->index[i];
        if (!v)
            break;
        if (strcmp(tp->funcs[v - 1].label, label) == 0)
            return &tp->funcs[v - 1];
    }
    if (tp->n_funcs >= TOP_MAX_FUNCS)
        return &tp->funcs[TOP_MAX_FUNCS];
    struct func *f = &tp->funcs[tp->n_funcs++];
    f->label = skpx_xstrdup(label);
    tp->index[i] = (uint32_t)tp->n_funcs;
    return f;
}

static void add_stack(struct top *tp, const struct attach_thread *th)
{
    char label[TOP_LABEL_MAX];
    tp->stack_seq++;
    tp->stacks++;
    for (size_t k = 0; k < th->n_frames; k++) {
        const struct attach_frame *fr = &tp->s->frames[th->first_frame + k];
        snprintf(label, sizeof(label), "%s (%s)", fr->name, fr->file);
        struct func *f = func_of(tp, label);
        if (k == 0) {
            f->own++;
            f->own_all++;
        }
        if (f->stamp != tp->stack_seq) { /* recursion counts once per stack */
            f->stamp = tp->stack_seq;
            f->total++;
            f->total_all++;
        }
    }
}

/* One read of the process. Returns false when the process is gone. */
static bool sample_once(struct top *tp)
{
    skp_err err = attach_target_sample(tp->t, tp->s, 0);
    if (err == SKP_ENOTFOUND)
        return false;
    tp->ticks++;
    tp->ticks_all++;
    if (err)
        return true;
    tp->torn += tp->s->n_torn;
    tp->active_threads = 0;
    tp->idle_threads = 0;
    for (size_t i = 0; i < tp->s->n_threads; i++) {
        const struct attach_thread *th = &tp->s->threads[i];
        if (th->running)
            tp->active_threads++;
        else
            tp->idle_threads++;
        if ((tp->o.idle || th->running) && th->n_frames > 0)
            add_stack(tp, th);
    }
    return true;
}

static int by_own(const void *pa, const void *pb)
{
    const struct func *a = *(const struct func *const *)pa;
    const struct func *b = *(const struct func *const *)pb;
    if (a->own != b->own)
        return a->own < b->own ? 1 : -1;
    if (a->total != b->total)
        return a->total < b->total ? 1 : -1;
    if (a->own_all != b->own_all)
        return a->own_all < b->own_all ? 1 : -1;
    return strcmp(a->label, b->label);
}

static int term_rows(void)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row >= 5)
        return ws.ws_row;
    return 24;
}

/* Prints one refresh. `screen`: clear the screen first and fit its height (a tty). */
static void draw(struct top *tp, bool screen, double elapsed_s, long refresh_no)
{
    double period_s = 1.0 / (double)tp->o.rate_hz;
    size_t n = 0;
    for (size_t i = 0; i < tp->n_funcs; i++)
        tp->order[n++] = &tp->funcs[i];
    if (tp->funcs[TOP_MAX_FUNCS].total_all) /* the table overflowed */
        tp->order[n++] = &tp->funcs[TOP_MAX_FUNCS];
    qsort(tp->order, n, sizeof(tp->order[0]), by_own);
    int rows = screen ? term_rows() - 6 : TOP_TEXT_ROWS;
    if (rows < 1)
        rows = 1;
    int width = cli_term_width();
    if (screen)
        fputs("\x1b[H\x1b[2J", stdout);
    else if (refresh_no > 1)
        fputc('\n', stdout);
    double ticks = tp->ticks ? (double)tp->ticks : 1.0;
    printf("skyprof top: process %ld, Python %s, %.0f s, %llu samples/s (%s)\n", tp->o.pid,
           cli_safe(attach_target_version(tp->t)), elapsed_s, (unsigned long long)tp->ticks,
           tp->o.idle ? "all threads" : "running threads");
    printf("Threads: %llu active, %llu idle; torn reads %llu, ticks missed %llu%s\n\n",
           (unsigned long long)tp->active_threads, (unsigned long long)tp->idle_threads,
           (unsigned long long)tp->torn, (unsigned long long)tp->missed,
           screen ? "   (q quits)" : "");
    printf("%7s %7s %9s %9s  %s\n", "%Own", "%Total", "OwnTime", "TotalTime", "Function (file)");
    int label_w = width - 37;
    if (label_w < 20)
        label_w = 20;
    for (size_t i = 0; i < n && (int)i < rows; i++) {
        const struct func *f = tp->order[i];
        printf("%6.1f%% %6.1f%% %8.2fs %8.2fs  %.*s\n", 100.0 * (double)f->own / ticks,
               100.0 * (double)f->total / ticks, (double)f->own_all * period_s,
               (double)f->total_all * period_s, label_w, cli_safe(f->label));
    }
    fflush(stdout);
    /* the next refresh's shares start from zero */
    for (size_t i = 0; i < tp->n_funcs; i++) {
        tp->funcs[i].own = 0;
        tp->funcs[i].total = 0;
    }
    tp->funcs[TOP_MAX_FUNCS].own = 0;
    tp->funcs[TOP_MAX_FUNCS].total = 0;
    tp->ticks = 0;
}

/* ---- terminal ------------------------------------------------------------------------------ */
static struct termios g_saved_tio;
static bool g_tio_saved;
static bool g_screen_on;

static void term_restore(void)
{
    if (g_screen_on) {
        fputs("\x1b[?25h\x1b[?1049l", stdout); /* cursor back, leave the alternate screen */
        fflush(stdout);
        g_screen_on = false;
    }
    if (g_tio_saved) {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &g_saved_tio);
        g_tio_saved = false;
    }
}

static void term_setup(void)
{
    if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &g_saved_tio) == 0) {
        struct termios raw = g_saved_tio;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO); /* single keys, no echo; ISIG kept: Ctrl-C */
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) == 0)
            g_tio_saved = true;
    }
    fputs("\x1b[?1049h\x1b[?25l", stdout); /* alternate screen, cursor hidden */
    fflush(stdout);
    g_screen_on = true;
}

/* True when q (or Q) was typed. */
static bool quit_key(void)
{
    if (!g_tio_saved)
        return false;
    struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
    while (poll(&p, 1, 0) > 0 && (p.revents & POLLIN)) {
        char ch;
        if (read(STDIN_FILENO, &ch, 1) != 1)
            return false;
        if (ch == 'q' || ch == 'Q')
            return true;
    }
    return false;
}

int cmd_top(struct cli *c, int argc, char **argv)
{
    struct top *tp = skpx_xcalloc(1, sizeof(*tp));
    tp->o.rate_hz = 100;
    int rc = cli_parse_pid_table(c, argc, argv, ":hp:r:n:", g_options, CLI_ROWS(g_options), g_usage,
                                 "top", NULL, &tp->o, &tp->o.pid);
    if (rc != CLI_PARSE_NEXT)
        goto done;
    rc = CLI_EXIT_USAGE;
    if (optind < argc) {
        cli_usage_error("top: unexpected argument '%s'", argv[optind]);
        goto done;
    }
    char why[ATTACH_WHY_MAX];
    skp_err err = attach_target_open((pid_t)tp->o.pid, &tp->t, why, sizeof(why));
    if (err) {
        fprintf(stderr, "skyprof top: %s\n", cli_safe(why));
        rc = cli_attach_exit(err);
        goto done;
    }
    tp->s = skpx_xmalloc(sizeof(*tp->s));
    tp->funcs = skpx_xcalloc(TOP_MAX_FUNCS + 1, sizeof(*tp->funcs));
    tp->funcs[TOP_MAX_FUNCS].label = skpx_xstrdup("(other functions)");
    tp->index_cap = (size_t)TOP_MAX_FUNCS * 2;
    tp->index = skpx_xcalloc(tp->index_cap, sizeof(*tp->index));
    tp->order = skpx_xmalloc((TOP_MAX_FUNCS + 1) * sizeof(*tp->order));

    cli_catch_stop_signals(true);
    bool screen = !tp->o.once && isatty(STDOUT_FILENO);
    if (screen)
        term_setup();

    int64_t period_ns = 1000000000LL / tp->o.rate_hz;
    int64_t start = skpx_mono_ns();
    int64_t next = start;
    int64_t next_draw = start + TOP_REFRESH_NS;
    long refreshes = 0;
    bool gone = false;
    rc = CLI_EXIT_OK;
    while (!cli_stop_requested()) {
        if (!sample_once(tp)) {
            gone = true;
            break;
        }
        int64_t now = skpx_mono_ns();
        if (now >= next_draw) {
            draw(tp, screen, (double)(now - start) / 1e9, ++refreshes);
            if (tp->o.once && refreshes >= tp->o.once)
                break;
            next_draw += TOP_REFRESH_NS;
            if (next_draw <= now)
                next_draw = now + TOP_REFRESH_NS;
        }
        if (screen && quit_key())
            break;
        cli_wait_tick(&next, period_ns, &tp->missed);
    }
    if (screen)
        term_restore();
    if (gone)
        fprintf(stderr, "skyprof top: process %ld exited\n", tp->o.pid);
done:
    term_restore();
    if (tp->funcs)
        for (size_t i = 0; i <= TOP_MAX_FUNCS; i++)
            skpx_free(tp->funcs[i].label);
    SKPX_FREE_ALL(tp->funcs, tp->index, tp->order, tp->s);
    attach_target_close(tp->t);
    skpx_free(tp);
    return rc;
}
