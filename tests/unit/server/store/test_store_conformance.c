/* test_store_conformance.c - one suite for the storage interface (store.h), run against every
 * backend. Everything is asserted through store.h's rows and callbacks only, so the same cases
 * hold for any backend; what a backend must provide to the suite (a fresh target, and a way to
 * make its writes fail) is the `struct backend` adapter below.
 *
 * Usage: test_store_conformance <backend>   (sqlite, or pg: a fresh database per case on the
 * PostgreSQL server of SKP_PG_URL - the ctest fixture `postgres` - or of SKP_TEST_PG_URL; a new
 * backend adds an adapter here and one add_test line in CMakeLists.txt).
 * Cases of a feature the backend does not implement yet (SKP_ENOTSUP) are skipped. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/log.h"
#include "server/analysis/analyzer.h"
#include "server/store/store_continuous.h"
#include "server/store/store_ebpf.h"
#include "server/store/store_proc.h"
#include "server/store/store_templates.h"
#include "server/store/sqlite/store_int.h"
#include "server/store/postgres/store_pg_int.h"
#include "store_test_util.h"

/* ---- backend adapters ---- */

enum fault {
    FAULT_NONE,
    FAULT_FULL, /* the disk is full: large writes fail, small ones may pass */
    FAULT_LOST, /* the database refuses every write (connection lost / read-only) */
};

struct backend {
    const char *name;
    /* Fills `target` (the string store_open takes) for a new, empty database. */
    void (*target_new)(char *target, size_t cap, void **ctx);
    void (*target_free)(void *ctx);
    /* Turns a fault on (or off with FAULT_NONE) for writes made through `st`. */
    void (*fault)(struct store *st, enum fault f);
    /* Cuts the store's connection to its server for good (NULL: no connection to lose). */
    void (*kill)(struct store *st);
    /* Several writing processes may share one database (several collectors). */
    bool shared;
};

static void sqlite_target_new(char *target, size_t cap, void **ctx)
{
    struct tu_db *d = skpx_calloc(1, sizeof(*d));
    tu_db_init(d);
    snprintf(target, cap, "%s", d->path);
    *ctx = d;
}

static void sqlite_target_free(void *ctx)
{
    tu_db_cleanup(ctx);
    skpx_free(ctx);
}

static void sqlite_fault(struct store *st, enum fault f)
{
    sqlite3 *db = store__db(st);
    char sql[96];
    switch (f) {
    case FAULT_FULL: {
        sqlite3_stmt *s = NULL;
        assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA page_count", -1, &s, NULL), SQLITE_OK);
        assert_int_equal(sqlite3_step(s), SQLITE_ROW);
        long long pages = sqlite3_column_int64(s, 0);
        sqlite3_finalize(s);
        snprintf(sql, sizeof(sql), "PRAGMA max_page_count = %lld", pages + 1);
        break;
    }
    case FAULT_LOST:
        snprintf(sql, sizeof(sql), "PRAGMA query_only = 1");
        break;
    default:
        snprintf(sql, sizeof(sql), "PRAGMA query_only = 0; PRAGMA max_page_count = 1073741823");
        break;
    }
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
}

/* PostgreSQL: every case gets a database of its own on the test server. */
static const char *pg_server_url(void)
{
    const char *u = getenv("SKP_TEST_PG_URL");
    if (!u || !*u)
        u = getenv("SKP_PG_URL");
    if (!u || !*u) {
        fprintf(stderr, "pg backend: set SKP_PG_URL or SKP_TEST_PG_URL (a postgresql:// URL)\n");
        abort();
    }
    return u;
}

static void pg_quiet(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

static PGconn *pg_admin(const char *url)
{
    PGconn *c = PQconnectdb(url);
    PQsetNoticeProcessor(c, pg_quiet, NULL);
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "pg backend: cannot connect to %s: %s", url, PQerrorMessage(c));
        abort();
    }
    return c;
}

static void pg_admin_exec(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) {
        fprintf(stderr, "pg backend: %s: %s", sql, PQerrorMessage(c));
        abort();
    }
    PQclear(r);
}

/* The server's URL with its database path replaced by `db`. */
static void pg_url_for(const char *url, const char *db, char *out, size_t cap)
{
    const char *path = strstr(url, "://");
    path = path ? strchr(path + 3, '/') : NULL;
    assert_non_null(path);
    const char *query = strchr(path, '?');
    snprintf(out, cap, "%.*s/%s%s", (int)(path - url), url, db, query ? query : "");
}

struct pg_target {
    char name[64];
};

static void pg_target_new(char *target, size_t cap, void **ctx)
{
    static unsigned counter;
    struct pg_target *t = skpx_calloc(1, sizeof(*t));
    snprintf(t->name, sizeof(t->name), "conf_%d_%u", (int)getpid(), counter++);
    PGconn *c = pg_admin(pg_server_url());
    char sql[160];
    snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s", t->name);
    pg_admin_exec(c, sql);
    snprintf(sql, sizeof(sql), "CREATE DATABASE %s", t->name);
    pg_admin_exec(c, sql);
    PQfinish(c);
    pg_url_for(pg_server_url(), t->name, target, cap);
    *ctx = t;
}

static void pg_target_free(void *ctx)
{
    struct pg_target *t = ctx;
    PGconn *c = pg_admin(pg_server_url());
    char sql[160];
    snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s WITH (FORCE)", t->name);
    pg_admin_exec(c, sql);
    PQfinish(c);
    skpx_free(t);
}

/* Full disk: the server answers large frame inserts with disk_full (53100), as a full volume
 * does for large writes. Lost: the session refuses every write (reads still work). */
static void pg_fault(struct store *st, enum fault f)
{
    PGconn *c = pg_store_of(st)->conn;
    switch (f) {
    case FAULT_FULL:
        pg_admin_exec(c, "CREATE FUNCTION skp_test_full() RETURNS trigger LANGUAGE plpgsql AS "
                         "$$BEGIN RAISE EXCEPTION 'could not extend file: No space left on "
                         "device' USING ERRCODE = 'disk_full'; END$$");
        pg_admin_exec(c, "CREATE TRIGGER skp_test_full BEFORE INSERT ON frames FOR EACH ROW "
                         "WHEN (length(NEW.sig) > 200) EXECUTE FUNCTION skp_test_full()");
        break;
    case FAULT_LOST:
        pg_admin_exec(c, "SET default_transaction_read_only = on");
        break;
    default:
        pg_admin_exec(c, "SET default_transaction_read_only = off");
        pg_admin_exec(c, "DROP TRIGGER IF EXISTS skp_test_full ON frames");
        pg_admin_exec(c, "DROP FUNCTION IF EXISTS skp_test_full()");
        break;
    }
}

static void pg_kill(struct store *st)
{
    PGconn *c = pg_admin(pg_server_url());
    char sql[96];
    snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(%d)",
             PQbackendPID(pg_store_of(st)->conn));
    pg_admin_exec(c, sql);
    PQfinish(c);
}

static const struct backend k_backends[] = {
    {"sqlite", sqlite_target_new, sqlite_target_free, sqlite_fault, NULL, false},
    {"pg", pg_target_new, pg_target_free, pg_fault, pg_kill, true},
};

static const struct backend *g_be;

/* ---- fixture ---- */

struct cf {
    char target[512];
    void *ctx;
    struct store *st;
};

static struct store *cf_open(const char *target)
{
    struct store *st = NULL;
    assert_int_equal(store_open(target, NULL, &st), SKP_OK);
    return st;
}

static int cf_setup(void **state)
{
    struct cf *f = skpx_calloc(1, sizeof(*f));
    g_be->target_new(f->target, sizeof(f->target), &f->ctx);
    f->st = cf_open(f->target);
    *state = f;
    return 0;
}

static int cf_teardown(void **state)
{
    struct cf *f = *state;
    store_close(f->st);
    g_be->target_free(f->ctx);
    skpx_free(f);
    return 0;
}

static void cf_reopen(struct cf *f)
{
    store_close(f->st);
    f->st = cf_open(f->target);
}

static struct store_stats stats(struct store *st)
{
    struct store_stats s;
    assert_int_equal(store_get_stats(st, &s), SKP_OK);
    return s;
}

/* ---- row collectors ---- */

#define MAXR 64

struct tasks_seen {
    size_t n;
    char id[MAXR][64];
    int64_t start[MAXR];
};

static skp_err task_cb(void *ud, const struct store_task *t)
{
    struct tasks_seen *v = ud;
    assert_true(v->n < MAXR);
    snprintf(v->id[v->n], sizeof(v->id[0]), "%s", t->id);
    v->start[v->n++] = t->start_time;
    return SKP_OK;
}

struct logs_seen {
    size_t n;
    char inst[MAXR][32];
    int op[MAXR];
    int64_t t[MAXR];
};

static skp_err log_cb(void *ud, const struct store_task_log *l)
{
    struct logs_seen *v = ud;
    assert_true(v->n < MAXR);
    snprintf(v->inst[v->n], sizeof(v->inst[0]), "%s", l->instance);
    v->op[v->n] = (int)l->op;
    v->t[v->n++] = l->time_ms;
    return SKP_OK;
}

struct samples {
    size_t n;
    uint32_t seg[256];
    int32_t seq[256];
    int64_t t[256];
    uint32_t stack[256];
    uint32_t w[256];
};

static void sample_cb(void *ud, const struct store_sample *s)
{
    struct samples *v = ud;
    if (v->n < 256) {
        v->w[v->n] = s->weight;
        v->seg[v->n] = s->segment;
        v->seq[v->n] = s->sequence;
        v->t[v->n] = s->time_ms;
        v->stack[v->n] = s->stack;
    }
    v->n++;
}

/* "a,b,c" of a stored stack id. */
static void stack_text(struct store *st, uint32_t stack, char *out, size_t cap)
{
    const uint32_t *ids;
    size_t n;
    assert_int_equal(store_get_stack(st, stack, &ids, &n), SKP_OK);
    uint32_t copy[64];
    assert_true(n <= 64);
    memcpy(copy, ids, n * sizeof(*ids));
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        const char *sig;
        assert_int_equal(store_get_frame(st, copy[i], &sig), SKP_OK);
        len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? "," : "", sig);
        assert_true(len < cap);
    }
}

static struct store_task task(const char *id, const char *svc, const char *ep, int64_t start,
                              int dur_min, int64_t create)
{
    return (struct store_task){.id = (char *)id,
                               .service = (char *)svc,
                               .endpoint = (char *)ep,
                               .start_time = start,
                               .duration_min = dur_min,
                               .min_duration_threshold = 5,
                               .dump_period = 10,
                               .max_sampling_count = 5,
                               .create_time = create};
}

/* ---- tasks and logs ---- */

static void tasks(void **state)
{
    struct cf *f = *state;
    struct store_task a = task("a", "svc", "/a", 1000, 1, 10);
    struct store_task b = task("b", "svc", "/b", 5000, 2, 20);
    struct store_task c = task("c", "other", "/a", 3000, 1, 30);
    assert_int_equal(store_insert_task(f->st, &a), SKP_OK);
    assert_int_equal(store_insert_task(f->st, &b), SKP_OK);
    assert_int_equal(store_insert_task(f->st, &c), SKP_OK);
    assert_int_equal(store_insert_task(f->st, &a), SKP_EEXIST);

    struct store_task got;
    assert_int_equal(store_get_task(f->st, "b", &got), SKP_OK);
    assert_string_equal(got.service, "svc");
    assert_string_equal(got.endpoint, "/b");
    assert_int_equal(got.start_time, 5000);
    assert_int_equal(got.duration_min, 2);
    assert_int_equal(got.min_duration_threshold, 5);
    assert_int_equal(got.dump_period, 10);
    assert_int_equal(got.max_sampling_count, 5);
    assert_int_equal(got.create_time, 20);
    store_task_cleanup(&got);
    assert_int_equal(store_get_task(f->st, "nope", &got), SKP_ENOTFOUND);

    assert_int_equal(store_latest_task_before(f->st, "svc", 4999, &got), SKP_OK);
    assert_string_equal(got.id, "a");
    store_task_cleanup(&got);
    assert_int_equal(store_latest_task_before(f->st, "svc", 999, &got), SKP_ENOTFOUND);

    /* an agent's poll: created after its cursor, window not over */
    struct store_task *v = NULL;
    size_t n = 0;
    assert_int_equal(store_tasks_for_agent(f->st, "svc", 0, 1000 + 60000 - 1, &v, &n), SKP_OK);
    assert_int_equal(n, 2);
    assert_string_equal(v[0].id, "a");
    assert_string_equal(v[1].id, "b");
    for (size_t i = 0; i < n; i++)
        store_task_cleanup(&v[i]);
    skpx_free(v);
    assert_int_equal(store_tasks_for_agent(f->st, "svc", 10, 1000 + 60000, &v, &n), SKP_OK);
    assert_int_equal(n, 1); /* a: before the cursor and over */
    assert_string_equal(v[0].id, "b");
    store_task_cleanup(&v[0]);
    skpx_free(v);

    struct tasks_seen ts = {0};
    assert_int_equal(store_list_tasks(f->st, NULL, NULL, task_cb, &ts), SKP_OK);
    assert_int_equal(ts.n, 3);
    assert_string_equal(ts.id[0], "b"); /* start_time desc */
    assert_string_equal(ts.id[1], "c");
    assert_string_equal(ts.id[2], "a");
    memset(&ts, 0, sizeof(ts));
    assert_int_equal(store_list_tasks(f->st, NULL, "/a", task_cb, &ts), SKP_OK);
    assert_int_equal(ts.n, 2);
    memset(&ts, 0, sizeof(ts));
    assert_int_equal(store_list_tasks(f->st, "svc", "/a", task_cb, &ts), SKP_OK);
    assert_int_equal(ts.n, 1);
}

