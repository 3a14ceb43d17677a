/* store_pg_cluster.c - PostgreSQL backend of the collectors' shared state for continuous
 * profiling (store_continuous.h, "several collectors on one database"): every collector's
 * per-slot shares of the evaluated endpoints (cont_slots, one row per service, endpoint, slot
 * and writer), the evaluator's lease (cont_lease: holder and expiry on the database's clock, so
 * the collectors' clocks do not matter) and the firing claims (cont_fired: unique on service,
 * target and the end of the window judged, so a firing is recorded once whoever evaluates).
 *
 * Design: these tables hold coordination state only (the last hour's slots, one lease row, the
 * claims of the last hours); nothing else refers to them and dropping them loses nothing that
 * matters. They are created on first use (a statement failing with undefined_table creates them
 * under an advisory lock, then runs again) rather than by a migration step. Each call is one
 * statement. */
#include "server/store/store_continuous.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "server/store/postgres/store_pg_int.h"

/* The advisory lock key of the creation ("skpclust"). */
#define PG_LOCK_CLUSTER 0x736b70636c757374LL
#define PG_NOW_MS "(extract(epoch from clock_timestamp()) * 1000)::bigint"

static const char k_tables[] =
    "CREATE TABLE IF NOT EXISTS cont_slots(service text NOT NULL, endpoint text NOT NULL,"
    "  slot_ms bigint NOT NULL, writer bigint NOT NULL, count bigint NOT NULL,"
    "  errors bigint NOT NULL, sum_ms double precision NOT NULL, hist bytea NOT NULL,"
    "  instances text NOT NULL);"
    "CREATE UNIQUE INDEX IF NOT EXISTS cont_slots_key ON cont_slots(md5(service),"
    "  md5(endpoint), slot_ms, writer);"
    "CREATE INDEX IF NOT EXISTS cont_slots_by_slot ON cont_slots(slot_ms);"
    "CREATE TABLE IF NOT EXISTS cont_lease(name text PRIMARY KEY, holder bigint NOT NULL,"
    "  expires_ms bigint NOT NULL);"
    "CREATE TABLE IF NOT EXISTS cont_fired(service text NOT NULL, target text NOT NULL,"
    "  window_ms bigint NOT NULL, claimed_ms bigint NOT NULL);"
    "CREATE UNIQUE INDEX IF NOT EXISTS cont_fired_key ON cont_fired(md5(service), target,"
    "  window_ms);";

static skp_err create_tables(struct pg_store *st)
{
    skp_err err = pg__begin_locked(st, PG_LOCK_CLUSTER, "lock cluster tables");
    if (err)
        return err;
    err = pg__cmd(st, k_tables, "create cluster tables");
    return pg__finish(st, err);
}

/* pg__query; the tables are created before the store's first cluster statement (which
 * logged "relation does not exist" at every start before), and once more when they went
 * missing since (a database recreated under a running collector). p is copied first:
 * pg__query frees it. */
static PGresult *run(struct pg_store *st, const char *sql, struct pg_params *p, skp_err *err,
                     const char *what)
{
    struct pg_params again = {.n = p->n};
    bool copied = pgp_ok(p);
    for (int i = 0; i < p->n && copied; i++) {
        again.v[i] = NULL;
        if (p->v[i]) {
            again.owned[i] = skpx_strdup(p->v[i]);
            again.v[i] = again.owned[i];
            copied = again.owned[i] != NULL;
        }
    }
    *err = SKP_OK;
    if (!st->cluster_tables && !st->in_tx && create_tables(st) == SKP_OK)
        st->cluster_tables = true;
    PGresult *r = pg__query(st, sql, p, err, what);
    if (!r && copied && strcmp(st->sqlstate, "42P01") == 0 && create_tables(st) == SKP_OK) {
        *err = SKP_OK;
        return pg__query(st, sql, &again, err, what);
    }
    pgp_free(&again);
    return r;
}

static void put_double(struct pg_buf *b, double v)
{
    char num[40];
    snprintf(num, sizeof(num), "%.17g", v);
    pgb_puts(b, num);
}

enum {
    COL_SVC,
    COL_EP,
    COL_SLOT,
    COL_WRITER,
    COL_COUNT,
    COL_ERR,
    COL_SUM,
    COL_HIST,
    COL_INST,
    N_COLS
};

