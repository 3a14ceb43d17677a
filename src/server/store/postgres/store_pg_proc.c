/* store_pg_proc.c - PostgreSQL backend of store_proc.h: proc_tasks, proc_task_instances,
 * proc_task_logs, proc_files (the feature step of store_pg_schema.c) and proc_file_pieces (the
 * pieces step). As in SQLite, a file is a row hidden until complete and its bytea pieces, each
 * written in a statement of its own; the row is shown in the transaction that logs its upload,
 * so it is listed with its EXECUTION_FINISHED log or not at all. Files stored before the pieces
 * step keep their bytes in proc_files.data. A second NOTIFIED of a task and instance, from any
 * collector, is ignored by a partial unique index (ON CONFLICT DO NOTHING). */
#include "server/store/store_proc.h"

#include <string.h>

#include "common/alloc.h"
#include "common/grow.h"
#include "server/store/postgres/store_pg_bytea.h"
#include "server/store/postgres/store_pg_int.h"

skp_err pg_store_proc_insert_task(struct store *base, const struct proc_task *t)
{
    struct pg_store *st = pg_store_of(base);
    skp_err err = pg__begin(st);
    if (err)
        return err;
    err = pg__insert_row(st,
                         "INSERT INTO proc_tasks(" STORE_PROC_TASK_COLS ") "
                         "VALUES(" STORE_PROC_TASK_PG ")",
                         &store_proc_task_row, t, "insert proc task");
    for (size_t i = 0; i < t->n_instances && !err; i++) {
        const struct store_proc_instance_row row = {t->id, t->instances[i]};
        err = pg__insert_row(st,
                             "INSERT INTO proc_task_instances(" STORE_PROC_INSTANCE_COLS ") "
                             "VALUES(" STORE_PROC_INSTANCE_PG ") ON CONFLICT DO NOTHING",
                             &store_proc_instance_row, &row, "insert proc task instance");
    }
    return pg__finish(st, err);
}

/* ---------------------------------------------------------------- logs */

static skp_err insert_log(struct pg_store *st, const char *task_id, const char *instance,
                          const char *op, int64_t time_ms, const char *message)
{
    const struct proc_log l = {(char *)instance, (char *)op, time_ms, (char *)message};
    struct pg_params p = {0};
    pgp_row(&p, &store_proc_log_row, &l);
    pgp_text(&p, task_id);
    skp_err err = SKP_OK;
    PGresult *r = pg__query(st,
                            "INSERT INTO proc_task_logs(" STORE_PROC_LOG_COLS ", task_id) "
                            "VALUES(" STORE_PROC_LOG_PG ", $5) ON CONFLICT DO NOTHING",
                            &p, &err, "insert proc task log");
    PQclear(r);
    return err;
}

skp_err pg_store_proc_cancel_task(struct store *base, const char *id, int64_t now_ms,
                                  int64_t grace_ms)
{
    if (!id)
        return SKP_EINVAL;
    struct pg_params p = {0};
    pgp_text(&p, id);
    pgp_int(&p, now_ms);
    pgp_int(&p, grace_ms);
    return pg__cancel(pg_store_of(base),
                      "UPDATE proc_tasks SET cancelled_ms = $2 WHERE id = $1 AND "
                      "cancelled_ms IS NULL AND create_time + duration_s * 1000 + $3 >= $2",
                      "SELECT 1 FROM proc_tasks WHERE id = $1", id, &p, false,
                      "cancel process task");
}

skp_err pg_store_proc_add_log(struct store *base, const char *task_id, const char *instance,
                              const char *op, int64_t time_ms, const char *message)
{
    struct pg_store *st = pg_store_of(base);
    skp_err err = pg__ready(st);
    if (err)
        return err;
    return insert_log(st, task_id, instance, op, time_ms, message);
}

/* ---------------------------------------------------------------- files */

skp_err pg_store_proc_file_begin(struct store *base, const char *task_id, const char *instance,
                                 int64_t time_ms, size_t size, int64_t *id_out)
{
    struct pg_store *st = pg_store_of(base);
    const struct proc_file f = {0, (char *)instance, time_ms, (int64_t)size};
    struct pg_params p = {0};
    pgp_row(&p, &store_proc_file_row, &f);
    pgp_text(&p, task_id);
    skp_err err = SKP_OK;
    *id_out = pg__query_id(st,
                           "INSERT INTO proc_files(" STORE_PROC_FILE_COLS ", task_id, data, "
                           "complete) VALUES(" STORE_PROC_FILE_PG ", $4, ''::bytea, false) "
                           "RETURNING id",
                           &p, &err, "insert proc file");
    return err;
}