static void task_logs(void **state)
{
    struct cf *f = *state;
    assert_int_equal(store_add_task_log(f->st, "t", "svc", "i2", STORE_TASK_NOTIFIED, 100), SKP_OK);
    assert_int_equal(store_add_task_log(f->st, "t", "svc", "i1", STORE_TASK_NOTIFIED, 100), SKP_OK);
    assert_int_equal(store_add_task_log(f->st, "t", "svc", "i1", STORE_TASK_EXECUTION_FINISHED, 50),
                     SKP_OK);
    /* the same log again is one log */
    assert_int_equal(store_add_task_log(f->st, "t", "svc", "i1", STORE_TASK_NOTIFIED, 100), SKP_OK);
    assert_int_equal(store_add_task_log(f->st, "u", "svc", "i1", STORE_TASK_NOTIFIED, 1), SKP_OK);
    assert_int_equal(store_add_task_log(f->st, "t", "svc", "i1", (enum store_task_op)7, 1),
                     SKP_EINVAL);
    struct logs_seen l = {0};
    assert_int_equal(store_list_task_logs(f->st, "t", log_cb, &l), SKP_OK);
    assert_int_equal(l.n, 3);
    assert_int_equal(l.t[0], 50); /* by time, then op, then instance */
    assert_int_equal(l.op[0], STORE_TASK_EXECUTION_FINISHED);
    assert_string_equal(l.inst[1], "i1");
    assert_string_equal(l.inst[2], "i2");
    /* issue 15: a poll that hands the task again later adds no row; the first time is kept */
    for (int64_t t = 200; t < 1200; t += 10)
        assert_int_equal(store_add_task_log(f->st, "t", "svc", "i1", STORE_TASK_NOTIFIED, t),
                         SKP_OK);
    memset(&l, 0, sizeof(l));
    assert_int_equal(store_list_task_logs(f->st, "t", log_cb, &l), SKP_OK);
    assert_int_equal(l.n, 3);
    assert_int_equal(l.t[1], 100);
}

static void task_cancel(void **state)
{
    struct cf *f = *state;
    const int64_t min = 60000;
    struct store_task t = task("c1", "svc", "/e", 1000, 5, 1000);
    assert_int_equal(store_insert_task(f->st, &t), SKP_OK);
    struct store_task *v = NULL;
    size_t n = 0;
    assert_int_equal(store_tasks_for_agent(f->st, "svc", 0, 2000, &v, &n), SKP_OK);
    assert_int_equal(n, 1);
    store_task_cleanup(&v[0]);
    skpx_free(v);
    assert_int_equal(store_cancel_task(f->st, "c1", 2000), SKP_OK);
    assert_int_equal(store_cancel_task(f->st, "c1", 2001), SKP_ESTATE);
    assert_int_equal(store_cancel_task(f->st, "nope", 2001), SKP_ENOTFOUND);
    struct store_task got;
    assert_int_equal(store_get_task(f->st, "c1", &got), SKP_OK);
    assert_int_equal(got.cancelled_ms, 2000);
    store_task_cleanup(&got);
    assert_int_equal(store_tasks_for_agent(f->st, "svc", 0, 2001, &v, &n), SKP_OK);
    assert_int_equal(n, 0);
    skpx_free(v);
    /* a task whose window already ended cannot be cancelled */
    struct store_task old = task("c2", "svc2", "/e", 1000, 1, 1000);
    assert_int_equal(store_insert_task(f->st, &old), SKP_OK);
    assert_int_equal(store_cancel_task(f->st, "c2", 1000 + min), SKP_ESTATE);
}

struct inst_seen {
    size_t n;
    char name[8][32];
    char lang[8][32];
    int64_t hb[8];
    size_t n_props[8];
    char props[8][128];
};

static skp_err inst_cb(void *ud, const struct store_instance_row *r)
{
    struct inst_seen *v = ud;
    assert_true(v->n < 8);
    snprintf(v->name[v->n], 32, "%s", r->name);
    snprintf(v->lang[v->n], 32, "%s", r->language ? r->language : "(null)");
    v->hb[v->n] = r->last_heartbeat_ms;
    v->n_props[v->n] = r->n_props;
    size_t len = 0;
    for (size_t i = 0; i < r->n_props; i++)
        len += (size_t)snprintf(v->props[v->n] + len, 128 - len, "%s=%s;", r->props[i].key,
                                r->props[i].value);
    v->n++;
    return SKP_OK;
}

struct svc_seen {
    size_t n;
    char name[8][32];
    char layer[8][32];
    int64_t n_inst[8];
    int64_t seen[8];
};

static skp_err svc_cb(void *ud, const struct store_service_row *r)
{
    struct svc_seen *v = ud;
    assert_true(v->n < 8);
    snprintf(v->name[v->n], 32, "%s", r->name);
    snprintf(v->layer[v->n], 32, "%s", r->layer ? r->layer : "(null)");
    v->n_inst[v->n] = r->n_instances;
    v->seen[v->n++] = r->last_seen_ms;
    return SKP_OK;
}

static skp_err stop_cb(void *ud, const struct store_service_row *r)
{
    (void)r;
    (*(int *)ud)++;
    return SKP_ESTATE;
}

static void services_and_instances(void **state)
{
    struct cf *f = *state;
    struct store_kv p1[] = {{"language", "python"}, {"os", "linux"}};
    struct store_kv p2[] = {{"language", "python"}, {"zz", "1"}, {"aa", "2"}};
    assert_int_equal(store_upsert_instance(f->st, "svc", "i1", "GENERAL", p1, 2, 100), SKP_OK);
    assert_int_equal(store_upsert_instance(f->st, "svc", "i1", NULL, p2, 3, 200), SKP_OK);
    assert_int_equal(store_touch_instance(f->st, "svc", "i0", 300), SKP_OK);
    assert_int_equal(store_touch_instance(f->st, "svc", "i1", 150), SKP_OK); /* never backwards */
    assert_int_equal(store_touch_instance(f->st, "asvc", "j", 50), SKP_OK);

    struct inst_seen is = {0};
    assert_int_equal(store_list_instances(f->st, "svc", inst_cb, &is), SKP_OK);
    assert_int_equal(is.n, 2);
    assert_string_equal(is.name[0], "i0");
    assert_string_equal(is.lang[0], "(null)");
    assert_string_equal(is.name[1], "i1");
    assert_string_equal(is.lang[1], "python");
    assert_int_equal(is.hb[1], 200);
    /* replaced, not merged, in the order reported */
    assert_string_equal(is.props[1], "language=python;zz=1;aa=2;");

    struct svc_seen ss = {0};
    assert_int_equal(store_list_services(f->st, svc_cb, &ss), SKP_OK);
    assert_int_equal(ss.n, 2);
    assert_string_equal(ss.name[0], "asvc");
    assert_string_equal(ss.layer[0], "(null)");
    assert_string_equal(ss.name[1], "svc");
    assert_string_equal(ss.layer[1], "GENERAL");
    assert_int_equal(ss.n_inst[1], 2);
    assert_int_equal(ss.seen[1], 300);

    memset(&is, 0, sizeof(is));
    assert_int_equal(store_list_instances(f->st, "nope", inst_cb, &is), SKP_ENOTFOUND);
    assert_int_equal(is.n, 0);
    int calls = 0;
    assert_int_equal(store_list_services(f->st, stop_cb, &calls), SKP_ESTATE);
    assert_int_equal(calls, 1);
}

/* ---- snapshots and analysis inputs ---- */

/* A row's weight (issue 25: a goProfileReport sample's count) goes in and comes back through
 * both scans; 0 is stored as 1; a resent row keeps the stored weight. */
