/* collector_proc.c - the metadata-first chunked upload of process-profile files (see
 * collector_proc.h). One `struct upload` per call, in the call's data slot. A whole file is
 * stored a piece (STORE_PROC_FILE_PIECE) per loop turn through collector_turns.h and answered
 * after its last piece; the upload stays alive for that even if its call closes meanwhile. */
#include "server/collector/collector_proc.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "server/collector/collector_turns.h"
#include "server/tasks/proc_task.h"

struct upload {
    struct collector *c;
    char *task_id;
    char *instance;
    const struct proc_upload_ops *ops;
    uint8_t *buf; /* the file so far */
    size_t len, cap;
    int64_t expected; /* declared size; 0 = unknown (accepted up to the limit) */
    bool receiving;   /* SUCCESS answered: chunks expected */
    bool done;        /* stored, refused or logged: nothing owed at close */
    /* Being stored (collector_turns.h): the file's row, the bytes stored so far, the call to
     * answer (NULL once it closed: the job frees the upload). */
    struct turn_job job;
    bool storing;
    int64_t file_id;
    size_t stored;
    int64_t time_ms;
    struct skpx_grpc_call *call;
};

static uint64_t max_bytes(const struct collector *c, enum proc_kind kind)
{
    uint64_t v = kind == PROC_KIND_ASYNC_PROFILER ? c->jfr_max_bytes : c->pprof_max_bytes;
    return v ? v : 30u * 1024 * 1024;
}

static void upload_free(struct upload *u)
{
    if (!u)
        return;
    u->c->upload_bytes -= u->cap;
    SKPX_FREE_ALL(u->buf, u->task_id, u->instance, u);
}

static void log_line(struct upload *u, const char *op, const char *msg)
{
    skp_err err =
        store_proc_add_log(u->c->store, u->task_id, u->instance, op, collector_now(u->c), msg);
    static struct skpx_log_limit lim;
    if (err)
        skpx_log_limited(&lim, SKPX_LOG_WARN, "process task %s: %s log for %s not written: %s",
                         u->task_id, op, u->instance, skp_strerror(err));
}

static int first_message(struct skpx_grpc_call *call, struct upload *u,
                         const struct proc_upload_msg *m)
{
    struct collector *c = u->c;
    if (!m->has_meta || !m->task_id || !m->task_id[0])
        return SKPX_GRPC_INVALID_ARGUMENT; /* the protocol starts with the metadata */
    struct proc_task t = {0};
    skp_err err = store_proc_get_task(c->store, m->task_id, &t);
    if (err == SKP_OK && t.kind != u->ops->kind)
        err = SKP_ENOTFOUND;
    store_proc_task_cleanup(&t);
    if (err == SKP_ENOTFOUND) {
        skpx_grpc_call_finish(call, NULL, SKPX_GRPC_NOT_FOUND, "skyprofd: unknown task id");
        return SKPX_GRPC_OK;
    }
    if (err)
        return err == SKP_ENOMEM ? SKPX_GRPC_RESOURCE_EXHAUSTED : SKPX_GRPC_UNAVAILABLE;
    u->task_id = skpx_strdup(m->task_id);
    u->instance = skpx_strdup(m->instance ? m->instance : "");
    if (!u->task_id || !u->instance)
        return SKPX_GRPC_RESOURCE_EXHAUSTED;

    if (m->type == PROC_UPLOAD_TASK_ERROR) {
        log_line(u, PROC_LOG_TASK_ERROR,
                 m->error_message && m->error_message[0] ? m->error_message
                                                         : "the agent reported an error");
        u->done = true;
        skp_err se = u->ops->send_status(call, PROC_UPLOAD_TASK_ERROR);
        skpx_grpc_call_finish(call, NULL, se ? SKPX_GRPC_INTERNAL : SKPX_GRPC_OK, NULL);
        return SKPX_GRPC_OK;
    }
    uint64_t limit = max_bytes(c, u->ops->kind);
    if (m->type == PROC_UPLOAD_OVERSIZE || m->content_size < 0 ||
        (uint64_t)m->content_size > limit) {
        char msg[160];
        if (m->type == PROC_UPLOAD_OVERSIZE)
            snprintf(msg, sizeof(msg), "the agent's file exceeds its size limit");
        else
            snprintf(
                msg, sizeof(msg),
                "file of %" PRId64 " bytes exceeds the limit of %" PRIu64 " bytes (--%s-max-bytes)",
                m->content_size, limit, u->ops->kind == PROC_KIND_ASYNC_PROFILER ? "jfr" : "pprof");
        log_line(u, u->ops->too_large_op, msg);
        u->done = true;
        skp_err se = u->ops->send_status(call, PROC_UPLOAD_OVERSIZE);
        skpx_grpc_call_finish(call, NULL, se ? SKPX_GRPC_INTERNAL : SKPX_GRPC_OK, NULL);
        return SKPX_GRPC_OK;
    }
    if (m->type != PROC_UPLOAD_SUCCESS)
        return SKPX_GRPC_INVALID_ARGUMENT;
    u->expected = m->content_size;
    if (u->expected > 0) {
        if (c->upload_bytes + (size_t)u->expected > COLLECTOR_UPLOAD_BUDGET_BYTES)
            return SKPX_GRPC_RESOURCE_EXHAUSTED;
        u->buf = skpx_malloc((size_t)u->expected);
        if (!u->buf)
            return SKPX_GRPC_RESOURCE_EXHAUSTED;
        u->cap = (size_t)u->expected;
        c->upload_bytes += u->cap;
    }
    u->receiving = true;
    if (u->ops->send_status(call, PROC_UPLOAD_SUCCESS) != SKP_OK)
        return SKPX_GRPC_INTERNAL;
    return SKPX_GRPC_OK;
}

