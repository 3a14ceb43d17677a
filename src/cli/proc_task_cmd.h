/* proc_task_cmd.h - what `skyprof pprof` and `skyprof jfr` share: both drive process-profiling
 * tasks through the same route shapes (<api>, <api>/<id>, <api>/<id>/analyze|download|files/N,
 * docs/api.md), so building those targets, creating and listing tasks, fetching one, and
 * writing a downloaded body live here once. Single-threaded (the CLI). */
#ifndef SKP_CLI_PROC_TASK_CMD_H
#define SKP_CLI_PROC_TASK_CMD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "cli/cli.h"

/* Appends "?name=<escaped value>" (or "&..." once the target has a query) when value is set and
 * not empty. False when it does not fit. */
bool proc_task_add_query(char *target, size_t cap, const char *name, const char *value);
/* cli_write_out, then says on stderr which file it wrote. */
int proc_task_write_out(const char *path, const char *data, size_t len);
/* POSTs `body` (borrowed) to api and prints the new task: its id, or the answer with --json.
 * Returns a CLI_EXIT_ code. */
int proc_task_create(struct cli *c, const char *api, json_t *body);
/* GETs the task list of api (of `service` when not NULL). With --json it prints the answer and
 * sets *out = NULL; otherwise *out is the list, the caller frees it with json_decref. Returns a
 * CLI_EXIT_ code (*out NULL unless CLI_EXIT_OK). */
int proc_task_list(struct cli *c, const char *api, const char *service, json_t **out);
/* GETs api's task `id` (the same --json rule and result as proc_task_list). */
int proc_task_get(struct cli *c, const char *api, const char *id, json_t **out);
/* GETs target and writes the body to path (NULL = stdout). Returns a CLI_EXIT_ code. */
int proc_task_download(struct cli *c, const char *target, const char *path);

#endif