static void snapshot_weights(void **state)
{
    struct cf *f = *state;
    char *fr[] = {"main", "work"};
    struct store_snapshot v[] = {
        {.task_id = "t",
         .segment_id = "sw",
         .time_ms = 1000,
         .sequence = 0,
         .frames = fr,
         .n_frames = 2},
        {.task_id = "t",
         .segment_id = "sw",
         .time_ms = 1010,
         .sequence = 1,
         .frames = fr,
         .n_frames = 2,
         .weight = 1},
        {.task_id = "t",
         .segment_id = "sw",
         .time_ms = 1020,
         .sequence = 2,
         .frames = fr,
         .n_frames = 2,
         .weight = 7},
        {.task_id = "t",
         .segment_id = "sw",
         .time_ms = 1090,
         .sequence = 3,
         .frames = fr,
         .n_frames = 2,
         .weight = 100},
    };
    size_t dup = 9;
    assert_int_equal(store_insert_snapshots(f->st, v, 4, &dup), SKP_OK);
    assert_int_equal(dup, 0);
    struct store_snapshot again = v[2];
    again.weight = 9;
    assert_int_equal(store_insert_snapshots(f->st, &again, 1, &dup), SKP_OK);
    assert_int_equal(dup, 1);
    const uint32_t want[] = {1, 1, 7, 100};
    struct samples sm = {0};
    assert_int_equal(store_scan_segment(f->st, "sw", 0, 100, sample_cb, &sm), SKP_OK);
    assert_int_equal(sm.n, 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(sm.w[i], want[i]);
    memset(&sm, 0, sizeof(sm));
    assert_int_equal(store_scan_task(f->st, "t", sample_cb, &sm), SKP_OK);
    assert_int_equal(sm.n, 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(sm.w[i], want[i]);
}

static void snapshots_dedup_and_order(void **state)
{
    struct cf *f = *state;
    char *fa[] = {"main", "a"};
    char *fb[] = {"main", "b"};
    struct store_snapshot v[] = {
        {"t", "s2", 1020, 2, fa, 2, 0, 0}, {"t", "s2", 1000, 0, fa, 2, 0, 0},
        {"t", "s1", 1010, 1, fb, 2, 0, 0}, {"t", "s1", 1000, 0, fa, 2, 0, 0},
        {"t", "s2", 1010, 1, fb, 2, 0, 0}, {"u", "s1", 1000, 0, fb, 2, 0, 0},
    };
    size_t dup = 9;
    assert_int_equal(store_insert_snapshots(f->st, v, 6, &dup), SKP_OK);
    assert_int_equal(dup, 0);
    /* a resent batch stores nothing new and says so */
    assert_int_equal(store_insert_snapshots(f->st, v, 3, &dup), SKP_OK);
    assert_int_equal(dup, 3);
    struct store_stats s = stats(f->st);
    assert_int_equal(s.snapshots, 6);
    assert_int_equal(s.stacks, 2); /* two distinct stacks */
    assert_int_equal(s.frames, 3); /* main, a, b */

    struct samples sm = {0};
    assert_int_equal(store_scan_segment(f->st, "s2", 0, 100, sample_cb, &sm), SKP_OK);
    assert_int_equal(sm.n, 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(sm.seq[i], i);
    assert_int_equal(sm.t[0], 1000);
    char txt[256];
    stack_text(f->st, sm.stack[0], txt, sizeof(txt));
    assert_string_equal(txt, "main,a");
    assert_int_equal(sm.stack[0], sm.stack[2]); /* same frames, same stack */
    assert_int_not_equal(sm.stack[0], sm.stack[1]);

    memset(&sm, 0, sizeof(sm));
    assert_int_equal(store_scan_segment(f->st, "s2", 1, 1, sample_cb, &sm), SKP_OK);
    assert_int_equal(sm.n, 1);
    int32_t lo, hi;
    assert_int_equal(store_segment_seq_window(f->st, "s2", 1005, 1030, &lo, &hi), SKP_OK);
    assert_int_equal(lo, 1);
    assert_int_equal(hi, 2);
    assert_int_equal(store_segment_seq_window(f->st, "s2", 2000, 3000, &lo, &hi), SKP_ENOTFOUND);

    /* a task's scan: by segment, then sequence; only that task's snapshots */
    memset(&sm, 0, sizeof(sm));
    assert_int_equal(store_scan_task(f->st, "t", sample_cb, &sm), SKP_OK);
    assert_int_equal(sm.n, 5);
    for (size_t i = 1; i < sm.n; i++) {
        if (sm.seg[i] == sm.seg[i - 1])
            assert_true(sm.seq[i] > sm.seq[i - 1]);
        else
            assert_int_not_equal(sm.seg[i], sm.seg[0]); /* segments are not interleaved */
    }
    memset(&sm, 0, sizeof(sm));
    assert_int_equal(store_scan_task(f->st, "nope", sample_cb, &sm), SKP_OK);
    assert_int_equal(sm.n, 0);

    /* the analyzer reads only through these: s1+s2 of t → one tree main → {a, b} */
    struct analysis *a = NULL;
    assert_int_equal(analyze_task(f->st, "t", NULL, &a), SKP_OK);
    assert_int_equal(a->n_snapshots, 5);
    assert_int_equal(a->n_trees, 1);
    assert_string_equal(a->trees[0].nodes[0].code_signature, "main");
    assert_int_equal(a->trees[0].n_nodes, 3);
    analysis_free(a);
}

/* ---- segments ---- */

struct seg_seen {
    size_t n;
    char id[8][32];
    bool has_object[8];
    char trace[8][32];
    char service[8][32];
    char endpoint[8][32];
    int64_t start[8], end[8];
    size_t n_spans[8];
};

static skp_err seg_cb(void *ud, const struct store_profiled_segment *s)
{
    struct seg_seen *v = ud;
    assert_true(v->n < 8);
    size_t i = v->n++;
    snprintf(v->id[i], 32, "%s", s->segment_id);
    v->has_object[i] = s->has_object;
    snprintf(v->trace[i], 32, "%s", s->trace_id);
    snprintf(v->service[i], 32, "%s", s->service);
    snprintf(v->endpoint[i], 32, "%s", s->endpoint);
    v->start[i] = s->start_ms;
    v->end[i] = s->end_ms;
    v->n_spans[i] = s->n_spans;
    if (strcmp(s->segment_id, "full") == 0) {
        /* every field of every span comes back as written */
        assert_int_equal(s->n_spans, 2);
        const struct store_span *x = &s->spans[0], *e = &s->spans[1];
        assert_int_equal(x->type, STORE_SPAN_EXIT);
        assert_int_equal(x->layer, STORE_LAYER_DATABASE);
        assert_true(x->is_error);
        assert_string_equal(x->peer, "db:5432");
        assert_int_equal(x->n_logs, 1);
        assert_int_equal(x->logs[0].time_ms, 2011);
        assert_int_equal(x->logs[0].n_data, 2);
        assert_string_equal(x->logs[0].data[1].key, "message");
        assert_string_equal(x->logs[0].data[1].value, "boom");
        assert_int_equal(e->span_id, 0);
        assert_int_equal(e->parent_span_id, -1);
        assert_int_equal(e->start_ms, 2000);
        assert_int_equal(e->end_ms, 2100);
        assert_string_equal(e->operation, "/orders");
        assert_int_equal(e->type, STORE_SPAN_ENTRY);
        assert_int_equal(e->layer, STORE_LAYER_HTTP);
        assert_int_equal(e->component_id, 49);
        assert_false(e->is_error);
        assert_int_equal(e->n_refs, 1);
        assert_string_equal(e->refs[0].trace_id, "trace-0");
        assert_string_equal(e->refs[0].parent_segment_id, "parent");
        assert_int_equal(e->refs[0].parent_span_id, 3);
        assert_true(e->refs[0].cross_thread);
        assert_int_equal(e->n_tags, 1);
        assert_string_equal(e->tags[0].key, "http.method");
        assert_string_equal(e->tags[0].value, "GET");
    }
    return SKP_OK;
}

static void segments(void **state)
{
    struct cf *f = *state;
    struct store_task t = task("t", "svc", "/orders", 0, 15, 1);
    assert_int_equal(store_insert_task(f->st, &t), SKP_OK);
    struct store_kv tags[] = {{"http.method", "GET"}};
    struct store_kv data[] = {{"event", "error"}, {"message", "boom"}};
    struct store_span_log logs[] = {{2011, data, 2}};
    struct store_span_ref refs[] = {{"trace-0", "parent", 3, true}};
    struct store_span spans[] = {
        {.span_id = 1,
         .parent_span_id = 0,
         .start_ms = 2010,
         .end_ms = 2150,
         .operation = "SELECT",
         .peer = "db:5432",
         .type = STORE_SPAN_EXIT,
         .layer = STORE_LAYER_DATABASE,
         .is_error = true,
         .logs = logs,
         .n_logs = 1},
        {.span_id = 0,
         .parent_span_id = -1,
         .start_ms = 2000,
         .end_ms = 2100,
         .operation = "/orders",
         .type = STORE_SPAN_ENTRY,
         .layer = STORE_LAYER_HTTP,
         .component_id = 49,
         .refs = refs,
         .n_refs = 1,
         .tags = tags,
         .n_tags = 1},
    };
    struct store_segment full = {"full", "trace-1", "svc", "inst-1", spans, 2};
    assert_string_equal(store_segment_endpoint(&full), "/orders");
    struct store_segment local = {"early", "trace-2", "svc", "inst-1", spans, 1};
    assert_string_equal(store_segment_endpoint(&local), "SELECT"); /* no entry: first span */
    struct store_segment none[] = {{"", "x", "svc", "i", NULL, 0},
                                   {NULL, "x", "svc", "i", NULL, 0}};

    /* arrival order 1: snapshots first, then the segment */
    assert_int_equal(tu_add(f->st, "t", "full", 0, 2005, "m,a"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "full", 1, 2015, "m,a"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "bare", 0, 1500, "m"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "bare", 3, 1530, "m"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "late", 1, 1600, "m"), SKP_OK); /* no sequence 0 */
    assert_int_equal(store_insert_segments(f->st, &full, 1, 3000), SKP_OK);
    /* arrival order 2: the segment first */
    assert_int_equal(store_insert_segments(f->st, &local, 1, 3000), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "early", 0, 2020, "m"), SKP_OK);
    /* a resent segment changes nothing; one without id is skipped */
    struct store_segment again = full;
    again.trace_id = "changed";
    assert_int_equal(store_insert_segments(f->st, &again, 1, 3001), SKP_OK);
    assert_int_equal(store_insert_segments(f->st, none, 2, 3001), SKP_OK);
    assert_int_equal(store_insert_segments(f->st, NULL, 1, 3001), SKP_EINVAL);

    struct seg_seen v = {0};
    assert_int_equal(store_list_profiled_segments(f->st, "t", seg_cb, &v), SKP_OK);
    assert_int_equal(v.n, 3);
    assert_string_equal(v.id[0], "bare"); /* by start */
    assert_false(v.has_object[0]);
    assert_string_equal(v.service[0], "svc"); /* the task's */
    assert_string_equal(v.trace[0], "");
    assert_int_equal(v.start[0], 1500);
    assert_int_equal(v.end[0], 1530);
    assert_int_equal(v.n_spans[0], 0);
    assert_string_equal(v.id[1], "full");
    assert_true(v.has_object[1]);
    assert_string_equal(v.trace[1], "trace-1");
    assert_string_equal(v.endpoint[1], "/orders");
    assert_int_equal(v.start[1], 2000);
    assert_int_equal(v.end[1], 2150);
    assert_string_equal(v.id[2], "early");
    assert_string_equal(v.trace[2], "trace-2");
    assert_int_equal(v.start[2], 2010);

    memset(&v, 0, sizeof(v));
    assert_int_equal(store_list_profiled_segments(f->st, "nothing", seg_cb, &v), SKP_OK);
    assert_int_equal(v.n, 0);

    struct store_segment_info info;
    assert_int_equal(store_get_segment_info(f->st, "full", &info), SKP_OK);
    assert_string_equal(info.trace_id, "trace-1");
    assert_string_equal(info.endpoint, "/orders");
    assert_int_equal(info.dump_period, 10);
    store_segment_info_cleanup(&info);
    assert_int_equal(store_get_segment_info(f->st, "bare", &info), SKP_OK);
    assert_null(info.trace_id);
    assert_string_equal(info.endpoint, "/orders"); /* the task's */
    store_segment_info_cleanup(&info);
    assert_int_equal(store_get_segment_info(f->st, "nope", &info), SKP_ENOTFOUND);

    bool has = true;
    assert_int_equal(store_segment_has_snapshots(f->st, "full", &has), SKP_OK);
    assert_true(has);
    assert_int_equal(store_segment_has_snapshots(f->st, "unknown", &has), SKP_OK);
    assert_false(has);
    struct store_segment lone = {"lone", "t", "svc", "i", spans, 1};
    assert_int_equal(store_insert_segments(f->st, &lone, 1, 3000), SKP_OK);
    assert_int_equal(store_segment_has_snapshots(f->st, "lone", &has), SKP_OK);
    assert_false(has); /* a stored segment without snapshots */
}

/* ---- keyset pages of the profiled-segment listing (SQLite schema v8, PostgreSQL step 3) ---- */

static struct store_segment one_span_segment(const char *id, struct store_span *sp, int64_t start)
{
    *sp = (struct store_span){.span_id = 0,
                              .parent_span_id = -1,
                              .start_ms = start,
                              .end_ms = start + 200,
                              .operation = "/e",
                              .type = STORE_SPAN_ENTRY};
    return (struct store_segment){id, "tr", "svc", "i", sp, 1};
}

/* Pages in (start, segment id) order whatever the arrival order; a SegmentObject arriving
 * after the dumps moves its segment to its own start; retention takes rows away. */
static void segment_pages(void **state)
{
    struct cf *f = *state;
    struct store_task t = task("t", "svc", "/e", 1000, 10, 1000);
    struct store_task o = task("other", "svc2", "/e", 1000, 10, 1001);
    assert_int_equal(store_insert_task(f->st, &t), SKP_OK);
    assert_int_equal(store_insert_task(f->st, &o), SKP_OK);
    struct store_span sp;
    struct store_segment obj = one_span_segment("s-obj", &sp, 1100);
    assert_int_equal(tu_add(f->st, "t", "s-obj", 0, 1200, "m"), SKP_OK);
    assert_int_equal(store_insert_segments(f->st, &obj, 1, 5000), SKP_OK); /* moves to 1100 */
    assert_int_equal(tu_add(f->st, "t", "s-b", 0, 1100, "m"), SKP_OK);     /* ties s-obj's start */
    assert_int_equal(tu_add(f->st, "t", "s-a", 0, 1050, "m"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s-a", 4, 1090, "m"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s-late", 1, 1000, "m"), SKP_OK); /* no sequence 0 */
    assert_int_equal(tu_add(f->st, "other", "s-x", 0, 900, "m"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s-c", 0, 1400, "m"), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s-c", 0, 1400, "m"), SKP_OK); /* resent: ignored */
    struct store_segment early = one_span_segment("s-early", &sp, 1000);
    assert_int_equal(store_insert_segments(f->st, &early, 1, 5000), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s-early", 0, 1500, "m"), SKP_OK); /* object's start */
    assert_int_equal(tu_add(f->st, "t", "s-d", 0, 1600, "m"), SKP_OK);
    /* received before the dumps' segment was first seen (another collector's clock): retention
     * below takes this object and keeps the dumps */
    struct store_segment d = one_span_segment("s-d", &sp, 1001);
    assert_int_equal(store_insert_segments(f->st, &d, 1, 1000), SKP_OK); /* moves s-d to 1001 */

    static const char *const want[] = {"s-early", "s-d", "s-a", "s-b", "s-obj", "s-c"};
    static const int64_t want_start[] = {1000, 1001, 1050, 1100, 1100, 1400};
    struct page_seen all;
    assert_int_equal(store_list_profiled_segments_page(f->st, "t", NULL, 0, page_cb,
                                                       memset(&all, 0, sizeof(all)), NULL),
                     SKP_OK);
    assert_int_equal(all.n, 6);
    for (size_t limit = 1; limit <= 7; limit++) {
        int pages = walk_pages(f->st, "t", limit, &all);
        assert_int_equal(pages, (int)((6 + limit - 1) / limit));
        assert_int_equal(all.n, 6);
        for (size_t i = 0; i < 6; i++) {
            assert_string_equal(all.id[i], want[i]);
            assert_int_equal(all.start[i], want_start[i]);
        }
    }
    assert_true(all.has_object[0] && all.has_object[1] && !all.has_object[2]);
    assert_int_equal(all.end[2], 1090); /* s-a: its last dump */
    /* A cursor between rows, and one past the end. */
    struct store_segment_key key = {1100, "s-b"};
    struct page_seen pg = {0};
    bool more = true;
    assert_int_equal(store_list_profiled_segments_page(f->st, "t", &key, 10, page_cb, &pg, &more),
                     SKP_OK);
    assert_int_equal(pg.n, 2);
    assert_string_equal(pg.id[0], "s-obj");
    assert_false(more);
    key = (struct store_segment_key){5000, "z"};
    memset(&pg, 0, sizeof(pg));
    assert_int_equal(store_list_profiled_segments_page(f->st, "t", &key, 10, page_cb, &pg, &more),
                     SKP_OK);
    assert_int_equal(pg.n, 0);
    key.segment_id = NULL;
    assert_int_equal(store_list_profiled_segments_page(f->st, "t", &key, 10, page_cb, &pg, &more),
                     SKP_EINVAL);
    assert_int_equal(walk_pages(f->st, "other", 3, &pg), 1);
    assert_int_equal(pg.n, 1);
    assert_int_equal(walk_pages(f->st, "nothing", 3, &pg), 1);
    assert_int_equal(pg.n, 0);

    /* Retention at 1060: s-a's dumps go (first seen at 1050), and s-d's SegmentObject
     * (received at 1000), not its dumps (first seen at 1600): s-d falls back to its first
     * dump's time. */
    uint64_t n_del = 0;
    assert_int_equal(store_purge_before(f->st, 1060, &n_del), SKP_OK);
    static const char *const kept[] = {"s-early", "s-b", "s-obj", "s-c", "s-d"};
    static const int64_t kept_start[] = {1000, 1100, 1100, 1400, 1600};
    assert_int_equal(walk_pages(f->st, "t", 2, &all), 3);
    assert_int_equal(all.n, 5);
    for (size_t i = 0; i < 5; i++) {
        assert_string_equal(all.id[i], kept[i]);
        assert_int_equal(all.start[i], kept_start[i]);
    }
    assert_false(all.has_object[4]);
    /* Everything purged: nothing listed. */
    assert_int_equal(store_purge_before(f->st, INT64_MAX, &n_del), SKP_OK);
    assert_int_equal(walk_pages(f->st, "t", 2, &all), 1);
    assert_int_equal(all.n, 0);
    assert_int_equal(walk_pages(f->st, "other", 2, &all), 1);
    assert_int_equal(all.n, 0);
}

/* ---- the listing while collectors write dumps and SegmentObjects at once (shared) ---- */

#define RACE_SEGS 240
#define RACE_BATCH 8

struct race_writer {
    const char *target;
    pthread_barrier_t *round; /* both writers start each batch together */
    skp_err err;
};

/* Sends the sequence-0 dumps of every segment, a batch per round, from its own store. */
static void *race_dumps_main(void *arg)
{
    struct race_writer *w = arg;
    struct store *st = NULL;
    w->err = store_open(w->target, NULL, &st);
    char ids[RACE_BATCH][32];
    char *frames[] = {"main"};
    for (int lo = 0; lo < RACE_SEGS; lo += RACE_BATCH) {
        struct store_snapshot s[RACE_BATCH];
        for (int k = 0; k < RACE_BATCH; k++) {
            snprintf(ids[k], sizeof(ids[k]), "race-%04d", lo + k);
            s[k] = (struct store_snapshot){.task_id = "t",
                                           .segment_id = ids[k],
                                           .time_ms = 100000 + lo + k,
                                           .sequence = 0,
                                           .frames = frames,
                                           .n_frames = 1};
        }
        pthread_barrier_wait(w->round);
        size_t dup = 0;
        if (!w->err)
            w->err = store_insert_snapshots(st, s, RACE_BATCH, &dup);
    }
    store_close(st);
    return NULL;
}

static void listing_under_racing_writers(void **state)
{
    struct cf *f = *state;
    if (!g_be->shared)
        skip();
    struct store_task t = task("t", "svc", "/e", 1000, 10, 1000);
    assert_int_equal(store_insert_task(f->st, &t), SKP_OK);
    /* the segments are known already (a later dump came first): their ids are not created
     * by the racing batches, whose creation would make one wait for the other */
    for (int i = 0; i < RACE_SEGS; i++) {
        char id[32];
        snprintf(id, sizeof(id), "race-%04d", i);
        assert_int_equal(tu_add(f->st, "t", id, 5, 100500 + i, "main"), SKP_OK);
    }
    pthread_barrier_t round;
    assert_int_equal(pthread_barrier_init(&round, NULL, 2), 0);
    struct race_writer w = {f->target, &round, SKP_OK};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, race_dumps_main, &w), 0);
    /* meanwhile this collector stores the same segments' SegmentObjects, each batch in the
     * other order (locks taken in the order of the rows would wait in a cycle) */
    struct store_span sp[RACE_BATCH];
    char ids[RACE_BATCH][32];
    for (int lo = 0; lo < RACE_SEGS; lo += RACE_BATCH) {
        struct store_segment g[RACE_BATCH];
        for (int k = 0; k < RACE_BATCH; k++) {
            int i = lo + RACE_BATCH - 1 - k;
            snprintf(ids[k], sizeof(ids[k]), "race-%04d", i);
            g[k] = one_span_segment(ids[k], &sp[k], 50000 + i);
        }
        pthread_barrier_wait(&round);
        assert_int_equal(store_insert_segments(f->st, g, RACE_BATCH, 200000), SKP_OK);
    }
    assert_int_equal(pthread_join(th, NULL), 0);
    pthread_barrier_destroy(&round);
    assert_int_equal(w.err, SKP_OK);
    /* every segment listed once, at its SegmentObject's start, whichever came first */
    struct store_segment_key key = {0};
    char last[32] = "";
    int seen = 0;
    for (bool more = true; more;) {
        struct page_seen pg = {0};
        assert_int_equal(store_list_profiled_segments_page(f->st, "t", seen ? &key : NULL, MAXR,
                                                           page_cb, &pg, &more),
                         SKP_OK);
        for (size_t i = 0; i < pg.n; i++, seen++) {
            char want[32];
            snprintf(want, sizeof(want), "race-%04d", seen);
            assert_string_equal(pg.id[i], want);
            assert_true(pg.has_object[i]);
            assert_int_equal(pg.start[i], 50000 + seen);
        }
        if (pg.n) {
            snprintf(last, sizeof(last), "%s", pg.id[pg.n - 1]);
            key = (struct store_segment_key){pg.start[pg.n - 1], last};
        }
    }
    assert_int_equal(seen, RACE_SEGS);
}

/* ---- PostgreSQL: the listing's migration, and a page is a range scan of its index ---- */

/* The text of EXPLAIN (ANALYZE) of a page query, one line per plan node or detail. */
static char *pg_explain(struct store *st, const char *sql, const char *const *params, int n)
{
    char q[4096];
    snprintf(q, sizeof(q), "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) %s", sql);
    PGresult *r = PQexecParams(pg_store_of(st)->conn, q, n, NULL, params, NULL, NULL, 0);
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    size_t cap = 1, len = 0;
    for (int i = 0; i < PQntuples(r); i++)
        cap += strlen(PQgetvalue(r, i, 0)) + 1;
    char *out = skpx_malloc(cap);
    out[0] = '\0';
    for (int i = 0; i < PQntuples(r); i++)
        len += (size_t)snprintf(out + len, cap - len, "%s\n", PQgetvalue(r, i, 0));
    PQclear(r);
    if (getenv("SKP_TEST_PLAN"))
        fprintf(stderr, "%s", out);
    return out;
}

/* Checks a page's plan: a range scan of segment_listing_by_start reading about a page of rows
 * (not the task's thousands), no sort of the rows, no scan of the table. */
static void assert_page_plan(const char *plan, int max_rows)
{
    const char *scan = strstr(plan, "using segment_listing_by_start on segment_listing");
    if (!scan)
        fprintf(stderr, "%s", plan);
    assert_non_null(scan);
    const char *rows = strstr(scan, "actual rows=");
    assert_non_null(rows);
    int n = atoi(rows + 12);
    if (n > max_rows)
        fprintf(stderr, "%s", plan);
    assert_true(n >= 1 && n <= max_rows);
    assert_null(strstr(plan, "Seq Scan on segment_listing"));
    for (const char *line = plan; *line;) {
        const char *node = line;
        while (*node == ' ')
            node++;
        if (strncmp(node, "SubPlan", 7) == 0)
            break; /* a segment without SegmentObject: its last dump, among its own dumps */
        if (strncmp(node, "->  ", 4) == 0)
            node += 4;
        bool sort = strncmp(node, "Sort (", 6) == 0 || strncmp(node, "Incremental Sort (", 18) == 0;
        if (sort)
            fprintf(stderr, "%s", plan);
        assert_false(sort);
        const char *nl = strchr(line, '\n');
        line = nl ? nl + 1 : line + strlen(line);
    }
}

static void pg_listing_migration_and_plan(void **state)
{
    struct cf *f = *state;
    if (strcmp(g_be->name, "pg") != 0)
        skip();
    /* Data written by schema step 2 (no segment_listing yet): step 3 lists it. */
    store_close(f->st);
    PGconn *c = pg_admin(f->target);
    pg_admin_exec(c, "DROP SCHEMA public CASCADE; CREATE SCHEMA public");
    PQfinish(c);
    struct store_opts v2 = {.schema_version_max = 2};
    assert_int_equal(store_open(f->target, &v2, &f->st), SKP_OK);
    struct store_task t = task("t", "svc", "/e", 1000, 10, 1000);
    assert_int_equal(store_insert_task(f->st, &t), SKP_OK);
    struct store_span sp;
    struct store_segment obj = one_span_segment("s-obj", &sp, 1100);
    /* the dumps as a build of schema step 2 stored them: a row each in `snapshots` (this
     * build stores runs, schema step 6, which converts these rows on the reopen below) */
    c = pg_admin(f->target);
    pg_admin_exec(c, "INSERT INTO frames(sig) VALUES('m');"
                     "INSERT INTO stacks(frames) VALUES('\\x01'::bytea);"
                     "INSERT INTO task_keys(task_id) VALUES('t');"
                     "INSERT INTO segids(segment_id, first_ms) VALUES('s-obj', 1200),"
                     "  ('s-b', 1150), ('s-a', 1050);"
                     "INSERT INTO task_segments(task, seg) VALUES(1, 1), (1, 2), (1, 3);"
                     "CREATE TABLE snapshots_d0 PARTITION OF snapshots"
                     "  FOR VALUES FROM (0) TO (86400000);"
                     "INSERT INTO snapshots(seg, seq, task, time, stack, first_ms)"
                     "  VALUES(1, 0, 1, 1200, 1, 1200), (2, 0, 1, 1150, 1, 1150),"
                     "  (3, 1, 1, 1050, 1, 1050), (2, 1, 1, 1160, 1, 1150);");
    PQfinish(c);
    assert_int_equal(store_insert_segments(f->st, &obj, 1, 5000), SKP_OK);
    cf_reopen(f);
    /* the converted rows read back as they were stored */
    struct samples sm = {0};
    assert_int_equal(store_scan_segment(f->st, "s-b", 0, 9, sample_cb, &sm), SKP_OK);
    assert_int_equal(sm.n, 2);
    assert_int_equal(sm.seq[0], 0);
    assert_int_equal(sm.t[0], 1150);
    assert_int_equal(sm.seq[1], 1);
    assert_int_equal(sm.t[1], 1160);
    char st_text[64];
    stack_text(f->st, sm.stack[1], st_text, sizeof(st_text));
    assert_string_equal(st_text, "m");
    /* a resent dump of them is a duplicate */
    char *fm[] = {"m"};
    struct store_snapshot again = {"t", "s-b", 1160, 1, fm, 1, 0, 0};
    size_t dup = 0;
    assert_int_equal(store_insert_snapshots(f->st, &again, 1, &dup), SKP_OK);
    assert_int_equal(dup, 1);
    struct page_seen all;
    assert_int_equal(walk_pages(f->st, "t", 1, &all), 2);
    assert_int_equal(all.n, 2);
    assert_string_equal(all.id[0], "s-obj");
    assert_int_equal(all.start[0], 1100);
    assert_string_equal(all.id[1], "s-b");
    assert_int_equal(all.start[1], 1150);

    /* 3,000 segments of one task (and 500 of another), the first 2,000 sharing one start (the
     * planner then thinks a cursor among them leaves no rows): page 1 and pages deep inside
     * read about a page of the index each. */
    struct store_task t2 = task("big", "svc", "/e", 1000, 10, 2000);
    assert_int_equal(store_insert_task(f->st, &t2), SKP_OK);
    enum { BIG = 3000, BATCH = 500 };
    char(*ids)[32] = skpx_calloc(BATCH, sizeof(*ids));
    struct store_snapshot *s = skpx_calloc(BATCH, sizeof(*s));
    char *frames[] = {"main"};
    for (int lo = 0; lo < BIG + 500; lo += BATCH) {
        for (int k = 0; k < BATCH; k++) {
            snprintf(ids[k], sizeof(ids[k]), "big-%05d", lo + k);
            s[k] = (struct store_snapshot){.task_id = lo < BIG ? "big" : "t",
                                           .segment_id = ids[k],
                                           .time_ms = lo + k < 2000 ? 10000 : 10000 + lo + k,
                                           .sequence = 0,
                                           .frames = frames,
                                           .n_frames = 1};
        }
        dup = 0;
        assert_int_equal(store_insert_snapshots(f->st, s, BATCH, &dup), SKP_OK);
    }
    skpx_free(ids);
    skpx_free(s);
    c = pg_admin(f->target);
    pg_admin_exec(c, "ANALYZE");
    PQfinish(c);
    const char *first[] = {"big", "11"};
    char *plan = pg_explain(f->st, pg__page_sql_first, first, 2);
    assert_page_plan(plan, 14);
    skpx_free(plan);
    static const char *const cursors[][2] = {{"10000", "big-01000"}, {"12500", "big-02500"}};
    for (size_t i = 0; i < 2; i++) {
        const char *after[] = {"big", "11", cursors[i][0], cursors[i][1]};
        plan = pg_explain(f->st, pg__page_sql_after, after, 4);
        assert_page_plan(plan, 14);
        skpx_free(plan);
    }
    /* the same pages through the store */
    struct store_segment_key key = {10000, "big-01000"};
    struct page_seen pg = {0};
    bool more = false;
    assert_int_equal(store_list_profiled_segments_page(f->st, "big", &key, 10, page_cb, &pg, &more),
                     SKP_OK);
    assert_int_equal(pg.n, 10);
    assert_true(more);
    assert_string_equal(pg.id[0], "big-01001");
    assert_int_equal(pg.start[0], 10000);
    assert_string_equal(pg.id[9], "big-01010");
    key = (struct store_segment_key){12500, "big-02500"};
    memset(&pg, 0, sizeof(pg));
    assert_int_equal(store_list_profiled_segments_page(f->st, "big", &key, 10, page_cb, &pg, &more),
                     SKP_OK);
    assert_int_equal(pg.n, 10);
    assert_string_equal(pg.id[0], "big-02501");
    assert_int_equal(pg.start[0], 12501);
    /* a cursor whose segment is unknown (or purged since) goes on after its (start, id) */
    key = (struct store_segment_key){10000, "big-01000x"};
    memset(&pg, 0, sizeof(pg));
    assert_int_equal(store_list_profiled_segments_page(f->st, "big", &key, 1, page_cb, &pg, &more),
                     SKP_OK);
    assert_string_equal(pg.id[0], "big-01001");
}

/* ---- PostgreSQL: segment ids longer than the listing index's id head ---- */

struct long_seen {
    size_t n;
    char id[4][3100];
    int64_t start[4];
};

static skp_err long_cb(void *ud, const struct store_profiled_segment *s)
{
    struct long_seen *v = ud;
    assert_true(v->n < 4);
    assert_true(strlen(s->segment_id) < sizeof(v->id[0]));
    snprintf(v->id[v->n], sizeof(v->id[0]), "%s", s->segment_id);
    v->start[v->n++] = s->start_ms;
    return SKP_OK;
}

static void pg_listing_long_ids(void **state)
{
    struct cf *f = *state;
    if (strcmp(g_be->name, "pg") != 0)
        skip();
    struct store_task t = task("t", "svc", "/e", 1000, 10, 1000);
    assert_int_equal(store_insert_task(f->st, &t), SKP_OK);
    /* 3,000-byte ids (a btree entry holds ~2.7 kB): three share their first 2,990 bytes and
     * their start, one more starts earlier; each listed once, page after page */
    static char ids[4][3001];
    for (int i = 0; i < 4; i++) {
        memset(ids[i], 'a', 3000);
        ids[i][3000] = '\0';
        ids[i][2999] = (char)('z' - i); /* arrival order is not id order */
    }
    ids[3][0] = 'b';
    for (int i = 0; i < 4; i++)
        assert_int_equal(tu_add(f->st, "t", ids[i], 0, i == 3 ? 500 : 700, "m"), SKP_OK);
    struct long_seen all = {0};
    char cursor[3100] = "";
    struct store_segment_key key = {0, cursor};
    for (bool more = true, first = true; more; first = false) {
        struct long_seen pg = {0};
        assert_int_equal(store_list_profiled_segments_page(f->st, "t", first ? NULL : &key, 1,
                                                           long_cb, &pg, &more),
                         SKP_OK);
        if (!pg.n)
            break;
        assert_true(all.n < 4);
        memcpy(all.id[all.n], pg.id[0], sizeof(pg.id[0]));
        all.start[all.n++] = pg.start[0];
        snprintf(cursor, sizeof(cursor), "%s", pg.id[0]);
        key.start_ms = pg.start[0];
    }
    assert_int_equal(all.n, 4);
    assert_string_equal(all.id[0], ids[3]); /* the earlier start first */
    assert_int_equal(all.start[0], 500);
    for (int i = 0; i < 3; i++) /* then arrival order among the shared heads */
        assert_string_equal(all.id[1 + i], ids[i]);
}

/* ---- endpoint minutes ---- */

struct minutes_seen {
    size_t n;
    char ep[16][16];
    int64_t minute[16];
    uint64_t count[16], writer[16];
    size_t hist_len[16];
    uint8_t hist0[16];
};

static skp_err minute_cb(void *ud, const struct store_endpoint_minute *m)
{
    struct minutes_seen *v = ud;
    assert_true(v->n < 16);
    size_t i = v->n++;
    snprintf(v->ep[i], 16, "%s", m->endpoint);
    v->minute[i] = m->minute_ms;
    v->count[i] = m->count;
    v->writer[i] = m->writer;
    v->hist_len[i] = m->hist_len;
    v->hist0[i] = m->hist_len ? m->hist[0] : 0;
    return SKP_OK;
}

static skp_err no_minute(void *ud, const struct store_endpoint_minute *m)
{
    (void)ud;
    (void)m;
    return SKP_OK;
}

/* Process-profiling tasks (store_proc.h): a task with its instances, read back and cancelled
 * (SKP_ENOTFOUND, SKP_ESTATE), and a file written in pieces read back whole. */
static void proc_tasks(void **state)
{
    struct cf *f = *state;
    struct proc_task got;
    if (store_proc_get_task(f->st, "p1", &got) == SKP_ENOTSUP)
        skip(); /* the backend has no process profiling yet */
    store_proc_task_cleanup(&got);
    char *instances[] = {"i2", "i1"};
    const struct proc_task t = {
        .id = "p1",
        .kind = PROC_KIND_ASYNC_PROFILER,
        .service = "svc",
        .instances = instances,
        .n_instances = 2,
        .events = "cpu,alloc",
        .duration_s = 60,
        .exec_args = "interval=1ms",
        .create_time = 1000,
    };
    assert_int_equal(store_proc_insert_task(f->st, &t), SKP_OK);
    assert_int_equal(store_proc_get_task(f->st, "p1", &got), SKP_OK);
    assert_int_equal(got.kind, PROC_KIND_ASYNC_PROFILER);
    assert_string_equal(got.events, "cpu,alloc");
    assert_string_equal(got.exec_args, "interval=1ms");
    assert_int_equal(got.n_instances, 2);
    assert_string_equal(got.instances[0], "i1");
    assert_string_equal(got.instances[1], "i2");
    store_proc_task_cleanup(&got);
    assert_int_equal(store_proc_cancel_task(f->st, "nope", 2000, 0), SKP_ENOTFOUND);
    assert_int_equal(store_proc_cancel_task(f->st, "p1", 2000, 0), SKP_OK);
    assert_int_equal(store_proc_cancel_task(f->st, "p1", 2001, 0), SKP_ESTATE);
    assert_int_equal(store_proc_get_task(f->st, "p1", &got), SKP_OK);
    assert_int_equal(got.cancelled_ms, 2000);
    store_proc_task_cleanup(&got);

    /* a file of three pieces, the last one empty */
    const uint8_t a[] = {1, 2, 3}, b[] = {0, 0xff};
    int64_t id = 0;
    assert_int_equal(store_proc_file_begin(f->st, "p1", "i1", 3000, 5, &id), SKP_OK);
    assert_int_equal(store_proc_file_append(f->st, id, 0, a, sizeof(a)), SKP_OK);
    assert_int_equal(store_proc_file_append(f->st, id, 1, b, sizeof(b)), SKP_OK);
    assert_int_equal(store_proc_file_append(f->st, id, 2, b, 0), SKP_OK);
    struct proc_file *files = NULL;
    size_t n = 0;
    assert_int_equal(store_proc_list_files(f->st, "p1", &files, &n), SKP_OK);
    assert_int_equal(n, 0); /* not finished: hidden */
    assert_int_equal(store_proc_file_finish(f->st, "p1", "i1", id, 3000, NULL), SKP_OK);
    assert_int_equal(store_proc_list_files(f->st, "p1", &files, &n), SKP_OK);
    assert_int_equal(n, 1);
    assert_int_equal(files[0].id, id);
    assert_int_equal(files[0].size_bytes, 5);
    store_proc_files_free(files, n);
    uint8_t *data = NULL;
    size_t len = 0;
    char *inst = NULL;
    assert_int_equal(store_proc_get_file(f->st, "p1", id, &data, &len, &inst), SKP_OK);
    const uint8_t want[] = {1, 2, 3, 0, 0xff};
    assert_int_equal(len, sizeof(want));
    assert_memory_equal(data, want, sizeof(want));
    assert_string_equal(inst, "i1");
    skpx_free(data);
    skpx_free(inst);
}

/* Dashboards (store_templates.h): put, put again (replaced and enabled again), disable, listed
 * by id with their state, and kept across a reopen. */
struct templates_seen {
    int n;
    char id[4][16];
    char conf[4][32];
    bool disabled[4];
    int64_t updated[4];
};

static skp_err template_cb(void *ud, const struct store_template_row *r)
{
    struct templates_seen *t = ud;
    if (t->n < 4) {
        snprintf(t->id[t->n], sizeof(t->id[0]), "%s", r->id);
        snprintf(t->conf[t->n], sizeof(t->conf[0]), "%s", r->configuration);
        t->disabled[t->n] = r->disabled;
        t->updated[t->n] = r->updated_ms;
    }
    t->n++;
    return SKP_OK;
}

static void templates(void **state)
{
    struct cf *f = *state;
    struct templates_seen t = {0};
    if (store_list_templates(f->st, template_cb, &t) == SKP_ENOTSUP)
        skip(); /* the backend has no dashboards yet */
    assert_int_equal(t.n, 0);
    assert_int_equal(store_put_template(f->st, "b", "{\"x\":1}", 1000), SKP_OK);
    assert_int_equal(store_put_template(f->st, "a", "{}", 2000), SKP_OK);
    assert_int_equal(store_disable_template(f->st, "b", 3000), SKP_OK);
    assert_int_equal(store_disable_template(f->st, "nope", 3000), SKP_ENOTFOUND);
    assert_int_equal(store_list_templates(f->st, template_cb, &t), SKP_OK);
    assert_int_equal(t.n, 2);
    assert_string_equal(t.id[0], "a");
    assert_false(t.disabled[0]);
    assert_string_equal(t.id[1], "b");
    assert_string_equal(t.conf[1], "{\"x\":1}");
    assert_true(t.disabled[1]);
    assert_int_equal(t.updated[1], 3000);
    /* put again: the new configuration, enabled again */
    assert_int_equal(store_put_template(f->st, "b", "{\"x\":2}", 4000), SKP_OK);
    cf_reopen(f);
    memset(&t, 0, sizeof(t));
    assert_int_equal(store_list_templates(f->st, template_cb, &t), SKP_OK);
    assert_int_equal(t.n, 2);
    assert_string_equal(t.conf[1], "{\"x\":2}");
    assert_false(t.disabled[1]);
    assert_int_equal(t.updated[1], 4000);
}

static void endpoint_minutes(void **state)
{
    struct cf *f = *state;
    if (store_list_endpoint_minutes(f->st, "svc", 0, 1, no_minute, NULL) == SKP_ENOTSUP)
        skip(); /* the backend has no endpoint statistics yet */
    const uint8_t h1[] = {7, 1}, h2[] = {9, 2, 1, 1};
    // clang-format off
    struct store_endpoint_minute v[] = {
        {1, "svc", "i1", "/b", 120000, 3, 1, h1, 2},
        {1, "svc", "i1", "/a", 60000, 5, 0, h2, 4},
        {2, "svc", "i1", "/a", 60000, 2, 0, h1, 2}, /* another writer, same minute */
        {1, "svc", "i1", "/a", 0, 1, 0, NULL, 0},
        {1, "other", "i1", "/a", 60000, 9, 0, h1, 2},
    };
    // clang-format on
    assert_int_equal(store_put_endpoint_minutes(f->st, v, 5), SKP_OK);
    /* writer 1 rolls /a's minute up again: its row is replaced, writer 2's kept */
    struct store_endpoint_minute again = {1, "svc", "i1", "/a", 60000, 6, 1, h2, 4};
    assert_int_equal(store_put_endpoint_minutes(f->st, &again, 1), SKP_OK);
    struct minutes_seen m = {0};
    assert_int_equal(store_list_endpoint_minutes(f->st, "svc", 60000, 180000, minute_cb, &m),
                     SKP_OK);
    assert_int_equal(m.n, 3);
    assert_string_equal(m.ep[0], "/a");
    assert_int_equal(m.writer[0], 1);
    assert_int_equal(m.count[0], 6);
    assert_int_equal(m.hist_len[0], 4);
    assert_int_equal(m.hist0[0], 9);
    assert_int_equal(m.writer[1], 2);
    assert_int_equal(m.count[1], 2);
    assert_string_equal(m.ep[2], "/b");
    assert_int_equal(m.minute[2], 120000);
    uint64_t n = 0;
    assert_int_equal(store_purge_before(f->st, 100000, &n), SKP_OK);
    memset(&m, 0, sizeof(m));
    assert_int_equal(store_list_endpoint_minutes(f->st, "svc", 0, INT64_MAX, minute_cb, &m),
                     SKP_OK);
    assert_int_equal(m.n, 1); /* only /b's minute 120000 is left */
    cf_reopen(f);
    memset(&m, 0, sizeof(m));
    assert_int_equal(store_list_endpoint_minutes(f->st, "svc", 0, INT64_MAX, minute_cb, &m),
                     SKP_OK);
    assert_int_equal(m.n, 1);
}

/* ---- eBPF processes and stacks (store_ebpf.h) ---- */

struct ebpf_seen {
    int n;
    char id[4][16], service[4][16], labels[4][16];
    int32_t pid[4];
    int64_t first[4], ping[4];
};

static skp_err ebpf_process_cb(void *ud, const struct store_ebpf_process *p)
{
    struct ebpf_seen *e = ud;
    assert_true(e->n < 4);
    snprintf(e->id[e->n], sizeof(e->id[0]), "%s", p->id);
    snprintf(e->service[e->n], sizeof(e->service[0]), "%s", p->service);
    snprintf(e->labels[e->n], sizeof(e->labels[0]), "%s", p->labels);
    e->pid[e->n] = p->pid;
    e->first[e->n] = p->first_ms;
    e->ping[e->n] = p->last_ping_ms;
    e->n++;
    return SKP_OK;
}

struct stacks_seen {
    int n;
    char process[4][16], symbols[4][16];
    int kind[4];
    int64_t count[4], duration[4], time[4];
};

static skp_err ebpf_stack_cb(void *ud, const struct store_ebpf_stack *k)
{
    struct stacks_seen *e = ud;
    assert_true(e->n < 4);
    assert_string_equal(k->task_id, "t1");
    snprintf(e->process[e->n], sizeof(e->process[0]), "%s", k->process_id);
    snprintf(e->symbols[e->n], sizeof(e->symbols[0]), "%s", k->symbols);
    e->kind[e->n] = (int)k->kind;
    e->count[e->n] = k->count;
    e->duration[e->n] = k->duration_ns;
    e->time[e->n] = k->time_ms;
    e->n++;
    return SKP_OK;
}

static void ebpf(void **state)
{
    struct cf *f = *state;
    struct ebpf_seen e = {0};
    if (store_ebpf_list_processes(f->st, NULL, ebpf_process_cb, &e) == SKP_ENOTSUP)
        skip(); /* the backend has no eBPF tables yet */
    assert_int_equal(e.n, 0);
    struct store_ebpf_process p = {"p2", "svc",  "i1", "java", "GENERAL", 42,
                                   "a",  "k\tv", "ag", 0,      0};
    assert_int_equal(store_ebpf_upsert_process(f->st, &p, 1000), SKP_OK);
    p.id = "p1";
    p.pid = 7;
    assert_int_equal(store_ebpf_upsert_process(f->st, &p, 2000), SKP_OK);
    p.id = "p3";
    p.service = "other";
    assert_int_equal(store_ebpf_upsert_process(f->st, &p, 2500), SKP_OK);
    /* a second report of p2: its columns replaced, its first report time kept */
    struct store_ebpf_process again = {"p2", "svc", "i1", "java", "GENERAL", 43,
                                       "b",  "",    "ag", 0,      0};
    assert_int_equal(store_ebpf_upsert_process(f->st, &again, 3000), SKP_OK);
    again.id = "";
    assert_int_equal(store_ebpf_upsert_process(f->st, &again, 3000), SKP_EINVAL);
    bool found = false;
    assert_int_equal(store_ebpf_touch_process(f->st, "p1", 4000, &found), SKP_OK);
    assert_true(found);
    assert_int_equal(store_ebpf_touch_process(f->st, "nope", 4000, &found), SKP_OK);
    assert_false(found);
    assert_int_equal(store_ebpf_list_processes(f->st, "svc", ebpf_process_cb, &e), SKP_OK);
    assert_int_equal(e.n, 2); /* by service, instance, name, id */
    assert_string_equal(e.id[0], "p1");
    assert_int_equal(e.pid[0], 7);
    assert_int_equal(e.first[0], 2000);
    assert_int_equal(e.ping[0], 4000);
    assert_string_equal(e.id[1], "p2");
    assert_int_equal(e.pid[1], 43);
    assert_string_equal(e.labels[1], "b");
    assert_int_equal(e.first[1], 1000);
    assert_int_equal(e.ping[1], 3000);
    memset(&e, 0, sizeof(e));
    assert_int_equal(store_ebpf_list_processes(f->st, NULL, ebpf_process_cb, &e), SKP_OK);
    assert_int_equal(e.n, 3);
    assert_string_equal(e.service[0], "other");

    // clang-format off
    const struct store_ebpf_stack v[] = {
        {"t1", "p2", STORE_EBPF_ON_CPU, 100, "f\ng", 3, 0},
        {"t1", "p1", STORE_EBPF_OFF_CPU, 100, "h", 1, 500},
        {"t1", "p2", STORE_EBPF_ON_CPU, 200, "f\ng", 4, 0}, /* the same stack, a later upload */
        {"t1", "p2", STORE_EBPF_ON_CPU, 900, "f\ng", 8, 0}, /* after the scan's window */
        {"t2", "p2", STORE_EBPF_ON_CPU, 100, "x", 1, 0},    /* another task */
    };
    // clang-format on
    assert_int_equal(store_ebpf_insert_stacks(f->st, v, 5, 5000), SKP_OK);
    assert_int_equal(store_ebpf_insert_stacks(f->st, NULL, 0, 5000), SKP_OK);
    assert_int_equal(store_ebpf_insert_stacks(f->st, NULL, 1, 5000), SKP_EINVAL);
    cf_reopen(f);
    struct stacks_seen k = {0};
    assert_int_equal(store_ebpf_scan_task(f->st, "t1", NULL, 0, 500, ebpf_stack_cb, &k), SKP_OK);
    assert_int_equal(k.n, 2); /* summed per (process, kind, symbols), by process */
    assert_string_equal(k.process[0], "p1");
    assert_int_equal(k.kind[0], STORE_EBPF_OFF_CPU);
    assert_int_equal(k.count[0], 1);
    assert_int_equal(k.duration[0], 500);
    assert_string_equal(k.process[1], "p2");
    assert_string_equal(k.symbols[1], "f\ng");
    assert_int_equal(k.count[1], 7);
    assert_int_equal(k.time[1], 200);
    memset(&k, 0, sizeof(k));
    assert_int_equal(store_ebpf_scan_task(f->st, "t1", "p2", 0, 1000, ebpf_stack_cb, &k), SKP_OK);
    assert_int_equal(k.n, 1);
    assert_int_equal(k.count[0], 15);
    assert_int_equal(k.time[0], 900);
    assert_int_equal(store_ebpf_scan_task(f->st, NULL, NULL, 0, 1, ebpf_stack_cb, &k), SKP_EINVAL);
}

/* ---- continuous-profiling policies (store_continuous.h) ---- */

struct policies_seen {
    int n;
    char service[4][16], uuid[4][16], json[4][32];
    int64_t updated[4];
};

static skp_err policy_cb(void *ud, const struct store_cont_policy_row *r)
{
    struct policies_seen *e = ud;
    assert_true(e->n < 4);
    snprintf(e->service[e->n], sizeof(e->service[0]), "%s", r->service);
    snprintf(e->uuid[e->n], sizeof(e->uuid[0]), "%s", r->uuid);
    snprintf(e->json[e->n], sizeof(e->json[0]), "%s", r->json);
    e->updated[e->n] = r->updated_ms;
    e->n++;
    return SKP_OK;
}

static void cont_policies(void **state)
{
    struct cf *f = *state;
    struct policies_seen e = {0};
    if (store_cont_list_policies(f->st, NULL, policy_cb, &e) == SKP_ENOTSUP)
        skip(); /* the backend has no continuous-profiling tables yet */
    assert_int_equal(e.n, 0);
    assert_int_equal(store_cont_put_policy(f->st, "svc-b", "u1", "{\"b\":1}", 1000), SKP_OK);
    assert_int_equal(store_cont_put_policy(f->st, "svc-a", "u2", "{}", 2000), SKP_OK);
    /* a service's policy again: replaced, one row per service */
    assert_int_equal(store_cont_put_policy(f->st, "svc-b", "u3", "{\"b\":2}", 3000), SKP_OK);
    cf_reopen(f);
    assert_int_equal(store_cont_list_policies(f->st, NULL, policy_cb, &e), SKP_OK);
    assert_int_equal(e.n, 2); /* by service */
    assert_string_equal(e.service[0], "svc-a");
    assert_string_equal(e.service[1], "svc-b");
    assert_string_equal(e.uuid[1], "u3");
    assert_string_equal(e.json[1], "{\"b\":2}");
    assert_int_equal(e.updated[1], 3000);
    memset(&e, 0, sizeof(e));
    assert_int_equal(store_cont_list_policies(f->st, "svc-a", policy_cb, &e), SKP_OK);
    assert_int_equal(e.n, 1);
    assert_string_equal(e.uuid[0], "u2");
    assert_int_equal(store_cont_delete_policy(f->st, "svc-a"), SKP_OK);
    assert_int_equal(store_cont_delete_policy(f->st, "svc-a"), SKP_ENOTFOUND);
    memset(&e, 0, sizeof(e));
    assert_int_equal(store_cont_list_policies(f->st, NULL, policy_cb, &e), SKP_OK);
    assert_int_equal(e.n, 1);
    assert_string_equal(e.service[0], "svc-b");
}

/* ---- retention and restart ---- */

static void retention(void **state)
{
    struct cf *f = *state;
    const int64_t day = 86400000;
    struct store_task old = task("old", "svc", "/e", 1 * day, 1, 1 * day);
    struct store_task cur = task("cur", "svc", "/e", 10 * day, 1, 10 * day);
    assert_int_equal(store_insert_task(f->st, &old), SKP_OK);
    assert_int_equal(store_insert_task(f->st, &cur), SKP_OK);
    assert_int_equal(store_add_task_log(f->st, "old", "svc", "i", STORE_TASK_NOTIFIED, day),
                     SKP_OK);
    assert_int_equal(tu_add(f->st, "old", "s-old", 0, day, "main,only_old"), SKP_OK);
    assert_int_equal(tu_add(f->st, "cur", "s-cur", 0, 10 * day, "main,kept"), SKP_OK);
    struct store_span sp = {
        .start_ms = day, .end_ms = day + 5, .operation = "/e", .type = STORE_SPAN_ENTRY};
    struct store_segment sg = {"s-old", "tr", "svc", "i", &sp, 1};
    assert_int_equal(store_insert_segments(f->st, &sg, 1, day), SKP_OK);

    uint64_t n = 0;
    assert_int_equal(store_purge_before(f->st, 5 * day, &n), SKP_OK);
    assert_true(n >= 6); /* snapshot, task link, segment, segment id, log, task, stack, frame */
    struct store_stats s = stats(f->st);
    assert_int_equal(s.snapshots, 1);
    assert_int_equal(s.tasks, 1);
    assert_int_equal(s.stacks, 1);
    assert_int_equal(s.frames, 2); /* main, kept */
    struct store_task got;
    assert_int_equal(store_get_task(f->st, "old", &got), SKP_ENOTFOUND);
    struct logs_seen l = {0};
    assert_int_equal(store_list_task_logs(f->st, "old", log_cb, &l), SKP_OK);
    assert_int_equal(l.n, 0);
    struct samples sm = {0};
    assert_int_equal(store_scan_segment(f->st, "s-old", 0, 10, sample_cb, &sm), SKP_OK);
    assert_int_equal(sm.n, 0);
    assert_int_equal(store_scan_segment(f->st, "s-cur", 0, 10, sample_cb, &sm), SKP_OK);
    assert_int_equal(sm.n, 1);
    char txt[128];
    stack_text(f->st, sm.stack[0], txt, sizeof(txt));
    assert_string_equal(txt, "main,kept");
    /* the purged frame comes back as a new one, not as a stale cached id */
    assert_int_equal(tu_add(f->st, "cur", "s-cur", 1, 10 * day + 1, "main,only_old"), SKP_OK);
    memset(&sm, 0, sizeof(sm));
    assert_int_equal(store_scan_segment(f->st, "s-cur", 1, 1, sample_cb, &sm), SKP_OK);
    stack_text(f->st, sm.stack[0], txt, sizeof(txt));
    assert_string_equal(txt, "main,only_old");

    /* issue 15: age counts from when a segment was received, not from the agent's clock */
    struct store_snapshot past = {.task_id = "cur",
                                  .segment_id = "s-1970",
                                  .time_ms = 5,
                                  .sequence = 0,
                                  .frames = (char *const[]){"a"},
                                  .n_frames = 1,
                                  .received_ms = 20 * day};
    struct store_snapshot future = {.task_id = "cur",
                                    .segment_id = "s-2500",
                                    .time_ms = INT64_MAX,
                                    .sequence = 0,
                                    .frames = (char *const[]){"a"},
                                    .n_frames = 1,
                                    .received_ms = 6 * day};
    size_t dup = 0;
    assert_int_equal(store_insert_snapshots(f->st, &past, 1, &dup), SKP_OK);
    assert_int_equal(store_insert_snapshots(f->st, &future, 1, &dup), SKP_OK);
    struct store_span fsp = {.start_ms = INT64_MAX - 5, .end_ms = INT64_MAX, .operation = "/e"};
    struct store_segment fseg = {"s-2500", "tr", "svc", "i", &fsp, 1};
    assert_int_equal(store_insert_segments(f->st, &fseg, 1, 6 * day), SKP_OK);
    assert_int_equal(store_purge_before(f->st, 10 * day, &n), SKP_OK);
    memset(&sm, 0, sizeof(sm));
    assert_int_equal(store_scan_segment(f->st, "s-1970", 0, 10, sample_cb, &sm), SKP_OK);
    assert_int_equal(sm.n, 1); /* agent time 1970, received on day 20: kept */
    memset(&sm, 0, sizeof(sm));
    assert_int_equal(store_scan_segment(f->st, "s-2500", 0, 10, sample_cb, &sm), SKP_OK);
    assert_int_equal(sm.n, 0); /* far-future agent time, received on day 6: purged */
    bool has = true;
    assert_int_equal(store_segment_has_snapshots(f->st, "s-2500", &has), SKP_OK);
    assert_false(has);
}

/* Continuous-profiling triggers (and their causes) age out with everything else. */
static skp_err count_trigger(void *ud, const struct store_cont_trigger *t)
{
    int *n = ud;
    (*n)++;
    assert_int_equal(t->n_causes, 1);
    return SKP_OK;
}

static void retention_of_triggers(void **state)
{
    struct cf *f = *state;
    int probe = 0;
    if (store_cont_list_triggers(f->st, NULL, NULL, 1, count_trigger, &probe) == SKP_ENOTSUP)
        skip(); /* the backend has no continuous-profiling tables yet */
    const int64_t day = 86400000;
    struct store_cont_cause c = {.type = "ENDPOINT_AVG_RESPONSE_TIME",
                                 .uri = "/e",
                                 .threshold = 100,
                                 .current = 300,
                                 .window_s = 10,
                                 .hits = 3};
    struct store_cont_trigger old = {.service = "svc",
                                     .time_ms = 1 * day,
                                     .target = "TRACE",
                                     .source = "server",
                                     .causes = &c,
                                     .n_causes = 1};
    struct store_cont_trigger cur = old;
    cur.time_ms = 10 * day;
    assert_int_equal(store_cont_insert_trigger(f->st, &old, NULL), SKP_OK);
    assert_int_equal(store_cont_insert_trigger(f->st, &cur, NULL), SKP_OK);
    uint64_t n = 0;
    assert_int_equal(store_purge_before(f->st, 5 * day, &n), SKP_OK);
    assert_true(n >= 2); /* the trigger and its cause */
    int seen = 0;
    assert_int_equal(store_cont_list_triggers(f->st, "svc", NULL, 0, count_trigger, &seen), SKP_OK);
    assert_int_equal(seen, 1);
}

static void restart(void **state)
{
    struct cf *f = *state;
    struct store_task t = task("t", "svc", "/e", 1000, 5, 1000);
    assert_int_equal(store_insert_task(f->st, &t), SKP_OK);
    assert_int_equal(tu_add(f->st, "t", "s", 0, 1000, "main,a,b"), SKP_OK);
    struct samples before = {0};
    assert_int_equal(store_scan_task(f->st, "t", sample_cb, &before), SKP_OK);
    cf_reopen(f);
    struct store_task got;
    assert_int_equal(store_get_task(f->st, "t", &got), SKP_OK);
    store_task_cleanup(&got);
    /* the same stack after a restart is the same stored stack (de-dup does not depend on
     * in-memory state) */
    assert_int_equal(tu_add(f->st, "t", "s", 1, 1010, "main,a,b"), SKP_OK);
    struct samples after = {0};
    assert_int_equal(store_scan_task(f->st, "t", sample_cb, &after), SKP_OK);
    assert_int_equal(after.n, 2);
    assert_int_equal(after.stack[1], before.stack[0]);
    assert_int_equal(stats(f->st).stacks, 1);
    assert_int_equal(store_schema_version(), store_schema_version());
}

/* ---- concurrent writers ---- */

enum { WRITERS = 4, BATCHES = 20, PER_BATCH = 25 };

struct writer {
    const char *target;
    int idx;
    skp_err err;
};

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    struct store *st = NULL;
    w->err = store_open(w->target, NULL, &st);
    if (w->err)
        return NULL;
    char seg[32];
    snprintf(seg, sizeof(seg), "seg-%d", w->idx);
    char shared[32], own[32];
    for (int b = 0; b < BATCHES && !w->err; b++) {
        struct store_snapshot v[PER_BATCH];
        char *fr[PER_BATCH][3];
        for (int i = 0; i < PER_BATCH; i++) {
            int seq = b * PER_BATCH + i;
            snprintf(shared, sizeof(shared), "shared_%d", seq % 7);
            snprintf(own, sizeof(own), "own_%d", w->idx);
            /* every writer races to create the same "main,shared_k" stacks */
            fr[i][0] = "main";
            fr[i][1] = skpx_strdup(shared);
            fr[i][2] = skpx_strdup(own);
            v[i] = (struct store_snapshot){"t", seg, 1000 + seq, seq, fr[i], (i % 2) ? 3 : 2, 0, 0};
        }
        size_t dup = 0;
        w->err = store_insert_snapshots(st, v, PER_BATCH, &dup);
        if (!w->err && dup)
            w->err = SKP_EEXIST;
        for (int i = 0; i < PER_BATCH; i++) {
            skpx_free(fr[i][1]);
            skpx_free(fr[i][2]);
        }
    }
    store_close(st);
    return NULL;
}

