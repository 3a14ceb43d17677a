/* tree_print.h - prints the API's analysis JSON ({tip, trees:[{elements:[...]}]}) as an
 * indented stack tree for a terminal: right-aligned duration, self duration and dump count
 * columns, then the code signature indented by depth and shortened in the middle to fit the
 * width (the end keeps the file and line). The 10 largest self durations are starred, as in
 * the web UI's "top slow" view. Single-threaded. */
#ifndef SKP_CLI_TREE_PRINT_H
#define SKP_CLI_TREE_PRINT_H

#include <jansson.h>
#include <stdio.h>

/* Deepest level indented; deeper frames keep this indentation and show their depth. */
#define TREE_PRINT_MAX_INDENT_LEVELS 24
/* Frames starred as the largest self durations. */
#define TREE_PRINT_TOP_SLOW 10

/* Writes the tree(s) of `analysis` (borrowed) to `out`, `width` columns wide (>= 40).
 * Returns 0, or -1 if the JSON is not shaped like an analysis (nothing useful printed). */
int tree_print(FILE *out, json_t *analysis, int width);

#endif
