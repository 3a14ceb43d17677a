/* store.c - the public store_* functions: store_open picks a backend from its argument, every
 * other function forwards through the store's ops table (store_backend.h). Also the pure
 * helpers of store.h and the feature headers (row cleanup), which do not depend on a backend. */
#include "server/store/store.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/alloc.h"
#include "common/hex.h"
#include "common/log.h"
#include "server/store/store_backend.h"
#include "server/store/sqlite/store_int.h"
#include "server/store/postgres/store_pg_int.h"

static const char *str_or_empty(const char *s)
{
    return s ? s : "";
}

enum store_backend_kind store_backend_for(const char *path_or_url)
{
    if (!path_or_url)
        return STORE_BACKEND_SQLITE;
    if (strncasecmp(path_or_url, "postgresql://", 13) == 0 ||
        strncasecmp(path_or_url, "postgres://", 11) == 0)
        return STORE_BACKEND_POSTGRESQL;
    return STORE_BACKEND_SQLITE;
}

bool store_target_is_file(const char *target)
{
    return store_backend_for(target) == STORE_BACKEND_SQLITE;
}

static void mask_userinfo(char *out, size_t cap);
static void mask_query(char *out, size_t cap);

void store_target_shown(const char *target, char *out, size_t cap)
{
    snprintf(out, cap, "%s", target ? target : "");
    if (store_target_is_file(target))
        return;
    mask_query(out, cap);
    mask_userinfo(out, cap);
}

static void mask_userinfo(char *out, size_t cap)
{
    /* scheme://user:password@host... : the password is what lies between the first ':' after
     * the scheme and the '@' that ends the user info (before any '/') */
    char *auth = strstr(out, "://");
    if (!auth)
        return;
    auth += 3;
    char *at = strchr(auth, '@');
    char *slash = strchr(auth, '/');
    if (!at || (slash && slash < at))
        return;
    char *colon = memchr(auth, ':', (size_t)(at - auth));
    if (!colon || cap - (size_t)(colon - out) < 5)
        return;
    size_t tail = strlen(at) + 1;
    size_t room = cap - (size_t)(colon + 4 - out);
    if (tail > room)
        tail = room;
    memmove(colon + 4, at, tail);
    memcpy(colon + 1, "***", 3);
    out[cap - 1] = '\0';
}

/* True if the URL query key k[0..n) names a secret once percent-decoded (libpq decodes keys):
 * password, sslpassword, or any other key holding "password". */
static bool secret_key(const char *k, size_t n)
{
    char d[64];
    size_t m = 0;
    for (size_t i = 0; i < n && m + 1 < sizeof(d); i++) {
        int hi = -1, lo = -1;
        if (k[i] == '%' && i + 2 < n) {
            hi = skpx_hex_value(k[i + 1]);
            lo = skpx_hex_value(k[i + 2]);
        }
        if (hi >= 0 && lo >= 0) {
            d[m++] = (char)tolower(hi << 4 | lo);
            i += 2;
        } else {
            d[m++] = (char)tolower((unsigned char)k[i]);
        }
    }
    d[m] = '\0';
    return strstr(d, "password") != NULL;
}

/* Replaces the value of every secret query parameter of the URL in out (a NUL-terminated string
 * in cap bytes) with "***"; what no longer fits is cut. */
static void mask_query(char *out, size_t cap)
{
    char *p = strchr(out, '?');
    while (p && *p) {
        char *key = p + 1;
        char *end = key + strcspn(key, "&");
        char *eq = memchr(key, '=', (size_t)(end - key));
        if (eq && secret_key(key, (size_t)(eq - key))) {
            size_t at = (size_t)(eq + 1 - out); /* where "***" goes */
            size_t tail = strlen(end) + 1;      /* with the NUL */
            if (at + 3 >= cap) {
                out[at < cap ? at : cap - 1] = '\0';
                return;
            }
            if (at + 3 + tail > cap)
                tail = cap - (at + 3);
            memmove(out + at + 3, end, tail);
            memcpy(out + at, "***", 3);
            out[cap - 1] = '\0';
            end = out + at + 3;
        }
        p = *end ? end : NULL;
    }
}