static void concurrent_writers(void **state)
{
    struct cf *f = *state;
    pthread_t th[WRITERS];
    struct writer w[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        w[i] = (struct writer){f->target, i, SKP_OK};
        assert_int_equal(pthread_create(&th[i], NULL, writer_main, &w[i]), 0);
    }
    for (int i = 0; i < WRITERS; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(w[i].err, SKP_OK);
    }
    cf_reopen(f);
    struct store_stats s = stats(f->st);
    assert_int_equal(s.snapshots, WRITERS * BATCHES * PER_BATCH);
    /* frames: main, shared_0..6, own_0..3; stacks: 7 shared (2 frames) + 7 x 4 with own */
    assert_int_equal(s.frames, 1 + 7 + WRITERS);
    assert_int_equal(s.stacks, 7 + 7 * WRITERS);
    struct samples sm = {0};
    assert_int_equal(store_scan_segment(f->st, "seg-2", 0, 14, sample_cb, &sm), SKP_OK);
    assert_int_equal(sm.n, 15);
    char a[128], b[128];
    stack_text(f->st, sm.stack[0], a, sizeof(a));
    stack_text(f->st, sm.stack[14], b, sizeof(b));
    assert_string_equal(a, "main,shared_0");
    assert_string_equal(a, b);
    stack_text(f->st, sm.stack[1], a, sizeof(a));
    assert_string_equal(a, "main,shared_1,own_2");
}

