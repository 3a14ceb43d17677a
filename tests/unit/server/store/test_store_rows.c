/* test_store_rows.c - the row descriptions (store_rows.h): every column list the SQL uses names
 * the columns of its description in order, with as many placeholders as bound columns; and a
 * row of every column type goes through each backend's bind and read unchanged (SQLite: a
 * statement of an in-memory database; PostgreSQL: the text parameters, and a result built with
 * libpq's PQsetvalue, no server). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "server/store/postgres/store_pg_int.h"
#include "server/store/sqlite/store_int.h"
#include "server/store/store_rows.h"

/* ---- the lists ---- */

struct list {
    const struct store_row_desc *d;
    const char *cols; /* the INSERT's column list */
    const char *read; /* the SELECT's list */
    const char *sq;   /* SQLite VALUES */
    const char *pg;   /* PostgreSQL VALUES */
};

#define LIST(d, p)                                                                                 \
    {                                                                                              \
        &d, p##_COLS, p##_READ, p##_SQ, p##_PG                                                     \
    }
static const struct list lists[] = {
    LIST(store_task_row, STORE_TASK),
    LIST(store_proc_task_row, STORE_PROC_TASK),
    LIST(store_proc_log_row, STORE_PROC_LOG),
    LIST(store_proc_file_row, STORE_PROC_FILE),
    LIST(store_task_log_row, STORE_TASK_LOG),
    {&store_service_row, "", STORE_SERVICE_READ, "", ""},
    LIST(store_ebpf_process_row, STORE_EBPF_PROCESS),
    {&store_ebpf_stack_row, STORE_EBPF_STACK_COLS, STORE_EBPF_STACK_COLS, STORE_EBPF_STACK_SQ,
     STORE_EBPF_STACK_PG},
    {&store_ebpf_sum_row, "", STORE_EBPF_SUM_READ, "", ""},
    LIST(store_endpoint_minute_row, STORE_ENDPOINT_MINUTE),
    LIST(store_cont_policy_row, STORE_CONT_POLICY),
    LIST(store_cont_trigger_row, STORE_CONT_TRIGGER),
    LIST(store_cont_cause_row, STORE_CONT_CAUSE),
    LIST(store_segment_row, STORE_SEGMENT),
    LIST(store_template_row, STORE_TEMPLATE),
    {&store_proc_instance_row, STORE_PROC_INSTANCE_COLS, STORE_PROC_INSTANCE_COLS,
     STORE_PROC_INSTANCE_SQ, STORE_PROC_INSTANCE_PG},
    {&store_proc_piece_row, STORE_PROC_PIECE_COLS, STORE_PROC_PIECE_COLS, STORE_PROC_PIECE_SQ,
     STORE_PROC_PIECE_PG},
    {&store_segment_info_row, "", STORE_SEGMENT_INFO_READ, "", ""},
    {&store_instance_text_row, "", STORE_INSTANCE_READ, "", ""},
};

/* "a, b, c" of the columns (bound_only: those an insert binds). */
static void join(const struct store_row_desc *d, bool bound_only, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < d->n_cols; i++) {
        if (bound_only && (d->cols[i].flags & STORE_COL_READ))
            continue;
        len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? ", " : "", d->cols[i].name);
        assert_true(len < cap);
    }
}

static void test_lists_name_the_columns(void **state)
{
    (void)state;
    char buf[2048];
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
        const struct list *l = &lists[i];
        join(l->d, true, buf, sizeof(buf));
        assert_string_equal(buf, l->cols);
        join(l->d, false, buf, sizeof(buf));
        assert_string_equal(buf, l->read);
        size_t n = store_row_n_bound(l->d);
        size_t len = 0;
        buf[0] = '\0';
        for (size_t k = 0; k < n; k++)
            len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s?", k ? ", " : "");
        assert_string_equal(buf, l->sq);
        len = 0;
        for (size_t k = 0; k < n; k++)
            len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s$%zu", k ? ", " : "", k + 1);
        assert_string_equal(buf, l->pg);
    }
}

/* ---- a row of every type ---- */

struct every {
    const char *text;
    const char *maybe; /* nullable */
    const char *empty; /* NULL written as "" */
    int64_t big;
    int32_t small;
    bool flag;
    int kind;
    const uint8_t *blob;
    size_t blob_len;
    double ratio;
    int64_t computed; /* read only */
};