skp_err store_open(const char *path, const struct store_opts *opts, struct store **out)
{
    if (!out)
        return SKP_EINVAL;
    *out = NULL;
    if (!path)
        return SKP_EINVAL;
    if (store_backend_for(path) == STORE_BACKEND_POSTGRESQL)
        return pg_store_open(path, opts, out);
    return sqlite_store_open(path, opts, out);
}

void store_close(struct store *st)
{
    if (st)
        st->ops->close(st);
}

skp_err store_upsert_instance(struct store *st, const char *service, const char *instance,
                              const char *layer, const struct store_kv *props, size_t n_props,
                              int64_t now_ms)
{
    return st->ops->upsert_instance(st, service, instance, layer, props, n_props, now_ms);
}

skp_err store_touch_instance(struct store *st, const char *service, const char *instance,
                             int64_t now_ms)
{
    return st->ops->touch_instance(st, service, instance, now_ms);
}

skp_err store_insert_task(struct store *st, const struct store_task *t)
{
    return st->ops->insert_task(st, t);
}

skp_err store_cancel_task(struct store *st, const char *id, int64_t now_ms)
{
    return st->ops->cancel_task(st, id, now_ms);
}

skp_err store_tasks_lock(struct store *st, const char *service)
{
    return st->ops->tasks_lock(st, service);
}

skp_err store_tasks_unlock(struct store *st, bool commit)
{
    return st->ops->tasks_unlock(st, commit);
}

skp_err store_add_task_log(struct store *st, const char *task_id, const char *service,
                           const char *instance, enum store_task_op op, int64_t time_ms)
{
    return st->ops->add_task_log(st, task_id, service, instance, op, time_ms);
}

bool store_batch_answered(const struct store *st, const void *v, size_t n, skp_err *err)
{
    *err = n == 0 ? SKP_OK : !v ? SKP_EINVAL : st->read_only ? SKP_EIO : SKP_OK;
    return n == 0 || *err != SKP_OK;
}

skp_err store_insert_snapshots(struct store *st, const struct store_snapshot *v, size_t n,
                               size_t *n_dup)
{
    if (n_dup)
        *n_dup = 0;
    skp_err err;
    if (store_batch_answered(st, v, n, &err))
        return err;
    return st->ops->insert_snapshots(st, v, n, n_dup);
}

skp_err store_insert_segments(struct store *st, const struct store_segment *v, size_t n,
                              int64_t received_ms)
{
    skp_err err;
    if (store_batch_answered(st, v, n, &err))
        return err;
    return st->ops->insert_segments(st, v, n, received_ms);
}

skp_err store_segment_has_snapshots(struct store *st, const char *segment_id, bool *out)
{
    return st->ops->segment_has_snapshots(st, segment_id, out);
}

skp_err store_list_profiled_segments(struct store *st, const char *task_id,
                                     store_profiled_segment_cb cb, void *ud)
{
    return st->ops->list_profiled_segments(st, task_id, cb, ud);
}

skp_err store_list_profiled_segments_page(struct store *st, const char *task_id,
                                          const struct store_segment_key *after, size_t limit,
                                          store_profiled_segment_cb cb, void *ud, bool *more)
{
    return st->ops->list_profiled_segments_page(st, task_id, after, limit, cb, ud, more);
}

skp_err store_scan_segment(struct store *st, const char *segment_id, int32_t lo_seq, int32_t hi_seq,
                           store_sample_cb cb, void *ud)
{
    return st->ops->scan_segment(st, segment_id, lo_seq, hi_seq, cb, ud);
}

skp_err store_segment_seq_window(struct store *st, const char *segment_id, int64_t from_ms,
                                 int64_t to_ms, int32_t *lo, int32_t *hi)
{
    return st->ops->segment_seq_window(st, segment_id, from_ms, to_ms, lo, hi);
}

skp_err store_scan_task(struct store *st, const char *task_id, store_sample_cb cb, void *ud)
{
    return st->ops->scan_task(st, task_id, cb, ud);
}

skp_err store_get_stack(struct store *st, uint32_t stack, const uint32_t **frames, size_t *n)
{
    return st->ops->get_stack(st, stack, frames, n);
}