/* ---- the overlap rule under racing creators ---- */

enum { CREATORS = 4, CREATE_ROUNDS = 5 };

struct creator {
    const char *target;
    int idx;
    int created;
    skp_err err;
};

/* What task_create does under store_tasks_lock: probe the latest task of the service starting
 * before the new window's end, refuse when its window reaches the new start, else insert. */
static skp_err create_once(struct store *st, int idx, int round, bool *created)
{
    const int64_t start = 1000000 + (int64_t)round * 10 * 60000, dur_min = 5;
    skp_err err = store_tasks_lock(st, "race");
    if (err)
        return err;
    struct store_task prev;
    err = store_latest_task_before(st, "race", start + dur_min * 60000, &prev);
    bool clash = false;
    if (err == SKP_OK) {
        clash = prev.start_time + prev.duration_min * 60000 >= start;
        store_task_cleanup(&prev);
    } else if (err == SKP_ENOTFOUND) {
        err = SKP_OK;
    }
    if (!err && !clash) {
        char id[64];
        snprintf(id, sizeof(id), "race-%d-%d", round, idx);
        struct store_task t = task(id, "race", "/e", start, (int)dur_min, start + idx);
        err = store_insert_task(st, &t);
        *created = err == SKP_OK;
    }
    skp_err end = store_tasks_unlock(st, err == SKP_OK);
    return err ? err : end;
}

