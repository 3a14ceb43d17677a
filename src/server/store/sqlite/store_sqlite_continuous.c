/* store_sqlite_continuous.c - SQLite tables of continuous profiling (see store_continuous.h):
 * continuous_policies, continuous_triggers and continuous_trigger_causes (schema step 5). */
#include "server/store/store_continuous.h"

#include <string.h>

#include "common/alloc.h"
#include "common/grow.h"
#include "server/store/sqlite/store_int.h"

#define CONT_LIST_DEFAULT 1000

skp_err sqlite_store_cont_put_policy(struct store *base, const char *service, const char *uuid,
                                     const char *json, int64_t now_ms)
{
    struct sqlite_store *st = sqlite_store_of(base);
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st,
                                 "INSERT OR REPLACE INTO continuous_policies(service, uuid, json,"
                                 " updated_ms) VALUES(?, ?, ?, ?)",
                                 &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, service, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, uuid, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, json, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 4, now_ms);
    err = store__step_done(st, s, "put continuous policy");
    sqlite3_finalize(s);
    return err;
}

skp_err sqlite_store_cont_delete_policy(struct store *base, const char *service)
{
    struct sqlite_store *st = sqlite_store_of(base);
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st, "DELETE FROM continuous_policies WHERE service = ?", &s);
    if (err)
        return err;
    sqlite3_bind_text(s, 1, service, -1, SQLITE_STATIC);
    err = store__step_done(st, s, "delete continuous policy");
    sqlite3_finalize(s);
    if (!err && sqlite3_changes(st->db) == 0)
        err = SKP_ENOTFOUND;
    return err;
}

struct policy_visit {
    store_cont_policy_cb cb;
    void *ud;
};

static skp_err policy_row(void *ud, sqlite3_stmt *s)
{
    struct policy_visit *v = ud;
    struct store_cont_policy_row r = {
        .service = store__col_text(s, 0),
        .uuid = store__col_text(s, 1),
        .json = store__col_text(s, 2),
        .updated_ms = sqlite3_column_int64(s, 3),
    };
    return v->cb(v->ud, &r);
}

skp_err sqlite_store_cont_list_policies(struct store *base, const char *service,
                                        store_cont_policy_cb cb, void *ud)
{
    struct sqlite_store *st = sqlite_store_of(base);
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st,
                                 "SELECT service, uuid, json, updated_ms FROM continuous_policies"
                                 " WHERE ?1 IS NULL OR service = ?1 ORDER BY service",
                                 &s);
    if (err)
        return err;
    if (service)
        sqlite3_bind_text(s, 1, service, -1, SQLITE_STATIC);
    struct policy_visit v = {cb, ud};
    err = store__each_row(st, s, policy_row, &v, "list continuous policies");
    sqlite3_finalize(s);
    return err;
}

static void bind_text_or_null(sqlite3_stmt *s, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(s, i);
}

static skp_err insert_causes(struct sqlite_store *st, int64_t id,
                             const struct store_cont_trigger *t)
{
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st,
                                 "INSERT INTO continuous_trigger_causes(trigger_id, seq, type,"
                                 " uri, uri_is_regex, threshold, current, window_s, hits)"
                                 " VALUES(?,?,?,?,?,?,?,?,?)",
                                 &s);
    for (size_t i = 0; !err && i < t->n_causes; i++) {
        const struct store_cont_cause *c = &t->causes[i];
        sqlite3_reset(s);
        sqlite3_bind_int64(s, 1, id);
        sqlite3_bind_int64(s, 2, (int64_t)i);
        sqlite3_bind_text(s, 3, c->type ? c->type : "", -1, SQLITE_STATIC);
        bind_text_or_null(s, 4, c->uri);
        sqlite3_bind_int(s, 5, c->uri_is_regex ? 1 : 0);
        sqlite3_bind_double(s, 6, c->threshold);
        sqlite3_bind_double(s, 7, c->current);
        sqlite3_bind_int64(s, 8, c->window_s);
        sqlite3_bind_int64(s, 9, c->hits);
        err = store__step_done(st, s, "insert continuous trigger cause");
    }
    sqlite3_finalize(s);
    return err;
}

