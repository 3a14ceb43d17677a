/* store_pg_continuous.c - PostgreSQL backend of store_continuous.h's triggers: continuous_triggers
 * and continuous_trigger_causes (the feature step of store_pg_schema.c; continuous_policies:
 * store/store_cont_policies.c).
 * A trigger and its causes are one transaction; trigger ids come from a sequence, so collectors
 * sharing the database never hand out the same id. */
#include "server/store/store_continuous.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/grow.h"
#include "server/store/postgres/store_pg_int.h"

#define CONT_LIST_DEFAULT 1000

skp_err pg_store_cont_insert_trigger(struct store *base, const struct store_cont_trigger *t,
                                     int64_t *id_out)
{
    struct pg_store *st = pg_store_of(base);
    if (id_out)
        *id_out = 0;
    skp_err err = pg__begin(st);
    if (err)
        return err;
    struct pg_params p = {0};
    pgp_row(&p, &store_cont_trigger_row, t);
    int64_t id = pg__query_id(st,
                              "INSERT INTO continuous_triggers(" STORE_CONT_TRIGGER_COLS ") "
                              "VALUES(" STORE_CONT_TRIGGER_PG ") RETURNING id",
                              &p, &err, "insert continuous trigger");
    for (size_t i = 0; !err && i < t->n_causes; i++) {
        struct pg_params q = {0};
        pgp_row(&q, &store_cont_cause_row, &t->causes[i]);
        pgp_int(&q, id);
        pgp_int(&q, (int64_t)i);
        PQclear(pg__query(st,
                          "INSERT INTO continuous_trigger_causes(" STORE_CONT_CAUSE_COLS
                          ", trigger_id, seq) VALUES(" STORE_CONT_CAUSE_PG ", $8, $9)",
                          &q, &err, "insert continuous trigger cause"));
    }
    err = pg__finish(st, err);
    if (err)
        return err;
    if (id_out)
        *id_out = id;
    return SKP_OK;
}

skp_err pg_store_cont_list_triggers(struct store *base, const char *service, const char *task_id,
                                    size_t limit, store_cont_trigger_cb cb, void *ud)
{
    struct pg_store *st = pg_store_of(base);
    skp_err err = SKP_OK;
    struct pg_params p = {0};
    pgp_text(&p, service);
    pgp_text(&p, task_id);
    pgp_int(&p, (int64_t)(limit ? limit : CONT_LIST_DEFAULT));
    PGresult *r = pg__query(st,
                            "SELECT " STORE_CONT_TRIGGER_READ " FROM continuous_triggers "
                            "WHERE ($1::text IS NULL OR service = $1) "
                            "AND ($2::text IS NULL OR task_id = $2) "
                            "ORDER BY time_ms DESC, id DESC LIMIT $3",
                            &p, &err, "list continuous triggers");
    if (!r)
        return err;
    int n = PQntuples(r);
    PGresult *c = NULL;
    if (n > 0) {
        /* The causes of exactly the listed triggers (by id: a trigger another collector adds
         * meanwhile changes nothing), in one query, in trigger order. */
        struct pg_params q = {0};
        pgp_owned(&q, pg__column_array(r, 0));
        c = pg__query(st,
                      "SELECT trigger_id, " STORE_CONT_CAUSE_READ " FROM continuous_trigger_causes "
                      "WHERE trigger_id = ANY($1::bigint[]) ORDER BY trigger_id, seq",
                      &q, &err, "list continuous trigger causes");
    }
    int nc = c ? PQntuples(c) : 0;
    struct store_cont_cause *causes = NULL;
    size_t cap = 0;
    for (int i = 0; i < n && !err; i++) {
        struct store_cont_trigger t;
        err = pg__read_row(r, i, 0, &store_cont_trigger_row, &t, false);
        size_t k = 0;
        for (int j = 0; j < nc && !err; j++) { /* nc is small: triggers have a few causes */
            if (pg__i64(c, j, 0) != t.id)
                continue;
            if (skpx_grow(&causes, &cap, k + 1, sizeof(*causes), 4) != SKP_OK) {
                err = SKP_ENOMEM;
                break;
            }
            err = pg__read_row(c, j, 1, &store_cont_cause_row, &causes[k++], false);
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