static void *creator_main(void *arg)
{
    struct creator *c = arg;
    struct store *st = NULL;
    c->err = store_open(c->target, NULL, &st);
    for (int r = 0; r < CREATE_ROUNDS && !c->err; r++) {
        bool created = false;
        c->err = create_once(st, c->idx, r, &created);
        c->created += created;
    }
    store_close(st);
    return NULL;
}

/* Several store objects (several collectors on one database) create a task for the same
 * windows at once: each window gets exactly one. */
static void racing_task_creators(void **state)
{
    struct cf *f = *state;
    pthread_t th[CREATORS];
    struct creator c[CREATORS];
    for (int i = 0; i < CREATORS; i++) {
        c[i] = (struct creator){f->target, i, 0, SKP_OK};
        assert_int_equal(pthread_create(&th[i], NULL, creator_main, &c[i]), 0);
    }
    int total = 0;
    for (int i = 0; i < CREATORS; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(c[i].err, SKP_OK);
        total += c[i].created;
    }
    assert_int_equal(total, CREATE_ROUNDS);
    struct tasks_seen ts = {0};
    assert_int_equal(store_list_tasks(f->st, "race", NULL, task_cb, &ts), SKP_OK);
    assert_int_equal(ts.n, CREATE_ROUNDS);
    for (size_t i = 1; i < ts.n; i++)
        assert_true(ts.start[i - 1] > ts.start[i]); /* one per window */
    /* locked twice by one object is a caller's bug */
    assert_int_equal(store_tasks_lock(f->st, "race"), SKP_OK);
    assert_int_equal(store_tasks_lock(f->st, "race"), SKP_ESTATE);
    assert_int_equal(store_tasks_unlock(f->st, false), SKP_OK);
    assert_int_equal(store_tasks_unlock(f->st, false), SKP_ESTATE);
}