skp_err store_get_frame(struct store *st, uint32_t frame, const char **sig)
{
    return st->ops->get_frame(st, frame, sig);
}

skp_err store_purge_before(struct store *st, int64_t before_ms, uint64_t *n_deleted)
{
    return st->ops->purge_before(st, before_ms, n_deleted);
}

skp_err store_purge_step(struct store *st, int64_t before_ms, uint64_t max_rows,
                         uint64_t *n_deleted, bool *done)
{
    return st->ops->purge_step(st, before_ms, max_rows, n_deleted, done);
}

skp_err store_check(struct store *st, char *detail, size_t cap)
{
    return st->ops->check(st, detail, cap);
}

skp_err store_get_stats(struct store *st, struct store_stats *out)
{
    return st->ops->get_stats(st, out);
}

skp_err store_proc_insert_task(struct store *st, const struct proc_task *t)
{
    if (!st->ops->proc_insert_task)
        return SKP_ENOTSUP;
    return st->ops->proc_insert_task(st, t);
}

skp_err store_proc_cancel_task(struct store *st, const char *id, int64_t now_ms, int64_t grace_ms)
{
    if (!st->ops->proc_cancel_task)
        return SKP_ENOTSUP;
    return st->ops->proc_cancel_task(st, id, now_ms, grace_ms);
}

skp_err store_proc_add_log(struct store *st, const char *task_id, const char *instance,
                           const char *op, int64_t time_ms, const char *message)
{
    if (!st->ops->proc_add_log)
        return SKP_ENOTSUP;
    return st->ops->proc_add_log(st, task_id, instance, op, time_ms, message);
}

skp_err store_proc_file_begin(struct store *st, const char *task_id, const char *instance,
                              int64_t time_ms, size_t size, int64_t *id_out)
{
    if (!st->ops->proc_file_begin)
        return SKP_ENOTSUP;
    return st->ops->proc_file_begin(st, task_id, instance, time_ms, size, id_out);
}

skp_err store_proc_file_append(struct store *st, int64_t id, int seq, const uint8_t *data,
                               size_t len)
{
    if (!st->ops->proc_file_append)
        return SKP_ENOTSUP;
    return st->ops->proc_file_append(st, id, seq, data, len);
}

skp_err store_proc_file_finish(struct store *st, const char *task_id, const char *instance,
                               int64_t id, int64_t time_ms, const char *op)
{
    if (!st->ops->proc_file_finish)
        return SKP_ENOTSUP;
    return st->ops->proc_file_finish(st, task_id, instance, id, time_ms, op);
}

skp_err store_proc_file_abort(struct store *st, int64_t id)
{
    if (!st->ops->proc_file_abort)
        return SKP_ENOTSUP;
    return st->ops->proc_file_abort(st, id);
}

skp_err store_proc_insert_file(struct store *st, const char *task_id, const char *instance,
                               int64_t time_ms, const uint8_t *data, size_t len, const char *op,
                               int64_t *id_out)
{
    int64_t id = 0;
    if (id_out)
        *id_out = 0;
    skp_err err = store_proc_file_begin(st, task_id, instance, time_ms, len, &id);
    if (err)
        return err;
    for (size_t off = 0, seq = 0; off < len && !err; off += STORE_PROC_FILE_PIECE, seq++) {
        size_t k = len - off < STORE_PROC_FILE_PIECE ? len - off : STORE_PROC_FILE_PIECE;
        err = store_proc_file_append(st, id, (int)seq, data + off, k);
    }
    if (!err)
        err = store_proc_file_finish(st, task_id, instance, id, time_ms, op);
    if (err) {
        if (store_proc_file_abort(st, id) != SKP_OK)
            SKPX_WARN("store: a failed file (%" PRId64 ") was not deleted", id);
        return err;
    }
    if (id_out)
        *id_out = id;
    return SKP_OK;
}

skp_err store_proc_get_file(struct store *st, const char *task_id, int64_t id, uint8_t **data,
                            size_t *len, char **instance_out)
{
    if (!st->ops->proc_get_file)
        return SKP_ENOTSUP;
    return st->ops->proc_get_file(st, task_id, id, data, len, instance_out);
}

