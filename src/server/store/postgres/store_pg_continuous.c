/* store_pg_continuous.c - PostgreSQL backend of store_continuous.h: continuous_policies,
 * continuous_triggers and continuous_trigger_causes (the feature step of store_pg_schema.c).
 * A trigger and its causes are one transaction; trigger ids come from a sequence, so collectors
 * sharing the database never hand out the same id. */
#include "server/store/store_continuous.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/grow.h"
#include "server/store/postgres/store_pg_features.h"
#include "server/store/postgres/store_pg_int.h"

#define CONT_LIST_DEFAULT 1000

skp_err pg_store_cont_put_policy(struct store *base, const char *service, const char *uuid,
                                 const char *json, int64_t now_ms)
{
    struct pg_store *st = pg_store_of(base);
    skp_err err = pg__ready(st);
    if (err)
        return err;
    struct pg_params p = {0};
    pgp_text(&p, service);
    pgp_text(&p, uuid);
    pgp_text(&p, json);
    pgp_int(&p, now_ms);
    PGresult *r = pg__exec(st,
                           "INSERT INTO continuous_policies(service, uuid, json, updated_ms) "
                           "VALUES($1, $2, $3, $4) ON CONFLICT (service) DO UPDATE SET "
                           "uuid = excluded.uuid, json = excluded.json, "
                           "updated_ms = excluded.updated_ms",
                           &p, &err, "put continuous policy");
    pgp_free(&p);
    PQclear(r);
    return err;
}

skp_err pg_store_cont_delete_policy(struct store *base, const char *service)
{
    struct pg_store *st = pg_store_of(base);
    skp_err err = pg__ready(st);
    if (err)
        return err;
    struct pg_params p = {0};
    pgp_text(&p, service);
    PGresult *r = pg__exec(st, "DELETE FROM continuous_policies WHERE service = $1", &p, &err,
                           "delete continuous policy");
    pgp_free(&p);
    if (r && strcmp(PQcmdTuples(r), "0") == 0)
        err = SKP_ENOTFOUND;
    PQclear(r);
    return err;
}

skp_err pg_store_cont_list_policies(struct store *base, const char *service,
                                    store_cont_policy_cb cb, void *ud)
{
    struct pg_store *st = pg_store_of(base);
    skp_err err = pg__ready(st);
    if (err)
        return err;
    struct pg_params p = {0};
    pgp_text(&p, service);
    PGresult *r = pg__exec(st,
                           "SELECT service, uuid, json, updated_ms FROM continuous_policies "
                           "WHERE $1::text IS NULL OR service = $1 ORDER BY service COLLATE \"C\"",
                           &p, &err, "list continuous policies");
    pgp_free(&p);
    if (!r)
        return err;
    for (int i = 0; i < PQntuples(r) && !err; i++) {
        struct store_cont_policy_row row = {
            .service = pg__txt(r, i, 0),
            .uuid = pg__txt(r, i, 1),
            .json = pg__txt(r, i, 2),
            .updated_ms = pg__i64(r, i, 3),
        };
        err = cb(ud, &row);
    }
    PQclear(r);
    return err;
}