/* ---- a purge by one collector while another one ingests (shared databases) ---- */

static void purge_by_another_writer(void **state)
{
    struct cf *f = *state;
    if (!g_be->shared)
        skip();
    const int64_t day = 86400000;
    struct store *b = cf_open(f->target);
    /* b ingests (its caches now hold the segment, task, frames and stack) */
    assert_int_equal(tu_add(b, "t", "s-old", 0, 1 * day, "main,gone"), SKP_OK);
    assert_int_equal(tu_add(b, "t", "s-old", 1, 1 * day + 1, "main,gone"), SKP_OK);
    /* the other collector purges all of it */
    uint64_t n = 0;
    assert_int_equal(store_purge_before(f->st, 5 * day, &n), SKP_OK);
    assert_true(n >= 4);
    assert_int_equal(stats(f->st).frames, 0);
    /* b sends the same stack for the same segment again: rows made anew, none dangling */
    assert_int_equal(tu_add(b, "t", "s-old", 2, 1 * day + 2, "main,gone"), SKP_OK);
    struct samples sm = {0};
    assert_int_equal(store_scan_segment(f->st, "s-old", 0, 10, sample_cb, &sm), SKP_OK);
    assert_int_equal(sm.n, 1);
    assert_int_equal(sm.seq[0], 2);
    char txt[64];
    stack_text(f->st, sm.stack[0], txt, sizeof(txt));
    assert_string_equal(txt, "main,gone");
    struct samples tk = {0};
    assert_int_equal(store_scan_task(f->st, "t", sample_cb, &tk), SKP_OK);
    assert_int_equal(tk.n, 1);
    store_close(b);
}

/* ---- retention in steps (issue 27): small transactions, the same result ---- */

#define STEP_OLD_SEGS 40
#define STEP_SNAPS 40 /* per segment */

/* The data of retention_in_steps: an old task with STEP_OLD_SEGS segments of STEP_SNAPS
 * snapshots (first seen on day 1, a SegmentObject for every other one), a current task with
 * 3 segments (day 10) whose stack shares the frame "shared" with old stacks. */