static int fail_upload(struct skpx_grpc_call *call, struct upload *u, int status, const char *why)
{
    log_line(u, PROC_LOG_INCOMPLETE, why);
    u->done = true;
    skpx_grpc_call_finish(call, NULL, status, why);
    return SKPX_GRPC_OK;
}

static int add_chunk(struct skpx_grpc_call *call, struct upload *u, const struct proc_upload_msg *m)
{
    if (m->error_message && !m->content) {
        /* An agent that failed after SUCCESS (e.g. while reading its file). */
        log_line(u, PROC_LOG_TASK_ERROR, m->error_message[0] ? m->error_message : "agent error");
        u->done = true;
        skpx_grpc_call_finish(call, NULL, SKPX_GRPC_OK, NULL);
        return SKPX_GRPC_OK;
    }
    if (!m->content_len)
        return SKPX_GRPC_OK;
    uint64_t limit = u->expected > 0 ? (uint64_t)u->expected : max_bytes(u->c, u->ops->kind);
    if ((uint64_t)u->len + m->content_len > limit) {
        char msg[160];
        snprintf(msg, sizeof(msg), "more content than the %" PRIu64 " bytes %s; nothing stored",
                 limit,
                 u->expected > 0                            ? "declared"
                 : u->ops->kind == PROC_KIND_ASYNC_PROFILER ? "allowed (--jfr-max-bytes)"
                                                            : "allowed (--pprof-max-bytes)");
        return fail_upload(call, u, SKPX_GRPC_RESOURCE_EXHAUSTED, msg);
    }
    if (u->len + m->content_len > u->cap) {
        size_t ncap = u->cap ? u->cap * 2 : 1u << 20;
        while (ncap < u->len + m->content_len)
            ncap *= 2;
        if (ncap > limit)
            ncap = (size_t)limit;
        if (u->c->upload_bytes - u->cap + ncap > COLLECTOR_UPLOAD_BUDGET_BYTES)
            return fail_upload(call, u, SKPX_GRPC_RESOURCE_EXHAUSTED,
                               "server upload buffers full; nothing stored");
        uint8_t *nb = skpx_realloc(u->buf, ncap);
        if (!nb)
            return fail_upload(call, u, SKPX_GRPC_RESOURCE_EXHAUSTED,
                               "server out of memory; nothing stored");
        u->c->upload_bytes += ncap - u->cap;
        u->buf = nb;
        u->cap = ncap;
    }
    memcpy(u->buf + u->len, m->content, m->content_len);
    u->len += m->content_len;
    return SKPX_GRPC_OK;
}

int proc_upload_on_message(struct skpx_grpc_call *call, struct collector *c,
                           const struct proc_upload_ops *ops, const struct proc_upload_msg *m)
{
    bool fresh;
    struct upload *u = collector_call_state(call, sizeof(*u), &fresh);
    if (!u)
        return SKPX_GRPC_RESOURCE_EXHAUSTED;
    if (fresh) {
        u->c = c;
        u->ops = ops;
        return first_message(call, u, m);
    }
    if (u->done || !u->receiving)
        return SKPX_GRPC_OK;
    return add_chunk(call, u, m);
}

