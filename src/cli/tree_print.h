/* tree_print.h - prints the API's analysis JSON ({tip, trees:[{elements:[...]}]}) as an
 * indented stack tree for a terminal: right-aligned total, self and count columns whose header
 * names their unit, then each frame's readable label indented by depth. Labels are the web UI's
 * (web/src/frames.js frameLabel, through the C twin common/frame_sig.h): the function first, then
 * the short location ("do_POST  seed_app.py:44"), never a path cut in the middle. By default the
 * agent's own frames (skyprof/..., libskyprof, _native) and the runner's (runpy) are folded into
 * their caller, as the UI folds agent frames: their children take their place (merged with equal
 * siblings) and their self weight goes to the caller; hidden roots give way to their children.
 * The 10 largest self values are starred, as in the UI's "top slow" view. Single-threaded. */
#ifndef SKP_CLI_TREE_PRINT_H
#define SKP_CLI_TREE_PRINT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

/* Deepest level indented; deeper frames keep this indentation and show their depth. */
#define TREE_PRINT_MAX_INDENT_LEVELS 24
/* Frames starred as the largest self durations. */
#define TREE_PRINT_TOP_SLOW 10

struct tree_print_opts {
    int width; /* columns (< 40 counts as 40) */
    /* The unit of the duration/self columns, as the API names it ("nanoseconds", "bytes",
     * "count", ...; shortened in the header). NULL: a trace profile, durations in ms. */
    const char *unit;
    bool all_frames; /* true: keep the agent's and the runner's frames */
};

/* Writes the tree(s) of `analysis` (borrowed) to `out`. Returns 0, or -1 if the JSON is not
 * shaped like an analysis (nothing useful printed). */
int tree_print(FILE *out, json_t *analysis, const struct tree_print_opts *opts);

/* tree_print for a command: returns CLI_EXIT_OK, or CLI_EXIT_API after saying on stderr that the
 * server's analysis has an unexpected shape. */
int tree_print_exit(FILE *out, json_t *analysis, const struct tree_print_opts *opts);
/* tree_print_exit of a process profile's analysis (pprof, eBPF) on stdout at the terminal's
 * width, its columns in the analysis's "unit" ("count" when it names none). */
int tree_print_profile(json_t *analysis, bool all_frames);

/* True when `analysis` holds at least one tree with an element (something to print). */
bool tree_print_has_data(json_t *analysis);

/* True for a frame the tree hides by default: the agent's own (frame_sig's is_agent) or the
 * Python runner's (runpy, which `python -m` and `python -m skyprof run` start through). */
bool tree_print_hidden_frame(const char *sig);

/* Appends the label of `sig` ("func  location", or the function alone) to dst (cap bytes,
 * NUL-terminated), the function shortened in the middle so the whole fits in `avail` display
 * columns when it can; the location is never cut. */
void tree_print_label(char *dst, size_t cap, const char *sig, size_t avail);

#endif