static void fill_for_steps(struct store *st)
{
    const int64_t day = 86400000;
    struct store_task old = task("old", "svc", "/e", 1 * day, 1, 1 * day);
    struct store_task cur = task("cur", "svc", "/e", 10 * day, 1, 10 * day);
    assert_int_equal(store_insert_task(st, &old), SKP_OK);
    assert_int_equal(store_insert_task(st, &cur), SKP_OK);
    assert_int_equal(store_add_task_log(st, "old", "svc", "i", STORE_TASK_NOTIFIED, day), SKP_OK);
    static char f_main[] = "main", f_shared[] = "shared", f_kept[] = "kept";
    char olds[8][16];
    for (int k = 0; k < 8; k++)
        snprintf(olds[k], sizeof(olds[k]), "old_%d", k);
    for (int g = 0; g < STEP_OLD_SEGS + 3; g++) {
        bool is_old = g < STEP_OLD_SEGS;
        char seg[32];
        snprintf(seg, sizeof(seg), "%s-%d", is_old ? "s-old" : "s-cur", g);
        int64_t t0 = (is_old ? 1 : 10) * day + g * 1000;
        struct store_snapshot v[STEP_SNAPS];
        char *fr[STEP_SNAPS][3];
        for (int i = 0; i < STEP_SNAPS; i++) {
            fr[i][0] = f_main;
            fr[i][1] = is_old ? (i % 3 ? olds[(g + i) % 8] : f_shared) : f_shared;
            fr[i][2] = f_kept;
            v[i] = (struct store_snapshot){.task_id = is_old ? "old" : "cur",
                                           .segment_id = seg,
                                           .time_ms = t0 + i,
                                           .sequence = i,
                                           .frames = fr[i],
                                           .n_frames = is_old ? 2 : 3};
        }
        assert_int_equal(store_insert_snapshots(st, v, STEP_SNAPS, NULL), SKP_OK);
        if (g % 2 == 0) {
            struct store_span sp = {
                .start_ms = t0, .end_ms = t0 + 5, .operation = "/e", .type = STORE_SPAN_ENTRY};
            struct store_segment sg = {seg, "tr", "svc", "i", &sp, 1};
            assert_int_equal(store_insert_segments(st, &sg, 1, t0), SKP_OK);
        }
    }
}

static void check_after_steps(struct store *st)
{
    struct store_stats s = stats(st);
    assert_int_equal(s.snapshots, 3 * STEP_SNAPS);
    assert_int_equal(s.tasks, 1);
    assert_int_equal(s.stacks, 1);   /* main,shared,kept */
    assert_int_equal(s.frames, 3);   /* main, shared, kept; the old_k gone */
    assert_int_equal(s.segments, 3); /* segment ids: the s-cur ones */
    struct samples sm = {0};
    assert_int_equal(store_scan_segment(st, "s-old-0", 0, 100, sample_cb, &sm), SKP_OK);
    assert_int_equal(sm.n, 0);
    assert_int_equal(store_scan_segment(st, "s-cur-41", 0, 100, sample_cb, &sm), SKP_OK);
    assert_int_equal(sm.n, STEP_SNAPS);
    char txt[64];
    stack_text(st, sm.stack[0], txt, sizeof(txt));
    assert_string_equal(txt, "main,shared,kept");
    struct store_task got;
    assert_int_equal(store_get_task(st, "old", &got), SKP_ENOTFOUND);
    struct logs_seen l = {0};
    assert_int_equal(store_list_task_logs(st, "old", log_cb, &l), SKP_OK);
    assert_int_equal(l.n, 0);
    struct page_seen all = {0};
    assert_int_equal(walk_pages(st, "old", 64, &all), 1);
    assert_int_equal(all.n, 0);
    assert_int_equal(walk_pages(st, "cur", 64, &all), 1);
    assert_int_equal(all.n, 3);
}

/* A purge in steps of at most 20 rows takes many steps (transactions) and leaves exactly
 * what one store_purge_before leaves on the same data (a second database). */
static void retention_in_steps(void **state)
{
    struct cf *f = *state;
    const int64_t day = 86400000;
    fill_for_steps(f->st);
    char target2[512];
    void *ctx2 = NULL;
    g_be->target_new(target2, sizeof(target2), &ctx2);
    struct store *one = cf_open(target2);
    fill_for_steps(one);

    uint64_t n_one = 0;
    assert_int_equal(store_purge_before(one, 5 * day, &n_one), SKP_OK);
    check_after_steps(one);

    uint64_t n_steps = 0, total = 0;
    bool done = false;
    while (!done) {
        uint64_t n = 0;
        assert_int_equal(store_purge_step(f->st, 5 * day, 20, &n, &done), SKP_OK);
        total += n;
        n_steps++;
        assert_true(n_steps < 1000);
    }
    /* 1,600 old snapshots at most 100 rows a step (a backend storing runs of snapshots
     * counts a run as a row: fewer steps there, never one) */
    assert_true(n_steps >= 5);
    assert_int_equal(total, n_one);
    check_after_steps(f->st);
    /* nothing left: one more step deletes nothing and is done */
    uint64_t n = 1;
    assert_int_equal(store_purge_step(f->st, 5 * day, 20, &n, &done), SKP_OK);
    assert_int_equal(n, 0);
    assert_true(done);
    store_close(one);
    g_be->target_free(ctx2);
}

/* ---- a connection lost for real (backends with a server) ---- */

static bool wait_usable(struct store *st, int seconds)
{
    char detail[128];
    struct timespec ts = {0, 50 * 1000 * 1000};
    for (int i = 0; i < seconds * 20; i++) {
        if (store_check(st, detail, sizeof(detail)) == SKP_OK)
            return true;
        nanosleep(&ts, NULL);
    }
    return false;
}

static void reconnect(void **state)
{
    struct cf *f = *state;
    if (!g_be->kill)
        skip();
    assert_int_equal(tu_add(f->st, "t", "s1", 0, 1000, "a,b"), SKP_OK);
    g_be->kill(f->st);
    /* the call that finds the connection gone fails and acknowledges nothing */
    char *fr[] = {"a", "c"};
    struct store_snapshot sn = {"t", "s1", 1001, 1, fr, 2, 0, 0};
    size_t dup = 0;
    assert_int_equal(store_insert_snapshots(f->st, &sn, 1, &dup), SKP_EIO);
    /* reconnected after the backoff: the batch goes through, the earlier one is there */
    assert_true(wait_usable(f->st, 30));
    assert_int_equal(store_insert_snapshots(f->st, &sn, 1, &dup), SKP_OK);
    assert_int_equal(dup, 0);
    struct samples sm = {0};
    assert_int_equal(store_scan_segment(f->st, "s1", 0, 5, sample_cb, &sm), SKP_OK);
    assert_int_equal(sm.n, 2);
    char txt[64];
    stack_text(f->st, sm.stack[1], txt, sizeof(txt));
    assert_string_equal(txt, "a,c");
}

/* ---- full disk / lost connection ---- */

static void failed_writes_keep_nothing_and_recover(void **state, enum fault fault)
{
    struct cf *f = *state;
    assert_int_equal(tu_add(f->st, "t", "s1", 0, 1000, "a,b"), SKP_OK);
    struct store_stats before = stats(f->st);
    g_be->fault(f->st, fault);
    enum { N = 200 };
    static char names[N][300];
    char *frames[N][2];
    struct store_snapshot v[N];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "frame_%d_%0250d", i, i);
        frames[i][0] = "a";
        frames[i][1] = names[i];
        v[i] = (struct store_snapshot){"t", "s2", 2000 + i, i, frames[i], 2, 0, 0};
    }
    size_t dup = 0;
    assert_int_equal(store_insert_snapshots(f->st, v, N, &dup), SKP_EIO);
    struct store_span sp = {.start_ms = 1, .end_ms = 2, .operation = names[0]};
    struct store_segment sg = {"s2", "tr", "svc", "i", &sp, 1};
    if (fault == FAULT_LOST) {
        assert_int_equal(store_insert_segments(f->st, &sg, 1, 5), SKP_EIO);
        struct store_task t = task("x", "svc", "/e", 1, 1, 1);
        assert_int_not_equal(store_insert_task(f->st, &t), SKP_OK);
    }
    /* nothing of the failed batch is visible */
    struct store_stats mid = stats(f->st);
    assert_int_equal(mid.snapshots, before.snapshots);
    assert_int_equal(mid.frames, before.frames);
    assert_int_equal(mid.stacks, before.stacks);
    struct samples sm = {0};
    assert_int_equal(store_scan_segment(f->st, "s2", 0, N, sample_cb, &sm), SKP_OK);
    assert_int_equal(sm.n, 0);

    /* the store recovers: the retried batch goes through whole, with no stale cached ids */
    g_be->fault(f->st, FAULT_NONE);
    assert_int_equal(store_insert_snapshots(f->st, v, N, &dup), SKP_OK);
    assert_int_equal(dup, 0);
    assert_int_equal(store_insert_segments(f->st, &sg, 1, 5), SKP_OK);
    assert_int_equal(stats(f->st).snapshots, before.snapshots + N);
    memset(&sm, 0, sizeof(sm));
    assert_int_equal(store_scan_segment(f->st, "s2", 7, 7, sample_cb, &sm), SKP_OK);
    assert_int_equal(sm.n, 1);
    char txt[400];
    stack_text(f->st, sm.stack[0], txt, sizeof(txt));
    assert_string_equal(txt + 2, names[7]);
    cf_reopen(f);
    assert_int_equal(stats(f->st).snapshots, before.snapshots + N);
}

static void full_disk(void **state)
{
    failed_writes_keep_nothing_and_recover(state, FAULT_FULL);
}

static void lost_connection(void **state)
{
    failed_writes_keep_nothing_and_recover(state, FAULT_LOST);
}

int main(int argc, char **argv)
{
    const char *name = argc > 1 ? argv[1] : "sqlite";
    if (getenv("SKP_TEST_LOG")) /* the store's log lines on stderr, to debug a failing case */
        skpx_log_set_sink(skpx_log_sink_fd, (void *)(intptr_t)2, SKPX_LOG_DEBUG);
    for (size_t i = 0; i < SKP_ARRAY_LEN(k_backends); i++)
        if (strcmp(k_backends[i].name, name) == 0)
            g_be = &k_backends[i];
    if (!g_be) {
        fprintf(stderr, "unknown backend %s\n", name);
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(tasks, cf_setup, cf_teardown),
        cmocka_unit_test_setup_teardown(task_logs, cf_setup, cf_teardown),
        cmocka_unit_test_setup_teardown(task_cancel, cf_setup, cf_teardown),
        cmocka_unit_test_setup_teardown(services_and_instances, cf_setup, cf_teardown),
        cmocka_unit_test_setup_teardown(snapshots_dedup_and_order, cf_setup, cf_teardown),
        cmocka_unit_test_setup_teardown(snapshot_weights, cf_setup, cf_teardown),
        cmocka_unit_test_setup_teardown(segments, cf_setup, cf_teardown),
        cmocka_unit_test_setup_teardown(segment_pages, cf_setup, cf_teardown),
        cmocka_unit_test_setup_teardown(listing_under_racing_writers, cf_setup, cf_teardown),
        cmocka_unit_test_setup_teardown(pg_listing_migration_and_plan, cf_setup, cf_teardown),
        cmocka_unit_test_setup_teardown(pg_listing_long_ids, cf_setup, cf_teardown),
        cmocka_unit_test_setup_teardown(endpoint_minutes, cf_setup, cf_teardown),
        cmocka_unit_test_setup_teardown(templates, cf_setup, cf_teardown),
        cmocka_unit_test_setup_teardown(ebpf, cf_setup, cf_teardown),
        cmocka_unit_test_setup_teardown(cont_policies, cf_setup, cf_teardown),
        cmocka_unit_test_setup_teardown(proc_tasks, cf_setup, cf_teardown),
        cmocka_unit_test_setup_teardown(retention, cf_setup, cf_teardown),
        cmocka_unit_test_setup_teardown(retention_of_triggers, cf_setup, cf_teardown),
        cmocka_unit_test_setup_teardown(restart, cf_setup, cf_teardown),
        cmocka_unit_test_setup_teardown(concurrent_writers, cf_setup, cf_teardown),
        cmocka_unit_test_setup_teardown(racing_task_creators, cf_setup, cf_teardown),
        cmocka_unit_test_setup_teardown(purge_by_another_writer, cf_setup, cf_teardown),
        cmocka_unit_test_setup_teardown(retention_in_steps, cf_setup, cf_teardown),
        cmocka_unit_test_setup_teardown(reconnect, cf_setup, cf_teardown),
        cmocka_unit_test_setup_teardown(full_disk, cf_setup, cf_teardown),
        cmocka_unit_test_setup_teardown(lost_connection, cf_setup, cf_teardown),
    };
    return cmocka_run_group_tests_name(g_be->name, tests, NULL, NULL);
}
