/* cmd_dump.c - `skyprof dump --pid P [--json] [--blocking] [--native]`: every Python thread's
 * stack of a running process, read from outside it (src/attach), innermost frame first, like
 * py-spy dump; with --native every thread's native stack merged with its Python frames
 * (src/attach/native.h), also for a process without CPython. After the threads, each unfinished
 * asyncio task with its await chain (src/attach/pytasks.h). Talks to no server. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attach/native.h"
#include "attach/pyreader.h"
#include "attach/pytasks.h"
#include "cli/cli.h"
#include "cli/cli_pid.h"
#include "common/alloc.h"

static const char g_usage[] =
    "Usage: skyprof dump --pid PID [--json] [--blocking] [--native] [--retries N]\n"
    "Prints the stack of every Python thread of process PID, innermost frame first, with the\n"
    "thread's id, name (/proc/PID/task/TID/comm), state (running or idle) and whether it holds\n"
    "the GIL. The process is not stopped unless --blocking is given (then every thread is\n"
    "stopped with ptrace for the duration of the read). A thread whose read was torn (it moved\n"
    "while being read) is read again, up to --retries times (default 20).\n"
    "  --native   every thread's native (C/C++) frames too, with each Python evaluation shown\n"
    "             where the interpreter ran it, so a C extension's frames sit under the Python\n"
    "             frame that called it; works on processes without Python. Stops the threads\n"
    "             (ptrace) for the read, like --blocking.\n"
    "Needs ptrace access to the process (root, CAP_SYS_PTRACE, or same user with Yama\n"
    "ptrace_scope 0); see docs/out-of-process.md.\n"
    "After the threads, every unfinished asyncio task (CPython 3.11) is shown with its await\n"
    "chain: the coroutine it is suspended in first, down to the task's own coroutine, and what\n"
    "the innermost one awaits; one that is not running but ready to run (its wakeup is due,\n"
    "the event loop runs other code) is marked 'ready'.\n";

struct dump_opts {
    long pid;
    bool blocking, native;
    long long retries;
};

static const struct cli_stored_opt g_options[] = {
    CLI_PID_OPT("pid", 'p', struct dump_opts, pid, "dump: --pid wants a process id, got '%s'"),
    CLI_FLAG_OPT("blocking", 'b', struct dump_opts, blocking),
    CLI_FLAG_OPT("native", 'N', struct dump_opts, native),
    CLI_INT_OPT("retries", 'r', struct dump_opts, retries, 0, 1000,
                "dump: --retries wants 0..1000, got '%s'"),
};

int cli_attach_exit(skp_err err)
{
    switch (err) {
    case SKP_OK:
        return CLI_EXIT_OK;
    case SKP_ENOTFOUND:
        return CLI_EXIT_NOTFOUND;
    default:
        return CLI_EXIT_ATTACH;
    }
}

/* frames[0..n) as a JSON array of {name, file, line, native}. */
static json_t *frames_json(const struct attach_frame *frames, size_t n)
{
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++) {
        const struct attach_frame *f = &frames[i];
        json_t *jf = json_object();
        json_object_set_new(jf, "name", json_string(f->name));
        json_object_set_new(jf, "file", json_string(f->file));
        json_object_set_new(jf, "line", f->line >= 0 ? json_integer(f->line) : json_null());
        json_object_set_new(jf, "native", json_boolean(f->native));
        json_array_append_new(list, jf);
    }
    return list;
}

static const char *task_state(const struct attach_task *k)
{
    return k->running ? "running" : k->not_started ? "pending, not started" : "pending";
}

/* The text after the state: a task that is not running but ready to run (pytasks.h). */
static const char *task_ready_note(const struct attach_task *k)
{
    return k->ready ? ", ready: the loop runs other code" : "";
}

static json_t *tasks_json(const struct attach_tasks *tk)
{
    json_t *tasks = json_array();
    for (size_t i = 0; i < tk->n_tasks; i++) {
        const struct attach_task *k = &tk->tasks[i];
        json_t *jk = json_object();
        json_object_set_new(jk, "name", json_string(k->name));
        json_object_set_new(jk, "state", json_string(task_state(k)));
        json_object_set_new(jk, "ready", json_boolean(k->ready));
        json_object_set_new(jk, "awaiting",
                            k->awaiting[0] ? json_string(k->awaiting) : json_null());
        json_object_set_new(jk, "truncated", json_boolean(k->truncated));
        json_object_set_new(jk, "frames", frames_json(&tk->frames[k->first_frame], k->n_frames));
        json_array_append_new(tasks, jk);
    }
    return tasks;
}

/* One line per frame of frames[0..n), indented under its thread's or task's header. */
static void print_frames(const struct attach_frame *frames, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct attach_frame *f = &frames[i];
        if (f->line >= 0)
            printf("    %s (%s:%d)\n", cli_safe(f->name), cli_safe(f->file), f->line);
        else
            printf("    %s (%s)\n", cli_safe(f->name), cli_safe(f->file));
    }
}

static void print_tasks(const struct attach_tasks *tk)
{
    for (size_t i = 0; i < tk->n_tasks; i++) {
        const struct attach_task *k = &tk->tasks[i];
        printf("\nTask %s (%s%s)%s\n", cli_safe(k->name), task_state(k), task_ready_note(k),
               k->truncated ? " [truncated]" : "");
        if (k->awaiting[0])
            printf("    awaiting %s\n", cli_safe(k->awaiting));
        print_frames(&tk->frames[k->first_frame], k->n_frames);
    }
    if (tk->n_torn || tk->n_dropped)
        printf("\n(%u asyncio task(s) could not be read consistently, %u not shown over the "
               "limit of %d)\n",
               tk->n_torn, tk->n_dropped, ATTACH_MAX_TASKS);
}