skp_err pg_store_cont_put_slots(struct store *base, const struct store_cont_slot *v, size_t n)
{
    struct pg_buf c[N_COLS] = {{0}};
    for (int k = 0; k < N_COLS; k++)
        pgb_putc(&c[k], '{');
    for (size_t i = 0; i < n; i++) {
        if (i)
            for (int k = 0; k < N_COLS; k++)
                pgb_putc(&c[k], ',');
        pgb_elem(&c[COL_SVC], v[i].service ? v[i].service : "");
        pgb_elem(&c[COL_EP], v[i].endpoint ? v[i].endpoint : "");
        pgb_int(&c[COL_SLOT], v[i].slot_ms);
        pgb_int(&c[COL_WRITER], v[i].writer);
        pgb_int(&c[COL_COUNT], v[i].count);
        pgb_int(&c[COL_ERR], v[i].errors);
        put_double(&c[COL_SUM], v[i].sum_ms);
        pgb_bytea_elem(&c[COL_HIST], v[i].hist, v[i].hist_len);
        pgb_elem(&c[COL_INST], v[i].instances ? v[i].instances : "");
    }
    struct pg_params p = {0};
    for (int k = 0; k < N_COLS; k++) {
        pgb_putc(&c[k], '}');
        pgp_owned(&p, pgb_take(&c[k]));
    }
    skp_err err;
    PQclear(run(pg_store_of(base),
                "INSERT INTO cont_slots(service, endpoint, slot_ms, writer, count, errors, sum_ms,"
                " hist, instances) SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[],"
                " $4::bigint[], $5::bigint[], $6::bigint[], $7::float8[], $8::bytea[], $9::text[])"
                " ON CONFLICT (md5(service), md5(endpoint), slot_ms, writer) DO UPDATE SET"
                " count = excluded.count, errors = excluded.errors, sum_ms = excluded.sum_ms,"
                " hist = excluded.hist, instances = excluded.instances",
                &p, &err, "put continuous slots"));
    return err;
}

skp_err pg_store_cont_list_slots(struct store *base, int64_t from_ms, int64_t to_ms,
                                 store_cont_slot_cb cb, void *ud)
{
    if (!cb)
        return SKP_EINVAL;
    struct pg_params p = {0};
    pgp_int(&p, from_ms);
    pgp_int(&p, to_ms);
    skp_err err;
    PGresult *r = run(pg_store_of(base),
                      "SELECT service, endpoint, slot_ms, writer, count, errors, sum_ms, hist,"
                      " instances FROM cont_slots WHERE slot_ms >= $1 AND slot_ms < $2"
                      " ORDER BY service COLLATE \"C\", endpoint COLLATE \"C\", slot_ms, writer",
                      &p, &err, "list continuous slots");
    if (!r)
        return err;
    int n = PQntuples(r);
    for (int i = 0; i < n && !err; i++) {
        char *hist = PQgetvalue(r, i, COL_HIST);
        size_t len = pg__unhex(hist);
        if (len == SIZE_MAX)
            continue; /* not a bytea in hex form: the row is left out */
        struct store_cont_slot s = {
            .service = pg__txt(r, i, COL_SVC),
            .endpoint = pg__txt(r, i, COL_EP),
            .slot_ms = pg__i64(r, i, COL_SLOT),
            .writer = pg__i64(r, i, COL_WRITER),
            .count = pg__i64(r, i, COL_COUNT),
            .errors = pg__i64(r, i, COL_ERR),
            .sum_ms = strtod(pg__txt(r, i, COL_SUM), NULL),
            .hist = (const uint8_t *)hist,
            .hist_len = len,
            .instances = pg__txt(r, i, COL_INST),
        };
        err = cb(ud, &s);
    }
    PQclear(r);
    return err;
}

/* run() of an insert RETURNING one row when it took effect (a lease held, a firing claimed):
 * *took says whether it did. */
static skp_err run_took(struct store *base, const char *sql, struct pg_params *p, const char *what,
                        bool *took)
{
    skp_err err;
    PGresult *r = run(pg_store_of(base), sql, p, &err, what);
    if (r)
        *took = PQntuples(r) == 1;
    PQclear(r);
    return err;
}

skp_err pg_store_cont_lease(struct store *base, const char *name, int64_t holder, int64_t ttl_ms,
                            bool *held)
{
    struct pg_params p = {0};
    pgp_text(&p, name);
    pgp_int(&p, holder);
    skp_err err;
    if (ttl_ms <= 0) {
        PQclear(run(pg_store_of(base), "DELETE FROM cont_lease WHERE name = $1 AND holder = $2", &p,
                    &err, "give up continuous lease"));
        return err;
    }
    pgp_int(&p, ttl_ms);
    return run_took(
        base,
        "INSERT INTO cont_lease AS l(name, holder, expires_ms) VALUES($1, $2, " PG_NOW_MS
        " + $3) ON CONFLICT (name) DO UPDATE SET holder = excluded.holder,"
        " expires_ms = excluded.expires_ms WHERE l.holder = excluded.holder"
        " OR l.expires_ms < " PG_NOW_MS " RETURNING holder",
        &p, "continuous lease", held);
}

skp_err pg_store_cont_claim_firing(struct store *base, const char *service, const char *target,
                                   int64_t window_ms, bool *claimed)
{
    struct pg_params p = {0};
    pgp_text(&p, service);
    pgp_text(&p, target);
    pgp_int(&p, window_ms);
    return run_took(base,
                    "INSERT INTO cont_fired(service, target, window_ms, claimed_ms)"
                    " VALUES($1, $2, $3, " PG_NOW_MS ") ON CONFLICT DO NOTHING RETURNING 1",
                    &p, "claim continuous firing", claimed);
}

skp_err pg_store_cont_purge_cluster(struct store *base, int64_t before_ms, int64_t claims_before_ms)
{
    struct pg_params p = {0};
    pgp_int(&p, before_ms);
    pgp_int(&p, claims_before_ms);
    skp_err err;
    PQclear(run(pg_store_of(base),
                "WITH a AS (DELETE FROM cont_slots WHERE slot_ms < $1)"
                " DELETE FROM cont_fired WHERE window_ms < $2",
                &p, &err, "purge continuous slots"));
    return err;
}