skp_err pg_store_cont_insert_trigger(struct store *base, const struct store_cont_trigger *t,
                                     int64_t *id_out)
{
    struct pg_store *st = pg_store_of(base);
    if (id_out)
        *id_out = 0;
    skp_err err = pg__ready(st);
    if (err)
        return err;
    err = pg__begin(st);
    if (err)
        return err;
    struct pg_params p = {0};
    pgp_text(&p, t->service);
    pgp_text(&p, t->instance);
    pgp_text(&p, t->process);
    pgp_int(&p, t->time_ms);
    pgp_text(&p, t->target ? t->target : "");
    pgp_text(&p, t->source ? t->source : "server");
    pgp_text(&p, t->task_kind);
    pgp_text(&p, t->task_id);
    pgp_text(&p, t->note);
    PGresult *r = pg__exec(st,
                           "INSERT INTO continuous_triggers(service, instance, process, time_ms, "
                           "target, source, task_kind, task_id, note) "
                           "VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
                           &p, &err, "insert continuous trigger");
    pgp_free(&p);
    int64_t id = 0;
    if (r && PQntuples(r) == 1)
        id = pg__i64(r, 0, 0);
    else if (r)
        err = SKP_EIO;
    PQclear(r);
    for (size_t i = 0; !err && i < t->n_causes; i++) {
        const struct store_cont_cause *c = &t->causes[i];
        struct pg_params q = {0};
        char thr[40], cur[40];
        snprintf(thr, sizeof(thr), "%.17g", c->threshold);
        snprintf(cur, sizeof(cur), "%.17g", c->current);
        pgp_int(&q, id);
        pgp_int(&q, (int64_t)i);
        pgp_text(&q, c->type ? c->type : "");
        pgp_text(&q, c->uri);
        pgp_text(&q, c->uri_is_regex ? "true" : "false");
        pgp_text(&q, thr);
        pgp_text(&q, cur);
        pgp_int(&q, c->window_s);
        pgp_int(&q, c->hits);
        r = pg__exec(st,
                     "INSERT INTO continuous_trigger_causes(trigger_id, seq, type, uri, "
                     "uri_is_regex, threshold, current, window_s, hits) "
                     "VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                     &q, &err, "insert continuous trigger cause");
        pgp_free(&q);
        PQclear(r);
    }
    if (!err)
        err = pg__commit(st);
    if (err) {
        pg__rollback(st);
        return err;
    }
    if (id_out)
        *id_out = id;
    return SKP_OK;
}

skp_err pg_store_cont_list_triggers(struct store *base, const char *service, const char *task_id,
                                    size_t limit, store_cont_trigger_cb cb, void *ud)
{
    struct pg_store *st = pg_store_of(base);
    skp_err err = pg__ready(st);
    if (err)
        return err;
    struct pg_params p = {0};
    pgp_text(&p, service);
    pgp_text(&p, task_id);
    pgp_int(&p, (int64_t)(limit ? limit : CONT_LIST_DEFAULT));
    PGresult *r = pg__exec(st,
                           "SELECT id, service, instance, process, time_ms, target, source, "
                           "task_kind, task_id, note FROM continuous_triggers "
                           "WHERE ($1::text IS NULL OR service = $1) "
                           "AND ($2::text IS NULL OR task_id = $2) "
                           "ORDER BY time_ms DESC, id DESC LIMIT $3",
                           &p, &err, "list continuous triggers");
    pgp_free(&p);
    if (!r)
        return err;
    int n = PQntuples(r);
    PGresult *c = NULL;
    if (n > 0) {
        /* The causes of exactly the listed triggers (by id: a trigger another collector adds
         * meanwhile changes nothing), in one query, in trigger order. */
        struct pg_buf ids = {0};
        pgb_putc(&ids, '{');
        for (int i = 0; i < n; i++) {
            if (i)
                pgb_putc(&ids, ',');
            pgb_int(&ids, pg__i64(r, i, 0));
        }
        pgb_putc(&ids, '}');
        struct pg_params q = {0};
        pgp_owned(&q, pgb_take(&ids));
        c = pg__exec(st,
                     "SELECT trigger_id, type, uri, uri_is_regex, threshold, current, window_s, "
                     "hits FROM continuous_trigger_causes WHERE trigger_id = ANY($1::bigint[]) "
                     "ORDER BY trigger_id, seq",
                     &q, &err, "list continuous trigger causes");
        pgp_free(&q);
    }
    int nc = c ? PQntuples(c) : 0;
    struct store_cont_cause *causes = NULL;
    size_t cap = 0;
    for (int i = 0; i < n && !err; i++) {
        struct store_cont_trigger t = {
            .id = pg__i64(r, i, 0),
            .service = pg__txt(r, i, 1),
            .instance = pg__null(r, i, 2) ? NULL : pg__txt(r, i, 2),
            .process = pg__null(r, i, 3) ? NULL : pg__txt(r, i, 3),
            .time_ms = pg__i64(r, i, 4),
            .target = pg__txt(r, i, 5),
            .source = pg__txt(r, i, 6),
            .task_kind = pg__null(r, i, 7) ? NULL : pg__txt(r, i, 7),
            .task_id = pg__null(r, i, 8) ? NULL : pg__txt(r, i, 8),
            .note = pg__null(r, i, 9) ? NULL : pg__txt(r, i, 9),
        };
        size_t k = 0;
        for (int j = 0; j < nc && !err; j++) { /* nc is small: triggers have a few causes */
            if (pg__i64(c, j, 0) != t.id)
                continue;
            if (skpx_grow(&causes, &cap, k + 1, sizeof(*causes), 4) != SKP_OK) {
                err = SKP_ENOMEM;
                break;
            }
            causes[k++] = (struct store_cont_cause){
                .type = pg__txt(c, j, 1),
                .uri = pg__null(c, j, 2) ? NULL : pg__txt(c, j, 2),
                .uri_is_regex = pg__txt(c, j, 3)[0] == 't',
                .threshold = strtod(pg__txt(c, j, 4), NULL),
                .current = strtod(pg__txt(c, j, 5), NULL),
                .window_s = pg__i64(c, j, 6),
                .hits = pg__i64(c, j, 7),
            };
        }
        if (err)
            break;
        t.causes = causes;
        t.n_causes = k;
        err = cb(ud, &t);
    }
    skpx_free(causes);
    PQclear(c);
    PQclear(r);
    return err;
}