skp_err pg_store_proc_file_append(struct store *base, int64_t id, int seq, const uint8_t *data,
                                  size_t len)
{
    const struct store_proc_piece_row piece = {id, seq, data, len};
    return pg__insert_row(pg_store_of(base),
                          "INSERT INTO proc_file_pieces(" STORE_PROC_PIECE_COLS ") "
                          "VALUES(" STORE_PROC_PIECE_PG ")",
                          &store_proc_piece_row, &piece, "insert proc file piece");
}

skp_err pg_store_proc_file_finish(struct store *base, const char *task_id, const char *instance,
                                  int64_t id, int64_t time_ms, const char *op)
{
    struct pg_store *st = pg_store_of(base);
    skp_err err = pg__begin(st);
    if (err)
        return err;
    struct pg_params p = {0};
    pgp_int(&p, id);
    PGresult *r = pg__query(st, "UPDATE proc_files SET complete = true WHERE id = $1", &p, &err,
                            "show proc file");
    if (r && strcmp(PQcmdTuples(r), "1") != 0)
        err = SKP_ENOTFOUND;
    PQclear(r);
    if (!err && op)
        err = insert_log(st, task_id, instance, op, time_ms, NULL);
    return pg__finish(st, err);
}

skp_err pg_store_proc_file_abort(struct store *base, int64_t id)
{
    struct pg_store *st = pg_store_of(base);
    struct pg_params p = {0};
    pgp_int(&p, id);
    skp_err err = SKP_OK;
    /* The pieces go with the row (ON DELETE CASCADE). */
    PQclear(pg__query(st, "DELETE FROM proc_files WHERE id = $1", &p, &err, "delete proc file"));
    return err;
}

/* The pieces of file `id` in order, `size` bytes in all, into a new buffer. */
static skp_err read_pieces(struct pg_store *st, int64_t id, size_t size, uint8_t **out)
{
    struct pg_params p = {0};
    pgp_int(&p, id);
    skp_err err = SKP_OK;
    PGresult *r = pg__query(st, "SELECT data FROM proc_file_pieces WHERE file_id = $1 ORDER BY seq",
                            &p, &err, "read file pieces");
    if (!r)
        return err;
    uint8_t *buf = skpx_malloc(size ? size : 1);
    size_t n = 0;
    if (!buf)
        err = SKP_ENOMEM;
    for (int i = 0; !err && i < PQntuples(r); i++) {
        uint8_t *piece = NULL;
        size_t k = 0;
        err = pg_bytea_decode(pg__txt(r, i, 0), &piece, &k);
        if (!err && k > size - n)
            err = SKP_EIO;
        if (!err) {
            memcpy(buf + n, piece, k);
            n += k;
        }
        skpx_free(piece);
    }
    PQclear(r);
    if (!err && n != size)
        err = SKP_EIO;
    if (err) {
        skpx_free(buf);
        return err;
    }
    *out = buf;
    return SKP_OK;
}

skp_err pg_store_proc_get_file(struct store *base, const char *task_id, int64_t id, uint8_t **data,
                               size_t *len, char **instance_out)
{
    struct pg_store *st = pg_store_of(base);
    *data = NULL;
    *len = 0;
    if (instance_out)
        *instance_out = NULL;
    skp_err err = SKP_OK;
    struct pg_params p = {0};
    pgp_int(&p, id);
    pgp_text(&p, task_id);
    PGresult *r = pg__query(st,
                            "SELECT data, instance, size FROM proc_files WHERE id = $1 AND "
                            "task_id = $2 AND complete",
                            &p, &err, "read proc file");
    if (!r)
        return err;
    if (PQntuples(r) == 0) {
        PQclear(r);
        return SKP_ENOTFOUND;
    }
    uint8_t *buf = NULL;
    size_t n = 0;
    int64_t size = pg__i64(r, 0, 2);
    err = pg_bytea_decode(pg__txt(r, 0, 0), &buf, &n);
    char *inst = NULL;
    if (!err && instance_out) {
        inst = skpx_strdup(pg__txt(r, 0, 1));
        if (!inst)
            err = SKP_ENOMEM;
    }
    PQclear(r);
    if (!err && n == 0 && size > 0) { /* stored in pieces */
        skpx_free(buf);
        buf = NULL;
        n = (size_t)size;
        err = read_pieces(st, id, n, &buf);
    }
    if (err) {
        skpx_free(buf);
        skpx_free(inst);
        return err;
    }
    *data = buf;
    *len = n;
    if (instance_out)
        *instance_out = inst;
    return SKP_OK;
}
