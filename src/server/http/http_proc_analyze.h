/* http_proc_analyze.h - the analysis and merged download of a process-profiling task's stored
 * files (pprof or JFR), as one HTTP worker job whose per-format parts sit behind a table of
 * callbacks (struct http_proc_format): the job loads the task, feeds the files the instances
 * filter keeps to the format one by one (a file the format cannot read is listed in "errors",
 * the others still count), and replies the tree as JSON or renders it as an export download.
 * http_pprof_analyze.c (pprof) and http_async_analyze.c (JFR) each describe their format;
 * http_compare.c builds its pprof and JFR sides with the same jobs (http_proc_analysis).
 * Threading: the dispatch side runs on the loop thread, everything else on the worker. */
#ifndef SKP_SERVER_HTTP_PROC_ANALYZE_H
#define SKP_SERVER_HTTP_PROC_ANALYZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "server/export/export.h"
#include "server/http/http_worker.h"
#include "server/store/store_proc.h"
#include "skyprof/skp_err.h"

struct analysis;
struct http_ctx;
struct http_proc_format;

/* Longest instances filter accepted. */
#define HTTP_PROC_FILTER_MAX 65536
/* Capacity of the reason a format gives for a file it cannot read. */
#define HTTP_PROC_WHY_MAX 240
/* Capacities of a download's title and file name (http_proc_format.describe). */
#define HTTP_PROC_TITLE_MAX 512
#define HTTP_PROC_FNAME_MAX 192

/* The part of a job every format shares; a format's job struct starts with it. */
struct http_proc_job {
    struct http_job base;
    const struct http_proc_format *fmt; /* static */
    char *task_id;                      /* owned */
    char *instances;                    /* owned; comma-separated filter, NULL = all */
    bool download;                      /* render `format` instead of replying JSON */
    bool readable_names;                /* names=short (the default) */
    enum export_format format;
};

/* Feeds one stored file (`buf`, borrowed for the call) to the accumulator `acc`. A file the
 * format cannot read sets *bad_file and a reason in `why` (HTTP_PROC_WHY_MAX bytes) and is left
 * out; any other error ends the analysis. */
typedef skp_err (*http_proc_add_cb)(void *acc, const uint8_t *buf, size_t len, char *why,
                                    bool *bad_file);

struct http_proc_format {
    enum proc_kind kind;       /* the task kind served; another kind's task is a 404 */
    const char *task_what;     /* names the task in store errors ("pprof task") */
    const char *analysis_what; /* names the analysis in store errors ("pprof analysis") */
    bool file_sizes;           /* "files" entries carry the file's "size" */
    /* Sets *acc to a new accumulator for the task `t` (borrowed), as job `j` asks for. */
    skp_err (*begin)(const struct http_proc_job *j, const struct proc_task *t, void **acc);
    http_proc_add_cb add;
    /* The merged tree; *out freed by the caller with analysis_free. SKP_ETOOBIG: too large. */
    skp_err (*finish)(void *acc, struct analysis **out);
    /* Replies 413 for a finish that said SKP_ETOOBIG. */
    void (*reply_too_big)(struct http_job *j);
    /* A download's title (HTTP_PROC_TITLE_MAX bytes; meta->title points to it), the rest of
     * *meta but `readable_names`, and its file name (HTTP_PROC_FNAME_MAX bytes). */
    void (*describe)(void *acc, const struct http_proc_job *j, const struct proc_task *t,
                     char *title, struct export_meta *meta, char *fname);
    /* Adds the format's fields to the analysis JSON `body` (borrowed), before "files" and
     * "errors". Errors: SKP_ENOMEM. */
    skp_err (*annotate)(void *acc, const struct http_proc_job *j, const struct proc_task *t,
                        const struct analysis *a, json_t *body);
    /* The unit of the merged tree's values (for a comparison of two trees). */
    const char *(*unit)(void *acc);
    /* Frees the accumulator (NULL ok). */
    void (*free)(void *acc);
    /* Frees the format's own fields of `j` (not j itself). */
    void (*job_cleanup)(struct http_proc_job *j);
};