skp_err store_cont_insert_trigger(struct store *st, const struct store_cont_trigger *t,
                                  int64_t *id_out)
{
    if (!st->ops->cont_insert_trigger)
        return SKP_ENOTSUP;
    struct store_cont_trigger row = *t;
    if (!row.source)
        row.source = "server";
    return st->ops->cont_insert_trigger(st, &row, id_out);
}

skp_err store_cont_list_triggers(struct store *st, const char *service, const char *task_id,
                                 size_t limit, store_cont_trigger_cb cb, void *ud)
{
    if (!st->ops->cont_list_triggers)
        return SKP_ENOTSUP;
    return st->ops->cont_list_triggers(st, service, task_id, limit, cb, ud);
}

skp_err store_cont_put_slots(struct store *st, const struct store_cont_slot *v, size_t n)
{
    if (!st->ops->cont_put_slots)
        return SKP_ENOTSUP;
    if (n == 0)
        return SKP_OK;
    if (!v || st->read_only)
        return !v ? SKP_EINVAL : SKP_EIO;
    return st->ops->cont_put_slots(st, v, n);
}

skp_err store_cont_list_slots(struct store *st, int64_t from_ms, int64_t to_ms,
                              store_cont_slot_cb cb, void *ud)
{
    if (!st->ops->cont_list_slots)
        return SKP_ENOTSUP;
    return st->ops->cont_list_slots(st, from_ms, to_ms, cb, ud);
}

skp_err store_cont_lease(struct store *st, const char *name, int64_t holder, int64_t ttl_ms,
                         bool *held)
{
    *held = false;
    if (!st->ops->cont_lease)
        return SKP_ENOTSUP;
    if (st->read_only)
        return SKP_EIO;
    return st->ops->cont_lease(st, name, holder, ttl_ms, held);
}

skp_err store_cont_claim_firing(struct store *st, const char *service, const char *target,
                                int64_t window_ms, bool *claimed)
{
    *claimed = false;
    if (!st->ops->cont_claim_firing)
        return SKP_ENOTSUP;
    if (st->read_only)
        return SKP_EIO;
    return st->ops->cont_claim_firing(st, service, target, window_ms, claimed);
}

skp_err store_cont_purge_cluster(struct store *st, int64_t before_ms, int64_t claims_before_ms)
{
    if (!st->ops->cont_purge_cluster)
        return SKP_ENOTSUP;
    if (st->read_only)
        return SKP_EIO;
    return st->ops->cont_purge_cluster(st, before_ms, claims_before_ms);
}

/* ---- pure helpers (no backend) ---- */

void store_task_cleanup(struct store_task *t)
{
    if (!t)
        return;
    SKPX_FREE_ALL(t->id, t->service, t->endpoint);
    t->id = t->service = t->endpoint = NULL;
}

const char *store_segment_endpoint(const struct store_segment *seg)
{
    if (!seg || seg->n_spans == 0 || !seg->spans)
        return NULL;
    for (size_t i = 0; i < seg->n_spans; i++)
        if (seg->spans[i].type == STORE_SPAN_ENTRY)
            return str_or_empty(seg->spans[i].operation);
    return str_or_empty(seg->spans[0].operation);
}

void store_segment_info_cleanup(struct store_segment_info *i)
{
    if (!i)
        return;
    skpx_free(i->trace_id);
    skpx_free(i->endpoint);
    i->trace_id = i->endpoint = NULL;
}

void store_proc_names_free(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        skpx_free(v[i]);
    skpx_free(v);
}

void store_proc_task_cleanup(struct proc_task *t)
{
    if (!t)
        return;
    skpx_free(t->id);
    skpx_free(t->service);
    store_proc_names_free(t->instances, t->n_instances);
    skpx_free(t->events);
    skpx_free(t->exec_args);
    memset(t, 0, sizeof(*t));
}

void store_proc_tasks_free(struct proc_task *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        store_proc_task_cleanup(&v[i]);
    skpx_free(v);
}

void store_proc_logs_free(struct proc_log *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++) {
        SKPX_FREE_ALL(v[i].instance, v[i].op, v[i].message);
    }
    skpx_free(v);
}

void store_proc_files_free(struct proc_file *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        skpx_free(v[i].instance);
    skpx_free(v);
}