static const char *const kinds[] = {"zero", "one", "two"};
static const struct store_col every_cols[] = {
    {"text", STORE_COL_TEXT, 0, offsetof(struct every, text), 0, NULL, 0},
    {"maybe", STORE_COL_TEXT, STORE_COL_NULLABLE, offsetof(struct every, maybe), 0, NULL, 0},
    {"empty", STORE_COL_TEXT, STORE_COL_EMPTY, offsetof(struct every, empty), 0, NULL, 0},
    {"big", STORE_COL_INT64, 0, offsetof(struct every, big), 0, NULL, 0},
    {"small", STORE_COL_INT32, 0, offsetof(struct every, small), 0, NULL, 0},
    {"flag", STORE_COL_BOOL, 0, offsetof(struct every, flag), 0, NULL, 0},
    {"kind", STORE_COL_NAME, 0, offsetof(struct every, kind), 0, kinds, 3},
    {"blob", STORE_COL_BLOB, 0, offsetof(struct every, blob), offsetof(struct every, blob_len),
     NULL, 0},
    {"ratio", STORE_COL_DOUBLE, 0, offsetof(struct every, ratio), 0, NULL, 0},
    {"big + 1", STORE_COL_INT64, STORE_COL_READ, offsetof(struct every, computed), 0, NULL, 0},
};

static void every_cleanup(void *row)
{
    struct every *e = row;
    skpx_free((void *)e->text);
    skpx_free((void *)e->maybe);
    skpx_free((void *)e->empty);
    skpx_free((void *)e->blob);
}

static const struct store_row_desc every_row = {
    "every",
    sizeof(struct every),
    every_cleanup,
    every_cols,
    sizeof(every_cols) / sizeof(every_cols[0]),
};

static const uint8_t bytes[] = {0, 1, 0xfe, 0xff, 'x'};

static void assert_same(const struct every *got, const struct every *want)
{
    assert_string_equal(got->text, want->text);
    if (want->maybe)
        assert_string_equal(got->maybe, want->maybe);
    else
        assert_null(got->maybe);
    assert_string_equal(got->empty, want->empty ? want->empty : "");
    assert_int_equal(got->big, want->big);
    assert_int_equal(got->small, want->small);
    assert_int_equal(got->flag, want->flag);
    assert_int_equal(got->kind, want->kind);
    assert_int_equal(got->blob_len, want->blob_len);
    if (want->blob_len)
        assert_memory_equal(got->blob, want->blob, want->blob_len);
    assert_true(got->ratio == want->ratio); /* exact: %.17g round-trips a double */
    assert_int_equal(got->computed, want->big + 1);
}

static const struct every rows[] = {
    {"héllo", "there", "e", INT64_MIN + 1, -7, true, 2, bytes, sizeof(bytes), 0.1, 0},
    {"", NULL, NULL, INT64_MAX - 1, INT32_MAX, false, 0, NULL, 0, -1.0 / 3.0, 0},
};

static void test_sqlite_bind_and_read(void **state)
{
    (void)state;
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(":memory:", &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "CREATE TABLE t(text TEXT NOT NULL, maybe TEXT, empty TEXT NOT "
                                  "NULL, big INTEGER, small INTEGER, flag INTEGER, kind TEXT, "
                                  "blob BLOB NOT NULL, ratio REAL)",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_stmt *ins = NULL;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "INSERT INTO t(text, maybe, empty, big, small, flag, "
                                        "kind, blob, ratio) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                        -1, &ins, NULL),
                     SQLITE_OK);
    /* the same statement, rebound: a NULL after a value must be bound NULL again */
    for (size_t i = 0; i < 2; i++) {
        sqlite3_reset(ins);
        assert_int_equal(store__bind_row(ins, 1, &every_row, &rows[i]), 10);
        assert_int_equal(sqlite3_step(ins), SQLITE_DONE);
    }
    sqlite3_finalize(ins);
    sqlite3_stmt *sel = NULL;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT 42, text, maybe, empty, big, small, flag, kind, "
                                        "blob, ratio, big + 1 FROM t ORDER BY rowid",
                                        -1, &sel, NULL),
                     SQLITE_OK);
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(sqlite3_step(sel), SQLITE_ROW);
        struct every got;
        assert_int_equal(store__read_row(sel, 1, &every_row, &got, false), SKP_OK);
        assert_same(&got, &rows[i]);
        assert_int_equal(store__read_row(sel, 1, &every_row, &got, true), SKP_OK);
        assert_same(&got, &rows[i]);
        assert_non_null(got.blob); /* owned, even empty */
        every_cleanup(&got);
    }
    sqlite3_finalize(sel);
    sqlite3_close(db);
}