/* Reads the download query (format=, default pprof; names=) into *format and *readable when
 * `download`; replies 400 and returns false when one is wrong. Loop thread. */
bool http_proc_query_download(struct http_ctx *cx, bool download, enum export_format *format,
                              bool *readable);
/* Checks the instances filter `inst` (NULL ok): false (and a 400 reply) when it is too long. */
bool http_proc_query_instances(struct http_ctx *cx, const char *inst);
/* Fills the shared part of a job the caller allocated zeroed (skpx_calloc, j first in it) for
 * an analysis replied as JSON: copies `task_id` and `inst` (NULL or "" = all). False when out of
 * memory; the caller then frees the job with http_proc_job_free. */
bool http_proc_job_init(struct http_proc_job *j, const struct http_proc_format *fmt,
                        const char *task_id, const char *inst);
/* After a format's job_new: false (with a 500 reply) when `j` is NULL (out of memory), else
 * sets the download the query asked for (http_proc_query_download) on it. */
bool http_proc_job_ready(struct http_ctx *cx, struct http_proc_job *j, bool download,
                         enum export_format format, bool readable);
/* Frees a job (its fields, the format's fields, and the allocation). NULL ok. */
void http_proc_job_free(struct http_proc_job *j);
/* Hands the job to the HTTP worker (takes ownership); base.run defaults to the analysis or
 * download (a format may set its own run before). */
void http_proc_job_dispatch(struct http_ctx *cx, struct http_proc_job *j);

/* The formats' jobs (http_pprof_analyze.c, http_async_analyze.c), each an analysis of the task
 * `task_id` over the instances `inst` (NULL or "" = all) as JSON; the strings are copied. NULL
 * when out of memory; free with http_proc_job_free. pprof: `sample_type` NULL or "" = the
 * profiles' default. JFR: `event_type` NULL or "" = the task's first event (one that does not
 * parse: execution), `thread` NULL or "" = all threads. */
struct http_proc_job *http_pprof_job_new(const char *task_id, const char *inst,
                                         const char *sample_type, bool by_function);
struct http_proc_job *http_jfr_job_new(const char *task_id, const char *inst,
                                       const char *event_type, const char *thread,
                                       bool by_function);

/* Worker side. The task `id` of the format's kind into *t (cleaned up by the caller with
 * store_proc_task_cleanup either way). Errors: SKP_ENOTFOUND (none, or of another kind), the
 * store's. */
SKP_MUST_CHECK skp_err http_proc_get_task(struct store *st, const struct http_proc_format *fmt,
                                          const char *id, struct proc_task *t);
/* The merged tree of the files of the job's task `t` (borrowed) into *out (caller frees with
 * analysis_free), with the format's accumulator in *acc (caller frees with j->fmt->free, also
 * after an error). Files are listed as http_proc_add_files does when `used` and `errors` are
 * not NULL. Errors: the store's, the format's (SKP_ETOOBIG: the tree is too large). */
SKP_MUST_CHECK skp_err http_proc_analysis(struct store *st, const struct http_proc_job *j,
                                          const struct proc_task *t, void **acc,
                                          struct analysis **out, json_t *used, json_t *errors);
/* For a format's own runs: loads the job's task into *t (cleaned up by the caller
 * with store_proc_task_cleanup either way); false when it is missing or of another kind, the
 * reply then set. */
bool http_proc_load_task(struct http_proc_job *j, struct store *st, struct proc_task *t);
/* Feeds the files of the job's task the filter keeps to `add`/`acc`, listing each in `used`
 * ({id, instanceName[, size]}) or, when `add` cannot read it, in `errors` ({fileId,
 * instanceName, error}); both borrowed, or both NULL (nothing listed). Errors: the store's, or
 * `add`'s. */
SKP_MUST_CHECK skp_err http_proc_add_files(struct store *st, const struct http_proc_job *j,
                                           http_proc_add_cb add, void *acc, json_t *used,
                                           json_t *errors);

#endif
