/* proc_task_cmd.c - the task routes' plumbing shared by `skyprof pprof` and `skyprof jfr`
 * (proc_task_cmd.h). */
#include "cli/proc_task_cmd.h"

#include <stdio.h>
#include <string.h>

bool proc_task_add_query(char *target, size_t cap, const char *name, const char *value)
{
    if (!value || !*value)
        return true;
    size_t n = strlen(target);
    snprintf(target + n, cap - n, "%c%s=", strchr(target, '?') ? '&' : '?', name);
    return http_path_escape(target, cap, value);
}

int proc_task_write_out(const char *path, const char *data, size_t len)
{
    int rc = cli_write_out(path, data, len);
    if (rc == CLI_EXIT_OK && path)
        fprintf(stderr, "skyprof: wrote %s\n", path);
    return rc;
}

/* The new task's id on a line of its own. */
static void print_id(json_t *task)
{
    printf("%s\n", cli_json_str(task, "id"));
}

int proc_task_create(struct cli *c, const char *api, json_t *body)
{
    json_t *res = NULL;
    int rc = cli_api_json(c, "POST", api, body, &res);
    if (rc)
        return rc;
    return cli_print_answer(c, res, print_id);
}

int proc_task_list(struct cli *c, const char *api, const char *service, json_t **out)
{
    *out = NULL;
    char target[CLI_HTTP_MAX_TARGET];
    if ((size_t)snprintf(target, sizeof(target), "%s", api) >= sizeof(target) ||
        !proc_task_add_query(target, sizeof(target), "service", service))
        return cli_usage_error("--service too long");
    return cli_api_get(c, target, out);
}

int proc_task_get(struct cli *c, const char *api, const char *id, json_t **out)
{
    *out = NULL;
    char target[CLI_HTTP_MAX_TARGET];
    if (!cli_target(target, sizeof(target), api, id, ""))
        return cli_usage_error("task id too long");
    return cli_api_get(c, target, out);
}

int proc_task_download(struct cli *c, const char *target, const char *path)
{
    struct http_response r;
    int rc = cli_api_raw(c, "GET", target, NULL, &r);
    if (rc)
        return rc;
    rc = proc_task_write_out(path, r.body, r.body_len);
    http_response_cleanup(&r);
    return rc;
}