/* The file could not be stored (its row, if any, was deleted): log, and answer `call` if any
 * (last: answering may close the call, which frees u). */
static void store_failed(struct upload *u, struct skpx_grpc_call *call, skp_err err)
{
    SKPX_ERROR("process task %s: file of %zu bytes from %s not stored: %s", u->task_id, u->len,
               u->instance, skp_strerror(err));
    if (call)
        skpx_grpc_call_finish(
            call, NULL, err == SKP_ENOMEM ? SKPX_GRPC_RESOURCE_EXHAUSTED : SKPX_GRPC_UNAVAILABLE,
            "skyprofd: file not stored (storage failure)");
}

/* One piece of the file per loop turn, then the transaction that shows it with its log line. */
static bool store_step(struct turn_job *j)
{
    struct upload *u = (struct upload *)((char *)j - offsetof(struct upload, job));
    struct collector *c = u->c;
    skp_err err = SKP_OK;
    bool last = false;
    if (u->stored < u->len) {
        size_t k = u->len - u->stored;
        if (k > STORE_PROC_FILE_PIECE)
            k = STORE_PROC_FILE_PIECE;
        err = store_proc_file_append(c->store, u->file_id, (int)(u->stored / STORE_PROC_FILE_PIECE),
                                     u->buf + u->stored, k);
        if (!err)
            u->stored += k;
    }
    if (!err && u->stored == u->len) {
        err = store_proc_file_finish(c->store, u->task_id, u->instance, u->file_id, u->time_ms,
                                     PROC_LOG_FINISHED);
        last = !err;
    }
    if (!err && !last)
        return false;
    u->storing = false;
    /* Answering closes the call (on_close frees u then); with the call gone, u is freed here. */
    struct skpx_grpc_call *call = u->call;
    if (err) {
        if (store_proc_file_abort(c->store, u->file_id) != SKP_OK)
            SKPX_WARN("process task %s: a file not stored was not deleted either", u->task_id);
        store_failed(u, call, err);
    } else {
        SKPX_INFO("process task %s: stored %zu bytes from %s", u->task_id, u->len, u->instance);
        if (call)
            skpx_grpc_call_finish(call, NULL, SKPX_GRPC_OK, NULL);
    }
    if (!call)
        upload_free(u);
    return true;
}

void proc_upload_on_end(struct skpx_grpc_call *call, struct collector *c)
{
    (void)c;
    struct upload *u = skpx_grpc_call_get_data(call);
    if (!u || !u->task_id) {
        skpx_grpc_call_finish(call, NULL, SKPX_GRPC_INVALID_ARGUMENT,
                              "skyprofd: the stream carried no metadata");
        return;
    }
    if (u->done) {
        skpx_grpc_call_finish(call, NULL, SKPX_GRPC_OK, NULL);
        return;
    }
    if ((u->expected > 0 && (int64_t)u->len != u->expected) || u->len == 0) {
        char msg[160];
        snprintf(msg, sizeof(msg),
                 "the upload ended after %zu of %" PRId64 " bytes; nothing stored", u->len,
                 u->expected);
        fail_upload(call, u, SKPX_GRPC_INVALID_ARGUMENT, msg);
        return;
    }
    u->done = true;
    u->call = call;
    u->time_ms = collector_now(u->c);
    skp_err err = store_proc_file_begin(u->c->store, u->task_id, u->instance, u->time_ms, u->len,
                                        &u->file_id);
    if (err) {
        store_failed(u, call, err);
        return;
    }
    u->storing = true;
    u->job.step = store_step;
    collector_turns_push(u->c, &u->job);
}

void proc_upload_on_close(struct skpx_grpc_call *call, struct collector *c, int status)
{
    (void)c;
    (void)status;
    struct upload *u = collector_call_take(call);
    if (!u)
        return;
    if (u->storing) {
        u->call = NULL; /* the file was whole: its job stores it and frees the upload */
        return;
    }
    if (u->task_id && u->receiving && !u->done) {
        /* The client vanished or cancelled mid-file: nothing was stored; say so. */
        char msg[160];
        snprintf(msg, sizeof(msg),
                 "the upload stream broke after %zu of %" PRId64 " bytes; nothing stored", u->len,
                 u->expected);
        log_line(u, PROC_LOG_INCOMPLETE, msg);
    }
    upload_free(u);
}