static int task_cmp(const void *a, const void *b)
{
    return strcmp(((const struct attach_task *)a)->name, ((const struct attach_task *)b)->name);
}

static json_t *sample_json(long pid, const struct attach_target *t, const struct attach_sample *s,
                           const struct attach_tasks *tk)
{
    json_t *root = json_object();
    json_object_set_new(root, "pid", json_integer(pid));
    json_object_set_new(root, "python", t ? json_string(attach_target_version(t)) : json_null());
    json_object_set_new(root, "image", t ? json_string(attach_target_image(t)) : json_null());
    json_t *threads = json_array();
    for (size_t i = 0; i < s->n_threads; i++) {
        const struct attach_thread *th = &s->threads[i];
        json_t *jt = json_object();
        json_object_set_new(jt, "tid", json_integer(th->tid));
        json_object_set_new(jt, "threadId", json_integer((json_int_t)th->thread_id));
        json_object_set_new(jt, "name", json_string(th->name));
        json_object_set_new(jt, "running", json_boolean(th->running));
        json_object_set_new(jt, "gil", json_boolean(th->holds_gil));
        json_object_set_new(jt, "truncated", json_boolean(th->truncated));
        json_object_set_new(jt, "frames", frames_json(&s->frames[th->first_frame], th->n_frames));
        json_array_append_new(threads, jt);
    }
    json_object_set_new(root, "threads", threads);
    if (tk && tk->supported && tk->has_asyncio) {
        json_object_set_new(root, "tasks", tasks_json(tk));
        json_object_set_new(root, "tasksTorn", json_integer(tk->n_torn));
        json_object_set_new(root, "tasksDropped", json_integer(tk->n_dropped));
    }
    return root;
}

int cmd_dump(struct cli *c, int argc, char **argv)
{
    struct dump_opts o = {.pid = 0, .blocking = false, .native = false, .retries = 20};
    int prc = cli_parse_pid_table(c, argc, argv, ":hp:", g_options, CLI_ROWS(g_options), g_usage,
                                  "dump", NULL, &o, &o.pid);
    if (prc != CLI_PARSE_NEXT)
        return prc;
    if (optind < argc)
        return cli_usage_error("dump: unexpected argument '%s'", argv[optind]);

    char why[ATTACH_WHY_MAX];
    struct attach_target *t = NULL;
    skp_err err = attach_target_open((pid_t)o.pid, &t, why, sizeof(why));
    /* --native also reads processes that run no CPython (a C/C++ service) */
    bool native_only = o.native && err == SKP_ENOTFOUND && kill((pid_t)o.pid, 0) == 0;
    if (err && !native_only) {
        fprintf(stderr, "skyprof dump: %s\n", cli_safe(why));
        return cli_attach_exit(err);
    }
    struct attach_native *nat = NULL;
    if (o.native) {
        err = attach_native_open((pid_t)o.pid, t, &nat, why, sizeof(why));
        if (err) {
            fprintf(stderr, "skyprof dump: %s\n", cli_safe(why));
            attach_target_close(t);
            return cli_attach_exit(err);
        }
    }
    struct attach_sample *s = skpx_xmalloc(sizeof(*s));
    /* a torn thread is left out of a sample: read again until every thread came through */
    for (long long k = 0; k <= o.retries; k++) {
        if (nat)
            err = attach_native_sample(nat, s);
        else
            err = attach_target_sample(t, s, o.blocking ? ATTACH_SAMPLE_BLOCKING : 0);
        if (err || s->n_torn == 0)
            break;
    }
    /* the asyncio tasks, read right after the threads (their frames borrow the same cache);
     * a task torn by the running target is read again like a thread */
    struct attach_tasks *tk = NULL;
    if (!err && t) {
        tk = skpx_xmalloc(sizeof(*tk));
        for (long long k = 0; k <= o.retries; k++) {
            err = attach_target_tasks(t, tk);
            if (err || tk->n_torn == 0)
                break;
        }
        if (!err)
            qsort(tk->tasks, tk->n_tasks, sizeof(tk->tasks[0]), task_cmp);
    }
    int rc = CLI_EXIT_OK;
    if (err) {
        fprintf(stderr, "skyprof dump: cannot read process %ld: %s\n", o.pid, skp_strerror(err));
        rc = cli_attach_exit(err);
    } else if (c->json) {
        json_t *j = sample_json(o.pid, t, s, tk);
        cli_print_json(j);
        json_decref(j);
    } else {
        if (t)
            printf("Process %ld: Python %s (%s)%s\n", o.pid, cli_safe(attach_target_version(t)),
                   cli_safe(attach_target_image(t)), nat ? ", native frames" : "");
        else
            printf("Process %ld: no CPython, native frames only\n", o.pid);
        for (size_t i = 0; i < s->n_threads; i++) {
            const struct attach_thread *th = &s->threads[i];
            printf("\nThread %d (%s%s) \"%s\"%s\n", (int)th->tid, th->running ? "active" : "idle",
                   th->holds_gil ? "+gil" : "", cli_safe(th->name),
                   th->truncated ? " [truncated]" : "");
            print_frames(&s->frames[th->first_frame], th->n_frames);
        }
        if (s->n_torn)
            printf("\n(%u thread(s) could not be read consistently and are not shown)\n",
                   s->n_torn);
        if (tk && tk->supported && tk->has_asyncio)
            print_tasks(tk);
    }
    skpx_free(tk);
    skpx_free(s);
    attach_native_close(nat);
    attach_target_close(t);
    return rc;
}