static void test_pg_bind_and_read(void **state)
{
    (void)state;
    for (size_t i = 0; i < 2; i++) {
        struct pg_params p = {0};
        pgp_row(&p, &every_row, &rows[i]);
        assert_true(pgp_ok(&p));
        assert_int_equal(p.n, 9);
        /* a result of the values the server would send back for them */
        PGresult *r = PQmakeEmptyPGresult(NULL, PGRES_TUPLES_OK);
        PGresAttDesc att[10];
        memset(att, 0, sizeof(att));
        for (int k = 0; k < 10; k++)
            att[k].name = (char *)"c";
        assert_true(PQsetResultAttrs(r, 10, att));
        char big1[32];
        snprintf(big1, sizeof(big1), "%" PRId64, rows[i].big + 1);
        const char *vals[10] = {p.v[0], p.v[1], p.v[2], p.v[3], p.v[4], rows[i].flag ? "t" : "f",
                                p.v[6], p.v[7], p.v[8], big1};
        for (int k = 0; k < 10; k++)
            assert_true(PQsetvalue(r, 0, k, (char *)vals[k], vals[k] ? (int)strlen(vals[k]) : -1));
        assert_string_equal(p.v[5], rows[i].flag ? "true" : "false");
        assert_string_equal(p.v[6], kinds[rows[i].kind]);
        struct every got;
        assert_int_equal(pg__read_row(r, 0, 0, &every_row, &got, true), SKP_OK);
        assert_same(&got, &rows[i]);
        every_cleanup(&got);
        assert_int_equal(pg__read_row(r, 0, 0, &every_row, &got, false), SKP_OK);
        assert_same(&got, &rows[i]);
        PQclear(r);
        pgp_free(&p);
    }
}

/* A text column both NULLABLE and EMPTY reads "" as NULL, as it reads SQL NULL (a segment
 * info's trace id and endpoint); a plain NULLABLE one keeps "". */
struct opt_text {
    char *s;
};
static const struct store_col opt_cols[] = {
    {"s", STORE_COL_TEXT, STORE_COL_READ | STORE_COL_NULLABLE | STORE_COL_EMPTY,
     offsetof(struct opt_text, s), 0, NULL, 0},
};
static const struct store_row_desc opt_row = {"opt", sizeof(struct opt_text), NULL, opt_cols, 1};
static const struct store_row_desc maybe_row = {"maybe", sizeof(struct every), NULL, &every_cols[1],
                                                1};

static void test_empty_reads_as_null(void **state)
{
    (void)state;
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(":memory:", &db), SQLITE_OK);
    sqlite3_stmt *sel = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT NULL, '', 'x'", -1, &sel, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(sel), SQLITE_ROW);
    for (int own = 0; own < 2; own++) {
        struct opt_text got;
        assert_int_equal(store__read_row(sel, 0, &opt_row, &got, own), SKP_OK);
        assert_null(got.s);
        assert_int_equal(store__read_row(sel, 1, &opt_row, &got, own), SKP_OK);
        assert_null(got.s);
        assert_int_equal(store__read_row(sel, 2, &opt_row, &got, own), SKP_OK);
        assert_string_equal(got.s, "x");
        if (own)
            store_row_cleanup(&opt_row, &got);
    }
    struct every e;
    assert_int_equal(store__read_row(sel, 1, &maybe_row, &e, false), SKP_OK);
    assert_string_equal(e.maybe, "");
    sqlite3_finalize(sel);
    sqlite3_close(db);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists_name_the_columns),
        cmocka_unit_test(test_sqlite_bind_and_read),
        cmocka_unit_test(test_pg_bind_and_read),
        cmocka_unit_test(test_empty_reads_as_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
