/* store_sqlite_continuous.c - SQLite tables of continuous profiling (see store_continuous.h):
 * continuous_triggers and continuous_trigger_causes (schema step 5; continuous_policies:
 * store/store_cont_policies.c). */
#include "server/store/store_continuous.h"

#include <string.h>

#include "common/alloc.h"
#include "common/grow.h"
#include "server/store/sqlite/store_int.h"

#define CONT_LIST_DEFAULT 1000

static skp_err insert_causes(struct sqlite_store *st, int64_t id,
                             const struct store_cont_trigger *t)
{
    sqlite3_stmt *s = NULL;
    skp_err err = store__prepare(st,
                                 "INSERT INTO continuous_trigger_causes(" STORE_CONT_CAUSE_COLS
                                 ", trigger_id, seq) VALUES(" STORE_CONT_CAUSE_SQ ", ?, ?)",
                                 &s);
    for (size_t i = 0; !err && i < t->n_causes; i++) {
        sqlite3_reset(s);
        int k = store__bind_row(s, 1, &store_cont_cause_row, &t->causes[i]);
        sqlite3_bind_int64(s, k, id);
        sqlite3_bind_int64(s, k + 1, (int64_t)i);
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
    int64_t id = 0;
    err = store__insert_row(st,
                            "INSERT INTO continuous_triggers(" STORE_CONT_TRIGGER_COLS ")"
                            " VALUES(" STORE_CONT_TRIGGER_SQ ")",
                            &store_cont_trigger_row, t, &id, "insert continuous trigger");
    if (err)
        goto out;
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
    for (size_t i = 0; i < a->n; i++)
        store_row_cleanup(&store_cont_cause_row, &a->v[i]);
    skpx_free(a->v);
    memset(a, 0, sizeof(*a));
}

static skp_err cause_row(void *ud, sqlite3_stmt *s)
{
    struct causes_acc *a = ud;
    if (skpx_grow(&a->v, &a->cap, a->n + 1, sizeof(*a->v), 4) != SKP_OK)
        return SKP_ENOMEM;
    skp_err err = store__read_row(s, 0, &store_cont_cause_row, &a->v[a->n], true);
    a->n += !err;
    return err;
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
    struct store_cont_trigger t;
    skp_err err = store__read_row(s, 0, &store_cont_trigger_row, &t, false);
    if (err)
        return err;
    sqlite3_reset(v->causes);
    sqlite3_bind_int64(v->causes, 1, t.id);
    struct causes_acc a = {0};
    err = store__each_row(v->st, v->causes, cause_row, &a, "list trigger causes");
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
    struct store_params p = {0};
    store_param_text(&p, service);
    store_param_text(&p, task_id);
    store_param_int(&p, (int64_t)(limit ? limit : CONT_LIST_DEFAULT));
    skp_err err = store__prepare_with(st,
                                      "SELECT " STORE_CONT_TRIGGER_READ " FROM continuous_triggers"
                                      " WHERE (?1 IS NULL OR service = ?1)"
                                      " AND (?2 IS NULL OR task_id = ?2)"
                                      " ORDER BY time_ms DESC, id DESC LIMIT ?3",
                                      &p, &s);
    if (!err)
        err = store__prepare(st,
                             "SELECT " STORE_CONT_CAUSE_READ " FROM continuous_trigger_causes"
                             " WHERE trigger_id = ? ORDER BY seq",
                             &v.causes);
    if (!err)
        err = store__each_row(st, s, trigger_row, &v, "list continuous triggers");
    sqlite3_finalize(v.causes);
    sqlite3_finalize(s);
    return err;
}
