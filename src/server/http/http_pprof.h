/* http_pprof.h - routes of the process-profiling (pprof) API, /api/v1/pprof/tasks (docs/api.md).
 * Each handler replies exactly once; they run on the loop and hand heavy reads (file downloads,
 * analyses) to the HTTP worker. */
#ifndef SKP_SERVER_HTTP_PPROF_H
#define SKP_SERVER_HTTP_PPROF_H

#include <stddef.h>

struct http_ctx;

/* POST /api/v1/pprof/tasks */
void http_pprof_create(struct http_ctx *cx);
/* GET /api/v1/pprof/tasks[?service=] */
void http_pprof_list(struct http_ctx *cx);
/* GET /api/v1/pprof/tasks/{id} */
void http_pprof_get(struct http_ctx *cx, const char *id);
/* GET /api/v1/pprof/tasks/{id}/files/{fileId} */
void http_pprof_file(struct http_ctx *cx, const char *id, const char *file_id);
/* GET /api/v1/pprof/tasks/{id}/analyze?instances=a,b&sampleType=cpu */
void http_pprof_analyze(struct http_ctx *cx, const char *id);
/* GET /api/v1/pprof/tasks/{id}/download
 *     ?format=pprof|collapsed|speedscope|html&instances=&sampleType= */
void http_pprof_download(struct http_ctx *cx, const char *id);

/* "skyprof-pprof-<sanitised id>-<what>.<ext>" for Content-Disposition. */
void http_pprof_filename(char *out, size_t cap, const char *task_id, const char *what,
                         const char *ext);

/* The async-profiler (JFR) tasks, same handlers by kind (http_pprof.c) plus the JFR analysis
 * (http_async_analyze.c):
 *   POST /api/v1/async-profiler/tasks  {service, serviceInstanceIds, duration (s), events,
 *                                       execArgs} → 201 {id} / 400 {errorReason, field}
 *   GET  /api/v1/async-profiler/tasks[?service=], /api/v1/async-profiler/tasks/{id}
 *   GET  /api/v1/async-profiler/tasks/{id}/files/{fileId}   (the uploaded .jfr)
 *   GET  /api/v1/async-profiler/tasks/{id}/analyze?eventType=&instances=&thread=&granularity=
 *   GET  /api/v1/async-profiler/tasks/{id}/download?format=&(same filters) */
void http_async_create(struct http_ctx *cx);
void http_async_list(struct http_ctx *cx);
void http_async_get(struct http_ctx *cx, const char *id);
void http_async_file(struct http_ctx *cx, const char *id, const char *file_id);
void http_async_analyze(struct http_ctx *cx, const char *id);
void http_async_download(struct http_ctx *cx, const char *id);
/* GET /api/v1/async-profiler/tasks/{id}/timeline?eventType=&instances=&buckets= (threads x time
 * buckets, the leaf function per bucket; analyze and download take from=&to= to re-analyse a
 * range of it). */
void http_async_timeline(struct http_ctx *cx, const char *id);
/* "skyprof-jfr-<sanitised id>-<what>.<ext>". */
void http_async_filename(char *out, size_t cap, const char *task_id, const char *what,
                         const char *ext);

#endif
