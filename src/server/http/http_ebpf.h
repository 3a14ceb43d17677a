/* http_ebpf.h - the HTTP routes over what the eBPF services stored (http_ebpf.c):
 *   GET /api/v1/ebpf/processes?service=          registered processes
 *   GET /api/v1/ebpf/tasks/{id}/analyze          a triggered task's stacks as trees
 *   GET /api/v1/ebpf/tasks/{id}/download?format= the same as pprof/collapsed/speedscope/html
 * Loop thread (the analyses run as worker jobs). */
#ifndef SKP_SERVER_HTTP_EBPF_H
#define SKP_SERVER_HTTP_EBPF_H

struct http_ctx;

void http_ebpf_processes(struct http_ctx *cx);
void http_ebpf_analyze(struct http_ctx *cx, const char *task_id);
void http_ebpf_download(struct http_ctx *cx, const char *task_id);

#endif