skp_err sqlite_store_cont_insert_trigger(struct store *base, const struct store_cont_trigger *t,
                                         int64_t *id_out)
{
    struct sqlite_store *st = sqlite_store_of(base);
    skp_err err = store__begin(st);
    if (err)
        return err;
    sqlite3_stmt *s = NULL;
    err = store__prepare(st,
                         "INSERT INTO continuous_triggers(service, instance, process, time_ms,"
                         " target, source, task_kind, task_id, note) VALUES(?,?,?,?,?,?,?,?,?)",
                         &s);
    if (err)
        goto out;
    sqlite3_bind_text(s, 1, t->service, -1, SQLITE_STATIC);
    bind_text_or_null(s, 2, t->instance);
    bind_text_or_null(s, 3, t->process);
    sqlite3_bind_int64(s, 4, t->time_ms);
    sqlite3_bind_text(s, 5, t->target ? t->target : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 6, t->source ? t->source : "server", -1, SQLITE_STATIC);
    bind_text_or_null(s, 7, t->task_kind);
    bind_text_or_null(s, 8, t->task_id);
    bind_text_or_null(s, 9, t->note);
    err = store__step_done(st, s, "insert continuous trigger");
    sqlite3_finalize(s);
    if (err)
        goto out;
    int64_t id = sqlite3_last_insert_rowid(st->db);
    err = insert_causes(st, id, t);
    if (err)
        goto out;
    err = store__commit(st);
    if (!err && id_out)
        *id_out = id;
    return err;
out:
    store__rollback(st);
    return err;
}

/* Causes of one trigger, copied (the trigger statement is still stepping). */
struct causes_acc {
    struct store_cont_cause *v;
    size_t n, cap;
};

static void causes_free(struct causes_acc *a)
{
    for (size_t i = 0; i < a->n; i++) {
        skpx_free((char *)a->v[i].type);
        skpx_free((char *)a->v[i].uri);
    }
    skpx_free(a->v);
    memset(a, 0, sizeof(*a));
}

static skp_err cause_row(void *ud, sqlite3_stmt *s)
{
    struct causes_acc *a = ud;
    if (skpx_grow(&a->v, &a->cap, a->n + 1, sizeof(*a->v), 4) != SKP_OK)
        return SKP_ENOMEM;
    struct store_cont_cause *c = &a->v[a->n++];
    memset(c, 0, sizeof(*c));
    c->type = skpx_strdup(store__col_text(s, 0));
    const char *uri = store__col_text_or_null(s, 1);
    c->uri = uri ? skpx_strdup(uri) : NULL;
    c->uri_is_regex = sqlite3_column_int(s, 2) != 0;
    c->threshold = sqlite3_column_double(s, 3);
    c->current = sqlite3_column_double(s, 4);
    c->window_s = sqlite3_column_int64(s, 5);
    c->hits = sqlite3_column_int64(s, 6);
    return c->type && (c->uri || !uri) ? SKP_OK : SKP_ENOMEM;
}

struct trig_visit {
    struct sqlite_store *st;
    sqlite3_stmt *causes;
    store_cont_trigger_cb cb;
    void *ud;
};

static skp_err trigger_row(void *ud, sqlite3_stmt *s)
{
    struct trig_visit *v = ud;
    struct store_cont_trigger t = {
        .id = sqlite3_column_int64(s, 0),
        .service = store__col_text(s, 1),
        .instance = store__col_text_or_null(s, 2),
        .process = store__col_text_or_null(s, 3),
        .time_ms = sqlite3_column_int64(s, 4),
        .target = store__col_text(s, 5),
        .source = store__col_text(s, 6),
        .task_kind = store__col_text_or_null(s, 7),
        .task_id = store__col_text_or_null(s, 8),
        .note = store__col_text_or_null(s, 9),
    };
    sqlite3_reset(v->causes);
    sqlite3_bind_int64(v->causes, 1, t.id);
    struct causes_acc a = {0};
    skp_err err = store__each_row(v->st, v->causes, cause_row, &a, "list trigger causes");
    if (!err) {
        t.causes = a.v;
        t.n_causes = a.n;
        err = v->cb(v->ud, &t);
    }
    causes_free(&a);
    return err;
}

skp_err sqlite_store_cont_list_triggers(struct store *base, const char *service,
                                        const char *task_id, size_t limit, store_cont_trigger_cb cb,
                                        void *ud)
{
    struct sqlite_store *st = sqlite_store_of(base);
    sqlite3_stmt *s = NULL;
    struct trig_visit v = {.st = st, .cb = cb, .ud = ud};
    skp_err err = store__prepare(st,
                                 "SELECT id, service, instance, process, time_ms, target, source,"
                                 " task_kind, task_id, note FROM continuous_triggers"
                                 " WHERE (?1 IS NULL OR service = ?1)"
                                 " AND (?2 IS NULL OR task_id = ?2)"
                                 " ORDER BY time_ms DESC, id DESC LIMIT ?3",
                                 &s);
    if (!err)
        err = store__prepare(st,
                             "SELECT type, uri, uri_is_regex, threshold, current, window_s, hits"
                             " FROM continuous_trigger_causes WHERE trigger_id = ? ORDER BY seq",
                             &v.causes);
    if (!err) {
        bind_text_or_null(s, 1, service);
        bind_text_or_null(s, 2, task_id);
        sqlite3_bind_int64(s, 3, (int64_t)(limit ? limit : CONT_LIST_DEFAULT));
        err = store__each_row(st, s, trigger_row, &v, "list continuous triggers");
    }
    sqlite3_finalize(v.causes);
    sqlite3_finalize(s);
    return err;
}
